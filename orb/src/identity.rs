//! Who the peer of a TLS connection is, as its certificate says: what a servant reads through
//! [`Context::peer_identity`](crate::Context::peer_identity), what the access-control
//! interceptor and the BiDir check decide on. Kept apart from the TLS transport so that a
//! decision on identity needs no TLS session to be tested.

use std::net::IpAddr;

/// The identity of an authenticated peer: the subject and subject alternative names of the
/// certificate it presented in the TLS handshake, which verified against the ORB's roots.
///
/// Present only on connections whose peer sent a certificate: the server's side of mutual TLS,
/// and every TLS connection we opened (the server's certificate).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerIdentity {
    subject: String,
    common_name: Option<String>,
    dns_names: Vec<String>,
    ip_addresses: Vec<IpAddr>,
    uris: Vec<String>,
    emails: Vec<String>,
    certificate: Vec<u8>,
}

/// Why a certificate could not give an identity.
#[derive(Debug)]
pub struct IdentityError(String);

impl std::fmt::Display for IdentityError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "certificate does not parse: {}", self.0)
    }
}

impl std::error::Error for IdentityError {}

impl PeerIdentity {
    /// An identity with subject `subject` (RFC 4514, e.g. `CN=client,O=Example`), common name
    /// `common_name` and DNS names `dns_names`, and no certificate: for tests of access rules.
    pub fn new(
        subject: impl Into<String>,
        common_name: Option<String>,
        dns_names: Vec<String>,
    ) -> Self {
        PeerIdentity {
            subject: subject.into(),
            common_name,
            dns_names,
            ip_addresses: Vec::new(),
            uris: Vec::new(),
            emails: Vec::new(),
            certificate: Vec::new(),
        }
    }

    /// The identity in a DER-encoded X.509 certificate (the end-entity certificate a peer
    /// presented). Only parses: verifying the certificate is the TLS handshake's job.
    pub fn from_der(der: &[u8]) -> Result<Self, IdentityError> {
        use x509_parser::extensions::GeneralName;
        let (_, cert) =
            x509_parser::parse_x509_certificate(der).map_err(|e| IdentityError(e.to_string()))?;
        let subject = cert.subject();
        let common_name = subject
            .iter_common_name()
            .next()
            .and_then(|cn| cn.as_str().ok())
            .map(str::to_owned);
        let mut id = PeerIdentity {
            subject: subject.to_string(),
            common_name,
            dns_names: Vec::new(),
            ip_addresses: Vec::new(),
            uris: Vec::new(),
            emails: Vec::new(),
            certificate: der.to_vec(),
        };
        if let Ok(Some(san)) = cert.subject_alternative_name() {
            for name in &san.value.general_names {
                match name {
                    GeneralName::DNSName(d) => id.dns_names.push((*d).to_owned()),
                    GeneralName::URI(u) => id.uris.push((*u).to_owned()),
                    GeneralName::RFC822Name(e) => id.emails.push((*e).to_owned()),
                    GeneralName::IPAddress(ip) => match ip.len() {
                        4 => {
                            let b: [u8; 4] = [ip[0], ip[1], ip[2], ip[3]];
                            id.ip_addresses.push(IpAddr::from(b));
                        }
                        16 => {
                            let mut b = [0u8; 16];
                            b.copy_from_slice(ip);
                            id.ip_addresses.push(IpAddr::from(b));
                        }
                        _ => {}
                    },
                    _ => {}
                }
            }
        }
        Ok(id)
    }

    /// The certificate's subject, RFC 4514 style (`CN=client, O=Example`).
    pub fn subject(&self) -> &str {
        &self.subject
    }

    /// The subject's common name (CN), if it has one.
    pub fn common_name(&self) -> Option<&str> {
        self.common_name.as_deref()
    }

    /// The DNS names among the subject alternative names.
    pub fn dns_names(&self) -> &[String] {
        &self.dns_names
    }

    /// The IP addresses among the subject alternative names.
    pub fn ip_addresses(&self) -> &[IpAddr] {
        &self.ip_addresses
    }

    /// The URIs among the subject alternative names (e.g. SPIFFE ids).
    pub fn uris(&self) -> &[String] {
        &self.uris
    }

    /// The e-mail addresses among the subject alternative names.
    pub fn emails(&self) -> &[String] {
        &self.emails
    }

    /// Whether `name` is the common name or one of the DNS names, URIs or e-mail addresses:
    /// the test an allow-list of names wants.
    pub fn has_name(&self, name: &str) -> bool {
        self.common_name.as_deref() == Some(name)
            || self.dns_names.iter().any(|d| d == name)
            || self.uris.iter().any(|u| u == name)
            || self.emails.iter().any(|e| e == name)
    }

    /// The end-entity certificate, DER-encoded (empty for [`new`](Self::new)).
    pub fn certificate(&self) -> &[u8] {
        &self.certificate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for bytes in [&b""[..], b"\x30", b"\x30\x82\xff\xff", &[0u8; 64]] {
            assert!(PeerIdentity::from_der(bytes).is_err());
        }
    }

    #[test]
    fn has_name_matches_cn_and_sans() {
        let id = PeerIdentity::new(
            "CN=alice",
            Some("alice".into()),
            vec!["alice.example".into()],
        );
        assert!(id.has_name("alice"));
        assert!(id.has_name("alice.example"));
        assert!(!id.has_name("bob"));
    }
}
