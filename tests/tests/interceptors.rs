//! Interceptors and metadata (issue 20 part 3): hook order, metadata from client to server,
//! a server interceptor refusing a request before the servant runs, a client interceptor
//! failing a call before anything is sent, and trace-id continuity across a nested callback
//! chain A→B→A with [`TraceContext`]. No assertion depends on timing.

use bytes::Bytes;
use protorb::{
    ClientInterceptor, ClientRequest, CompletionStatus, Context, Exception, Metadata, ObjectProxy,
    ObjectRef, Orb, Outcome, Servant, ServerInterceptor, SystemException, SystemExceptionKind,
    TraceContext,
};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

type Log = Arc<Mutex<Vec<String>>>;

fn log() -> Log {
    Arc::new(Mutex::new(Vec::new()))
}

fn take(log: &Log) -> Vec<String> {
    std::mem::take(&mut *log.lock().unwrap())
}

fn outcome_name(o: Outcome<'_>) -> String {
    match o {
        Outcome::Ok => "ok".into(),
        Outcome::UserException => "user".into(),
        Outcome::SystemException(e) => format!("{:?}", e.kind),
        Outcome::Deferred => "deferred".into(),
        _ => "other".into(),
    }
}

/// Echoes its body; counts its upcalls; logs what metadata it saw.
struct Echo {
    runs: Arc<AtomicUsize>,
    log: Log,
}

impl Servant for Echo {
    fn repository_id(&self) -> &'static str {
        "IDL:test/Echo:1.0"
    }
    fn dispatch(&self, op: &str, body: Bytes, ctx: &Context) -> Result<Bytes, Exception> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        let md = ctx.metadata();
        let mut seen: Vec<String> = md.iter_str().map(|(k, v)| format!("{k}={v}")).collect();
        seen.extend(md.iter().map(|(id, d)| format!("{id:#x}:{}", d.len())));
        self.log
            .lock()
            .unwrap()
            .push(format!("servant {op} [{}]", seen.join(",")));
        match op {
            "fail" => Err(SystemException::bad_param(1, "asked to fail").into()),
            _ => Ok(body),
        }
    }
}

struct Client(&'static str, Log);

impl ClientInterceptor for Client {
    fn send_request(&self, request: &mut ClientRequest<'_>) -> Result<(), SystemException> {
        self.1
            .lock()
            .unwrap()
            .push(format!("client {} before {}", self.0, request.operation()));
        request
            .metadata_mut()
            .insert_str(format!("from-{}", self.0), "1");
        if request.operation() == "blocked" && self.0 == "c1" {
            return Err(SystemException::new(
                SystemExceptionKind::NO_PERMISSION,
                7,
                CompletionStatus::No,
            ));
        }
        Ok(())
    }
    fn receive_reply(&self, request: &ClientRequest<'_>, outcome: Outcome<'_>) {
        self.1.lock().unwrap().push(format!(
            "client {} after {} {}",
            self.0,
            request.operation(),
            outcome_name(outcome)
        ));
    }
}

struct Server(&'static str, Log);

impl ServerInterceptor for Server {
    fn receive_request(&self, ctx: &Context) -> Result<(), SystemException> {
        self.1
            .lock()
            .unwrap()
            .push(format!("server {} before {}", self.0, ctx.operation()));
        if ctx.operation() == "secret"
            && self.0 == "s1"
            && ctx.metadata().get_str("token") != Some("ok")
        {
            return Err(SystemException::new(
                SystemExceptionKind::NO_PERMISSION,
                0,
                CompletionStatus::No,
            )
            .with_detail("no token"));
        }
        Ok(())
    }
    fn send_reply(&self, ctx: &Context, outcome: Outcome<'_>) {
        self.1.lock().unwrap().push(format!(
            "server {} after {} {}",
            self.0,
            ctx.operation(),
            outcome_name(outcome)
        ));
    }
}

struct Setup {
    client: Orb,
    server: Orb,
    target: ObjectRef,
    runs: Arc<AtomicUsize>,
    log: Log,
}

/// A server ORB with two server interceptors and a client ORB with two client interceptors,
/// all logging to one log (the servant too).
fn setup() -> Setup {
    let log = log();
    let server = Orb::builder()
        .threads(1)
        .server_interceptor(Server("s1", log.clone()))
        .server_interceptor(Server("s2", log.clone()))
        .build()
        .unwrap();
    let client = Orb::builder()
        .threads(0)
        .no_listen()
        .client_interceptor(Client("c1", log.clone()))
        .client_interceptor(Client("c2", log.clone()))
        .build()
        .unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let target = server.activate(
        "echo",
        Echo {
            runs: runs.clone(),
            log: log.clone(),
        },
    );
    Setup {
        client,
        server,
        target,
        runs,
        log,
    }
}

#[test]
fn hooks_run_in_order_around_a_call() {
    let s = setup();
    let proxy = ObjectProxy::new(&s.client, s.target.clone());
    assert_eq!(
        &proxy.invoke("hello", Bytes::from("x"), None).unwrap()[..],
        b"x"
    );
    assert_eq!(
        take(&s.log),
        [
            "client c1 before hello",
            "client c2 before hello",
            "server s1 before hello",
            "server s2 before hello",
            "servant hello [from-c1=1,from-c2=1]",
            "server s2 after hello ok",
            "server s1 after hello ok",
            "client c2 after hello ok",
            "client c1 after hello ok",
        ]
    );
    // A system exception from the servant: every after hook sees it.
    let e = proxy.invoke("fail", Bytes::new(), None).unwrap_err();
    assert!(matches!(e, Exception::System(ref e) if e.kind == SystemExceptionKind::BAD_PARAM));
    let got = take(&s.log);
    assert_eq!(got[5], "server s2 after fail BAD_PARAM");
    assert_eq!(got[8], "client c1 after fail BAD_PARAM");
    s.client.shutdown();
    s.server.shutdown();
}

#[test]
fn metadata_travels_from_proxy_to_servant() {
    let log = log();
    let server = Orb::builder().threads(1).build().unwrap();
    // A listening client: its first request also carries BiDir listen points, which, like
    // the deadline context, are the ORB's own and not metadata.
    let client = Orb::builder().threads(0).build().unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let target = server.activate(
        "echo",
        Echo {
            runs: runs.clone(),
            log: log.clone(),
        },
    );
    // None sent: the servant sees none (the ORB's own deadline context is not metadata).
    let plain = ObjectProxy::new(&client, target.clone());
    plain.invoke("a", Bytes::new(), None).unwrap();
    assert_eq!(take(&log), ["servant a []"]);
    // Strings and a binary entry.
    let mut md = Metadata::new();
    md.insert_str("tenant", "acme");
    md.insert_str("user", "zoé");
    md.insert(0x4142_0001, Bytes::from_static(b"\x00\x01\x02"));
    let with = plain.clone().with_metadata(md);
    with.invoke("b", Bytes::new(), None).unwrap();
    with.invoke_oneway("c", Bytes::new()).unwrap();
    plain.invoke("d", Bytes::new(), None).unwrap(); // orders after the oneway on one connection
    assert_eq!(
        take(&log),
        [
            "servant b [tenant=acme,user=zoé,0x41420001:3]",
            "servant c [tenant=acme,user=zoé,0x41420001:3]",
            "servant d []",
        ]
    );
    client.shutdown();
    server.shutdown();
}

#[test]
fn collocated_calls_carry_metadata_and_run_the_hooks() {
    let log = log();
    let orb = Orb::builder()
        .threads(1)
        .client_interceptor(Client("c1", log.clone()))
        .server_interceptor(Server("s1", log.clone()))
        .build()
        .unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let target = orb.activate(
        "echo",
        Echo {
            runs,
            log: log.clone(),
        },
    );
    let mut md = Metadata::new();
    md.insert_str("k", "v");
    ObjectProxy::new(&orb, target)
        .with_metadata(md)
        .invoke("x", Bytes::new(), None)
        .unwrap();
    assert_eq!(orb.stats().collocated_calls, 1);
    assert_eq!(
        take(&log),
        [
            "client c1 before x",
            "server s1 before x",
            "servant x [k=v,from-c1=1]",
            "server s1 after x ok",
            "client c1 after x ok",
        ]
    );
    orb.shutdown();
}

#[test]
fn a_server_interceptor_refuses_before_the_servant_runs() {
    let s = setup();
    let proxy = ObjectProxy::new(&s.client, s.target.clone());
    let e = proxy.invoke("secret", Bytes::new(), None).unwrap_err();
    let Exception::System(e) = e else {
        panic!("{e:?}")
    };
    assert_eq!(e.kind, SystemExceptionKind::NO_PERMISSION);
    assert_eq!(e.completed, CompletionStatus::No);
    assert_eq!(e.detail(), Some("no token"));
    assert_eq!(s.runs.load(Ordering::SeqCst), 0, "the servant ran");
    assert_eq!(
        take(&s.log),
        [
            "client c1 before secret",
            "client c2 before secret",
            "server s1 before secret",
            // s1 refused: neither s2's before hook nor the refuser's own after hook runs.
            "client c2 after secret NO_PERMISSION",
            "client c1 after secret NO_PERMISSION",
        ]
    );
    // With the token it passes.
    let mut md = Metadata::new();
    md.insert_str("token", "ok");
    proxy
        .clone()
        .with_metadata(md)
        .invoke("secret", Bytes::new(), None)
        .unwrap();
    assert_eq!(s.runs.load(Ordering::SeqCst), 1);
    s.client.shutdown();
    s.server.shutdown();
}

#[test]
fn a_client_interceptor_fails_a_call_before_it_is_sent() {
    let s = setup();
    let proxy = ObjectProxy::new(&s.client, s.target.clone());
    let e = proxy.invoke("blocked", Bytes::new(), None).unwrap_err();
    assert!(
        matches!(e, Exception::System(ref e) if e.kind == SystemExceptionKind::NO_PERMISSION && e.minor == 7),
        "{e:?}"
    );
    // Only c1 ran (it failed the call, so its own after hook does not run): c2 never saw
    // it, and neither did the server.
    assert_eq!(take(&s.log), ["client c1 before blocked"]);
    assert_eq!(s.runs.load(Ordering::SeqCst), 0);
    assert_eq!(s.client.stats().requests_sent, 0, "a request was sent");
    s.client.shutdown();
    s.server.shutdown();
}

/// The hops served, in order: (hop name, the trace id it served under).
type Seen = Arc<Mutex<Vec<(String, Option<String>)>>>;

/// One hop of a chain: records the trace id it serves under, then calls `next` with one hop
/// less, until none is left.
struct Hop {
    name: &'static str,
    next: OnceLock<ObjectRef>,
    seen: Seen,
}

impl Servant for Hop {
    fn repository_id(&self) -> &'static str {
        "IDL:test/Hop:1.0"
    }
    fn dispatch(&self, _op: &str, body: Bytes, ctx: &Context) -> Result<Bytes, Exception> {
        self.seen
            .lock()
            .unwrap()
            .push((self.name.into(), TraceContext::current_trace_id()));
        let left = body.first().copied().unwrap_or(0);
        if left > 0 {
            let orb = ctx.orb().expect("serving ORB");
            let next = self.next.get().expect("next hop").clone();
            ObjectProxy::new(&orb, next).invoke("hop", Bytes::from(vec![left - 1]), None)?;
        }
        Ok(Bytes::new())
    }
}

#[test]
fn trace_id_continues_across_a_nested_chain() {
    let traced = || {
        Orb::builder()
            .threads(1)
            .client_interceptor(TraceContext)
            .server_interceptor(TraceContext)
            .build()
            .unwrap()
    };
    let (a, b) = (traced(), traced());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let hop = |name| Hop {
        name,
        next: OnceLock::new(),
        seen: seen.clone(),
    };
    let (ha, hb) = (Arc::new(hop("A")), Arc::new(hop("B")));
    let a_ref = a.activate_arc("hop", ha.clone());
    let b_ref = b.activate_arc("hop", hb.clone());
    ha.next.set(b_ref).unwrap();
    hb.next.set(a_ref.clone()).unwrap();
    let client = Orb::builder()
        .threads(0)
        .no_listen()
        .client_interceptor(TraceContext)
        .build()
        .unwrap();
    assert_eq!(TraceContext::current_trace_id(), None);
    // A → B → A, twice: each top-level call is a trace of its own.
    let mut ids = Vec::new();
    for _ in 0..2 {
        ObjectProxy::new(&client, a_ref.clone())
            .invoke("hop", Bytes::from(vec![2u8]), None)
            .unwrap();
        let chain = std::mem::take(&mut *seen.lock().unwrap());
        let names: Vec<&str> = chain.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["A", "B", "A"]);
        let first = chain[0].1.clone().expect("a trace id");
        assert_eq!(first.len(), 32);
        assert!(
            chain.iter().all(|(_, t)| t.as_deref() == Some(&first)),
            "{chain:?}"
        );
        ids.push(first);
    }
    assert_ne!(ids[0], ids[1], "two top-level calls share a trace");
    // The calling thread serves nothing: it has no current trace.
    assert_eq!(TraceContext::current_trace_id(), None);
    client.shutdown();
    a.shutdown();
    b.shutdown();
}

/// A raw GIOP 1.2 two-way request of `op` on key `echo` with these service contexts and an
/// empty octet sequence as body.
fn raw_request(id: u32, op: &str, contexts: Vec<protorb::giop::ServiceContext>) -> Bytes {
    use protorb::giop::{write_request, RequestHeader, ServiceContextList, TargetAddress, Version};
    let header = RequestHeader {
        deadline: None,
        request_id: id,
        response_flags: 3,
        target: TargetAddress::Key(Bytes::from_static(b"echo").into()),
        operation: op.into(),
        service_context: ServiceContextList(contexts.into_iter().collect()),
    };
    let mut buf = bytes::BytesMut::new();
    write_request(&mut buf, Version::V1_2, &header, |w| w.write_octets(b""));
    buf.freeze()
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

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// A peer sending too many contexts, or a string metadata context that does not decode, has
/// its request refused with BAD_PARAM before the servant (or any interceptor) runs; the
/// connection stays usable.
#[test]
fn hostile_metadata_is_refused_with_bad_param() {
    use protorb::giop::ServiceContext;
    use std::io::Write;
    let log = log();
    let server = Orb::builder()
        .threads(1)
        .server_interceptor(Server("s1", log.clone()))
        .build()
        .unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    server.activate(
        "echo",
        Echo {
            runs: runs.clone(),
            log: log.clone(),
        },
    );
    let ctx = |id: u32, data: &'static [u8]| ServiceContext {
        id,
        data: Bytes::from_static(data),
    };
    let mut s = std::net::TcpStream::connect(server.listen_addrs()[0]).unwrap();
    let many = (0..=Metadata::MAX_ENTRIES as u32)
        .map(|i| ctx(0x100 + i, b""))
        .collect();
    let garbage = vec![ctx(
        Metadata::STRINGS_CONTEXT_ID,
        &[0, 0xff, 0xff, 0xff, 0x7f],
    )];
    for (id, contexts) in [(1, many), (2, garbage)] {
        s.write_all(&raw_request(id, "x", contexts)).unwrap();
        let (kind, msg) = read_message(&mut s);
        assert_eq!(kind, 1, "a Reply");
        assert!(
            contains(&msg, b"IDL:omg.org/CORBA/BAD_PARAM:1.0"),
            "{msg:?}"
        );
    }
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert!(take(&log).is_empty(), "an interceptor ran");
    // Within the bounds, on the same connection: served, metadata seen.
    let fine = (0..3).map(|i| ctx(0x100 + i, b"\x01")).collect();
    s.write_all(&raw_request(3, "y", fine)).unwrap();
    let (kind, msg) = read_message(&mut s);
    assert_eq!(kind, 1);
    assert!(!contains(&msg, b"IDL:omg.org/CORBA/"), "{msg:?}");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(
        take(&log),
        [
            "server s1 before y",
            "servant y [0x100:1,0x101:1,0x102:1]",
            "server s1 after y ok"
        ]
    );
    server.shutdown();
}

/// Asynchronous calls run the same hooks (before when made, after when the future resolves)
/// and carry the proxy's metadata; a client interceptor failing one resolves it at once.
#[test]
fn asynchronous_calls_run_the_hooks_and_carry_metadata() {
    let s = setup();
    let client = Orb::builder()
        .threads(1)
        .no_listen()
        .client_interceptor(Client("c1", s.log.clone()))
        .build()
        .unwrap();
    let mut md = Metadata::new();
    md.insert_str("k", "v");
    let proxy = ObjectProxy::new(&client, s.target.clone()).with_metadata(md);
    let f = proxy.invoke_async("hello", Bytes::from("x"), None);
    assert_eq!(&futures::executor::block_on(f).unwrap()[..], b"x");
    assert_eq!(
        take(&s.log),
        [
            "client c1 before hello",
            "server s1 before hello",
            "server s2 before hello",
            "servant hello [k=v,from-c1=1]",
            "server s2 after hello ok",
            "server s1 after hello ok",
            "client c1 after hello ok",
        ]
    );
    let e =
        futures::executor::block_on(proxy.invoke_async("blocked", Bytes::new(), None)).unwrap_err();
    assert!(
        matches!(e, Exception::System(ref e) if e.kind == SystemExceptionKind::NO_PERMISSION),
        "{e:?}"
    );
    assert_eq!(take(&s.log), ["client c1 before blocked"]);
    assert_eq!(s.runs.load(Ordering::SeqCst), 1);
    client.shutdown();
    s.client.shutdown();
    s.server.shutdown();
}
