//! The client stub: `{Service}Client` wraps an `ObjectProxy` and has one blocking method per
//! operation (plus a `_with_timeout` variant), and the asynchronous `_async` and
//! `_async_with_timeout` ones (for a oneway, a future ready once the request is handed to
//! the connection); `with_metadata` gives a copy whose calls carry metadata (per call or per
//! stub, as the caller keeps it).

use super::{
    client_method_idents, deprecated_attr, docs_with, ident, naming_allows, rust_type, Names,
    CLIENT_RESERVED,
};
use crate::gen::servant::servant_result;
use proc_macro2::TokenStream;
use protorb_idl::ident::{sanitize_identifier, to_snake_raw};
use protorb_idl::{Method, Service};
use quote::quote;

pub(super) fn client(service: &Service, names: &Names) -> TokenStream {
    let client = &names.client;
    let repository_id = &service.repository_id;
    let docs = docs_with(
        &service.docs,
        &[
            format!(
                "Client stub for `{}` (`{repository_id}`): blocking calls on a remote or \
                 collocated object.",
                service.full_name()
            ),
            String::new(),
            "Make one from an object reference with [`narrow`](Self::narrow) (checks the \
             type) or [`new`](Self::new) (does not). Cheap to clone."
                .to_string(),
        ],
    );
    let id_doc = format!(" The repository id of the interface, `{repository_id}`.");
    // Repository ids come from proto names, which hold no `{` or `}`.
    let narrow_fail = format!("object reference of type `{{}}` is not a `{repository_id}`");
    let nil_fail = format!("cannot narrow a nil object reference to `{repository_id}`");
    let methods = service.methods.iter().map(|m| client_methods(m, names));
    let deprecated = deprecated_attr(service.deprecated);
    quote! {
        #docs
        #deprecated
        #[derive(Clone, Debug)]
        pub struct #client {
            proxy: ::protorb::codegen::ObjectProxy,
        }

        impl #client {
            #[doc = #id_doc]
            pub const REPOSITORY_ID: &'static str = #repository_id;

            /// A stub for `obj`, without checking its type (see [`narrow`](Self::narrow)).
            pub fn new(orb: &::protorb::codegen::Orb, obj: ::protorb::codegen::ObjectRef) -> Self {
                Self {
                    proxy: ::protorb::codegen::ObjectProxy::new(orb, obj),
                }
            }

            /// A stub calling through `proxy`, without checking its type.
            pub fn from_proxy(proxy: ::protorb::codegen::ObjectProxy) -> Self {
                Self { proxy }
            }

            /// A stub for `obj` if it implements this interface: its type id says so, or the
            /// object answers `_is_a` with true. Otherwise BAD_PARAM (or the exception the
            /// `_is_a` call raised).
            pub fn narrow(
                orb: &::protorb::codegen::Orb,
                obj: ::protorb::codegen::ObjectRef,
            ) -> ::core::result::Result<Self, ::protorb::codegen::SystemException> {
                if obj.is_nil() {
                    return ::core::result::Result::Err(
                        ::protorb::codegen::SystemException::bad_param(0, #nil_fail),
                    );
                }
                let proxy = ::protorb::codegen::ObjectProxy::new(orb, obj);
                if proxy.target().type_id() == Self::REPOSITORY_ID
                    || proxy.is_a(Self::REPOSITORY_ID)?
                {
                    ::core::result::Result::Ok(Self { proxy })
                } else {
                    ::core::result::Result::Err(::protorb::codegen::SystemException::bad_param(
                        0,
                        ::std::format!(#narrow_fail, proxy.target().type_id()),
                    ))
                }
            }

            /// The object reference this stub calls.
            pub fn object_ref(&self) -> &::protorb::codegen::ObjectRef {
                self.proxy.target()
            }

            /// The underlying proxy.
            pub fn proxy(&self) -> &::protorb::codegen::ObjectProxy {
                &self.proxy
            }

            /// A copy of this stub whose calls carry `metadata` (as GIOP service contexts,
            /// read by the servant with `Context::metadata`), in place of any this stub had.
            /// Cheap (it clones the proxy): for metadata on one call only, call through the
            /// copy, `client.with_metadata(md).op(req)`; to attach it to every call, keep the
            /// copy.
            #[must_use]
            pub fn with_metadata(&self, metadata: ::protorb::codegen::Metadata) -> Self {
                Self {
                    proxy: self.proxy.clone().with_metadata(metadata),
                }
            }

            #(#methods)*
        }
    }
}

fn client_methods(method: &Method, names: &Names) -> TokenStream {
    let op = &method.proto_name;
    let (plain, with_timeout) = client_method_idents(method);
    let input = rust_type(&method.input.rust_path);
    let deprecated = deprecated_attr(method.deprecated);
    let allows = naming_allows(&plain.to_string());
    let allows = quote!(#deprecated #allows);
    let timeout_allows = naming_allows(&with_timeout.to_string());
    let timeout_allows = quote!(#deprecated #timeout_allows);
    let mut ours = vec![format!("Calls operation `{op}` and waits for the reply.")];
    if method.oneway {
        let asynchronous = oneway_async_methods(method);
        ours = vec![format!(
            "Sends oneway operation `{op}`: returns once the request is handed to the \
             connection; no reply comes."
        )];
        let docs = docs_with(&method.docs, &ours);
        let timeout_doc = format!(
            " Sends oneway operation `{op}`, waiting at most `timeout` to hand it to the \
             connection (connecting, and room in its outgoing queue; then TIMEOUT or \
             TRANSIENT, and nothing was sent). No reply comes: `timeout` does not cover \
             delivery."
        );
        return quote! {
            #docs
            #allows
            pub fn #plain(&self, req: #input)
                -> ::core::result::Result<(), ::protorb::codegen::SystemException>
            {
                self.proxy.invoke_oneway_message(#op, &req, ::core::option::Option::None)
            }

            #[doc = #timeout_doc]
            #timeout_allows
            pub fn #with_timeout(&self, req: #input, timeout: ::protorb::codegen::Duration)
                -> ::core::result::Result<(), ::protorb::codegen::SystemException>
            {
                self.proxy.invoke_oneway_message(
                    #op,
                    &req,
                    ::core::option::Option::Some(timeout),
                )
            }

            #asynchronous
        };
    }
    if !method.raises.is_empty() {
        let list: Vec<String> = method
            .raises
            .iter()
            .map(|r| format!("`{}`", r.full_name))
            .collect();
        ours.push(format!("Raises {}.", list.join(", ")));
    }
    let docs = docs_with(&method.docs, &ours);
    let timeout_doc = format!(
        " Calls operation `{op}` and waits for the reply at most `timeout` (then TIMEOUT)."
    );
    let result = servant_result(method, names);
    let finish = reply_to_result(method, names);
    let body = |timeout: TokenStream| {
        quote! {
            let body = self
                .proxy
                .invoke_message(#op, &req, #timeout)
                #finish
        }
    };
    let plain_body = body(quote!(::core::option::Option::None));
    let timeout_body = body(quote!(::core::option::Option::Some(timeout)));
    let asynchronous = async_methods(method, names);
    quote! {
        #docs
        #allows
        pub fn #plain(&self, req: #input) -> #result {
            #plain_body
        }

        #[doc = #timeout_doc]
        #timeout_allows
        pub fn #with_timeout(&self, req: #input, timeout: ::protorb::codegen::Duration) -> #result {
            #timeout_body
        }

        #asynchronous
    }
}

/// What a client method does with the reply body's `Result` (`body` in the generated code):
/// exceptions mapped to the method's error type (an undeclared user exception becomes a
/// system one), then the body decoded. Shared by the blocking and the asynchronous methods.
fn reply_to_result(method: &Method, names: &Names) -> TokenStream {
    if method.raises.is_empty() {
        quote! {
            .map_err(|e| match e {
                ::protorb::codegen::Exception::User(u) => ::protorb::codegen::Exception::System(
                    ::protorb::codegen::unexpected_user_exception(u),
                ),
                e => e,
            })?;
            ::protorb::codegen::decode_reply(body).map_err(::protorb::codegen::Exception::System)
        }
    } else {
        let error = names.error_enum(method);
        quote! {
            .map_err(#error::from)?;
            ::protorb::codegen::decode_reply(body).map_err(#error::System)
        }
    }
}

/// The names of a method's asynchronous variants, `{name}_async` and
/// `{name}_async_with_timeout`, each with its attributes (`deprecated`, naming lint allows).
fn async_idents(method: &Method) -> [(proc_macro2::Ident, TokenStream); 2] {
    let mut raw = to_snake_raw(&method.proto_name);
    if CLIENT_RESERVED.contains(&raw.as_str()) {
        raw.push_str("_op");
    }
    let deprecated = deprecated_attr(method.deprecated);
    ["_async", "_async_with_timeout"].map(|suffix| {
        let name = ident(&sanitize_identifier(&format!("{raw}{suffix}")));
        let allows = naming_allows(&name.to_string());
        (name, quote!(#deprecated #allows))
    })
}

/// The asynchronous variants of a oneway operation's client method: `{name}_async` and
/// `{name}_async_with_timeout` (`ObjectProxy::invoke_oneway_message_async`), whose futures are
/// ready at once with what the blocking method would return: the request is handed to the
/// connection on the calling thread, as a two-way `_async` method writes its request.
fn oneway_async_methods(method: &Method) -> TokenStream {
    let op = &method.proto_name;
    let [(plain, allows), (with_timeout, timeout_allows)] = async_idents(method);
    let input = rust_type(&method.input.rust_path);
    let doc = format!(
        " Sends oneway operation `{op}` for code that awaits its calls: the request is handed \
         to the connection before this returns (the calling thread may wait to connect and \
         for room in the outgoing queue, at most the ORB's call timeout, as the blocking \
         method does); the future is then ready at once with the outcome. No reply comes."
    );
    let timeout_doc = format!(
        " Sends oneway operation `{op}` as the `_async` method does, waiting at most \
         `timeout` to hand it to the connection (then TIMEOUT or TRANSIENT, and nothing was \
         sent). No reply comes: `timeout` does not cover delivery."
    );
    quote! {
        #[doc = #doc]
        #allows
        pub fn #plain(
            &self,
            req: #input,
        ) -> impl ::core::future::Future<
            Output = ::core::result::Result<(), ::protorb::codegen::SystemException>,
        > + ::core::marker::Send + 'static {
            self.proxy
                .invoke_oneway_message_async(#op, &req, ::core::option::Option::None)
        }

        #[doc = #timeout_doc]
        #timeout_allows
        pub fn #with_timeout(
            &self,
            req: #input,
            timeout: ::protorb::codegen::Duration,
        ) -> impl ::core::future::Future<
            Output = ::core::result::Result<(), ::protorb::codegen::SystemException>,
        > + ::core::marker::Send + 'static {
            self.proxy.invoke_oneway_message_async(
                #op,
                &req,
                ::core::option::Option::Some(timeout),
            )
        }
    }
}

/// The asynchronous (AMI) variants of a two-way operation's client method: `{name}_async`
/// and `{name}_async_with_timeout`, which send the request at once and return a future of
/// the reply (`ObjectProxy::invoke_message_async`).
fn async_methods(method: &Method, names: &Names) -> TokenStream {
    let op = &method.proto_name;
    let [(plain, allows), (with_timeout, timeout_allows)] = async_idents(method);
    let input = rust_type(&method.input.rust_path);
    let result = servant_result(method, names);
    let doc = format!(
        " Calls operation `{op}` asynchronously: the request is sent before this returns; \
         the future resolves with the reply (or TIMEOUT past the ORB's call timeout). \
         Dropping it first cancels the call."
    );
    let timeout_doc = format!(
        " Calls operation `{op}` asynchronously, as the `_async` method does, with the reply \
         awaited at most `timeout` (then TIMEOUT)."
    );
    let map_err = reply_to_result(method, names);
    let body = |timeout: TokenStream| {
        quote! {
            let reply = self.proxy.invoke_message_async(#op, &req, #timeout);
            async move {
                let body = reply.await #map_err
            }
        }
    };
    let plain_body = body(quote!(::core::option::Option::None));
    let timeout_body = body(quote!(::core::option::Option::Some(timeout)));
    quote! {
        #[doc = #doc]
        #allows
        pub fn #plain(
            &self,
            req: #input,
        ) -> impl ::core::future::Future<Output = #result> + ::core::marker::Send + 'static {
            #plain_body
        }

        #[doc = #timeout_doc]
        #timeout_allows
        pub fn #with_timeout(
            &self,
            req: #input,
            timeout: ::protorb::codegen::Duration,
        ) -> impl ::core::future::Future<Output = #result> + ::core::marker::Send + 'static {
            #timeout_body
        }
    }
}
