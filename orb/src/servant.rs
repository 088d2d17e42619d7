//! The contract between generated skeletons and the ORB: the [`Servant`] trait and the
//! per-upcall [`Context`], and deferred replies ([`Context::defer`], [`ReplyHandle`]).

mod deferred;

pub(crate) use deferred::{Deferral, Discard, ReplySink};
pub use deferred::{ReplyHandle, TypedReplyHandle};

use crate::exception::{Exception, SystemException};
use crate::giop::{ByteString, ObjectKey};
use crate::identity::PeerIdentity;
use crate::metadata::Metadata;
use crate::result_slot::ResultSlot;
use crate::sync::plain::Mutex;
use crate::sync::plain_lock as lock;
use bytes::Bytes;
use std::any::Any;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Weak};
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
    ///
    /// A servant that called [`Context::defer`] answers through its [`ReplyHandle`]: what
    /// `dispatch` returns then is ignored (by convention `Ok(Default::default())`), and so is
    /// a panic after the deferral (logged; the handle, dropped in the unwinding or not,
    /// still answers).
    fn dispatch(&self, operation: &str, body: Bytes, ctx: &Context) -> Result<Bytes, Exception>;

    /// [`dispatch`](Self::dispatch) with the result put into `result` instead of returned:
    /// the ORB calls this for every request, and for one from the network its `result`
    /// encodes a small protobuf result ([`ResultSlot::message`]) straight into the reply
    /// frame, where `dispatch`'s bytes would be copied there. Generated skeletons implement both (their
    /// `dispatch` calls this); the default calls `dispatch`, so a servant written by hand,
    /// or one that wraps another servant's `dispatch`, needs only that.
    fn dispatch_into(
        &self,
        operation: &str,
        body: Bytes,
        ctx: &Context,
        result: &mut ResultSlot,
    ) -> Result<(), Exception> {
        result.set_bytes(self.dispatch(operation, body, ctx)?);
        Ok(())
    }
}

/// The repository id every object implements.
pub const OBJECT_REPOSITORY_ID: &str = "IDL:omg.org/CORBA/Object:1.0";

/// What a servant knows about the request it is serving.
#[derive(Clone, Debug)]
pub struct Context {
    inner: Arc<ContextInner>,
}

thread_local! {
    /// This thread's contexts from its last upcalls (one per level of the deepest nesting),
    /// for its next ones.
    static SPARE: crate::spare::Spares<Arc<ContextInner>> = const { crate::spare::Spares::new() };
}

#[derive(Debug)]
struct ContextInner {
    /// Moved from the decoded request: the name a slice of the received frame (no copy), the
    /// key inline when short, else a slice too.
    operation: ByteString,
    object_key: ObjectKey,
    request_id: u32,
    peer: Option<SocketAddr>,
    /// The peer's certificate identity, on a TLS connection whose peer presented one.
    peer_identity: Option<Arc<PeerIdentity>>,
    deadline: Option<Instant>,
    /// The application's service contexts; `None` when none came, the usual case, which
    /// then costs the upcall no more than a null pointer to reset (a `Metadata` by value
    /// cost ~80 instructions per upcall to move, reset and drop, callgrind).
    metadata: Option<Box<Metadata>>,
    /// The metadata the reply will carry ([`Context::reply_metadata_mut`]): `None` until
    /// something is added, so that a reply without any costs one uncontended lock to check.
    /// A lock because the servant, the server interceptors and a [`ReplyHandle`] on another
    /// thread may all add to it through a shared `&Context`.
    reply_metadata: Mutex<Option<Box<Metadata>>>,
    /// Whether [`Context::reply_metadata_mut`] was called for this request: until it is, the
    /// reply takes no lock to find none (a relaxed-cost load instead of a lock and an unlock
    /// per reply).
    reply_metadata_touched: AtomicBool,
    cancelled: AtomicBool,
    /// Whether the request may still be deferred, or was (see [`Context::defer`]): `OPEN`,
    /// `DEFERRED` or `CLOSED`, changed only by a compare-exchange from `OPEN` (and from
    /// `DEFERRED` to `CLOSED` by `close_deferral`). An upcall that did not defer closes it
    /// with that one exchange, no lock.
    defer_state: AtomicU8,
    /// The deferral, once `DEFERRED`. `defer` holds this lock across its exchange and the
    /// write, so whoever sees `DEFERRED` and then takes the lock finds it here.
    deferral: Mutex<Option<Arc<Deferral>>>,
    /// The ORB serving the request (dangling for [`Context::for_test`]). A spare context
    /// keeps it from its last upcall, so that a thread serving one ORB never touches the
    /// reference counts: `for_upcall` only compares pointers.
    orb: Weak<dyn Any + Send + Sync>,
}

impl Context {
    /// A context for an upcall. The ORB builds its own with `for_upcall`; tests of a
    /// skeleton's `dispatch` use [`for_test`](Self::for_test).
    fn new(
        operation: impl Into<String>,
        object_key: ObjectKey,
        request_id: u32,
        peer: Option<SocketAddr>,
        deadline: Option<Instant>,
    ) -> Self {
        let operation = ByteString::from(operation.into());
        Context::fresh(
            operation,
            object_key,
            request_id,
            peer,
            deadline,
            None,
            Weak::<()>::new(),
        )
    }

    fn fresh(
        operation: ByteString,
        object_key: ObjectKey,
        request_id: u32,
        peer: Option<SocketAddr>,
        deadline: Option<Instant>,
        metadata: Option<Box<Metadata>>,
        orb: Weak<dyn Any + Send + Sync>,
    ) -> Self {
        let inner = ContextInner {
            operation,
            object_key,
            request_id,
            peer,
            peer_identity: None,
            deadline,
            metadata,
            reply_metadata: Mutex::new(None),
            reply_metadata_touched: AtomicBool::new(false),
            cancelled: AtomicBool::new(false),
            defer_state: AtomicU8::new(OPEN),
            deferral: Mutex::new(None),
            orb,
        };
        Context {
            inner: Arc::new(inner),
        }
    }

    /// [`new`](Self::new) for the ORB's upcalls: reuses this thread's spare context (see
    /// [`recycle`](Self::recycle)) instead of allocating one per request. `metadata` is
    /// `None` when the request carried none ([`Metadata::boxed_from_contexts`]).
    #[inline]
    pub(crate) fn for_upcall(
        operation: ByteString,
        object_key: ObjectKey,
        request_id: u32,
        (peer, peer_identity): (Option<SocketAddr>, Option<Arc<PeerIdentity>>),
        deadline: Option<Instant>,
        metadata: Option<Box<Metadata>>,
        orb: &Weak<dyn Any + Send + Sync>,
    ) -> Self {
        if let Some(mut inner) = SPARE.with(|s| s.take()) {
            if let Some(i) = Arc::get_mut(&mut inner) {
                i.operation = operation;
                i.object_key = object_key;
                i.request_id = request_id;
                i.peer = peer;
                if peer_identity.is_some() || i.peer_identity.is_some() {
                    i.peer_identity = peer_identity;
                }
                i.deadline = deadline;
                if metadata.is_some() || i.metadata.is_some() {
                    i.metadata = metadata;
                }
                if *i.reply_metadata_touched.get_mut() {
                    *i.reply_metadata_touched.get_mut() = false;
                    *i.reply_metadata.get_mut() = None;
                }
                *i.cancelled.get_mut() = false;
                *i.defer_state.get_mut() = OPEN;
                let deferral = i.deferral.get_mut();
                if deferral.is_some() {
                    *deferral = None;
                }
                if !Weak::ptr_eq(&i.orb, orb) {
                    i.orb = orb.clone();
                }
                return Context { inner };
            }
        }
        let mut ctx = Context::fresh(
            operation,
            object_key,
            request_id,
            peer,
            deadline,
            metadata,
            orb.clone(),
        );
        if let Some(i) = Arc::get_mut(&mut ctx.inner) {
            i.peer_identity = peer_identity;
        }
        ctx
    }

    /// Keeps this context as the thread's spare once its upcall is over, if nothing else
    /// holds it (a servant may keep a clone; then it is simply dropped). The peer's bytes are
    /// let go first: the operation name and a long object key are slices of the received
    /// frame, which a spare would otherwise keep until the thread's next upcall.
    #[inline]
    pub(crate) fn recycle(self) {
        let mut inner = self.inner;
        if let Some(i) = Arc::get_mut(&mut inner) {
            i.object_key = ObjectKey::new();
            i.operation = ByteString::new();
            if i.peer_identity.is_some() {
                i.peer_identity = None;
            }
            if i.metadata.is_some() {
                i.metadata = None;
            }
            if *i.reply_metadata_touched.get_mut() {
                *i.reply_metadata_touched.get_mut() = false;
                *i.reply_metadata.get_mut() = None;
            }
            SPARE.with(|s| s.put(inner));
        }
    }

    /// A context for tests: operation `op`, no peer, no deadline.
    pub fn for_test(op: &str) -> Self {
        Context::new(op, ObjectKey::new(), 0, None, None)
    }

    /// The operation name.
    pub fn operation(&self) -> &str {
        &self.inner.operation
    }

    /// The target's object key.
    pub fn object_key(&self) -> &[u8] {
        &self.inner.object_key
    }

    /// The request id on its connection (0 for a collocated call, which has none).
    pub fn request_id(&self) -> u32 {
        self.inner.request_id
    }

    /// The peer's address, if the request came over the network: `None` for a collocated
    /// call (one this ORB made to its own object without a socket, see
    /// [`OrbBuilder::collocation`](crate::OrbBuilder::collocation)) and for a test context.
    pub fn peer(&self) -> Option<SocketAddr> {
        self.inner.peer
    }

    /// The certificate identity of the peer, if the request came over a TLS connection whose
    /// peer presented a certificate that verified (mutual TLS, see
    /// [`TlsConfig::require_client_cert`](crate::TlsConfig::require_client_cert)). `None` over
    /// plain TCP, for a collocated call and for a test context (unless set with
    /// [`with_peer_identity`](Self::with_peer_identity)).
    pub fn peer_identity(&self) -> Option<&PeerIdentity> {
        self.inner.peer_identity.as_deref()
    }

    /// This context with `identity` as the peer's: for tests of servants and interceptors
    /// that decide on identity. Only on a context nobody else holds (a fresh
    /// [`for_test`](Self::for_test) one); otherwise the context is returned unchanged.
    pub fn with_peer_identity(mut self, identity: PeerIdentity) -> Self {
        if let Some(i) = Arc::get_mut(&mut self.inner) {
            i.peer_identity = Some(Arc::new(identity));
        }
        self
    }

    /// The caller's deadline, if it sent one. Nested calls made while serving this request
    /// inherit it.
    pub fn deadline(&self) -> Option<Instant> {
        self.inner.deadline
    }

    /// The request's metadata: the service contexts the caller attached (through
    /// [`ObjectProxy::with_metadata`](crate::ObjectProxy::with_metadata) or a client
    /// interceptor), without the ORB's own. Empty for a test context.
    pub fn metadata(&self) -> &Metadata {
        static NONE: Metadata = Metadata::EMPTY;
        self.inner.metadata.as_deref().unwrap_or(&NONE)
    }

    /// The metadata the reply to this request will carry, to add to: what a servant (or a
    /// [`ServerInterceptor`](crate::ServerInterceptor), in either hook) wants the caller to
    /// see beside the result, as service contexts of the reply. The caller reads them in its
    /// [`ClientInterceptor::receive_reply`](crate::ClientInterceptor::receive_reply), through
    /// [`ClientRequest::reply_metadata`](crate::ClientRequest::reply_metadata).
    ///
    /// Sent with any reply: a result, a user or a system exception (an interceptor's refusal
    /// included), and a deferred one (what is added until the [`ReplyHandle`] answers). Not
    /// for a oneway (no reply). Bounded as request metadata is: a caller drops reply metadata
    /// with more than [`Metadata::MAX_ENTRIES`] entries or pairs.
    ///
    /// The returned guard holds a lock: let it go before calling this again, and before
    /// answering a deferred request through a clone of the context (holding it then, on the
    /// answering thread, deadlocks). Nothing is allocated until something is added.
    ///
    /// ```
    /// let ctx = protorb::Context::for_test("op");
    /// ctx.reply_metadata_mut().insert_str("served-by", "replica-2");
    /// assert_eq!(ctx.reply_metadata_mut().get_str("served-by"), Some("replica-2"));
    /// ```
    pub fn reply_metadata_mut(&self) -> ReplyMetadataMut<'_> {
        self.inner
            .reply_metadata_touched
            .store(true, Ordering::Release);
        ReplyMetadataMut {
            guard: lock(&self.inner.reply_metadata),
        }
    }

    /// Takes the reply's metadata, for the ORB to send (`None`: nothing was added; no
    /// allocation).
    pub(crate) fn take_reply_metadata(&self) -> Option<Box<Metadata>> {
        if !self.inner.reply_metadata_touched.load(Ordering::Acquire) {
            return None;
        }
        lock(&self.inner.reply_metadata).take()
    }

    /// Whether the caller cancelled the request (CancelRequest, e.g. after its timeout), or
    /// its connection closed. A long operation should check this and stop early; its reply
    /// will be dropped anyway. A deferred request's [`ReplyHandle`] sees the same flag.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::Acquire)
    }

    /// The ORB serving the request, type-erased (see [`Context::orb`], in `orb.rs`: this
    /// module sits below the ORB and does not name it).
    pub(crate) fn orb_weak(&self) -> &Weak<dyn Any + Send + Sync> {
        &self.inner.orb
    }

    /// Takes the right to answer this request later, from any thread: the ORB will not reply
    /// when `dispatch` returns, the returned [`ReplyHandle`] does (see its docs for where the
    /// answer goes, and when it is dropped instead). Whatever `dispatch` returns after this
    /// is ignored.
    ///
    /// BAD_INV_ORDER if the request was deferred already, or if `dispatch` has returned (a
    /// clone of the context kept past the upcall cannot defer it). For a oneway request the
    /// handle's answer goes nowhere (there is no reply to send).
    ///
    /// ```
    /// use bytes::Bytes;
    /// use protorb::{Context, Exception, Servant};
    ///
    /// struct Later;
    ///
    /// impl Servant for Later {
    ///     fn repository_id(&self) -> &'static str {
    ///         "IDL:demo/Later:1.0"
    ///     }
    ///     fn dispatch(&self, _op: &str, body: Bytes, ctx: &Context) -> Result<Bytes, Exception> {
    ///         let handle = ctx.defer()?;
    ///         std::thread::spawn(move || handle.reply(body));
    ///         Ok(Bytes::new()) // ignored: the handle answers
    ///     }
    /// }
    /// ```
    pub fn defer(&self) -> Result<ReplyHandle, SystemException> {
        let mut slot = lock(&self.inner.deferral);
        let state = &self.inner.defer_state;
        match state.compare_exchange(OPEN, DEFERRED, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => {
                let d = Arc::new(Deferral::new());
                *slot = Some(d.clone());
                drop(slot);
                Ok(ReplyHandle::new(self.clone(), d))
            }
            Err(DEFERRED) => Err(defer_error("the request was deferred already")),
            Err(_) => Err(defer_error(
                "the request's dispatch has returned; it can no longer be deferred",
            )),
        }
    }

    /// `dispatch` returned: closes the request to [`defer`](Self::defer), and returns its
    /// deferral if the servant deferred it (the ORB then installs the reply's sink).
    pub(crate) fn close_deferral(&self) -> Option<Arc<Deferral>> {
        let state = &self.inner.defer_state;
        match state.compare_exchange(OPEN, CLOSED, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) | Err(CLOSED) => None,
            Err(_) => {
                // DEFERRED: `defer` wrote the deferral before it let go of the lock.
                let d = lock(&self.inner.deferral).take();
                state.store(CLOSED, Ordering::Release);
                d
            }
        }
    }

    /// Whether the servant deferred the request (and `dispatch` has not returned yet).
    pub(crate) fn is_deferred(&self) -> bool {
        self.inner.defer_state.load(Ordering::Acquire) == DEFERRED
    }

    /// Marks the request cancelled: the ORB's, on a CancelRequest or a close, never a
    /// servant's (a servant that could cancel its own request would only hide its reply).
    pub(crate) fn cancel(&self) {
        self.inner.cancelled.store(true, Ordering::Release);
    }
}

/// Write access to the metadata of a request's reply ([`Context::reply_metadata_mut`]):
/// dereferences to [`Metadata`]. Holds the context's lock while alive.
pub struct ReplyMetadataMut<'a> {
    guard: crate::sync::plain::MutexGuard<'a, Option<Box<Metadata>>>,
}

impl std::ops::Deref for ReplyMetadataMut<'_> {
    type Target = Metadata;

    fn deref(&self) -> &Metadata {
        static NONE: Metadata = Metadata::EMPTY;
        self.guard.as_deref().unwrap_or(&NONE)
    }
}

impl std::ops::DerefMut for ReplyMetadataMut<'_> {
    /// Allocates the metadata on first write access.
    fn deref_mut(&mut self) -> &mut Metadata {
        self.guard.get_or_insert_with(Box::default)
    }
}

impl std::fmt::Debug for ReplyMetadataMut<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&**self, f)
    }
}

/// A request's dispatch has not returned: it may be deferred ([`Context::defer`]).
const OPEN: u8 = 0;
/// It was deferred; the ORB installs the reply's sink when dispatch returns.
const DEFERRED: u8 = 1;
/// Its dispatch returned without deferring (or the ORB took the deferral).
const CLOSED: u8 = 2;

fn defer_error(detail: &'static str) -> SystemException {
    SystemException::new(
        crate::exception::SystemExceptionKind::BAD_INV_ORDER,
        0,
        crate::exception::CompletionStatus::No,
    )
    .with_detail(detail)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_orb() -> Weak<dyn Any + Send + Sync> {
        Weak::<()>::new()
    }

    /// The ORB reuses a context after its upcall, but never one a servant still holds: the
    /// clone keeps the values of its own request.
    #[test]
    fn a_kept_context_is_not_reused() {
        let a = Context::for_upcall(
            "first".into(),
            Bytes::from_static(b"k1").into(),
            1,
            (None, None),
            None,
            None,
            &no_orb(),
        );
        let kept = a.clone();
        a.recycle();
        let b = Context::for_upcall(
            "second".into(),
            Bytes::from_static(b"k2").into(),
            2,
            (None, None),
            None,
            None,
            &no_orb(),
        );
        b.cancel();
        assert_eq!(kept.operation(), "first");
        assert_eq!(kept.request_id(), 1);
        assert_eq!(kept.object_key(), b"k1");
        assert!(!kept.is_cancelled());
        let addr = Arc::as_ptr(&b.inner);
        b.recycle();
        let c = Context::for_upcall(
            "third".into(),
            ObjectKey::new(),
            3,
            (None, None),
            None,
            None,
            &no_orb(),
        );
        assert_eq!(
            Arc::as_ptr(&c.inner),
            addr,
            "a context nobody holds was not reused"
        );
        assert_eq!((c.operation(), c.request_id()), ("third", 3));
        assert!(!c.is_cancelled(), "a reused context stays cancelled");
        // The spare keeps neither the request's key nor its operation name (slices of its
        // frame) alive.
        let key = Bytes::from(vec![9u8; 64]);
        let name = Bytes::from(b"fourth".to_vec());
        drop(c);
        let op = ByteString::try_from(name.clone()).expect("UTF-8");
        let d = Context::for_upcall(
            op,
            key.clone().into(),
            4,
            (None, None),
            None,
            None,
            &no_orb(),
        );
        assert_eq!(d.object_key(), &key[..]);
        assert_eq!(d.operation(), "fourth");
        d.recycle();
        assert!(
            key.is_unique(),
            "the spare context keeps the frame's key alive"
        );
        assert!(
            name.is_unique(),
            "the spare context keeps the peer's operation name alive"
        );
    }

    /// Reply metadata belongs to one request: a reused context starts without any, and
    /// nothing is allocated for a request that adds none.
    #[test]
    fn reply_metadata_does_not_outlive_its_request() {
        let upcall = |op: &str| {
            Context::for_upcall(
                op.into(),
                ObjectKey::new(),
                1,
                (None, None),
                None,
                None,
                &no_orb(),
            )
        };
        let a = upcall("a");
        assert!(a.reply_metadata_mut().is_empty());
        assert!(a.take_reply_metadata().is_none(), "reading allocated");
        a.reply_metadata_mut().insert_str("k", "v");
        let addr = Arc::as_ptr(&a.inner);
        a.recycle();
        let b = upcall("b");
        assert_eq!(Arc::as_ptr(&b.inner), addr, "the context was not reused");
        assert!(b.reply_metadata_mut().is_empty(), "reply metadata leaked");
        b.reply_metadata_mut().insert_str("k", "w");
        let md = b.take_reply_metadata().expect("set");
        assert_eq!(md.get_str("k"), Some("w"));
        assert!(b.take_reply_metadata().is_none());
    }

    /// A context names its ORB weakly: a test context has none, and a context kept past
    /// its upcall neither keeps the ORB alive nor hands it out once it is gone.
    #[test]
    fn the_context_names_its_orb_weakly() {
        assert!(Context::for_test("op").orb().is_none());
        let orb = crate::Orb::builder()
            .threads(0)
            .no_listen()
            .build()
            .expect("orb builds");
        let ctx = Context::for_upcall(
            "op".into(),
            ObjectKey::new(),
            1,
            (None, None),
            None,
            None,
            &orb.inner.me_any,
        );
        let got = ctx.orb().expect("the context names its ORB");
        assert!(Arc::ptr_eq(&got.inner, &orb.inner));
        drop(got);
        orb.shutdown();
        drop(orb);
        assert!(ctx.orb().is_none(), "a kept context resurrects its ORB");
    }
}
