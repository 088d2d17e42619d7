//! Object references: `IOR:` strings, inline CDR, `corbaloc:` URLs and the protobuf mapping
//! (WIRE-GIOP §1.3, §4).

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;
use prost::Message as _;
use protorb::cdr::{encapsulate, ByteOrder, CdrReader, CdrWriter, DecodeErrorKind};
use protorb::{
    minor, IiopProfile, IorError, ObjectRef, SystemException, SystemExceptionKind, TaggedComponent,
    TaggedProfile, Version,
};

// ---------------------------------------------------------------------------------------------
// Fixtures
// ---------------------------------------------------------------------------------------------

/// omniNames' root context, rebuilt from the annotated dump in WIRE-GIOP §4.4 (little-endian).
const OMNI_NAMES_IOR: &str = concat!(
    "IOR:",
    "01000000", // byte order LE, pad 3
    "2b000000", // type id length 43
    "49444c3a6f6d672e6f72672f436f734e616d696e672f4e616d696e67436f6e746578744578743a312e3000",
    "00",       // pad
    "01000000", // 1 profile
    "00000000", // tag 0: TAG_INTERNET_IOP
    "6c000000", // profile_data length 108
    /**/ "01", // profile byte order LE
    /**/ "0102", // IIOP 1.2
    /**/ "00", // pad
    /**/ "0a000000", // host length 10
    /**/ "3132372e302e302e3100", // "127.0.0.1\0"
    /**/ "ba6d", // port 28090
    /**/ "0b000000", // key length 11
    /**/ "4e616d6553657276696365", // "NameService"
    /**/ "00", // pad
    /**/ "03000000", // 3 components
    /**/ "00000000",
    "08000000",
    "0100000000545441", // TAG_ORB_TYPE = 0x41545400
    /**/ "01000000",
    "1c000000", // TAG_CODE_SETS, 28 bytes:
    /**/ "01000000010001000100000001000105090101000100000009010100",
    /**/ "03545441",
    "08000000",
    "1b54026b01002201", // TAG_OMNIORB_PERSISTENT_ID (raw)
);

const NAMING_CONTEXT_EXT: &str = "IDL:omg.org/CosNaming/NamingContextExt:1.0";

/// omniORB's own TAG_CODE_SETS component data (WIRE-GIOP §4.3).
const OMNI_CODE_SETS: [u8; 28] = [
    0x01, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 0x05,
    0x09, 0x01, 0x01, 0x00, 0x01, 0x00, 0x00, 0x00, 0x09, 0x01, 0x01, 0x00,
];

fn omni_names_bytes() -> Vec<u8> {
    hex::decode(&OMNI_NAMES_IOR[4..]).unwrap()
}

/// A big-endian IOR built by hand: type "IDL:Echo:1.0", an IIOP 1.2 profile (BE) with one
/// component, then a TAG_MULTIPLE_COMPONENTS profile.
fn big_endian_ior() -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&[0, 0, 0, 0]); // 0: BE, pad 3
    v.extend_from_slice(&[0, 0, 0, 13]); // 4: type id length 13
    v.extend_from_slice(b"IDL:Echo:1.0\0"); // 8..21
    v.extend_from_slice(&[0, 0, 0]); // 21: pad to 24
    v.extend_from_slice(&[0, 0, 0, 2]); // 24: 2 profiles
    v.extend_from_slice(&[0, 0, 0, 0]); // 28: tag 0
    v.extend_from_slice(&[0, 0, 0, 52]); // 32: profile_data length 52
    {
        v.extend_from_slice(&[0, 1, 2, 0]); // +0: BE, IIOP 1.2, pad
        v.extend_from_slice(&[0, 0, 0, 12]); // +4: host length 12
        v.extend_from_slice(b"example.org\0"); // +8..+20
        v.extend_from_slice(&[0x0b, 0x01]); // +20: port 2817
        v.extend_from_slice(&[0, 0]); // +22: pad
        v.extend_from_slice(&[0, 0, 0, 4]); // +24: key length 4
        v.extend_from_slice(&[0x00, 0x01, 0xfe, 0xff]); // +28: key
        v.extend_from_slice(&[0, 0, 0, 1]); // +32: 1 component
        v.extend_from_slice(&[0, 0, 0, 0]); // +36: TAG_ORB_TYPE
        v.extend_from_slice(&[0, 0, 0, 8]); // +40: length 8
        v.extend_from_slice(&[0, 0, 0, 0, 0x41, 0x54, 0x54, 0x00]); // +44: BE encap, "ATT\0"
    }
    v.extend_from_slice(&[0, 0, 0, 1]); // 88: tag 1 (TAG_MULTIPLE_COMPONENTS)
    v.extend_from_slice(&[0, 0, 0, 8]); // 92: length 8
    v.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0]); // 96: BE encap, 0 components
    assert_eq!(v.len(), 104);
    v
}

fn profile(version: Version, host: &str, port: u16, key: &[u8]) -> IiopProfile {
    IiopProfile {
        version,
        host: host.to_owned(),
        port,
        object_key: Bytes::copy_from_slice(key),
        components: Vec::new(),
    }
}

fn bad_corbaloc(s: &str) -> bool {
    matches!(ObjectRef::parse(s), Err(IorError::BadCorbaloc(_)))
}

/// Encodes inline (`IOP::IOR` struct) in `order`, starting at logical offset `offset`.
fn inline(r: &ObjectRef, order: ByteOrder, offset: usize) -> BytesMut {
    let mut buf = BytesMut::new();
    let mut w = CdrWriter::with_offset(&mut buf, order, offset);
    r.encode(&mut w);
    buf
}

fn from_inline(data: &[u8], order: ByteOrder, offset: usize) -> ObjectRef {
    let mut rd = CdrReader::with_offset(data, order, offset);
    let r = ObjectRef::decode(&mut rd).unwrap();
    assert_eq!(rd.remaining(), 0);
    r
}

// ---------------------------------------------------------------------------------------------
// IOR strings
// ---------------------------------------------------------------------------------------------

#[test]
fn omni_names_ior_parses() {
    let r = ObjectRef::parse(OMNI_NAMES_IOR).unwrap();
    assert_eq!(r.type_id(), NAMING_CONTEXT_EXT);
    assert!(!r.is_nil());
    assert_eq!(r.profiles().len(), 1);
    assert_eq!(r.profiles()[0].tag, 0);
    assert_eq!(r.profiles()[0].data.len(), 108);
    assert_eq!(r.iiop_profiles().len(), 1);
    let p = r.primary().unwrap();
    assert_eq!(p.version, Version::V1_2);
    assert_eq!(p.host, "127.0.0.1");
    assert_eq!(p.port, 28090);
    assert_eq!(&p.object_key[..], b"NameService");
    assert_eq!(
        p.components,
        vec![
            TaggedComponent {
                tag: 0,
                data: Bytes::from_static(&[1, 0, 0, 0, 0x00, 0x54, 0x54, 0x41]),
            },
            TaggedComponent {
                tag: 1,
                data: Bytes::copy_from_slice(&OMNI_CODE_SETS),
            },
            TaggedComponent {
                tag: 0x4154_5403,
                data: Bytes::from_static(&[0x1b, 0x54, 0x02, 0x6b, 0x01, 0x00, 0x22, 0x01]),
            },
        ]
    );
}

#[test]
fn omni_names_ior_re_encodes_byte_for_byte() {
    let r = ObjectRef::parse(OMNI_NAMES_IOR).unwrap();
    let bytes = omni_names_bytes();
    assert_eq!(bytes.len(), 172);
    if ByteOrder::NATIVE == ByteOrder::Little {
        assert_eq!(r.to_ior_string(), OMNI_NAMES_IOR);
        assert_eq!(&r.to_encapsulation()[..], &bytes[..]);
        assert_eq!(r.to_string(), OMNI_NAMES_IOR);
    }
    // Inline, little-endian, after the byte-order octet: the same bytes as the string holds.
    assert_eq!(&inline(&r, ByteOrder::Little, 1)[..], &bytes[1..]);
    // The profile, re-encoded from its parsed form (LE native), is the same too.
    if ByteOrder::NATIVE == ByteOrder::Little {
        assert_eq!(r.primary().unwrap().encode(), r.profiles()[0].data);
    }
    assert_eq!(
        IiopProfile::decode(&r.profiles()[0].data).unwrap(),
        *r.primary().unwrap()
    );
}

#[test]
fn ior_prefix_and_hex_in_any_case() {
    let r = ObjectRef::parse(OMNI_NAMES_IOR).unwrap();
    let upper = OMNI_NAMES_IOR.to_ascii_uppercase();
    assert_eq!(ObjectRef::parse(&upper).unwrap(), r);
    let lower = OMNI_NAMES_IOR.to_ascii_lowercase();
    assert_eq!(ObjectRef::parse(&lower).unwrap(), r);
    let mixed = format!("iOr:{}", &OMNI_NAMES_IOR[4..]);
    assert_eq!(mixed.parse::<ObjectRef>().unwrap(), r);
    // A trailing newline (as in an IOR file) is fine.
    assert_eq!(ObjectRef::parse(&format!("{OMNI_NAMES_IOR}\n")).unwrap(), r);
}

#[test]
fn garbage_padding_is_ignored() {
    let mut bytes = omni_names_bytes();
    // Outer pad after the byte-order octet, pad after the type id, pad inside the profile.
    bytes[1..4].copy_from_slice(&[0xde, 0xad, 0xbe]);
    bytes[51] = 0x77;
    bytes[64 + 3] = 0x55; // after the IIOP version
    bytes[64 + 35] = 0x66; // after the key
    let r = ObjectRef::parse(&format!("IOR:{}", hex::encode(&bytes))).unwrap();
    let clean = ObjectRef::parse(OMNI_NAMES_IOR).unwrap();
    assert_eq!(r.type_id(), clean.type_id());
    assert_eq!(r.iiop_profiles(), clean.iiop_profiles());
    // The profile is kept raw, padding and all.
    assert_eq!(r.profiles()[0].data[3], 0x55);
}

#[test]
fn big_endian_ior_parses_and_round_trips() {
    let bytes = big_endian_ior();
    let s = format!("IOR:{}", hex::encode(&bytes).to_ascii_uppercase());
    let r = ObjectRef::parse(&s).unwrap();
    assert_eq!(r.type_id(), "IDL:Echo:1.0");
    assert_eq!(r.profiles().len(), 2);
    assert_eq!(r.profiles()[1].tag, 1);
    assert_eq!(&r.profiles()[1].data[..], &[0u8; 8]);
    assert_eq!(r.iiop_profiles().len(), 1);
    let p = r.primary().unwrap();
    assert_eq!(p.version, Version::V1_2);
    assert_eq!(p.host, "example.org");
    assert_eq!(p.port, 2817);
    assert_eq!(&p.object_key[..], &[0x00, 0x01, 0xfe, 0xff]);
    assert_eq!(
        p.components,
        vec![TaggedComponent {
            tag: 0,
            data: Bytes::from_static(&[0, 0, 0, 0, 0x41, 0x54, 0x54, 0x00]),
        }]
    );
    // Re-encoding in big-endian gives back the input exactly.
    let again = encapsulate(ByteOrder::Big, |w| r.encode(w));
    assert_eq!(&again[..], &bytes[..]);
    // Our string is in native order, lower case, and parses to the same reference.
    let ours = r.to_ior_string();
    assert!(ours.starts_with(&format!("IOR:0{}", ByteOrder::NATIVE.flag())));
    assert_eq!(ours, ours.to_ascii_lowercase().replacen("ior:", "IOR:", 1));
    assert_eq!(ObjectRef::parse(&ours).unwrap(), r);
    // The BE profile re-encoded natively still decodes to the same profile.
    assert_eq!(IiopProfile::decode(&p.encode()).unwrap(), *p);
    assert_eq!(
        r.to_corbaloc().unwrap(),
        "corbaloc:iiop:1.2@example.org:2817/%00%01%FE%FF"
    );
}

#[test]
fn inline_encoding_round_trips_in_both_orders_at_every_offset() {
    let r = ObjectRef::parse(OMNI_NAMES_IOR).unwrap();
    for order in [ByteOrder::Little, ByteOrder::Big] {
        for offset in 0..8 {
            let buf = inline(&r, order, offset);
            let back = from_inline(&buf, order, offset);
            assert_eq!(back, r);
            assert_eq!(inline(&back, order, offset), buf);
        }
    }
}

#[test]
fn nil_reference() {
    let nil = ObjectRef::nil();
    assert!(nil.is_nil());
    assert_eq!(nil.type_id(), "");
    assert!(nil.primary().is_none());
    assert_eq!(nil.to_corbaloc(), None);
    // WIRE-GIOP §1.3: `01 00 00 00 00 <pad 3> 00 00 00 00`.
    let buf = inline(&nil, ByteOrder::Little, 0);
    assert_eq!(&buf[..], &[1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    assert!(from_inline(&buf, ByteOrder::Little, 0).is_nil());
    let s = nil.to_ior_string();
    assert!(ObjectRef::parse(&s).unwrap().is_nil());
}

#[test]
fn new_builds_one_iiop_1_2_profile_without_components() {
    let r = ObjectRef::new("IDL:Echo:1.0", "10.0.0.7", 4000, &b"echo\xff"[..]);
    assert_eq!(r.type_id(), "IDL:Echo:1.0");
    assert_eq!(r.profiles().len(), 1);
    assert_eq!(r.profiles()[0].tag, 0);
    assert_eq!(
        r.iiop_profiles(),
        &[profile(Version::V1_2, "10.0.0.7", 4000, b"echo\xff")]
    );
    assert_eq!(ObjectRef::parse(&r.to_ior_string()).unwrap(), r);
    assert_eq!(
        r.to_corbaloc().unwrap(),
        "corbaloc:iiop:1.2@10.0.0.7:4000/echo%FF"
    );
    let renamed = r.clone().with_type_id("IDL:Other:1.0");
    assert_eq!(renamed.type_id(), "IDL:Other:1.0");
    assert_eq!(renamed.iiop_profiles(), r.iiop_profiles());
}

#[test]
fn iiop_1_0_profiles_have_no_components() {
    let mut p = profile(Version::V1_0, "h", 1, b"k");
    p.components.push(TaggedComponent {
        tag: 0,
        data: Bytes::from_static(&[1, 0, 0, 0, 0, 0x54, 0x54, 0x41]),
    });
    let data = p.encode();
    // flag, 1.0, pad | host length 2 at 4 | "h\0" | port at 10 | key length at 12 | key at 16.
    let expected_le: &[u8] = &[1, 1, 0, 0, 2, 0, 0, 0, b'h', 0, 1, 0, 1, 0, 0, 0, b'k'];
    if ByteOrder::NATIVE == ByteOrder::Little {
        assert_eq!(&data[..], expected_le);
    }
    let back = IiopProfile::decode(&data).unwrap();
    assert!(back.components.is_empty());
    let r = ObjectRef::from_iiop_profiles("", vec![p]);
    assert!(r.primary().unwrap().components.is_empty());
    assert_eq!(ObjectRef::parse(&r.to_ior_string()).unwrap(), r);
}

#[test]
fn trailing_bytes_after_components_are_tolerated() {
    let mut p = profile(Version::V1_2, "host", 7, b"key");
    p.components.push(TaggedComponent {
        tag: 9,
        data: Bytes::from_static(b"xyz"),
    });
    let mut data = BytesMut::from(&p.encode()[..]);
    data.extend_from_slice(b"\x01\x02\x03trailing");
    assert_eq!(IiopProfile::decode(&data).unwrap(), p);
    // The raw profile keeps the extra bytes, so the reference re-encodes to what it was given.
    let raw = TaggedProfile {
        tag: 0,
        data: data.freeze(),
    };
    let r = ObjectRef::from_profiles("IDL:T:1.0", vec![raw.clone()]).unwrap();
    assert_eq!(r.profiles(), &[raw]);
    assert_eq!(r.iiop_profiles(), &[p]);
    assert_eq!(ObjectRef::parse(&r.to_ior_string()).unwrap(), r);
}

#[test]
fn bad_iiop_profile_fails_the_reference() {
    let bad = [
        TaggedProfile {
            tag: 0,
            data: Bytes::new(),
        },
        TaggedProfile {
            tag: 0,
            data: Bytes::from_static(&[1, 1, 2]),
        },
        TaggedProfile {
            tag: 0,
            data: Bytes::from_static(&[7, 1, 2, 0]),
        },
        // IIOP 2.0.
        TaggedProfile {
            tag: 0,
            data: Bytes::from_static(&[1, 2, 0, 0, 2, 0, 0, 0, b'h', 0, 1, 0, 0, 0, 0, 0]),
        },
    ];
    for p in bad {
        assert!(
            ObjectRef::from_profiles("", vec![p.clone()]).is_err(),
            "{p:?}"
        );
        let enc = encapsulate(ByteOrder::Little, |w| {
            w.write_string("");
            w.write_u32(1);
            w.write_u32(p.tag);
            w.write_octets(&p.data);
        });
        let e = ObjectRef::parse(&format!("IOR:{}", hex::encode(&enc))).unwrap_err();
        assert!(matches!(e, IorError::Decode(_)), "{e:?}");
    }
    // The same bytes under another tag are just kept.
    let other = TaggedProfile {
        tag: 42,
        data: Bytes::from_static(&[7, 1, 2]),
    };
    let r = ObjectRef::from_profiles("", vec![other.clone()]).unwrap();
    assert_eq!(r.profiles(), &[other]);
    assert!(r.iiop_profiles().is_empty());
    assert!(r.primary().is_none());
    assert_eq!(r.to_corbaloc(), None);
}

#[test]
fn decode_errors_carry_a_field_path() {
    let mut bytes = omni_names_bytes();
    bytes.truncate(120); // inside the profile data
    let Err(IorError::Decode(e)) = ObjectRef::parse(&format!("IOR:{}", hex::encode(&bytes))) else {
        panic!("expected a decode error");
    };
    assert_eq!(e.path().first(), Some(&"IOR"));
    assert!(e.to_string().contains("IOR"), "{e}");
}

#[test]
fn malformed_ior_strings_are_errors() {
    assert_eq!(ObjectRef::parse(""), Err(IorError::UnknownScheme));
    assert_eq!(ObjectRef::parse("   "), Err(IorError::UnknownScheme));
    assert_eq!(ObjectRef::parse("IO"), Err(IorError::UnknownScheme));
    assert_eq!(ObjectRef::parse("http://x/"), Err(IorError::UnknownScheme));
    assert_eq!(
        ObjectRef::parse("corbaname::host#a/b"),
        Err(IorError::UnknownScheme)
    );
    assert_eq!(ObjectRef::parse("éIOR:00"), Err(IorError::UnknownScheme));
    assert_eq!(ObjectRef::parse("IOR:0"), Err(IorError::BadHex));
    assert_eq!(ObjectRef::parse("IOR:010"), Err(IorError::BadHex));
    assert_eq!(ObjectRef::parse("IOR:0g"), Err(IorError::BadHex));
    assert_eq!(ObjectRef::parse("IOR:01 00"), Err(IorError::BadHex));
    assert_eq!(ObjectRef::parse("IOR:é0"), Err(IorError::BadHex));
    assert_eq!(ObjectRef::parse("IOR:+1"), Err(IorError::BadHex));
    assert!(matches!(
        ObjectRef::parse("IOR:"),
        Err(IorError::Decode(e)) if *e.kind() == DecodeErrorKind::EmptyEncapsulation
    ));
    // A byte-order octet other than 0 or 1.
    assert!(matches!(
        ObjectRef::parse("IOR:02000000"),
        Err(IorError::Decode(_))
    ));
    // Only the byte-order octet.
    assert!(matches!(
        ObjectRef::parse("IOR:01"),
        Err(IorError::Decode(_))
    ));
}

#[test]
fn every_truncation_of_a_good_ior_is_an_error() {
    let bytes = omni_names_bytes();
    for len in 0..bytes.len() {
        let s = format!("IOR:{}", hex::encode(&bytes[..len]));
        assert!(
            matches!(ObjectRef::parse(&s), Err(IorError::Decode(_))),
            "len {len}"
        );
        assert!(
            ObjectRef::from_encapsulation(&bytes[..len]).is_err(),
            "len {len}"
        );
    }
}

#[test]
fn absurd_lengths_fail_without_allocating() {
    let cases: &[&str] = &[
        // type id length 0xFFFFFFFF (LE, BE)
        "IOR:01000000ffffffff",
        "IOR:00000000ffffffff41",
        // type id length 0 (a string must count its NUL)
        "IOR:0100000000000000",
        // type id "", then a profile count of 1e9 (LE, BE)
        "IOR:01000000010000000000000000ca9a3b",
        "IOR:0000000000000001000000003b9aca00",
        // type id "", one profile, tag 0, profile_data length 0xFFFFFFFF
        concat!("IOR:", "01000000", "01000000", "00000000", "01000000", "00000000", "ffffffff"),
        // type id "", one profile, tag 0, profile_data length 0x7FFFFFFF
        concat!(
            "IOR:", "01000000", "01000000", "00000000", "01000000", "00000000", "ffffff7f", "01"
        ),
    ];
    for s in cases {
        assert!(ObjectRef::parse(s).is_err(), "{s}");
    }
    let e = ObjectRef::parse("IOR:01000000ffffffff").unwrap_err();
    assert!(
        matches!(e, IorError::Decode(ref d) if matches!(d.kind(), DecodeErrorKind::BadLength(_)))
    );
    let e = ObjectRef::parse("IOR:01000000010000000000000000ca9a3b").unwrap_err();
    assert!(
        matches!(e, IorError::Decode(ref d) if *d.kind() == DecodeErrorKind::BadLength(1_000_000_000))
    );
    // A component count of 1e9 inside an otherwise good profile.
    let profile =
        concat!("01010200", "02000000", "6800", "0100", "01000000", "6b", "000000", "00ca9a3b");
    let data = hex::decode(profile).unwrap();
    let e = IiopProfile::decode(&data).unwrap_err();
    assert_eq!(e.kind(), &DecodeErrorKind::BadLength(1_000_000_000));
}

#[test]
fn ior_errors_become_bad_param() {
    for e in [
        IorError::UnknownScheme,
        IorError::BadHex,
        IorError::BadCorbaloc("empty host"),
        ObjectRef::parse("IOR:").unwrap_err(),
    ] {
        let text = e.to_string();
        let sys = SystemException::from(e);
        assert_eq!(sys.kind, SystemExceptionKind::BAD_PARAM);
        assert_eq!(sys.minor, minor::BAD_REFERENCE);
        assert_eq!(sys.detail(), Some(text.as_str()));
    }
}

// ---------------------------------------------------------------------------------------------
// corbaloc
// ---------------------------------------------------------------------------------------------

#[test]
fn corbaloc_defaults_are_port_2809_and_iiop_1_0() {
    let r = ObjectRef::parse("corbaloc::host/NameService").unwrap();
    assert_eq!(r.type_id(), "");
    assert_eq!(r.profiles().len(), 1);
    assert_eq!(
        r.iiop_profiles(),
        &[profile(Version::V1_0, "host", 2809, b"NameService")]
    );
    let r2 = ObjectRef::parse("corbaloc:iiop:host/NameService").unwrap();
    assert_eq!(r2, r);
}

#[test]
fn corbaloc_explicit_version_and_port() {
    let r = ObjectRef::parse("corbaloc:iiop:1.2@127.0.0.1:28090/NameService").unwrap();
    assert_eq!(
        r.iiop_profiles(),
        &[profile(Version::V1_2, "127.0.0.1", 28090, b"NameService")]
    );
    let r = ObjectRef::parse("corbaloc::1.1@h:1/k").unwrap();
    assert_eq!(r.iiop_profiles(), &[profile(Version::V1_1, "h", 1, b"k")]);
    // Scheme and protocol in any case.
    let r = ObjectRef::parse("CORBALOC:IIOP:1.2@h:1/k").unwrap();
    assert_eq!(r.iiop_profiles(), &[profile(Version::V1_2, "h", 1, b"k")]);
}

#[test]
fn corbaloc_several_addresses() {
    let r = ObjectRef::parse("corbaloc::h1,:h2:1234,iiop:1.2@h3:5/key").unwrap();
    assert_eq!(
        r.iiop_profiles(),
        &[
            profile(Version::V1_0, "h1", 2809, b"key"),
            profile(Version::V1_0, "h2", 1234, b"key"),
            profile(Version::V1_2, "h3", 5, b"key"),
        ]
    );
    assert_eq!(r.profiles().len(), 3);
    assert!(r.profiles().iter().all(|p| p.tag == 0));
    assert_eq!(
        r.to_corbaloc().unwrap(),
        "corbaloc:iiop:1.0@h1:2809,iiop:1.0@h2:1234,iiop:1.2@h3:5/key"
    );
}

#[test]
fn corbaloc_ipv6_hosts() {
    let r = ObjectRef::parse("corbaloc::1.2@[::1]:2000/k").unwrap();
    assert_eq!(
        r.iiop_profiles(),
        &[profile(Version::V1_2, "::1", 2000, b"k")]
    );
    assert_eq!(r.to_corbaloc().unwrap(), "corbaloc:iiop:1.2@[::1]:2000/k");
    let r = ObjectRef::parse("corbaloc::[fe80::1%eth0]/k").unwrap();
    assert_eq!(r.primary().unwrap().host, "fe80::1%eth0");
    assert_eq!(r.primary().unwrap().port, 2809);
    assert_eq!(ObjectRef::parse(&r.to_corbaloc().unwrap()).unwrap(), r);
}

#[test]
fn corbaloc_key_unescaping() {
    let r = ObjectRef::parse("corbaloc::h/%FFbidir%fe%00a/b?c=d").unwrap();
    assert_eq!(
        &r.primary().unwrap().object_key[..],
        b"\xffbidir\xfe\x00a/b?c=d"
    );
    // The key ends at '#'.
    let r = ObjectRef::parse("corbaloc::h/Name#Service").unwrap();
    assert_eq!(&r.primary().unwrap().object_key[..], b"Name");
    // The whole unreserved set passes through.
    let set = "AZaz09;/?:@&=+$,-_.!~*'()";
    let r = ObjectRef::parse(&format!("corbaloc::h/{set}")).unwrap();
    assert_eq!(&r.primary().unwrap().object_key[..], set.as_bytes());
    // An empty key is allowed.
    let r = ObjectRef::parse("corbaloc::h/").unwrap();
    assert!(r.primary().unwrap().object_key.is_empty());
}

#[test]
fn corbaloc_errors() {
    for s in [
        "corbaloc::host",               // no '/'
        "corbaloc:",                    // nothing
        "corbaloc:/key",                // no address
        "corbaloc::/key",               // empty host
        "corbaloc::1.2@/key",           // empty host
        "corbaloc::h1,/key",            // empty second address
        "corbaloc::h1,,:h2/key",        // empty address
        "corbaloc::[]:80/key",          // empty IPv6 host
        "corbaloc::[::1/key",           // unclosed '['
        "corbaloc::[::1]x/key",         // junk after ']'
        "corbaloc::host:/key",          // empty port
        "corbaloc::host:65536/key",     // port too big
        "corbaloc::host:-1/key",        // negative port
        "corbaloc::host:+80/key",       // signed port
        "corbaloc::host:80:81/key",     // two ports
        "corbaloc::host:http/key",      // named port
        "corbaloc::x.y@host/key",       // bad version
        "corbaloc::1@host/key",         // bad version
        "corbaloc::2.0@host/key",       // unsupported major
        "corbaloc::1.2@@host/key",      // '@' in host
        "corbaloc::ho st/key",          // space in host
        "corbaloc::hö/key",             // non-ASCII host
        "corbaloc::h/a b",              // space in key
        "corbaloc::h/a%",               // truncated escape
        "corbaloc::h/a%4",              // truncated escape
        "corbaloc::h/a%zz",             // non-hex escape
        "corbaloc::h/\u{e9}",           // non-ASCII in key
        "corbaloc::h/a\"b",             // quote in key
        "corbaloc:rir:/NameService",    // rir unsupported
        "corbaloc:ssliop:h/key",        // ssliop unsupported
        "corbaloc:omniunix:/tmp/s:key", // omniunix unsupported
    ] {
        assert!(bad_corbaloc(s), "{s}: {:?}", ObjectRef::parse(s));
    }
    let Err(IorError::BadCorbaloc(why)) = ObjectRef::parse("corbaloc:rir:/NameService") else {
        panic!("rir: must be refused");
    };
    assert!(why.contains("rir"), "{why}");
    // Without '@' there is no version: "1.2host" is a host name.
    let r = ObjectRef::parse("corbaloc::1.2host/key").unwrap();
    assert_eq!(
        r.iiop_profiles(),
        &[profile(Version::V1_0, "1.2host", 2809, b"key")]
    );
    assert_eq!(
        ObjectRef::parse("corbaloc:http:h/key"),
        Err(IorError::UnknownScheme)
    );
    assert_eq!(
        ObjectRef::parse("corbaloc:host:2809/key"),
        Err(IorError::UnknownScheme)
    );
}

#[test]
fn to_corbaloc_formats() {
    let r = ObjectRef::parse(OMNI_NAMES_IOR).unwrap();
    assert_eq!(
        r.to_corbaloc().unwrap(),
        "corbaloc:iiop:1.2@127.0.0.1:28090/NameService"
    );
    // omniORB transient POA key.
    let key = b"\xffbidir\xfe\x00\x01";
    let r = ObjectRef::new("IDL:X:1.0", "h", 1, &key[..]);
    assert_eq!(
        r.to_corbaloc().unwrap(),
        "corbaloc:iiop:1.2@h:1/%FFbidir%FE%00%01"
    );
    // Only the profiles that share the primary's key are listed, each with its own version.
    let r = ObjectRef::from_iiop_profiles(
        "IDL:X:1.0",
        vec![
            profile(Version::V1_2, "a", 1, b"k"),
            profile(Version::V1_1, "b", 2, b"other"),
            profile(Version::V1_0, "fd00::2", 3, b"k"),
        ],
    );
    assert_eq!(
        r.to_corbaloc().unwrap(),
        "corbaloc:iiop:1.2@a:1,iiop:1.0@[fd00::2]:3/k"
    );
    // A host that cannot be written in a URL.
    let r = ObjectRef::new("", "bad host", 1, &b"k"[..]);
    assert_eq!(r.to_corbaloc(), None);
    let r = ObjectRef::new("", "", 1, &b"k"[..]);
    assert_eq!(r.to_corbaloc(), None);
    let r = ObjectRef::from_iiop_profiles(
        "",
        vec![
            profile(Version::V1_2, "a", 1, b"k"),
            profile(Version::V1_2, "b/c", 2, b"k"),
        ],
    );
    assert_eq!(r.to_corbaloc().unwrap(), "corbaloc:iiop:1.2@a:1/k");
}

#[test]
fn corbaloc_round_trips() {
    for url in [
        "corbaloc:iiop:1.2@127.0.0.1:28090/NameService",
        "corbaloc:iiop:1.0@h1:2809,iiop:1.1@[::1]:1/%FFbidir%FE",
        "corbaloc:iiop:1.2@example.org:65535/a/b;c",
        "corbaloc:iiop:1.2@h:0/",
    ] {
        let r = ObjectRef::parse(url).unwrap();
        assert_eq!(r.to_corbaloc().unwrap(), url);
        assert_eq!(ObjectRef::parse(&r.to_ior_string()).unwrap(), r);
    }
}

// ---------------------------------------------------------------------------------------------
// protobuf
// ---------------------------------------------------------------------------------------------

#[derive(Clone, PartialEq, prost::Message)]
struct Holder {
    #[prost(message, optional, tag = "1")]
    r: Option<ObjectRef>,
    #[prost(string, tag = "2")]
    name: String,
}

#[test]
fn prost_encodes_the_ior_encapsulation() {
    let r = ObjectRef::parse(OMNI_NAMES_IOR).unwrap();
    let buf = r.encode_to_vec();
    let enc = r.to_encapsulation();
    // field 1, wire type 2; length 172 as a varint (0xac 0x01); the encapsulation.
    assert_eq!(&buf[..3], &[0x0a, 0xac, 0x01]);
    assert_eq!(&buf[3..], &enc[..]);
    assert_eq!(r.encoded_len(), buf.len());
    assert_eq!(<ObjectRef as prost::Message>::decode(&buf[..]).unwrap(), r);
}

#[test]
fn prost_nil_is_the_empty_message() {
    let nil = ObjectRef::nil();
    assert_eq!(nil.encoded_len(), 0);
    assert!(nil.encode_to_vec().is_empty());
    assert!(<ObjectRef as prost::Message>::decode(&[][..])
        .unwrap()
        .is_nil());
    // An explicitly empty `ior` is nil too.
    assert!(<ObjectRef as prost::Message>::decode(&[0x0a, 0x00][..])
        .unwrap()
        .is_nil());
    // A non-nil reference overwritten by an empty field becomes nil (last one wins).
    let mut r = ObjectRef::new("IDL:X:1.0", "h", 1, &b"k"[..]);
    r.merge(&[0x0a, 0x00][..]).unwrap();
    assert!(r.is_nil());
    let mut r = ObjectRef::new("IDL:X:1.0", "h", 1, &b"k"[..]);
    prost::Message::clear(&mut r);
    assert!(r.is_nil());
}

#[test]
fn prost_skips_unknown_fields_and_rejects_bad_iors() {
    let r = ObjectRef::new("IDL:X:1.0", "h", 1, &b"k"[..]);
    let mut buf = vec![0x10, 0x05]; // field 2, varint 5
    buf.extend_from_slice(&r.encode_to_vec());
    buf.extend_from_slice(&[0x1a, 0x02, b'h', b'i']); // field 3, bytes "hi"
    assert_eq!(<ObjectRef as prost::Message>::decode(&buf[..]).unwrap(), r);

    let bad: &[&[u8]] = &[
        &[0x0a, 0x01, 0x01],                               // byte-order octet only
        &[0x0a, 0x01, 0x07],                               // bad byte-order octet
        &[0x0a, 0x04, 0x01, 0x00, 0x00, 0x00],             // no type id
        &[0x0a, 0x08, 1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff], // hostile length
    ];
    for b in bad {
        let e = <ObjectRef as prost::Message>::decode(*b).unwrap_err();
        assert!(
            e.to_string().contains("invalid IOR in orb.ObjectRef"),
            "{e}"
        );
    }
    // Wrong wire type for field 1, and a truncated field.
    assert!(<ObjectRef as prost::Message>::decode(&[0x08, 0x01][..]).is_err());
    assert!(<ObjectRef as prost::Message>::decode(&[0x0a, 0x05, 0x01][..]).is_err());
}

#[test]
fn prost_derive_holder_round_trips() {
    let r = ObjectRef::parse(OMNI_NAMES_IOR).unwrap();
    let h = Holder {
        r: Some(r.clone()),
        name: "root".into(),
    };
    let buf = h.encode_to_vec();
    assert_eq!(h.encoded_len(), buf.len());
    let back = Holder::decode(&buf[..]).unwrap();
    assert_eq!(back, h);
    assert_eq!(back.r.unwrap().primary().unwrap().port, 28090);

    // An absent field stays None; a present nil reference is an empty sub-message.
    let none = Holder {
        r: None,
        name: "x".into(),
    };
    assert_eq!(Holder::decode(&none.encode_to_vec()[..]).unwrap(), none);
    let nil = Holder {
        r: Some(ObjectRef::nil()),
        name: String::new(),
    };
    let buf = nil.encode_to_vec();
    assert_eq!(buf, vec![0x0a, 0x00]);
    assert!(Holder::decode(&buf[..]).unwrap().r.unwrap().is_nil());

    // A bad IOR inside fails the holder's decode.
    let e = Holder::decode(&[0x0a, 0x03, 0x0a, 0x01, 0x07][..]).unwrap_err();
    assert!(
        e.to_string().contains("invalid IOR in orb.ObjectRef"),
        "{e}"
    );
    // Debug works through the derive (prost's derived Debug calls ours).
    assert!(format!("{h:?}").contains("127.0.0.1:28090"));
}

// ---------------------------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------------------------

fn host() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z][a-z0-9-]{0,10}(\\.[a-z]{1,5}){0,2}",
        "[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}",
        "[0-9a-f]{0,4}(:[0-9a-f]{0,4}){2,7}",
    ]
}

fn component() -> impl Strategy<Value = TaggedComponent> {
    (any::<u32>(), proptest::collection::vec(any::<u8>(), 0..16)).prop_map(|(tag, data)| {
        TaggedComponent {
            tag,
            data: data.into(),
        }
    })
}

fn iiop_profile() -> impl Strategy<Value = IiopProfile> {
    (
        0u8..=3,
        host(),
        any::<u16>(),
        proptest::collection::vec(any::<u8>(), 0..24),
        proptest::collection::vec(component(), 0..4),
    )
        .prop_map(|(minor, host, port, key, components)| IiopProfile {
            version: Version { major: 1, minor },
            host,
            port,
            object_key: key.into(),
            components: if minor == 0 { Vec::new() } else { components },
        })
}

fn any_profile() -> impl Strategy<Value = TaggedProfile> {
    prop_oneof![
        iiop_profile().prop_map(|p| p.to_tagged_profile()),
        (1u32.., proptest::collection::vec(any::<u8>(), 0..24)).prop_map(|(tag, data)| {
            TaggedProfile {
                tag,
                data: data.into(),
            }
        }),
    ]
}

fn object_ref() -> impl Strategy<Value = ObjectRef> {
    ("\\PC{0,24}", proptest::collection::vec(any_profile(), 0..4))
        .prop_map(|(type_id, profiles)| ObjectRef::from_profiles(type_id, profiles).unwrap())
}

fn exercise(s: &str) {
    if let Ok(r) = ObjectRef::parse(s) {
        // Whatever parsed must re-encode and parse again to the same reference.
        assert_eq!(ObjectRef::parse(&r.to_ior_string()).unwrap(), r);
        if let Some(url) = r.to_corbaloc() {
            let _ = ObjectRef::parse(&url).unwrap();
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_strings_never_panic(s in "\\PC{0,64}", raw in ".{0,64}") {
        exercise(&s);
        exercise(&raw);
        exercise(&format!("IOR:{s}"));
        exercise(&format!("corbaloc:{s}"));
        exercise(&format!("corbaloc::{s}"));
        exercise(&format!("corbaloc:iiop:1.2@{s}"));
    }

    #[test]
    fn arbitrary_corbaloc_like_strings_never_panic(
        s in "corbaloc:(iiop:|:|rir:|x:)?([0-9]\\.[0-9]@)?(\\[[0-9a-f:%]{0,8}\\]|[a-z0-9.]{0,6})(:[0-9]{0,6})?(,:[a-z]{0,3})?/[a-zA-Z0-9%/#?é ]{0,12}",
    ) {
        exercise(&s);
    }

    #[test]
    fn arbitrary_bytes_after_ior_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        exercise(&format!("IOR:{}", hex::encode(&bytes)));
        // With a plausible start, so the decoder gets further in.
        for start in [&[1u8, 0, 0, 0][..], &[0, 0, 0, 0][..], &[1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0][..]] {
            let mut b = start.to_vec();
            b.extend_from_slice(&bytes);
            exercise(&format!("IOR:{}", hex::encode(&b)));
        }
        let _ = IiopProfile::decode(&bytes);
        for order in [ByteOrder::Little, ByteOrder::Big] {
            let _ = ObjectRef::decode(&mut CdrReader::new(&bytes, order));
        }
        let _ = <ObjectRef as prost::Message>::decode(&bytes[..]);
        let _ = Holder::decode(&bytes[..]);
    }

    #[test]
    fn mutated_good_iors_never_panic(
        edits in proptest::collection::vec((0usize..172, any::<u8>()), 1..6),
        cut in 0usize..=172,
    ) {
        let mut bytes = omni_names_bytes();
        for (at, v) in edits {
            bytes[at] = v;
        }
        bytes.truncate(cut);
        exercise(&format!("IOR:{}", hex::encode(&bytes)));
        let mut pb = vec![0x0a];
        prost::encoding::encode_varint(bytes.len() as u64, &mut pb);
        pb.extend_from_slice(&bytes);
        let _ = <ObjectRef as prost::Message>::decode(&pb[..]);
    }

    #[test]
    fn random_object_refs_round_trip(r in object_ref(), offset in 0usize..8) {
        // IOR string.
        let s = r.to_ior_string();
        prop_assert_eq!(&ObjectRef::parse(&s).unwrap(), &r);
        prop_assert_eq!(&ObjectRef::parse(&s.to_ascii_uppercase()).unwrap(), &r);
        // Encapsulation.
        prop_assert_eq!(&ObjectRef::from_encapsulation(&r.to_encapsulation()).unwrap(), &r);
        // Inline, both orders, any alignment; re-encoding reproduces the bytes.
        for order in [ByteOrder::Little, ByteOrder::Big] {
            let buf = inline(&r, order, offset);
            let back = from_inline(&buf, order, offset);
            prop_assert_eq!(&back, &r);
            prop_assert_eq!(inline(&back, order, offset), buf);
        }
        // protobuf, alone and inside a derived message.
        let pb = r.encode_to_vec();
        prop_assert_eq!(r.encoded_len(), pb.len());
        let back = <ObjectRef as prost::Message>::decode(&pb[..]).unwrap();
        if r.is_nil() {
            prop_assert!(back.is_nil());
        } else {
            prop_assert_eq!(&back, &r);
        }
        let h = Holder { r: Some(r.clone()), name: "n".into() };
        let hb = h.encode_to_vec();
        prop_assert_eq!(h.encoded_len(), hb.len());
        let back = Holder::decode(&hb[..]).unwrap().r.unwrap();
        prop_assert_eq!(back.is_nil(), r.is_nil());
        if !r.is_nil() {
            prop_assert_eq!(&back, &r);
        }
        // The IIOP profiles are exactly the parsed tag-0 profiles.
        let parsed: Vec<IiopProfile> = r
            .profiles()
            .iter()
            .filter(|p| p.tag == 0)
            .map(|p| IiopProfile::decode(&p.data).unwrap())
            .collect();
        prop_assert_eq!(r.iiop_profiles(), &parsed[..]);
    }

    #[test]
    fn random_corbaloc_round_trips(
        profiles in proptest::collection::vec(iiop_profile(), 1..4),
        type_id in "[A-Za-z:/.0-9]{0,16}",
    ) {
        // Give every profile the first one's key so all are listed.
        let key = profiles[0].object_key.clone();
        let profiles: Vec<IiopProfile> = profiles
            .into_iter()
            .map(|p| IiopProfile { object_key: key.clone(), ..p })
            .collect();
        let r = ObjectRef::from_iiop_profiles(type_id, profiles.clone());
        let url = r.to_corbaloc().unwrap();
        let back = ObjectRef::parse(&url).unwrap();
        prop_assert_eq!(back.type_id(), "");
        let expected: Vec<IiopProfile> = profiles
            .into_iter()
            .map(|p| IiopProfile { components: Vec::new(), ..p })
            .collect();
        prop_assert_eq!(back.iiop_profiles(), &expected[..]);
        prop_assert_eq!(back.to_corbaloc().unwrap(), url);
    }
}
