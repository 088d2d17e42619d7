//! The .proto front end of the protorb code generator.
//!
//! Loads `.proto` files with [protox](https://docs.rs/protox) (no `protoc` needed) and builds
//! the interface [`Model`]: services (CORBA interfaces) with their repository ids, and methods
//! (operations) with their request and reply types, the Rust paths prost generates for them, and
//! the ORB method options from `orb/options.proto`:
//!
//! ```proto
//! syntax = "proto3";
//! package bank;
//! import "google/protobuf/empty.proto";
//! import "orb/options.proto";   // built in: no include path needed
//!
//! message Transfer { string to = 1; uint64 amount = 2; }
//! message Receipt { string id = 1; }
//! message InsufficientFunds { uint64 missing = 1; }
//!
//! service Account {
//!   rpc Pay(Transfer) returns (Receipt) { option (orb.raises) = "InsufficientFunds"; }
//!   rpc Audit(Transfer) returns (google.protobuf.Empty) { option (orb.oneway) = true; }
//! }
//! ```
//!
//! Here `Account` has repository id `IDL:bank/Account:1.0`, operation `Pay` may raise the user
//! exception `IDL:bank/InsufficientFunds:1.0`, and `Audit` is oneway.
//!
//! The options are read through prost-reflect, because prost's own descriptor types drop
//! unknown extension fields. Checked here, with errors that name file, service and method:
//! a oneway method returns `google.protobuf.Empty` and declares no `raises`; every `raises`
//! entry names a message type; streaming methods are rejected unless
//! [`Options::skip_streaming`] is set, in which case they are left out and listed in
//! [`Model::skipped`]; no two methods of a service map to the same Rust name.
//!
//! The code generator (`protorb-codegen`) consumes only the model, so a [`Service`] can also be
//! built by hand.
#![warn(missing_docs)]

pub mod corba;
mod error;
pub mod ident;
mod load;
mod model;
mod paths;
mod reflect;

pub use error::Error;
pub use load::{
    compile, file_resolver, Compiled, OrbOptionsResolver, SourceFile, OPTIONS_PROTO,
    OPTIONS_PROTO_NAME,
};
pub use model::{
    MessageType, Method, Model, Service, SkippedMethod, UserExceptionType, EMPTY_PROTO_NAME,
};
pub use paths::{repository_id, RustPaths};
pub use prost_reflect::DescriptorPool;
pub use reflect::{ONEWAY_OPTION, RAISES_OPTION};

/// The proto path of the object reference message, `.orb.ObjectRef`.
pub const OBJECT_REF_PROTO_PATH: &str = ".orb.ObjectRef";
/// The Rust type it maps to, `::protorb::ObjectRef`.
pub const OBJECT_REF_RUST_PATH: &str = "::protorb::ObjectRef";

/// How to build the model.
#[derive(Clone, Debug, Default)]
pub struct Options {
    skip_streaming: bool,
    extern_paths: Vec<(String, String)>,
    compile_well_known_types: bool,
}

impl Options {
    /// The defaults: streaming methods are an error; no extern paths beyond the built-in ones.
    pub fn new() -> Self {
        Self::default()
    }

    /// Leave streaming methods out (listed in [`Model::skipped`]) instead of failing.
    #[must_use]
    pub fn skip_streaming(mut self, skip: bool) -> Self {
        self.skip_streaming = skip;
        self
    }

    /// The `google.protobuf` types are generated with the user's code rather than taken from
    /// `prost_types` (`()` for `Empty`, primitives for the wrappers), as prost-build's
    /// `Config::compile_well_known_types`: Rust paths are resolved accordingly.
    #[must_use]
    pub fn compile_well_known_types(mut self, compile: bool) -> Self {
        self.compile_well_known_types = compile;
        self
    }

    /// Whether the well-known types are generated rather than taken from `prost_types`.
    pub fn compiles_well_known_types(&self) -> bool {
        self.compile_well_known_types
    }

    /// Declares that messages under `proto_path` (fully qualified, `.pkg` or `.pkg.Msg`) are
    /// generated elsewhere, at `rust_path`, as prost-build's `Config::extern_path`.
    #[must_use]
    pub fn extern_path(
        mut self,
        proto_path: impl Into<String>,
        rust_path: impl Into<String>,
    ) -> Self {
        self.extern_paths
            .push((proto_path.into(), rust_path.into()));
        self
    }

    /// Whether streaming methods are skipped.
    pub fn skips_streaming(&self) -> bool {
        self.skip_streaming
    }

    /// The user's extern paths, in the order given.
    pub fn extern_paths(&self) -> &[(String, String)] {
        &self.extern_paths
    }
}

#[cfg(test)]
mod tests;
