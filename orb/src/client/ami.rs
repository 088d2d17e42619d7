//! Asynchronous method invocation (AMI) as futures: [`ReplyFuture`], the reply of a two-way
//! call that the caller awaits instead of blocking for; [`CdrReplyFuture`] and
//! [`BoolReplyFuture`], the same call with its reply decoded otherwise (a plain CORBA
//! operation's [`CdrReply`], the answer to `_is_a` or `_non_existent`), all three on one
//! machinery (`AsyncCall`); and [`OnewayFuture`], ready at once (see below).
//!
//! The way of an asynchronous call, and how it differs from a blocking one:
//! - **Sent at once.** The request is written when the call is made
//!   ([`ObjectProxy::invoke_async`](crate::ObjectProxy::invoke_async)), not at the future's
//!   first poll, so a caller can start many calls and then await them. What may block the
//!   calling thread is what comes before the write, as in a blocking call and bounded by
//!   the same deadline: opening the connection if none is open to the target's endpoint,
//!   and waiting for room in its outgoing queue if the peer does not read. The thread takes
//!   part in the event loop meanwhile (as a bound Leader/Followers participant), so this
//!   cannot deadlock; on an async executor it holds up that executor thread for as long.
//!   One exception, which only batches: a request made by a task that a `protorb::tokio`
//!   driver's turn has just woken queues behind the writes that driver keeps for those
//!   tasks, and goes out with their requests in one `writev` at the driver's next poll
//!   (`Connection::keep_hold`; `make_room` ends that wait if the queue is
//!   over its bound).
//! - **Its waiter is a task, not a thread.** The connection's `Mux` holds a
//!   [`Waiter::Task`] for the request id: the leader that reads the reply stores it in the
//!   task's slot and calls its [`Waker`](std::task::Waker). Nobody waits in the pool for it,
//!   so some thread must lead the event loop: the ORB's pool threads do (an idle pool always
//!   has a leader, or an armed standby that the first event wakes). An ORB built with
//!   `threads(0)` has none: its application must then drive the event loop from its own
//!   runtime ([`Orb::turn`] when [`Orb::event_fd`] is readable: `protorb::tokio::drive`), or
//!   run [`Orb::run`] on a thread of its own, or the reply is only read while some blocking
//!   call of the same ORB is waiting.
//! - **Its deadline is a timer.** The leader's poll covers the nearest deadline of the
//!   asynchronous calls in flight (`timers::Deadlines`); when one passes, the leader takes
//!   its waiter out of the `Mux`, sends CancelRequest and completes the future with TIMEOUT.
//! - **Dropping cancels.** A future dropped before its reply takes its waiter out of the
//!   `Mux` and sends CancelRequest; the reply, if it still comes, is dropped and counted
//!   ([`OrbStats::late_replies_dropped`](crate::OrbStats::late_replies_dropped)).
//! - **Interceptors and metadata.** The client interceptors' before hooks run when the call
//!   is made, on the calling thread (one that fails it resolves the future at once, nothing
//!   sent); their after hooks run in the poll that resolves the future. A future dropped
//!   before it resolves runs no after hook. The metadata (the proxy's and what the hooks
//!   added) is encoded once and sent again with a forwarded or retried request. The after
//!   hooks see the final reply's metadata however it came: over a connection, or from a
//!   collocated servant, at once or deferred.
//! - **Oneways** ([`OnewayFuture`]) wait for the same things before the write as a two-way
//!   request does, on the calling thread, and then for nothing: a oneway has no reply, so
//!   the future is ready when returned, with the result of handing the request over.
//! - **Collocated objects** (an object active in this same ORB, collocation on) are called
//!   without a socket, as blocking calls are: the servant runs on the calling thread when
//!   the call is made, and the future is ready at once. A servant that defers its answer
//!   does not hold the caller up: the answer completes the future (`Route::Local`), and the
//!   deadline is an ORB timer as for a remote call (then the request is marked cancelled).
//! - **Forwards and retries** are followed as in blocking calls (LOCATION_FORWARD, and a
//!   request the peer closed the connection on unprocessed): the request is sent again from
//!   the poll that sees the reply, which may connect to the new endpoint there.

use crate::cdr::{ByteOrder, CdrReply, CdrWriter};
use crate::client::invoke::{
    bool_reply, forward_target, octets_reply, Params, Reading, Sent, MAX_HOPS,
};
use crate::exception::{minor, CompletionStatus, Exception, SystemException, SystemExceptionKind};
use crate::giop::{Reply, ReplyStatus, ServiceContext};
use crate::interceptor::{ClientRequest, Outcome};
use crate::ior::IiopProfile;
use crate::ior::ObjectRef;
use crate::lf::{Completion, TaskSlot, Waiter};
use crate::metadata::Metadata;
use crate::octets::OctetParts;
use crate::orb::CallDeadline;
use crate::orb::{Orb, OrbInner};
use crate::timers::DeadlineKey;
use crate::upcall::{LocalAnswer, LocalDeferred};
use bytes::{Bytes, BytesMut};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// The reply of a two-way call made with
/// [`ObjectProxy::invoke_async`](crate::ObjectProxy::invoke_async): a future of the reply's
/// body (protobuf bytes), or the exception the call ended with.
///
/// The request is already on its way when you get this future. It needs no particular
/// runtime (it is woken through [`std::task::Waker`]: tokio, `futures::executor::block_on` or
/// any other executor will do), but it needs a thread leading the ORB's event loop: the
/// ORB's pool threads, or, with `threads(0)`, a thread in [`Orb::run`], or the application's
/// own event loop calling [`Orb::turn`] (with tokio: `protorb::tokio::drive`), which then
/// reads the reply on the thread that awaits it.
///
/// Its [`Waker`](std::task::Waker) is called from the thread leading the ORB's event loop:
/// it should schedule the task (as tokio's and `futures`' executors do), not poll it there
/// and then.
///
/// It resolves with TIMEOUT (completed MAYBE) once its deadline passes without a reply.
/// Dropping it before the reply cancels the call: the ORB sends GIOP CancelRequest and drops
/// the reply if it still comes.
///
/// `Send`, `'static` and `Unpin`.
#[must_use = "the request is sent already; dropping the future cancels it"]
#[derive(Debug)]
pub struct ReplyFuture {
    call: AsyncCall,
}

/// The reply of a two-way call of a plain CORBA operation made with
/// [`ObjectProxy::invoke_cdr_async`](crate::ObjectProxy::invoke_cdr_async): a future of its
/// [`CdrReply`] (results or user exception), or of the system exception the call ended with.
///
/// It behaves as a [`ReplyFuture`] does: the request is already on its way when you get
/// it, a thread leading the ORB's event loop reads the reply, it resolves with TIMEOUT past
/// its deadline, and dropping it before the reply cancels the call.
///
/// `Send`, `'static` and `Unpin`.
#[must_use = "the request is sent already; dropping the future cancels it"]
#[derive(Debug)]
pub struct CdrReplyFuture {
    call: AsyncCall,
}

/// The answer to [`ObjectProxy::is_a_async`](crate::ObjectProxy::is_a_async) or
/// [`ObjectProxy::non_existent_async`](crate::ObjectProxy::non_existent_async): a future of
/// the object's boolean answer, or of the system exception the call ended with.
///
/// It behaves as a [`ReplyFuture`] does (sent already, TIMEOUT past its deadline, dropping
/// it cancels the call). `Send`, `'static` and `Unpin`.
#[must_use = "the request is sent already; dropping the future cancels it"]
#[derive(Debug)]
pub struct BoolReplyFuture {
    call: AsyncCall,
    /// `_non_existent`: OBJECT_NOT_EXIST is the answer true, as for the blocking call.
    not_exist_is_true: bool,
}

/// The result of a oneway call made with
/// [`ObjectProxy::invoke_oneway_async`](crate::ObjectProxy::invoke_oneway_async): a future
/// that is ready at once, with what handing the request to the connection came to.
///
/// Everything a oneway waits for (connecting, room in the outgoing queue, or, for a
/// collocated object, its servant running) happened on the calling thread before the future
/// was returned, as it does for a [`ReplyFuture`]'s request; a oneway has no reply, so there
/// is nothing left to wait for. `Send`, `'static` and `Unpin`.
#[must_use = "the request is sent already; the future only holds the result of sending it"]
#[derive(Debug)]
pub struct OnewayFuture {
    result: Option<Result<(), SystemException>>,
}

impl OnewayFuture {
    pub(crate) fn ready(result: Result<(), SystemException>) -> Self {
        OnewayFuture {
            result: Some(result),
        }
    }
}

impl Future for OnewayFuture {
    type Output = Result<(), SystemException>;

    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Self::Output> {
        Poll::Ready(
            self.get_mut().result.take().unwrap_or_else(|| {
                Err(polled_after_ready("oneway future polled after it resolved"))
            }),
        )
    }
}

/// BAD_INV_ORDER for a future polled again after it resolved.
fn polled_after_ready(detail: &str) -> SystemException {
    SystemException::new(SystemExceptionKind::BAD_INV_ORDER, 0, CompletionStatus::No)
        .with_detail(detail.to_string())
}

/// An asynchronous two-way call, whatever its parameters and however its reply is decoded:
/// the machinery the public futures share. It resolves with the final reply (forwards
/// followed), whose status the public future turns into its result.
#[derive(Debug)]
struct AsyncCall {
    state: State,
    /// The call as its interceptors' after hooks see it (only with client interceptors:
    /// boxed, so that a future without them stays small and costs no allocation).
    hooks: Option<Box<AfterHooks>>,
}

/// What an asynchronous call sends as its parameters, kept to send them again after a
/// LOCATION_FORWARD or a CloseConnection.
#[derive(Clone, Debug)]
pub(crate) enum CallBody {
    /// One octet sequence (protobuf bytes) under `octets::SPLIT_BODY_AT`, written into the frame.
    Octets(Bytes),
    /// One large octet sequence in parts (a message whose large `bytes` field is referenced,
    /// not copied: `octets.rs`), sent from where they lie.
    Parts(Box<OctetParts>),
    /// The CDR-encoded parameters of a plain CORBA operation, in native byte order, once for
    /// each alignment the body may start at: index `i` holds them written from logical
    /// position `i` (mod 8). A GIOP 1.2 body (and a collocated call's) starts aligned to 8;
    /// a GIOP 1.0 or 1.1 body follows its header directly, at any position.
    Cdr(Arc<[Bytes; 8]>),
}

impl CallBody {
    /// The CDR parameters `write` writes, encoded for each alignment (see [`CallBody::Cdr`]).
    pub(crate) fn cdr(write: &dyn Fn(&mut CdrWriter<'_>)) -> Self {
        let at = |residue: usize| {
            let mut buf = BytesMut::zeroed(residue);
            write(&mut CdrWriter::with_origin(&mut buf, ByteOrder::NATIVE, 0));
            buf.split_off(residue).freeze()
        };
        let aligned = at(0);
        if aligned.is_empty() {
            // No parameters: nothing depends on alignment.
            return CallBody::Cdr(Arc::new(std::array::from_fn(|_| Bytes::new())));
        }
        CallBody::Cdr(Arc::new(std::array::from_fn(|i| match i {
            0 => aligned.clone(),
            i => at(i),
        })))
    }

    /// The body's length as written at an aligned start.
    fn len(&self) -> usize {
        match self {
            CallBody::Octets(b) => b.len(),
            CallBody::Parts(p) => crate::octets::len(p),
            CallBody::Cdr(v) => v[0].len(),
        }
    }

    /// Runs `f` with the call's parameters as [`Params`] carrying `metadata`.
    fn with_params<R>(&self, metadata: &[ServiceContext], f: impl FnOnce(Params<'_>) -> R) -> R {
        match self {
            CallBody::Parts(parts) => {
                let write = |w: &mut CdrWriter<'_>| crate::octets::write_parts(w, parts);
                f(Params {
                    write: &write,
                    split: Some(parts),
                    hint: 0,
                    metadata,
                })
            }
            CallBody::Octets(octets) => {
                let write = |w: &mut CdrWriter<'_>| w.write_octets(octets);
                f(Params {
                    write: &write,
                    split: None,
                    hint: octets.len() + 8,
                    metadata,
                })
            }
            CallBody::Cdr(encoded) => {
                let write = |w: &mut CdrWriter<'_>| w.write_raw(&encoded[w.position() % 8]);
                f(Params {
                    write: &write,
                    split: None,
                    hint: encoded[0].len() + 8,
                    metadata,
                })
            }
        }
    }
}

/// What running the after hooks of an asynchronous call takes.
#[derive(Debug)]
struct AfterHooks {
    orb: Orb,
    target: ObjectRef,
    operation: Box<str>,
    metadata: Metadata,
}

#[derive(Debug)]
enum State {
    /// Resolved (or failed before anything was sent): the final reply (no forward), or
    /// what the call failed with; `None` once taken.
    Ready(Option<Result<Reply, SystemException>>),
    /// On the wire, waiting for the reply (boxed: the future stays small to move around),
    /// and the slot the reply comes in (apart, to go back as the thread's spare once the
    /// call is done: `TaskSlot::recycle`).
    Waiting(Box<InFlight>, Arc<TaskSlot>),
}

/// What a call sends, kept to send it again after a LOCATION_FORWARD or a CloseConnection.
#[derive(Debug)]
struct Call {
    target: ObjectRef,
    operation: OpName,
    body: CallBody,
    deadline: Instant,
    hops: usize,
    /// The metadata contexts the request carries (`None`: none).
    metadata: Option<Arc<[ServiceContext]>>,
}

/// A call's operation name, kept to send it again: the process's static copy when
/// `op_name` keeps it (the names of generated stubs, a few per service), else one of its
/// own. An allocation, its copy and its free fewer per call (callgrind, PROFILE.md).
#[derive(Clone, Debug)]
enum OpName {
    Kept(&'static str),
    Owned(Box<str>),
}

impl OpName {
    fn new(operation: &str) -> Self {
        match crate::giop::op_name::kept(operation.as_bytes()) {
            Some(kept) => OpName::Kept(kept),
            None => OpName::Owned(operation.into()),
        }
    }
}

impl std::ops::Deref for OpName {
    type Target = str;

    fn deref(&self) -> &str {
        match self {
            OpName::Kept(s) => s,
            OpName::Owned(s) => s,
        }
    }
}

impl std::fmt::Display for OpName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self)
    }
}

/// A request on the wire with a task waiting for its reply.
///
/// Invariant: while `finished` is false, the request's waiter may still be in the
/// connection's `Mux` and its deadline in the ORB's timers; `finished` is set once the slot
/// has been completed (then neither holds it any more: whoever completed it took it out) or
/// this call gave up itself (then it took both out).
#[derive(Debug)]
struct InFlight {
    orb: Orb,
    call: Call,
    route: Route,
    timer: DeadlineKey,
    finished: bool,
}

/// Where an in-flight call went.
#[derive(Debug)]
enum Route {
    /// Over a connection.
    Remote(Sent),
    /// To a collocated servant that deferred its answer.
    Local(Arc<LocalDeferred>),
}

impl ReplyFuture {
    /// Sends `body` as the one octet-sequence parameter of `operation` to `target` and
    /// returns the future of its reply (see [`ObjectProxy::invoke_async`]).
    ///
    /// [`ObjectProxy::invoke_async`]: crate::ObjectProxy::invoke_async
    pub(crate) fn start(
        orb: &Orb,
        target: &ObjectRef,
        operation: &str,
        body: Bytes,
        timeout: Option<Duration>,
        md: &[ServiceContext],
    ) -> Self {
        // A large one from its own buffer, as `call_octets` sends it.
        let body = if crate::octets::is_large(body.len()) {
            CallBody::Parts(Box::new(crate::octets::one_part(body)))
        } else {
            CallBody::Octets(body)
        };
        ReplyFuture {
            call: AsyncCall::start(orb, target, operation, body, timeout, md),
        }
    }

    /// [`start`](Self::start) for a large octet sequence in parts.
    pub(crate) fn start_parts(
        orb: &Orb,
        target: &ObjectRef,
        operation: &str,
        parts: OctetParts,
        timeout: Option<Duration>,
        md: &[ServiceContext],
    ) -> Self {
        let body = CallBody::Parts(Box::new(parts));
        ReplyFuture {
            call: AsyncCall::start(orb, target, operation, body, timeout, md),
        }
    }
}

impl CdrReplyFuture {
    /// Sends `body` (CDR parameters) for `operation` to `target` and returns the future of
    /// its reply (see [`ObjectProxy::invoke_cdr_async`](crate::ObjectProxy::invoke_cdr_async)).
    pub(crate) fn start(
        orb: &Orb,
        target: &ObjectRef,
        operation: &str,
        body: CallBody,
        timeout: Option<Duration>,
        md: &[ServiceContext],
    ) -> Self {
        CdrReplyFuture {
            call: AsyncCall::start(orb, target, operation, body, timeout, md),
        }
    }
}

impl BoolReplyFuture {
    /// Sends `_is_a(repository_id)` to `target` (as [`Orb::is_a`] does) and returns the
    /// future of its answer.
    pub(crate) fn is_a(orb: &Orb, target: &ObjectRef, repository_id: &str) -> Self {
        let body = CallBody::cdr(&|w| w.write_string(repository_id));
        BoolReplyFuture {
            call: AsyncCall::start(orb, target, "_is_a", body, None, &[]),
            not_exist_is_true: false,
        }
    }

    /// Sends `_non_existent` to `target` (as [`Orb::non_existent`] does) and returns the
    /// future of its answer.
    pub(crate) fn non_existent(orb: &Orb, target: &ObjectRef) -> Self {
        let body = CallBody::cdr(&|_| {});
        BoolReplyFuture {
            call: AsyncCall::start(orb, target, "_non_existent", body, None, &[]),
            not_exist_is_true: true,
        }
    }
}

impl AsyncCall {
    /// Sends `body` as the parameters of `operation` to `target`: the call, waiting for its
    /// reply.
    fn start(
        orb: &Orb,
        target: &ObjectRef,
        operation: &str,
        body: CallBody,
        timeout: Option<Duration>,
        md: &[ServiceContext],
    ) -> Self {
        let inner = &orb.inner;
        let max = inner.config.max_message_size;
        if body.len() > max {
            return Self::failed(SystemException::marshal(
                minor::MESSAGE_TOO_LARGE,
                CompletionStatus::No,
                format!(
                    "request of {} bytes exceeds the maximum message size {max}",
                    body.len()
                ),
            ));
        }
        // One clock reading for the deadline and, on the first send, the DEADLINE
        // context's time left (as a blocking call's `call_hops`).
        let (deadline, first) = Reading::deadline(timeout.unwrap_or(inner.config.call_timeout));
        let chain = &inner.config.interceptors.client;
        let mut metadata = (!md.is_empty()).then(|| Arc::from(md));
        let mut hooks = None;
        if !chain.is_empty() {
            let mut request = ClientRequest {
                operation,
                target,
                twoway: true,
                // The proxy's metadata is ours already: it decodes.
                metadata: Metadata::from_contexts(md).unwrap_or_default(),
                reply_metadata: Metadata::new(),
            };
            for (ran, i) in chain.iter().enumerate() {
                if let Err(e) = i.send_request(&mut request) {
                    tracing::debug!(error = %e, "call failed by a client interceptor; not sent");
                    for i in chain[..ran].iter().rev() {
                        i.receive_reply(&request, Outcome::SystemException(&e));
                    }
                    return Self::failed(e);
                }
            }
            let contexts = request.metadata.to_contexts();
            metadata = (!contexts.is_empty()).then(|| contexts.into());
            hooks = Some(Box::new(AfterHooks {
                orb: orb.clone(),
                target: target.clone(),
                operation: operation.into(),
                metadata: request.metadata,
            }));
        }
        let call = Call {
            target: target.clone(),
            operation: OpName::new(operation),
            body,
            deadline,
            hops: 0,
            metadata,
        };
        AsyncCall {
            state: InFlight::send(orb, call, Some(first)),
            hooks,
        }
    }

    fn failed(e: SystemException) -> Self {
        AsyncCall {
            state: State::Ready(Some(Err(e))),
            hooks: None,
        }
    }
}

impl OrbInner {
    /// Writes `call`'s request with a task slot registered for its reply, and sets its
    /// deadline's timer (waking the leader if it is now the nearest one).
    fn send_async(
        &self,
        call: &Call,
        clock: Option<Reading>,
    ) -> Result<(Sent, Arc<TaskSlot>, DeadlineKey), SystemException> {
        self.check_running()?;
        let slot = TaskSlot::fresh();
        let metadata = call.metadata.as_deref().unwrap_or(&[]);
        let sent = call.body.with_params(metadata, |params| {
            self.send_request(
                &call.target,
                &call.operation,
                params,
                call.deadline,
                clock,
                Some(Waiter::Task(slot.clone())),
            )
        })?;
        let entry = CallDeadline::Remote(sent.conn.clone(), sent.request_id, sent.version);
        let timer = self.set_call_timer(call.deadline, entry);
        // In the timer table now: a caller leaving the role vacant from here on arms the
        // standby; one that left it unarmed before is undone here.
        self.lf.expect_event(self);
        Ok((sent, slot, timer))
    }

    /// Sets an asynchronous call's deadline timer; the reactor's alarm wakes whoever waits
    /// on the timers (a leader polling with a later timeout, the standby, a driver waiting on
    /// the event fd) if it is nearer than what the alarm is armed for.
    fn set_call_timer(&self, deadline: Instant, entry: CallDeadline) -> DeadlineKey {
        let timer = self.call_deadlines.insert(deadline, entry);
        self.reactor.arm_alarm(deadline);
        timer
    }

    /// Calls the collocated object of `profile` for `call` (on this thread): a ready future,
    /// or, if the servant deferred its answer, one waiting for it with a deadline timer.
    fn call_local_async(&self, orb: &Orb, call: Call, profile: &IiopProfile) -> State {
        let slot = TaskSlot::fresh();
        let metadata = call.metadata.as_deref().unwrap_or(&[]);
        let answer = call.body.with_params(metadata, |params| {
            self.call_local_with(
                profile,
                &call.operation,
                true,
                params,
                call.deadline,
                Some(&slot),
            )
        });
        let completion = match answer {
            Ok(LocalAnswer::Now(reply)) => Ok(reply),
            Err(e) => Err(e),
            Ok(LocalAnswer::Later(d)) => {
                let deferred = Arc::new(d);
                let entry = CallDeadline::Local(
                    slot.clone(),
                    deferred.clone(),
                    Box::from(&*call.operation),
                );
                let timer = self.set_call_timer(call.deadline, entry);
                return State::Waiting(
                    Box::new(InFlight {
                        orb: orb.clone(),
                        call,
                        route: Route::Local(deferred),
                        timer,
                        finished: false,
                    }),
                    slot,
                );
            }
        };
        // Answered on this thread: the future is ready (a forward is followed at once, as a
        // remote reply's is).
        let mut call = call;
        match next_step(Some(completion), &call) {
            Next::Done(r) => State::Ready(Some(r)),
            Next::Again(forwarded) => {
                call.hops += 1;
                if let Some(t) = forwarded {
                    call.target = t;
                }
                InFlight::send(orb, call, None)
            }
        }
    }
}

impl InFlight {
    /// Sends `call` (again); the state of a future waiting for its reply, or of one failed.
    /// `clock`: the reading its deadline was made from, on its first send.
    fn send(orb: &Orb, call: Call, clock: Option<Reading>) -> State {
        if let Some(profile) = call.target.primary().filter(|p| orb.inner.is_collocated(p)) {
            let profile = profile.clone();
            return orb.inner.call_local_async(orb, call, &profile);
        }
        match orb.inner.send_async(&call, clock) {
            Ok((sent, slot, timer)) => State::Waiting(
                Box::new(InFlight {
                    orb: orb.clone(),
                    call,
                    route: Route::Remote(sent),
                    timer,
                    finished: false,
                }),
                slot,
            ),
            Err(e) => State::Ready(Some(Err(e))),
        }
    }

    /// Gives up the call (dropped, or past its deadline with the timer not run yet): takes
    /// its waiter out of the `Mux` and cancels the request at the peer. False if the waiter
    /// was gone already (its reply, the timer or the close is completing the slot).
    fn give_up(&mut self) -> bool {
        if self.finished {
            return false;
        }
        self.finished = true;
        let inner = &self.orb.inner;
        inner.call_deadlines.remove(self.timer);
        let sent = match &self.route {
            Route::Remote(sent) => sent,
            Route::Local(deferred) => return deferred.give_up(),
        };
        let (conn, id) = (&sent.conn, sent.request_id);
        if !conn.mux.forget(id) {
            return false;
        }
        inner.send_cancel(conn, sent.version, id);
        true
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if !self.finished {
            let _enter = match &self.route {
                Route::Remote(sent) => Some(sent.span.clone().entered()),
                Route::Local(_) => None,
            };
            if self.give_up() {
                tracing::debug!("asynchronous call dropped before its reply; cancelled");
            }
        }
    }
}

/// What a call's completion leads to: its result, or sending it again (forwarded, or
/// closed unprocessed by the peer).
fn next_step(completion: Option<Completion>, call: &Call) -> Next {
    match completion {
        Some(Ok(Some(reply)))
            if matches!(
                reply.header.status,
                ReplyStatus::LocationForward | ReplyStatus::LocationForwardPerm
            ) && call.hops < MAX_HOPS =>
        {
            match forward_target(&reply.body) {
                Ok(t) => Next::Again(Some(t)),
                Err(e) => Next::Done(Err(e)),
            }
        }
        Some(Ok(Some(reply))) => Next::Done(Ok(reply)),
        Some(Err(e))
            if e.minor == minor::CLOSED_BY_PEER
                && e.completed == CompletionStatus::No
                && call.hops < MAX_HOPS
                && Instant::now() < call.deadline =>
        {
            // CloseConnection: the request was not processed; send it again on a
            // new connection (WIRE-GIOP §2.5), as a blocking call does.
            Next::Again(None)
        }
        Some(Err(e)) => Next::Done(Err(e)),
        Some(Ok(None)) => Next::Done(Err(SystemException::internal("completed without a reply"))),
        None => Next::Done(Err(SystemException::internal(
            "reply slot empty after completion",
        ))),
    }
}

/// What a completed call leads to.
enum Next {
    /// The final reply (no forward to follow), or what the call failed with.
    Done(Result<Reply, SystemException>),
    /// Send the call again (to this target, if forwarded).
    Again(Option<ObjectRef>),
}

impl Future for ReplyFuture {
    type Output = Result<Bytes, Exception>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.get_mut().call.poll_with(
            cx,
            |r| r.map_err(Exception::from).and_then(octets_reply),
            |r| match r {
                Ok(_) => Outcome::Ok,
                Err(Exception::User(_)) => Outcome::UserException,
                Err(Exception::System(e)) => Outcome::SystemException(e),
            },
        )
    }
}

impl Future for CdrReplyFuture {
    type Output = Result<CdrReply, SystemException>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.get_mut().call.poll_with(
            cx,
            |r| r.and_then(Reply::into_cdr_reply),
            |r| match r {
                Ok(CdrReply::NoException(_)) => Outcome::Ok,
                Ok(CdrReply::UserException { .. }) => Outcome::UserException,
                Err(e) => Outcome::SystemException(e),
            },
        )
    }
}

impl Future for BoolReplyFuture {
    type Output = Result<bool, SystemException>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let not_exist_is_true = this.not_exist_is_true;
        // The hooks see OBJECT_NOT_EXIST as the exception it is, as a blocking
        // `non_existent`'s do; only its caller reads it as the answer.
        let answer = this.call.poll_with(
            cx,
            |r| r.and_then(|reply| bool_reply(&reply)),
            |r| match r {
                Ok(_) => Outcome::Ok,
                Err(e) => Outcome::SystemException(e),
            },
        );
        answer.map(|r| match r {
            Err(e) if not_exist_is_true && e.kind == SystemExceptionKind::OBJECT_NOT_EXIST => {
                Ok(true)
            }
            other => other,
        })
    }
}

impl AsyncCall {
    /// Polls for the final reply; once there, decodes it with `decode` and runs the
    /// interceptors' after hooks with the outcome `outcome` reads from the result.
    fn poll_with<T>(
        &mut self,
        cx: &mut Context<'_>,
        decode: impl FnOnce(Result<Reply, SystemException>) -> T,
        outcome: impl FnOnce(&T) -> Outcome<'_>,
    ) -> Poll<T> {
        let Poll::Ready(reply) = self.poll_reply(cx) else {
            return Poll::Pending;
        };
        let Some(h) = self.hooks.take() else {
            return Poll::Ready(decode(reply));
        };
        // Whichever way the reply came (over a connection, from a collocated servant at once
        // or deferred, after forwards): its metadata, decoded only for the hooks.
        let reply_metadata = match &reply {
            Ok(reply) => super::intercept::reply_metadata(reply),
            Err(_) => Metadata::new(),
        };
        let result = decode(reply);
        let request = ClientRequest {
            operation: &h.operation,
            target: &h.target,
            twoway: true,
            metadata: h.metadata,
            reply_metadata,
        };
        let outcome = outcome(&result);
        for i in h.orb.inner.config.interceptors.client.iter().rev() {
            i.receive_reply(&request, outcome);
        }
        Poll::Ready(result)
    }

    /// Polls for the final reply (forwards and resends followed), without the after hooks.
    fn poll_reply(&mut self, cx: &mut Context<'_>) -> Poll<Result<Reply, SystemException>> {
        let this = self;
        loop {
            let (f, slot) = match &mut this.state {
                State::Ready(r) => {
                    return Poll::Ready(r.take().unwrap_or_else(|| {
                        Err(polled_after_ready("reply future polled after it resolved"))
                    }))
                }
                State::Waiting(f, slot) => (f, slot),
            };
            let completion = match slot.poll(cx) {
                Poll::Ready(c) => c,
                Poll::Pending => {
                    // The leader's timer fails it at the deadline; a poll that comes later
                    // and finds it still waiting (the timer is late) fails it itself.
                    if Instant::now() >= f.call.deadline && f.give_up() {
                        let e = SystemException::timeout(match &f.route {
                            Route::Remote(sent) => format!(
                                "no reply to `{}` from {} within the deadline",
                                f.call.operation, sent.conn.peer
                            ),
                            Route::Local(_) => format!(
                                "no deferred reply to collocated `{}` within the deadline",
                                f.call.operation
                            ),
                        });
                        this.finish();
                        return Poll::Ready(Err(e));
                    }
                    return Poll::Pending;
                }
            };
            f.finished = true;
            f.orb.inner.call_deadlines.remove(f.timer);
            let next = next_step(completion, &f.call);
            match next {
                Next::Done(r) => {
                    this.finish();
                    return Poll::Ready(r);
                }
                Next::Again(forwarded) => {
                    let (orb, mut call) = (f.orb.clone(), f.take_call());
                    call.hops += 1;
                    if let Some(t) = forwarded {
                        call.target = t;
                    }
                    // The finished one is dropped here, doing nothing.
                    this.finish();
                    this.state = InFlight::send(&orb, call, None);
                }
            }
        }
    }
}

impl AsyncCall {
    /// Ends the wait (the call finished or gave up): the slot goes back as this thread's
    /// spare if nobody else holds it any more (the usual case: whoever completed it took
    /// the waiter out of the `Mux`), for the next call's (an allocation, its free and an
    /// atomic fewer per call).
    fn finish(&mut self) {
        if let State::Waiting(_, slot) = std::mem::replace(&mut self.state, State::Ready(None)) {
            TaskSlot::recycle(slot);
        }
    }
}

impl InFlight {
    /// The call, out of a finished one (whose drop then does nothing).
    fn take_call(&self) -> Call {
        debug_assert!(self.finished);
        Call {
            target: self.call.target.clone(),
            operation: self.call.operation.clone(),
            body: self.call.body.clone(),
            deadline: self.call.deadline,
            hops: self.call.hops,
            metadata: self.call.metadata.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each alignment's encoding of CDR parameters is what a writer at that position writes:
    /// the padding before an aligned value depends on where the body starts.
    #[test]
    fn cdr_parameters_are_encoded_for_every_start_alignment() {
        let write = |w: &mut CdrWriter<'_>| {
            w.write_octet(1);
            w.write_u64(2);
            w.write_string("x");
        };
        let CallBody::Cdr(encoded) = CallBody::cdr(&write) else {
            panic!("not a CDR body");
        };
        for (residue, bytes) in encoded.iter().enumerate() {
            // The u64 starts at the next multiple of 8 after the octet.
            let pad = (8 - (residue + 1) % 8) % 8;
            assert_eq!(bytes[0], 1, "residue {residue}");
            assert!(
                bytes[1..1 + pad].iter().all(|&b| b == 0),
                "residue {residue}"
            );
            let mut u64_bytes = [0; 8];
            u64_bytes.copy_from_slice(&bytes[1 + pad..9 + pad]);
            let value = match ByteOrder::NATIVE {
                ByteOrder::Big => u64::from_be_bytes(u64_bytes),
                ByteOrder::Little => u64::from_le_bytes(u64_bytes),
            };
            assert_eq!(value, 2, "residue {residue}");
            // Then the string: a 4-aligned length (already aligned), "x" and its nul.
            assert_eq!(bytes.len(), 9 + pad + 4 + 2, "residue {residue}");
        }
        let CallBody::Cdr(empty) = CallBody::cdr(&|_| {}) else {
            panic!("not a CDR body");
        };
        assert!(empty.iter().all(|b| b.is_empty()));
    }

    /// A call keeps its operation name as the process's static copy when `op_name` keeps
    /// it, else as its own; either way it reads back as given.
    #[test]
    fn an_operation_name_reads_back_as_given() {
        let kept = OpName::new("ami_probe_echo");
        assert!(matches!(kept, OpName::Kept(_)), "{kept:?}");
        assert_eq!(&*kept, "ami_probe_echo");
        assert_eq!(kept.to_string(), "ami_probe_echo");
        // Too long to be kept (over `op_name`'s 64 bytes), and empty: their own copies.
        let long = "x".repeat(100);
        for name in [long.as_str(), ""] {
            let own = OpName::new(name);
            assert!(matches!(own, OpName::Owned(_)), "{own:?}");
            assert_eq!(&*own.clone(), name);
        }
    }
}
