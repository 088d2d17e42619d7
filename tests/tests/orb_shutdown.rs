//! Shutdown while calls are in flight: every caller returns, nothing hangs, no thread or socket
//! is left.

use orb_tests::activate_echo;
use orb_tests::orbtest::{EchoClient, SleepRequest};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The fd count is process-wide: run this file's tests one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .map(|d| d.count())
        .unwrap_or(0)
}

#[test]
fn server_shutdown_with_16_calls_in_flight() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let server = orb::Orb::builder()
        .threads(4)
        .shutdown_grace(Duration::from_secs(2))
        .build()
        .unwrap();
    let (_s, r) = activate_echo(&server);
    let client_orb = orb::Orb::builder().threads(0).build().unwrap();
    let c = Arc::new(EchoClient::new(&client_orb, r));
    let calls: Vec<_> = (0..16)
        .map(|_| {
            let c = c.clone();
            std::thread::spawn(move || c.sleep(SleepRequest { millis: 300 }))
        })
        .collect();
    std::thread::sleep(Duration::from_millis(100));
    let started = Instant::now();
    server.shutdown();
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "shutdown overran the grace period"
    );
    for h in calls {
        // Either the reply (the upcall finished in the grace period) or an error.
        let _ = h.join().expect("caller thread returned");
    }
    client_orb.shutdown();
}

#[test]
fn client_shutdown_wakes_its_waiters_and_leaves_nothing_open() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let before = open_fds();
    let server = orb::Orb::builder().threads(2).build().unwrap();
    let (_s, r) = activate_echo(&server);
    let client_orb = orb::Orb::builder().threads(2).build().unwrap();
    let c = Arc::new(EchoClient::new(&client_orb, r));
    let calls: Vec<_> = (0..16)
        .map(|_| {
            let c = c.clone();
            std::thread::spawn(move || c.sleep(SleepRequest { millis: 5_000 }))
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let started = Instant::now();
    client_orb.shutdown();
    for h in calls {
        let err = h.join().unwrap().unwrap_err();
        assert!(err.kind().is_some(), "{err}");
    }
    assert!(started.elapsed() < Duration::from_secs(2));
    server.shutdown();
    drop((c, client_orb, server));
    // Poll fds: epoll and eventfd of the two ORBs are gone too once the last handle drops.
    assert!(
        open_fds() <= before,
        "fds leaked: {} > {before}",
        open_fds()
    );
}
