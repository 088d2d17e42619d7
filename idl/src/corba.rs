//! CORBA IDL for a [`Model`]: what a C++ (omniORB, TAO) or Java peer compiles to talk to an orb
//! object, or to serve one.
//!
//! The IDL describes the wire exactly as the runtime speaks it, not the protobuf messages:
//!
//! - every operation takes one `in Octets p` and returns `Octets` (`typedef sequence<octet>`):
//!   the runtime sends the request message, and answers with the reply message, as one octet
//!   sequence of protobuf bytes. A method returning `google.protobuf.Empty` still returns
//!   `Octets` (empty) on the wire, so it is not `void`; a oneway method is `oneway void`;
//! - a user exception is `exception Name { Octets data; }`: the runtime writes its body as
//!   `string repository_id; sequence<octet> payload`, which is the CDR encoding of that
//!   exception;
//! - every interface and exception gets a `#pragma ID` with the repository id the runtime uses
//!   (`IDL:<package path>/<Name>:1.0`), so renaming an IDL identifier never changes the wire.
//!
//! Packages become modules, one per segment. Nested exception messages (`demo.Outer.Inner`)
//! are flattened into their package's module (`Outer_Inner`). Exceptions come first, in a
//! first round of modules, and interfaces after them in reopened modules, so an interface may
//! raise an exception of any package; references are fully qualified (`::demo::Octets`; the
//! typedef is `Octets_` in a module where an operation is named `Octets`), so
//! no identifier of a scope can clash with a name it uses.
//!
//! IDL is stricter than protobuf about names, and operation names cannot change (they are the
//! wire names). Hence:
//!
//! - an identifier that is an IDL keyword, compared without case (`oneway`, `Object`,
//!   `module`), is escaped with a leading underscore, which IDL compilers strip: the operation
//!   `_oneway` is still `oneway` on the wire;
//! - an interface, exception or module whose name clashes (without case) with its enclosing
//!   scope, a sibling, or one of its operations (`service Echo { rpc echo(..) }`) gets `_`
//!   appended; its `#pragma ID` keeps the repository id;
//! - an operation IDL cannot name at all (a protobuf name with a leading underscore, or a
//!   second name differing from an earlier one only in case) is left out with a comment.

use crate::model::{Model, Service, UserExceptionType};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt::Write as _;

/// The keywords of CORBA 3 IDL. An identifier may not equal any of them ignoring case.
const KEYWORDS: &[&str] = &[
    "abstract",
    "any",
    "alias",
    "attribute",
    "boolean",
    "case",
    "char",
    "component",
    "const",
    "consumes",
    "context",
    "custom",
    "default",
    "double",
    "emits",
    "enum",
    "eventtype",
    "exception",
    "factory",
    "false",
    "finder",
    "fixed",
    "float",
    "getraises",
    "home",
    "import",
    "in",
    "inout",
    "interface",
    "local",
    "long",
    "manages",
    "mirrorport",
    "module",
    "multiple",
    "native",
    "object",
    "octet",
    "oneway",
    "out",
    "port",
    "porttype",
    "primarykey",
    "private",
    "provides",
    "public",
    "publishes",
    "raises",
    "readonly",
    "sequence",
    "setraises",
    "short",
    "string",
    "struct",
    "supports",
    "switch",
    "true",
    "truncatable",
    "typedef",
    "typeid",
    "typename",
    "typeprefix",
    "unsigned",
    "union",
    "uses",
    "valuebase",
    "valuetype",
    "void",
    "wchar",
    "wstring",
];

/// The name of the octet-sequence typedef in every module (unless taken).
const OCTETS: &str = "Octets";

/// Whether `name` is an IDL keyword, ignoring case.
pub fn is_idl_keyword(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    KEYWORDS.contains(&lower.as_str())
}

/// `name` as an IDL identifier: escaped with `_` if it is a keyword (the escape is not part of
/// the name: IDL compilers strip it).
fn escape(name: &str) -> String {
    if is_idl_keyword(name) {
        format!("_{name}")
    } else {
        name.to_owned()
    }
}

/// Whether IDL can name `name` at all: ASCII letters, digits and underscores, starting with a
/// letter.
fn is_expressible(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A name in a scope: the first candidate (`name`, `name_`, `name__`...) that clashes with
/// nothing in `taken` (lower-cased names); records it.
fn unique(name: &str, taken: &mut HashSet<String>) -> String {
    let mut candidate = name.to_owned();
    while taken.contains(&candidate.to_ascii_lowercase()) {
        candidate.push('_');
    }
    taken.insert(candidate.to_ascii_lowercase());
    candidate
}

/// One module (or the global scope): its declarations and nested modules.
#[derive(Default)]
struct Module<'a> {
    /// The IDL identifier (escaped); empty for the global scope.
    ident: String,
    /// The name of this module's octet-sequence typedef: `Octets`, unless an operation of one
    /// of its interfaces is named so (the C++ mapping would then name a member function like
    /// the type it returns).
    octets: String,
    children: BTreeMap<String, Module<'a>>,
    /// (IDL identifier, exception)
    exceptions: Vec<(String, &'a UserExceptionType)>,
    /// (IDL identifier, service)
    interfaces: Vec<(String, &'a Service)>,
}

impl<'a> Module<'a> {
    fn child(&mut self, path: &[&str]) -> &mut Module<'a> {
        let mut m = self;
        for seg in path {
            m = m.children.entry((*seg).to_owned()).or_default();
        }
        m
    }

    fn has_interfaces(&self) -> bool {
        !self.interfaces.is_empty() || self.children.values().any(Module::has_interfaces)
    }

    /// Gives every module, exception and interface its IDL identifier, and records the fully
    /// qualified name of each exception by repository id.
    fn assign_names(
        &mut self,
        scope: &str,
        exception_names: &mut BTreeMap<String, String>,
        pending: &BTreeMap<String, Vec<&'a UserExceptionType>>,
        path: &str,
    ) {
        let mut taken = HashSet::new();
        // The enclosing scope's own name, then the typedef every module declares.
        if !self.ident.is_empty() {
            taken.insert(self.ident.trim_start_matches('_').to_ascii_lowercase());
        }
        let mut op_names: HashSet<String> = self
            .interfaces
            .iter()
            .flat_map(|(_, s)| &s.methods)
            .map(|m| m.proto_name.to_ascii_lowercase())
            .collect();
        op_names.extend(taken.iter().cloned());
        self.octets = unique(OCTETS, &mut op_names);
        taken.insert(self.octets.to_ascii_lowercase());
        let qualify = |ident: &str| format!("{scope}::{ident}");
        // Interfaces first: their names are what users look for, so they keep theirs when an
        // exception's flattened name happens to be the same.
        let mut interfaces = std::mem::take(&mut self.interfaces);
        for (ident, service) in &mut interfaces {
            let mut inner = taken.clone();
            for m in &service.methods {
                inner.insert(m.proto_name.to_ascii_lowercase());
            }
            let name = unique(&service.proto_name, &mut inner);
            taken.insert(name.to_ascii_lowercase());
            *ident = escape(&name);
        }
        self.interfaces = interfaces;
        if let Some(list) = pending.get(path) {
            for e in list {
                let local = local_exception_name(e, path);
                let ident = escape(&unique(&local, &mut taken));
                exception_names.insert(e.repository_id.clone(), qualify(&ident));
                self.exceptions.push((ident, e));
            }
        }
        for (seg, child) in &mut self.children {
            let name = unique(seg, &mut taken);
            child.ident = escape(&name);
            let child_path = if path.is_empty() {
                seg.clone()
            } else {
                format!("{path}.{seg}")
            };
            child.assign_names(
                &format!("{scope}::{}", child.ident),
                exception_names,
                pending,
                &child_path,
            );
        }
    }
}

/// The exception's name inside its package's module: the message path after the package,
/// flattened (`Outer.Inner` → `Outer_Inner`).
fn local_exception_name(e: &UserExceptionType, package: &str) -> String {
    let rest = if package.is_empty() {
        e.full_name.as_str()
    } else {
        e.full_name
            .strip_prefix(package)
            .and_then(|r| r.strip_prefix('.'))
            .unwrap_or(&e.full_name)
    };
    rest.replace('.', "_")
}

/// The package of an exception message, which the model does not record: the longest package
/// of a service that is a prefix of its name; failing that, its leading lower-case segments
/// (protobuf style: packages lower case, messages UpperCamel).
fn exception_package(e: &UserExceptionType, packages: &BTreeSet<&str>) -> String {
    let known = packages
        .iter()
        .filter(|p| {
            p.is_empty()
                || e.full_name
                    .strip_prefix(**p)
                    .is_some_and(|r| r.starts_with('.'))
        })
        .max_by_key(|p| p.len());
    match known {
        Some(p) if !p.is_empty() => (*p).to_owned(),
        _ => {
            let segs: Vec<&str> = e.full_name.split('.').collect();
            let n = segs[..segs.len().saturating_sub(1)]
                .iter()
                .take_while(|s| s.starts_with(|c: char| c.is_ascii_lowercase()))
                .count();
            segs[..n].join(".")
        }
    }
}

/// The CORBA IDL of `model`'s services: see the [module docs](self) for the mapping.
///
/// The text compiles with omniidl. Every declaration carries its repository id, so peers built
/// from it interoperate with the runtime and with generated `protorb` code whatever the IDL
/// identifiers became.
pub fn to_corba_idl(model: &Model) -> String {
    let packages: BTreeSet<&str> = model.services.iter().map(|s| s.package.as_str()).collect();
    // Every exception once, by repository id, grouped by package.
    let mut seen = HashSet::new();
    let mut pending: BTreeMap<String, Vec<&UserExceptionType>> = BTreeMap::new();
    for s in &model.services {
        for m in &s.methods {
            for e in &m.raises {
                if seen.insert(e.repository_id.clone()) {
                    pending
                        .entry(exception_package(e, &packages))
                        .or_default()
                        .push(e);
                }
            }
        }
    }
    let mut root = Module::default();
    for package in pending.keys() {
        root.child(&segments(package));
    }
    for s in &model.services {
        root.child(&segments(&s.package))
            .interfaces
            .push((String::new(), s));
    }
    let mut exception_names = BTreeMap::new();
    root.assign_names("", &mut exception_names, &pending, "");

    let mut out = String::new();
    out.push_str(
        "// CORBA IDL of orb services, generated from .proto files (`orb idl`).\n\
         //\n\
         // Every operation takes and returns protobuf bytes as one octet sequence; a user\n\
         // exception carries its protobuf message in `data`. The #pragma IDs are the\n\
         // repository ids the protorb runtime uses: keep them.\n",
    );
    let mut w = Writer {
        out: &mut out,
        depth: 0,
        exceptions: &exception_names,
    };
    w.declarations(&root, "", false);
    if root.has_interfaces() {
        w.declarations(&root, "", true);
    }
    out
}

fn segments(package: &str) -> Vec<&str> {
    package.split('.').filter(|s| !s.is_empty()).collect()
}

struct Writer<'o> {
    out: &'o mut String,
    depth: usize,
    /// Repository id → fully qualified IDL name of every exception.
    exceptions: &'o BTreeMap<String, String>,
}

impl Writer<'_> {
    fn line(&mut self, text: &str) {
        if text.is_empty() {
            self.out.push('\n');
            return;
        }
        for _ in 0..self.depth {
            self.out.push_str("  ");
        }
        self.out.push_str(text);
        self.out.push('\n');
    }

    /// Writes one round of `m` and its children: typedefs and exceptions (`interfaces` false)
    /// or interfaces.
    fn declarations(&mut self, m: &Module<'_>, scope: &str, interfaces: bool) {
        let octets = format!("{scope}::{}", m.octets);
        if !interfaces {
            if !m.exceptions.is_empty() || !m.interfaces.is_empty() {
                self.line("");
                self.line(&format!("typedef sequence<octet> {};", m.octets));
            }
            for (ident, e) in &m.exceptions {
                self.line("");
                self.line(&format!("// The protobuf message `{}`.", e.full_name));
                self.line(&format!("exception {ident} {{ {octets} data; }};"));
                self.pragma_id(ident, &e.repository_id);
            }
        } else {
            for (ident, s) in &m.interfaces {
                self.interface(ident, s, &octets);
            }
        }
        for child in m.children.values() {
            if interfaces && !child.has_interfaces() {
                continue;
            }
            self.line("");
            self.line(&format!("module {} {{", child.ident));
            self.depth += 1;
            self.declarations(child, &format!("{scope}::{}", child.ident), interfaces);
            self.depth -= 1;
            self.line("};");
        }
    }

    /// A documentation line of the .proto as an IDL comment.
    fn comment(&mut self, doc: &str) {
        let doc = doc.strip_prefix(' ').unwrap_or(doc);
        if doc.is_empty() {
            self.line("//");
        } else {
            self.line(&format!("// {doc}"));
        }
    }

    fn pragma_id(&mut self, ident: &str, repository_id: &str) {
        // `#pragma` lines start in column 0 for preprocessors that insist.
        let _ = writeln!(self.out, "#pragma ID {ident} \"{repository_id}\"");
    }

    fn interface(&mut self, ident: &str, s: &Service, octets: &str) {
        self.line("");
        for d in &s.docs {
            self.comment(d);
        }
        self.line(&format!("// The service `{}`.", s.full_name()));
        self.line(&format!("interface {ident} {{"));
        self.depth += 1;
        let mut ops = HashSet::new();
        ops.insert(ident.trim_start_matches('_').to_ascii_lowercase());
        for m in &s.methods {
            let name = &m.proto_name;
            if !is_expressible(name) {
                self.line(&format!(
                    "// Left out: IDL cannot name the operation `{name}` (an identifier \
                     starts with a letter)."
                ));
                continue;
            }
            if !ops.insert(name.to_ascii_lowercase()) {
                self.line(&format!(
                    "// Left out: the operation `{name}` differs only in case from another \
                     name in this scope, which IDL forbids."
                ));
                continue;
            }
            for d in &m.docs {
                self.comment(d);
            }
            // The parameter may not be named like its operation (without case).
            let param = if name.eq_ignore_ascii_case("p") {
                "payload"
            } else {
                "p"
            };
            let op = escape(name);
            if m.oneway {
                self.line(&format!(
                    "oneway void {op}(in {octets} {param}); // {} -> (no reply)",
                    m.input.full_name
                ));
                continue;
            }
            let raises = if m.raises.is_empty() {
                String::new()
            } else {
                let list: Vec<String> = m
                    .raises
                    .iter()
                    .map(|e| {
                        // Always recorded by `assign_names`; the fallback keeps this total.
                        self.exceptions
                            .get(&e.repository_id)
                            .cloned()
                            .unwrap_or_else(|| e.simple_name().to_owned())
                    })
                    .collect();
                format!(" raises ({})", list.join(", "))
            };
            self.line(&format!(
                "{octets} {op}(in {octets} {param}){raises}; // {} -> {}",
                m.input.full_name, m.output.full_name
            ));
        }
        self.depth -= 1;
        self.line("};");
        self.pragma_id(ident, &s.repository_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{compile, Options};
    use std::fs;

    /// Compiles `files` (name, text) from a temporary include directory and exports the IDL.
    fn idl(files: &[(&str, &str)]) -> String {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            let path = dir.path().join(name);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(&path, text).unwrap();
        }
        let protos: Vec<&str> = files.iter().map(|(n, _)| *n).collect();
        let compiled = compile(&protos, &[dir.path()], &Options::new()).unwrap();
        to_corba_idl(&compiled.model)
    }

    /// A service named like one of its operations, keyword operations, oneway, raises from
    /// another package and a nested message, in a nested package whose last segment is also
    /// a keyword.
    pub(crate) const TRICKY: &[(&str, &str)] = &[
        (
            "errs/errs.proto",
            r#"syntax = "proto3";
package errs;
message Denied { string why = 1; }
"#,
        ),
        (
            "a/b/tricky.proto",
            r#"syntax = "proto3";
package a.module;
import "google/protobuf/empty.proto";
import "orb/options.proto";
import "errs/errs.proto";
message Msg { bytes data = 1; }
message Outer { message Inner { int32 x = 1; } }
// Echoes.
service Echo {
  rpc echo(Msg) returns (Msg);
  rpc oneway(Msg) returns (google.protobuf.Empty) { option (orb.oneway) = true; }
  rpc Object(Msg) returns (google.protobuf.Empty) {
    option (orb.raises) = "Outer.Inner";
    option (orb.raises) = ".errs.Denied";
  }
  rpc p(Msg) returns (Msg);
  rpc Octets(Msg) returns (Msg);
}
service Object { rpc in(Msg) returns (Msg); }
service module { rpc Get(Msg) returns (Msg); }
"#,
        ),
    ];

    #[test]
    fn tricky_names_keep_wire_names_and_repository_ids() {
        let text = idl(TRICKY);
        for expected in [
            "interface Echo_ {",
            "#pragma ID Echo_ \"IDL:a/module/Echo:1.0\"",
            "::a::_module::Octets_ echo(in ::a::_module::Octets_ p);",
            "oneway void _oneway(in ::a::_module::Octets_ p);",
            "::a::_module::Octets_ _Object(in ::a::_module::Octets_ p) raises \
             (::a::_module::Outer_Inner, ::errs::Denied);",
            "::a::_module::Octets_ p(in ::a::_module::Octets_ payload);",
            "::a::_module::Octets_ Octets(in ::a::_module::Octets_ p);",
            "interface _Object {",
            "#pragma ID _Object \"IDL:a/module/Object:1.0\"",
            "::a::_module::Octets_ _in(in ::a::_module::Octets_ p);",
            "interface module_ {",
            "#pragma ID module_ \"IDL:a/module/module:1.0\"",
            "exception Outer_Inner { ::a::_module::Octets_ data; };",
            "#pragma ID Outer_Inner \"IDL:a/module/Outer/Inner:1.0\"",
            "exception Denied { ::errs::Octets data; };",
            // `Octets` is an operation of `Echo`: the C++ mapping needs another type name.
            "typedef sequence<octet> Octets_;",
            "#pragma ID Denied \"IDL:errs/Denied:1.0\"",
        ] {
            assert!(text.contains(expected), "missing `{expected}` in\n{text}");
        }
        // Exceptions are declared before the interfaces that raise them.
        assert!(text.find("exception Denied").unwrap() < text.find("interface Echo_").unwrap());
    }

    /// What IDL cannot name is left out with a comment, never emitted broken; a package-less
    /// exception named like a keyword is escaped; a service named like its module is renamed.
    #[test]
    fn unnameable_operations_are_left_out() {
        use crate::{MessageType, Method, Service};
        let msg = MessageType::new("Msg", "Msg");
        let op = |name: &str| Method {
            name: name.to_ascii_lowercase(),
            proto_name: name.to_owned(),
            input: msg.clone(),
            output: msg.clone(),
            ..Method::default()
        };
        let mut raising = op("Raise");
        raising.raises = vec![UserExceptionType {
            full_name: "Object".into(),
            rust_path: "Object".into(),
            repository_id: "IDL:Object:1.0".into(),
        }];
        let model = Model {
            services: vec![
                Service {
                    name: "Svc".into(),
                    proto_name: "Svc".into(),
                    repository_id: "IDL:Svc:1.0".into(),
                    methods: vec![op("Foo"), op("foo"), op("_x"), raising],
                    ..Service::default()
                },
                Service {
                    name: "Pkg".into(),
                    proto_name: "Pkg".into(),
                    package: "pkg".into(),
                    repository_id: "IDL:pkg/Pkg:1.0".into(),
                    methods: vec![op("Get")],
                    ..Service::default()
                },
            ],
            skipped: vec![],
        };
        let text = to_corba_idl(&model);
        for expected in [
            "typedef sequence<octet> Octets;\n",
            "exception _Object { ::Octets data; };",
            "#pragma ID _Object \"IDL:Object:1.0\"",
            "::Octets Foo(in ::Octets p);",
            "// Left out: the operation `foo` differs only in case",
            "// Left out: IDL cannot name the operation `_x`",
            "::Octets Raise(in ::Octets p) raises (::_Object);",
            "module pkg {",
            "interface Pkg_ {",
            "#pragma ID Pkg_ \"IDL:pkg/Pkg:1.0\"",
        ] {
            assert!(text.contains(expected), "missing `{expected}` in\n{text}");
        }
        assert!(!text.contains("foo(in"), "{text}");
    }
}
