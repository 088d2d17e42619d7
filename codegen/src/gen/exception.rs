//! Typed user exceptions: for a method with `raises`, an enum `{Service}{Method}Error` with one
//! variant per declared exception message plus `System`, and the conversions to and from
//! `::protorb::codegen::Exception` (the wire form: repository id + protobuf payload).
//!
//! Methods of one service that raise the same set of exceptions share one enum: the first such
//! method's `{Service}{Method}Error` is the enum, and each later one gets
//! `pub type {Service}{Other}Error = {Service}{Method}Error;`. Every method keeps its own
//! name in signatures, and one `match` (or one helper building the error) serves them all.
//! The wire is the same either way: the variants carry the same repository ids and bodies.

use super::{doc_line, ident, rust_type, Names};
use proc_macro2::{Ident, TokenStream};
use protorb_idl::ident::{to_upper_camel, to_upper_camel_raw};
use protorb_idl::{Method, Service};
use quote::quote;

/// One declared exception of a method, as the enum names it.
pub(super) struct Variant {
    pub ident: Ident,
    pub ty: TokenStream,
    pub repository_id: String,
    pub full_name: String,
}

/// The variants of `method`'s exception enum: the message's own name (`Oops`), or, when two
/// would clash (or one is called `System`), the camel-cased full name (`DemoErrorsOops`).
pub(super) fn variants(method: &Method) -> Vec<Variant> {
    let simple: Vec<String> = method
        .raises
        .iter()
        .map(|r| to_upper_camel(r.simple_name()))
        .collect();
    let mut taken: Vec<String> = vec!["System".to_string()];
    let mut out = Vec::new();
    for (r, name) in method.raises.iter().zip(&simple) {
        let clashes = taken.contains(name) || simple.iter().filter(|n| *n == name).count() > 1;
        let mut name = if clashes {
            to_upper_camel(&to_upper_camel_raw(&r.full_name.replace('.', "_")))
        } else {
            name.clone()
        };
        while taken.contains(&name) {
            name.push('_');
        }
        taken.push(name.clone());
        out.push(Variant {
            ident: ident(&name),
            ty: rust_type(&r.rust_path),
            repository_id: r.repository_id.clone(),
            full_name: r.full_name.clone(),
        });
    }
    out
}

pub(super) fn exception_enums(service: &Service, names: &Names) -> TokenStream {
    let enums = service
        .methods
        .iter()
        .filter(|m| !m.raises.is_empty())
        .map(|m| {
            if names.error_owner(m) == m.proto_name {
                exception_enum(service, m, names)
            } else {
                alias(m, names)
            }
        });
    quote! { #(#enums)* }
}

/// `pub type {Service}{Method}Error = {Service}{Owner}Error;` for a method raising the same
/// exceptions as an earlier one.
fn alias(method: &Method, names: &Names) -> TokenStream {
    let name = names.error_enum(method);
    let target = names.error_enum_def(method);
    let doc = doc_line(&format!(
        "How operation `{}` can fail: it raises the same exceptions as `{}`, so it shares \
         [`{target}`].",
        method.proto_name,
        names.error_owner(method)
    ));
    quote! {
        #doc
        pub type #name = #target;
    }
}

fn exception_enum(service: &Service, method: &Method, names: &Names) -> TokenStream {
    let name = names.error_enum(method);
    let vs = variants(method);
    let sharers: Vec<&Method> = service
        .methods
        .iter()
        .filter(|m| !m.raises.is_empty() && names.error_owner(m) == method.proto_name)
        .collect();
    let ops: Vec<String> = sharers
        .iter()
        .map(|m| format!("`{}`", m.proto_name))
        .collect();
    let mut docs = vec![doc_line(&format!(
        "How operation{} {} of `{}` can fail: a declared user exception, or a system \
         exception.",
        if ops.len() > 1 { "s" } else { "" },
        ops.join(", "),
        service.full_name()
    ))];
    docs.push(quote!(#[doc = ""]));
    docs.push(doc_line(
        "Servants return it; the skeleton sends user variants as USER_EXCEPTION replies. \
         Clients get it back, decoded by repository id.",
    ));
    if sharers.len() > 1 {
        let aliases: Vec<String> = sharers[1..]
            .iter()
            .map(|m| format!("`{}`", names.error_enum(m)))
            .collect();
        docs.push(quote!(#[doc = ""]));
        docs.push(doc_line(&format!(
            "Those operations raise the same exceptions, so they share this enum: {} {} \
             aliases of it.",
            aliases.join(", "),
            if aliases.len() > 1 { "are" } else { "is an" }
        )));
    }
    let variant_defs = vs.iter().map(|v| {
        let (id, ty) = (&v.ident, &v.ty);
        let doc = doc_line(&format!(
            "User exception `{}` (`{}`).",
            v.full_name, v.repository_id
        ));
        quote! { #doc #id(#ty), }
    });
    let from_variants = vs.iter().map(|v| {
        let (id, ty) = (&v.ident, &v.ty);
        quote! {
            impl ::core::convert::From<#ty> for #name {
                fn from(e: #ty) -> Self {
                    Self::#id(e)
                }
            }
        }
    });
    let display_arms = vs.iter().map(|v| {
        let id = &v.ident;
        // Repository ids come from proto names, which hold no `{` or `}`.
        let fmt = format!("user exception {}: {{:?}}", v.repository_id);
        quote! {
            Self::#id(e) => ::core::write!(f, #fmt, e),
        }
    });
    let to_exception_arms = vs.iter().map(|v| {
        let (id, rid) = (&v.ident, &v.repository_id);
        quote! {
            #name::#id(e) => ::protorb::codegen::user_exception(#rid, &e),
        }
    });
    let from_exception_arms = vs.iter().map(|v| {
        let (id, rid) = (&v.ident, &v.repository_id);
        quote! {
            #rid => match ::protorb::codegen::decode_reply(u.payload) {
                ::core::result::Result::Ok(v) => Self::#id(v),
                ::core::result::Result::Err(s) => Self::System(s),
            },
        }
    });
    quote! {
        #(#docs)*
        #[derive(Clone, Debug, PartialEq)]
        pub enum #name {
            #(#variant_defs)*
            /// A system exception (from the ORB, or raised by the servant).
            System(::protorb::codegen::SystemException),
        }

        #(#from_variants)*

        impl ::core::convert::From<::protorb::codegen::SystemException> for #name {
            fn from(e: ::protorb::codegen::SystemException) -> Self {
                Self::System(e)
            }
        }

        /// Decodes a user exception by repository id; an undeclared one becomes UNKNOWN, an
        /// undecodable payload MARSHAL.
        impl ::core::convert::From<::protorb::codegen::Exception> for #name {
            fn from(e: ::protorb::codegen::Exception) -> Self {
                match e {
                    ::protorb::codegen::Exception::System(s) => Self::System(s),
                    ::protorb::codegen::Exception::User(u) => match u.repository_id.as_str() {
                        #(#from_exception_arms)*
                        _ => Self::System(::protorb::codegen::unexpected_user_exception(u)),
                    },
                }
            }
        }

        impl ::core::convert::From<#name> for ::protorb::codegen::Exception {
            fn from(e: #name) -> Self {
                match e {
                    #(#to_exception_arms)*
                    #name::System(s) => ::protorb::codegen::Exception::System(s),
                }
            }
        }

        impl ::core::fmt::Display for #name {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                match self {
                    #(#display_arms)*
                    Self::System(e) => ::core::fmt::Display::fmt(e, f),
                }
            }
        }

        impl ::std::error::Error for #name {
            fn source(&self) -> ::core::option::Option<&(dyn ::std::error::Error + 'static)> {
                match self {
                    Self::System(e) => ::core::option::Option::Some(e),
                    _ => ::core::option::Option::None,
                }
            }
        }
    }
}
