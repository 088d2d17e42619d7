//! Rust identifiers from protobuf names, sanitised exactly as prost-build does it
//! (`prost-build/src/ident.rs`), so the names we generate agree with prost's.

use heck::{ToSnakeCase, ToUpperCamelCase};

/// Makes `ident` a valid Rust identifier: `r#` before a keyword that allows a raw identifier,
/// a `_` suffix for `_`, `self`, `Self`, `super`, `extern` and `crate` (which do not), and a `_`
/// prefix before a leading digit.
pub fn sanitize_identifier(ident: &str) -> String {
    match ident {
        // 2015 strict keywords.
        | "as" | "break" | "const" | "continue" | "else" | "enum" | "false"
        | "fn" | "for" | "if" | "impl" | "in" | "let" | "loop" | "match" | "mod" | "move" | "mut"
        | "pub" | "ref" | "return" | "static" | "struct" | "trait" | "true"
        | "type" | "unsafe" | "use" | "where" | "while"
        // 2018 strict keywords.
        | "dyn"
        // 2015 reserved keywords.
        | "abstract" | "become" | "box" | "do" | "final" | "macro" | "override" | "priv" | "typeof"
        | "unsized" | "virtual" | "yield"
        // 2018 reserved keywords.
        | "async" | "await" | "try"
        // 2024 reserved keywords.
        | "gen" => format!("r#{ident}"),
        // Not allowed as raw identifiers: suffixed with an underscore.
        "_" | "super" | "self" | "Self" | "extern" | "crate" => format!("{ident}_"),
        s if s.starts_with(|c: char| c.is_numeric()) => format!("_{ident}"),
        _ => ident.to_string(),
    }
}

/// `lower_snake` case, sanitised: a method, field or module name (`GetItem` → `get_item`,
/// `Type` → `r#type`, `Self` → `self_`).
pub fn to_snake(s: &str) -> String {
    sanitize_identifier(&s.to_snake_case())
}

/// `UpperCamel` case, sanitised: a type name (`echo_service` → `EchoService`, `Self` → `Self_`).
pub fn to_upper_camel(s: &str) -> String {
    sanitize_identifier(&s.to_upper_camel_case())
}

/// `lower_snake` case without sanitising, for building longer names (`Type` → `type`, so that
/// `type_with_timeout` can be formed and then sanitised as a whole).
pub fn to_snake_raw(s: &str) -> String {
    s.to_snake_case()
}

/// `UpperCamel` case without sanitising, for building longer names (`Self` + `Error`).
pub fn to_upper_camel_raw(s: &str) -> String {
    s.to_upper_camel_case()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keywords_and_reserved_names() {
        assert_eq!(to_snake("Type"), "r#type");
        assert_eq!(to_snake("Self"), "self_");
        assert_eq!(to_snake("Super"), "super_");
        assert_eq!(to_snake("Crate"), "crate_");
        assert_eq!(to_snake("Drop"), "drop");
        assert_eq!(to_snake("GetItem"), "get_item");
        assert_eq!(to_upper_camel("Self"), "Self_");
        assert_eq!(to_upper_camel("echo_service"), "EchoService");
        assert_eq!(sanitize_identifier("2fa"), "_2fa");
        assert_eq!(sanitize_identifier("gen"), "r#gen");
    }
}
