//! Driving the event loop from the application's runtime (`Orb::turn`, `Orb::event_fd`,
//! `protorb::tokio::drive`): with `threads(0)` nothing but the driver reads the replies, so
//! every test here hangs (and its guard fails it) if a turn loses an event, a wake-up or a
//! timer. Replies carry payloads derived from their call, so a mix-up fails too.
//!
//! No assertion depends on timing: the timeouts are hang guards, far above what any step
//! needs on a loaded machine.

mod hostile_common;

use futures::future::join_all;
use hostile_common::octets_reply;
use orb_tests::orbtest::*;
use orb_tests::{activate_echo, activate_node, payload, within};
use protorb::{Orb, OrbBuilder, SystemExceptionKind};
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn msg(thread: u32, call: u32) -> Payload {
    sized_msg(thread, call, (call as usize * 37) % 3000)
}

fn sized_msg(thread: u32, call: u32, len: usize) -> Payload {
    Payload {
        thread,
        call,
        data: payload(thread, call, len),
    }
}

/// A server with two threads and an echo servant, and a client ORB with no threads of its
/// own (only a driver leads it) whose calls give up after 60 s, built from `client`.
fn driven_client(client: OrbBuilder) -> (Orb, Orb, EchoClient) {
    let server = Orb::builder().threads(2).build().unwrap();
    let (_, r) = activate_echo(&server);
    let client = client
        .threads(0)
        .no_listen()
        .call_timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let stub = EchoClient::new(&client, r);
    (server, client, stub)
}

/// A client ORB with no threads of its own and no idle sweep (so no timer but a call's
/// deadline wakes its driver), with a stub for key `echo` at a raw peer on local `port`.
fn driven_peer_client(port: u16) -> (Orb, EchoClient) {
    let client = Orb::builder()
        .threads(0)
        .no_listen()
        .idle_timeout(None)
        .build()
        .unwrap();
    let r = client
        .string_to_object(&format!("corbaloc::1.2@127.0.0.1:{port}/echo"))
        .unwrap();
    let stub = EchoClient::new(&client, r);
    (client, stub)
}

/// Many futures in flight on one connection, from several tasks of a current-thread
/// runtime, with the client ORB's event loop driven only by the driver task: every reply
/// reaches its own future.
#[test]
fn many_futures_driven_only_by_the_driver() {
    let server = Orb::builder().threads(2).build().unwrap();
    let (_, r) = activate_echo(&server);
    let client = Orb::builder().threads(0).no_listen().build().unwrap();
    let stub = EchoClient::new(&client, r);
    let c = client.clone();
    within(120, move || {
        current_thread().block_on(async move {
            let driver = tokio::spawn(protorb::tokio::drive(c.clone()));
            let tasks: Vec<_> = (0..8u32)
                .map(|t| {
                    let stub = stub.clone();
                    tokio::spawn(async move {
                        for round in 0..4u32 {
                            let calls: Vec<_> = (0..100u32)
                                .map(|i| stub.echo_async(msg(t, round * 100 + i)))
                                .collect();
                            for (i, r) in join_all(calls).await.into_iter().enumerate() {
                                let i = round * 100 + i as u32;
                                let got = r.unwrap_or_else(|e| panic!("call {t}/{i}: {e}"));
                                assert_eq!(got, msg(t, i), "reply of {t}/{i} mixed up");
                            }
                        }
                    })
                })
                .collect();
            for t in tasks {
                t.await.unwrap();
            }
            assert_eq!(c.stats().connections_opened, 1);
            c.shutdown();
            driver.await.unwrap().unwrap();
        })
    });
    drop(client);
    server.shutdown();
}

/// A → B → A → B: side A has no pool thread and is driven only by the driver. A task on A
/// awaits an asynchronous call to B, whose servant calls A back while that call is
/// outstanding; A's servant (run by a turn, on the runtime's thread) calls B again with a
/// blocking call. Nothing deadlocks and every level answers.
#[test]
fn nested_callback_into_a_driven_orb_does_not_deadlock() {
    let a = Orb::builder().threads(0).build().unwrap();
    let b = Orb::builder().threads(1).build().unwrap();
    let a_ref = activate_node(&a, "a");
    let b_ref = activate_node(&b, "b");
    let stub = NodeClient::new(&a, b_ref);
    let a2 = a.clone();
    let replies = within(60, move || {
        current_thread().block_on(async move {
            let driver = tokio::spawn(protorb::tokio::drive(a2.clone()));
            let calls: Vec<_> = (0..3)
                .map(|_| {
                    stub.ping_async(PingRequest {
                        depth: 5,
                        peer: Some(a_ref.clone()),
                        sleep_micros: 0,
                    })
                })
                .collect();
            let replies = join_all(calls).await;
            a2.shutdown();
            driver.await.unwrap().unwrap();
            replies
        })
    });
    for r in replies {
        let r = r.unwrap();
        assert_eq!(r.depth_reached, 5);
        assert_eq!(r.trail.len(), 6);
        assert!(r.trail.iter().filter(|t| t.starts_with("a@")).count() >= 2);
    }
    b.shutdown();
}

/// A turn while a pool thread leads the event loop returns at once without leading, and
/// the replies that arrive meanwhile all reach their futures (read by the pool thread or by
/// a turn, whichever holds the role).
#[test]
fn turn_while_a_pool_thread_leads_returns_and_loses_nothing() {
    let server = Orb::builder().threads(2).build().unwrap();
    let (_, r) = activate_echo(&server);
    let client = Orb::builder().threads(1).no_listen().build().unwrap();
    let stub = EchoClient::new(&client, r);
    let c = client.clone();
    within(120, move || {
        // The pool thread takes the role as soon as it starts and keeps it while idle.
        let mut seen_busy = false;
        for _ in 0..10_000 {
            let t = c.turn();
            if !t.led() {
                seen_busy = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(seen_busy, "the pool thread never led");
        // Turns from this thread compete with the pool thread while futures are in flight.
        let calls: Vec<_> = (0..500u32).map(|i| stub.echo_async(msg(7, i))).collect();
        // The turner signals after its first turn, and the replies are awaited only then, so
        // turns compete with the pool thread while the futures are awaited, however the
        // threads are scheduled.
        let (stop_tx, stop_rx) = mpsc::channel();
        let (started_tx, started_rx) = mpsc::channel();
        let turner = {
            let c = c.clone();
            std::thread::spawn(move || {
                let _ = c.turn();
                started_tx.send(()).unwrap();
                while stop_rx.try_recv().is_err() {
                    let _ = c.turn();
                }
            })
        };
        started_rx.recv().unwrap();
        let replies = futures::executor::block_on(join_all(calls));
        stop_tx.send(()).unwrap();
        turner.join().unwrap();
        for (i, r) in replies.into_iter().enumerate() {
            assert_eq!(r.unwrap(), msg(7, i as u32), "reply {i}");
        }
    });
    client.shutdown();
    server.shutdown();
}

/// A turn hands out at most 64 replies and then says there is more, so a driver lets the
/// tasks it woke run, and reads and sends again, after a bounded batch (a turn that handed
/// out every reply waiting woke hundreds of tasks at once under `tput-async 1000`). The
/// first turn waits until the server has written more than 64 replies' worth of bytes and
/// its socket has none left unacknowledged (`/proc/net/tcp`): they are then all in the
/// client's socket, so some turn must meet the budget.
#[test]
fn a_turn_hands_out_a_bounded_batch_of_replies_and_says_more() {
    // A reply is at most this many bytes here (checked below).
    const MAX_REPLY: u64 = 60;
    let server = Orb::builder().threads(1).build().unwrap();
    let (_, r) = activate_echo(&server);
    let client = Orb::builder().threads(0).no_listen().build().unwrap();
    let stub = EchoClient::new(&client, r);
    let port = server.listen_addrs()[0].port();
    let (c, s) = (client.clone(), server.clone());
    within(120, move || {
        // Small (about 50 bytes a reply): all 200 fit in the client's receive window.
        let small = |i: u32| sized_msg(3, i, 16);
        let calls: Vec<_> = (0..200u32).map(|i| stub.echo_async(small(i))).collect();
        while s.stats().bytes_sent < 65 * MAX_REPLY || !all_acked(port) {
            std::thread::sleep(Duration::from_millis(1));
        }
        let mut turns = Vec::new();
        while c.stats().replies_received < 200 {
            let before = c.stats().replies_received;
            let t = c.turn();
            turns.push((c.stats().replies_received - before, t.more()));
        }
        // Unbounded, a turn hands out all that has arrived (34, then 166, here).
        assert!(turns.iter().all(|&(n, _)| n <= 64), "turns: {turns:?}");
        assert!(turns.contains(&(64, true)), "turns: {turns:?}");
        assert!(c.stats().bytes_received <= 200 * MAX_REPLY);
        let replies = futures::executor::block_on(join_all(calls));
        for (i, r) in replies.into_iter().enumerate() {
            assert_eq!(r.unwrap(), small(i as u32), "reply {i}");
        }
    });
    client.shutdown();
    server.shutdown();
}

/// Whether every established TCP socket on local `port` (IPv4) has sent and had
/// acknowledged all it was given: its `tx_queue` in `/proc/net/tcp` is 0.
fn all_acked(port: u16) -> bool {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    table.lines().skip(1).all(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        let local_port = f[1].rsplit(':').next().unwrap();
        let established = f[3] == "01";
        let tx_queue = f[4].split(':').next().unwrap();
        u16::from_str_radix(local_port, 16).unwrap() != port
            || !established
            || u64::from_str_radix(tx_queue, 16).unwrap() == 0
    })
}

/// An asynchronous call's deadline fires with only the driver leading, while it sleeps with
/// no timer set, and then while a later deadline (120 s) is pending: the nearer one wakes it
/// (the ORB's alarm, moved earlier, makes the event fd readable; the guard of 60 s fails the
/// test if only the later one would). The peer reads what it is sent and answers nothing;
/// later calls go over the connection the first opened, so no socket event follows them.
#[test]
fn a_deadline_fires_under_the_driver_alone() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    std::thread::spawn(move || {
        use std::io::Read;
        if let Ok((mut s, _)) = silent.accept() {
            let mut sink = [0u8; 4096];
            while matches!(s.read(&mut sink), Ok(n) if n > 0) {}
        }
    });
    let (client, stub) = driven_peer_client(port);
    let c = client.clone();
    let errs = within(60, move || {
        current_thread().block_on(async move {
            let driver = tokio::spawn(protorb::tokio::drive(c.clone()));
            let first = stub
                .echo_async_with_timeout(msg(1, 1), Duration::from_millis(100))
                .await
                .unwrap_err();
            // The driver goes to sleep with no timer set.
            tokio::time::sleep(Duration::from_millis(20)).await;
            let second = stub
                .echo_async_with_timeout(msg(1, 2), Duration::from_millis(200))
                .await
                .unwrap_err();
            // Sent now, pending until the end: the alarm is armed for its deadline.
            let later = stub.echo_async_with_timeout(msg(1, 3), Duration::from_secs(120));
            tokio::time::sleep(Duration::from_millis(20)).await;
            let third = stub
                .echo_async_with_timeout(msg(1, 4), Duration::from_millis(200))
                .await
                .unwrap_err();
            drop(later);
            c.shutdown();
            driver.await.unwrap().unwrap();
            [first, second, third]
        })
    });
    for err in errs {
        assert_eq!(err.kind(), Some(SystemExceptionKind::TIMEOUT), "{err}");
    }
}

/// `drive_with`: the event loop driven inside the `block_on` future itself, with many calls
/// in flight from it and from spawned tasks; every reply reaches its own future, and the
/// future's output comes back.
#[test]
fn drive_with_runs_the_future_and_the_event_loop_together() {
    let server = Orb::builder().threads(2).build().unwrap();
    let (_, r) = activate_echo(&server);
    let client = Orb::builder().threads(0).no_listen().build().unwrap();
    let stub = EchoClient::new(&client, r);
    let c = client.clone();
    let n = within(120, move || {
        current_thread()
            .block_on(protorb::tokio::drive_with(c, async move {
                let spawned: Vec<_> = (0..4u32)
                    .map(|t| {
                        let stub = stub.clone();
                        tokio::spawn(async move {
                            for i in 0..200u32 {
                                assert_eq!(stub.echo_async(msg(t, i)).await.unwrap(), msg(t, i));
                            }
                        })
                    })
                    .collect();
                let calls: Vec<_> = (0..300u32).map(|i| stub.echo_async(msg(9, i))).collect();
                for (i, r) in join_all(calls).await.into_iter().enumerate() {
                    assert_eq!(r.unwrap(), msg(9, i as u32), "reply {i}");
                }
                for t in spawned {
                    t.await.unwrap();
                }
                // One at a time too (the `lat-async` pattern).
                for i in 300..400u32 {
                    assert_eq!(stub.echo_async(msg(9, i)).await.unwrap(), msg(9, i));
                }
                1200
            }))
            .unwrap()
    });
    assert_eq!(n, 1200);
    assert_eq!(client.stats().replies_received, 1200);
    client.shutdown();
    server.shutdown();
}

/// A driver's turn keeps the writes of the connection whose replies it handed out held for
/// the tasks it woke, so that their next requests go out together at the driver's next
/// poll. A blocking call made right after, on the runtime's thread and the same
/// connection, must not queue behind that hold: it would wait for a reply to a request
/// never written (until its deadline; the hang guard or the call's TIMEOUT fails this).
#[test]
fn a_blocking_call_after_a_turn_is_not_held_behind_the_drivers_hold() {
    let (server, client, stub) = driven_client(Orb::builder());
    let c = client.clone();
    within(120, move || {
        current_thread()
            .block_on(protorb::tokio::drive_with(c, async move {
                for i in 0..50u32 {
                    // Read by the driver's turn, which then holds the connection's writes.
                    assert_eq!(stub.echo_async(msg(1, i)).await.unwrap(), msg(1, i));
                    // Blocking, on the runtime's thread (as a servant's nested call would).
                    assert_eq!(stub.echo(msg(2, i)).unwrap(), msg(2, i));
                }
            }))
            .unwrap()
    });
    client.shutdown();
    server.shutdown();
}

/// The same hold with the outgoing queue over its bound: the woken tasks' large requests
/// fill it, and the sender that finds it full ends the hold (so the queue can drain) before
/// it waits for room, instead of waiting for a drain that only the driver's next poll, on
/// this same thread, would start. Every reply reaches its own future.
#[test]
fn requests_held_for_the_driver_past_the_queue_bound_still_go_out() {
    let (server, client, stub) = driven_client(Orb::builder().max_queued_bytes(16 * 1024));
    let c = client.clone();
    within(120, move || {
        current_thread()
            .block_on(protorb::tokio::drive_with(c, async move {
                let tasks: Vec<_> = (0..16u32)
                    .map(|t| {
                        let stub = stub.clone();
                        tokio::spawn(async move {
                            for i in 0..20u32 {
                                let m = Payload {
                                    thread: t,
                                    call: i,
                                    data: payload(t, i, 6000 + (i as usize * 97) % 5000),
                                };
                                let got = stub.echo_async(m.clone()).await;
                                assert_eq!(got.unwrap_or_else(|e| panic!("{t}/{i}: {e}")), m);
                            }
                        })
                    })
                    .collect();
                for t in tasks {
                    t.await.unwrap();
                }
            }))
            .unwrap()
    });
    assert_eq!(client.stats().replies_received, 16 * 20);
    client.shutdown();
    server.shutdown();
}

/// `drive_with` with a future that wakes itself while it is polled (as a hand-written
/// yield does): it still completes, and the runtime's other tasks still run meanwhile.
#[test]
fn drive_with_a_self_waking_future_completes() {
    let client = Orb::builder().threads(0).no_listen().build().unwrap();
    let c = client.clone();
    let n = within(60, move || {
        current_thread()
            .block_on(protorb::tokio::drive_with(c, async {
                let other = tokio::spawn(async { 7 });
                let mut left = 1000;
                std::future::poll_fn(|cx| {
                    left -= 1;
                    if left == 0 {
                        return std::task::Poll::Ready(());
                    }
                    cx.waker().wake_by_ref();
                    std::task::Poll::Pending
                })
                .await;
                other.await.unwrap()
            }))
            .unwrap()
    });
    assert_eq!(n, 7);
    client.shutdown();
}

/// A turn that reads the client's one connection in place of the poll (the driver's
/// runtime has just reported the event loop's fd: `OrbStats::unpolled_reads`) must not lose
/// what that poll would have found. While replies stream over the only connection (so
/// turns keep reading it unpolled), a call's deadline on the same connection fires; calls
/// alternating with a second server (a second connection, opened midway) all come back;
/// and a shutdown asked from another thread ends the driver. (Whether a turn that meets a
/// waiting reply and a passed deadline together handles both is checked without a runtime,
/// step by step, in `a_turn_meeting_a_reply_and_a_passed_deadline_handles_both`.)
#[test]
fn unpolled_turns_lose_no_timer_connection_or_wake_up() {
    let a = Orb::builder().threads(3).build().unwrap();
    let (_, ra) = activate_echo(&a);
    let b = Orb::builder().threads(2).build().unwrap();
    let (_, rb) = activate_echo(&b);
    let client = Orb::builder()
        .threads(0)
        .no_listen()
        .call_timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let (to_a, to_b) = (EchoClient::new(&client, ra), EchoClient::new(&client, rb));
    let c = client.clone();
    let rt = Arc::new(current_thread());
    let (done_tx, done_rx) = mpsc::channel();
    let rt2 = rt.clone();
    let runner = std::thread::spawn(move || {
        rt2.block_on(async move {
            let driver = tokio::spawn(protorb::tokio::drive(c.clone()));
            for i in 0..300u32 {
                assert_eq!(to_a.echo_async(msg(1, i)).await.unwrap(), msg(1, i));
            }
            let unpolled = c.stats().unpolled_reads;
            assert!(
                unpolled >= 150,
                "300 calls over one connection, {unpolled} turns read it unpolled"
            );

            // A deadline on the streaming connection: the servant sleeps 10 s, the call
            // gives up after 200 ms.
            let fired = std::cell::Cell::new(false);
            let sleeper = async {
                let r = to_a
                    .sleep_async_with_timeout(
                        SleepRequest { millis: 10_000 },
                        Duration::from_millis(200),
                    )
                    .await;
                fired.set(true);
                r
            };
            // Eight calls in flight at a time.
            let start = std::time::Instant::now();
            let stream = |t: u32| {
                let (to_a, fired) = (&to_a, &fired);
                async move {
                    let mut i = 0u32;
                    while !fired.get() && start.elapsed() < Duration::from_secs(30) {
                        assert_eq!(to_a.echo_async(msg(t, i)).await.unwrap(), msg(t, i));
                        i += 1;
                    }
                    i
                }
            };
            let (slept, streamed) = futures::join!(sleeper, join_all((10..18).map(stream)));
            let streamed: u32 = streamed.into_iter().sum();
            let err = slept.unwrap_err();
            assert_eq!(err.kind(), Some(SystemExceptionKind::TIMEOUT), "{err}");
            assert!(streamed > 0, "no call streamed beside the deadline");

            // A second connection, calls alternating between the two.
            for i in 0..200u32 {
                let stub = if i % 2 == 0 { &to_a } else { &to_b };
                assert_eq!(stub.echo_async(msg(3, i)).await.unwrap(), msg(3, i));
            }
            assert_eq!(c.stats().connections_opened, 2);
            done_tx.send(()).unwrap();
            // Ended by a shutdown from another thread: its wake-up reaches the driver.
            driver.await.unwrap().unwrap();
        })
    });
    let finished = done_rx.recv_timeout(Duration::from_secs(120));
    client.shutdown();
    if let Err(p) = within(60, move || runner.join()) {
        std::panic::resume_unwind(p);
    }
    finished.expect("the calls did not finish within the hang guard");
    a.shutdown();
    b.shutdown();
}

/// With a reply waiting in the client's one socket and a call's deadline passed, one turn
/// must hand out the reply and fire the deadline: reading the socket in place of the poll
/// (`OrbStats::unpolled_reads`) would leave the alarm's event in the event loop's set, and
/// the call waiting, until some later poll. Once nothing but the socket can be ready, a
/// turn does read it unpolled. The peer is scripted (an ORB would answer the expired call
/// itself, from the deadline the request carries) and answers every request but `Sleep`.
/// Each step waits until its condition holds (the reply acked into the client's socket,
/// the deadline's time passed), so none depends on speed.
#[test]
fn a_turn_meeting_a_reply_and_a_passed_deadline_handles_both() {
    use futures::FutureExt;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (ack_tx, ack) = mpsc::channel();
    let peer = std::thread::spawn(move || answer_all_but_sleep(listener, ack_tx));
    let (client, stub) = driven_peer_client(port);
    let c = client.clone();
    within(120, move || {
        // Sends an echo and waits until its reply is in the client's socket.
        let echo_waiting = |i: u32| {
            let f = stub.echo_async(msg(4, i));
            ack.recv_timeout(Duration::from_secs(60))
                .expect("peer answered");
            while !all_acked(port) {
                std::thread::sleep(Duration::from_millis(1));
            }
            f
        };
        // Connected by turns (the driver's job).
        let first = stub.echo_async(msg(4, 0));
        while c.stats().replies_received < 1 {
            c.turn();
        }
        ack.recv().unwrap();
        assert_eq!(futures::executor::block_on(first).unwrap(), msg(4, 0));

        let deadline = Duration::from_millis(100);
        let mut sleeper =
            Box::pin(stub.sleep_async_with_timeout(SleepRequest { millis: 10_000 }, deadline));
        let asked = std::time::Instant::now();
        // Polled once, its waker registered: the deadline's timer must wake it (a poll after
        // the deadline fails it by itself, timer or not).
        let woken = Arc::new(Flag::default());
        let waker = std::task::Waker::from(woken.clone());
        let mut cx = std::task::Context::from_waker(&waker);
        assert!(sleeper.as_mut().poll(&mut cx).is_pending());
        let echo = echo_waiting(1);
        while asked.elapsed() < deadline * 2 {
            std::thread::sleep(Duration::from_millis(10));
        }
        c.turn();
        assert!(
            woken.0.load(Ordering::SeqCst),
            "the turn left the passed deadline's timer unrun"
        );
        let err = sleeper.now_or_never().unwrap().unwrap_err();
        assert_eq!(err.kind(), Some(SystemExceptionKind::TIMEOUT), "{err}");
        while c.stats().replies_received < 2 {
            c.turn();
        }
        assert_eq!(futures::executor::block_on(echo).unwrap(), msg(4, 1));

        // Nothing else pending: a turn reads the waiting reply unpolled.
        let before = c.stats().unpolled_reads;
        for i in 2..7u32 {
            let echo = echo_waiting(i);
            c.turn();
            let got = echo
                .now_or_never()
                .expect("one turn did not hand out the reply");
            assert_eq!(got.unwrap(), msg(4, i));
        }
        let unpolled = c.stats().unpolled_reads - before;
        assert!(
            unpolled >= 4,
            "{unpolled} of 5 turns read the socket unpolled"
        );
    });
    client.shutdown();
    peer.join().unwrap();
}

/// A waker that notes it was woken.
#[derive(Default)]
struct Flag(AtomicBool);

impl std::task::Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// The scripted peer of the test above: answers each request but `Sleep` with `msg(4, k)`
/// for the k-th answered one, and says so on `answered`; returns at the client's close.
fn answer_all_but_sleep(listener: std::net::TcpListener, answered: mpsc::Sender<()>) {
    use bytes::BytesMut;
    use prost::Message as _;
    use protorb::giop::{GiopCodec, Message};
    use std::io::{Read, Write};
    use tokio_util::codec::Decoder;
    let (mut s, _) = listener.accept().unwrap();
    let (mut codec, mut buf) = (GiopCodec::default(), BytesMut::new());
    let (mut chunk, mut k) = ([0u8; 4096], 0u32);
    loop {
        while let Some(frame) = codec.decode(&mut buf).unwrap() {
            if let Message::Request(r) = frame.message {
                if r.header.operation != "Sleep" {
                    let reply = octets_reply(r.header.request_id, &msg(4, k).encode_to_vec());
                    s.write_all(&reply).unwrap();
                    k += 1;
                    let _ = answered.send(());
                }
            }
        }
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}
