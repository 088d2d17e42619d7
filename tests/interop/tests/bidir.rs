//! Bidirectional GIOP against omniORB (WIRE-GIOP.md §5): an omniORB server calls our callback
//! object back over the connection *we* opened.
//!
//! The omniORB peer is `interop_server --hub --bidir`: `acceptBiDirectionalGIOP = 1`,
//! `serverTransportRule "* unix,tcp,bidir"`, and an `interop::Hub` in a POA with
//! BidirectionalPolicy BOTH (§5.2). Our ORB activates an `interop::Callback`, passes its
//! reference to `Hub::registerCb` as a real CDR object reference (omniORB routes callbacks over
//! a bidir connection only for references unmarshalled from a request that arrived over it),
//! then calls `Hub::fire`, during which omniORB calls `Callback::ping`.
//!
//! Our connection to omniORB goes through a [`Tap`], so the tests see which connection the
//! callback travelled over (and its request id); our ORB's counters tell whether omniORB opened
//! a connection of its own to our listener.

use bytes::{BufMut, Bytes, BytesMut};
use orb_interop::{payload, peers, start_server, Dir, Peers, Seen, Tap};
use protorb::cdr::CdrReply;
use protorb::{
    Context, Exception, ObjectProxy, ObjectRef, Orb, OrbStats, Servant, SystemException,
};
use std::io::Write;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const HUB_ID: &str = "IDL:interop/Hub:1.0";
const CALLBACK_ID: &str = "IDL:interop/Callback:1.0";
const TIMEOUT: Option<Duration> = Some(Duration::from_secs(30));
/// GIOP message types.
const REQUEST: u8 = 0;
const REPLY: u8 = 1;
const LOCATE_REQUEST: u8 = 3;
/// The BI_DIR_IIOP service-context id.
const BI_DIR_IIOP: u32 = 5;
/// Payload sizes passed to `fire` (one `ping` each).
const FIRES: &[usize] = &[5, 64 << 10];

/// One `ping` as our servant saw it.
#[derive(Clone, Debug)]
struct Ping {
    request_id: u32,
    peer: Option<SocketAddr>,
    len: usize,
}

/// `interop::Callback`: `ping(p)` returns `"pong:" + p` and records the call.
struct CallbackServant {
    pings: Arc<Mutex<Vec<Ping>>>,
}

impl Servant for CallbackServant {
    fn repository_id(&self) -> &'static str {
        CALLBACK_ID
    }

    fn dispatch(&self, operation: &str, body: Bytes, ctx: &Context) -> Result<Bytes, Exception> {
        match operation {
            "ping" => {
                if let Ok(mut v) = self.pings.lock() {
                    v.push(Ping {
                        request_id: ctx.request_id(),
                        peer: ctx.peer(),
                        len: body.len(),
                    });
                }
                Ok(pong(&body))
            }
            op => Err(SystemException::bad_operation(op).into()),
        }
    }
}

fn pong(p: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(5 + p.len());
    b.put_slice(b"pong:");
    b.put_slice(p);
    b.freeze()
}

/// Everything one scenario produced, for the tests to check.
#[derive(Debug)]
struct Run {
    /// The port of the tap our ORB connected through.
    tap_port: u16,
    /// The outcome of `registerCb`: `Ok` or a description of what went wrong.
    register: Result<(), String>,
    /// The outcome of each `fire` (`Ok` when the result was the expected concatenation).
    fires: Vec<Result<(), String>>,
    /// What the callback servant saw.
    pings: Vec<Ping>,
    /// Our ORB's counters after the calls.
    stats: OrbStats,
    /// Connections through the tap (ours to omniORB).
    tap_connections: usize,
    /// Every GIOP message on our connection to omniORB.
    seen: Vec<Seen>,
    /// The omniORB server's stderr.
    server_log: String,
}

/// Starts `interop_server --hub <server_opts>`, and our ORB (one pool thread, listening on
/// 127.0.0.1, BiDir `our_bidir`) with a callback servant; registers the callback with the Hub
/// through a tap, fires once per [`FIRES`] size, and collects what happened.
fn scenario(peers: &Peers, server_opts: &[&str], our_bidir: bool) -> Run {
    let mut opts = vec!["--hub"];
    opts.extend_from_slice(server_opts);
    let server = start_server(peers, &opts);
    let hub_ior = ObjectRef::parse(&server.ior).expect("the Hub IOR parses");
    assert_eq!(hub_ior.type_id(), HUB_ID);
    let profile = hub_ior.primary().expect("IIOP profile").clone();
    let tap = Tap::start(SocketAddr::from(([127, 0, 0, 1], profile.port)));
    let hub = ObjectRef::new(HUB_ID, "127.0.0.1", tap.port, profile.object_key.clone());

    let orb = Orb::builder()
        .threads(1)
        .listen("127.0.0.1:0")
        .bidir(our_bidir)
        .build()
        .expect("orb");
    let pings = Arc::new(Mutex::new(Vec::new()));
    let callback = orb.activate(
        "callback",
        CallbackServant {
            pings: pings.clone(),
        },
    );
    assert_eq!(callback.type_id(), CALLBACK_ID);
    let cb_profile = callback.primary().expect("our IIOP profile");
    assert_eq!(cb_profile.host, "127.0.0.1");
    assert_eq!(cb_profile.port, orb.listen_addrs()[0].port());

    let proxy = ObjectProxy::new(&orb, hub);
    let register = match proxy.invoke_cdr("registerCb", &|w| callback.encode(w), TIMEOUT) {
        Ok(CdrReply::NoException(results)) if results.as_bytes().is_empty() => Ok(()),
        Ok(CdrReply::NoException(results)) => {
            Err(format!("unexpected result body {:?}", results.as_bytes()))
        }
        Ok(CdrReply::UserException { repository_id, .. }) => {
            Err(format!("user exception {repository_id}"))
        }
        Err(e) => Err(format!("system exception {e}")),
    };
    let mut fires = Vec::new();
    if register.is_ok() {
        for &n in FIRES {
            let p = payload(n);
            fires.push(match proxy.invoke("fire", p.clone(), TIMEOUT) {
                Ok(got) if got == pong(&p) => Ok(()),
                Ok(got) => Err(format!("{n}-byte fire: {} unexpected bytes", got.len())),
                Err(e) => Err(format!("{n}-byte fire: {e}")),
            });
        }
    }
    let stats = orb.stats();
    orb.shutdown();
    let server_log = server.process.stop();
    let pings = pings.lock().map(|v| v.clone()).unwrap_or_default();
    Run {
        tap_port: tap.port,
        register,
        fires,
        pings,
        stats,
        tap_connections: tap.connections(),
        seen: tap.seen(),
        server_log,
    }
}

/// Checks that registration and every `fire` worked and that each `fire` pinged our servant
/// once, with the right payload.
fn assert_callbacks_worked(run: &Run) {
    assert_eq!(run.register, Ok(()), "registerCb failed: {run:#?}");
    assert_eq!(run.fires.len(), FIRES.len(), "{run:#?}");
    assert!(run.fires.iter().all(Result::is_ok), "fire failed: {run:#?}");
    let lens: Vec<usize> = run.pings.iter().map(|p| p.len).collect();
    assert_eq!(lens, FIRES, "one ping per fire expected: {run:#?}");
    assert_eq!(
        run.server_log.matches("hub: ping #0 returned").count(),
        FIRES.len(),
        "{run:#?}"
    );
    if std::env::var_os("ORB_INTEROP_TRACE").is_some() {
        let _ = writeln!(std::io::stderr(), "{}", trace(run));
    }
}

/// A compact account of a run: the counters, then one line per GIOP message on our connection
/// (set `ORB_INTEROP_TRACE=1` and run with `--nocapture` to see it).
fn trace(run: &Run) -> String {
    let mut t = format!(
        "connections_opened={} connections_accepted={} tap_connections={}\n",
        run.stats.connections_opened, run.stats.connections_accepted, run.tap_connections
    );
    for s in &run.seen {
        let dir = match s.dir {
            Dir::ToServer => "us -> omniORB",
            Dir::ToClient => "omniORB -> us",
        };
        let kind = match s.msg_type {
            0 => "Request",
            1 => "Reply",
            2 => "CancelRequest",
            3 => "LocateRequest",
            4 => "LocateReply",
            5 => "CloseConnection",
            6 => "MessageError",
            7 => "Fragment",
            _ => "?",
        };
        t += &format!("  {dir} GIOP 1.{} {kind:<15} size={:<6}", s.minor, s.size);
        if let Some(id) = s.request_id {
            t += &format!(" id={id}");
        }
        if let Some(op) = &s.operation {
            t += &format!(" op={op}");
        }
        if !s.contexts.is_empty() {
            t += &format!(" contexts={:?}", s.contexts);
        }
        if s.flags & 2 != 0 {
            t += " (more fragments)";
        }
        t.truncate(t.trim_end().len());
        t += "\n";
    }
    t += &format!("  servant saw: {:?}", run.pings);
    t
}

/// The first Request we sent on our connection to omniORB.
fn our_first_request(run: &Run) -> &Seen {
    run.seen
        .iter()
        .find(|s| s.dir == Dir::ToServer && s.msg_type == REQUEST)
        .unwrap_or_else(|| panic!("we sent no Request through the tap: {run:#?}"))
}

/// Requests and LocateRequests omniORB sent us over *our* connection.
fn requests_from_omniorb(run: &Run) -> Vec<&Seen> {
    run.seen
        .iter()
        .filter(|s| s.dir == Dir::ToClient && matches!(s.msg_type, REQUEST | LOCATE_REQUEST))
        .collect()
}

#[test]
fn omniorb_calls_our_callback_over_our_bidir_connection() {
    let Some(peers) = peers("omniorb_calls_our_callback_over_our_bidir_connection") else {
        return;
    };
    let run = scenario(&peers, &["--bidir"], true);
    assert_callbacks_worked(&run);

    // We opened exactly one connection, the one through the tap, and omniORB opened none to
    // our listener: the callbacks cannot have come any other way.
    assert_eq!(run.stats.connections_opened, 1, "{run:#?}");
    assert_eq!(run.stats.connections_accepted, 0, "{run:#?}");
    assert_eq!(run.tap_connections, 1, "{run:#?}");

    // Our first Request (registerCb) announced our listen points; request ids we pick on the
    // connection we opened are even.
    let first = our_first_request(&run);
    assert_eq!(first.operation.as_deref(), Some("registerCb"), "{run:#?}");
    assert!(
        first.contexts.contains(&BI_DIR_IIOP),
        "no BI_DIR_IIOP: {run:#?}"
    );
    assert!(
        run.seen
            .iter()
            .filter(|s| s.dir == Dir::ToServer && s.msg_type == REQUEST)
            .all(|s| s.request_id.is_some_and(|id| id % 2 == 0)),
        "our request ids must be even: {run:#?}"
    );

    // omniORB's `ping` Requests came over our connection, with odd request ids (the accepting
    // side's parity), and our Replies went back over it.
    let from_omni = requests_from_omniorb(&run);
    assert!(
        from_omni
            .iter()
            .all(|s| s.request_id.is_some_and(|id| id % 2 == 1)),
        "omniORB's request ids on our connection must be odd: {run:#?}"
    );
    let pings: Vec<u32> = from_omni
        .iter()
        .filter(|s| s.msg_type == REQUEST && s.operation.as_deref() == Some("ping"))
        .filter_map(|s| s.request_id)
        .collect();
    assert_eq!(pings.len(), FIRES.len(), "{run:#?}");
    for id in &pings {
        assert!(
            run.seen.iter().any(|s| s.dir == Dir::ToServer
                && s.msg_type == REPLY
                && s.request_id == Some(*id)),
            "no Reply from us to ping request {id} on our connection: {run:#?}"
        );
    }

    // And our servant saw them as requests on that connection: same ids, peer = the tap.
    let served: Vec<u32> = run.pings.iter().map(|p| p.request_id).collect();
    assert_eq!(served, pings, "{run:#?}");
    assert!(
        run.pings
            .iter()
            .all(|p| p.peer.is_some_and(|a| a.port() == run.tap_port)),
        "{run:#?}"
    );
}

#[test]
fn without_bidir_on_our_side_omniorb_connects_to_our_listener() {
    let Some(peers) = peers("without_bidir_on_our_side_omniorb_connects_to_our_listener") else {
        return;
    };
    let run = scenario(&peers, &["--bidir"], false);
    assert_callbacks_worked(&run);
    // No listen points announced...
    assert!(
        run.seen.iter().all(|s| !s.contexts.contains(&BI_DIR_IIOP)),
        "BI_DIR_IIOP sent with bidir(false): {run:#?}"
    );
    // ...so omniORB opened a connection of its own to our listener for the callbacks.
    assert_eq!(run.stats.connections_opened, 1, "{run:#?}");
    assert!(run.stats.connections_accepted >= 1, "{run:#?}");
    assert!(requests_from_omniorb(&run).is_empty(), "{run:#?}");
    assert!(
        run.pings
            .iter()
            .all(|p| p.peer.is_some_and(|a| a.port() != run.tap_port)),
        "{run:#?}"
    );
    // On a connection omniORB opened, its ids are even.
    assert!(run.pings.iter().all(|p| p.request_id % 2 == 0), "{run:#?}");
}

#[test]
fn omniorb_without_bidir_configuration_ignores_our_listen_points() {
    let Some(peers) = peers("omniorb_without_bidir_configuration_ignores_our_listen_points") else {
        return;
    };
    // The Hub in a POA without BidirectionalPolicy, omniORB's default transport rules.
    let run = scenario(&peers, &[], true);
    assert_callbacks_worked(&run);
    // We announced our listen points, but omniORB did not use our connection.
    assert!(
        our_first_request(&run).contexts.contains(&BI_DIR_IIOP),
        "{run:#?}"
    );
    assert_eq!(run.stats.connections_opened, 1, "{run:#?}");
    assert!(run.stats.connections_accepted >= 1, "{run:#?}");
    assert!(requests_from_omniorb(&run).is_empty(), "{run:#?}");
}
