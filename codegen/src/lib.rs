//! Build-script code generator for orb: `.proto` services to servant traits, skeletons and
//! client stubs; messages by prost.
//!
//! # Use
//!
//! `Cargo.toml`:
//!
//! ```toml
//! [dependencies]
//! protorb = "0.1"
//! prost = "0.14"
//! prost-types = "0.14"   # if the .proto files use google.protobuf types
//!
//! [build-dependencies]
//! protorb-codegen = "0.1"
//! ```
//!
//! `build.rs` (no `protoc` needed: protox parses the files):
//!
//! ```no_run
//! fn main() -> std::io::Result<()> {
//!     protorb_codegen::compile_protos(&["proto/echo.proto"], &["proto"])
//! }
//! ```
//!
//! `src/lib.rs`, for `package demo;`:
//!
//! ```ignore
//! pub mod demo {
//!     include!(concat!(env!("OUT_DIR"), "/demo.rs"));
//! }
//! ```
//!
//! (or set [`Builder::include_file`] and include that one file, which declares the modules of
//! all packages).
//!
//! # What is generated
//!
//! For `service Echo { rpc Echo(Msg) returns (Msg); }` in package `demo`
//! (repository id `IDL:demo/Echo:1.0`, operation name on the wire `Echo`):
//!
//! - `pub trait Echo: Send + Sync + 'static` with
//!   `fn echo(&self, ctx: &Context, req: Msg) -> Result<Msg, Exception>`: the servant trait,
//!   carrying the proto comments; also implemented for `Arc<T>`.
//! - `pub struct EchoSkeleton<T: Echo>(pub T)`: implements `protorb::Servant` (dispatch by
//!   operation name; MARSHAL for undecodable requests, BAD_OPERATION for unknown operations);
//!   `new`, `into_servant() -> Arc<dyn Servant>`, `REPOSITORY_ID`.
//! - `pub struct EchoClient`: the stub. `new(&orb, obj)` (unchecked), `narrow(&orb, obj)`
//!   (checks the type id, else asks the object `_is_a`), `object_ref()`, `REPOSITORY_ID`, and
//!   per operation `echo(req)` and `echo_with_timeout(req, timeout)`.
//!
//! Method options from `orb/options.proto` (`import "orb/options.proto";` works without an
//! include path):
//!
//! - `option (orb.oneway) = true;` (the method returns `google.protobuf.Empty`): the servant
//!   returns `Result<(), Exception>`; the client methods (`notify(req)` and
//!   `notify_with_timeout(req, timeout)`) return `Result<(), SystemException>` once the
//!   request is handed to the connection. The timeout bounds that hand-over (connecting, and
//!   room in the connection's outgoing queue), not delivery.
//! - `option (orb.raises) = "Oops";` (repeatable): an enum `EchoEchoError { Oops(Oops), System(..) }`
//!   is the error type of both the servant method and the client method. The skeleton sends a
//!   user variant as a USER_EXCEPTION with repository id `IDL:demo/Oops:1.0`; the client
//!   decodes it back by that id.
//!
//!   Methods of one service that raise the same set of exceptions share one enum: the first
//!   method's `{Service}{Method}Error` is the enum, and each later one's name is a type alias
//!   of it (`pub type EchoOtherError = EchoEchoError;`), so one `match` or one helper serves
//!   them all. The wire does not change: the same repository ids and bodies.
//!
//! `option deprecated = true;` on a service marks its trait, skeleton and client
//! `#[deprecated]`; on a method, the trait method and both client methods. Generated impls
//! allow `deprecated`, so only the user's own uses warn. (prost marks deprecated fields and
//! enum values; it leaves messages unmarked.)
//!
//! Object references travel in messages as `orb.ObjectRef`, mapped to `protorb::ObjectRef`.
//!
//! # Options
//!
//! [`Builder`] has tonic-build's and prost-build's names: [`Builder::build_server`],
//! [`Builder::build_client`], [`Builder::generate_default_stubs`] (servant methods default to
//! raising NO_IMPLEMENT), and prost-build's settings passed to `prost_build::Config` as they
//! are ([`Builder::type_attribute`], [`Builder::message_attribute`],
//! [`Builder::enum_attribute`], [`Builder::field_attribute`], [`Builder::btree_map`],
//! [`Builder::boxed`], [`Builder::bytes`], [`Builder::extern_path`],
//! [`Builder::compile_well_known_types`], [`Builder::include_file`]). The `Builder` doc says
//! why there is no `emit_package`.
//!
//! ```no_run
//! fn main() -> std::io::Result<()> {
//!     protorb_codegen::configure()
//!         .build_client(false)
//!         .generate_default_stubs(true)
//!         .type_attribute(".demo.Msg", "#[derive(Eq, Hash)]")
//!         .btree_map(["."])
//!         .compile_protos(&["proto/echo.proto"], &["proto"])
//! }
//! ```
//!
//! Errors name .proto files by a path the user can open from the crate (relative to the
//! current directory, which is the crate root in a build script, else absolute):
//! `proto/echo.proto:6:3: ...`.
//!
//! Streaming methods are an error (CORBA operations are request/reply) unless
//! [`Builder::skip_streaming`] is set.
#![warn(missing_docs)]

mod builder;
mod gen;
mod service_generator;

pub use builder::{compile_protos, configure, Builder, Report};
pub use gen::{
    generate_service, generate_service_with, service_tokens, service_tokens_with, GenOptions,
};
pub use protorb_idl as idl;
pub use service_generator::Generator;
