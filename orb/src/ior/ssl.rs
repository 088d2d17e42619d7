//! The SSLIOP component `TAG_SSL_SEC_TRANS` (tag 20): how an IIOP profile says that its object
//! is reached over TLS, and on which port. Sans-I/O: bytes in, values out.
//!
//! Its data is an encapsulation of
//! `struct SSL { unsigned short target_supports; unsigned short target_requires; unsigned short
//! port; }`, the first two being CSIIOP `AssociationOptions` bit sets ([`SslComponent::INTEGRITY`]
//! and the others).
//!
//! What omniORB 4.2 does (read off a real `giop:ssl:` server with `catior`, see the tests):
//! - an endpoint `giop:ssl:HOST:PORT` adds this component with `target_supports` and
//!   `target_requires` both `0x66` (Integrity, Confidentiality, EstablishTrustInTarget,
//!   EstablishTrustInClient), hard-wired whatever the server's verify mode;
//! - when a server has only SSL endpoints, the profile's own (plain IIOP) port is `0`, so a
//!   client that does not understand the component cannot connect in clear;
//! - the component is written little-endian: `14000000 08000000 | 01 00 6600 6600 PPPP`.
//!
//! A client that finds the component connects with TLS to the profile's host on
//! [`SslComponent::port`].

use super::{IiopProfile, TaggedComponent};
use crate::cdr::{encapsulate, ByteOrder, CdrReader, DecodeError, DecodeResultExt};
use crate::version::Version;
use bytes::Bytes;

/// Component tag `TAG_SSL_SEC_TRANS` (SSLIOP): an [`SslComponent`].
pub const TAG_SSL_SEC_TRANS: u32 = 20;

/// The decoded `SSLIOP::SSL` component: the association options the target supports and
/// requires, and its TLS port.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SslComponent {
    /// `AssociationOptions` the target supports.
    pub target_supports: u16,
    /// `AssociationOptions` the target requires of a client.
    pub target_requires: u16,
    /// The TLS port (on the profile's host).
    pub port: u16,
}

impl SslComponent {
    /// `AssociationOptions` bit NoProtection: messages may go in clear.
    pub const NO_PROTECTION: u16 = 0x01;
    /// `AssociationOptions` bit Integrity.
    pub const INTEGRITY: u16 = 0x02;
    /// `AssociationOptions` bit Confidentiality.
    pub const CONFIDENTIALITY: u16 = 0x04;
    /// `AssociationOptions` bit DetectReplay.
    pub const DETECT_REPLAY: u16 = 0x08;
    /// `AssociationOptions` bit DetectMisordering.
    pub const DETECT_MISORDERING: u16 = 0x10;
    /// `AssociationOptions` bit EstablishTrustInTarget: the server proves who it is.
    pub const ESTABLISH_TRUST_IN_TARGET: u16 = 0x20;
    /// `AssociationOptions` bit EstablishTrustInClient: the client proves who it is (a client
    /// certificate).
    pub const ESTABLISH_TRUST_IN_CLIENT: u16 = 0x40;

    /// What omniORB 4.2 writes in both `target_supports` and `target_requires` for every SSL
    /// endpoint: Integrity | Confidentiality | EstablishTrustInTarget | EstablishTrustInClient.
    pub const OMNIORB_OPTIONS: u16 = Self::INTEGRITY
        | Self::CONFIDENTIALITY
        | Self::ESTABLISH_TRUST_IN_TARGET
        | Self::ESTABLISH_TRUST_IN_CLIENT;

    /// The component for a TLS listener on `port`, with omniORB's options: supports
    /// [`SslComponent::OMNIORB_OPTIONS`]; requires the same when `require_client_cert` (as
    /// omniORB always says), else the same without EstablishTrustInClient.
    pub fn for_tls(port: u16, require_client_cert: bool) -> SslComponent {
        let target_requires = if require_client_cert {
            Self::OMNIORB_OPTIONS
        } else {
            Self::OMNIORB_OPTIONS & !Self::ESTABLISH_TRUST_IN_CLIENT
        };
        SslComponent {
            target_supports: Self::OMNIORB_OPTIONS,
            target_requires,
            port,
        }
    }

    /// Whether the target requires a client certificate (EstablishTrustInClient in
    /// `target_requires`).
    pub fn requires_client_cert(&self) -> bool {
        self.target_requires & Self::ESTABLISH_TRUST_IN_CLIENT != 0
    }

    /// Decodes `component_data` (an encapsulation, either byte order). Bytes after the three
    /// shorts are ignored, as for the IIOP profile body.
    pub fn decode(component_data: &[u8]) -> Result<SslComponent, DecodeError> {
        let mut r = CdrReader::encapsulation(component_data).field("SSL")?;
        let target_supports = r.read_u16().field("target_supports")?;
        let target_requires = r.read_u16().field("target_requires")?;
        let port = r.read_u16().field("port")?;
        Ok(SslComponent {
            target_supports,
            target_requires,
            port,
        })
    }

    /// Decodes `c` if it is a `TAG_SSL_SEC_TRANS` component; `None` for any other tag.
    pub fn from_component(c: &TaggedComponent) -> Option<Result<SslComponent, DecodeError>> {
        (c.tag == TAG_SSL_SEC_TRANS).then(|| SslComponent::decode(&c.data))
    }

    /// This component's data: an encapsulation in `order` (omniORB writes its native order,
    /// little-endian on x86; both decode the same).
    pub fn encode_data(&self, order: ByteOrder) -> Bytes {
        encapsulate(order, |w| {
            w.write_u16(self.target_supports);
            w.write_u16(self.target_requires);
            w.write_u16(self.port);
        })
        .freeze()
    }

    /// This component as a `TaggedComponent` (tag 20, data encapsulated in our native order).
    pub fn to_component(&self) -> TaggedComponent {
        TaggedComponent {
            tag: TAG_SSL_SEC_TRANS,
            data: self.encode_data(ByteOrder::NATIVE),
        }
    }

    /// The names of the `AssociationOptions` bits set in `options`, lowest bit first (bits
    /// without a name are left out), e.g. for `0x66`: Integrity, Confidentiality,
    /// EstablishTrustInTarget, EstablishTrustInClient.
    pub fn option_names(options: u16) -> impl Iterator<Item = &'static str> {
        const NAMES: [(u16, &str); 7] = [
            (SslComponent::NO_PROTECTION, "NoProtection"),
            (SslComponent::INTEGRITY, "Integrity"),
            (SslComponent::CONFIDENTIALITY, "Confidentiality"),
            (SslComponent::DETECT_REPLAY, "DetectReplay"),
            (SslComponent::DETECT_MISORDERING, "DetectMisordering"),
            (
                SslComponent::ESTABLISH_TRUST_IN_TARGET,
                "EstablishTrustInTarget",
            ),
            (
                SslComponent::ESTABLISH_TRUST_IN_CLIENT,
                "EstablishTrustInClient",
            ),
        ];
        NAMES
            .into_iter()
            .filter(move |(bit, _)| options & bit != 0)
            .map(|(_, name)| name)
    }
}

impl IiopProfile {
    /// The first `TAG_SSL_SEC_TRANS` component that decodes, if any. A malformed one is
    /// skipped (a reference from a hostile peer cannot make us panic, and a client then falls
    /// back to the plain port, which omniORB sets to 0 when it offers only SSL).
    pub fn ssl(&self) -> Option<SslComponent> {
        self.components
            .iter()
            .find_map(|c| SslComponent::from_component(c).and_then(Result::ok))
    }

    /// An IIOP 1.2 profile for an object reached only over TLS, as omniORB publishes one for a
    /// `giop:ssl:` endpoint: plain port 0 and a `TAG_SSL_SEC_TRANS` component giving `tls_port`
    /// (see [`SslComponent::for_tls`] for the options).
    pub fn tls(
        host: impl Into<String>,
        tls_port: u16,
        object_key: impl Into<Bytes>,
        require_client_cert: bool,
    ) -> IiopProfile {
        IiopProfile {
            version: Version::V1_2,
            host: host.into(),
            port: 0,
            object_key: object_key.into(),
            components: vec![SslComponent::for_tls(tls_port, require_client_cert).to_component()],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cdr::DecodeErrorKind;
    use crate::ior::ObjectRef;

    /// The IOR an omniORB 4.2.5 `interop_server --ssl DIR -ORBendPoint giop:ssl:127.0.0.1:`
    /// printed (Echo in the INS POA). `catior` shows: IIOP 1.2 127.0.0.1 0 "Echo",
    /// TAG_ORB_TYPE omniORB, TAG_CODE_SETS, `TAG_SSL_SEC_TRANS port = 45237 supports 102
    /// requires 102`.
    const OMNIORB_SSL_IOR: &str = "IOR:010000001500000049444c3a696e7465726f702f4563686f3a31\
        2e3000000000010000000000000064000000010102000a0000003132372e302e302e310000000400000045\
        63686f0300000000000000080000000100000000545441010000001c0000000100000001000100010000000\
        10001050901010001000000090101001400000008000000010066006600b5b0";

    /// Its TAG_SSL_SEC_TRANS component data: LE encapsulation, 0x66, 0x66, port 0xb0b5.
    const OMNIORB_SSL_DATA: [u8; 8] = [0x01, 0x00, 0x66, 0x00, 0x66, 0x00, 0xb5, 0xb0];

    #[test]
    fn decodes_omniorbs_bytes() {
        let c = SslComponent::decode(&OMNIORB_SSL_DATA).unwrap();
        assert_eq!(
            c,
            SslComponent {
                target_supports: 0x66,
                target_requires: 0x66,
                port: 45237,
            }
        );
        assert!(c.requires_client_cert());
        assert_eq!(c, SslComponent::for_tls(45237, true));
        assert_eq!(
            SslComponent::option_names(c.target_supports).collect::<Vec<_>>(),
            [
                "Integrity",
                "Confidentiality",
                "EstablishTrustInTarget",
                "EstablishTrustInClient"
            ]
        );
    }

    #[test]
    fn decodes_omniorbs_ior() {
        let r = ObjectRef::parse(OMNIORB_SSL_IOR).unwrap();
        assert_eq!(r.type_id(), "IDL:interop/Echo:1.0");
        let p = r.primary().unwrap();
        assert_eq!((p.host.as_str(), p.port), ("127.0.0.1", 0));
        assert_eq!(&p.object_key[..], b"Echo");
        let ssl_components: Vec<_> = p
            .components
            .iter()
            .filter(|c| c.tag == TAG_SSL_SEC_TRANS)
            .collect();
        assert_eq!(ssl_components.len(), 1);
        assert_eq!(&ssl_components[0].data[..], &OMNIORB_SSL_DATA);
        assert_eq!(p.ssl(), Some(SslComponent::for_tls(45237, true)));
    }

    #[test]
    fn encodes_like_omniorb() {
        let c = SslComponent::for_tls(45237, true);
        assert_eq!(&c.encode_data(ByteOrder::Little)[..], &OMNIORB_SSL_DATA);
        assert_eq!(
            &c.encode_data(ByteOrder::Big)[..],
            &[0x00, 0x00, 0x00, 0x66, 0x00, 0x66, 0xb0, 0xb5]
        );
        let tc = c.to_component();
        assert_eq!(tc.tag, 20);
        assert_eq!(SslComponent::from_component(&tc), Some(Ok(c)));
    }

    #[test]
    fn without_client_certs_trust_in_client_is_supported_not_required() {
        let c = SslComponent::for_tls(1, false);
        assert_eq!(c.target_supports, 0x66);
        assert_eq!(c.target_requires, 0x26);
        assert!(!c.requires_client_cert());
    }

    #[test]
    fn tls_profile_round_trips_through_an_ior() {
        let p = IiopProfile::tls("localhost", 4433, Bytes::from_static(b"key"), true);
        assert_eq!(p.port, 0);
        let r = ObjectRef::from_iiop_profiles("IDL:X:1.0", vec![p]);
        let back = ObjectRef::parse(&r.to_ior_string()).unwrap();
        let q = back.primary().unwrap();
        assert_eq!(q.port, 0);
        assert_eq!(q.ssl(), Some(SslComponent::for_tls(4433, true)));
        // A plain profile has none.
        let plain = ObjectRef::new("", "h", 1, Bytes::from_static(b"k"));
        assert_eq!(plain.primary().unwrap().ssl(), None);
    }

    #[test]
    fn hostile_bytes_are_errors() {
        assert_eq!(
            SslComponent::decode(&[]).unwrap_err().kind(),
            &DecodeErrorKind::EmptyEncapsulation
        );
        for n in 1..OMNIORB_SSL_DATA.len() {
            let e = SslComponent::decode(&OMNIORB_SSL_DATA[..n]).unwrap_err();
            assert!(
                matches!(e.kind(), DecodeErrorKind::UnexpectedEof { .. }),
                "{n}: {e:?}"
            );
        }
        // A bad byte-order octet.
        assert!(SslComponent::decode(&[7, 0, 0, 0, 0, 0, 0, 0]).is_err());
        // Trailing bytes are tolerated.
        let mut long = OMNIORB_SSL_DATA.to_vec();
        long.extend_from_slice(&[0xff; 9]);
        assert!(SslComponent::decode(&long).is_ok());
        // Every prefix and every one-byte corruption of a whole profile: no panic, and ssl()
        // is either the right answer or None.
        let p = IiopProfile::tls("h", 7, Bytes::from_static(b"k"), true).encode();
        for i in 0..p.len() {
            let _ = IiopProfile::decode(&p[..i]).map(|q| q.ssl());
            for b in [0x00, 0x01, 0x7f, 0xff] {
                let mut v = p.to_vec();
                v[i] = b;
                let _ = IiopProfile::decode(&v).map(|q| q.ssl());
            }
        }
        // A malformed SSL component is skipped; a later good one is found.
        let q = IiopProfile {
            components: vec![
                TaggedComponent {
                    tag: TAG_SSL_SEC_TRANS,
                    data: Bytes::from_static(&[1, 0, 0x66]),
                },
                SslComponent::for_tls(9, false).to_component(),
            ],
            ..IiopProfile::tls("h", 7, Bytes::new(), true)
        };
        assert_eq!(q.ssl(), Some(SslComponent::for_tls(9, false)));
    }
}
