//! Deferred replies (AMH): a servant takes a `ReplyHandle` with `Context::defer`, returns at
//! once, and answers later from another thread. Every caller gets its own answer; a dropped
//! handle answers NO_RESPONSE; an answer for a caller that gave up is dropped and counted.
//! Timeouts here are hang guards only, except the one a test makes a caller give up with.

use orb_tests::orbtest::{
    Balance, Echo, EchoClient, EchoSkeleton, EchoWithdrawError, InsufficientFunds, Node,
    NodeClient, NodeSkeleton, Payload, PingReply, PingRequest, SleepReply, SleepRequest,
    WithdrawRequest,
};
use protorb::{minor, Context, Exception, ReplyHandle, SystemExceptionKind, TypedReplyHandle};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const HANG_GUARD: Duration = Duration::from_secs(20);

/// An echo servant that defers every reply:
/// - `Echo`: answered by a new thread, at once;
/// - `Sleep`: the handle is kept in `held` for the test to answer (or not);
/// - `Panic`: the handle is dropped unanswered;
/// - `Notify` (oneway): deferred and answered (the answer goes nowhere);
/// - `Withdraw`: answered through the typed handle with the user exception.
#[derive(Default)]
struct Deferring {
    held: Mutex<Vec<(TypedReplyHandle<SleepReply>, SleepRequest)>>,
    notified: AtomicUsize,
}

impl Echo for Deferring {
    fn echo(&self, ctx: &Context, req: Payload) -> Result<Payload, Exception> {
        let h = ctx.defer()?.typed::<Payload, Exception>();
        std::thread::spawn(move || h.reply(Ok(req)));
        Ok(Payload::default())
    }

    fn sleep(&self, ctx: &Context, req: SleepRequest) -> Result<SleepReply, Exception> {
        let h = ctx.defer()?.typed();
        self.held.lock().unwrap().push((h, req));
        Ok(SleepReply::default())
    }

    fn panic(&self, ctx: &Context, _req: ()) -> Result<(), Exception> {
        let h: ReplyHandle = ctx.defer()?;
        drop(h);
        Ok(())
    }

    fn notify(&self, ctx: &Context, req: Payload) -> Result<(), Exception> {
        let h = ctx.defer()?;
        self.notified.fetch_add(1, Ordering::SeqCst);
        std::thread::spawn(move || h.reply(protorb::codegen::encode(&req)));
        Ok(())
    }

    fn withdraw(&self, ctx: &Context, req: WithdrawRequest) -> Result<Balance, EchoWithdrawError> {
        let h = ctx
            .defer()
            .map_err(EchoWithdrawError::System)?
            .typed::<Balance, EchoWithdrawError>();
        std::thread::spawn(move || {
            h.reply(Err(InsufficientFunds {
                available: 0,
                requested: req.amount,
            }
            .into()))
        });
        Ok(Balance::default())
    }
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let until = Instant::now() + HANG_GUARD;
    while !f() {
        assert!(Instant::now() < until, "hang guard: {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A server ORB with the deferring servant, and a client ORB (no pool thread) with a stub.
fn setup(server_threads: usize) -> (protorb::Orb, Arc<Deferring>, protorb::Orb, EchoClient) {
    let server = protorb::Orb::builder()
        .threads(server_threads)
        .build()
        .unwrap();
    let servant = Arc::new(Deferring::default());
    let r = server.activate(&b"deferring"[..], EchoSkeleton::new(servant.clone()));
    let client_orb = protorb::Orb::builder().threads(0).build().unwrap();
    let client = EchoClient::new(&client_orb, r);
    (server, servant, client_orb, client)
}

#[test]
fn a_deferred_reply_from_another_thread_reaches_the_caller() {
    let (server, _s, client_orb, client) = setup(1);
    let p = Payload {
        thread: 1,
        call: 2,
        data: b"later".to_vec(),
    };
    let got = client.echo_with_timeout(p.clone(), HANG_GUARD).unwrap();
    assert_eq!(got, p);
    let err = client.withdraw(WithdrawRequest { amount: 5 }).unwrap_err();
    assert!(
        matches!(
            err,
            EchoWithdrawError::InsufficientFunds(InsufficientFunds {
                available: 0,
                requested: 5
            })
        ),
        "{err:?}"
    );
    client_orb.shutdown();
    server.shutdown();
}

#[test]
fn many_deferred_replies_answered_out_of_order_from_several_threads() {
    const CALLS: u32 = 48;
    let (server, servant, client_orb, client) = setup(1);
    let client = Arc::new(client);
    let callers: Vec<_> = (0..CALLS)
        .map(|i| {
            let c = client.clone();
            std::thread::spawn(move || {
                c.sleep_with_timeout(SleepRequest { millis: i }, HANG_GUARD)
                    .map(|r| (i, r))
            })
        })
        .collect();
    wait_until("every call deferred", || {
        servant.held.lock().unwrap().len() == CALLS as usize
    });
    assert_eq!(
        server.stats().connections_accepted,
        1,
        "one shared connection"
    );
    // Answer in an order unrelated to arrival, from four threads; each answer carries the
    // request's own tag (millis odd → cancelled flag true), so a mix-up shows.
    let mut held = std::mem::take(&mut *servant.held.lock().unwrap());
    held.sort_by_key(|(_, req)| (req.millis * 37) % CALLS);
    let mut groups: Vec<Vec<_>> = (0..4).map(|_| Vec::new()).collect();
    for (i, h) in held.into_iter().enumerate() {
        groups[i % 4].push(h);
    }
    let answerers: Vec<_> = groups
        .into_iter()
        .map(|g| {
            std::thread::spawn(move || {
                for (h, req) in g.into_iter().rev() {
                    h.reply(Ok(SleepReply {
                        cancelled: req.millis % 2 == 1,
                    }));
                }
            })
        })
        .collect();
    for a in answerers {
        a.join().unwrap();
    }
    for c in callers {
        let (i, reply) = c.join().unwrap().unwrap();
        assert_eq!(reply.cancelled, i % 2 == 1, "call {i} got another's answer");
    }
    client_orb.shutdown();
    server.shutdown();
}

#[test]
fn a_dropped_handle_answers_no_response() {
    let (server, _s, client_orb, client) = setup(1);
    let err = client.panic_with_timeout((), HANG_GUARD).unwrap_err();
    let Exception::System(e) = err else {
        panic!("{err:?}")
    };
    assert_eq!(e.kind, SystemExceptionKind::NO_RESPONSE, "{e}");
    assert_eq!(e.minor, minor::REPLY_HANDLE_DROPPED);
    client_orb.shutdown();
    server.shutdown();
}

#[test]
fn an_answer_after_the_caller_timed_out_is_dropped_and_counted() {
    let (server, servant, client_orb, client) = setup(1);
    let err = client
        .sleep_with_timeout(SleepRequest { millis: 1 }, Duration::from_millis(100))
        .unwrap_err();
    assert_eq!(err.kind(), Some(SystemExceptionKind::TIMEOUT), "{err}");
    let (h, _) = servant
        .held
        .lock()
        .unwrap()
        .pop()
        .expect("the call was deferred");
    // The caller sends CancelRequest when it times out: the handle sees it.
    wait_until("the handle sees the cancellation", || h.is_cancelled());
    assert!(
        h.deadline().is_some(),
        "the caller's deadline reaches the handle"
    );
    h.reply(Ok(SleepReply { cancelled: false }));
    wait_until("the late answer is counted", || {
        server.stats().deferred_replies_dropped == 1
    });
    // The server and the connection carry on.
    let p = Payload {
        thread: 3,
        call: 4,
        data: vec![1, 2, 3],
    };
    assert_eq!(client.echo_with_timeout(p.clone(), HANG_GUARD).unwrap(), p);
    assert_eq!(
        client_orb.stats().late_replies_dropped,
        0,
        "nothing was sent late"
    );
    client_orb.shutdown();
    server.shutdown();
}

#[test]
fn a_oneway_request_may_defer_and_its_answer_goes_nowhere() {
    let (server, servant, client_orb, client) = setup(1);
    client
        .notify(Payload {
            thread: 1,
            call: 1,
            data: vec![],
        })
        .unwrap();
    wait_until("the oneway ran", || {
        servant.notified.load(Ordering::SeqCst) == 1
    });
    let p = Payload {
        thread: 5,
        call: 6,
        data: vec![7],
    };
    assert_eq!(client.echo_with_timeout(p.clone(), HANG_GUARD).unwrap(), p);
    client_orb.shutdown();
    server.shutdown();
}

#[test]
fn shutdown_does_not_wait_forever_for_a_held_handle() {
    let server = protorb::Orb::builder()
        .threads(1)
        .shutdown_grace(Duration::from_millis(200))
        .build()
        .unwrap();
    let servant = Arc::new(Deferring::default());
    let r = server.activate(&b"deferring"[..], EchoSkeleton::new(servant.clone()));
    let client_orb = protorb::Orb::builder().threads(0).build().unwrap();
    let client = EchoClient::new(&client_orb, r);
    let caller = std::thread::spawn(move || {
        client.sleep_with_timeout(SleepRequest { millis: 0 }, HANG_GUARD)
    });
    wait_until("the call was deferred", || {
        servant.held.lock().unwrap().len() == 1
    });
    let started = Instant::now();
    server.shutdown();
    assert!(
        started.elapsed() < HANG_GUARD,
        "shutdown hung on a held handle"
    );
    let err = caller.join().unwrap().unwrap_err();
    assert_eq!(err.kind(), Some(SystemExceptionKind::COMM_FAILURE), "{err}");
    let (h, _) = servant.held.lock().unwrap().pop().unwrap();
    assert!(
        h.is_cancelled(),
        "the connection closed: the handle sees it"
    );
    h.reply(Ok(SleepReply::default()));
    client_orb.shutdown();
}

/// A node that defers each ping and answers it from a thread of its own, which makes the
/// nested call to the peer first.
struct DeferringNode {
    orb: protorb::Orb,
    me: Mutex<Option<protorb::ObjectRef>>,
}

impl Node for DeferringNode {
    fn ping(&self, ctx: &Context, req: PingRequest) -> Result<PingReply, Exception> {
        let h = ctx.defer()?.typed::<PingReply, Exception>();
        let orb = self.orb.clone();
        let me = self.me.lock().unwrap().clone();
        std::thread::spawn(move || {
            if req.depth == 0 {
                return h.reply(Ok(PingReply {
                    depth_reached: 0,
                    trail: vec![],
                }));
            }
            let peer = NodeClient::new(&orb, req.peer.clone().unwrap_or_default());
            let r = peer
                .ping_with_timeout(
                    PingRequest {
                        depth: req.depth - 1,
                        peer: me,
                        sleep_micros: 0,
                    },
                    HANG_GUARD,
                )
                .map(|mut r| {
                    r.depth_reached += 1;
                    r
                });
            h.reply(r);
        });
        Ok(PingReply::default())
    }
}

fn deferring_node(orb: &protorb::Orb, name: &str) -> protorb::ObjectRef {
    let n = Arc::new(DeferringNode {
        orb: orb.clone(),
        me: Mutex::new(None),
    });
    let r = orb.activate(name.as_bytes().to_vec(), NodeSkeleton::new(n.clone()));
    *n.me.lock().unwrap() = Some(r.clone());
    r
}

#[test]
fn nested_callbacks_answered_from_other_threads_with_one_orb_thread_per_side() {
    let a = protorb::Orb::builder().threads(1).build().unwrap();
    let b = protorb::Orb::builder().threads(1).build().unwrap();
    let ra = deferring_node(&a, "a");
    let rb = deferring_node(&b, "b");
    let caller = protorb::Orb::builder().threads(0).build().unwrap();
    let reply = NodeClient::new(&caller, rb)
        .ping_with_timeout(
            PingRequest {
                depth: 6,
                peer: Some(ra),
                sleep_micros: 0,
            },
            HANG_GUARD,
        )
        .unwrap();
    assert_eq!(reply.depth_reached, 6);
    caller.shutdown();
    a.shutdown();
    b.shutdown();
}

/// A hand-written servant whose handle answers inside `dispatch` itself, before the ORB knows
/// where the reply goes (the other order of the deferral's two halves), and whose returned
/// value, a conflicting error, is ignored.
struct AnswersAtOnce;

impl protorb::Servant for AnswersAtOnce {
    fn repository_id(&self) -> &'static str {
        "IDL:orbtest/AnswersAtOnce:1.0"
    }

    fn dispatch(
        &self,
        _op: &str,
        body: bytes::Bytes,
        ctx: &Context,
    ) -> Result<bytes::Bytes, Exception> {
        ctx.defer()?.reply(body);
        Err(protorb::SystemException::internal("ignored: the request was deferred").into())
    }
}

#[test]
fn an_answer_given_before_dispatch_returns_is_sent_and_the_return_value_ignored() {
    let server = protorb::Orb::builder().threads(1).build().unwrap();
    let r = server.activate(&b"at-once"[..], AnswersAtOnce);
    let client_orb = protorb::Orb::builder().threads(0).build().unwrap();
    let proxy = protorb::ObjectProxy::new(&client_orb, r);
    for i in 0..20u8 {
        let out = proxy
            .invoke("op", bytes::Bytes::from(vec![i; 3]), Some(HANG_GUARD))
            .unwrap();
        assert_eq!(&out[..], &[i; 3]);
    }
    client_orb.shutdown();
    server.shutdown();
}
