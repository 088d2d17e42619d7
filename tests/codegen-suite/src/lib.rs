//! The generated code under test: prost's messages and protorb-codegen's servant traits,
//! skeletons and clients for the .proto files in `proto/`, included the documented way.
//!
//! This crate is compiled under `clippy -D warnings` with no `allow` of its own around the
//! generated modules, so the generated code must be warning-free as a user would get it.

/// `package suite.*`.
pub mod suite {
    /// `package suite.common`: shared types and exception messages.
    pub mod common {
        include!(concat!(env!("OUT_DIR"), "/suite.common.rs"));
    }

    /// `package suite.api`: the `Store` and `Listener` services.
    pub mod api {
        include!(concat!(env!("OUT_DIR"), "/suite.api.rs"));
    }

    /// `package suite.hostile`: names that collide with Rust's.
    pub mod hostile {
        include!(concat!(env!("OUT_DIR"), "/suite.hostile.rs"));

        /// `package suite.hostile.inner`.
        pub mod inner {
            include!(concat!(env!("OUT_DIR"), "/suite.hostile.inner.rs"));
        }
    }
}

/// The file without a package.
pub mod plain {
    include!(concat!(env!("OUT_DIR"), "/_.rs"));
}

/// The encoded descriptor set the build script wrote (with the ORB options).
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/suite.fds"));

/// The Builder's options, one compilation each (see `build.rs`).
pub mod extras {
    /// `package extras.attrs`: prost-build's attribute, `btree_map` and `boxed` settings.
    pub mod attrs {
        include!(concat!(env!("OUT_DIR"), "/extras.attrs.rs"));
    }

    /// `package extras.library`: default NO_IMPLEMENT methods, deprecation, shared exception
    /// enums.
    pub mod library {
        include!(concat!(env!("OUT_DIR"), "/extras.library.rs"));
    }

    /// `package extras.split` generated server-only (`build_client(false)`).
    pub mod split_server {
        include!(concat!(env!("OUT_DIR"), "/server_only/extras.split.rs"));
    }

    /// `package extras.split` generated client-only (`build_server(false)`).
    pub mod split_client {
        include!(concat!(env!("OUT_DIR"), "/client_only/extras.split.rs"));
    }

    /// `compile_well_known_types(true)`: the `google.protobuf` types are generated here, and
    /// `extras.clock` names them as `super::super::google::protobuf::*`.
    pub mod wkt {
        /// `package google.protobuf`, generated.
        pub mod google {
            /// The well-known types `extras.clock` uses.
            pub mod protobuf {
                include!(concat!(env!("OUT_DIR"), "/wkt/google.protobuf.rs"));
            }
        }

        /// `package extras.*`.
        pub mod extras {
            /// `package extras.clock`.
            pub mod clock {
                include!(concat!(env!("OUT_DIR"), "/wkt/extras.clock.rs"));
            }
        }
    }
}

/// The generated sources, for tests that check what is (not) in them.
pub mod generated {
    /// `extras.attrs`.
    pub const ATTRS: &str = include_str!(concat!(env!("OUT_DIR"), "/extras.attrs.rs"));
    /// `extras.library`.
    pub const LIBRARY: &str = include_str!(concat!(env!("OUT_DIR"), "/extras.library.rs"));
    /// `extras.split`, server-only.
    pub const SPLIT_SERVER: &str =
        include_str!(concat!(env!("OUT_DIR"), "/server_only/extras.split.rs"));
    /// `extras.split`, client-only.
    pub const SPLIT_CLIENT: &str =
        include_str!(concat!(env!("OUT_DIR"), "/client_only/extras.split.rs"));
}
