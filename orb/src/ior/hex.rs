//! Hex for `IOR:` strings: either case in, lower case out.

/// Decodes hex digits (either case). `None` on an odd length or a non-hex character.
pub(super) fn decode(s: &str) -> Option<Vec<u8>> {
    let digits = s.as_bytes();
    if digits.len() % 2 != 0 {
        return None;
    }
    digits
        .chunks_exact(2)
        .map(|pair| Some(nibble(pair[0])? << 4 | nibble(pair[1])?))
        .collect()
}

/// The value of one hex digit (either case).
pub(super) fn nibble(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

const DIGITS: &[u8; 16] = b"0123456789abcdef";

/// Appends the lower-case hex of `bytes` to `out`.
pub(super) fn encode_into(bytes: &[u8], out: &mut String) {
    for &b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn either_case_in_lower_case_out() {
        assert_eq!(decode("00aBcDeF").unwrap(), vec![0x00, 0xab, 0xcd, 0xef]);
        let mut s = String::new();
        encode_into(&[0x00, 0xab, 0xcd, 0xef], &mut s);
        assert_eq!(s, "00abcdef");
    }

    #[test]
    fn odd_length_and_non_hex_are_rejected() {
        assert_eq!(decode("abc"), None);
        assert_eq!(decode("0g"), None);
        assert_eq!(decode("é"), None);
        assert_eq!(decode(""), Some(vec![]));
    }
}
