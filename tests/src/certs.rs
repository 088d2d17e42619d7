//! Certificates made at test time (rcgen), so the TLS tests need no files in the repository
//! and no openssl: a CA, server and client certificates it signs, and one from another CA.

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use std::path::{Path, PathBuf};

/// A certificate and its key, as PEM.
pub struct Pem {
    pub cert: String,
    pub key: String,
}

/// A certificate authority that signs leaf certificates.
pub struct Ca {
    params: CertificateParams,
    key: KeyPair,
    /// The CA certificate, PEM.
    pub pem: String,
}

impl Ca {
    /// A new self-signed CA named `name`.
    pub fn new(name: &str) -> Ca {
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let cert = params.self_signed(&key).expect("CA certificate");
        Ca {
            pem: cert.pem(),
            params,
            key,
        }
    }

    /// A leaf certificate with common name `cn` and subject alternative names `sans` (DNS
    /// names or IP literals), signed by this CA.
    pub fn leaf(&self, cn: &str, sans: &[&str]) -> Pem {
        self.leaf_valid(cn, sans, None)
    }

    /// Like [`leaf`](Self::leaf), expired (valid only in 2001) if `expired`.
    pub fn leaf_valid(&self, cn: &str, sans: &[&str], expired: Option<()>) -> Pem {
        let key = KeyPair::generate().expect("key");
        let sans: Vec<String> = sans.iter().map(|s| s.to_string()).collect();
        let mut params = CertificateParams::new(sans).expect("params");
        params.distinguished_name.push(DnType::CommonName, cn);
        if expired.is_some() {
            params.not_before = rcgen::date_time_ymd(2001, 1, 1);
            params.not_after = rcgen::date_time_ymd(2001, 12, 31);
        }
        let issuer = Issuer::from_params(&self.params, &self.key);
        let cert = params.signed_by(&key, &issuer).expect("leaf certificate");
        Pem {
            cert: cert.pem(),
            key: key.serialize_pem(),
        }
    }
}

/// PEM files in a temporary directory (removed when dropped).
pub struct Files {
    dir: tempfile::TempDir,
}

impl Files {
    pub fn new() -> Files {
        Files {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    /// Writes `text` to `name` and returns its path.
    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::write(&p, text).expect("write PEM");
        p
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Default for Files {
    fn default() -> Self {
        Files::new()
    }
}

/// Everything a mutual-TLS test needs: a CA, a server certificate for `localhost` and
/// 127.0.0.1, and a client certificate with common name `client_cn`, written as files.
pub struct Pki {
    pub files: Files,
    pub ca: Ca,
    pub ca_pem: PathBuf,
    pub server: (PathBuf, PathBuf),
    pub client: (PathBuf, PathBuf),
}

impl Pki {
    pub fn new(client_cn: &str) -> Pki {
        let files = Files::new();
        let ca = Ca::new("protorb test CA");
        let server = ca.leaf("server", &["localhost", "127.0.0.1"]);
        let client = ca.leaf(client_cn, &[&format!("{client_cn}.example")]);
        Pki {
            ca_pem: files.write("ca.pem", &ca.pem),
            server: (
                files.write("server.pem", &server.cert),
                files.write("server.key", &server.key),
            ),
            client: (
                files.write("client.pem", &client.cert),
                files.write("client.key", &client.key),
            ),
            files,
            ca,
        }
    }

    /// A server's TLS settings: our CA's roots, the server certificate, client certificates
    /// required.
    pub fn server_tls(&self) -> protorb::TlsConfig {
        protorb::TlsConfig::new()
            .identity_pem(&self.server.0, &self.server.1)
            .expect("server identity")
            .roots_pem(&self.ca_pem)
            .expect("roots")
            .require_client_cert(true)
    }

    /// A client's TLS settings: our CA's roots and the client certificate.
    pub fn client_tls(&self) -> protorb::TlsConfig {
        protorb::TlsConfig::new()
            .identity_pem(&self.client.0, &self.client.1)
            .expect("client identity")
            .roots_pem(&self.ca_pem)
            .expect("roots")
    }
}
