//! TLS for GIOP connections, with rustls: the user's configuration ([`TlsConfig`]), the
//! rustls client and server configurations built from it ([`TlsSetup`]), and the TLS byte
//! stream a connection reads and writes ([`stream`]). rustls does no I/O of its own; the
//! stream feeds it from the non-blocking socket inside the reactor, so a handshake never
//! blocks a thread.

pub(crate) mod stream;

use crate::exception::{minor, SystemException};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// How the ORB speaks TLS, for [`OrbBuilder::tls`](crate::OrbBuilder::tls).
///
/// - With an identity ([`identity_pem`](Self::identity_pem)), the ORB's listener speaks TLS
///   only, and its object references publish the TLS port the way CORBA ORBs expect (an
///   IIOP profile with port 0 and a `TAG_SSL_SEC_TRANS` component, as omniORB's SSL
///   transport writes). The identity is also the client certificate the ORB presents when it
///   calls a server that asks for one (mutual TLS).
/// - The roots ([`roots_pem`](Self::roots_pem)) are the certificate authorities the ORB
///   trusts: for the server's certificate when it calls a TLS endpoint, and for clients'
///   certificates when [`require_client_cert`](Self::require_client_cert) is on. With no
///   roots, no server certificate verifies, so calls to TLS endpoints fail with TRANSIENT.
/// - Calls to references that carry a `TAG_SSL_SEC_TRANS` component go over TLS; those
///   without one go over plain TCP, as before.
#[derive(Clone, Debug)]
pub struct TlsConfig {
    identity: Option<(Vec<CertificateDer<'static>>, Arc<PrivateKeyDer<'static>>)>,
    roots: RootCertStore,
    require_client_cert: bool,
    handshake_timeout: Duration,
}

impl Default for TlsConfig {
    fn default() -> Self {
        TlsConfig::new()
    }
}

fn config_error(what: String) -> SystemException {
    SystemException::bad_param(minor::BAD_TLS_CONFIG, what)
}

impl TlsConfig {
    /// No identity, no roots, client certificates not required, a 10 s handshake timeout.
    pub fn new() -> Self {
        TlsConfig {
            identity: None,
            roots: RootCertStore::empty(),
            require_client_cert: false,
            handshake_timeout: Duration::from_secs(10),
        }
    }

    /// Our certificate chain (end-entity first) and its private key, from PEM files.
    /// BAD_PARAM if a file cannot be read or holds no certificate or key.
    pub fn identity_pem(
        self,
        cert_chain: impl AsRef<Path>,
        key: impl AsRef<Path>,
    ) -> Result<Self, SystemException> {
        let (cert_chain, key) = (cert_chain.as_ref(), key.as_ref());
        let chain = CertificateDer::pem_file_iter(cert_chain)
            .and_then(|it| it.collect::<Result<Vec<_>, _>>())
            .map_err(|e| config_error(format!("certificates {}: {e}", cert_chain.display())))?;
        if chain.is_empty() {
            return Err(config_error(format!(
                "no certificate in {}",
                cert_chain.display()
            )));
        }
        let key = PrivateKeyDer::from_pem_file(key)
            .map_err(|e| config_error(format!("private key {}: {e}", key.display())))?;
        Ok(self.identity(chain, key))
    }

    /// Our certificate chain (end-entity first) and its private key, as rustls types.
    pub fn identity(
        mut self,
        chain: Vec<CertificateDer<'static>>,
        key: PrivateKeyDer<'static>,
    ) -> Self {
        self.identity = Some((chain, Arc::new(key)));
        self
    }

    /// Adds the certificate authorities in a PEM file to the trusted roots. BAD_PARAM if the
    /// file cannot be read, or none of its certificates is a usable root.
    pub fn roots_pem(mut self, ca: impl AsRef<Path>) -> Result<Self, SystemException> {
        let ca = ca.as_ref();
        let certs = CertificateDer::pem_file_iter(ca)
            .and_then(|it| it.collect::<Result<Vec<_>, _>>())
            .map_err(|e| config_error(format!("roots {}: {e}", ca.display())))?;
        let (added, _ignored) = self.roots.add_parsable_certificates(certs);
        if added == 0 {
            return Err(config_error(format!(
                "no usable CA certificate in {}",
                ca.display()
            )));
        }
        Ok(self)
    }

    /// Replaces the trusted roots.
    pub fn roots(mut self, roots: RootCertStore) -> Self {
        self.roots = roots;
        self
    }

    /// Mutual TLS on our listener: a client must present a certificate that verifies against
    /// the roots, or its handshake fails (and the connection closes). Off by default; when
    /// off, a client certificate that is offered is still verified, and its identity is
    /// available to servants.
    pub fn require_client_cert(mut self, required: bool) -> Self {
        self.require_client_cert = required;
        self
    }

    /// How long a TLS handshake may take before its connection is closed (default 10 s).
    pub fn handshake_timeout(mut self, timeout: Duration) -> Self {
        self.handshake_timeout = timeout;
        self
    }

    /// The rustls configurations, built once at [`OrbBuilder::build`](crate::OrbBuilder::build).
    pub(crate) fn setup(&self) -> Result<TlsSetup, SystemException> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let roots = Arc::new(self.roots.clone());
        let versions = rustls::DEFAULT_VERSIONS;
        let client = ClientConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(versions)
            .map_err(|e| config_error(e.to_string()))?
            .with_root_certificates(roots.clone());
        let client = match &self.identity {
            Some((chain, key)) => client
                .with_client_auth_cert(chain.clone(), key.clone_key())
                .map_err(|e| config_error(format!("client certificate: {e}")))?,
            None => client.with_no_client_auth(),
        };
        let server = match &self.identity {
            None => None,
            Some((chain, key)) => {
                let builder = ServerConfig::builder_with_provider(provider.clone())
                    .with_protocol_versions(versions)
                    .map_err(|e| config_error(e.to_string()))?;
                let builder = if self.roots.is_empty() {
                    if self.require_client_cert {
                        return Err(config_error(
                            "require_client_cert needs roots to verify clients against".into(),
                        ));
                    }
                    builder.with_no_client_auth()
                } else {
                    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                        roots.clone(),
                        provider.clone(),
                    );
                    let verifier = if self.require_client_cert {
                        verifier
                    } else {
                        verifier.allow_unauthenticated()
                    };
                    let verifier = verifier
                        .build()
                        .map_err(|e| config_error(format!("client verifier: {e}")))?;
                    builder.with_client_cert_verifier(verifier)
                };
                let server = builder
                    .with_single_cert(chain.clone(), key.clone_key())
                    .map_err(|e| config_error(format!("server certificate: {e}")))?;
                Some(Arc::new(server))
            }
        };
        Ok(TlsSetup {
            client: Arc::new(client),
            server,
            require_client_cert: self.require_client_cert,
            handshake_timeout: self.handshake_timeout,
        })
    }
}

/// The rustls configurations of an ORB with TLS, built from its [`TlsConfig`].
#[derive(Clone, Debug)]
pub(crate) struct TlsSetup {
    pub(crate) client: Arc<ClientConfig>,
    /// `None` when the ORB has no identity (it calls TLS servers but does not serve TLS).
    pub(crate) server: Option<Arc<ServerConfig>>,
    pub(crate) require_client_cert: bool,
    pub(crate) handshake_timeout: Duration,
}
