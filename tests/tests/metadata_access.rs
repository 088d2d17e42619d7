//! Metadata in replies, per-call metadata through generated stubs, and the shipped
//! [`AccessControl`] interceptor (issue 20 item 3): a servant's and a server interceptor's
//! reply metadata reaching a client interceptor (remote, collocated, deferred, on an
//! exception, asynchronous calls included), a hostile server's reply metadata dropped without failing the call, the
//! generated `with_metadata` reaching `Context::metadata` on that call only, and access rules
//! refusing anonymous callers over plain TCP unless a rule allows them. No assertion depends
//! on timing.

use bytes::Bytes;
use orb_tests::orbtest::{EchoClient, EchoSkeleton, Payload};
use orb_tests::EchoServant;
use protorb::giop::ServiceContext;
use protorb::{
    minor, AccessControl, AccessRule, ClientInterceptor, ClientRequest, CompletionStatus, Context,
    Exception, Metadata, ObjectProxy, Orb, Outcome, Servant, ServerInterceptor, SystemException,
    SystemExceptionKind,
};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

type Log = Arc<Mutex<Vec<String>>>;

fn take(log: &Log) -> Vec<String> {
    std::mem::take(&mut *log.lock().unwrap())
}

/// `k=v` for each string pair, `0xid:len` for each binary entry, sorted (a deferred
/// answer's thread adds to the reply's metadata concurrently with the after hooks).
fn show(md: &Metadata) -> String {
    let mut seen: Vec<String> = md.iter_str().map(|(k, v)| format!("{k}={v}")).collect();
    seen.extend(md.iter().map(|(id, d)| format!("{id:#x}:{}", d.len())));
    seen.sort();
    seen.join(",")
}

/// Records the reply metadata each call's reply carried.
struct ReplySeen(Log);

impl ClientInterceptor for ReplySeen {
    fn receive_reply(&self, request: &ClientRequest<'_>, _outcome: Outcome<'_>) {
        self.0.lock().unwrap().push(format!(
            "{} [{}]",
            request.operation(),
            show(request.reply_metadata())
        ));
    }
}

/// Adds `by-interceptor=1` to every reply in its after hook; refuses operation `refused`.
struct AddsToReply;

impl ServerInterceptor for AddsToReply {
    fn receive_request(&self, ctx: &Context) -> Result<(), SystemException> {
        if ctx.operation() == "refused" {
            return Err(SystemException::new(
                SystemExceptionKind::NO_PERMISSION,
                0,
                CompletionStatus::No,
            ));
        }
        Ok(())
    }
    fn send_reply(&self, ctx: &Context, _outcome: Outcome<'_>) {
        ctx.reply_metadata_mut().insert_str("by-interceptor", "1");
    }
}

/// Sets reply metadata as the operation asks: `tag` a string pair and a binary entry,
/// `fail` the same then a system exception, `defer` the pair then a deferred answer from
/// another thread, anything else nothing.
struct Tagger {
    runs: Arc<AtomicUsize>,
}

impl Servant for Tagger {
    fn repository_id(&self) -> &'static str {
        "IDL:test/Tagger:1.0"
    }
    fn dispatch(&self, op: &str, body: Bytes, ctx: &Context) -> Result<Bytes, Exception> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        match op {
            "tag" | "fail" => {
                let mut md = ctx.reply_metadata_mut();
                md.insert_str("served-by", "tagger");
                md.insert(0x4142_0009, Bytes::from_static(b"\x01\x02"));
                drop(md);
                if op == "fail" {
                    return Err(SystemException::bad_param(1, "asked to fail").into());
                }
                Ok(body)
            }
            "defer" => {
                ctx.reply_metadata_mut().insert_str("deferred", "yes");
                let handle = ctx.defer()?;
                std::thread::spawn(move || {
                    handle
                        .context()
                        .reply_metadata_mut()
                        .insert_str("answered-by", "thread");
                    handle.reply(body)
                });
                Ok(Bytes::new())
            }
            _ => Ok(body),
        }
    }
}

fn tagger_server(interceptor: bool) -> (Orb, protorb::ObjectRef, Arc<AtomicUsize>) {
    let mut b = Orb::builder().threads(2);
    if interceptor {
        b = b.server_interceptor(AddsToReply);
    }
    let server = b.build().unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let target = server.activate("tagger", Tagger { runs: runs.clone() });
    (server, target, runs)
}

#[test]
fn a_servants_reply_metadata_reaches_the_client_interceptor() {
    let log: Log = Arc::default();
    let (server, target, _) = tagger_server(false);
    let client = Orb::builder()
        .threads(0)
        .no_listen()
        .client_interceptor(ReplySeen(log.clone()))
        .build()
        .unwrap();
    let proxy = ObjectProxy::new(&client, target);
    assert_eq!(
        &proxy.invoke("tag", Bytes::from("x"), None).unwrap()[..],
        b"x"
    );
    // Only on the reply whose servant set it: the server's context is reused, not its
    // reply metadata.
    proxy.invoke("plain", Bytes::new(), None).unwrap();
    let e = proxy.invoke("fail", Bytes::new(), None).unwrap_err();
    assert!(matches!(e, Exception::System(ref e) if e.kind == SystemExceptionKind::BAD_PARAM));
    assert_eq!(
        &proxy.invoke("defer", Bytes::from("d"), None).unwrap()[..],
        b"d"
    );
    assert_eq!(
        take(&log),
        [
            "tag [0x41420009:2,served-by=tagger]",
            "plain []",
            "fail [0x41420009:2,served-by=tagger]",
            "defer [answered-by=thread,deferred=yes]",
        ]
    );
    client.shutdown();
    server.shutdown();
}

#[test]
fn an_async_calls_interceptor_sees_its_reply_metadata() {
    let log: Log = Arc::default();
    let (server, target, _) = tagger_server(false);
    let client = Orb::builder()
        .threads(1)
        .no_listen()
        .client_interceptor(ReplySeen(log.clone()))
        .build()
        .unwrap();
    let proxy = ObjectProxy::new(&client, target);
    futures::executor::block_on(async {
        let tag = proxy.invoke_async("tag", Bytes::from("x"), None);
        let plain = proxy.invoke_async("plain", Bytes::new(), None);
        let defer = proxy.invoke_async("defer", Bytes::from("d"), None);
        assert_eq!(&tag.await.unwrap()[..], b"x");
        plain.await.unwrap();
        assert_eq!(&defer.await.unwrap()[..], b"d");
    });
    assert_eq!(
        take(&log),
        [
            "tag [0x41420009:2,served-by=tagger]",
            "plain []",
            "defer [answered-by=thread,deferred=yes]",
        ]
    );
    client.shutdown();
    server.shutdown();
}

#[test]
fn a_server_interceptor_adds_reply_metadata_even_to_a_refusal() {
    let log: Log = Arc::default();
    let (server, target, runs) = tagger_server(true);
    let client = Orb::builder()
        .threads(0)
        .no_listen()
        .client_interceptor(ReplySeen(log.clone()))
        .build()
        .unwrap();
    let proxy = ObjectProxy::new(&client, target);
    proxy.invoke("tag", Bytes::new(), None).unwrap();
    proxy.invoke("plain", Bytes::new(), None).unwrap();
    let e = proxy.invoke("refused", Bytes::new(), None).unwrap_err();
    assert!(matches!(e, Exception::System(ref e) if e.kind == SystemExceptionKind::NO_PERMISSION));
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    // The refusing interceptor's own after hook does not run: a second one's does.
    assert_eq!(
        take(&log),
        [
            "tag [0x41420009:2,by-interceptor=1,served-by=tagger]",
            "plain [by-interceptor=1]",
            "refused []",
        ]
    );
    client.shutdown();
    server.shutdown();
}

#[test]
fn collocated_replies_carry_metadata_too() {
    let log: Log = Arc::default();
    let orb = Orb::builder()
        .threads(1)
        .server_interceptor(AddsToReply)
        .client_interceptor(ReplySeen(log.clone()))
        .build()
        .unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let target = orb.activate("tagger", Tagger { runs: runs.clone() });
    let proxy = ObjectProxy::new(&orb, target);
    proxy.invoke("tag", Bytes::new(), None).unwrap();
    // On the same thread, so through the same (reused) server context: nothing left over.
    proxy.invoke("plain", Bytes::new(), None).unwrap();
    proxy.invoke("defer", Bytes::new(), None).unwrap();
    assert_eq!(
        take(&log),
        [
            "tag [0x41420009:2,by-interceptor=1,served-by=tagger]",
            "plain [by-interceptor=1]",
            "defer [answered-by=thread,by-interceptor=1,deferred=yes]",
        ]
    );
    assert_eq!(orb.stats().collocated_calls, 3);
    orb.shutdown();
}

/// An asynchronous call to a collocated object is answered on the calling thread when it is
/// made (not deferred): its future is ready at once, and its client interceptor sees the
/// reply's metadata as it does for a remote or a deferred answer. Many calls, from several
/// threads at once, each seeing its own reply's metadata.
#[test]
fn collocated_async_replies_answered_at_once_carry_metadata_too() {
    use futures::FutureExt;
    let log: Log = Arc::default();
    let orb = Orb::builder()
        .threads(1)
        .server_interceptor(AddsToReply)
        .client_interceptor(ReplySeen(log.clone()))
        .build()
        .unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let target = orb.activate("tagger", Tagger { runs: runs.clone() });
    let proxy = ObjectProxy::new(&orb, target);
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let proxy = proxy.clone();
            std::thread::spawn(move || {
                for i in 0..25 {
                    let op = if (t + i) % 2 == 0 { "tag" } else { "plain" };
                    let reply = proxy
                        .invoke_async(op, Bytes::from("x"), None)
                        .now_or_never()
                        .expect("a collocated call not deferred is ready at once");
                    assert_eq!(&reply.unwrap()[..], b"x");
                }
                let e = proxy
                    .invoke_async("fail", Bytes::new(), None)
                    .now_or_never()
                    .expect("ready at once")
                    .unwrap_err();
                assert!(
                    matches!(e, Exception::System(ref e) if e.kind == SystemExceptionKind::BAD_PARAM)
                );
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    let mut seen = take(&log);
    seen.sort();
    let mut want = Vec::new();
    want.extend(std::iter::repeat_n(
        "fail [0x41420009:2,by-interceptor=1,served-by=tagger]",
        4,
    ));
    want.extend(std::iter::repeat_n("plain [by-interceptor=1]", 50));
    want.extend(std::iter::repeat_n(
        "tag [0x41420009:2,by-interceptor=1,served-by=tagger]",
        50,
    ));
    assert_eq!(seen, want);
    assert_eq!(runs.load(Ordering::SeqCst), 104);
    let stats = orb.stats();
    assert_eq!(stats.collocated_calls, 104, "{stats:?}");
    assert_eq!(stats.connections_opened, 0, "{stats:?}");
    orb.shutdown();
}

/// Logs the request metadata every upcall saw.
struct RequestSeen(Log);

impl ServerInterceptor for RequestSeen {
    fn receive_request(&self, ctx: &Context) -> Result<(), SystemException> {
        self.0
            .lock()
            .unwrap()
            .push(format!("{} [{}]", ctx.operation(), show(ctx.metadata())));
        Ok(())
    }
}

#[test]
fn generated_with_metadata_attaches_to_that_call_only() {
    let log: Log = Arc::default();
    let server = Orb::builder()
        .threads(1)
        .server_interceptor(RequestSeen(log.clone()))
        .build()
        .unwrap();
    let target = server.activate("echo", EchoSkeleton::new(Arc::new(EchoServant::default())));
    let client_orb = Orb::builder().threads(0).no_listen().build().unwrap();
    let client = EchoClient::new(&client_orb, target);
    let req = || Payload {
        data: b"x".to_vec(),
        ..Default::default()
    };
    client.echo(req()).unwrap();
    let mut md = Metadata::new();
    md.insert_str("request", "2");
    assert_eq!(client.with_metadata(md).echo(req()).unwrap().data, b"x"[..]);
    client.echo(req()).unwrap();
    // Kept: every call through the copy carries it, the original still none.
    let mut md = Metadata::new();
    md.insert_str("tenant", "acme");
    let tenant = client.with_metadata(md);
    tenant.echo(req()).unwrap();
    tenant.echo(req()).unwrap();
    // In place of the copy's own.
    tenant.with_metadata(Metadata::new()).echo(req()).unwrap();
    client.echo(req()).unwrap();
    assert_eq!(
        take(&log),
        [
            "Echo []",
            "Echo [request=2]",
            "Echo []",
            "Echo [tenant=acme]",
            "Echo [tenant=acme]",
            "Echo []",
            "Echo []",
        ]
    );
    client_orb.shutdown();
    server.shutdown();
}

/// One GIOP message from `s`: (message type, whole message).
fn read_message(s: &mut std::net::TcpStream) -> (u8, Vec<u8>) {
    use std::io::Read;
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let mut msg = vec![0u8; 12];
    s.read_exact(&mut msg).unwrap();
    let size = if msg[6] & 1 == 1 {
        u32::from_le_bytes(msg[8..12].try_into().unwrap())
    } else {
        u32::from_be_bytes(msg[8..12].try_into().unwrap())
    } as usize;
    msg.resize(12 + size, 0);
    s.read_exact(&mut msg[12..]).unwrap();
    (msg[7], msg)
}

/// A server that answers each GIOP 1.2 request it reads with an empty octet sequence and
/// the next list of service contexts from `replies`.
fn raw_server(replies: Vec<Vec<ServiceContext>>) -> (u16, std::thread::JoinHandle<()>) {
    use protorb::giop::{write_reply, ReplyHeader, ReplyStatus, ServiceContextList, Version};
    use std::io::Write;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let t = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        for contexts in replies {
            let (kind, msg) = loop {
                let (kind, msg) = read_message(&mut s);
                if kind == 0 {
                    break (kind, msg);
                }
            };
            assert_eq!(kind, 0, "a Request");
            let id: [u8; 4] = msg[12..16].try_into().unwrap();
            let request_id = if msg[6] & 1 == 1 {
                u32::from_le_bytes(id)
            } else {
                u32::from_be_bytes(id)
            };
            let header = ReplyHeader {
                request_id,
                status: ReplyStatus::NoException,
                service_context: ServiceContextList(contexts.into_iter().collect()),
            };
            let mut buf = bytes::BytesMut::new();
            write_reply(&mut buf, Version::V1_2, &header, |w| w.write_octets(b"ok"));
            s.write_all(&buf).unwrap();
        }
    });
    (port, t)
}

/// A hostile server's reply metadata (too many entries, string pairs that do not decode) is
/// dropped: the call succeeds, the interceptor sees none; within the bounds it is seen.
#[test]
fn hostile_reply_metadata_is_dropped_not_failed() {
    let ctx = |id: u32, data: &'static [u8]| ServiceContext {
        id,
        data: Bytes::from_static(data),
    };
    let many = (0..=Metadata::MAX_ENTRIES as u32)
        .map(|i| ctx(0x100 + i, b""))
        .collect();
    let garbage = vec![ctx(
        Metadata::STRINGS_CONTEXT_ID,
        &[0, 0xff, 0xff, 0xff, 0x7f],
    )];
    let fine = vec![ctx(0x100, b"\x01")];
    let (port, server) = raw_server(vec![many, garbage, fine]);
    let log: Log = Arc::default();
    let client = Orb::builder()
        .threads(0)
        .no_listen()
        .client_interceptor(ReplySeen(log.clone()))
        .build()
        .unwrap();
    let target = client
        .string_to_object(&format!("corbaloc::1.2@127.0.0.1:{port}/x"))
        .unwrap();
    let proxy = ObjectProxy::new(&client, target);
    for op in ["many", "garbage", "fine"] {
        assert_eq!(&proxy.invoke(op, Bytes::new(), None).unwrap()[..], b"ok");
    }
    assert_eq!(take(&log), ["many []", "garbage []", "fine [0x100:1]"]);
    server.join().unwrap();
    client.shutdown();
}

fn no_permission(e: Exception) -> SystemException {
    match e {
        Exception::System(e) if e.kind == SystemExceptionKind::NO_PERMISSION => e,
        e => panic!("not NO_PERMISSION: {e:?}"),
    }
}

/// Over plain TCP the caller has no identity: refused unless a rule allows anonymous
/// callers, which then opens only what it names.
#[test]
fn access_control_refuses_anonymous_callers_unless_allowed() {
    let runs = Arc::new(AtomicUsize::new(0));
    let strict = Orb::builder()
        .threads(1)
        .server_interceptor(
            AccessControl::new().allow(AccessRule::name("alice").objects(["tagger"])),
        )
        .build()
        .unwrap();
    let target = strict.activate("tagger", Tagger { runs: runs.clone() });
    let client = Orb::builder().threads(0).no_listen().build().unwrap();
    let proxy = ObjectProxy::new(&client, target);
    let e = no_permission(proxy.invoke("plain", Bytes::new(), None).unwrap_err());
    assert_eq!(e.minor, minor::ACCESS_DENIED);
    assert_eq!(e.completed, CompletionStatus::No);
    let detail = e.detail().unwrap_or_default();
    assert!(detail.contains("anonymous"), "{detail}");
    assert!(
        detail.contains("\"plain\"") && detail.contains("\"tagger\""),
        "{detail}"
    );
    // Collocated calls are not anonymous network callers, and not allowed either.
    let local = ObjectProxy::new(&strict, proxy.target().clone());
    no_permission(local.invoke("plain", Bytes::new(), None).unwrap_err());
    assert_eq!(runs.load(Ordering::SeqCst), 0, "the servant ran");

    let open = Orb::builder()
        .threads(1)
        .server_interceptor(
            AccessControl::new()
                .allow(
                    AccessRule::anonymous()
                        .objects(["tagger"])
                        .operations(["plain"]),
                )
                .allow(AccessRule::collocated()),
        )
        .build()
        .unwrap();
    let target = open.activate("tagger", Tagger { runs: runs.clone() });
    open.activate("other", Tagger { runs: runs.clone() });
    let proxy = ObjectProxy::new(&client, target);
    assert_eq!(
        &proxy.invoke("plain", Bytes::from("p"), None).unwrap()[..],
        b"p"
    );
    // The standard operations follow the object.
    assert!(proxy.is_a("IDL:test/Tagger:1.0").unwrap());
    no_permission(proxy.invoke("tag", Bytes::new(), None).unwrap_err());
    let other = client
        .string_to_object(&format!(
            "corbaloc::1.2@127.0.0.1:{}/other",
            open.listen_addrs()[0].port()
        ))
        .unwrap();
    no_permission(
        ObjectProxy::new(&client, other.clone())
            .invoke("plain", Bytes::new(), None)
            .unwrap_err(),
    );
    // This ORB's own calls: allowed by the collocated rule, any operation, any object.
    let local = ObjectProxy::new(&open, other);
    local.invoke("tag", Bytes::new(), None).unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    client.shutdown();
    strict.shutdown();
    open.shutdown();
}
