//! `orb ior`: decodes an `IOR:` string or a `corbaloc:` URL and describes it, as omniORB's
//! `catior` does: type id, each profile (IIOP version, host, port, object key as escaped text
//! and hex), each tagged component (known tags named and decoded, unknown ones as hex), and
//! other profiles by tag and length.
//!
//! The reference is parsed by `protorb::ObjectRef::parse`; the component bodies, which the ORB keeps
//! raw, are read with `protorb::cdr::CdrReader`, which checks every length against the bytes left.

use protorb::cdr::CdrReader;
use protorb::{ObjectRef, SslComponent, TaggedComponent, TAG_SSL_SEC_TRANS};
use std::fmt::Write as _;

/// Component tag `TAG_ORB_TYPE`.
const TAG_ORB_TYPE: u32 = 0;
/// Component tag `TAG_CODE_SETS`.
const TAG_CODE_SETS: u32 = 1;
/// Component tag `TAG_POLICIES`.
const TAG_POLICIES: u32 = 2;
/// Component tag `TAG_ALTERNATE_IIOP_ADDRESS`.
const TAG_ALTERNATE_IIOP_ADDRESS: u32 = 3;
/// Component tag `TAG_JAVA_CODEBASE`.
const TAG_JAVA_CODEBASE: u32 = 25;
/// Component tag `TAG_CSI_SEC_MECH_LIST` (CSIv2).
const TAG_CSI_SEC_MECH_LIST: u32 = 33;
/// Component tag `TAG_NULL_TAG` (CSIv2).
const TAG_NULL_TAG: u32 = 34;
/// Component tag `TAG_TLS_SEC_TRANS` (CSIv2).
const TAG_TLS_SEC_TRANS: u32 = 36;
/// omniORB's `TAG_OMNIORB_BIDIR`.
const TAG_OMNIORB_BIDIR: u32 = 0x4154_5401;
/// omniORB's `TAG_OMNIORB_UNIX_TRANS`.
const TAG_OMNIORB_UNIX_TRANS: u32 = 0x4154_5402;
/// omniORB's `TAG_OMNIORB_PERSISTENT_ID`.
const TAG_OMNIORB_PERSISTENT_ID: u32 = 0x4154_5403;
/// omniORB's `TAG_OMNIORB_RESTRICTED_CONNECTION`.
const TAG_OMNIORB_RESTRICTED_CONNECTION: u32 = 0x4154_5404;

/// The name of a component tag, if known.
fn component_name(tag: u32) -> Option<&'static str> {
    Some(match tag {
        TAG_ORB_TYPE => "TAG_ORB_TYPE",
        TAG_CODE_SETS => "TAG_CODE_SETS",
        TAG_POLICIES => "TAG_POLICIES",
        TAG_ALTERNATE_IIOP_ADDRESS => "TAG_ALTERNATE_IIOP_ADDRESS",
        TAG_SSL_SEC_TRANS => "TAG_SSL_SEC_TRANS",
        TAG_JAVA_CODEBASE => "TAG_JAVA_CODEBASE",
        TAG_CSI_SEC_MECH_LIST => "TAG_CSI_SEC_MECH_LIST",
        TAG_NULL_TAG => "TAG_NULL_TAG",
        TAG_TLS_SEC_TRANS => "TAG_TLS_SEC_TRANS",
        TAG_OMNIORB_BIDIR => "TAG_OMNIORB_BIDIR",
        TAG_OMNIORB_UNIX_TRANS => "TAG_OMNIORB_UNIX_TRANS",
        TAG_OMNIORB_PERSISTENT_ID => "TAG_OMNIORB_PERSISTENT_ID",
        TAG_OMNIORB_RESTRICTED_CONNECTION => "TAG_OMNIORB_RESTRICTED_CONNECTION",
        _ => return None,
    })
}

/// The name of a profile tag, if known.
fn profile_name(tag: u32) -> Option<&'static str> {
    Some(match tag {
        0 => "TAG_INTERNET_IOP",
        1 => "TAG_MULTIPLE_COMPONENTS",
        2 => "TAG_SCCP_IOP",
        3 => "TAG_UIPMC",
        _ => return None,
    })
}

/// The vendor of an ORB type id (`TAG_ORB_TYPE`), if known.
fn orb_vendor(id: u32) -> Option<&'static str> {
    Some(match id {
        0x4154_5400 => "omniORB",
        0x5441_4f00 => "TAO",
        0x4a41_4300 => "JacORB",
        0x4d49_434f => "MICO",
        0x4f42_4200 => "ORBacus",
        0x4954_0000 => "Orbix",
        0x5355_4e00 => "Sun (JDK ORB)",
        0x4249_4400 => "VisiBroker",
        _ => return None,
    })
}

/// The name of an OSF code set id, if known.
fn code_set_name(id: u32) -> Option<&'static str> {
    Some(match id {
        0x0001_0001 => "ISO-8859-1",
        0x0001_0002 => "ISO-8859-2",
        0x0001_000f => "ISO-8859-15",
        0x0001_0020 => "ISO-646 (ASCII)",
        0x0001_0100 => "UCS-2 level 1",
        0x0001_0104 => "UCS-4",
        0x0001_0109 => "UTF-16",
        0x0501_0001 => "UTF-8",
        _ => return None,
    })
}

/// An object key as text: printable ASCII as is, `%` and every other byte as `%hh`.
pub fn escape(data: &[u8]) -> String {
    let mut s = String::with_capacity(data.len());
    for &b in data {
        if b.is_ascii_graphic() && b != b'%' || b == b' ' {
            s.push(char::from(b));
        } else {
            let _ = write!(s, "%{b:02x}");
        }
    }
    s
}

/// A CDR string, read lossily as UTF-8.
fn string(r: &mut CdrReader<'_>) -> Option<String> {
    Some(String::from_utf8_lossy(r.read_string_bytes().ok()?).into_owned())
}

/// A named code set id: `0x05010001 (UTF-8)`.
fn code_set(id: u32) -> String {
    match code_set_name(id) {
        Some(n) => format!("{id:#010x} ({n})"),
        None => format!("{id:#010x}"),
    }
}

/// `native X, conversion [Y, Z]` of a `CodeSetComponent`.
fn code_set_component(r: &mut CdrReader<'_>) -> Option<String> {
    let native = r.read_u32().ok()?;
    // Each element takes 4 bytes: the count is checked against the bytes left first.
    let n = r.read_count(4).ok()?;
    let conv = (0..n)
        .map(|_| r.read_u32().ok().map(code_set))
        .collect::<Option<Vec<String>>>()?;
    Some(format!(
        "native {}, conversion [{}]",
        code_set(native),
        conv.join(", ")
    ))
}

/// The decoded body of a known component, as one line of text; `None` when the tag is not
/// decoded here or the body does not decode.
fn describe_component(c: &TaggedComponent) -> Option<String> {
    let mut r = CdrReader::encapsulation(&c.data).ok()?;
    match c.tag {
        TAG_ORB_TYPE => {
            let id = r.read_u32().ok()?;
            Some(match orb_vendor(id) {
                Some(v) => format!("ORB type {id:#010x} ({v})"),
                None => format!("ORB type {id:#010x}"),
            })
        }
        TAG_CODE_SETS => {
            let char_data = code_set_component(&mut r)?;
            let wchar_data = code_set_component(&mut r)?;
            Some(format!("char: {char_data}; wchar: {wchar_data}"))
        }
        TAG_ALTERNATE_IIOP_ADDRESS => {
            let host = string(&mut r)?;
            let port = r.read_u16().ok()?;
            Some(format!("host {host}, port {port}"))
        }
        TAG_SSL_SEC_TRANS => {
            let ssl = SslComponent::decode(&c.data).ok()?;
            let names = |options: u16| SslComponent::option_names(options).collect::<Vec<_>>();
            Some(format!(
                "TLS port {}, target_supports {:#06x} ({}), target_requires {:#06x} ({})",
                ssl.port,
                ssl.target_supports,
                names(ssl.target_supports).join(" "),
                ssl.target_requires,
                names(ssl.target_requires).join(" "),
            ))
        }
        TAG_CSI_SEC_MECH_LIST => {
            // CSIIOP::CompoundSecMechList: boolean stateful, sequence<CompoundSecMech>.
            let stateful = r.read_octet().ok()? != 0;
            let mechs = r.read_u32().ok()?;
            Some(format!("stateful {stateful}, {mechs} mechanism(s)"))
        }
        TAG_JAVA_CODEBASE => string(&mut r).map(|s| format!("codebase {s}")),
        _ => None,
    }
}

/// One component, described.
struct ComponentInfo {
    tag: u32,
    name: Option<&'static str>,
    decoded: Option<String>,
    hex: String,
}

/// One profile, described.
enum ProfileInfo {
    Iiop {
        version: String,
        host: String,
        port: u16,
        key: Vec<u8>,
        components: Vec<ComponentInfo>,
    },
    Other {
        tag: u32,
        name: Option<&'static str>,
        len: usize,
        hex: String,
    },
}

fn profiles(r: &ObjectRef) -> Vec<ProfileInfo> {
    let mut iiop = r.iiop_profiles().iter();
    r.profiles()
        .iter()
        .map(
            |p| match (p.tag, if p.tag == 0 { iiop.next() } else { None }) {
                (0, Some(ip)) => ProfileInfo::Iiop {
                    version: format!("{}.{}", ip.version.major, ip.version.minor),
                    host: ip.host.clone(),
                    port: ip.port,
                    key: ip.object_key.to_vec(),
                    components: ip
                        .components
                        .iter()
                        .map(|c| ComponentInfo {
                            tag: c.tag,
                            name: component_name(c.tag),
                            decoded: describe_component(c),
                            hex: hex::encode(&c.data),
                        })
                        .collect(),
                },
                _ => ProfileInfo::Other {
                    tag: p.tag,
                    name: profile_name(p.tag),
                    len: p.data.len(),
                    hex: hex::encode(&p.data),
                },
            },
        )
        .collect()
}

/// The catior-style text description of `r`.
pub fn describe_text(r: &ObjectRef) -> String {
    let mut s = String::new();
    let type_id = if r.type_id().is_empty() {
        "(empty)"
    } else {
        r.type_id()
    };
    let _ = writeln!(s, "Type ID: \"{type_id}\"");
    let ps = profiles(r);
    let _ = writeln!(s, "Profiles: {}", ps.len());
    for (i, p) in ps.iter().enumerate() {
        match p {
            ProfileInfo::Iiop {
                version,
                host,
                port,
                key,
                components,
            } => {
                let _ = writeln!(s, "{}. IIOP {version} {host} {port}", i + 1);
                let _ = writeln!(s, "   Object Key: \"{}\"", escape(key));
                let _ = writeln!(
                    s,
                    "   Object Key (hex): {} ({} bytes)",
                    hex::encode(key),
                    key.len()
                );
                if components.is_empty() {
                    let _ = writeln!(s, "   No components");
                }
                for c in components {
                    let name = c.name.unwrap_or("unknown component");
                    let _ = write!(s, "   {name} (tag {:#x})", c.tag);
                    match &c.decoded {
                        Some(d) => {
                            let _ = writeln!(s, ": {d}");
                        }
                        None => {
                            let _ = writeln!(s, ": {}", c.hex);
                        }
                    }
                }
            }
            ProfileInfo::Other {
                tag,
                name,
                len,
                hex,
            } => {
                let name = name.unwrap_or("unknown profile");
                let _ = writeln!(s, "{}. {name} (tag {tag:#x}), {len} bytes", i + 1);
                let _ = writeln!(s, "   Data (hex): {hex}");
            }
        }
    }
    s
}

/// A JSON string literal.
fn json_str(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(o, "\\u{:04x}", u32::from(c));
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

fn json_opt(s: Option<&str>) -> String {
    s.map_or_else(|| "null".to_owned(), json_str)
}

/// The description of `r` as one JSON object.
pub fn describe_json(r: &ObjectRef) -> String {
    let ps: Vec<String> = profiles(r)
        .iter()
        .map(|p| match p {
            ProfileInfo::Iiop {
                version,
                host,
                port,
                key,
                components,
            } => {
                let cs: Vec<String> = components
                    .iter()
                    .map(|c| {
                        format!(
                            "{{\"tag\":{},\"name\":{},\"decoded\":{},\"hex\":{}}}",
                            c.tag,
                            json_opt(c.name),
                            json_opt(c.decoded.as_deref()),
                            json_str(&c.hex)
                        )
                    })
                    .collect();
                format!(
                    "{{\"tag\":0,\"name\":\"TAG_INTERNET_IOP\",\"iiop_version\":{},\"host\":{},\"port\":{port},\"object_key\":{},\"object_key_hex\":{},\"components\":[{}]}}",
                    json_str(version),
                    json_str(host),
                    json_str(&escape(key)),
                    json_str(&hex::encode(key)),
                    cs.join(",")
                )
            }
            ProfileInfo::Other {
                tag,
                name,
                len,
                hex,
            } => format!(
                "{{\"tag\":{tag},\"name\":{},\"length\":{len},\"hex\":{}}}",
                json_opt(*name),
                json_str(hex)
            ),
        })
        .collect();
    format!(
        "{{\"type_id\":{},\"profiles\":[{}]}}",
        json_str(r.type_id()),
        ps.join(",")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use protorb::IiopProfile;

    fn encap(body: &[u8]) -> Vec<u8> {
        let mut v = vec![0u8]; // big-endian
        v.extend_from_slice(body);
        v
    }

    #[test]
    fn known_components_decode() {
        // Byte-order octet at 0, padding to 4, then the ulong.
        let orb_type = TaggedComponent {
            tag: TAG_ORB_TYPE,
            data: encap(&[0, 0, 0, 0x41, 0x54, 0x54, 0]).into(),
        };
        assert_eq!(
            describe_component(&orb_type).as_deref(),
            Some("ORB type 0x41545400 (omniORB)")
        );
        let mut alt = vec![1u8, 0, 0, 0];
        alt.extend_from_slice(&5u32.to_le_bytes());
        alt.extend_from_slice(b"host\0");
        alt.push(0); // align to 2
        alt.extend_from_slice(&2809u16.to_le_bytes());
        let alt = TaggedComponent {
            tag: TAG_ALTERNATE_IIOP_ADDRESS,
            data: alt.into(),
        };
        assert_eq!(
            describe_component(&alt).as_deref(),
            Some("host host, port 2809")
        );
        // omniORB 4.2.5's SSL component (LE): supports 0x66, requires 0x66, port 45237.
        let ssl = TaggedComponent {
            tag: TAG_SSL_SEC_TRANS,
            data: vec![1u8, 0, 0x66, 0, 0x66, 0, 0xb5, 0xb0].into(),
        };
        let both = "Integrity Confidentiality EstablishTrustInTarget EstablishTrustInClient";
        assert_eq!(
            describe_component(&ssl),
            Some(format!(
                "TLS port 45237, target_supports 0x0066 ({both}), target_requires 0x0066 ({both})"
            ))
        );
        // Truncated: not decoded, no panic.
        let bad = TaggedComponent {
            tag: TAG_CODE_SETS,
            data: vec![0u8, 0, 0].into(),
        };
        assert_eq!(describe_component(&bad), None);
    }

    #[test]
    fn text_and_json_show_the_profile() {
        let p = IiopProfile {
            version: protorb::Version { major: 1, minor: 2 },
            host: "example.org".into(),
            port: 2809,
            object_key: bytes_key(),
            components: vec![TaggedComponent {
                tag: 0x1234,
                data: vec![0xab, 0xcd].into(),
            }],
        };
        let r = ObjectRef::from_iiop_profiles("IDL:x:1.0", vec![p]);
        let t = describe_text(&r);
        assert!(t.contains("IIOP 1.2 example.org 2809"), "{t}");
        assert!(t.contains("\"k%00\""), "{t}");
        assert!(t.contains("6b00"), "{t}");
        assert!(t.contains("unknown component (tag 0x1234): abcd"), "{t}");
        let j = describe_json(&r);
        assert!(j.contains("\"host\":\"example.org\""), "{j}");
        assert!(j.contains("\"port\":2809"), "{j}");
    }

    fn bytes_key() -> bytes::Bytes {
        bytes::Bytes::from_static(b"k\0")
    }
}
