//! Interceptors: code the application registers with
//! [`OrbBuilder::client_interceptor`](crate::OrbBuilder::client_interceptor) and
//! [`OrbBuilder::server_interceptor`](crate::OrbBuilder::server_interceptor) that runs around
//! every call the ORB makes and every request it serves, and [`TraceContext`], one that
//! propagates a W3C `traceparent`.
//!
//! The order and guarantees are documented on [`ClientInterceptor`] (for both sides).
//!
//! The tables are owned by the ORB's configuration, fixed at build time.

use crate::exception::{minor, CompletionStatus, SystemException, SystemExceptionKind};
use crate::ior::ObjectRef;
use crate::metadata::Metadata;
use crate::servant::Context;
use std::cell::RefCell;
use std::fmt;
use std::sync::Arc;

/// How a call or an upcall ended, as the "after" hooks see it.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum Outcome<'a> {
    /// A normal reply (or, for a oneway, the request was sent or run).
    Ok,
    /// The operation raised a user exception.
    UserException,
    /// A system exception: raised by the servant or the ORB, or by an interceptor.
    SystemException(&'a SystemException),
    /// Server only: the servant deferred its reply ([`Context::defer`]); the hook runs when
    /// `dispatch` returns, before the answer is known.
    Deferred,
}

/// A call on its way out, as client interceptors see it.
#[derive(Debug)]
pub struct ClientRequest<'a> {
    pub(crate) operation: &'a str,
    pub(crate) target: &'a ObjectRef,
    pub(crate) twoway: bool,
    pub(crate) metadata: Metadata,
    /// The metadata the reply carried, set before the after hooks run.
    pub(crate) reply_metadata: Metadata,
}

impl ClientRequest<'_> {
    /// The operation name.
    pub fn operation(&self) -> &str {
        self.operation
    }

    /// The target reference.
    pub fn target(&self) -> &ObjectRef {
        self.target
    }

    /// Whether the call is a oneway (no reply; the after hook sees `Ok` once it was sent).
    pub fn is_oneway(&self) -> bool {
        !self.twoway
    }

    /// The metadata the request will carry (the proxy's, plus what earlier interceptors
    /// added).
    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// The metadata, to add to (in [`ClientInterceptor::send_request`]).
    pub fn metadata_mut(&mut self) -> &mut Metadata {
        &mut self.metadata
    }

    /// The metadata the reply carried (what the servant and the server's interceptors added
    /// with [`Context::reply_metadata_mut`]), for [`ClientInterceptor::receive_reply`], for
    /// blocking and asynchronous calls alike, remote or collocated. Empty before the reply,
    /// for a oneway, and when the call failed without a reply.
    ///
    /// Bounded as request metadata is: a reply with more than [`Metadata::MAX_ENTRIES`]
    /// entries or string pairs, or whose string pairs do not decode, has its metadata
    /// dropped (logged as a warning); the call's result is not affected.
    pub fn reply_metadata(&self) -> &Metadata {
        &self.reply_metadata
    }
}

/// Runs around every call an ORB makes.
///
/// # Order and guarantees (both sides)
///
/// - "Before" hooks ([`ClientInterceptor::send_request`], [`ServerInterceptor::receive_request`])
///   run in registration order; "after" hooks ([`ClientInterceptor::receive_reply`],
///   [`ServerInterceptor::send_reply`]) in reverse order.
/// - A before hook that fails stops the chain: later before hooks do not run, nor does the call
///   (client: nothing is sent) or the servant (server). The after hooks of the interceptors
///   whose before hook succeeded still run, in reverse order, and see the failure; the
///   failing interceptor's own after hook does not (as in CORBA portable interceptors).
/// - Client hooks run once per call (not once per LOCATION_FORWARD hop or resend), on the
///   calling thread; a panic in one reaches the caller. Server hooks run on the thread that
///   runs the upcall; a panic in one is the request's UNKNOWN, like a servant's (a panic in
///   a before hook counts as its refusal; the other after hooks still run).
/// - Collocated calls run both: the client hooks around the call, the server hooks around the
///   servant, as over a connection (the server hooks see [`Context::peer`] `None`).
/// - Asynchronous calls ([`ObjectProxy::invoke_async`](crate::ObjectProxy::invoke_async)):
///   the before hooks run when the call is made, on the calling thread; the after hooks in
///   the poll that resolves the future (on the executor's thread), not at all if the future
///   is dropped before.
/// - Without any interceptor registered the ORB does nothing more per call than check that a
///   list is empty.
pub trait ClientInterceptor: Send + Sync + 'static {
    /// Before the request is sent: may add metadata, or fail the call (nothing is sent; the
    /// caller sees the exception).
    fn send_request(&self, request: &mut ClientRequest<'_>) -> Result<(), SystemException> {
        let _ = request;
        Ok(())
    }

    /// After the reply arrived (or the call failed): sees the outcome, and the reply's
    /// metadata in [`ClientRequest::reply_metadata`].
    fn receive_reply(&self, request: &ClientRequest<'_>, outcome: Outcome<'_>) {
        let _ = (request, outcome);
    }
}

/// Runs around every request an ORB serves (see [`ClientInterceptor`] for the order and
/// guarantees of both sides).
///
/// ```
/// use bytes::Bytes;
/// use protorb::{
///     CompletionStatus, Context, Exception, Metadata, ObjectProxy, Orb, Servant,
///     ServerInterceptor, SystemException, SystemExceptionKind,
/// };
///
/// /// Refuses every request without the right token, before the servant runs.
/// struct Auth;
///
/// impl ServerInterceptor for Auth {
///     fn receive_request(&self, ctx: &Context) -> Result<(), SystemException> {
///         match ctx.metadata().get_str("token") {
///             Some("s3cret") => Ok(()),
///             _ => Err(SystemException::new(
///                 SystemExceptionKind::NO_PERMISSION,
///                 0,
///                 CompletionStatus::No,
///             )),
///         }
///     }
/// }
///
/// struct Hello;
///
/// impl Servant for Hello {
///     fn repository_id(&self) -> &'static str {
///         "IDL:demo/Hello:1.0"
///     }
///     fn dispatch(&self, _op: &str, _body: Bytes, _ctx: &Context) -> Result<Bytes, Exception> {
///         Ok(Bytes::from("hello"))
///     }
/// }
///
/// let server = Orb::builder().threads(1).server_interceptor(Auth).build()?;
/// let obj = server.activate("hello", Hello);
/// let client = Orb::builder().threads(0).no_listen().build()?;
/// let proxy = ObjectProxy::new(&client, obj);
/// let refused = proxy.invoke("hi", Bytes::new(), None).unwrap_err();
/// assert!(matches!(refused, Exception::System(e) if e.kind == SystemExceptionKind::NO_PERMISSION));
/// let mut md = Metadata::new();
/// md.insert_str("token", "s3cret");
/// let reply = proxy.with_metadata(md).invoke("hi", Bytes::new(), None)?;
/// assert_eq!(&reply[..], b"hello");
/// # client.shutdown();
/// # server.shutdown();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait ServerInterceptor: Send + Sync + 'static {
    /// Before the servant runs: reads the request's [`Context`] (operation, object key,
    /// [`peer`](Context::peer), [`metadata`](Context::metadata)); an error is the request's
    /// reply, and the servant does not run (e.g. NO_PERMISSION).
    fn receive_request(&self, ctx: &Context) -> Result<(), SystemException> {
        let _ = ctx;
        Ok(())
    }

    /// After the upcall: sees its outcome, before the reply is sent; may add to the reply's
    /// metadata ([`Context::reply_metadata_mut`]).
    fn send_reply(&self, ctx: &Context, outcome: Outcome<'_>) {
        let _ = (ctx, outcome);
    }
}

/// The interceptors of one ORB, in registration order.
#[derive(Clone, Default)]
pub(crate) struct Interceptors {
    pub(crate) client: Vec<Arc<dyn ClientInterceptor>>,
    pub(crate) server: Vec<Arc<dyn ServerInterceptor>>,
}

impl fmt::Debug for Interceptors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Interceptors")
            .field("client", &self.client.len())
            .field("server", &self.server.len())
            .finish()
    }
}

/// A panic in a server hook: UNKNOWN, as a servant's panic.
pub(crate) fn hook_panicked() -> SystemException {
    SystemException::new(
        SystemExceptionKind::UNKNOWN,
        minor::SERVANT_PANIC,
        CompletionStatus::Maybe,
    )
    .with_detail("server interceptor panicked")
}

/// Propagates a W3C trace context (`traceparent`, <https://www.w3.org/TR/trace-context/>) in
/// the string metadata under the key `"traceparent"`. Register it on both sides:
///
/// ```
/// use protorb::{Orb, TraceContext};
/// let orb = Orb::builder()
///     .client_interceptor(TraceContext)
///     .server_interceptor(TraceContext)
///     .threads(0)
///     .build()?;
/// # orb.shutdown();
/// # Ok::<(), protorb::SystemException>(())
/// ```
///
/// - A call made outside any upcall starts a new trace (a random trace id); one made while
///   serving a request (a nested call) continues the trace of that request. Each call gets
///   a fresh random parent id.
/// - Serving a request, the server takes the caller's trace id (or starts a new trace if
///   none or a malformed one came), makes it the thread's current trace for the upcall
///   ([`TraceContext::current_trace_id`]), and records it as the `trace_id` field of the
///   `upcall` span.
///
/// `tracing` itself has no trace ids; this is the propagation half only, for logs to be
/// correlated across processes (and with peers that speak W3C trace context). The current
/// trace is per thread and per upcall: a call made from another thread (a task answering a
/// deferred request, a thread the servant spawned) starts a new trace.
#[derive(Clone, Copy, Debug, Default)]
pub struct TraceContext;

thread_local! {
    /// The trace ids of the upcalls this thread is serving, innermost last (nested upcalls
    /// on one thread end in the reverse order they began).
    static TRACES: RefCell<Vec<u128>> = const { RefCell::new(Vec::new()) };
}

impl TraceContext {
    /// The metadata key.
    pub const KEY: &'static str = "traceparent";

    /// The trace id (32 lowercase hex digits) of the request this thread is serving, if a
    /// [`TraceContext`] server interceptor took it.
    pub fn current_trace_id() -> Option<String> {
        TRACES.with(|t| t.borrow().last().map(|id| format!("{id:032x}")))
    }

    /// The trace id in a `traceparent` value (version 00: `00-<32 hex>-<16 hex>-<2 hex>`),
    /// if well formed and not all zeros.
    fn parse(value: &str) -> Option<u128> {
        let mut parts = value.split('-');
        let (version, trace, parent, flags) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        let hex = |s: &str, n: usize| {
            s.len() == n
                && s.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        };
        if parts.next().is_some()
            || !hex(version, 2)
            || version == "ff"
            || !hex(trace, 32)
            || !hex(parent, 16)
            || !hex(flags, 2)
        {
            return None;
        }
        u128::from_str_radix(trace, 16).ok().filter(|&t| t != 0)
    }
}

/// A random non-zero 64-bit value (std's per-instance random hasher keys; no dependency).
fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    loop {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(0x5242);
        let v = h.finish();
        if v != 0 {
            return v;
        }
    }
}

fn new_trace_id() -> u128 {
    (u128::from(random_u64()) << 64) | u128::from(random_u64())
}

impl ClientInterceptor for TraceContext {
    fn send_request(&self, request: &mut ClientRequest<'_>) -> Result<(), SystemException> {
        let trace = TRACES
            .with(|t| t.borrow().last().copied())
            .unwrap_or_else(new_trace_id);
        let value = format!("00-{trace:032x}-{:016x}-01", random_u64());
        request.metadata_mut().insert_str(Self::KEY, value);
        Ok(())
    }
}

impl ServerInterceptor for TraceContext {
    fn receive_request(&self, ctx: &Context) -> Result<(), SystemException> {
        let trace = ctx
            .metadata()
            .get_str(Self::KEY)
            .and_then(Self::parse)
            .unwrap_or_else(new_trace_id);
        tracing::Span::current().record(
            "trace_id",
            tracing::field::display(format_args!("{trace:032x}")),
        );
        TRACES.with(|t| t.borrow_mut().push(trace));
        Ok(())
    }

    fn send_reply(&self, _ctx: &Context, _outcome: Outcome<'_>) {
        TRACES.with(|t| t.borrow_mut().pop());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_parsing() {
        let ok = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        assert_eq!(
            TraceContext::parse(ok),
            Some(0x4bf92f3577b34da6a3ce929d0e0e4736)
        );
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
            "00-+bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ] {
            assert_eq!(TraceContext::parse(bad), None, "{bad}");
        }
        assert_ne!(new_trace_id(), new_trace_id());
    }
}
