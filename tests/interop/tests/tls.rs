//! Our TLS transport against omniORB's SSL transport (libomnisslTP4), with mutual TLS and the
//! certificates of [`orb_interop::TestCerts`] (one CA; server certificate for `localhost` and
//! 127.0.0.1; client certificate CN `interop-client`):
//!
//! - an omniORB SSL client calls our TLS server: the IOR we publish (port 0 and
//!   `TAG_SSL_SEC_TRANS`, read back by `catior`), the interop session (narrow, `_is_a`,
//!   `_non_existent`, echoes up to 8 MiB, `interop::Oops`, system exceptions, MARSHAL and
//!   BAD_OPERATION), and the client's certificate as the servant sees it (`peer_identity`);
//! - an omniORB client without SSL cannot reach our TLS-only object, and a plain GIOP client
//!   sent to our TLS port gets an error, not a hang;
//! - our TLS client calls omniORB's SSL server (same session as `rust_client.rs`);
//! - omniORB refuses our client when it has no certificate (TLS 1.3 alert 116
//!   certificate_required; TLS 1.2 alert 40), and our client refuses a server whose certificate
//!   is not from its CA: both an error in bounded time;
//! - a TLS-configured client still speaks plain IIOP to a profile without the component.
//!
//! Needs the `protorb::TlsConfig` API (`Orb::builder().tls(..)`, `Context::peer_identity`).

use bytes::Bytes;
use orb_interop::{
    fnv1a, payload, peers, run_client, start_server, start_ssl_server, tool, EchoServant, Outcome,
    Peers, TestCerts, CLIENT_CN, ECHO_ID, OOPS_ID, PEER_TIMEOUT, SIZES,
};
use protorb::{
    minor, CompletionStatus, Context, Exception, ObjectProxy, ObjectRef, Orb, Servant,
    SslComponent, SystemExceptionKind, TlsConfig,
};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const KEY: &str = "echo";
const TIMEOUT: Option<Duration> = Some(Duration::from_secs(30));
/// How long a refused or failed TLS connection may take to surface as an error.
const REFUSAL_BOUND: Duration = Duration::from_secs(10);

/// What a servant saw of its caller's certificate: subject, common name, DNS names.
type SeenIdentity = Option<(String, Option<String>, Vec<String>)>;

/// `EchoServant`, recording `ctx.peer_identity()` for every request.
#[derive(Clone, Default)]
struct IdentityEcho {
    seen: Arc<Mutex<Vec<SeenIdentity>>>,
}

impl IdentityEcho {
    fn seen(&self) -> Vec<SeenIdentity> {
        self.seen.lock().map(|v| v.clone()).unwrap_or_default()
    }
}

impl Servant for IdentityEcho {
    fn repository_id(&self) -> &'static str {
        ECHO_ID
    }

    fn dispatch(&self, operation: &str, body: Bytes, ctx: &Context) -> Result<Bytes, Exception> {
        let id = ctx.peer_identity().map(|p| {
            (
                p.subject().to_owned(),
                p.common_name().map(str::to_owned),
                p.dns_names().to_vec(),
            )
        });
        if let Ok(mut v) = self.seen.lock() {
            v.push(id);
        }
        EchoServant.dispatch(operation, body, ctx)
    }
}

/// The server side of mutual TLS: our certificate for `localhost`/127.0.0.1, clients must
/// present one from the CA.
fn server_tls(certs: &TestCerts) -> TlsConfig {
    TlsConfig::new()
        .identity_pem(certs.server_cert(), certs.server_key())
        .expect("server identity")
        .roots_pem(certs.ca())
        .expect("CA")
        .require_client_cert(true)
}

/// The client side of mutual TLS: our client certificate, the CA for the server's.
fn client_tls(certs: &TestCerts) -> TlsConfig {
    TlsConfig::new()
        .identity_pem(certs.client_cert(), certs.client_key())
        .expect("client identity")
        .roots_pem(certs.ca())
        .expect("CA")
}

/// Our ORB serving an [`IdentityEcho`] under [`KEY`] over TLS only; its reference.
fn serve_tls(certs: &TestCerts) -> (Orb, IdentityEcho, ObjectRef) {
    let orb = Orb::builder()
        .threads(4)
        .tls(server_tls(certs))
        .build()
        .expect("TLS orb");
    let servant = IdentityEcho::default();
    let r = orb.activate(KEY, servant.clone());
    (orb, servant, r.with_type_id(ECHO_ID))
}

fn tls_client(certs: &TestCerts) -> Orb {
    Orb::builder()
        .no_listen()
        .threads(1)
        .connect_timeout(Duration::from_secs(5))
        .call_timeout(Duration::from_secs(30))
        .tls(client_tls(certs))
        .build()
        .expect("TLS client orb")
}

fn omni_opts(certs: &TestCerts) -> Vec<String> {
    certs.omni_opts()
}

fn oops(n: usize) -> Outcome {
    Outcome::User {
        id: OOPS_ID.into(),
        detail: format!("len={n} fnv={:08x}", fnv1a(&payload(n))),
    }
}

/// Whether `e` is how a refused or broken connection should surface: TRANSIENT or
/// COMM_FAILURE, or NO_PERMISSION (minor TLS_REFUSED, completed NO) when the server's alert
/// said it refused our certificate.
fn is_connection_failure(e: &Exception) -> bool {
    matches!(e, Exception::System(s)
        if s.kind == SystemExceptionKind::TRANSIENT
            || s.kind == SystemExceptionKind::COMM_FAILURE
            || (s.kind == SystemExceptionKind::NO_PERMISSION
                && s.minor == protorb::minor::TLS_REFUSED
                && s.completed == protorb::CompletionStatus::No))
}

#[test]
fn our_tls_reference_has_port_zero_and_the_ssl_component() {
    let certs = TestCerts::generate();
    let (orb, _servant, r) = serve_tls(&certs);
    let tls_port = orb.listen_addrs()[0].port();
    let p = r.primary().expect("an IIOP profile");
    assert_eq!(
        p.port, 0,
        "a TLS-only listener publishes plain port 0, as omniORB"
    );
    assert_eq!(p.ssl(), Some(SslComponent::for_tls(tls_port, true)));
    // Through the IOR string and back.
    let back = ObjectRef::parse(&r.to_ior_string()).expect("our IOR parses");
    assert_eq!(
        back.primary().and_then(|p| p.ssl()),
        Some(SslComponent::for_tls(tls_port, true))
    );
    // catior reads it as omniORB's own: "TAG_SSL_SEC_TRANS port = N supports 102 requires 102".
    if let Some(catior) = tool(
        "our_tls_reference_has_port_zero_and_the_ssl_component",
        "catior",
    ) {
        let out = orb_interop::run(Command::new(catior).arg(r.to_ior_string()), PEER_TIMEOUT);
        assert!(out.success(), "{out:#?}");
        assert!(
            out.stdout.contains(&format!(
                "TAG_SSL_SEC_TRANS port = {tls_port} supports 102 requires 102"
            )),
            "{out:#?}"
        );
    }
    orb.shutdown();
}

#[test]
fn omniorb_ssl_client_calls_our_tls_server_with_mutual_tls() {
    let Some(peers) = peers("omniorb_ssl_client_calls_our_tls_server_with_mutual_tls") else {
        return;
    };
    let certs = TestCerts::generate();
    let (orb, servant, r) = serve_tls(&certs);
    let mut cmds: Vec<String> = vec![
        "narrow".into(),
        "nonexist".into(),
        format!("is_a:{ECHO_ID}"),
        "is_a:IDL:other/Thing:1.0".into(),
    ];
    cmds.extend(SIZES.iter().map(|n| format!("echo:{n}")));
    cmds.extend([
        "fail:0".to_string(),
        "fail:100".into(),
        "fail:1048576".into(),
        "sysex:NO_PERMISSION,7,NO".into(),
        "sysex:TRANSIENT,3,MAYBE".into(),
        "two".into(),
        "nosuch".into(),
        "echo:3".into(),
    ]);
    let cmds: Vec<&str> = cmds.iter().map(String::as_str).collect();
    let opts = omni_opts(&certs);
    let opts: Vec<&str> = opts.iter().map(String::as_str).collect();
    let run = run_client(&peers, &opts, &r.to_ior_string(), &cmds);
    assert_eq!(run.get("narrow"), &Outcome::Ok("narrowed".into()));
    assert_eq!(run.get("nonexist"), &Outcome::Ok("false".into()));
    assert_eq!(
        run.get(&format!("is_a:{ECHO_ID}")),
        &Outcome::Ok("true".into())
    );
    assert_eq!(
        run.get("is_a:IDL:other/Thing:1.0"),
        &Outcome::Ok("false".into())
    );
    for n in SIZES {
        assert_eq!(
            run.get(&format!("echo:{n}")),
            &Outcome::Ok(format!("len={n} match")),
            "{n}-byte echo over TLS"
        );
    }
    assert_eq!(run.get("fail:0"), &oops(0));
    assert_eq!(run.get("fail:100"), &oops(100));
    assert_eq!(run.get("fail:1048576"), &oops(1 << 20));
    assert_eq!(
        run.get("sysex:NO_PERMISSION,7,NO"),
        &Outcome::system("NO_PERMISSION", 7, "NO")
    );
    assert_eq!(
        run.get("sysex:TRANSIENT,3,MAYBE"),
        &Outcome::system("TRANSIENT", 3, "MAYBE")
    );
    assert_eq!(
        run.get("two"),
        &Outcome::system("MARSHAL", minor::BAD_PARAMETERS, "NO")
    );
    assert_eq!(
        run.get("nosuch"),
        &Outcome::system("BAD_OPERATION", minor::UNKNOWN_OPERATION, "NO")
    );
    assert_eq!(run.get("echo:3"), &Outcome::Ok("len=3 match".into()));
    // Every request the servant saw came with the omniORB client's certificate.
    let seen = servant.seen();
    assert!(!seen.is_empty());
    for id in &seen {
        let Some((subject, cn, dns)) = id else {
            panic!("a request over mutual TLS without a peer identity: {seen:?}");
        };
        assert_eq!(cn.as_deref(), Some(CLIENT_CN), "{subject}");
        assert!(subject.contains(CLIENT_CN), "{subject}");
        assert_eq!(dns, &[CLIENT_CN.to_string()]);
    }
    orb.shutdown();
}

#[test]
fn omniorb_client_without_ssl_cannot_reach_our_tls_only_object() {
    let Some(peers) = peers("omniorb_client_without_ssl_cannot_reach_our_tls_only_object") else {
        return;
    };
    let certs = TestCerts::generate();
    let (orb, servant, r) = serve_tls(&certs);
    // No --ssl: the plain port in our IOR is 0, and omniORB has no SSL transport.
    let run = run_client(&peers, &[], &r.to_ior_string(), &["echo:1"]);
    match run.get("echo:1") {
        Outcome::System { name, .. } => assert_eq!(name, "TRANSIENT", "{run:?}"),
        other => panic!("an omniORB client without SSL got {other:?}"),
    }
    assert!(servant.seen().is_empty());
    orb.shutdown();
}

#[test]
fn plain_giop_to_our_tls_port_is_an_error_not_a_hang() {
    let certs = TestCerts::generate();
    let (orb, servant, _r) = serve_tls(&certs);
    let tls_port = orb.listen_addrs()[0].port();
    let plain = Orb::builder()
        .no_listen()
        .threads(1)
        .connect_timeout(Duration::from_secs(5))
        .call_timeout(REFUSAL_BOUND)
        .build()
        .expect("plain client orb");
    // A plain IIOP profile naming the TLS port: GIOP bytes where a ClientHello belongs.
    let p = ObjectProxy::new(&plain, ObjectRef::new(ECHO_ID, "127.0.0.1", tls_port, KEY));
    let start = Instant::now();
    let got = p.invoke("call", payload(5), Some(REFUSAL_BOUND));
    assert!(
        start.elapsed() < REFUSAL_BOUND * 2,
        "took {:?}",
        start.elapsed()
    );
    match got {
        Err(e) => assert!(
            is_connection_failure(&e)
                || matches!(&e, Exception::System(s) if s.kind == SystemExceptionKind::MARSHAL),
            "{e:?}"
        ),
        Ok(b) => panic!("a plain GIOP call on the TLS port was answered: {b:?}"),
    }
    assert!(servant.seen().is_empty());
    plain.shutdown();
    orb.shutdown();
}

/// The session `rust_client.rs` runs, over TLS.
fn session(orb: &Orb, target: ObjectRef) {
    let p = ObjectProxy::new(orb, target);
    assert!(p.is_a(ECHO_ID).expect("_is_a"));
    assert!(!p.is_a("IDL:other/Thing:1.0").expect("_is_a"));
    assert!(!p.non_existent().expect("_non_existent"));
    for &n in SIZES {
        let sent = payload(n);
        let got = p
            .invoke("call", sent.clone(), TIMEOUT)
            .unwrap_or_else(|e| panic!("{n}-byte call over TLS: {e}"));
        assert!(got == sent, "{n}-byte echo differs");
    }
    for n in [0, 7, 1 << 20] {
        match p.invoke("fail", payload(n), TIMEOUT) {
            Err(Exception::User(u)) => {
                assert_eq!(u.repository_id, OOPS_ID);
                assert!(u.payload == payload(n), "{n}-byte Oops data differs");
            }
            other => panic!("fail({n}) gave {other:?}"),
        }
    }
    match p.invoke("sysex", Bytes::from("NO_PERMISSION,7,YES"), TIMEOUT) {
        Err(Exception::System(e)) => assert_eq!(
            (e.kind, e.minor, e.completed),
            (SystemExceptionKind::NO_PERMISSION, 7, CompletionStatus::Yes)
        ),
        other => panic!("sysex gave {other:?}"),
    }
    match p.invoke("nothing_like_this", Bytes::new(), TIMEOUT) {
        Err(Exception::System(e)) => {
            assert_eq!(e.kind, SystemExceptionKind::BAD_OPERATION);
            assert_eq!(e.completed, CompletionStatus::No);
        }
        other => panic!("an unknown operation gave {other:?}"),
    }
    // The connection survived all of that.
    assert!(p.invoke("call", payload(3), TIMEOUT).expect("echo") == payload(3));
}

#[test]
fn our_tls_client_calls_omniorb_ssl_server_with_mutual_tls() {
    let Some(peers) = peers("our_tls_client_calls_omniorb_ssl_server_with_mutual_tls") else {
        return;
    };
    let certs = TestCerts::generate();
    let server = start_ssl_server(&peers, &certs, &[]);
    let target = ObjectRef::parse(&server.ior).expect("omniORB's IOR");
    assert_eq!(target.primary().map(|p| p.port), Some(0));
    assert!(target.primary().and_then(|p| p.ssl()).is_some());
    let orb = tls_client(&certs);
    session(&orb, target);
    orb.shutdown();
    drop(server);
}

/// A call that must fail with a connection error in bounded time; the server must still serve
/// a good client afterwards.
fn refused(peers: &Peers, certs: &TestCerts, client: TlsConfig, what: &str) {
    let server = start_ssl_server(peers, certs, &[]);
    let target = ObjectRef::parse(&server.ior).expect("omniORB's IOR");
    let orb = Orb::builder()
        .no_listen()
        .threads(1)
        .connect_timeout(Duration::from_secs(5))
        .call_timeout(REFUSAL_BOUND)
        .tls(client)
        .build()
        .expect("TLS client orb");
    let p = ObjectProxy::new(&orb, target.clone());
    let start = Instant::now();
    let got = p.invoke("call", payload(5), Some(REFUSAL_BOUND));
    let took = start.elapsed();
    match got {
        Err(e) => assert!(is_connection_failure(&e), "{what}: {e:?}"),
        Ok(b) => panic!("{what}: the call went through: {b:?}"),
    }
    assert!(took < REFUSAL_BOUND, "{what}: took {took:?} (a hang?)");
    // A second try fails the same way (no connection was left half-open and reused).
    assert!(
        matches!(p.invoke("call", payload(1), Some(REFUSAL_BOUND)), Err(ref e) if is_connection_failure(e)),
        "{what}: second call"
    );
    orb.shutdown();
    // The server is fine: the omniORB client with its certificate still gets through.
    let opts = certs.omni_opts();
    let opts: Vec<&str> = opts.iter().map(String::as_str).collect();
    let run = run_client(peers, &opts, &server.ior, &["echo:5"]);
    assert_eq!(
        run.get("echo:5"),
        &Outcome::Ok("len=5 match".into()),
        "{what}"
    );
}

#[test]
fn omniorb_refuses_our_client_without_a_certificate() {
    let Some(peers) = peers("omniorb_refuses_our_client_without_a_certificate") else {
        return;
    };
    let certs = TestCerts::generate();
    let no_identity = TlsConfig::new().roots_pem(certs.ca()).expect("CA");
    refused(&peers, &certs, no_identity, "no client certificate");
}

#[test]
fn our_client_refuses_a_server_certificate_from_another_ca() {
    let Some(peers) = peers("our_client_refuses_a_server_certificate_from_another_ca") else {
        return;
    };
    let certs = TestCerts::generate();
    let other = TestCerts::generate();
    // Our certificate is from the server's CA (omniORB would accept it), but we trust only
    // `other`'s CA, which did not sign the server's certificate.
    let wrong_roots = TlsConfig::new()
        .identity_pem(certs.client_cert(), certs.client_key())
        .expect("client identity")
        .roots_pem(other.ca())
        .expect("other CA");
    refused(
        &peers,
        &certs,
        wrong_roots,
        "server certificate from another CA",
    );
}

#[test]
fn a_tls_client_still_speaks_plain_iiop_to_a_plain_profile() {
    let Some(peers) = peers("a_tls_client_still_speaks_plain_iiop_to_a_plain_profile") else {
        return;
    };
    let certs = TestCerts::generate();
    let server = start_server(&peers, &[]);
    let target = ObjectRef::parse(&server.ior).expect("omniORB's IOR");
    assert!(target.primary().and_then(|p| p.ssl()).is_none());
    let orb = tls_client(&certs);
    let p = ObjectProxy::new(&orb, target);
    assert!(p.invoke("call", payload(64), TIMEOUT).expect("plain call") == payload(64));
    orb.shutdown();
}
