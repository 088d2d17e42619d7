//! The generated code under test: prost's messages and orb-codegen's servant traits,
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
