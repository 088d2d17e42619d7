//! omniORB's SSL transport between the two C++ peers, with the certificates of
//! [`orb_interop::TestCerts`]: proves the peers and the certificates work for mutual TLS before
//! our own TLS transport is put between them, and that we read what an SSL-only omniORB server
//! publishes (plain port 0, the TLS port in `TAG_SSL_SEC_TRANS`), and that omniORB's client
//! follows the TLS profile we build (`IiopProfile::tls`) to an SSL server.

use orb_interop::{peers, run_client, start_ssl_server, Outcome, TestCerts, ECHO_ID, OOPS_ID};
use protorb::{IiopProfile, ObjectRef, SslComponent, TAG_SSL_SEC_TRANS};

#[test]
fn certificates_are_written_as_pem() {
    let certs = TestCerts::generate();
    for (path, begins) in [
        (certs.ca(), "-----BEGIN CERTIFICATE-----"),
        (certs.server_cert(), "-----BEGIN CERTIFICATE-----"),
        (certs.server_key(), "-----BEGIN PRIVATE KEY-----"),
        (certs.client_cert(), "-----BEGIN CERTIFICATE-----"),
        (certs.client_key(), "-----BEGIN PRIVATE KEY-----"),
        (
            certs.dir().join("server.pem"),
            "-----BEGIN CERTIFICATE-----",
        ),
        (
            certs.dir().join("client.pem"),
            "-----BEGIN CERTIFICATE-----",
        ),
    ] {
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with(begins), "{}: {text}", path.display());
    }
    // omniORB reads the certificate and the key from one file.
    let both = std::fs::read_to_string(certs.dir().join("client.pem")).unwrap();
    assert!(both.contains("-----BEGIN PRIVATE KEY-----"));
    let dir = certs.dir().to_path_buf();
    drop(certs);
    assert!(!dir.exists(), "the directory goes with the TestCerts");
}

#[test]
fn omniorb_client_calls_omniorb_server_over_mutual_tls() {
    let Some(peers) = peers("omniorb_client_calls_omniorb_server_over_mutual_tls") else {
        return;
    };
    let certs = TestCerts::generate();
    let server = start_ssl_server(&peers, &certs, &[]);
    let opts = certs.omni_opts();
    let opts: Vec<&str> = opts.iter().map(String::as_str).collect();
    let run = run_client(
        &peers,
        &opts,
        &server.ior,
        &[
            "narrow",
            "echo:0",
            "echo:1",
            "echo:1048576",
            "fail:7",
            "sysex:NO_PERMISSION,7,YES",
            "nonexist",
        ],
    );
    assert_eq!(run.get("narrow"), &Outcome::Ok("narrowed".into()));
    assert_eq!(run.get("echo:0"), &Outcome::Ok("len=0 match".into()));
    assert_eq!(run.get("echo:1"), &Outcome::Ok("len=1 match".into()));
    assert_eq!(
        run.get("echo:1048576"),
        &Outcome::Ok("len=1048576 match".into())
    );
    match run.get("fail:7") {
        Outcome::User { id, detail } => {
            assert_eq!(id, OOPS_ID);
            assert!(detail.starts_with("len=7 "), "{detail}");
        }
        other => panic!("fail:7 gave {other:?}"),
    }
    assert_eq!(
        run.get("sysex:NO_PERMISSION,7,YES"),
        &Outcome::system("NO_PERMISSION", 7, "YES")
    );
    assert_eq!(run.get("nonexist"), &Outcome::Ok("false".into()));
    drop(server);
}

#[test]
fn omniorb_client_without_ssl_cannot_reach_an_ssl_only_server() {
    let Some(peers) = peers("omniorb_client_without_ssl_cannot_reach_an_ssl_only_server") else {
        return;
    };
    let certs = TestCerts::generate();
    let server = start_ssl_server(&peers, &certs, &[]);
    // No --ssl: the client has no SSL transport, and the IOR's plain port is 0.
    let run = run_client(&peers, &[], &server.ior, &["echo:1"]);
    match run.get("echo:1") {
        Outcome::System { name, .. } => assert_eq!(name, "TRANSIENT", "{run:?}"),
        other => panic!("a client without SSL got {other:?}"),
    }
}

#[test]
fn omniorb_ssl_ior_decodes_to_port_zero_and_the_ssl_component() {
    let Some(peers) = peers("omniorb_ssl_ior_decodes_to_port_zero_and_the_ssl_component") else {
        return;
    };
    let certs = TestCerts::generate();
    let server = start_ssl_server(&peers, &certs, &[]);
    let r = ObjectRef::parse(&server.ior).expect("omniORB's IOR parses");
    let p = r.primary().expect("an IIOP profile");
    assert_eq!(p.host, "127.0.0.1");
    assert_eq!(
        p.port, 0,
        "an SSL-only omniORB server publishes plain port 0"
    );
    assert_eq!(&p.object_key[..], b"Echo");
    assert_eq!(
        p.components
            .iter()
            .filter(|c| c.tag == TAG_SSL_SEC_TRANS)
            .count(),
        1
    );
    let ssl = p.ssl().expect("a TAG_SSL_SEC_TRANS component");
    assert_ne!(ssl.port, 0);
    // omniORB 4.2 hard-wires 0x66 (Integrity, Confidentiality, EstablishTrustInTarget,
    // EstablishTrustInClient) in both fields, whatever its verify mode.
    assert_eq!((ssl.target_supports, ssl.target_requires), (0x66, 0x66));
    assert_eq!(ssl, SslComponent::for_tls(ssl.port, true));
    // The TLS port is really the server's: it accepts a TCP connection.
    std::net::TcpStream::connect(("127.0.0.1", ssl.port)).expect("the TLS port listens");
}

#[test]
fn omniorb_ssl_client_follows_our_tls_profile() {
    let Some(peers) = peers("omniorb_ssl_client_follows_our_tls_profile") else {
        return;
    };
    let certs = TestCerts::generate();
    let server = start_ssl_server(&peers, &certs, &[]);
    let theirs = ObjectRef::parse(&server.ior).expect("omniORB's IOR parses");
    let tls_port = theirs
        .primary()
        .and_then(|p| p.ssl())
        .expect("a TAG_SSL_SEC_TRANS component")
        .port;
    let opts = certs.omni_opts();
    let opts: Vec<&str> = opts.iter().map(String::as_str).collect();
    // Our encoding of the profile (port 0, the component in our native order), with the
    // options omniORB uses and with EstablishTrustInClient only supported: omniORB's client
    // takes the port from either and connects with SSL.
    for require_client_cert in [true, false] {
        let ours = ObjectRef::from_iiop_profiles(
            ECHO_ID,
            vec![IiopProfile::tls(
                "127.0.0.1",
                tls_port,
                &b"Echo"[..],
                require_client_cert,
            )],
        );
        let run = run_client(
            &peers,
            &opts,
            &ours.to_ior_string(),
            &["echo:5", "nonexist"],
        );
        assert_eq!(
            run.get("echo:5"),
            &Outcome::Ok("len=5 match".into()),
            "require_client_cert {require_client_cert}"
        );
        assert_eq!(run.get("nonexist"), &Outcome::Ok("false".into()));
    }
}
