//! Names derived from fully qualified protobuf names: CORBA repository ids and the Rust paths
//! prost-build generates.
//!
//! [`RustPaths::resolve`] mirrors prost-build's `CodeGenerator::resolve_ident` and
//! `ExternPaths::resolve_ident` (prost-build 0.14), including its default mapping of the
//! well-known types to `::prost_types` (`google.protobuf.Empty` to `()`, the wrappers to
//! primitives). Services live at package level, so paths are resolved relative to the package's
//! module.

use crate::ident::{to_snake, to_upper_camel};
use std::collections::HashMap;

/// The CORBA repository id of a fully qualified protobuf name: `demo.Echo` →
/// `IDL:demo/Echo:1.0`, `Echo` (no package) → `IDL:Echo:1.0`, nested `demo.Outer.Inner` →
/// `IDL:demo/Outer/Inner:1.0`. A leading `.` is ignored.
pub fn repository_id(full_name: &str) -> String {
    let name = full_name.strip_prefix('.').unwrap_or(full_name);
    format!("IDL:{}:1.0", name.replace('.', "/"))
}

/// The proto → Rust path table prost uses for types generated elsewhere (`extern_path`).
#[derive(Clone, Debug)]
pub struct RustPaths {
    extern_paths: HashMap<String, String>,
}

impl Default for RustPaths {
    fn default() -> Self {
        Self::new(&[]).expect("the built-in extern paths are valid")
    }
}

/// prost-build's default mapping of the well-known types (`ExternPaths::new`, prost 0.14).
const WELL_KNOWN: &[(&str, &str)] = &[
    (".google.protobuf", "::prost_types"),
    (".google.protobuf.BoolValue", "bool"),
    (
        ".google.protobuf.BytesValue",
        "::prost::alloc::vec::Vec<u8>",
    ),
    (".google.protobuf.DoubleValue", "f64"),
    (".google.protobuf.Empty", "()"),
    (".google.protobuf.FloatValue", "f32"),
    (".google.protobuf.Int32Value", "i32"),
    (".google.protobuf.Int64Value", "i64"),
    (
        ".google.protobuf.StringValue",
        "::prost::alloc::string::String",
    ),
    (".google.protobuf.UInt32Value", "u32"),
    (".google.protobuf.UInt64Value", "u64"),
];

impl RustPaths {
    /// prost's defaults (the well-known types in `::prost_types`, plus the `orb.ObjectRef` →
    /// `::protorb::ObjectRef` mapping) and the user's `(proto path, rust path)` pairs; proto paths
    /// are fully qualified (`.my.pkg` or `.my.pkg.Type`).
    pub fn new(user: &[(String, String)]) -> Result<Self, String> {
        Self::with_prost_types(user, true)
    }

    /// As [`new`](Self::new); with `prost_types` false the `google.protobuf` types are not
    /// mapped (prost-build's `compile_well_known_types`: they are generated like the user's).
    pub fn with_prost_types(user: &[(String, String)], prost_types: bool) -> Result<Self, String> {
        let mut paths = RustPaths {
            extern_paths: HashMap::new(),
        };
        for (proto, rust) in user {
            paths.insert(proto, rust)?;
        }
        if !paths
            .extern_paths
            .contains_key(crate::OBJECT_REF_PROTO_PATH)
        {
            paths.insert(crate::OBJECT_REF_PROTO_PATH, crate::OBJECT_REF_RUST_PATH)?;
        }
        let well_known: &[(&str, &str)] = if prost_types { WELL_KNOWN } else { &[] };
        for &(proto, rust) in well_known {
            paths.insert(proto, rust)?;
        }
        Ok(paths)
    }

    fn insert(&mut self, proto: &str, rust: &str) -> Result<(), String> {
        if !proto.starts_with('.') {
            return Err(format!(
                "protobuf paths must be fully qualified (begin with a leading '.'): {proto}"
            ));
        }
        if proto.split('.').skip(1).any(str::is_empty) {
            return Err(format!("invalid fully qualified protobuf path: {proto}"));
        }
        if self
            .extern_paths
            .insert(proto.to_string(), rust.to_string())
            .is_some()
        {
            return Err(format!("duplicate extern protobuf path: {proto}"));
        }
        Ok(())
    }

    /// The user's and the default extern paths, in no particular order.
    pub fn extern_paths(&self) -> impl Iterator<Item = (&str, &str)> {
        self.extern_paths
            .iter()
            .map(|(p, r)| (p.as_str(), r.as_str()))
    }

    fn resolve_extern(&self, pb_ident: &str) -> Option<String> {
        if let Some(rust) = self.extern_paths.get(pb_ident) {
            return Some(rust.clone());
        }
        for (idx, _) in pb_ident.rmatch_indices('.') {
            if let Some(rust) = self.extern_paths.get(&pb_ident[..idx]) {
                let mut segments = pb_ident[idx + 1..].split('.');
                let ident_type = segments.next_back().map(to_upper_camel);
                let path: Vec<String> = rust
                    .split("::")
                    .chain(segments)
                    .enumerate()
                    .map(|(i, segment)| {
                        if i == 0 && segment == "crate" {
                            segment.to_owned()
                        } else {
                            to_snake(segment)
                        }
                    })
                    .chain(ident_type)
                    .collect();
                return Some(path.join("::"));
            }
        }
        None
    }

    /// The Rust path prost generates for message `full_name` (with or without the leading `.`)
    /// when it is named from the module of package `from_package` (`""` for no package):
    /// `demo.Msg` from `demo` → `Msg`; `suite.common.Item` from `suite.api` →
    /// `super::common::Item`; `demo.Outer.Inner` → `outer::Inner`;
    /// `google.protobuf.Timestamp` → `::prost_types::Timestamp`.
    pub fn resolve(&self, from_package: &str, full_name: &str) -> String {
        let name = full_name.strip_prefix('.').unwrap_or(full_name);
        let dotted = format!(".{name}");
        if let Some(path) = self.resolve_extern(&dotted) {
            return path;
        }
        let mut local = from_package.split('.').filter(|s| !s.is_empty()).peekable();
        let mut ident = name.split('.');
        let ident_type = ident.next_back().unwrap_or_default();
        let mut ident = ident.peekable();
        while local.peek().is_some() && local.peek() == ident.peek() {
            local.next();
            ident.next();
        }
        local
            .map(|_| "super".to_string())
            .chain(ident.map(to_snake))
            .chain(std::iter::once(to_upper_camel(ident_type)))
            .collect::<Vec<_>>()
            .join("::")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repository_ids() {
        assert_eq!(repository_id("demo.Echo"), "IDL:demo/Echo:1.0");
        assert_eq!(repository_id(".demo.Echo"), "IDL:demo/Echo:1.0");
        assert_eq!(repository_id("Echo"), "IDL:Echo:1.0");
        assert_eq!(
            repository_id("suite.api.v1.Outer.Inner"),
            "IDL:suite/api/v1/Outer/Inner:1.0"
        );
    }

    #[test]
    fn resolves_like_prost() {
        let p = RustPaths::default();
        assert_eq!(p.resolve("demo", "demo.Msg"), "Msg");
        assert_eq!(p.resolve("demo", ".demo.Outer.Inner"), "outer::Inner");
        assert_eq!(
            p.resolve("suite.api", "suite.common.Item"),
            "super::common::Item"
        );
        assert_eq!(p.resolve("suite.api", "suite.api.v2.X"), "v2::X");
        assert_eq!(p.resolve("a.b", "c.D"), "super::super::c::D");
        assert_eq!(p.resolve("", "Msg"), "Msg");
        assert_eq!(p.resolve("demo", "Msg"), "super::Msg");
        assert_eq!(p.resolve("demo", "demo.Self"), "Self_");
        assert_eq!(p.resolve("demo", "demo.type.Result"), "r#type::Result");
        assert_eq!(
            p.resolve("demo", "google.protobuf.Timestamp"),
            "::prost_types::Timestamp"
        );
        assert_eq!(p.resolve("demo", "google.protobuf.Empty"), "()");
        assert_eq!(p.resolve("demo", "orb.ObjectRef"), "::protorb::ObjectRef");
    }

    #[test]
    fn user_extern_paths() {
        let p = RustPaths::new(&[(".other".into(), "::other_crate::pb".into())]).unwrap();
        assert_eq!(
            p.resolve("demo", "other.sub.Thing"),
            "::other_crate::pb::sub::Thing"
        );
        assert!(RustPaths::new(&[("other".into(), "::x".into())]).is_err());
        assert!(RustPaths::new(&[(".google.protobuf".into(), "::x".into())]).is_err());
    }
}
