//! Nested callbacks between two ORBs never deadlock, even with one thread on each side; with
//! nested upcalls disabled the same scenario ends in TIMEOUT instead of hanging.

use orb_tests::activate_node;
use orb_tests::orbtest::{NodeClient, PingRequest};
use std::time::{Duration, Instant};

fn big_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(256 << 20)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap()
}

#[test]
fn depth_200_with_zero_and_one_pool_threads() {
    big_stack(|| {
        let a = protorb::Orb::builder().threads(0).build().unwrap();
        let b = protorb::Orb::builder().threads(1).build().unwrap();
        let a_ref = activate_node(&a, "A");
        let b_ref = activate_node(&b, "B");
        let reply = NodeClient::new(&a, b_ref)
            .ping(PingRequest {
                depth: 200,
                peer: Some(a_ref),
                sleep_micros: 0,
            })
            .expect("nested ping completes");
        assert_eq!(reply.depth_reached, 200);
        assert_eq!(reply.trail.len(), 201);
        // Levels alternate between the nodes: B serves even depths from the top, A odd ones.
        for (i, t) in reply.trail.iter().rev().enumerate() {
            let expect = if i % 2 == 0 { "B@" } else { "A@" };
            assert!(t.starts_with(expect), "level {i} served by {t}");
        }
        // A has no pool thread: every A level ran on this (the calling) thread.
        let me = format!("A@{:?}", std::thread::current().id());
        assert!(reply
            .trail
            .iter()
            .filter(|t| t.starts_with("A@"))
            .all(|t| *t == me));
        a.shutdown();
        b.shutdown();
    });
}

#[test]
fn eight_concurrent_chains_of_depth_50() {
    let a = protorb::Orb::builder().threads(0).build().unwrap();
    let b = protorb::Orb::builder().threads(2).build().unwrap();
    let a_ref = activate_node(&a, "A");
    let b_ref = activate_node(&b, "B");
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let (a, a_ref, b_ref) = (a.clone(), a_ref.clone(), b_ref.clone());
            std::thread::Builder::new()
                .stack_size(64 << 20)
                .spawn(move || {
                    NodeClient::new(&a, b_ref)
                        .ping(PingRequest {
                            depth: 50,
                            peer: Some(a_ref),
                            sleep_micros: 0,
                        })
                        .expect("chain completes")
                        .depth_reached
                })
                .unwrap()
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap(), 50);
    }
    a.shutdown();
    b.shutdown();
}

#[test]
fn without_nested_upcalls_depth_2_times_out_instead_of_hanging() {
    let a = protorb::Orb::builder()
        .threads(0)
        .nested_upcalls(false)
        .call_timeout(Duration::from_secs(3))
        .build()
        .unwrap();
    let b = protorb::Orb::builder()
        .threads(1)
        .nested_upcalls(false)
        .call_timeout(Duration::from_millis(800))
        .build()
        .unwrap();
    let a_ref = activate_node(&a, "A");
    let b_ref = activate_node(&b, "B");
    let started = Instant::now();
    let err = NodeClient::new(&a, b_ref)
        .ping(PingRequest {
            depth: 2,
            peer: Some(a_ref),
            sleep_micros: 0,
        })
        .expect_err("classic thread pool deadlocks");
    assert_eq!(
        err.kind(),
        Some(protorb::SystemExceptionKind::TIMEOUT),
        "{err}"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    a.shutdown();
    b.shutdown();
}
