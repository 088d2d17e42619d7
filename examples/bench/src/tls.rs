//! `--impl orb-tls`: the ORB over mutual TLS (rustls), to show what TLS costs per call beside
//! plain `orb`. Certificates are made with rcgen into one directory the server and the client
//! share (`$ORB_BENCH_TLS`, default `$TMPDIR/orb-bench-tls`); the server makes them if they are
//! missing, before it says it listens, so the client always finds them.

use std::path::PathBuf;
use std::sync::OnceLock;

static ON: OnceLock<bool> = OnceLock::new();

/// Turns TLS on for this process (from `--impl orb-tls`).
pub fn enable() {
    let _ = ON.set(true);
}

/// Whether this process runs `orb-tls`.
pub fn enabled() -> bool {
    ON.get().copied().unwrap_or(false)
}

fn dir() -> PathBuf {
    std::env::var_os("ORB_BENCH_TLS")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("orb-bench-tls"))
}

/// Makes the CA, the server certificate (127.0.0.1) and the client certificate, unless the
/// directory has them. Written to a fresh directory and renamed, so a reader never sees half.
pub fn make_certs() -> Result<(), String> {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
    let dir = dir();
    if dir.join("client.key").exists() {
        return Ok(());
    }
    let e = |e: rcgen::Error| e.to_string();
    let ca_key = KeyPair::generate().map_err(e)?;
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(e)?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "orb-bench CA");
    let ca_cert = ca.self_signed(&ca_key).map_err(e)?;
    let issuer = Issuer::from_params(&ca, &ca_key);
    let leaf = |cn: &str, sans: Vec<String>| -> Result<(String, String), String> {
        let key = KeyPair::generate().map_err(e)?;
        let mut p = CertificateParams::new(sans).map_err(e)?;
        p.distinguished_name.push(DnType::CommonName, cn);
        let cert = p.signed_by(&key, &issuer).map_err(e)?;
        Ok((cert.pem(), key.serialize_pem()))
    };
    let server = leaf("orb-bench server", vec!["127.0.0.1".into()])?;
    let client = leaf("orb-bench client", vec!["client.orb-bench".into()])?;
    let tmp = dir.with_extension(format!("tmp{}", std::process::id()));
    std::fs::create_dir_all(&tmp).map_err(|e| e.to_string())?;
    for (name, text) in [
        ("ca.pem", ca_cert.pem()),
        ("server.pem", server.0),
        ("server.key", server.1),
        ("client.pem", client.0),
        ("client.key", client.1),
    ] {
        std::fs::write(tmp.join(name), text).map_err(|e| e.to_string())?;
    }
    match std::fs::rename(&tmp, &dir) {
        Ok(()) => Ok(()),
        // Another process made them first.
        Err(_) if dir.join("client.key").exists() => {
            let _ = std::fs::remove_dir_all(&tmp);
            Ok(())
        }
        Err(e) => Err(format!("{}: {e}", dir.display())),
    }
}

/// The server's TLS: its certificate, client certificates required.
pub fn server_config() -> Result<protorb::TlsConfig, String> {
    let d = dir();
    protorb::TlsConfig::new()
        .identity_pem(d.join("server.pem"), d.join("server.key"))
        .and_then(|t| t.roots_pem(d.join("ca.pem")))
        .map(|t| t.require_client_cert(true))
        .map_err(|e| e.to_string())
}

/// The client's TLS: the CA and its certificate.
pub fn client_config() -> Result<protorb::TlsConfig, String> {
    let d = dir();
    protorb::TlsConfig::new()
        .identity_pem(d.join("client.pem"), d.join("client.key"))
        .and_then(|t| t.roots_pem(d.join("ca.pem")))
        .map_err(|e| e.to_string())
}
