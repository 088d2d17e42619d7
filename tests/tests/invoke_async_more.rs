//! The rest of the asynchronous client API: `ObjectProxy::invoke_cdr_async` (results, user
//! and system exceptions, GIOP 1.0 bodies), `is_a_async` and `non_existent_async` (remote
//! and collocated, the collocated ones answered without a socket), and oneways as futures
//! (`invoke_oneway_async` and the generated `_async` methods of oneway operations): many in
//! flight from several tasks, then a two-way call on the same connection that finds them all
//! delivered, in order.
//!
//! No assertion depends on timing: the timeouts below are hang guards, far above what any
//! step needs on a loaded machine.

use bytes::Bytes;
use futures::FutureExt;
use orb_tests::orbtest::*;
use orb_tests::{activate_echo, within, EchoServant};
use protorb::cdr::CdrReply;
use protorb::{
    CompletionStatus, Context, Exception, ObjectProxy, Orb, Servant, SystemException,
    SystemExceptionKind, UserException,
};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

const HANG_GUARD: Duration = Duration::from_secs(30);

/// A plain servant answering any operation: `raise` with a user exception (its members the
/// request's octets), `fail` with BAD_PARAM, anything else with the request's octets and
/// the operation's name appended.
struct Plain;

const RAISED: &str = "IDL:test/Plain/Raised:1.0";

impl Servant for Plain {
    fn repository_id(&self) -> &'static str {
        "IDL:test/Plain:1.0"
    }
    fn dispatch(&self, op: &str, body: Bytes, _ctx: &Context) -> Result<Bytes, Exception> {
        match op {
            "raise" => Err(UserException::new(RAISED, body).into()),
            "fail" => Err(SystemException::bad_param(7, "asked to fail").into()),
            op => {
                let mut out = body.to_vec();
                out.extend_from_slice(op.as_bytes());
                Ok(Bytes::from(out))
            }
        }
    }
}

fn server() -> Orb {
    Orb::builder().threads(2).build().unwrap()
}

fn client() -> Orb {
    Orb::builder().threads(1).no_listen().build().unwrap()
}

fn block_on<F: Future + Send + 'static>(f: F) -> F::Output
where
    F::Output: Send + 'static,
{
    within(HANG_GUARD.as_secs(), move || futures::executor::block_on(f))
}

fn octets(reply: CdrReply) -> Vec<u8> {
    match reply {
        CdrReply::NoException(body) => body.reader().read_octets().unwrap().to_vec(),
        other => panic!("expected results, got {other:?}"),
    }
}

#[test]
fn invoke_cdr_async_returns_results_and_user_exceptions_and_fails_with_system_ones() {
    let server = server();
    let target = server.activate("plain", Plain);
    let client = client();
    let proxy = ObjectProxy::new(&client, target);
    // All started before any is awaited.
    let ok: Vec<_> = (0..50u8)
        .map(|i| proxy.invoke_cdr_async("echo", &|w| w.write_octets(&[i; 3]), None))
        .collect();
    let raised = proxy.invoke_cdr_async("raise", &|w| w.write_octets(b"why"), None);
    let failed = proxy.invoke_cdr_async("fail", &|w| w.write_octets(b""), None);
    let (ok, raised, failed) = block_on(async move {
        (
            futures::future::join_all(ok).await,
            raised.await,
            failed.await,
        )
    });
    for (i, r) in ok.into_iter().enumerate() {
        let mut want = vec![i as u8; 3];
        want.extend_from_slice(b"echo");
        assert_eq!(octets(r.unwrap()), want, "reply {i}");
    }
    match raised.unwrap() {
        CdrReply::UserException {
            repository_id,
            members,
        } => {
            assert_eq!(repository_id, RAISED);
            assert_eq!(members.reader().read_octets().unwrap(), b"why");
        }
        other => panic!("expected the user exception, got {other:?}"),
    }
    let e = failed.unwrap_err();
    assert_eq!(e.kind, SystemExceptionKind::BAD_PARAM, "{e}");
    assert_eq!(e.minor, 7, "{e}");
    assert_eq!(
        e.completed,
        CompletionStatus::No,
        "as the servant raised it: {e}"
    );
    client.shutdown();
    server.shutdown();
}

/// A corbaloc reference means IIOP 1.0, whose request body follows its header unaligned:
/// operation names of every length mod 8 put the body at each position the header allows.
#[test]
fn invoke_cdr_async_over_giop_1_0_writes_bodies_at_any_offset() {
    let server = server();
    server.activate("plain", Plain);
    let port = server.listen_addrs()[0].port();
    let client = client();
    let target = client
        .string_to_object(&format!("corbaloc::127.0.0.1:{port}/plain"))
        .unwrap();
    assert_eq!(target.primary().unwrap().version.minor, 0);
    let proxy = ObjectProxy::new(&client, target);
    let ops: Vec<String> = (1..=16).map(|n| "o".repeat(n)).collect();
    let calls: Vec<_> = ops
        .iter()
        .map(|op| proxy.invoke_cdr_async(op, &|w| w.write_octets(b"0123456789"), None))
        .collect();
    let replies = block_on(futures::future::join_all(calls));
    for (op, r) in ops.iter().zip(replies) {
        let mut want = b"0123456789".to_vec();
        want.extend_from_slice(op.as_bytes());
        assert_eq!(octets(r.unwrap()), want, "operation {op}");
    }
    client.shutdown();
    server.shutdown();
}

/// Answers each of `n` requests on one connection with LOCATION_FORWARD to `to`.
fn forwarder(to: protorb::ObjectRef, n: usize) -> (u16, std::thread::JoinHandle<()>) {
    use bytes::BytesMut;
    use protorb::giop::{
        write_reply, Frame, GiopCodec, Message, ReplyHeader, ReplyStatus, Version,
    };
    use std::io::{Read, Write};
    use tokio_util::codec::Decoder;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let t = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut codec = GiopCodec::default();
        let mut buf = BytesMut::new();
        let mut chunk = [0u8; 4096];
        for _ in 0..n {
            let id = loop {
                if let Some(Frame {
                    message: Message::Request(r),
                    ..
                }) = codec.decode(&mut buf).unwrap()
                {
                    break r.header.request_id;
                }
                let got = s.read(&mut chunk).unwrap();
                assert!(got > 0, "client closed early");
                buf.extend_from_slice(&chunk[..got]);
            };
            let mut out = BytesMut::new();
            let header = ReplyHeader {
                request_id: id,
                status: ReplyStatus::LocationForward,
                service_context: Default::default(),
            };
            write_reply(&mut out, Version::V1_2, &header, |w| to.encode(w));
            s.write_all(&out).unwrap();
        }
        let _ = s.read(&mut chunk);
    });
    (port, t)
}

/// A forwarded CDR call is written again without the caller's closure, from the encodings
/// kept for each alignment: here to an IIOP 1.0 reference, whose bodies start unaligned.
#[test]
fn invoke_cdr_async_follows_a_forward_to_a_giop_1_0_reference() {
    let server = server();
    server.activate("plain", Plain);
    let port = server.listen_addrs()[0].port();
    let client = client();
    let real = client
        .string_to_object(&format!("corbaloc::127.0.0.1:{port}/plain"))
        .unwrap();
    let ops: Vec<String> = (1..=8).map(|n| "f".repeat(n)).collect();
    let (fport, forwarder) = forwarder(real, ops.len());
    let target = protorb::ObjectRef::new("IDL:test/Plain:1.0", "127.0.0.1", fport, &b"k"[..]);
    let proxy = ObjectProxy::new(&client, target);
    let calls: Vec<_> = ops
        .iter()
        .map(|op| {
            proxy.invoke_cdr_async(
                op,
                &|w| {
                    w.write_octets(b"fwd");
                },
                None,
            )
        })
        .collect();
    let replies = block_on(futures::future::join_all(calls));
    for (op, r) in ops.iter().zip(replies) {
        let mut want = b"fwd".to_vec();
        want.extend_from_slice(op.as_bytes());
        assert_eq!(octets(r.unwrap()), want, "operation {op}");
    }
    client.shutdown();
    forwarder.join().unwrap();
    server.shutdown();
}

#[test]
fn is_a_async_and_non_existent_async_of_a_remote_object() {
    let server = server();
    let (_, echo) = activate_echo(&server);
    let gone = server.reference(
        EchoClient::REPOSITORY_ID,
        Bytes::from_static(b"no-such-key"),
    );
    let client = client();
    let proxy = ObjectProxy::new(&client, echo);
    let gone = ObjectProxy::new(&client, gone);
    let yes: Vec<_> = (0..20)
        .map(|_| proxy.is_a_async(EchoClient::REPOSITORY_ID))
        .collect();
    let no = proxy.is_a_async("IDL:test/SomethingElse:1.0");
    let alive = proxy.non_existent_async();
    let dead = gone.non_existent_async();
    let (yes, no, alive, dead) = block_on(async move {
        (
            futures::future::join_all(yes).await,
            no.await,
            alive.await,
            dead.await,
        )
    });
    assert!(yes.into_iter().all(|r| r.unwrap()));
    assert!(!no.unwrap());
    assert!(!alive.unwrap());
    assert!(dead.unwrap(), "OBJECT_NOT_EXIST is the answer true");
    // The same answers as the blocking calls.
    assert!(proxy.is_a(EchoClient::REPOSITORY_ID).unwrap());
    assert!(gone.non_existent().unwrap());
    assert_eq!(client.stats().connections_opened, 1);
    client.shutdown();
    server.shutdown();
}

#[test]
fn is_a_async_and_non_existent_async_of_a_collocated_object_answer_without_a_socket() {
    let orb = Orb::builder().threads(1).build().unwrap();
    let (_, echo) = activate_echo(&orb);
    let plain = orb.activate("plain", Plain);
    let proxy = ObjectProxy::new(&orb, echo);
    let plain = ObjectProxy::new(&orb, plain);
    // Answered on this thread when the call is made: ready at the first poll.
    let ready = |f: protorb::BoolReplyFuture| f.now_or_never().expect("ready at once").unwrap();
    assert!(ready(proxy.is_a_async(EchoClient::REPOSITORY_ID)));
    assert!(!ready(proxy.is_a_async("IDL:test/Plain:1.0")));
    assert!(ready(plain.is_a_async("IDL:test/Plain:1.0")));
    assert!(!ready(proxy.non_existent_async()));
    let cdr = plain
        .invoke_cdr_async("echo", &|w| w.write_octets(b"x"), None)
        .now_or_never()
        .expect("ready at once");
    assert_eq!(octets(cdr.unwrap()), b"xecho");
    let stats = orb.stats();
    assert_eq!(stats.connections_opened, 0, "{stats:?}");
    assert_eq!(stats.connections_accepted, 0, "{stats:?}");
    assert_eq!(stats.collocated_calls, 5, "{stats:?}");
    orb.shutdown();
}

/// Oneways from several tasks, each awaited before the next is sent, then a two-way call on
/// the same connection: the server (one thread, so requests run in the order they arrive)
/// has run every oneway by the time it answers, each task's in its order.
#[test]
fn many_oneway_futures_are_delivered_in_order_before_a_later_two_way_call() {
    const TASKS: u32 = 8;
    const EACH: u32 = 50;
    let server = Orb::builder().threads(1).build().unwrap();
    let (servant, echo) = activate_echo(&server);
    let client = Orb::builder().threads(2).no_listen().build().unwrap();
    let stub = EchoClient::new(&client, echo);
    let s = stub.clone();
    within(120, move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(4)
            .build()
            .unwrap();
        let tasks: Vec<_> = (0..TASKS)
            .map(|t| {
                let s = s.clone();
                rt.spawn(async move {
                    for i in 0..EACH {
                        let req = Payload {
                            thread: t,
                            call: i,
                            data: vec![t as u8; i as usize],
                        };
                        // Half through the generated stub, half through the proxy.
                        let sent = if i % 2 == 0 {
                            s.notify_async(req).await
                        } else {
                            s.proxy()
                                .invoke_oneway_async("Notify", protorb::codegen::encode(&req))
                                .await
                        };
                        sent.unwrap_or_else(|e| panic!("oneway {t}/{i}: {e}"));
                    }
                })
            })
            .collect();
        for t in tasks {
            rt.block_on(t).unwrap();
        }
    });
    let last = Payload {
        thread: 99,
        call: 0,
        data: b"after".to_vec(),
    };
    assert_eq!(stub.echo(last.clone()).unwrap(), last);
    let notified = servant.notified.lock().unwrap().clone();
    assert_eq!(notified.len(), (TASKS * EACH) as usize);
    for t in 0..TASKS {
        let calls: Vec<u32> = notified
            .iter()
            .filter(|p| p.thread == t)
            .map(|p| p.call)
            .collect();
        assert_eq!(calls, (0..EACH).collect::<Vec<_>>(), "task {t}'s oneways");
    }
    let stats = client.stats();
    assert_eq!(stats.connections_opened, 1, "{stats:?}");
    client.shutdown();
    server.shutdown();
}

#[test]
fn oneway_futures_are_send_static_and_ready_when_returned() {
    fn send_static<F: Future + Send + 'static>(f: F) -> F {
        f
    }
    fn unpin<T: Unpin + Send + 'static>() {}
    unpin::<protorb::OnewayFuture>();
    unpin::<protorb::CdrReplyFuture>();
    unpin::<protorb::BoolReplyFuture>();
    let server = Orb::builder().threads(1).build().unwrap();
    let (servant, echo) = activate_echo(&server);
    let client = client();
    let stub = EchoClient::new(&client, echo);
    let req = |call| Payload {
        thread: 1,
        call,
        data: Vec::new(),
    };
    // Handed to the connection before they are returned: nothing left to wait for.
    send_static(stub.notify_async(req(0)))
        .now_or_never()
        .expect("ready at once")
        .unwrap();
    send_static(stub.notify_async_with_timeout(req(1), HANG_GUARD))
        .now_or_never()
        .expect("ready at once")
        .unwrap();
    stub.echo(req(2)).unwrap();
    let calls: Vec<u32> = servant
        .notified
        .lock()
        .unwrap()
        .iter()
        .map(|p| p.call)
        .collect();
    assert_eq!(calls, [0, 1]);
    client.shutdown();
    server.shutdown();
}

/// A collocated oneway runs its servant on the calling thread, as the blocking one does.
#[test]
fn a_collocated_oneway_future_has_run_the_servant() {
    let orb = Orb::builder().threads(1).build().unwrap();
    let servant = Arc::new(EchoServant::default());
    let echo = orb.activate(&b"echo"[..], EchoSkeleton::new(servant.clone()));
    let stub = EchoClient::new(&orb, echo);
    let req = Payload {
        thread: 3,
        call: 4,
        data: b"local".to_vec(),
    };
    stub.notify_async(req.clone())
        .now_or_never()
        .expect("ready at once")
        .unwrap();
    assert_eq!(*servant.notified.lock().unwrap(), [req]);
    assert_eq!(orb.stats().connections_opened, 0);
    orb.shutdown();
}

/// A oneway that cannot be handed over: its future's error says why, as the blocking call's.
#[test]
fn a_oneway_future_to_nowhere_fails_with_transient() {
    let (_held, port) = orb_tests::refusing_port();
    let client = client();
    let target = client
        .string_to_object(&format!("corbaloc::1.2@127.0.0.1:{port}/nobody"))
        .unwrap();
    let stub = EchoClient::new(&client, target);
    let req = Payload::default();
    let e = stub
        .notify_async_with_timeout(req.clone(), HANG_GUARD)
        .now_or_never()
        .expect("ready at once")
        .unwrap_err();
    assert_eq!(e.kind, SystemExceptionKind::TRANSIENT, "{e}");
    let blocking = stub.notify(req).unwrap_err();
    assert_eq!(blocking.kind, e.kind, "{blocking}");
    assert_eq!(blocking.minor, e.minor, "{blocking}");
    client.shutdown();
}

/// Records each call's operation and outcome as its client interceptor's after hook sees it.
struct Outcomes(Arc<std::sync::Mutex<Vec<String>>>);

impl protorb::ClientInterceptor for Outcomes {
    fn receive_reply(&self, request: &protorb::ClientRequest<'_>, outcome: protorb::Outcome<'_>) {
        let outcome = match outcome {
            protorb::Outcome::SystemException(e) => format!("{:?}", e.kind),
            other => format!("{other:?}"),
        };
        self.0
            .lock()
            .unwrap()
            .push(format!("{} {outcome}", request.operation()));
    }
}

/// The asynchronous calls' interceptors see what the blocking calls' see: `_non_existent`
/// of a missing object is OBJECT_NOT_EXIST to them (the caller reads it as true), a CDR
/// call's user exception is a user exception.
#[test]
fn async_calls_show_their_interceptors_the_blocking_calls_outcomes() {
    let server = server();
    let plain = server.activate("plain", Plain);
    let gone = server.reference("IDL:test/Plain:1.0", Bytes::from_static(b"no-such-key"));
    let log = Arc::new(std::sync::Mutex::new(Vec::new()));
    let client = Orb::builder()
        .threads(1)
        .no_listen()
        .client_interceptor(Outcomes(log.clone()))
        .build()
        .unwrap();
    let plain = ObjectProxy::new(&client, plain);
    let gone = ObjectProxy::new(&client, gone);
    let body = |w: &mut protorb::cdr::CdrWriter<'_>| w.write_octets(b"");
    assert!(gone.non_existent().unwrap());
    plain.invoke_cdr("raise", &body, None).unwrap();
    plain.is_a("IDL:test/Plain:1.0").unwrap();
    let blocking = std::mem::take(&mut *log.lock().unwrap());
    let dead = gone.non_existent_async();
    let raised = plain.invoke_cdr_async("raise", &body, None);
    let is_a = plain.is_a_async("IDL:test/Plain:1.0");
    let (dead, raised, is_a) = block_on(async move { (dead.await, raised.await, is_a.await) });
    assert!(dead.unwrap());
    assert!(matches!(raised.unwrap(), CdrReply::UserException { .. }));
    assert!(is_a.unwrap());
    let asynchronous = std::mem::take(&mut *log.lock().unwrap());
    assert_eq!(
        blocking,
        [
            "_non_existent OBJECT_NOT_EXIST",
            "raise UserException",
            "_is_a Ok"
        ]
    );
    assert_eq!(asynchronous, blocking);
    client.shutdown();
    server.shutdown();
}
