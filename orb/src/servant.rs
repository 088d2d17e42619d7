//! The contract between generated skeletons and the ORB: the [`Servant`] trait and the
//! per-upcall [`Context`].

use crate::exception::Exception;
use bytes::Bytes;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// An object implementation the ORB can dispatch requests to.
///
/// Generated skeletons (`EchoSkeleton<T>`) implement this; the ORB handles the standard
/// operations (`_is_a`, `_non_existent`) itself, using [`Servant::is_a`].
pub trait Servant: Send + Sync + 'static {
    /// The most derived repository id, e.g. `IDL:demo/Echo:1.0`.
    fn repository_id(&self) -> &'static str;

    /// Whether the servant implements `repository_id` (its own id, a base, or
    /// `IDL:omg.org/CORBA/Object:1.0`).
    fn is_a(&self, repository_id: &str) -> bool {
        repository_id == self.repository_id() || repository_id == OBJECT_REPOSITORY_ID
    }

    /// Runs operation `operation` with the protobuf-encoded request `body` and returns the
    /// protobuf-encoded result. Undecodable `body` → MARSHAL; unknown `operation` →
    /// BAD_OPERATION. Oneway operations return an empty result (the ORB sends no reply).
    fn dispatch(&self, operation: &str, body: Bytes, ctx: &Context) -> Result<Bytes, Exception>;
}

/// The repository id every object implements.
pub const OBJECT_REPOSITORY_ID: &str = "IDL:omg.org/CORBA/Object:1.0";

/// What a servant knows about the request it is serving.
#[derive(Clone, Debug)]
pub struct Context {
    inner: Arc<ContextInner>,
}

#[derive(Debug)]
struct ContextInner {
    operation: String,
    object_key: Bytes,
    request_id: u32,
    peer: Option<SocketAddr>,
    deadline: Option<Instant>,
    cancelled: AtomicBool,
}

impl Context {
    /// A context for an upcall (built by the ORB; public so skeletons can be tested by calling
    /// `dispatch` directly).
    pub fn new(
        operation: impl Into<String>,
        object_key: Bytes,
        request_id: u32,
        peer: Option<SocketAddr>,
        deadline: Option<Instant>,
    ) -> Self {
        Context {
            inner: Arc::new(ContextInner {
                operation: operation.into(),
                object_key,
                request_id,
                peer,
                deadline,
                cancelled: AtomicBool::new(false),
            }),
        }
    }

    /// A context for tests: operation `op`, no peer, no deadline.
    pub fn for_test(op: &str) -> Self {
        Context::new(op, Bytes::new(), 0, None, None)
    }

    /// The operation name.
    pub fn operation(&self) -> &str {
        &self.inner.operation
    }

    /// The target's object key.
    pub fn object_key(&self) -> &Bytes {
        &self.inner.object_key
    }

    /// The request id on its connection.
    pub fn request_id(&self) -> u32 {
        self.inner.request_id
    }

    /// The peer's address, if the request came over the network.
    pub fn peer(&self) -> Option<SocketAddr> {
        self.inner.peer
    }

    /// The caller's deadline, if it sent one. Nested calls made while serving this request
    /// inherit it.
    pub fn deadline(&self) -> Option<Instant> {
        self.inner.deadline
    }

    /// Whether the caller cancelled the request (CancelRequest, e.g. after its timeout). A long
    /// operation should check this and stop early; its reply will be dropped anyway.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::Acquire)
    }

    /// Marks the request cancelled.
    pub fn cancel(&self) {
        self.inner.cancelled.store(true, Ordering::Release);
    }
}
