//! Issue 16, scenario 9: BiDir hijack. A peer that connects to a middle tier and announces a
//! backend's `host:port` as its BiDir listen point must not receive the middle tier's calls
//! to that backend: not before the middle tier's first connection to the backend, and not
//! after that connection dropped. Accepting listen points is off by default; with it on,
//! only references that arrived over the announcing connection are called over it.

mod hostile_common;

use bytes::{Bytes, BytesMut};
use hostile_common::wait_until;
use orb_tests::activate_echo;
use orb_tests::orbtest::{EchoClient, Payload};
use protorb::giop::{
    write_request, BiDirListenPoints, RequestHeader, ServiceContextList, TargetAddress, Version,
};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A peer that announces `host:port` as its listen point and records every byte it is sent.
struct Attacker {
    seen: Arc<Mutex<Vec<u8>>>,
    reader: std::thread::JoinHandle<()>,
    _stream: TcpStream,
}

impl Attacker {
    fn announce(middle: &protorb::Orb, host: &str, port: u16) -> Attacker {
        let mut s = TcpStream::connect(middle.listen_addrs()[0]).unwrap();
        let before = middle.stats().requests_received;
        s.write_all(&announcement(1, vec![(host.to_string(), port)]))
            .unwrap();
        wait_until(10, "the announcement is read", || {
            middle.stats().requests_received > before
        });
        let seen = Arc::new(Mutex::new(Vec::new()));
        let reader = {
            let (mut s, seen) = (s.try_clone().unwrap(), seen.clone());
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n @ 1..) = s.read(&mut buf) {
                    seen.lock().unwrap().extend_from_slice(&buf[..n]);
                }
            })
        };
        Attacker {
            seen,
            reader,
            _stream: s,
        }
    }

    /// Everything the middle tier sent, once it has closed the connection.
    fn received(self) -> Vec<u8> {
        self.reader.join().unwrap();
        std::mem::take(&mut *self.seen.lock().unwrap())
    }
}

/// A oneway request (the announcement is all it is for) carrying BiDir listen `points`.
fn announcement(request_id: u32, points: Vec<(String, u16)>) -> BytesMut {
    let mut ctx = ServiceContextList::default();
    ctx.0.push(BiDirListenPoints(points).to_context());
    let header = RequestHeader {
        deadline: None,
        request_id,
        response_flags: 0,
        target: TargetAddress::Key(Bytes::from_static(b"nobody").into()),
        operation: "op".into(),
        service_context: ctx,
    };
    let mut buf = BytesMut::new();
    write_request(&mut buf, Version::V1_2, &header, |w| w.write_octets(b""));
    buf
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// The middle tier calls the backend (a reference it got from the backend, not from the
/// attacker) with a secret, before and after its connection to the backend dropped, while
/// attackers announce the backend's address. Every call must reach the real backend.
fn scenario(accept: bool) {
    // The backend closes idle connections quickly, so that the middle tier's drops.
    let backend = protorb::Orb::builder()
        .threads(1)
        .idle_timeout(Some(Duration::from_millis(100)))
        .build()
        .unwrap();
    let (_, backend_ref) = activate_echo(&backend);
    let backend_addr = backend.listen_addrs()[0];
    let middle = protorb::Orb::builder()
        .threads(1)
        .bidir_accept(accept)
        .call_timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let host = backend_addr.ip().to_string();
    let client = EchoClient::new(&middle, backend_ref);
    let secret = |n: u8| Payload {
        thread: 7,
        call: u32::from(n),
        data: format!("secret-{n}-for-the-backend-only").into_bytes(),
    };

    // Before the middle tier has any connection to the backend.
    let first = Attacker::announce(&middle, &host, backend_addr.port());
    let reply = client.echo(secret(1)).expect("the backend answers");
    assert_eq!(reply, secret(1), "the reply is the backend's");

    // After the middle tier's connection to the backend dropped.
    wait_until(10, "the backend drops the idle connection", || {
        middle.stats().connections_open == 1 // the first attacker only
    });
    let second = Attacker::announce(&middle, &host, backend_addr.port());
    let reply = client.echo(secret(2)).expect("the backend answers");
    assert_eq!(reply, secret(2), "the reply is the backend's");

    let stats = middle.stats();
    middle.shutdown();
    backend.shutdown();
    for (i, a) in [first, second].into_iter().enumerate() {
        let got = a.received();
        for n in 1..=2 {
            assert!(
                !contains(&got, &secret(n).data),
                "attacker {i} received secret {n} (accept = {accept})"
            );
        }
    }
    // At least one connection per call (the second was made after the first dropped). More
    // is fine: on a loaded machine the backend's 100 ms idle sweep can close a connection
    // before its request goes out, and the call is then resent on a new one.
    assert!(
        stats.connections_opened >= 2,
        "both calls connected to the backend: {} connections",
        stats.connections_opened
    );
}

#[test]
fn announced_backend_address_receives_nothing_by_default() {
    scenario(false);
}

#[test]
fn announced_backend_address_receives_nothing_with_bidir_accept() {
    scenario(true);
}

/// A peer announcing ever new BiDir listen points cannot make the ORB hold more than the
/// per-connection bound, makes it open no connection, and closing its connection forgets
/// them.
#[test]
fn announced_listen_points_are_bounded_and_forgotten() {
    let orb = protorb::Orb::builder()
        .threads(1)
        .bidir_accept(true)
        .build()
        .unwrap();
    let mut s = TcpStream::connect(orb.listen_addrs()[0]).unwrap();
    for i in 0..50u16 {
        let points = (0..10)
            .map(|j| ("10.0.0.1".to_string(), i * 10 + j + 1))
            .collect();
        s.write_all(&announcement(u32::from(i) * 2, points))
            .unwrap();
    }
    wait_until(10, "the announcements are read", || {
        orb.stats().requests_received >= 50
    });
    let stats = orb.stats();
    assert_eq!(stats.bidir_listen_points, 16, "the per-connection bound");
    assert_eq!(stats.connections_opened, 0, "an announcement opens nothing");
    drop(s);
    wait_until(10, "the connection is closed", || {
        orb.stats().connections_open == 0
    });
    assert_eq!(
        orb.stats().bidir_listen_points,
        0,
        "forgotten with the connection"
    );
    orb.shutdown();
}
