//! `corbaloc:` URLs (WIRE-GIOP §4.5): parsing and formatting, with `%HH` key escaping.

/// Escapes an object key for a corbaloc URL: every byte outside the unreserved set becomes `%hh`.
pub fn escape_key(key: &[u8]) -> String {
    let _ = key;
    todo!()
}
