//! Many threads over ONE connection: every reply reaches the right caller.

use orb_tests::orbtest::{EchoClient, Payload};
use orb_tests::{activate_echo, payload};
use std::sync::Arc;

fn rand_len(seed: u64) -> usize {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    x ^= x >> 29;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 32;
    (x % (64 * 1024)) as usize
}

#[test]
fn sixty_four_threads_share_one_connection() {
    let server = protorb::Orb::builder().threads(2).build().unwrap();
    let (_s, r) = activate_echo(&server);
    let client_orb = protorb::Orb::builder().threads(0).build().unwrap();
    let client = Arc::new(EchoClient::new(&client_orb, r));
    let threads: u32 = 64;
    let calls: u32 = std::env::var("ORB_TEST_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let client = client.clone();
            std::thread::Builder::new()
                .stack_size(8 << 20)
                .spawn(move || {
                    for c in 0..calls {
                        let len = rand_len(((t as u64) << 32) | c as u64);
                        let data = payload(t, c, len);
                        let reply = client
                            .echo(Payload {
                                thread: t,
                                call: c,
                                data: data.clone(),
                            })
                            .unwrap_or_else(|e| panic!("thread {t} call {c}: {e}"));
                        assert_eq!(
                            (reply.thread, reply.call),
                            (t, c),
                            "reply for another caller"
                        );
                        assert!(
                            reply.data == data,
                            "payload mixed up at thread {t} call {c}"
                        );
                    }
                })
                .unwrap()
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let cs = client_orb.stats();
    assert_eq!(
        cs.connections_opened, 1,
        "all threads must share one connection"
    );
    assert_eq!(server.stats().connections_accepted, 1);
    assert_eq!(cs.replies_received, u64::from(threads * calls));
    client_orb.shutdown();
    server.shutdown();
}

/// A thread that calls the same server through two ORBs in turn uses each ORB's own
/// connection (a thread remembers its last connection; that must not cross ORBs), and a
/// connection the server closed is not used again.
#[test]
fn one_thread_two_orbs_one_connection_each() {
    let server = protorb::Orb::builder().threads(1).build().unwrap();
    let (_s, r) = activate_echo(&server);
    let a = protorb::Orb::builder().threads(0).build().unwrap();
    let b = protorb::Orb::builder().threads(0).build().unwrap();
    let (ca, cb) = (EchoClient::new(&a, r.clone()), EchoClient::new(&b, r));
    for call in 0..20u32 {
        for (thread, c) in [(1, &ca), (2, &cb)] {
            let p = Payload {
                thread,
                call,
                data: payload(thread, call, 16),
            };
            assert_eq!(c.echo(p.clone()).unwrap(), p);
        }
    }
    for orb in [&a, &b] {
        let s = orb.stats();
        assert_eq!(
            (s.connections_opened, s.requests_sent, s.replies_received),
            (1, 20, 20)
        );
    }
    assert_eq!(server.stats().connections_accepted, 2);
    // The server goes away and another takes its port: the next call connects anew.
    b.shutdown();
    let port = server.listen_addrs()[0].port();
    server.shutdown();
    drop(server);
    let again = protorb::Orb::builder()
        .threads(1)
        .listen(format!("127.0.0.1:{port}"))
        .build()
        .unwrap();
    let _servant = activate_echo(&again);
    let p = Payload {
        thread: 1,
        call: 99,
        data: payload(1, 99, 16),
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let reply = loop {
        match ca.echo(p.clone()) {
            Ok(reply) => break reply,
            Err(e) if std::time::Instant::now() < deadline => {
                eprintln!("retrying after {e}");
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(e) => panic!("no reconnect: {e}"),
        }
    };
    assert_eq!(reply, p);
    assert_eq!(a.stats().connections_opened, 2);
    a.shutdown();
    again.shutdown();
}
