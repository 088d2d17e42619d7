//! Mutual TLS and access control: a server whose listener speaks TLS only and requires client
//! certificates, and an `AccessControl` interceptor that decides per object by the identity in
//! the caller's certificate. Everything runs in one process, with certificates made at start
//! (rcgen) in a temporary directory, so the example needs no files and no openssl.
//!
//! - `alice` may call both objects, `public` and `admin`;
//! - `bob` may call `public` only: his call to `admin` is refused with NO_PERMISSION before
//!   the servant runs;
//! - `mallory`, whose certificate another CA signed, never gets past the TLS handshake.
//!
//! Run: `cargo run -p orb-examples --bin secure-echo` (prints one line per call and a verdict).

use orb_examples::proto::echo::{Echo, EchoClient, EchoReply, EchoRequest, EchoSkeleton};
use protorb::{AccessControl, AccessRule, Exception, Orb, TlsConfig};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Echoes, and says who asked (the common name in the caller's certificate).
struct WhoEcho {
    served: AtomicU64,
}

impl Echo for WhoEcho {
    fn echo(&self, ctx: &protorb::Context, req: EchoRequest) -> Result<EchoReply, Exception> {
        let who = ctx
            .peer_identity()
            .and_then(|id| id.common_name())
            .unwrap_or("nobody");
        Ok(EchoReply {
            text: format!("{} (for {who})", req.text),
            served: self.served.fetch_add(1, Ordering::Relaxed) + 1,
        })
    }
}

type Error = Box<dyn std::error::Error>;

/// A CA that signs leaf certificates, written as PEM files into `dir`.
struct Ca<'a> {
    params: CertificateParams,
    key: KeyPair,
    dir: &'a Path,
    name: &'static str,
}

impl<'a> Ca<'a> {
    fn new(dir: &'a Path, name: &'static str) -> Result<Self, Error> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        std::fs::write(
            dir.join(format!("{name}.pem")),
            params.self_signed(&key)?.pem(),
        )?;
        Ok(Ca {
            params,
            key,
            dir,
            name,
        })
    }

    fn ca_file(&self) -> PathBuf {
        self.dir.join(format!("{}.pem", self.name))
    }

    /// A certificate for `cn` (plus these DNS/IP names), and its key: two PEM files.
    fn leaf(&self, cn: &str, sans: &[&str]) -> Result<(PathBuf, PathBuf), Error> {
        let key = KeyPair::generate()?;
        let mut p = CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>())?;
        p.distinguished_name.push(DnType::CommonName, cn);
        let cert = p.signed_by(&key, &Issuer::from_params(&self.params, &self.key))?;
        let (c, k) = (
            self.dir.join(format!("{cn}.pem")),
            self.dir.join(format!("{cn}.key")),
        );
        std::fs::write(&c, cert.pem())?;
        std::fs::write(&k, key.serialize_pem())?;
        Ok((c, k))
    }
}

/// One call as `who`: its outcome in words.
fn call(
    who: &str,
    tls: TlsConfig,
    target: &protorb::ObjectRef,
    object: &str,
) -> Result<String, Error> {
    let orb = Orb::builder().no_listen().threads(0).tls(tls).build()?;
    let echo = EchoClient::new(&orb, target.clone());
    let outcome = match echo.echo(EchoRequest {
        text: format!("hello from {who}"),
    }) {
        Ok(r) => format!("OK: {}", r.text),
        Err(Exception::System(e)) => format!("refused: {}", e.kind),
        Err(e) => format!("failed: {e}"),
    };
    println!("{who} -> {object}: {outcome}");
    orb.shutdown();
    Ok(outcome)
}

fn main() -> Result<(), Error> {
    let tmp = std::env::temp_dir().join(format!("secure-echo-{}", std::process::id()));
    std::fs::create_dir_all(&tmp)?;
    let result = run(&tmp);
    let _ = std::fs::remove_dir_all(&tmp);
    result
}

fn run(dir: &Path) -> Result<(), Error> {
    let ca = Ca::new(dir, "example-ca")?;
    let server_cert = ca.leaf("server", &["localhost", "127.0.0.1"])?;
    let other_ca = Ca::new(dir, "other-ca")?;

    // The server: TLS only, client certificates required, and the access rules.
    let acl = AccessControl::new()
        .allow(AccessRule::name("alice"))
        .allow(AccessRule::name("bob").objects(["public"]));
    let server = Orb::builder()
        .tls(
            TlsConfig::new()
                .identity_pem(&server_cert.0, &server_cert.1)?
                .roots_pem(ca.ca_file())?
                .require_client_cert(true),
        )
        .server_interceptor(acl)
        .build()?;
    let public = server.activate(
        &b"public"[..],
        EchoSkeleton::new(WhoEcho {
            served: AtomicU64::new(0),
        }),
    );
    let admin = server.activate(
        &b"admin"[..],
        EchoSkeleton::new(WhoEcho {
            served: AtomicU64::new(0),
        }),
    );
    println!("server: {}", server.object_to_string(&admin));

    let client = |cn: &str, issuer: &Ca| -> Result<TlsConfig, Error> {
        let (cert, key) = issuer.leaf(cn, &[])?;
        Ok(TlsConfig::new()
            .identity_pem(cert, key)?
            .roots_pem(ca.ca_file())?)
    };
    let mut outcomes = Vec::new();
    for (who, issuer) in [("alice", &ca), ("bob", &ca), ("mallory", &other_ca)] {
        for (name, target) in [("public", &public), ("admin", &admin)] {
            outcomes.push(call(who, client(who, issuer)?, target, name)?);
        }
    }
    let stats = server.stats();
    server.shutdown();

    let expected = [
        outcomes[0].starts_with("OK"),           // alice -> public
        outcomes[1].starts_with("OK"),           // alice -> admin
        outcomes[2].starts_with("OK"),           // bob -> public
        outcomes[3] == "refused: NO_PERMISSION", // bob -> admin
        outcomes[4].starts_with("refused"),      // mallory: no handshake
        outcomes[5].starts_with("refused"),
    ];
    if expected.iter().all(|&ok| ok) && stats.tls_handshake_failures == 2 {
        println!(
            "verdict: OK alice may call both objects, bob only public, mallory none \
             ({} handshakes, {} refused)",
            stats.tls_handshakes, stats.tls_handshake_failures
        );
        Ok(())
    } else {
        Err(format!("unexpected outcomes: {outcomes:?}, {stats:?}").into())
    }
}
