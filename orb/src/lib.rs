//! A CORBA-style object request broker: GIOP 1.2 over TCP, protobuf messages, and the hybrid
//! client/server Leader/Followers thread pool.
//!
//! Users describe services in `.proto` files; `protorb-codegen` (in a `build.rs`) turns each
//! service into a servant trait, a skeleton ([`Servant`]) and a client stub; messages are prost
//! types. On the wire, calls are GIOP 1.2 Requests whose single parameter is a CDR octet
//! sequence holding the protobuf bytes, so CORBA ORBs such as omniORB can call us and be called.
//!
//! # From a .proto file to a call
//!
//! `Cargo.toml`:
//!
//! ```toml
//! [dependencies]
//! protorb = "0.1"
//! prost = "0.14"
//!
//! [build-dependencies]
//! protorb-codegen = "0.1"
//! ```
//!
//! `proto/echo.proto`:
//!
//! ```proto
//! syntax = "proto3";
//! package demo;
//!
//! message Msg { string text = 1; }
//!
//! service Echo { rpc Echo(Msg) returns (Msg); }
//! ```
//!
//! `build.rs`:
//!
//! ```ignore
//! fn main() {
//!     protorb_codegen::compile_protos(&["proto/echo.proto"], &["proto"]).unwrap();
//! }
//! ```
//!
//! `src/main.rs`: implement the generated servant trait, activate it, call it.
//!
//! ```ignore
//! mod demo {
//!     protorb::include_proto!("demo"); // trait Echo, EchoSkeleton, EchoClient, Msg
//! }
//! use demo::{Echo, EchoClient, EchoSkeleton, Msg};
//!
//! struct Upper;
//!
//! impl Echo for Upper {
//!     fn echo(&self, _ctx: &protorb::Context, req: Msg) -> Result<Msg, protorb::Exception> {
//!         Ok(Msg { text: req.text.to_uppercase() })
//!     }
//! }
//!
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let server = protorb::Orb::builder().build()?; // 127.0.0.1, a free port, 2 pool threads
//!     let obj = server.activate("echo", EchoSkeleton::new(Upper));
//!     println!("{}", server.object_to_string(&obj)); // IOR:01000000...
//!
//!     let client = protorb::Orb::builder().threads(0).build()?; // callers drive the event loop
//!     let echo = EchoClient::new(&client, obj);
//!     let reply = echo.echo(Msg { text: "hello".into() })?;
//!     assert_eq!(reply.text, "HELLO");
//!     Ok(())
//! }
//! ```
//!
//! That is the README's tutorial (`examples/src/bin/tutorial.rs`, which CI runs). The
//! [`guide`] explains the threading model; [`guide::coming_from_tonic`] and
//! [`guide::coming_from_omniorb`] map what you know to this crate.
//!
//! # Without generated code
//!
//! A skeleton is a [`Servant`]: it receives the operation name and the request's bytes. The
//! same flow, written by hand:
//!
//! ```
//! use bytes::Bytes;
//! use protorb::{Context, Exception, ObjectProxy, Orb, Servant};
//!
//! struct Upper;
//!
//! impl Servant for Upper {
//!     fn repository_id(&self) -> &'static str {
//!         "IDL:demo/Upper:1.0"
//!     }
//!     fn dispatch(&self, op: &str, body: Bytes, _ctx: &Context) -> Result<Bytes, Exception> {
//!         match op {
//!             "upper" => Ok(Bytes::from(body.to_ascii_uppercase())),
//!             _ => Err(protorb::SystemException::bad_operation(op).into()),
//!         }
//!     }
//! }
//!
//! // A server ORB with one pool thread, listening on 127.0.0.1 (a free port).
//! let server = Orb::builder().threads(1).build()?;
//! let reference = server.activate(&b"upper"[..], Upper);
//! let ior = server.object_to_string(&reference); // "IOR:0100..."
//!
//! // A client ORB with no pool threads: the calling thread drives the event loop.
//! let client = Orb::builder().threads(0).build()?;
//! let target = client.string_to_object(&ior)?;
//! let reply = ObjectProxy::new(&client, target).invoke("upper", Bytes::from("hi"), None)?;
//! assert_eq!(&reply[..], b"HI");
//!
//! client.shutdown();
//! server.shutdown();
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Deferred replies and collocation
//!
//! A servant may answer later, from any thread: [`Context::defer`] hands it a
//! [`ReplyHandle`] (typed for generated code with [`ReplyHandle::typed`]), and what
//! `dispatch` returns is then ignored. A call to an object active in the calling ORB itself
//! skips the socket and runs the servant on the calling thread, with the semantics of a
//! remote call ([`OrbBuilder::collocation`], on by default).
//!
//! # Interceptors and metadata
//!
//! [`Metadata`] is what a caller attaches to its calls ([`ObjectProxy::with_metadata`]) and a
//! servant reads ([`Context::metadata`]): binary entries keyed by service context id and
//! string pairs, carried as GIOP service contexts. Interceptors registered with
//! [`OrbBuilder::client_interceptor`] and [`OrbBuilder::server_interceptor`] run around every
//! call and every upcall ([`ClientInterceptor`] gives the order); [`TraceContext`] propagates
//! a W3C `traceparent` through them. Generated clients attach metadata to one call with
//! `client.with_metadata(md).op(req)`. A reply carries metadata too: what the servant and the
//! server interceptors add with [`Context::reply_metadata_mut`], read by client interceptors
//! as [`ClientRequest::reply_metadata`]. [`AccessControl`] is a server interceptor that lets
//! requests through by the caller's certificate identity ([`AccessRule`]), deny by default.
//!
//! # Stable API and the wire layer
//!
//! The stable API is what this page lists without features: the ORB, references, servants,
//! exceptions, and [`cdr`] to call operations of plain CORBA (IDL) interfaces through
//! [`ObjectProxy::invoke_cdr`]. The GIOP wire layer itself (message framing, the codec,
//! service contexts, the low-level corners of CDR) is public only with the `unstable-wire`
//! feature, for benchmarks, fuzzing and tests that play a hostile peer; it carries no semver
//! promise.
#![warn(missing_docs)]
#![deny(rustdoc::broken_intra_doc_links)]

/// Declares a function `pub` with the `unstable-wire` feature and `pub(crate)` without: the
/// low-level parts of an otherwise stable type (how a GIOP message positions a CDR stream)
/// that only the ORB itself, benchmarks and wire tests call.
macro_rules! wire_pub {
    ($(#[$attr:meta])* fn $($rest:tt)*) => {
        #[cfg(feature = "unstable-wire")]
        $(#[$attr])*
        pub fn $($rest)*
        #[cfg(not(feature = "unstable-wire"))]
        $(#[$attr])*
        pub(crate) fn $($rest)*
    };
}

mod access;
mod adapter;
pub mod cdr;
mod client;
mod clock;
#[doc(hidden)]
pub mod codegen;
mod config;
mod connection;
mod endpoints;
mod exception;
#[cfg(feature = "unstable-wire")]
pub mod giop;
#[cfg(not(feature = "unstable-wire"))]
mod giop;
pub mod guide;
mod identity;
mod interceptor;
mod ior;
mod lf;
mod metadata;
mod octets;
mod orb;
mod outbuf;
mod reactor;
mod result_slot;
mod servant;
mod server;
mod shutdown;
mod spare;
mod stats;
mod stream;
mod sync;
mod timers;
mod tls;
#[cfg(feature = "tokio")]
pub mod tokio;
mod transport;
mod upcall;
mod version;

pub use crate::orb::{Orb, OrbBuilder};
pub use access::{AccessControl, AccessRule};
pub use client::ami::{BoolReplyFuture, CdrReplyFuture, OnewayFuture, ReplyFuture};
pub use client::proxy::ObjectProxy;
pub use exception::{
    minor, CompletionStatus, Exception, SystemException, SystemExceptionKind, UserException,
};
pub use identity::{IdentityError, PeerIdentity};
pub use interceptor::{ClientInterceptor, ClientRequest, Outcome, ServerInterceptor, TraceContext};
pub use ior::{
    IiopProfile, IorError, ObjectRef, SslComponent, TaggedComponent, TaggedProfile,
    TAG_SSL_SEC_TRANS,
};
pub use metadata::Metadata;
pub use result_slot::ResultSlot;
/// The rustls version the TLS types ([`TlsConfig::identity`], [`TlsConfig::roots`]) come from.
pub use rustls;
pub use servant::{
    Context, ReplyHandle, ReplyMetadataMut, Servant, TypedReplyHandle, OBJECT_REPOSITORY_ID,
};
pub use server::turn::Turn;
pub use stats::OrbStats;
pub use tls::TlsConfig;
pub use version::Version;

/// Includes the code generated by `protorb_codegen` for a protobuf package
/// (`protorb::include_proto!("demo")` includes `$OUT_DIR/demo.rs`).
#[macro_export]
macro_rules! include_proto {
    ($package:tt) => {
        include!(concat!(env!("OUT_DIR"), concat!("/", $package, ".rs")));
    };
}
