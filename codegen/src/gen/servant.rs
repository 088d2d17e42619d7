//! The servant trait a user implements, and its blanket impl for `Arc<T>`.

use super::{
    deprecated_attr, docs_with, method_ident, naming_allows, rust_type, GenOptions, Names,
};
use proc_macro2::TokenStream;
use protorb_idl::{Method, Service};
use quote::quote;

/// The result type of a servant (and client) method: `Result<Resp, Error>`, where `Error` is the
/// method's exception enum when it declares `raises`, else `::protorb::codegen::Exception`; oneway
/// methods return `Result<(), Exception>` on the servant side.
pub(super) fn servant_result(method: &Method, names: &Names) -> TokenStream {
    let output = if method.oneway {
        quote!(())
    } else {
        rust_type(&method.output.rust_path)
    };
    let error = if method.raises.is_empty() {
        quote!(::protorb::codegen::Exception)
    } else {
        let e = names.error_enum(method);
        quote!(#e)
    };
    quote!(::core::result::Result<#output, #error>)
}

fn method_docs(method: &Method, default_stub: bool) -> TokenStream {
    let mut ours = vec![format!("Operation `{}`.", method.proto_name)];
    if method.oneway {
        ours[0].push_str(
            " Oneway: the caller does not wait and the ORB sends no reply, so an error returned \
             here does not reach the caller.",
        );
    }
    if !method.raises.is_empty() {
        let list: Vec<String> = method
            .raises
            .iter()
            .map(|r| format!("`{}`", r.full_name))
            .collect();
        ours.push(format!("Raises {}.", list.join(", ")));
    }
    if default_stub {
        ours.push(
            "Not implemented unless overridden: the default raises NO_IMPLEMENT (completed NO)."
                .to_string(),
        );
    }
    docs_with(&method.docs, &ours)
}

/// The default body under `generate_default_stubs`: NO_IMPLEMENT, completed NO (the operation
/// did not run), in the method's error type.
fn default_stub(service: &Service, method: &Method, names: &Names) -> TokenStream {
    let detail = format!(
        "operation `{}` of `{}` is not implemented",
        method.proto_name,
        service.full_name()
    );
    let system = quote! {
        ::protorb::codegen::SystemException::new(
            ::protorb::codegen::SystemExceptionKind::NO_IMPLEMENT,
            0,
            ::protorb::codegen::CompletionStatus::No,
        )
        .with_detail(#detail)
    };
    let error = if method.raises.is_empty() {
        quote!(::protorb::codegen::Exception::System)
    } else {
        let e = names.error_enum(method);
        quote!(#e::System)
    };
    quote! {
        {
            ::core::result::Result::Err(#error(#system))
        }
    }
}

pub(super) fn servant_trait(service: &Service, names: &Names, options: GenOptions) -> TokenStream {
    let trait_name = &names.trait_name;
    let skeleton = &names.skeleton;
    let docs = docs_with(
        &service.docs,
        &[
            format!(
                "The servant trait of `{}` (`{}`): implement it, then serve the implementation \
                 through [`{skeleton}`].",
                service.full_name(),
                service.repository_id
            ),
            String::new(),
            "Methods are called on ORB threads, possibly concurrently.".to_string(),
        ],
    );
    let methods = service.methods.iter().map(|m| {
        let name = method_ident(m);
        let input = rust_type(&m.input.rust_path);
        let result = servant_result(m, names);
        let docs = method_docs(m, options.default_stubs);
        let allows = naming_allows(&m.name);
        let deprecated = deprecated_attr(m.deprecated);
        if options.default_stubs {
            let body = default_stub(service, m, names);
            quote! {
                #docs
                #deprecated
                #allows
                fn #name(&self, _ctx: &::protorb::codegen::Context, _req: #input) -> #result #body
            }
        } else {
            quote! {
                #docs
                #deprecated
                #allows
                fn #name(&self, ctx: &::protorb::codegen::Context, req: #input) -> #result;
            }
        }
    });
    let trait_deprecated = deprecated_attr(service.deprecated);
    let forwards = service.methods.iter().map(|m| {
        let name = method_ident(m);
        let input = rust_type(&m.input.rust_path);
        let result = servant_result(m, names);
        quote! {
            fn #name(&self, ctx: &::protorb::codegen::Context, req: #input) -> #result {
                <T as #trait_name>::#name(&**self, ctx, req)
            }
        }
    });
    quote! {
        #docs
        #trait_deprecated
        pub trait #trait_name: ::core::marker::Send + ::core::marker::Sync + 'static {
            #(#methods)*
        }

        impl<T: #trait_name + ?::core::marker::Sized> #trait_name for ::std::sync::Arc<T> {
            #(#forwards)*
        }
    }
}
