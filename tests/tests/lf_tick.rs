//! Tick mode (`OrbBuilder::standby_tick`): after a run of one-at-a-time calls the pool stops
//! arming its standby before each upcall, and the standby's tick alone keeps the event loop
//! watched. A request that arrives while a long upcall holds the loop must still be served
//! within about a tick, long before that upcall ends, and the pool must go back to arming.

use orb_tests::activate_node;
use orb_tests::orbtest::{NodeClient, PingRequest};
use std::time::{Duration, Instant};

/// Long, so that a test thread descheduled on a loaded machine does not look like an idle
/// ORB (a standby whose tick sees no vacancy stops ticking, and the pool arms again).
const TICK: Duration = Duration::from_millis(100);
/// How long the slow upcall sleeps; a request stuck behind it would wait about this long.
const SLOW: Duration = Duration::from_millis(2000);

/// A server ORB with two pool threads (a leader and a standby) and `tick`.
fn server(tick: Option<Duration>) -> orb::Orb {
    orb::Orb::builder()
        .threads(2)
        .standby_tick(tick)
        .build()
        .unwrap()
}

/// A client ORB whose calling thread leads its own waits.
fn client() -> orb::Orb {
    orb::Orb::builder().threads(0).no_listen().build().unwrap()
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

#[test]
fn a_request_during_a_long_upcall_in_tick_mode_is_served_by_the_ticking_standby() {
    let (quick, takeovers) = quick_call_during_slow_upcall(Some(TICK));
    assert!(
        takeovers >= 1,
        "the standby's tick never took over (tick mode not entered?)"
    );
    // About one tick; far below the 2 s it would wait behind the slow upcall.
    assert!(
        quick < SLOW / 3,
        "the quick call waited {quick:?} behind a long upcall"
    );
}

#[test]
fn without_tick_mode_the_armed_standby_serves_it_and_never_ticks() {
    let (quick, takeovers) = quick_call_during_slow_upcall(None);
    assert_eq!(takeovers, 0);
    assert!(
        quick < SLOW / 3,
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
    for round in 1..=2u64 {
        quiet_run(&a);
        ping(&b, Duration::ZERO);
        let slow = {
            let a = NodeClient::new(&a_orb, node.clone());
            std::thread::spawn(move || ping(&a, Duration::from_millis(1500)))
        };
        std::thread::sleep(Duration::from_millis(100));
        let t = Instant::now();
        ping(&b, Duration::ZERO);
        assert!(t.elapsed() < Duration::from_millis(700), "round {round}");
        slow.join().unwrap();
        assert_eq!(
            server.stats().standby_tick_takeovers,
            round,
            "round {round}"
        );
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
        _ctx: &orb::Context,
        req: PingRequest,
    ) -> Result<orb_tests::orbtest::PingReply, orb::Exception> {
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
/// take over (40 ms against a 100 ms tick): the upcall that finds a request arrived while its
/// user code ran ends tick mode, so from then on the armed standby serves such a request
/// beside the upcall instead of after it.
#[test]
fn a_request_during_a_short_upcall_ends_tick_mode() {
    use std::sync::atomic::Ordering::SeqCst;
    let server = server(Some(TICK));
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
    // Ten rounds: a's call runs 40 ms; b calls 10 ms into it (margins for a busy machine,
    // where a woken thread may wait milliseconds for a CPU; still under half a tick).
    let rounds = 10;
    for _ in 0..rounds {
        std::thread::scope(|s| {
            s.spawn(|| ping(&a, Duration::from_millis(40)));
            std::thread::sleep(Duration::from_millis(10));
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
