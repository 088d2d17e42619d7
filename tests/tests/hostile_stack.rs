//! Issue 16, scenario 6: a peer that nests callbacks deeply must not overflow a thread's
//! stack (which aborts the process) below `max_nesting_depth`. The ORB checks the stack left
//! before each upcall and answers NO_RESOURCES instead, on any thread: an application thread
//! with a small stack here, and pool threads with a small stack.
//!
//! The scenario runs in a child process (this test binary, re-run with an environment
//! variable), because without the check it ends in SIGSEGV/abort, which no test can catch.

use orb_tests::activate_node;
use orb_tests::orbtest::{NodeClient, PingRequest};
use protorb::Exception;
use protorb::{minor, SystemExceptionKind};
use std::process::Command;

const CHILD_ENV: &str = "ORB_HOSTILE_STACK_CHILD";

/// Runs `child_scenario` in a child process and returns its stdout; panics with the
/// child's output if it did not exit normally.
fn run_child() -> String {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_scenario",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, "1")
        .output()
        .expect("child test process starts");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "child process died ({:?}): nesting overflowed a stack\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn deep_nesting_on_small_stacks_is_refused_not_fatal() {
    let out = run_child();
    assert!(
        out.contains("DEEP NO_RESOURCES stack"),
        "the 1000-deep chain must end in NO_RESOURCES (stack low):\n{out}"
    );
    assert!(
        out.contains("SHALLOW ok 20"),
        "after the refusal both ORBs still serve nested calls on the same threads:\n{out}"
    );
}

/// The child: ORB A serves on an application thread with a 1 MiB stack (no pool threads),
/// ORB B on one pool thread with a 1 MiB stack. A 1000-deep ping-pong between them (under
/// the default nesting limit of 1024) needs about 1.6 MiB on each side in release builds
/// (500 levels of about 3.3 KiB: `orb-bench nest`'s `stack_bytes_per_level`).
#[test]
fn child_scenario() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return; // only meaningful in the child process started by the test above
    }
    let small = 1 << 20;
    let a = protorb::Orb::builder().threads(0).build().unwrap();
    let b = protorb::Orb::builder()
        .threads(1)
        .thread_stack_size(small)
        .build()
        .unwrap();
    let a_ref = activate_node(&a, "A");
    let b_ref = activate_node(&b, "B");
    let caller = {
        let (a, a_ref, b_ref) = (a.clone(), a_ref.clone(), b_ref.clone());
        std::thread::Builder::new()
            .stack_size(small)
            .spawn(move || {
                let client = NodeClient::new(&a, b_ref);
                let ping = |depth| {
                    client.ping(PingRequest {
                        depth,
                        peer: Some(a_ref.clone()),
                        sleep_micros: 0,
                    })
                };
                match ping(1000) {
                    Err(Exception::System(e))
                        if e.kind == SystemExceptionKind::NO_RESOURCES
                            && e.minor == minor::STACK_LOW =>
                    {
                        println!("DEEP NO_RESOURCES stack");
                    }
                    other => println!("DEEP unexpected {other:?}"),
                }
                match ping(20) {
                    Ok(r) => println!("SHALLOW ok {}", r.depth_reached),
                    Err(e) => println!("SHALLOW failed {e:?}"),
                }
            })
            .unwrap()
    };
    caller.join().unwrap();
    a.shutdown();
    b.shutdown();
}
