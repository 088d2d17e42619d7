//! A caller that reads its own connection for its reply (`OrbInner::read_own_reply`: a
//! client that does not listen, with its one connection idle) must serve whatever comes
//! before that reply as the pool's leader would: a request from the peer over the same
//! connection is answered, a reply nobody waits for is dropped and counted, and the caller
//! still gets its own reply, whether it has pool threads or not. The server is scripted on a
//! raw socket with the ORB's own codec.

mod hostile_common;

use bytes::{Bytes, BytesMut};
use hostile_common::{echo_request, octets_reply};
use orb_tests::within;
use protorb::giop::{Frame, GiopCodec, Message, ReplyStatus};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;
use tokio_util::codec::Decoder;

/// Reads from `s` until `pick` accepts a decoded message; panics on EOF.
fn read_until<T>(
    s: &mut TcpStream,
    codec: &mut GiopCodec,
    buf: &mut BytesMut,
    mut pick: impl FnMut(Message) -> Option<T>,
) -> T {
    let mut chunk = [0u8; 4096];
    loop {
        while let Some(Frame { message, .. }) = codec.decode(buf).unwrap() {
            if let Some(t) = pick(message) {
                return t;
            }
        }
        let n = s.read(&mut chunk).unwrap();
        assert!(n > 0, "client closed early");
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// The peer's script, per call of the client: before answering it, a request of its own
/// over the client's connection (object key `echo`, which the client does not serve) and a
/// reply to an id the client never sent (after the request once the client has answered it,
/// or before it, in turn), and only then the call's reply (`yours` and the call's number).
/// Returns the status of each answer the client gave to the peer's requests.
fn scripted_peer(listener: TcpListener, calls: u32) -> Vec<ReplyStatus> {
    let (mut s, _) = listener.accept().unwrap();
    let mut codec = GiopCodec::default();
    let mut buf = BytesMut::new();
    let mut answers = Vec::new();
    for call in 0..calls {
        let id = read_until(&mut s, &mut codec, &mut buf, |m| match m {
            Message::Request(r) => Some(r.header.request_id),
            _ => None,
        });
        // Odd ids: the peer's side of the connection (the client's are even).
        let theirs = 2 * call + 1;
        let stray = octets_reply(1_000_001 + 2 * call, b"stray");
        if call % 2 == 1 {
            // The stray reply first, the request behind it.
            s.write_all(&stray).unwrap();
        }
        s.write_all(&echo_request(theirs, 3)).unwrap();
        let status = read_until(&mut s, &mut codec, &mut buf, |m| match m {
            Message::Reply(r) if r.header.request_id == theirs => Some(r.header.status),
            _ => None,
        });
        answers.push(status);
        if call % 2 == 0 {
            s.write_all(&stray).unwrap();
        }
        s.write_all(&octets_reply(id, format!("yours {call}").as_bytes()))
            .unwrap();
    }
    answers
}

fn calls_answered_around_a_callback_and_a_stray_reply(threads: usize) {
    let (client, listener, proxy) = client_without_listener(threads);
    let calls = 20;
    let peer = std::thread::spawn(move || scripted_peer(listener, calls));
    for call in 0..calls {
        let out = call_mine(&proxy).unwrap_or_else(|e| panic!("call {call}: {e}"));
        assert_eq!(
            &out[..],
            format!("yours {call}").as_bytes(),
            "call {call} got another reply"
        );
    }
    let answers = peer.join().unwrap();
    // Every request of the peer was answered (an exception: no such object here).
    assert_eq!(answers.len(), calls as usize);
    assert!(
        answers.iter().all(|s| *s == ReplyStatus::SystemException),
        "{answers:?}"
    );
    let stats = client.stats();
    assert_eq!(stats.late_replies_dropped, u64::from(calls));
    assert_eq!(stats.replies_received, u64::from(calls));
    client.shutdown();
}

#[test]
fn a_caller_without_pool_threads_serves_what_precedes_its_reply() {
    within(120, || {
        calls_answered_around_a_callback_and_a_stray_reply(0)
    });
}

#[test]
fn a_caller_with_a_pool_thread_serves_what_precedes_its_reply() {
    within(120, || {
        calls_answered_around_a_callback_and_a_stray_reply(1)
    });
}

/// Accepts one connection and reads one request from it: the socket and the request's id.
fn accept_one_request(listener: &TcpListener) -> (TcpStream, u32) {
    let (mut s, _) = listener.accept().unwrap();
    let mut codec = GiopCodec::default();
    let mut buf = BytesMut::new();
    let id = read_until(&mut s, &mut codec, &mut buf, |m| match m {
        Message::Request(r) => Some(r.header.request_id),
        _ => None,
    });
    (s, id)
}

/// A client ORB that does not listen, with `threads` pool threads, and a proxy for an object
/// at the returned listener (the scripted peer's).
fn client_without_listener(threads: usize) -> (protorb::Orb, TcpListener, protorb::ObjectProxy) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let client = protorb::Orb::builder()
        .threads(threads)
        .no_listen()
        .build()
        .unwrap();
    let target = protorb::ObjectRef::new("IDL:orbtest/Echo:1.0", "127.0.0.1", port, &b"k"[..]);
    let proxy = protorb::ObjectProxy::new(&client, target);
    (client, listener, proxy)
}

/// One call of `Echo` with the payload `mine`.
fn call_mine(proxy: &protorb::ObjectProxy) -> Result<Bytes, protorb::Exception> {
    proxy.invoke(
        "Echo",
        Bytes::from_static(b"mine"),
        Some(Duration::from_secs(30)),
    )
}

/// A peer that closes instead of replying: the caller reading its own connection gets
/// COMM_FAILURE at once, not a hang and not a timeout.
#[test]
fn a_peer_that_closes_instead_of_replying_fails_the_call() {
    within(60, || {
        let (client, listener, proxy) = client_without_listener(0);
        let peer = std::thread::spawn(move || drop(accept_one_request(&listener)));
        let err = call_mine(&proxy).unwrap_err();
        assert_eq!(
            err.kind(),
            Some(protorb::SystemExceptionKind::COMM_FAILURE),
            "{err}"
        );
        peer.join().unwrap();
        client.shutdown();
    });
}

/// A reply that trickles in (its header split, then its body in two pieces, with pauses):
/// the caller's read gets part of a frame, the pool's loop the rest, and the caller its
/// reply.
#[test]
fn a_reply_that_trickles_in_reaches_its_caller() {
    within(60, || {
        let (client, listener, proxy) = client_without_listener(0);
        let peer = std::thread::spawn(move || {
            let (mut s, id) = accept_one_request(&listener);
            let frame = octets_reply(id, &[5u8; 300]);
            for piece in [&frame[..7], &frame[7..40], &frame[40..]] {
                std::thread::sleep(Duration::from_millis(30));
                s.write_all(piece).unwrap();
            }
            // Held open until the client is done with it.
            let mut rest = Vec::new();
            let _ = s.read_to_end(&mut rest);
        });
        let out = call_mine(&proxy).unwrap();
        assert_eq!(&out[..], &[5u8; 300][..]);
        client.shutdown();
        peer.join().unwrap();
    });
}
