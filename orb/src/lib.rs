//! A CORBA-style object request broker: GIOP 1.2 over TCP, protobuf messages, and the hybrid
//! client/server Leader/Followers thread pool.
#![warn(missing_docs)]

pub mod cdr;
mod exception;
pub mod giop;
mod ior;
mod servant;

pub use exception::{
    minor, CompletionStatus, Exception, SystemException, SystemExceptionKind, UserException,
};
pub use ior::{IiopProfile, IorError, ObjectRef, TaggedComponent, TaggedProfile};
pub use servant::{Context, Servant, OBJECT_REPOSITORY_ID};
#[doc(hidden)]
pub mod codegen;
mod orb;
mod proxy;

pub use crate::orb::Orb;
pub use proxy::ObjectProxy;
