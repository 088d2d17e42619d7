//! Asynchronous method invocation (AMI) as futures: [`ReplyFuture`], the reply of a two-way
//! call that the caller awaits instead of blocking for.
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
//!   added) is encoded once and sent again with a forwarded or retried request.
//! - **Collocated objects** (an object active in this same ORB, collocation on) are called
//!   without a socket, as blocking calls are: the servant runs on the calling thread when
//!   the call is made, and the future is ready at once. A servant that defers its answer
//!   does not hold the caller up: the answer completes the future (`Route::Local`), and the
//!   deadline is an ORB timer as for a remote call (then the request is marked cancelled).
//! - **Forwards and retries** are followed as in blocking calls (LOCATION_FORWARD, and a
//!   request the peer closed the connection on unprocessed): the request is sent again from
//!   the poll that sees the reply, which may connect to the new endpoint there.

use crate::cdr::CdrWriter;
use crate::client::invoke::{forward_target, octets_reply, Params, Sent, MAX_HOPS};
use crate::exception::{minor, CompletionStatus, Exception, SystemException, SystemExceptionKind};
use crate::giop::{ReplyStatus, ServiceContext};
use crate::interceptor::{ClientRequest, Outcome};
use crate::ior::IiopProfile;
use crate::ior::ObjectRef;
use crate::lf::{Completion, TaskSlot, Waiter};
use crate::metadata::Metadata;
use crate::orb::CallDeadline;
use crate::orb::{Orb, OrbInner};
use crate::timers::DeadlineKey;
use crate::upcall::inherited_deadline;
use crate::upcall::{LocalAnswer, LocalDeferred};
use bytes::Bytes;
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
    state: State,
    /// The call as its interceptors' after hooks see it (only with client interceptors:
    /// boxed, so that a future without them stays small and costs no allocation).
    hooks: Option<Box<AfterHooks>>,
}

/// What running the after hooks of an asynchronous call takes.
#[derive(Debug)]
struct AfterHooks {
    orb: Orb,
    target: Arc<ObjectRef>,
    operation: Box<str>,
    metadata: Metadata,
    /// The reply's metadata, once a reply came (decoded only for the hooks).
    reply_metadata: Metadata,
}

#[derive(Debug)]
enum State {
    /// Resolved (or failed before anything was sent); `None` once taken.
    Ready(Option<Result<Bytes, Exception>>),
    /// On the wire, waiting for the reply (boxed: the future stays small to move around).
    Waiting(Box<InFlight>),
}

/// What a call sends, kept to send it again after a LOCATION_FORWARD or a CloseConnection.
#[derive(Debug)]
struct Call {
    target: Arc<ObjectRef>,
    operation: Box<str>,
    body: Bytes,
    deadline: Instant,
    hops: usize,
    /// The metadata contexts the request carries (`None`: none).
    metadata: Option<Arc<[ServiceContext]>>,
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
    slot: Arc<TaskSlot>,
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
        target: &Arc<ObjectRef>,
        operation: &str,
        body: Bytes,
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
        let mut deadline = Instant::now() + timeout.unwrap_or(inner.config.call_timeout);
        if let Some(inherited) = inherited_deadline() {
            deadline = deadline.min(inherited);
        }
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
                reply_metadata: Metadata::new(),
            }));
        }
        let call = Call {
            target: target.clone(),
            operation: operation.into(),
            body,
            deadline,
            hops: 0,
            metadata,
        };
        ReplyFuture {
            state: InFlight::send(orb, call),
            hooks,
        }
    }

    fn failed(e: impl Into<Exception>) -> Self {
        ReplyFuture {
            state: State::Ready(Some(Err(e.into()))),
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
    ) -> Result<(Sent, Arc<TaskSlot>, DeadlineKey), SystemException> {
        self.check_running()?;
        let slot = Arc::new(TaskSlot::new());
        let octets = &call.body;
        let write = |w: &mut CdrWriter<'_>| w.write_octets(octets);
        let params = Params {
            write: &write,
            split: Some(octets),
            hint: 0,
            metadata: call.metadata.as_deref().unwrap_or(&[]),
        };
        let sent = self.send_request(
            &call.target,
            &call.operation,
            params,
            call.deadline,
            Some(Waiter::Task(slot.clone())),
        )?;
        let entry = CallDeadline::Remote(sent.conn.clone(), sent.request_id, sent.version);
        let timer = self.set_call_timer(call.deadline, entry);
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
        let slot = Arc::new(TaskSlot::new());
        let octets = &call.body;
        let write = |w: &mut CdrWriter<'_>| w.write_octets(octets);
        let params = Params {
            write: &write,
            split: Some(octets),
            hint: 0,
            metadata: call.metadata.as_deref().unwrap_or(&[]),
        };
        let answer = self.call_local_with(
            profile,
            &call.operation,
            true,
            params,
            call.deadline,
            Some(&slot),
        );
        let completion = match answer {
            Ok(LocalAnswer::Now(reply)) => Ok(reply),
            Err(e) => Err(e),
            Ok(LocalAnswer::Later(d)) => {
                let deferred = Arc::new(d);
                let entry =
                    CallDeadline::Local(slot.clone(), deferred.clone(), call.operation.clone());
                let timer = self.set_call_timer(call.deadline, entry);
                return State::Waiting(Box::new(InFlight {
                    orb: orb.clone(),
                    call,
                    route: Route::Local(deferred),
                    slot,
                    timer,
                    finished: false,
                }));
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
                    call.target = Arc::new(t);
                }
                InFlight::send(orb, call)
            }
        }
    }
}

impl InFlight {
    /// Sends `call` (again); the state of a future waiting for its reply, or of one failed.
    fn send(orb: &Orb, call: Call) -> State {
        if let Some(profile) = call.target.primary().filter(|p| orb.inner.is_collocated(p)) {
            let profile = profile.clone();
            return orb.inner.call_local_async(orb, call, &profile);
        }
        match orb.inner.send_async(&call) {
            Ok((sent, slot, timer)) => State::Waiting(Box::new(InFlight {
                orb: orb.clone(),
                call,
                route: Route::Remote(sent),
                slot,
                timer,
                finished: false,
            })),
            Err(e) => State::Ready(Some(Err(e.into()))),
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
                Err(e) => Next::Done(Err(e.into())),
            }
        }
        Some(Ok(Some(reply))) => Next::Done(octets_reply(reply)),
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
        Some(Err(e)) => Next::Done(Err(e.into())),
        Some(Ok(None)) => Next::Done(Err(
            SystemException::internal("completed without a reply").into()
        )),
        None => Next::Done(Err(SystemException::internal(
            "reply slot empty after completion",
        )
        .into())),
    }
}

/// What a completed call leads to.
enum Next {
    Done(Result<Bytes, Exception>),
    /// Send the call again (to this target, if forwarded).
    Again(Option<ObjectRef>),
}

impl Future for ReplyFuture {
    type Output = Result<Bytes, Exception>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let Poll::Ready(result) = this.poll_reply(cx) else {
            return Poll::Pending;
        };
        if let Some(h) = this.hooks.take() {
            let request = ClientRequest {
                operation: &h.operation,
                target: &h.target,
                twoway: true,
                metadata: h.metadata,
                reply_metadata: h.reply_metadata,
            };
            let outcome = match &result {
                Ok(_) => Outcome::Ok,
                Err(Exception::User(_)) => Outcome::UserException,
                Err(Exception::System(e)) => Outcome::SystemException(e),
            };
            for i in h.orb.inner.config.interceptors.client.iter().rev() {
                i.receive_reply(&request, outcome);
            }
        }
        Poll::Ready(result)
    }
}

impl ReplyFuture {
    /// [`poll`](Future::poll) without the interceptors' after hooks.
    fn poll_reply(&mut self, cx: &mut Context<'_>) -> Poll<Result<Bytes, Exception>> {
        let this = self;
        loop {
            let f = match &mut this.state {
                State::Ready(r) => {
                    return Poll::Ready(r.take().unwrap_or_else(|| {
                        Err(SystemException::new(
                            SystemExceptionKind::BAD_INV_ORDER,
                            0,
                            CompletionStatus::No,
                        )
                        .with_detail("reply future polled after it resolved")
                        .into())
                    }))
                }
                State::Waiting(f) => f,
            };
            let completion = match f.slot.poll(cx) {
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
                        this.state = State::Ready(None);
                        return Poll::Ready(Err(e.into()));
                    }
                    return Poll::Pending;
                }
            };
            f.finished = true;
            f.orb.inner.call_deadlines.remove(f.timer);
            if let (Some(h), Some(Ok(Some(reply)))) = (this.hooks.as_mut(), &completion) {
                // For the after hooks (decoded only when there are some).
                h.reply_metadata = super::intercept::reply_metadata(reply);
            }
            let next = next_step(completion, &f.call);
            match next {
                Next::Done(r) => {
                    this.state = State::Ready(None);
                    return Poll::Ready(r);
                }
                Next::Again(forwarded) => {
                    let (orb, mut call) = (f.orb.clone(), f.take_call());
                    call.hops += 1;
                    if let Some(t) = forwarded {
                        call.target = Arc::new(t);
                    }
                    // The finished one is dropped here, doing nothing.
                    this.state = InFlight::send(&orb, call);
                }
            }
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
