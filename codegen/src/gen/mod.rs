//! Rust code for one service, from the interface model: one `quote!` function per artifact
//! (servant trait, user exception enums, skeleton, client stub), `prettyplease` once at the end.
//!
//! Generated code names everything by absolute path (`::core::result::Result`,
//! `::protorb::codegen::Context`), because it shares a module with prost's messages, which may be
//! called `Result`, `Option`, `Context` or `Exception`.

mod client;
mod exception;
mod servant;
mod skeleton;

use proc_macro2::{Ident, Span, TokenStream};
use protorb_idl::ident::{sanitize_identifier, to_snake_raw, to_upper_camel, to_upper_camel_raw};
use protorb_idl::{Method, Service};
use quote::{quote, ToTokens};
use std::collections::{BTreeSet, HashMap};

/// What to generate for each service (the [`Builder`](crate::Builder) sets it from
/// `build_server`, `build_client` and `generate_default_stubs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GenOptions {
    server: bool,
    client: bool,
    default_stubs: bool,
}

impl Default for GenOptions {
    fn default() -> Self {
        GenOptions {
            server: true,
            client: true,
            default_stubs: false,
        }
    }
}

impl GenOptions {
    /// The defaults: servant traits, skeletons and clients; no default method bodies.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether to generate servant traits and skeletons.
    #[must_use]
    pub fn server(mut self, server: bool) -> Self {
        self.server = server;
        self
    }

    /// Whether to generate client stubs.
    #[must_use]
    pub fn client(mut self, client: bool) -> Self {
        self.client = client;
        self
    }

    /// Whether servant trait methods get a default body raising NO_IMPLEMENT.
    #[must_use]
    pub fn default_stubs(mut self, default_stubs: bool) -> Self {
        self.default_stubs = default_stubs;
        self
    }
}

/// The code for `service` as a token stream (servant trait, exception enums, skeleton, client),
/// with the default [`GenOptions`].
pub fn service_tokens(service: &Service) -> TokenStream {
    service_tokens_with(service, GenOptions::default())
}

/// The code for `service` as a token stream, generating what `options` asks for.
pub fn service_tokens_with(service: &Service, options: GenOptions) -> TokenStream {
    let names = Names::new(service);
    let mut tokens = TokenStream::new();
    if options.server {
        tokens.extend(servant::servant_trait(service, &names, options));
    }
    if options.server || options.client {
        tokens.extend(exception::exception_enums(service, &names));
    }
    if options.server {
        tokens.extend(skeleton::skeleton(service, &names));
    }
    if options.client {
        tokens.extend(client::client(service, &names));
    }
    let deprecated = service.deprecated || service.methods.iter().any(|m| m.deprecated);
    allow_lints(tokens, deprecated)
}

/// Marks every top-level item `#[allow(dead_code)]`: a binary crate that includes the
/// generated module privately and uses only part of a service (just the client, or never
/// `narrow`) must still build under `-D warnings`. prost-build and tonic-build do the same
/// for the code they generate. With `deprecated`, the items also allow `deprecated`: the
/// skeleton and the `Arc` impl call deprecated methods, and name a deprecated trait; the
/// user's own uses still warn.
fn allow_lints(tokens: TokenStream, deprecated: bool) -> TokenStream {
    let Ok(mut file) = syn::parse2::<syn::File>(tokens.clone()) else {
        return tokens;
    };
    let allow: syn::Attribute = if deprecated {
        syn::parse_quote!(#[allow(dead_code, deprecated)])
    } else {
        syn::parse_quote!(#[allow(dead_code)])
    };
    for item in &mut file.items {
        let attrs = match item {
            syn::Item::Struct(i) => &mut i.attrs,
            syn::Item::Enum(i) => &mut i.attrs,
            syn::Item::Impl(i) => &mut i.attrs,
            syn::Item::Trait(i) => &mut i.attrs,
            syn::Item::Const(i) => &mut i.attrs,
            syn::Item::Fn(i) => &mut i.attrs,
            syn::Item::Type(i) => &mut i.attrs,
            _ => continue,
        };
        attrs.push(allow.clone());
    }
    quote!(#file)
}

/// The code for `service`, formatted with prettyplease, with the default [`GenOptions`].
pub fn generate_service(service: &Service) -> String {
    generate_service_with(service, GenOptions::default())
}

/// The code for `service`, formatted with prettyplease, generating what `options` asks for.
pub fn generate_service_with(service: &Service, options: GenOptions) -> String {
    let tokens = service_tokens_with(service, options);
    match syn::parse2::<syn::File>(tokens.clone()) {
        Ok(file) => prettyplease::unparse(&file),
        // Cannot happen for well-formed models; keep the raw tokens so the compiler reports it.
        Err(_) => tokens.to_string(),
    }
}

/// The Rust names derived from a service.
pub(crate) struct Names {
    /// The servant trait, e.g. `Echo`.
    pub trait_name: Ident,
    /// `EchoSkeleton`.
    pub skeleton: Ident,
    /// `EchoClient`.
    pub client: Ident,
    base: String,
    /// Method proto name → the proto name of the first method of the service that raises the
    /// same set of exceptions (itself if none before it does): that one's enum is shared.
    error_owner: HashMap<String, String>,
}

impl Names {
    fn new(service: &Service) -> Self {
        let base = to_upper_camel_raw(&service.proto_name);
        let trait_name = if service.name.is_empty() {
            to_upper_camel(&service.proto_name)
        } else {
            service.name.clone()
        };
        let mut owners: Vec<(BTreeSet<&str>, &str)> = Vec::new();
        let mut error_owner = HashMap::new();
        for m in service.methods.iter().filter(|m| !m.raises.is_empty()) {
            let set: BTreeSet<&str> = m.raises.iter().map(|r| r.full_name.as_str()).collect();
            let owner = match owners.iter().find(|(s, _)| *s == set) {
                Some((_, owner)) => owner,
                None => {
                    owners.push((set, &m.proto_name));
                    m.proto_name.as_str()
                }
            };
            error_owner.insert(m.proto_name.clone(), owner.to_string());
        }
        Names {
            trait_name: ident(&trait_name),
            skeleton: ident(&sanitize_identifier(&format!("{base}Skeleton"))),
            client: ident(&sanitize_identifier(&format!("{base}Client"))),
            base,
            error_owner,
        }
    }

    /// The method whose error enum `method` uses: the first method of the service declaring
    /// the same set of exceptions (`method` itself when it is the first).
    pub fn error_owner<'a>(&'a self, method: &'a Method) -> &'a str {
        self.error_owner
            .get(&method.proto_name)
            .map_or(method.proto_name.as_str(), String::as_str)
    }

    /// The enum that actually defines `method`'s error type (see [`Self::error_owner`]).
    pub fn error_enum_def(&self, method: &Method) -> Ident {
        self.error_enum_named(self.error_owner(method))
    }

    /// `{Service}{Method}Error`, e.g. `EchoEchoError`: the enum, or the alias of the shared
    /// enum, that the method's signatures name.
    pub fn error_enum(&self, method: &Method) -> Ident {
        self.error_enum_named(&method.proto_name)
    }

    fn error_enum_named(&self, proto_name: &str) -> Ident {
        ident(&sanitize_identifier(&format!(
            "{}{}Error",
            self.base,
            to_upper_camel_raw(proto_name)
        )))
    }
}

/// `#[deprecated]` when the proto says so.
pub(crate) fn deprecated_attr(deprecated: bool) -> TokenStream {
    if deprecated {
        quote!(#[deprecated])
    } else {
        quote!()
    }
}

/// The servant trait's method name (the model's sanitised snake name).
pub(crate) fn method_ident(method: &Method) -> Ident {
    ident(&method.name)
}

/// `#[allow(..)]` for clippy's naming conventions a proto method name can break in a trait or
/// inherent method (`New` → `fn new(&self, ..)`, `IntoInner` → `fn into_inner(&self, ..)`):
/// the user cannot rename the operation without changing the wire, so the generated method
/// allows them, only where the name calls for it. (`should_implement_trait` never fires: no
/// generated method has a std trait method's signature, since all take a request.)
pub(crate) fn naming_allows(rust_name: &str) -> TokenStream {
    let name = rust_name.strip_prefix("r#").unwrap_or(rust_name);
    let mut lints = Vec::new();
    if name == "new" {
        lints.push(quote!(clippy::new_ret_no_self));
    }
    // `as_`, `is_` and `to_` accept `&self`; these do not.
    let conventions = ["from_", "into_"];
    if name == "new" || conventions.iter().any(|p| name.starts_with(p)) || name.ends_with("_mut") {
        lints.push(quote!(clippy::wrong_self_convention));
    }
    if lints.is_empty() {
        quote!()
    } else {
        quote!(#[allow(#(#lints),*)])
    }
}

/// Names of the client's own methods, and `clone` (an inherent `clone(&self, req)` would hide
/// `Clone::clone` from method calls on the client): an operation with one of these names gets
/// an `_op` suffix on the client (`New` → `new_op`), as prost suffixes `self` with `_`.
pub(crate) const CLIENT_RESERVED: &[&str] = &[
    "new",
    "from_proxy",
    "narrow",
    "object_ref",
    "proxy",
    "with_metadata",
    "clone",
];

/// The client's method names for `method`: the blocking call and its `_with_timeout` variant.
pub(crate) fn client_method_idents(method: &Method) -> (Ident, Ident) {
    let mut raw = to_snake_raw(&method.proto_name);
    if CLIENT_RESERVED.contains(&raw.as_str()) {
        raw.push_str("_op");
    }
    let plain = if raw == to_snake_raw(&method.proto_name) && !method.name.is_empty() {
        method.name.clone()
    } else {
        sanitize_identifier(&raw)
    };
    (
        ident(&plain),
        ident(&sanitize_identifier(&format!("{raw}_with_timeout"))),
    )
}

/// An identifier, raw (`r#type`) when the name says so.
pub(crate) fn ident(name: &str) -> Ident {
    match name.strip_prefix("r#") {
        Some(raw) => Ident::new_raw(raw, Span::call_site()),
        None => Ident::new(name, Span::call_site()),
    }
}

/// A Rust type from a path string of the model (`super::common::Item`, `()`).
pub(crate) fn rust_type(path: &str) -> TokenStream {
    match syn::parse_str::<syn::Type>(path) {
        Ok(ty) => ty.into_token_stream(),
        Err(_) => {
            let msg = format!("protorb-codegen: `{path}` is not a Rust type path");
            quote!(::core::compile_error!(#msg))
        }
    }
}

/// `#[doc = ".."]` attributes for proto comment lines, sanitised as prost does
/// (`prost-build/src/ast.rs`: bare URLs in `<>`, brackets escaped so rustdoc does not read them
/// as links).
pub(crate) fn doc_attrs(lines: &[String]) -> TokenStream {
    let lines = lines.iter().map(|l| sanitize_doc_line(l));
    quote! { #( #[doc = #lines] )* }
}

/// One `#[doc = ".."]` line of our own text.
pub(crate) fn doc_line(text: &str) -> TokenStream {
    let text = if text.is_empty() {
        String::new()
    } else {
        format!(" {text}")
    };
    quote! { #[doc = #text] }
}

/// Proto comments, then (after a blank line if there were any) our own lines.
pub(crate) fn docs_with(lines: &[String], ours: &[String]) -> TokenStream {
    let proto = doc_attrs(lines);
    let sep = if lines.is_empty() || ours.is_empty() {
        quote!()
    } else {
        quote!(#[doc = ""])
    };
    let ours = ours.iter().map(|l| doc_line(l));
    quote! { #proto #sep #(#ours)* }
}

fn sanitize_doc_line(line: &str) -> String {
    let mut out = String::with_capacity(line.len() + 8);
    let mut rest = line;
    while !rest.is_empty() {
        let url_at = ["http://", "https://"]
            .iter()
            .filter_map(|p| rest.find(p))
            .min();
        match url_at {
            Some(0) => {
                let end = rest
                    .find(|c: char| c.is_whitespace() || c == ')' || c == '>')
                    .unwrap_or(rest.len());
                if out.ends_with('<') {
                    out.push_str(&rest[..end]);
                } else {
                    out.push('<');
                    out.push_str(&rest[..end]);
                    out.push('>');
                }
                rest = &rest[end..];
            }
            _ => {
                let upto = url_at.unwrap_or(rest.len());
                for c in rest[..upto].chars() {
                    if (c == '[' || c == ']') && !out.ends_with('\\') {
                        out.push('\\');
                    }
                    out.push(c);
                }
                rest = &rest[upto..];
            }
        }
    }
    let mut chars = out.chars();
    if chars
        .next()
        .is_some_and(|c| c != ' ' || chars.next() == Some(' '))
    {
        out.insert(0, ' ');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doc_lines_are_sanitised() {
        assert_eq!(sanitize_doc_line(" plain"), " plain");
        assert_eq!(sanitize_doc_line("no space"), " no space");
        assert_eq!(
            sanitize_doc_line(" see https://example.com/x."),
            " see <https://example.com/x.>"
        );
        assert_eq!(sanitize_doc_line(" a [b] c"), " a \\[b\\] c");
        assert_eq!(sanitize_doc_line(" <http://x>"), " <http://x>");
    }

    #[test]
    fn identifiers() {
        assert_eq!(ident("r#type").to_string(), "r#type");
        assert_eq!(ident("self_").to_string(), "self_");
        assert_eq!(rust_type("()").to_string(), "()");
        assert_eq!(
            rust_type("super::common::Item").to_string(),
            "super :: common :: Item"
        );
    }

    #[test]
    fn client_names_avoid_the_clients_own_methods() {
        let m = |proto: &str| Method {
            name: protorb_idl::ident::to_snake(proto),
            proto_name: proto.into(),
            ..Method::default()
        };
        let names = |proto: &str| {
            let (a, b) = client_method_idents(&m(proto));
            (a.to_string(), b.to_string())
        };
        assert_eq!(names("Echo"), ("echo".into(), "echo_with_timeout".into()));
        assert_eq!(names("Type"), ("r#type".into(), "type_with_timeout".into()));
        assert_eq!(names("Self"), ("self_".into(), "self_with_timeout".into()));
        assert_eq!(
            names("New"),
            ("new_op".into(), "new_op_with_timeout".into())
        );
        assert_eq!(
            names("Narrow"),
            ("narrow_op".into(), "narrow_op_with_timeout".into())
        );
        assert_eq!(
            names("Clone"),
            ("clone_op".into(), "clone_op_with_timeout".into())
        );
    }
}
