//! Owned reads (`OrbBuilder::owned_reads`): a leader that waits in its only connection's
//! `recv` instead of polling. Replies still reach the right callers, and what the owning
//! leader does not hear while it waits (a second connection, a stalled peer, shutdown) is
//! heard after a bounded wait, never not at all. No test here times anything: a leader that
//! never came back from `recv` would hang them, which `within` turns into a failure.

mod hostile_common;

use hostile_common::echo_request;
use orb_tests::orbtest::{
    Balance, EchoClient, EchoSkeleton, EchoWithdrawError, Payload, SleepReply, SleepRequest,
    WithdrawRequest,
};
use orb_tests::{activate_echo, payload, within, Gate};
use std::io::Write;
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

/// `threads` callers × `calls` echo calls over one connection, each reply checked against
/// its call; returns (client, server) owned reads.
fn many_callers_one_connection(owned: bool, threads: u32, calls: u32) -> (u64, u64) {
    let server = protorb::Orb::builder()
        .threads(2)
        .owned_reads(owned)
        .build()
        .unwrap();
    let (_s, r) = activate_echo(&server);
    let client_orb = protorb::Orb::builder()
        .threads(0)
        .no_listen()
        .owned_reads(owned)
        .build()
        .unwrap();
    let client = Arc::new(EchoClient::new(&client_orb, r));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let client = client.clone();
            std::thread::spawn(move || {
                for c in 0..calls {
                    let data = payload(t, c, (c as usize * 37) % 3000);
                    let reply = client
                        .echo(Payload {
                            thread: t,
                            call: c,
                            data: data.clone(),
                        })
                        .unwrap_or_else(|e| panic!("thread {t} call {c}: {e}"));
                    assert_eq!((reply.thread, reply.call), (t, c), "reply for another call");
                    assert!(reply.data == data, "payload mixed up at {t}/{c}");
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let (cs, ss) = (client_orb.stats(), server.stats());
    assert_eq!(cs.connections_opened, 1);
    assert_eq!(cs.replies_received, u64::from(threads * calls));
    client_orb.shutdown();
    server.shutdown();
    (cs.owned_reads, ss.owned_reads)
}

/// One caller, then eight, over the only connection: both sides read it as owners, and
/// every reply reaches its caller (the owner routes the others' replies as a leader would).
#[test]
fn callers_over_the_only_connection_are_served_by_owned_reads() {
    within(120, || {
        let (client, server) = many_callers_one_connection(true, 1, 500);
        assert!(client > 0, "the client never owned its connection");
        assert!(server > 0, "the server never owned its connection");
        let (client, server) = many_callers_one_connection(true, 8, 300);
        assert!(client > 0 && server > 0, "no owned reads with 8 callers");
    });
}

/// Switched off, no read is an owned one, and the calls are served as before.
#[test]
fn owned_reads_off_means_the_leader_always_polls() {
    within(120, || {
        assert_eq!(many_callers_one_connection(false, 4, 200), (0, 0));
    });
}

/// An echo servant whose `Sleep` waits at its gate until the test opens it (or the call is
/// cancelled): a reply that comes only when the test says so, with no clock involved.
#[derive(Clone)]
struct GateServant(Arc<Gate>);

impl orb_tests::orbtest::Echo for GateServant {
    fn echo(&self, _ctx: &protorb::Context, req: Payload) -> Result<Payload, protorb::Exception> {
        Ok(req)
    }

    fn sleep(
        &self,
        ctx: &protorb::Context,
        _req: SleepRequest,
    ) -> Result<SleepReply, protorb::Exception> {
        let passed = self.0.wait_unless(|| ctx.is_cancelled());
        Ok(SleepReply { cancelled: !passed })
    }

    fn panic(&self, _ctx: &protorb::Context, _req: ()) -> Result<(), protorb::Exception> {
        Ok(())
    }

    fn notify(&self, _ctx: &protorb::Context, _req: Payload) -> Result<(), protorb::Exception> {
        Ok(())
    }

    fn withdraw(
        &self,
        _ctx: &protorb::Context,
        _req: WithdrawRequest,
    ) -> Result<Balance, EchoWithdrawError> {
        Ok(Balance { amount: 0 })
    }
}

fn gated_server() -> (protorb::Orb, Arc<Gate>, protorb::ObjectRef) {
    let orb = protorb::Orb::builder().threads(2).build().unwrap();
    let gate = Gate::closed();
    let r = orb.activate(&b"gate"[..], EchoSkeleton::new(GateServant(gate.clone())));
    (orb, gate, r)
}

/// A caller leads and owns its only connection, waiting for a reply that does not come
/// until the test says so; meanwhile another thread of the same ORB opens a second
/// connection and calls through it. Its replies must be read (the owner's wait ends, and
/// with two connections the leader polls) before the first reply is let through: the
/// second caller's calls complete while the first is still waiting.
#[test]
fn a_connection_opened_while_another_is_owned_is_served() {
    within(120, || {
        let (server_a, gate, gated) = gated_server();
        let server_b = protorb::Orb::builder().threads(2).build().unwrap();
        let (_s, echo_b) = activate_echo(&server_b);
        let client_orb = protorb::Orb::builder()
            .threads(0)
            .no_listen()
            .build()
            .unwrap();
        let a = EchoClient::new(&client_orb, gated);
        // Warm the first connection, so that it is the only one and owned.
        for c in 0..50 {
            a.echo(Payload {
                thread: 0,
                call: c,
                data: vec![1; 10],
            })
            .unwrap();
        }
        assert!(client_orb.stats().owned_reads > 0);
        let waiting = std::thread::spawn(move || a.sleep(SleepRequest { millis: 0 }));
        // The gated call is in flight (the server holds it) before the second connection.
        while server_a.stats().requests_received < 51 {
            std::thread::sleep(Duration::from_millis(1));
        }
        let b = EchoClient::new(&client_orb, echo_b);
        for c in 0..200 {
            let data = payload(1, c, 100);
            let reply = b
                .echo(Payload {
                    thread: 1,
                    call: c,
                    data: data.clone(),
                })
                .unwrap_or_else(|e| panic!("call {c} over the second connection: {e}"));
            assert!(reply.call == c && reply.data == data, "wrong reply {c}");
        }
        assert!(
            !waiting.is_finished(),
            "the gated call returned before its gate opened"
        );
        gate.open();
        let r = waiting.join().unwrap().expect("the gated call");
        assert!(!r.cancelled);
        assert_eq!(client_orb.stats().connections_opened, 2);
        client_orb.shutdown();
        server_a.shutdown();
        server_b.shutdown();
    });
}

/// A caller's request stays in its upcall (the gate is closed) on a server that owns its
/// one connection and has taken it out of its poll set for the run (`Reactor::park`), and
/// more requests come over that same connection: the pool must serve them meanwhile, both
/// in tick mode (the standby's tick takes the vacant role, and its poll puts the connection
/// back) and without (the standby's arming puts it back).
fn requests_during_an_upcall_on_the_owned_connection_are_served(tick: Option<Duration>) {
    within(120, move || {
        let server = protorb::Orb::builder()
            .threads(2)
            .standby_tick(tick)
            .build()
            .unwrap();
        let gate = Gate::closed();
        let gated = server.activate(&b"gate"[..], EchoSkeleton::new(GateServant(gate.clone())));
        let client_orb = protorb::Orb::builder()
            .threads(0)
            .no_listen()
            .build()
            .unwrap();
        let stub = Arc::new(EchoClient::new(&client_orb, gated));
        // One call at a time, long enough for the pool to enter tick mode (64 unused arms).
        let warm = 300;
        for c in 0..warm {
            stub.echo(Payload {
                thread: 0,
                call: c,
                data: vec![1; 10],
            })
            .unwrap();
        }
        assert!(
            server.stats().owned_reads > 0,
            "the server never owned its connection"
        );
        let gated_call = {
            let stub = stub.clone();
            std::thread::spawn(move || stub.sleep(SleepRequest { millis: 0 }))
        };
        while server.stats().requests_received < u64::from(warm) + 1 {
            std::thread::sleep(Duration::from_millis(1));
        }
        for c in 0..50 {
            let data = payload(1, c, 100);
            let reply = stub
                .echo(Payload {
                    thread: 1,
                    call: c,
                    data: data.clone(),
                })
                .unwrap_or_else(|e| panic!("call {c} during the gated upcall: {e}"));
            assert!(reply.call == c && reply.data == data, "wrong reply {c}");
        }
        assert!(
            !gated_call.is_finished(),
            "the gated call returned before its gate opened"
        );
        gate.open();
        assert!(
            !gated_call
                .join()
                .unwrap()
                .expect("the gated call")
                .cancelled
        );
        assert_eq!(client_orb.stats().connections_opened, 1, "one connection");
        client_orb.shutdown();
        server.shutdown();
    });
}

#[test]
fn requests_during_an_upcall_on_the_owned_connection_are_served_in_tick_mode() {
    requests_during_an_upcall_on_the_owned_connection_are_served(Some(Duration::from_millis(10)));
}

#[test]
fn requests_during_an_upcall_on_the_owned_connection_are_served_without_tick_mode() {
    requests_during_an_upcall_on_the_owned_connection_are_served(None);
}

/// Shutdown while the leader owns a connection, waiting for a reply that will not come:
/// the waiting call ends (with an exception) and shutdown returns.
#[test]
fn shutdown_ends_an_owned_wait() {
    within(120, || {
        let (server, gate, gated) = gated_server();
        let client_orb = protorb::Orb::builder()
            .threads(0)
            .no_listen()
            .shutdown_grace(Duration::from_millis(100))
            .build()
            .unwrap();
        let a = EchoClient::new(&client_orb, gated);
        a.echo(Payload::default()).unwrap();
        let waiting = std::thread::spawn(move || a.sleep(SleepRequest { millis: 0 }));
        while server.stats().requests_received < 2 {
            std::thread::sleep(Duration::from_millis(1));
        }
        client_orb.shutdown();
        let r = waiting.join().unwrap();
        assert!(
            r.is_err(),
            "a call cut off by shutdown must fail, got {r:?}"
        );
        gate.open();
        server.shutdown();
    });
}

/// A peer that is the server's only connection, has been served (so the server's leader
/// owns its connection) and then stalls, with half a request sent: other clients that
/// connect meanwhile are accepted and served, every reply to its caller. The stalled
/// connection costs the leader one bounded wait, not the other clients' service.
#[test]
fn a_stalled_owned_peer_does_not_hold_other_clients() {
    within(120, || {
        let server = protorb::Orb::builder().threads(2).build().unwrap();
        let (_s, r) = activate_echo(&server);
        let port = server.listen_addrs()[0].port();
        let mut peer = TcpStream::connect(("127.0.0.1", port)).unwrap();
        for id in 1..=20 {
            peer.write_all(&echo_request(id, 16)).unwrap();
            let (kind, _) = hostile_common::read_frame(&mut peer, Duration::from_secs(30))
                .expect("a reply to the hostile peer's well-formed request");
            assert_eq!(kind, 1, "a Reply");
        }
        assert!(
            server.stats().owned_reads > 0,
            "the peer's connection was never owned"
        );
        // Half of a request, then silence.
        let half = echo_request(21, 64);
        peer.write_all(&half[..half.len() / 2]).unwrap();
        let handles: Vec<_> = (0..4u32)
            .map(|t| {
                let r = r.clone();
                std::thread::spawn(move || {
                    let orb = protorb::Orb::builder()
                        .threads(0)
                        .no_listen()
                        .build()
                        .unwrap();
                    let client = EchoClient::new(&orb, r);
                    for c in 0..200 {
                        let data = payload(t, c, 64);
                        let reply = client
                            .echo(Payload {
                                thread: t,
                                call: c,
                                data: data.clone(),
                            })
                            .unwrap_or_else(|e| panic!("client {t} call {c}: {e}"));
                        assert!(reply.call == c && reply.data == data, "wrong reply");
                    }
                    orb.shutdown();
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(server.stats().connections_accepted, 5);
        drop(peer);
        server.shutdown();
    });
}

/// A peer that is the server's only connection (so the leader owns it, and has taken it out
/// of its poll set for the run) asks for a reply far larger than the socket buffers and
/// stops reading for a while: the reply waits in the server's queue for the writable event,
/// which the writer asks for by putting the socket back into the poll set. Once the peer
/// reads again, the whole reply comes, and the connection serves calls as before. A lost
/// writable interest would leave the reply unsent: the read times out, `within` fails.
#[test]
fn a_large_reply_to_a_slow_reader_of_an_owned_connection_is_flushed() {
    /// Echoes a request's body, or answers a tiny one (a payload with no data) with 16 MiB:
    /// a large reply to a request that arrives whole in one read.
    struct BigReplies;
    impl protorb::Servant for BigReplies {
        fn repository_id(&self) -> &'static str {
            "IDL:test/BigReplies:1.0"
        }
        fn dispatch(
            &self,
            _op: &str,
            body: bytes::Bytes,
            _ctx: &protorb::Context,
        ) -> Result<bytes::Bytes, protorb::Exception> {
            if body.len() <= 4 {
                return Ok(bytes::Bytes::from(vec![7u8; 16 << 20]));
            }
            Ok(body)
        }
    }
    within(120, || {
        let server = protorb::Orb::builder().threads(2).build().unwrap();
        let _r = server.activate(&b"echo"[..], BigReplies);
        let port = server.listen_addrs()[0].port();
        let mut peer = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let call = |peer: &mut TcpStream, id: u32, len: usize, pause: Duration| {
            peer.write_all(&echo_request(id, len)).unwrap();
            std::thread::sleep(pause);
            let (kind, msg) = hostile_common::read_frame(peer, Duration::from_secs(60))
                .unwrap_or_else(|| panic!("no reply to request {id}"));
            assert_eq!(kind, 1, "a Reply");
            assert!(msg.len() > len, "reply {id} of {} bytes", msg.len());
        };
        for id in 1..=100 {
            call(&mut peer, id, 16, Duration::ZERO);
        }
        assert!(
            server.stats().owned_reads > 0,
            "the peer's connection was never owned"
        );
        // 16 MiB back for a tiny request, read only after a pause: more than the kernel
        // buffers hold.
        call(&mut peer, 101, 0, Duration::from_millis(300));
        for id in 102..=150 {
            call(&mut peer, id, 16, Duration::ZERO);
        }
        drop(peer);
        server.shutdown();
    });
}

/// An ORB that listens does not own a connection it opened (it expects callbacks, which may
/// come over a new connection while it waits), but a server owns its one client's
/// connection. A nested callback chain over two connections (each side calls the other back
/// through its listener) completes, every level on its way.
#[test]
fn a_listening_caller_does_not_own_its_outbound_connection() {
    within(120, || {
        let server = protorb::Orb::builder().threads(2).build().unwrap();
        let (_s, r) = activate_echo(&server);
        let client_orb = protorb::Orb::builder().threads(1).build().unwrap();
        assert!(!client_orb.listen_addrs().is_empty());
        let client = EchoClient::new(&client_orb, r);
        for c in 0..100 {
            let reply = client
                .echo(Payload {
                    thread: 0,
                    call: c,
                    data: vec![5; 32],
                })
                .unwrap();
            assert_eq!(reply.call, c);
        }
        assert_eq!(
            client_orb.stats().owned_reads,
            0,
            "a listening caller owned"
        );
        assert!(server.stats().owned_reads > 0, "the server never owned");
        client_orb.shutdown();
        server.shutdown();

        let a = protorb::Orb::builder().threads(1).build().unwrap();
        let b = protorb::Orb::builder().threads(1).build().unwrap();
        let a_ref = orb_tests::activate_node(&a, "a");
        let b_ref = orb_tests::activate_node(&b, "b");
        let reply = orb_tests::orbtest::NodeClient::new(&a, b_ref)
            .ping(orb_tests::orbtest::PingRequest {
                depth: 50,
                peer: Some(a_ref),
                sleep_micros: 0,
            })
            .unwrap();
        assert_eq!(reply.depth_reached, 50);
        a.shutdown();
        b.shutdown();
    });
}
