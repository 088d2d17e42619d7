//! Shutdown while calls are in flight: every caller returns, nothing hangs, no thread or socket
//! is left, and no request runs twice.

use orb_tests::orbtest::{
    Balance, Echo, EchoClient, EchoSkeleton, EchoWithdrawError, Payload, SleepReply, SleepRequest,
    WithdrawRequest,
};
use orb_tests::{activate_echo, Gate};
use protorb::{minor, CompletionStatus, SystemException, SystemExceptionKind};
use std::sync::{mpsc, Arc};
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
    let server = protorb::Orb::builder()
        .threads(4)
        .shutdown_grace(Duration::from_secs(2))
        .build()
        .unwrap();
    let (_s, r) = activate_echo(&server);
    let client_orb = protorb::Orb::builder().threads(0).build().unwrap();
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
    let server = protorb::Orb::builder().threads(2).build().unwrap();
    let (_s, r) = activate_echo(&server);
    let client_orb = protorb::Orb::builder().threads(2).build().unwrap();
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

// Issue 16, scenario 5: shutdown keeps every request processed at most once. The servant
// below stands for user code that is stuck: its `sleep` ignores cancellation and blocks
// until the test opens a gate. Every wait is on a condition polled with a generous timeout;
// the only time bounds are loose upper bounds (CI reruns this file with both CPUs busy).

/// How long to wait for a condition before the test fails.
const PATIENCE: Duration = Duration::from_secs(10);

/// Polls `cond` until it holds; fails the test after [`PATIENCE`].
fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !cond() {
        assert!(
            Instant::now() < deadline,
            "timed out after {PATIENCE:?} waiting until {what}"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Opens the gate when dropped, also when an assertion fails: no test leaves a pool thread
/// blocked forever (a detached one would otherwise outlive its test).
struct OpenOnDrop(Arc<Gate>);

impl Drop for OpenOnDrop {
    fn drop(&mut self) {
        self.0.open();
    }
}

/// An Echo servant whose `sleep` blocks at its gate until the gate opens, deaf to
/// cancellation (user code that does not return); the gate counts its runs (`entered`) and
/// the runs that returned (`passed`).
struct StuckServant(Arc<Gate>);

impl Echo for StuckServant {
    fn echo(&self, _ctx: &protorb::Context, req: Payload) -> Result<Payload, protorb::Exception> {
        Ok(req)
    }

    fn sleep(
        &self,
        _ctx: &protorb::Context,
        _req: SleepRequest,
    ) -> Result<SleepReply, protorb::Exception> {
        self.0.wait();
        Ok(SleepReply { cancelled: false })
    }

    fn panic(&self, _ctx: &protorb::Context, _req: ()) -> Result<(), protorb::Exception> {
        Err(SystemException::bad_operation("Panic").into())
    }

    fn notify(&self, _ctx: &protorb::Context, _req: Payload) -> Result<(), protorb::Exception> {
        Ok(())
    }

    fn withdraw(
        &self,
        _ctx: &protorb::Context,
        _req: WithdrawRequest,
    ) -> Result<Balance, EchoWithdrawError> {
        Err(SystemException::bad_operation("Withdraw").into())
    }
}

const STUCK_KEY: &[u8] = b"stuck";

/// A port that was free a moment ago (the ORB under test binds it again, and so does the
/// server that replaces it).
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// A server ORB listening on 127.0.0.1:`port`, retrying while the port is still taken (by
/// an ORB being shut down).
fn server_on(port: u16, grace: Duration) -> protorb::Orb {
    let deadline = Instant::now() + PATIENCE;
    loop {
        match protorb::Orb::builder()
            .listen(("127.0.0.1", port))
            .threads(2)
            .shutdown_grace(grace)
            .build()
        {
            Ok(o) => return o,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => panic!("cannot listen on port {port} again: {e}"),
        }
    }
}

/// Calls `sleep` on `r` from a new thread with its own client ORB; the result comes back on
/// the channel.
fn call_sleep_in_background(
    r: &protorb::ObjectRef,
) -> (
    protorb::Orb,
    mpsc::Receiver<Result<SleepReply, protorb::Exception>>,
) {
    let client = protorb::Orb::builder().threads(0).build().unwrap();
    let stub = EchoClient::new(&client, r.clone());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(stub.sleep(SleepRequest { millis: 0 }));
    });
    (client, rx)
}

/// Runs `orb.shutdown()` on a new thread; how long it took comes back on the channel.
fn shutdown_in_background(orb: &protorb::Orb) -> mpsc::Receiver<Duration> {
    let orb = orb.clone();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let started = Instant::now();
        orb.shutdown();
        let _ = tx.send(started.elapsed());
    });
    rx
}

fn echo_payload() -> Payload {
    Payload {
        thread: 7,
        call: 1,
        data: b"still there?".to_vec(),
    }
}

/// A call whose upcall is still running when the grace period ends must not be resent: the
/// server closes that connection without CloseConnection, the caller sees COMM_FAILURE completed MAYBE, and a server
/// restarted on the same port never sees the call. Before the fix, the server sent
/// CloseConnection, the client resent the call to the new server, the call ran twice, and
/// the caller saw plain success.
#[test]
fn stuck_upcall_past_grace_fails_comm_failure_maybe_and_runs_once() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let gate = Gate::closed();
    let _release = OpenOnDrop(gate.clone());
    let port = free_port();
    let server = server_on(port, Duration::from_millis(200));
    let r = server.activate(STUCK_KEY, EchoSkeleton::new(StuckServant(gate.clone())));
    let (client, reply) = call_sleep_in_background(&r);
    wait_until("the upcall has started", || gate.entered() == 1);

    let shut = shutdown_in_background(&server);
    // The restarted server: same port, same key, and a servant behind an open gate that
    // returns at once (a resent call would succeed there). The runs on both servers count.
    let restarted = server_on(port, Duration::from_secs(2));
    let open_gate = Gate::opened();
    restarted.activate(
        STUCK_KEY,
        EchoSkeleton::new(StuckServant(open_gate.clone())),
    );
    let runs = || gate.entered() + open_gate.entered();

    let result = reply
        .recv_timeout(PATIENCE)
        .expect("the caller of the stuck upcall never returned");
    let err = match &result {
        Ok(reply) => panic!(
            "the call succeeded ({reply:?}) after the server shut down with it still running: \
             it was resent and ran {} times",
            runs()
        ),
        Err(e) => e.as_system().cloned().expect("a system exception"),
    };
    assert_eq!(
        (err.kind, err.completed),
        (SystemExceptionKind::COMM_FAILURE, CompletionStatus::Maybe),
        "the caller of an upcall still running at shutdown must see COMM_FAILURE completed \
         MAYBE, got {err}"
    );

    // The restarted server answers a fresh client: a resend would have reached it.
    let fresh = protorb::Orb::builder().threads(0).build().unwrap();
    let echoed = EchoClient::new(&fresh, r.clone())
        .echo(echo_payload())
        .expect("the restarted server answers");
    assert_eq!(echoed, echo_payload());
    assert_eq!(
        runs(),
        1,
        "the call ran more than once (resent to the restarted server)"
    );
    assert_eq!(
        restarted.stats().requests_received,
        1,
        "the restarted server received more than the fresh echo"
    );

    gate.open();
    shut.recv_timeout(PATIENCE)
        .expect("shutdown returned once the upcall was released");
    for o in [client, fresh, restarted, server] {
        o.shutdown();
    }
}

/// `shutdown` returns within about the grace period even though an upcall never returns
/// (its pool thread is detached). Before the fix it joined that thread, however long it took.
#[test]
fn shutdown_returns_within_grace_though_an_upcall_never_returns() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let gate = Gate::closed();
    let _release = OpenOnDrop(gate.clone());
    let server = protorb::Orb::builder()
        .threads(2)
        .shutdown_grace(Duration::from_millis(200))
        .build()
        .unwrap();
    let r = server.activate(STUCK_KEY, EchoSkeleton::new(StuckServant(gate.clone())));
    let (client, reply) = call_sleep_in_background(&r);
    wait_until("the upcall has started", || gate.entered() == 1);

    let took = shutdown_in_background(&server).recv_timeout(PATIENCE);
    let took = took.unwrap_or_else(|_| {
        panic!("shutdown() had not returned {PATIENCE:?} after it started (grace 200 ms)")
    });
    assert!(
        took < Duration::from_secs(1),
        "shutdown() took {took:?} with a 200 ms grace period"
    );
    assert!(
        server.is_shut_down(),
        "the ORB does not report its shutdown"
    );
    let result = reply
        .recv_timeout(PATIENCE)
        .expect("the caller of the stuck upcall never returned");
    assert!(result.is_err(), "the stuck call returned {result:?}");

    // The detached thread finishes its upcall once released (its reply goes nowhere).
    gate.open();
    wait_until("the released upcall has returned", || gate.passed() == 1);
    client.shutdown();
}

/// Once shutdown starts, a request that arrives is refused (TRANSIENT, SHUTTING_DOWN,
/// completed NO) instead of starting an upcall; the running upcall still gets its grace
/// period, its caller gets its reply, and shutdown returns as soon as it has finished. Before
/// the fix the pool kept starting new upcalls during the grace period.
#[test]
fn no_new_upcall_once_shutdown_starts_and_it_returns_when_upcalls_finish() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let grace = Duration::from_secs(5);
    let gate = Gate::closed();
    let _release = OpenOnDrop(gate.clone());
    let server = protorb::Orb::builder()
        .threads(2)
        .shutdown_grace(grace)
        .build()
        .unwrap();
    let r = server.activate(STUCK_KEY, EchoSkeleton::new(StuckServant(gate.clone())));
    // The late caller connects before shutdown (the listener closes when it starts).
    let late_orb = protorb::Orb::builder().threads(0).build().unwrap();
    let late = EchoClient::new(&late_orb, r.clone());
    assert_eq!(late.echo(echo_payload()).unwrap(), echo_payload());
    let (client, reply) = call_sleep_in_background(&r);
    wait_until("the upcall has started", || gate.entered() == 1);

    let shut = shutdown_in_background(&server);
    wait_until("shutdown has started", || server.is_shut_down());
    let asked = Instant::now();
    let refused = late.sleep(SleepRequest { millis: 0 });
    let answered_in = asked.elapsed();
    let err = match &refused {
        Ok(r) => panic!("a call made during shutdown ran: {r:?}"),
        Err(e) => e.as_system().cloned().expect("a system exception"),
    };
    assert_eq!(
        (err.kind, err.minor, err.completed),
        (
            SystemExceptionKind::TRANSIENT,
            minor::SHUTTING_DOWN,
            CompletionStatus::No
        ),
        "a call made during shutdown must be refused TRANSIENT (SHUTTING_DOWN) completed NO, \
         got {err} (sleep ran {} times)",
        gate.entered()
    );
    assert!(
        answered_in < grace / 2,
        "the refusal took {answered_in:?}: it waited for the grace period"
    );
    assert_eq!(gate.entered(), 1, "an upcall started during shutdown");

    // Release the running upcall: its caller gets the reply, and shutdown returns at once,
    // long before the grace period ends.
    let released = Instant::now();
    gate.open();
    let result = reply
        .recv_timeout(PATIENCE)
        .expect("the caller of the released upcall never returned");
    assert_eq!(
        result.expect("the upcall that finished in the grace period replied"),
        SleepReply { cancelled: false }
    );
    shut.recv_timeout(PATIENCE)
        .expect("shutdown returned once the upcall finished");
    let after_release = released.elapsed();
    assert!(
        after_release < grace / 2,
        "shutdown returned {after_release:?} after the last upcall was released (grace {grace:?})"
    );
    assert_eq!(gate.entered(), 1, "sleep ran more than once");
    client.shutdown();
    late_orb.shutdown();
}

/// Dropping the last handle of an ORB shuts it down, though its pool threads still run: its
/// port stops accepting, and a client's call fails (TRANSIENT or COMM_FAILURE) instead of
/// being served.
#[test]
fn dropping_the_last_handle_shuts_the_orb_down() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let server = protorb::Orb::builder().threads(2).build().unwrap();
    let (_s, r) = activate_echo(&server);
    let addr = server.listen_addrs()[0];
    let second = server.clone();
    let client_orb = protorb::Orb::builder().threads(0).build().unwrap();
    let c = EchoClient::new(&client_orb, r.clone());
    c.echo(Payload::default())
        .expect("served while a handle is held");
    drop(server);
    c.echo(Payload::default())
        .expect("served while a clone of the handle is held");
    let started = Instant::now();
    drop(second);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "dropping the last handle hung"
    );
    // A new connection is refused, and so is a call from a fresh client ORB.
    assert!(
        std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5)).is_err(),
        "the dropped ORB still accepts connections"
    );
    let fresh = protorb::Orb::builder().threads(0).build().unwrap();
    let e = EchoClient::new(&fresh, r)
        .echo_with_timeout(Payload::default(), Duration::from_secs(5))
        .expect_err("a dropped ORB served a call");
    let protorb::Exception::System(e) = e else {
        panic!("not a system exception: {e:?}")
    };
    assert!(
        matches!(
            e.kind,
            SystemExceptionKind::TRANSIENT | SystemExceptionKind::COMM_FAILURE
        ),
        "{e}"
    );
    // The client's cached connection to it is closed too.
    assert!(c.echo(Payload::default()).is_err());
}

/// A proxy (here a generated client) counts as a handle: the ORB it was made with keeps
/// serving after the application drops its `Orb`, until the proxy goes too.
#[test]
fn a_proxy_keeps_its_orb_alive() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let server = protorb::Orb::builder().threads(2).build().unwrap();
    let (_s, r) = activate_echo(&server);
    let addr = server.listen_addrs()[0];
    let own = EchoClient::new(&server, r.clone());
    drop(server);
    let client_orb = protorb::Orb::builder().threads(0).build().unwrap();
    let c = EchoClient::new(&client_orb, r);
    c.echo(Payload::default())
        .expect("an ORB whose proxy lives stopped serving");
    own.echo(Payload::default())
        .expect("the proxy's own ORB stopped working");
    drop(own);
    assert!(
        std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5)).is_err(),
        "the ORB outlived its last proxy"
    );
    client_orb.shutdown();
}
