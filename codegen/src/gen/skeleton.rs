//! The skeleton: `{Service}Skeleton<T>` implements `::protorb::codegen::Servant` by matching the
//! operation name (the proto method name as written), decoding the request, calling the servant
//! trait and encoding the result into the `ResultSlot` the ORB gives (`dispatch_into`: into the
//! reply frame itself; `dispatch` returns it as bytes). Unknown operations are BAD_OPERATION;
//! undecodable requests MARSHAL (from `decode_request`).

use super::{deprecated_attr, doc_line, method_ident, Names};
use proc_macro2::TokenStream;
use protorb_idl::{Method, Service};
use quote::quote;

pub(super) fn skeleton(service: &Service, names: &Names) -> TokenStream {
    let trait_name = &names.trait_name;
    let skeleton = &names.skeleton;
    let repository_id = &service.repository_id;
    let struct_doc = [
        doc_line(&format!(
            "Serves an implementation of [`{trait_name}`] as a CORBA object of type \
             `{repository_id}`."
        )),
        quote!(#[doc = ""]),
        doc_line(
            "Activate it in an ORB (`Arc<dyn Servant>` from [`into_servant`](Self::into_servant)); \
             the ORB calls `dispatch_into` for each request (for one from the network, the result \
             is encoded straight into the reply frame).",
        ),
    ];
    let id_doc = doc_line(&format!(
        "The repository id of the interface, `{repository_id}`."
    ));
    let (body, ctx) = if service.methods.is_empty() {
        (quote!(_body), quote!(_ctx))
    } else {
        (quote!(body), quote!(ctx))
    };
    // Unused when every operation returns nothing (`()`, oneway).
    let result = if service
        .methods
        .iter()
        .all(|m| m.oneway || m.output.rust_path == "()")
    {
        quote!(_result)
    } else {
        quote!(result)
    };
    let arms = service
        .methods
        .iter()
        .map(|m| dispatch_arm(m, names, &body, &ctx));
    let deprecated = deprecated_attr(service.deprecated);
    quote! {
        #(#struct_doc)*
        #deprecated
        #[derive(Clone, Debug)]
        pub struct #skeleton<T: #trait_name>(pub T);

        impl<T: #trait_name> #skeleton<T> {
            #id_doc
            pub const REPOSITORY_ID: &'static str = #repository_id;

            /// A skeleton serving `inner`.
            pub fn new(inner: T) -> Self {
                Self(inner)
            }

            /// The servant implementation.
            pub fn inner(&self) -> &T {
                &self.0
            }

            /// This skeleton as a shared servant, ready for the ORB's object adapter.
            pub fn into_servant(self) -> ::std::sync::Arc<dyn ::protorb::codegen::Servant> {
                ::std::sync::Arc::new(self)
            }
        }

        impl<T: #trait_name> ::protorb::codegen::Servant for #skeleton<T> {
            fn repository_id(&self) -> &'static str {
                Self::REPOSITORY_ID
            }

            fn dispatch(
                &self,
                operation: &str,
                body: ::protorb::codegen::Bytes,
                ctx: &::protorb::codegen::Context,
            ) -> ::core::result::Result<::protorb::codegen::Bytes, ::protorb::codegen::Exception> {
                let mut result = ::protorb::codegen::ResultSlot::for_bytes();
                self.dispatch_into(operation, body, ctx, &mut result)?;
                ::core::result::Result::Ok(result.into_bytes())
            }

            fn dispatch_into(
                &self,
                operation: &str,
                #body: ::protorb::codegen::Bytes,
                #ctx: &::protorb::codegen::Context,
                #result: &mut ::protorb::codegen::ResultSlot,
            ) -> ::core::result::Result<(), ::protorb::codegen::Exception> {
                match operation {
                    #(#arms)*
                    _ => ::core::result::Result::Err(::protorb::codegen::Exception::System(
                        ::protorb::codegen::SystemException::bad_operation(operation),
                    )),
                }
            }
        }
    }
}

/// One `"Op" => { .. }` arm. `google.protobuf.Empty` (Rust `()`) is handled apart, so no unit
/// value is bound or passed around (clippy's `let_unit_value`, `unit_arg`).
fn dispatch_arm(
    method: &Method,
    names: &Names,
    body: &TokenStream,
    ctx: &TokenStream,
) -> TokenStream {
    let trait_name = &names.trait_name;
    let op = &method.proto_name;
    let name = method_ident(method);
    // `()` only: under `compile_well_known_types` `Empty` is a generated struct, passed as is.
    let (decode, arg) = if method.input.rust_path == "()" {
        (
            quote!(::protorb::codegen::decode_request::<()>(#body)?;),
            quote!(()),
        )
    } else {
        (
            quote!(let req = ::protorb::codegen::decode_request(#body)?;),
            quote!(req),
        )
    };
    let call = quote!(<T as #trait_name>::#name(&self.0, #ctx, #arg)?);
    // The result goes into the slot the ORB gave (into the reply frame itself: see
    // `ResultSlot`); nothing for an operation without one.
    let reply = if method.oneway || method.output.rust_path == "()" {
        quote! {
            #call;
            ::core::result::Result::Ok(())
        }
    } else {
        quote! {
            let resp = #call;
            result.message(&resp);
            ::core::result::Result::Ok(())
        }
    };
    quote! {
        #op => {
            #decode
            #reply
        }
    }
}
