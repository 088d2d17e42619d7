//! Tick mode (`OrbBuilder::standby_tick`): after a run of one-at-a-time calls the pool stops
//! arming its standby before each upcall, and the standby's tick alone keeps the event loop
//! watched. A request that arrives while a long upcall holds the loop must still be served
//! within about a tick, long before that upcall ends, and the pool must go back to arming.

use orb_tests::activate_node;
use orb_tests::orbtest::{EchoClient, Payload, SleepRequest};
use orb_tests::orbtest::{NodeClient, PingRequest};
use std::time::{Duration, Instant};

/// Long, so that a test thread descheduled on a loaded machine does not look like an idle
/// ORB (a standby whose tick sees no vacancy stops ticking, and the pool arms again).
const TICK: Duration = Duration::from_millis(100);
/// The tick of the short-upcall test: its upcalls (200 ms) must stay under half of it.
const LONG_TICK: Duration = Duration::from_millis(1000);
/// How long the slow upcall sleeps; a request stuck behind it would wait about this long.
const SLOW: Duration = Duration::from_millis(2000);

/// A server ORB with two pool threads (a leader and a standby) and `tick`.
fn server(tick: Option<Duration>) -> protorb::Orb {
    protorb::Orb::builder()
        .threads(2)
        .standby_tick(tick)
        .build()
        .unwrap()
}

/// A client ORB whose calling thread leads its own waits.
fn client() -> protorb::Orb {
    protorb::Orb::builder()
        .threads(0)
        .no_listen()
        .build()
        .unwrap()
}

/// One client, one call at a time, nothing arriving during any upcall: well past the 64
/// unused arms after which the pool switches to tick mode.
fn quiet_run(stub: &NodeClient) {
    for _ in 0..300 {
        ping(stub, Duration::ZERO);
    }
}

fn ping(stub: &NodeClient, sleep: Duration) {
    let reply = stub
        .ping(PingRequest {
            depth: 0,
            peer: None,
            sleep_micros: sleep.as_micros() as u32,
        })
        .expect("ping");
    assert_eq!(reply.depth_reached, 0);
}

/// Runs the scenario on a server with `tick`; returns how long the quick call took and the
/// server's standby tick takeovers.
fn quick_call_during_slow_upcall(tick: Option<Duration>) -> (Duration, u64) {
    let server = server(tick);
    let node = activate_node(&server, "node");
    let (a_orb, b_orb) = (client(), client());
    let a = NodeClient::new(&a_orb, node.clone());
    let b = NodeClient::new(&b_orb, node.clone());
    quiet_run(&a);
    ping(&b, Duration::ZERO); // b's connection is open and idle before the slow call
    let slow = std::thread::spawn(move || {
        let t = Instant::now();
        ping(&a, SLOW);
        t.elapsed()
    });
    // Let the slow upcall start and hold the loop for a few ticks.
    std::thread::sleep(Duration::from_millis(100));
    let t = Instant::now();
    ping(&b, Duration::ZERO);
    let quick = t.elapsed();
    assert!(slow.join().unwrap() >= SLOW);
    (quick, server.stats().standby_tick_takeovers)
}

/// How many times a scenario that needs the pool in tick mode is tried. Whether the pool is
/// in tick mode when the slow call comes depends on scheduling: on a busy machine a pause of
/// a tick between two calls of the quiet run is a quiet tick, after which the pool arms its
/// standby again (correctly) and the armed standby, not a tick, serves the quick call. The
/// quick call must be served in time on every try; the takeover must happen on some try.
const TRIES: usize = 5;

#[test]
fn a_request_during_a_long_upcall_in_tick_mode_is_served_by_the_ticking_standby() {
    let mut took_over = false;
    for _ in 0..TRIES {
        let (quick, takeovers) = quick_call_during_slow_upcall(Some(TICK));
        // About one tick; far below the 2 s it would wait behind the slow upcall.
        assert!(
            quick < SLOW / 2,
            "the quick call waited {quick:?} behind a long upcall"
        );
        if takeovers >= 1 {
            took_over = true;
            break;
        }
    }
    assert!(
        took_over,
        "the standby's tick never took over in {TRIES} tries (tick mode not entered?)"
    );
}

#[test]
fn without_tick_mode_the_armed_standby_serves_it_and_never_ticks() {
    let (quick, takeovers) = quick_call_during_slow_upcall(None);
    assert_eq!(takeovers, 0);
    assert!(
        quick < SLOW / 2,
        "the quick call waited {quick:?} behind a long upcall"
    );
}

/// After a takeover the pool arms again: a second long upcall does not delay a request by a
/// tick, and many one-at-a-time calls later it is back in tick mode (it takes over again).
#[test]
fn tick_mode_is_left_after_a_takeover_and_entered_again() {
    let server = server(Some(TICK));
    let node = activate_node(&server, "node");
    let (a_orb, b_orb) = (client(), client());
    let a = NodeClient::new(&a_orb, node.clone());
    let b = NodeClient::new(&b_orb, node.clone());
    for round in 1..=2 {
        let mut took_over = false;
        for _ in 0..TRIES {
            let before = server.stats().standby_tick_takeovers;
            quiet_run(&a);
            ping(&b, Duration::ZERO);
            let slow = {
                let a = NodeClient::new(&a_orb, node.clone());
                std::thread::spawn(move || ping(&a, SLOW))
            };
            std::thread::sleep(Duration::from_millis(100));
            let t = Instant::now();
            ping(&b, Duration::ZERO);
            let quick = t.elapsed();
            assert!(quick < SLOW / 2, "round {round}: quick call took {quick:?}");
            slow.join().unwrap();
            // A takeover during the slow call (the quiet run may count one more on a busy
            // machine: a quick upcall descheduled for half a tick looks like a long one).
            if server.stats().standby_tick_takeovers > before {
                took_over = true;
                break;
            }
        }
        assert!(took_over, "round {round}: no takeover in {TRIES} tries");
    }
}

/// Counts the upcalls that start while another one runs.
#[derive(Default)]
struct Overlap {
    now: std::sync::atomic::AtomicUsize,
    overlapped: std::sync::atomic::AtomicUsize,
}

/// A node servant that sleeps as asked and counts upcalls that start beside another.
struct OverlapNode(std::sync::Arc<Overlap>);

impl orb_tests::orbtest::Node for OverlapNode {
    fn ping(
        &self,
        _ctx: &protorb::Context,
        req: PingRequest,
    ) -> Result<orb_tests::orbtest::PingReply, protorb::Exception> {
        use std::sync::atomic::Ordering::SeqCst;
        if self.0.now.fetch_add(1, SeqCst) > 0 {
            self.0.overlapped.fetch_add(1, SeqCst);
        }
        std::thread::sleep(Duration::from_micros(req.sleep_micros.into()));
        self.0.now.fetch_sub(1, SeqCst);
        Ok(orb_tests::orbtest::PingReply {
            depth_reached: 0,
            trail: Vec::new(),
        })
    }
}

/// Tick mode must not serialise requests that arrive during upcalls too short for a tick to
/// take over (200 ms against a 1 s tick): the upcall that finds a request arrived while its
/// user code ran ends tick mode, so from then on the armed standby serves such a request
/// beside the upcall instead of after it.
#[test]
fn a_request_during_a_short_upcall_ends_tick_mode() {
    use std::sync::atomic::Ordering::SeqCst;
    // A long tick, so that even a descheduled upcall stays under half of it.
    let server = server(Some(LONG_TICK));
    let overlap = std::sync::Arc::new(Overlap::default());
    let node = server.activate(
        &b"overlap"[..],
        orb_tests::orbtest::NodeSkeleton::new(OverlapNode(overlap.clone())),
    );
    let (a_orb, b_orb) = (client(), client());
    let a = NodeClient::new(&a_orb, node.clone());
    let b = NodeClient::new(&b_orb, node.clone());
    quiet_run(&a);
    ping(&b, Duration::ZERO);
    assert_eq!(overlap.overlapped.load(SeqCst), 0);
    // Ten rounds: a's call runs 200 ms; b calls 20 ms into it (wide margins for a busy
    // machine, where a woken thread may wait milliseconds for a CPU; under half a tick).
    let rounds = 10;
    for _ in 0..rounds {
        std::thread::scope(|s| {
            s.spawn(|| ping(&a, Duration::from_millis(200)));
            std::thread::sleep(Duration::from_millis(20));
            ping(&b, Duration::ZERO);
        });
    }
    // The first round's b waited for a's upcall (tick mode); the others ran beside it.
    let overlapped = overlap.overlapped.load(SeqCst);
    assert!(
        overlapped >= rounds / 2,
        "b's upcall ran beside a's in only {overlapped} of {rounds} rounds: tick mode \
         serialised them"
    );
    assert_eq!(server.stats().standby_tick_takeovers, 0);
}

/// A client ORB with pool threads whose one caller makes one call at a time reads its own
/// replies and, in tick mode, leaves the leader role vacant unarmed between its calls (no
/// `epoll_ctl` to arm the standby and none to disarm it, per call). `tick`: the client's.
fn caller_with_pool(tick: Duration) -> (protorb::Orb, protorb::Orb, EchoClient) {
    let server = server(Some(TICK));
    let (_, r) = orb_tests::activate_echo(&server);
    let client = protorb::Orb::builder()
        .threads(2)
        .standby_tick(Some(tick))
        .no_listen()
        .build()
        .unwrap();
    let stub = EchoClient::new(&client, r);
    (server, client, stub)
}

fn echo(stub: &EchoClient, i: u32) {
    let p = Payload {
        thread: 7,
        call: i,
        data: i.to_le_bytes().repeat(8),
    };
    assert_eq!(stub.echo(p.clone()).expect("echo"), p, "call {i}");
}

/// The caller of a request-reply loop on a client with pool threads reads its own replies,
/// and after the 64 unused arms that switch its pool to tick mode it no longer arms the
/// standby for every call (before: one arm per call, and its disarm).
#[test]
fn a_caller_leading_its_own_calls_leaves_the_role_unarmed_in_tick_mode() {
    let (_server, client, stub) = caller_with_pool(LONG_TICK);
    orb_tests::within(120, move || {
        let calls = 2000;
        for i in 0..calls {
            echo(&stub, i);
        }
        let s = client.stats();
        // Before: a pool thread read every reply and woke the caller (it could not stand
        // aside while the caller it had just woken was still listed as a follower).
        assert!(
            s.follower_wakeups < u64::from(calls) / 2,
            "the caller was woken for {} of {calls} replies: it did not read its own",
            s.follower_wakeups
        );
        // Before: one arm per call. A few runs of arms come back when the standby's wait
        // lost its tick (an idle tick on a busy machine) until the caller reticks it.
        assert!(
            s.standby_arms < u64::from(calls) * 3 / 4,
            "{} arms of the standby for {calls} one-at-a-time calls",
            s.standby_arms
        );
    });
}

/// With the role left vacant unarmed by a caller that then stops calling, an asynchronous
/// call's reply must not wait for the standby's tick (20 s here): starting the call arms the
/// standby, which the reply wakes.
#[test]
fn an_asynchronous_call_after_a_callers_run_does_not_wait_for_the_tick() {
    let tick = Duration::from_secs(20);
    let (_server, client, stub) = caller_with_pool(tick);
    orb_tests::within(120, move || {
        for i in 0..300 {
            echo(&stub, i);
        }
        for i in 0..5u32 {
            let p = Payload {
                thread: 8,
                call: i,
                data: vec![1; 64],
            };
            let start = Instant::now();
            let got = futures::executor::block_on(stub.echo_async(p.clone())).expect("echo_async");
            assert_eq!(got, p);
            let took = start.elapsed();
            assert!(
                took < tick / 4,
                "an asynchronous call took {took:?}: its reply waited for the tick"
            );
            // A blocking call between them leaves the role vacant again.
            echo(&stub, 1000 + i);
        }
        assert_eq!(client.stats().standby_tick_takeovers, 0);
    });
}

/// With the role left vacant unarmed by a caller that then sends oneways its peer does not
/// read yet, the frames left queued behind the full socket must go out once the peer reads,
/// not at the standby's next tick (an hour here): queuing them arms the standby, which the
/// writable event wakes. The peer is a server with one pool thread, kept in a 2 s upcall by
/// another client meanwhile; 32 MiB of oneways is more than the sockets' buffers hold.
#[test]
fn oneways_queued_behind_a_full_socket_do_not_wait_for_the_tick() {
    let server = protorb::Orb::builder().threads(1).build().unwrap();
    let (servant, r) = orb_tests::activate_echo(&server);
    let client = protorb::Orb::builder()
        .threads(2)
        .standby_tick(Some(Duration::from_secs(3600)))
        .max_queued_bytes(256 << 20)
        .no_listen()
        .build()
        .unwrap();
    let stub = EchoClient::new(&client, r.clone());
    let other = protorb::Orb::builder()
        .threads(0)
        .no_listen()
        .build()
        .unwrap();
    let blocker = EchoClient::new(&other, r);
    orb_tests::within(120, move || {
        for i in 0..300 {
            echo(&stub, i);
        }
        let before = server.stats().requests_received;
        let sleeper = std::thread::spawn(move || blocker.sleep(SleepRequest { millis: 2000 }));
        while server.stats().requests_received == before {
            std::thread::sleep(Duration::from_millis(5));
        }
        let n = 32;
        for i in 0..n {
            let p = Payload {
                thread: 9,
                call: i,
                data: vec![i as u8; 1 << 20],
            };
            stub.notify(p).expect("notify");
        }
        while servant.notified.lock().unwrap().len() < n as usize {
            std::thread::sleep(Duration::from_millis(10));
        }
        let got = servant.notified.lock().unwrap();
        assert!(
            got.iter()
                .enumerate()
                .all(|(i, p)| p.call == i as u32 && p.data.len() == 1 << 20),
            "oneways lost or out of order"
        );
        drop(got);
        assert!(!sleeper.join().unwrap().expect("sleep").cancelled);
        assert_eq!(client.stats().standby_tick_takeovers, 0);
    });
}
