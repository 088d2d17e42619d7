//! Collocation: a call to an object active in the same ORB is dispatched on the calling
//! thread, without a socket, with the semantics of a remote call (results, user and system
//! exceptions, panics, deadlines, oneways, deferred replies); `collocation(false)` sends it
//! over loopback instead. Timeouts are hang guards, except where a test exceeds one on
//! purpose.

use orb_tests::orbtest::{
    Balance, Echo, EchoClient, EchoSkeleton, EchoWithdrawError, InsufficientFunds, Payload,
    SleepReply, SleepRequest, WithdrawRequest,
};
use protorb::{minor, Context, Exception, ObjectProxy, SystemExceptionKind};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const HANG_GUARD: Duration = Duration::from_secs(20);

/// Echoes what the servant saw: its peer and deadline (in `data`), and the serving thread.
#[derive(Default)]
struct Observer {
    notified: Mutex<Vec<(Payload, std::thread::ThreadId)>>,
    /// Deferred requests never answered (`sleep` with `NEVER_MILLIS`).
    unanswered: Mutex<Vec<protorb::ReplyHandle>>,
}

/// `sleep` with this many milliseconds defers and never answers.
const NEVER_MILLIS: u32 = 7777;

impl Echo for Observer {
    fn echo(&self, ctx: &Context, req: Payload) -> Result<Payload, Exception> {
        let seen = format!(
            "peer={:?} deadline={} op={}",
            ctx.peer(),
            ctx.deadline().is_some(),
            ctx.operation()
        );
        Ok(Payload {
            data: seen.into_bytes(),
            ..req
        })
    }

    fn sleep(&self, ctx: &Context, req: SleepRequest) -> Result<SleepReply, Exception> {
        if req.millis == 0 {
            // Deferred, answered from another thread.
            let h = ctx.defer()?.typed::<SleepReply, Exception>();
            std::thread::spawn(move || h.reply(Ok(SleepReply { cancelled: false })));
            return Ok(SleepReply::default());
        }
        if req.millis == NEVER_MILLIS {
            let h = ctx.defer()?;
            self.unanswered.lock().unwrap().push(h);
            return Ok(SleepReply::default());
        }
        std::thread::sleep(Duration::from_millis(req.millis.into()));
        Ok(SleepReply { cancelled: false })
    }

    fn panic(&self, _ctx: &Context, _req: ()) -> Result<(), Exception> {
        panic!("collocated servant panics on purpose");
    }

    fn notify(&self, _ctx: &Context, req: Payload) -> Result<(), Exception> {
        self.notified
            .lock()
            .unwrap()
            .push((req, std::thread::current().id()));
        Ok(())
    }

    fn withdraw(&self, _ctx: &Context, req: WithdrawRequest) -> Result<Balance, EchoWithdrawError> {
        Err(InsufficientFunds {
            available: 0,
            requested: req.amount,
        }
        .into())
    }
}

fn setup(collocation: bool) -> (protorb::Orb, Arc<Observer>, EchoClient) {
    let orb = protorb::Orb::builder()
        .threads(1)
        .collocation(collocation)
        .build()
        .unwrap();
    let s = Arc::new(Observer::default());
    let r = orb.activate(&b"observer"[..], EchoSkeleton::new(s.clone()));
    // Through the string form, as a reference from elsewhere would arrive.
    let r = orb.string_to_object(&orb.object_to_string(&r)).unwrap();
    let client = EchoClient::new(&orb, r);
    (orb, s, client)
}

fn echo_seen(client: &EchoClient) -> String {
    let p = client
        .echo_with_timeout(
            Payload {
                thread: 1,
                call: 1,
                data: vec![],
            },
            HANG_GUARD,
        )
        .unwrap();
    assert_eq!((p.thread, p.call), (1, 1));
    String::from_utf8(p.data).unwrap()
}

#[test]
fn a_collocated_call_skips_the_socket() {
    let (orb, _s, client) = setup(true);
    assert_eq!(echo_seen(&client), "peer=None deadline=true op=Echo");
    let stats = orb.stats();
    assert_eq!(stats.collocated_calls, 1, "{stats:?}");
    assert_eq!(stats.requests_sent, 0, "{stats:?}");
    assert_eq!(stats.connections_opened, 0, "{stats:?}");
    // The standard operations too.
    assert!(client.proxy().is_a("IDL:orbtest/Echo:1.0").unwrap());
    assert!(!client.proxy().is_a("IDL:orbtest/Node:1.0").unwrap());
    assert!(!client.proxy().non_existent().unwrap());
    assert_eq!(orb.stats().requests_sent, 0);
    orb.shutdown();
}

#[test]
fn without_collocation_the_call_goes_over_loopback() {
    let (orb, _s, client) = setup(false);
    let seen = echo_seen(&client);
    assert!(seen.starts_with("peer=Some(127.0.0.1:"), "{seen}");
    let stats = orb.stats();
    assert_eq!(stats.collocated_calls, 0, "{stats:?}");
    assert_eq!(stats.requests_sent, 1, "{stats:?}");
    assert_eq!(stats.requests_received, 1, "{stats:?}");
    orb.shutdown();
}

#[test]
fn another_orbs_object_is_not_collocated() {
    let (server, _s, _) = setup(true);
    let r = server.reference("IDL:orbtest/Echo:1.0", "observer".into());
    let client_orb = protorb::Orb::builder().threads(0).build().unwrap();
    let seen = echo_seen(&EchoClient::new(&client_orb, r));
    assert!(seen.starts_with("peer=Some("), "{seen}");
    assert_eq!(client_orb.stats().collocated_calls, 0);
    client_orb.shutdown();
    server.shutdown();
}

#[test]
fn collocated_exceptions_are_those_of_a_remote_call() {
    let (orb, _s, client) = setup(true);
    // User exception.
    let err = client.withdraw(WithdrawRequest { amount: 9 }).unwrap_err();
    assert!(
        matches!(
            err,
            EchoWithdrawError::InsufficientFunds(InsufficientFunds {
                available: 0,
                requested: 9
            })
        ),
        "{err:?}"
    );
    // System exception: an unknown operation.
    let err = ObjectProxy::new(&orb, client.object_ref().clone())
        .invoke("NoSuchOp", bytes::Bytes::new(), Some(HANG_GUARD))
        .unwrap_err();
    assert_eq!(
        err.kind(),
        Some(SystemExceptionKind::BAD_OPERATION),
        "{err}"
    );
    // A panicking servant.
    let err = client.panic_with_timeout((), HANG_GUARD).unwrap_err();
    let Exception::System(e) = err else {
        panic!("{err:?}")
    };
    assert_eq!(e.kind, SystemExceptionKind::UNKNOWN, "{e}");
    assert_eq!(e.minor, minor::SERVANT_PANIC);
    assert_eq!(
        e.detail(),
        Some("servant panicked (see the server's log)"),
        "the panic's text stays in the log, as over a connection"
    );
    // An object not active here: OBJECT_NOT_EXIST (over the socket, as the key is unknown).
    let gone = orb.reference("IDL:orbtest/Echo:1.0", "nobody".into());
    let err = EchoClient::new(&orb, gone)
        .echo_with_timeout(Payload::default(), HANG_GUARD)
        .unwrap_err();
    assert_eq!(
        err.kind(),
        Some(SystemExceptionKind::OBJECT_NOT_EXIST),
        "{err}"
    );
    orb.shutdown();
}

#[test]
fn a_collocated_call_past_its_deadline_is_a_timeout() {
    let (orb, _s, client) = setup(true);
    let err = client
        .sleep_with_timeout(SleepRequest { millis: 300 }, Duration::from_millis(20))
        .unwrap_err();
    assert_eq!(err.kind(), Some(SystemExceptionKind::TIMEOUT), "{err}");
    assert_eq!(orb.stats().requests_sent, 0);
    orb.shutdown();
}

#[test]
fn a_collocated_oneway_runs_inline() {
    let (orb, s, client) = setup(true);
    let p = Payload {
        thread: 4,
        call: 2,
        data: vec![9],
    };
    client.notify(p.clone()).unwrap();
    // Run on this thread before `notify` returned.
    let notified = s.notified.lock().unwrap();
    assert_eq!(notified.len(), 1);
    assert_eq!(notified[0].0, p);
    assert_eq!(notified[0].1, std::thread::current().id());
    orb.shutdown();
}

#[test]
fn a_collocated_deferred_reply_reaches_the_caller() {
    let (orb, _s, client) = setup(true);
    let started = Instant::now();
    let r = client
        .sleep_with_timeout(SleepRequest { millis: 0 }, HANG_GUARD)
        .unwrap();
    assert!(!r.cancelled);
    assert!(started.elapsed() < HANG_GUARD);
    assert_eq!(orb.stats().requests_sent, 0);
    orb.shutdown();
}

#[test]
fn collocated_nested_calls_run_on_the_calling_thread() {
    let orb = protorb::Orb::builder().threads(1).build().unwrap();
    let a = orb_tests::activate_node(&orb, "a");
    let b = orb_tests::activate_node(&orb, "b");
    let reply = orb_tests::orbtest::NodeClient::new(&orb, a)
        .ping_with_timeout(
            orb_tests::orbtest::PingRequest {
                depth: 20,
                peer: Some(b),
                sleep_micros: 0,
            },
            HANG_GUARD,
        )
        .unwrap();
    assert_eq!(reply.depth_reached, 20);
    let here = format!("{:?}", std::thread::current().id());
    assert!(
        reply.trail.iter().all(|t| t.ends_with(&here)),
        "{:?}",
        reply.trail
    );
    let stats = orb.stats();
    assert_eq!(stats.collocated_calls, 21, "{stats:?}");
    assert_eq!(stats.requests_sent, 0, "{stats:?}");
    orb.shutdown();
}

/// An asynchronous call to a collocated object runs the servant on the calling thread when
/// it is made: the future is ready at its first poll, with no socket and no event loop.
#[test]
fn an_async_collocated_call_is_ready_at_once() {
    use futures::FutureExt;
    let (orb, _s, client) = setup(true);
    let p = Payload {
        thread: 2,
        call: 3,
        data: vec![],
    };
    let reply = client
        .echo_async(p)
        .now_or_never()
        .expect("ready at the first poll")
        .unwrap();
    assert_eq!((reply.thread, reply.call), (2, 3));
    assert_eq!(
        String::from_utf8(reply.data).unwrap(),
        "peer=None deadline=true op=Echo"
    );
    let err = client
        .withdraw_async(WithdrawRequest { amount: 5 })
        .now_or_never()
        .expect("ready at the first poll")
        .unwrap_err();
    assert!(
        matches!(err, EchoWithdrawError::InsufficientFunds(ref f) if f.requested == 5),
        "{err:?}"
    );
    let stats = orb.stats();
    assert_eq!(stats.collocated_calls, 2, "{stats:?}");
    assert_eq!(stats.requests_sent, 0, "{stats:?}");
    assert_eq!(stats.connections_opened, 0, "{stats:?}");
    orb.shutdown();
}

/// A collocated servant that defers its answer does not hold the asynchronous caller up:
/// the answer, given later from another thread, completes the future.
#[test]
fn an_async_collocated_deferred_reply_completes_the_future() {
    let (orb, _s, client) = setup(true);
    let f = client.sleep_async_with_timeout(SleepRequest { millis: 0 }, HANG_GUARD);
    let r = futures::executor::block_on(f).unwrap();
    assert!(!r.cancelled);
    assert_eq!(orb.stats().requests_sent, 0);
    orb.shutdown();
}

/// A deferred collocated answer that never comes: the future resolves with TIMEOUT at its
/// deadline (the ORB's timer; nothing else wakes it), and the request is marked cancelled.
#[test]
fn an_async_collocated_deferred_reply_that_never_comes_times_out() {
    let (orb, s, client) = setup(true);
    let f = client.sleep_async_with_timeout(
        SleepRequest {
            millis: NEVER_MILLIS,
        },
        Duration::from_millis(100),
    );
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(futures::executor::block_on(f));
    });
    let err = rx.recv_timeout(HANG_GUARD).expect("hung").unwrap_err();
    assert_eq!(err.kind(), Some(SystemExceptionKind::TIMEOUT), "{err}");
    let handles = std::mem::take(&mut *s.unanswered.lock().unwrap());
    assert_eq!(handles.len(), 1);
    assert!(handles[0].is_cancelled());
    assert_eq!(orb.stats().requests_sent, 0);
    orb.shutdown();
}
