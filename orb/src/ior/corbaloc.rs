//! `corbaloc:` URLs (WIRE-GIOP §4.5): parsing and formatting, with `%HH` key escaping.
//!
//! ```text
//! corbaloc:<addr>[,<addr>]*/<key>[#<ignored>]
//! <addr> = ("iiop:" | ":") [<major>.<minor>"@"] <host> [":" <port>]
//! <host> = name or IPv4 literal | "[" IPv6 literal "]"
//! ```
//!
//! As in omniORB, the port defaults to 2809 and the IIOP version to 1.0 (so such a reference is
//! called with GIOP 1.0 unless the URL says `1.2@`). The reference built has an empty type id and
//! one IIOP profile without components per address.
//!
//! Differences from omniORB: an empty host is an error here (omniORB substitutes localhost), and
//! `rir:`, `ssliop:` and `omniunix:` addresses are refused.

use super::{IiopProfile, IorError, ObjectRef};
use crate::version::Version;
use bytes::Bytes;
use percent_encoding::{percent_decode, percent_encode, AsciiSet, NON_ALPHANUMERIC};
use std::fmt::Write as _;

/// The IANA-assigned corbaloc port, used when an address gives none.
pub const DEFAULT_PORT: u16 = 2809;

/// The bytes that must be escaped in a corbaloc object key: everything but RFC 2396's
/// unreserved and reserved characters, as the CORBA spec (13.6.10.1) and omniORB write keys.
const KEY_ESCAPED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b';')
    .remove(b'/')
    .remove(b'?')
    .remove(b':')
    .remove(b'@')
    .remove(b'&')
    .remove(b'=')
    .remove(b'+')
    .remove(b'$')
    .remove(b',')
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'!')
    .remove(b'~')
    .remove(b'*')
    .remove(b'\'')
    .remove(b'(')
    .remove(b')');

/// Whether `b` may appear unescaped in a corbaloc object key: the complement of
/// [`KEY_ESCAPED`] (a test checks all 256 bytes), which keeps its own lookup private.
fn is_key_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b";/?:@&=+$,-_.!~*'()".contains(&b)
}

/// Whether `b` may appear in a host name or IPv4 literal.
fn is_name_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~".contains(&b)
}

/// Whether `b` may appear inside `[...]`: an IPv6 literal, possibly with a `%zone`.
fn is_bracket_char(b: u8) -> bool {
    is_name_char(b) || b == b':' || b == b'%'
}

/// Whether `host` can be written into a URL (bracketed if it contains `:`).
fn is_writable_host(host: &str) -> bool {
    let ok = if host.contains(':') {
        is_bracket_char
    } else {
        is_name_char
    };
    !host.is_empty() && host.bytes().all(ok)
}

/// Escapes an object key for a corbaloc URL: every byte outside the unreserved set becomes `%HH`
/// (upper case, as RFC 3986 asks of producers).
pub fn escape_key(key: &[u8]) -> String {
    percent_encode(key, KEY_ESCAPED).to_string()
}

/// Undoes [`escape_key`]: `%HH` (either case) becomes the byte, the unreserved characters pass,
/// anything else is an error. The check is ours: `percent_decode` alone would pass a stray `%`
/// or a space through, and a reference that does not say what it means must be refused.
fn unescape_key(s: &str) -> Result<Vec<u8>, IorError> {
    let b = s.as_bytes();
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        if c == b'%' {
            let digits = b.get(i + 1..i + 3).unwrap_or_default();
            if digits.len() != 2 || !digits.iter().all(u8::is_ascii_hexdigit) {
                return Err(IorError::BadCorbaloc("bad %-escape in object key"));
            }
            i += 3;
        } else if is_key_char(c) {
            i += 1;
        } else {
            return Err(IorError::BadCorbaloc(
                "character not allowed in object key (write it as %HH)",
            ));
        }
    }
    Ok(percent_decode(b).collect())
}

/// Parses what follows `corbaloc:`.
pub(super) fn parse(url: &str) -> Result<ObjectRef, IorError> {
    let (addrs, rest) = url
        .split_once('/')
        .ok_or(IorError::BadCorbaloc("missing '/' before the object key"))?;
    let key_str = rest.split_once('#').map_or(rest, |(key, _)| key);
    let key = Bytes::from(unescape_key(key_str)?);
    let profiles = addrs
        .split(',')
        .map(|addr| parse_address(addr, &key))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ObjectRef::from_iiop_profiles("", profiles))
}

/// Parses one `<prot_addr>` into a profile for `key`.
fn parse_address(addr: &str, key: &Bytes) -> Result<IiopProfile, IorError> {
    let rest = if let Some(rest) = super::strip_prefix_ignore_case(addr, "iiop:") {
        rest
    } else if let Some(rest) = addr.strip_prefix(':') {
        rest
    } else if addr.is_empty() {
        return Err(IorError::BadCorbaloc("empty address"));
    } else if super::strip_prefix_ignore_case(addr, "rir:").is_some() {
        return Err(IorError::BadCorbaloc(
            "rir: (resolve_initial_references) is not supported; give an iiop: address",
        ));
    } else if super::strip_prefix_ignore_case(addr, "ssliop:").is_some()
        || super::strip_prefix_ignore_case(addr, "omniunix:").is_some()
    {
        return Err(IorError::BadCorbaloc(
            "only iiop: addresses are supported (not ssliop: or omniunix:)",
        ));
    } else {
        return Err(IorError::UnknownScheme);
    };
    let (version, host_port) = match rest.split_once('@') {
        Some((v, host_port)) => (parse_version(v)?, host_port),
        None => (Version::V1_0, rest),
    };
    let (host, port) = if let Some(bracketed) = host_port.strip_prefix('[') {
        let (host, tail) = bracketed
            .split_once(']')
            .ok_or(IorError::BadCorbaloc("IPv6 host without closing ']'"))?;
        if !host.bytes().all(is_bracket_char) {
            return Err(IorError::BadCorbaloc("invalid character in IPv6 host"));
        }
        let port = match tail {
            "" => None,
            _ => Some(
                tail.strip_prefix(':')
                    .ok_or(IorError::BadCorbaloc("junk after IPv6 host"))?,
            ),
        };
        (host, port)
    } else {
        let (host, port) = match host_port.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (host_port, None),
        };
        if !host.bytes().all(is_name_char) {
            return Err(IorError::BadCorbaloc("invalid character in host"));
        }
        (host, port)
    };
    if host.is_empty() {
        return Err(IorError::BadCorbaloc("empty host"));
    }
    let port = match port {
        None => DEFAULT_PORT,
        Some(p) => parse_port(p)?,
    };
    Ok(IiopProfile {
        version,
        host: host.to_owned(),
        port,
        object_key: key.clone(),
        components: Vec::new(),
    })
}

/// A decimal number of at most `max`, digits only (no sign, not empty).
fn parse_decimal(s: &str, max: u32) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse::<u32>().ok().filter(|&n| n <= max)
}

/// Parses `<major>.<minor>`; the major version must be 1.
fn parse_version(s: &str) -> Result<Version, IorError> {
    const BAD: IorError = IorError::BadCorbaloc("bad version (expected <major>.<minor>@)");
    let (major, minor) = s.split_once('.').ok_or(BAD)?;
    let major = parse_decimal(major, u8::MAX.into()).ok_or(BAD)?;
    let minor = parse_decimal(minor, u8::MAX.into()).ok_or(BAD)?;
    if major != 1 {
        return Err(IorError::BadCorbaloc("unsupported IIOP major version"));
    }
    Ok(Version {
        major: 1,
        minor: u8::try_from(minor).map_err(|_| BAD)?,
    })
}

/// Parses a port number (1 to 5 digits, at most 65535).
fn parse_port(s: &str) -> Result<u16, IorError> {
    parse_decimal(s, u16::MAX.into())
        .and_then(|p| u16::try_from(p).ok())
        .ok_or(IorError::BadCorbaloc("bad port"))
}

/// Formats the profiles that share the first profile's key as one URL (see
/// [`ObjectRef::to_corbaloc`]).
pub(super) fn format(iiop: &[IiopProfile]) -> Option<String> {
    let writable = |p: &&IiopProfile| p.version.major == 1 && is_writable_host(&p.host);
    let primary = iiop.first().filter(writable)?;
    let mut s = String::from("corbaloc:");
    let addresses = iiop
        .iter()
        .filter(|p| p.object_key == primary.object_key)
        .filter(writable);
    for (i, p) in addresses.enumerate() {
        if i > 0 {
            s.push(',');
        }
        let (open, close) = if p.host.contains(':') {
            ("[", "]")
        } else {
            ("", "")
        };
        // Writing to a String cannot fail.
        let _ = write!(
            s,
            "iiop:{}.{}@{open}{}{close}:{}",
            p.version.major, p.version.minor, p.host, p.port
        );
    }
    s.push('/');
    s.push_str(&escape_key(&primary.object_key));
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_escape_set_is_the_complement_of_the_key_chars() {
        for b in 0..=255u8 {
            let escaped = escape_key(&[b]);
            assert_eq!(
                escaped.len() == 1,
                is_key_char(b),
                "byte {b:#04x} → {escaped}"
            );
        }
    }

    #[test]
    fn escape_key_keeps_the_unreserved_set() {
        let set = "ABCXYZabcxyz0189;/?:@&=+$,-_.!~*'()";
        assert_eq!(escape_key(set.as_bytes()), set);
    }

    #[test]
    fn escape_key_escapes_everything_else_in_upper_case() {
        assert_eq!(
            escape_key(b"\xffbidir\xfe\x00% #\"<>[]\\^`{|}"),
            "%FFbidir%FE%00%25%20%23%22%3C%3E%5B%5D%5C%5E%60%7B%7C%7D"
        );
        assert_eq!(escape_key("é".as_bytes()), "%C3%A9");
    }

    #[test]
    fn unescape_accepts_either_case() {
        assert_eq!(unescape_key("%FFbidir%fe%0a").unwrap(), b"\xffbidir\xfe\n");
        assert_eq!(unescape_key("").unwrap(), b"");
    }

    #[test]
    fn unescape_rejects_bad_escapes_and_characters() {
        for bad in [
            "%", "%f", "%g0", "%+f", "%0g", "a%", "x y", "a\"b", "é", "[", "a%2",
        ] {
            assert!(
                matches!(unescape_key(bad), Err(IorError::BadCorbaloc(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn decimal_parsing_is_strict() {
        assert_eq!(parse_port("0"), Ok(0));
        assert_eq!(parse_port("65535"), Ok(65535));
        assert_eq!(parse_port("0002809"), Ok(2809));
        for bad in ["", "65536", "+80", "-1", "8o", " 80", "99999999999"] {
            assert!(parse_port(bad).is_err(), "{bad:?}");
        }
        assert_eq!(parse_version("1.2"), Ok(Version::V1_2));
        assert_eq!(
            parse_version("1.10"),
            Ok(Version {
                major: 1,
                minor: 10
            })
        );
        for bad in ["", "1", "1.", ".2", "1.2.3", "1.256", "x.y", "2.0", "0.9"] {
            assert!(parse_version(bad).is_err(), "{bad:?}");
        }
    }

    proptest! {
        #[test]
        fn escape_round_trips(key in proptest::collection::vec(any::<u8>(), 0..64)) {
            let escaped = escape_key(&key);
            prop_assert!(escaped.is_ascii());
            prop_assert_eq!(unescape_key(&escaped).unwrap(), key);
        }
    }
}
