//! A CORBA-style object request broker: GIOP 1.2 over TCP, protobuf messages, and the hybrid
//! client/server Leader/Followers thread pool.
#![warn(missing_docs)]

mod adapter;
pub mod cdr;
#[doc(hidden)]
pub mod codegen;
mod connection;
mod driver;
mod exception;
pub mod giop;
mod invoke;
mod ior;
mod lf;
mod orb;
mod proxy;
mod reactor;
mod servant;
mod stats;
mod sync;

pub use crate::orb::{Orb, OrbBuilder};
pub use exception::{
    minor, CompletionStatus, Exception, SystemException, SystemExceptionKind, UserException,
};
pub use ior::{IiopProfile, IorError, ObjectRef, TaggedComponent, TaggedProfile};
pub use proxy::ObjectProxy;
pub use servant::{Context, Servant, OBJECT_REPOSITORY_ID};
pub use stats::OrbStats;
