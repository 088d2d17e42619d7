//! A thread waiting for its own reply serves only its own call chain while pool threads are
//! free (issue 16, scenario 7; TAO bug 3531b).
//!
//! - `waiting_caller_runs_no_unrelated_upcall_while_pool_threads_are_idle`: an application
//!   thread of a server, calling out in a loop, leads the event loop often while it waits for
//!   its replies. Twenty unrelated 100 ms requests arriving meanwhile must go to the server's idle
//!   pool threads, never to that thread (each one it ran added 100 ms to one of its calls).
//!   A waiting thread may run an incoming request only if the request belongs to its own call
//!   chain (a nested callback) or no pool thread is free to take it.
//! - `nested_depth_200_with_one_pool_thread_per_side`: nested callbacks still run on the
//!   thread waiting in the chain: a chain of depth 200 started by a third ORB between two ORBs
//!   of one pool thread each, where every level has to run on the side's only pool thread,
//!   waiting for the level below.
//! - `a_chain_of_callbacks_between_a_caller_thread_and_one_pool_thread`: an application
//!   thread's call whose callbacks a pool thread of the same ORB may read first: the pool
//!   thread hands each callback it reads while the caller waits, with the event loop, to the
//!   caller (`Lf::step_down_for`), and sets aside for the caller one it reads before the
//!   caller has joined to wait (the caller, preempted between its send and its wait, is
//!   still `coming`: `Lf::coming`). So every callback of the chain runs on the caller's
//!   thread and the pool thread stays free: before, the pool thread ran the first one it got
//!   to first, its nested call bound it too, and every level woke the other thread
//!   (PROFILE.md, 2026-11-27). A hundred chains, with and without bidirectional GIOP (callbacks
//!   over the caller's own connection, which its thread then reads itself).

use orb_tests::orbtest::{EchoClient, NodeClient, PingRequest};
use orb_tests::{activate_echo, activate_node, timed_echo};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Polls `f` until it is true, failing with `what` after `secs` seconds.
fn wait_until(secs: u64, what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Unrelated 100 ms requests sent while the application thread calls out. On the code with
/// the bug about one in three ran on the application thread when the machine was idle, fewer
/// with both CPUs busy: twenty make a run that misses the bug unlikely.
const PINGS: usize = 20;

/// What the application thread saw: its trail name, calls made, max latency, first failure.
struct CallerReport {
    name: String,
    calls: u32,
    max_latency: Duration,
    failure: Option<String>,
}

#[test]
fn waiting_caller_runs_no_unrelated_upcall_while_pool_threads_are_idle() {
    let s = protorb::Orb::builder().threads(3).build().unwrap();
    let node = activate_node(&s, "S");
    let r = protorb::Orb::builder().threads(1).build().unwrap();
    let (_servant, echo_ref) = activate_echo(&r);
    let c = protorb::Orb::builder()
        .threads(1)
        .no_listen()
        .build()
        .unwrap();

    // Application thread A of S's process: calls R through S's ORB, in a tight loop.
    let stop = Arc::new(AtomicBool::new(false));
    let calls = Arc::new(AtomicU32::new(0));
    let a = {
        let (s, stop, calls) = (s.clone(), stop.clone(), calls.clone());
        std::thread::spawn(move || {
            let mut report = CallerReport {
                name: format!("S@{:?}", std::thread::current().id()),
                calls: 0,
                max_latency: Duration::ZERO,
                failure: None,
            };
            let client = EchoClient::new(&s, echo_ref);
            while !stop.load(Ordering::Relaxed) {
                let i = report.calls;
                let (took, reply) = timed_echo(&client, 1, i, 16, Duration::from_secs(10));
                report.max_latency = report.max_latency.max(took);
                report.calls += 1;
                calls.store(report.calls, Ordering::Relaxed);
                if let Err(e) = reply {
                    report.failure = Some(format!("call {i}: {e}"));
                    break;
                }
            }
            report
        })
    };
    wait_until(10, "A is calling", || calls.load(Ordering::Relaxed) >= 200);

    // Meanwhile an unrelated client sends S 100 ms requests, one after the other.
    let pinger = NodeClient::new(&c, node);
    let trails: Vec<_> = (0..PINGS)
        .map(|_| {
            pinger.ping_with_timeout(
                PingRequest {
                    depth: 0,
                    peer: None,
                    sleep_micros: 100_000,
                },
                Duration::from_secs(10),
            )
        })
        .collect();
    stop.store(true, Ordering::Relaxed);
    let report = a.join().unwrap();
    c.shutdown();
    r.shutdown();
    s.shutdown();

    eprintln!(
        "A ({}): {} calls, max latency {:?}",
        report.name, report.calls, report.max_latency
    );
    assert_eq!(report.failure, None, "A's call failed");
    let mut served_by = Vec::new();
    for (i, t) in trails.into_iter().enumerate() {
        let reply = t.unwrap_or_else(|e| panic!("ping {i}: {e}"));
        assert_eq!(reply.trail.len(), 1, "ping {i}: {:?}", reply.trail);
        served_by.push(reply.trail[0].clone());
    }
    let on_a = served_by.iter().filter(|t| **t == report.name).count();
    assert_eq!(
        on_a, 0,
        "{on_a} of {PINGS} unrelated 100 ms upcalls ran on application thread A ({}) while it waited \
         for its own replies and S's 3 pool threads were idle; A's max call latency {:?}; \
         served by {served_by:?}",
        report.name, report.max_latency
    );
}

#[test]
fn nested_depth_200_with_one_pool_thread_per_side() {
    let a = protorb::Orb::builder().threads(1).build().unwrap();
    let b = protorb::Orb::builder().threads(1).build().unwrap();
    let c = protorb::Orb::builder()
        .threads(1)
        .no_listen()
        .build()
        .unwrap();
    let a_ref = activate_node(&a, "A");
    let b_ref = activate_node(&b, "B");
    // The chain starts at C: on A and B only the pool thread can serve, so each of them runs
    // every level of its side, nested in its own wait for the level below.
    let reply = NodeClient::new(&c, a_ref).ping_with_timeout(
        PingRequest {
            depth: 200,
            peer: Some(b_ref),
            sleep_micros: 0,
        },
        Duration::from_secs(30),
    );
    c.shutdown();
    a.shutdown();
    b.shutdown();

    let reply = reply.expect("nested ping completes");
    assert_eq!(reply.depth_reached, 200);
    assert_eq!(reply.trail.len(), 201);
    // Levels alternate: A serves even depths from the top, B odd ones.
    for (i, t) in reply.trail.iter().rev().enumerate() {
        let expect = if i % 2 == 0 { "A@" } else { "B@" };
        assert!(t.starts_with(expect), "level {i} served by {t}");
    }
    for side in ["A@", "B@"] {
        let mut threads: Vec<&String> =
            reply.trail.iter().filter(|t| t.starts_with(side)).collect();
        threads.dedup();
        assert_eq!(threads.len(), 1, "{side} levels ran on {threads:?}");
    }
}

/// One chain of `depth` levels started by a thread of A (one pool thread) calling B (one
/// pool thread): checks that it completes, alternates sides, and that all of A's levels ran
/// on the calling thread.
fn chain_on_the_caller(a: &protorb::Orb, b_ref: protorb::ObjectRef, a_ref: protorb::ObjectRef) {
    let depth = 40;
    let caller = {
        let a = a.clone();
        std::thread::Builder::new()
            .stack_size(16 << 20)
            .spawn(move || {
                let reply = NodeClient::new(&a, b_ref).ping_with_timeout(
                    PingRequest {
                        depth,
                        peer: Some(a_ref),
                        sleep_micros: 0,
                    },
                    Duration::from_secs(30),
                );
                (format!("A@{:?}", std::thread::current().id()), reply)
            })
            .unwrap()
    };
    let (me, reply) = caller.join().unwrap();
    let reply = reply.expect("nested ping completes");
    assert_eq!(reply.depth_reached, depth);
    assert_eq!(
        reply.trail.len(),
        depth as usize + 1,
        "a level ran twice or not at all"
    );
    // B serves the top level and every other one; A's levels are callbacks of the caller's
    // call, all run by the caller's thread.
    for (i, t) in reply.trail.iter().rev().enumerate() {
        if i % 2 == 0 {
            assert!(t.starts_with("B@"), "level {i} served by {t}");
        } else {
            assert_eq!(
                *t, me,
                "level {i}, a callback of the caller's chain, ran on another thread"
            );
        }
    }
}

/// Pins the calling thread, and so the threads it starts, to the first CPU it may run on.
fn pin_to_one_cpu() {
    use rustix::thread::{sched_getaffinity, sched_setaffinity, CpuSet};
    let allowed = sched_getaffinity(None).expect("sched_getaffinity");
    let first = (0..CpuSet::MAX_CPU)
        .find(|&c| allowed.is_set(c))
        .expect("some CPU is allowed");
    let mut one = CpuSet::new();
    one.set(first);
    sched_setaffinity(None, &one).expect("sched_setaffinity");
}

#[test]
fn a_chain_of_callbacks_between_a_caller_thread_and_one_pool_thread() {
    // Both ORBs' threads on one CPU, as `orb-bench nest` runs them: there the peer, woken by
    // the caller's request, preempts the caller before it waits, and the callback reaches
    // A's pool thread first in some runs of a hundred chains (without `Lf::coming`, 4 runs of 5 failed).
    std::thread::spawn(|| {
        pin_to_one_cpu();
        for bidir in [false, true] {
            let a = protorb::Orb::builder().threads(1).build().unwrap();
            let b = protorb::Orb::builder()
                .threads(1)
                .bidir_accept(bidir)
                .build()
                .unwrap();
            let a_ref = activate_node(&a, "A");
            let b_ref = activate_node(&b, "B");
            for _ in 0..100 {
                chain_on_the_caller(&a, b_ref.clone(), a_ref.clone());
            }
            a.shutdown();
            b.shutdown();
        }
    })
    .join()
    .unwrap();
}
