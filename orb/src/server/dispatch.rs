//! Running a request: the upcall into the servant (on whichever thread the leader or the pool
//! chose), with its stack check, panic catching, cancellation and deadline, and the reply it
//! sends back. The leader (`server/leader.rs`) decides where a request runs; this module runs it.

use crate::connection::{CloseCause, Connection};
use crate::exception::{
    minor, CompletionStatus, Exception, SystemException, SystemExceptionKind, UserException,
};
use crate::giop::{
    encode_system_exception, write_plain_reply_head, write_reply, Body, ErrorText, ReplyHeader,
    ReplyStatus, ServiceContextList, Version,
};
use crate::metadata::Metadata;
use crate::octets::OctetParts;
use crate::orb::OrbInner;
use crate::outbuf;
use crate::result_slot::{Held, InFrame, ResultSlot, BODY_AT};
use crate::servant::{Context, Discard, ReplySink, Servant};
use crate::transport::frame_parts;
use crate::upcall::{Serving, Upcall};
use bytes::{Bytes, BytesMut};
use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Instant;

/// What running a servant answers: its result left in the upcall's [`ResultSlot`] (in a
/// reply frame, in parts, or as bytes), or a reply body of the ORB's own (an exception, a
/// `CORBA::Object` operation's answer). The common reply's path matches `InSlot` and drops
/// nothing (a reply body's drop glue cost ~16 instructions a request, callgrind); anything
/// else takes the result out ([`into_body`](Self::into_body)).
pub(crate) enum Answer {
    InSlot,
    Body(ReplyBody),
}

impl Answer {
    /// The reply body, with a result left in `result` taken out of it.
    pub(crate) fn into_body(self, result: &mut ResultSlot) -> ReplyBody {
        match self {
            Answer::Body(body) => body,
            Answer::InSlot => match result.take() {
                Held::Frame(frame) => ReplyBody::Octets(frame.body()),
                Held::Parts(parts) => ReplyBody::Parts(parts),
                Held::Bytes(bytes) => ReplyBody::Octets(bytes),
                Held::Empty => ReplyBody::Octets(Bytes::new()),
            },
        }
    }
}

/// What a reply carries.
pub(crate) enum ReplyBody {
    Octets(Bytes),
    /// A large result in parts, sent from where they lie (`octets.rs`); boxed, so that
    /// every reply body is not moved at three times its size.
    Parts(Box<OctetParts>),
    Bool(bool),
    User(UserException),
    System(SystemException),
}

impl ReplyBody {
    /// The reply for what a servant's `dispatch` returned.
    pub(crate) fn from_result(r: Result<Bytes, Exception>) -> Self {
        match r {
            Ok(b) => ReplyBody::Octets(b),
            Err(Exception::User(u)) => ReplyBody::User(u),
            Err(Exception::System(s)) => ReplyBody::System(s),
        }
    }
}

/// Where a deferred reply to a request from the network goes: its connection. Holds the
/// ORB and the connection weakly: a handle kept by user code keeps neither alive (nor the
/// connection's socket open).
struct ConnectionSink {
    orb: Weak<dyn Any + Send + Sync>,
    conn: Weak<Connection>,
    version: Version,
    request_id: u32,
}

impl ReplySink for ConnectionSink {
    fn send(self: Box<Self>, answer: Result<Bytes, Exception>, ctx: &Context) {
        let Some(orb) = OrbInner::upgrade(&self.orb) else {
            tracing::debug!("deferred reply dropped: the ORB is gone");
            return;
        };
        orb.finish_deferred(&self.conn, self.version, self.request_id, answer, ctx);
    }
}

/// The upcall's tracing span. Out of line: the macro's field values take stack space
/// whether or not the span is enabled, and nested upcalls stack up `upcall`'s frame.
#[inline(never)]
fn upcall_span(request_id: u32, ctx: &Context, conn: &Connection) -> tracing::Span {
    tracing::debug_span!(
        "upcall",
        request_id,
        operation = ctx.operation(),
        object_key = %String::from_utf8_lossy(ctx.object_key()),
        peer = %conn.peer,
        trace_id = tracing::field::Empty,
    )
}

/// The answer to an upcall refused for want of stack. Out of line, as the panic's below:
/// the nested upcalls stack up `run_guarded`'s frame.
#[cold]
#[inline(never)]
fn stack_low(left: usize, depth: usize) -> ReplyBody {
    tracing::warn!(stack_left = left, depth, "upcall refused: stack low");
    ReplyBody::System(crate::orb::Orb::stack_error(left))
}

/// A servant's panic as the request's UNKNOWN.
#[cold]
#[inline(never)]
fn servant_panicked(panic: Box<dyn Any + Send>, ctx: &Context) -> ReplyBody {
    let what = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".into());
    tracing::error!(operation = ctx.operation(), panic = %what, "servant panicked");
    ReplyBody::System(
        SystemException::new(
            SystemExceptionKind::UNKNOWN,
            minor::SERVANT_PANIC,
            CompletionStatus::Maybe,
        )
        .with_detail(format!("servant panicked: {what}")),
    )
}

/// OBJECT_NOT_EXIST for a request to no active object.
#[cold]
#[inline(never)]
fn no_object(key: &[u8]) -> ReplyBody {
    ReplyBody::System(SystemException::object_not_exist(format!(
        "no object with key `{}`",
        String::from_utf8_lossy(key)
    )))
}

/// MARSHAL for parameters that do not decode.
#[cold]
#[inline(never)]
fn bad_parameters(op: &str, e: crate::cdr::DecodeError) -> ReplyBody {
    ReplyBody::System(SystemException::marshal(
        minor::BAD_PARAMETERS,
        CompletionStatus::No,
        format!("parameters of `{op}` do not decode: {e}"),
    ))
}

/// The answer to a CORBA::Object operation (`_is_a`, `_non_existent`, `_interface`...),
/// or `None` if `op` is not one (the servant's own operation, then).
#[inline(never)]
fn object_operation(op: &str, body: &Body, servant: &dyn Servant) -> Option<ReplyBody> {
    Some(match op {
        "_is_a" => match body.reader().read_string() {
            Ok(id) => ReplyBody::Bool(servant.is_a(&id)),
            Err(e) => bad_parameters(op, e),
        },
        "_non_existent" | "_not_existent" => ReplyBody::Bool(false),
        "_interface" | "_get_interface" | "_implementation" => ReplyBody::System(
            SystemException::new(SystemExceptionKind::NO_IMPLEMENT, 0, CompletionStatus::No),
        ),
        _ => return None,
    })
}

impl OrbInner {
    /// Runs one request on the current thread and sends its reply.
    pub(crate) fn upcall(&self, u: Upcall) {
        // Not taken by the vacancy this upcall left (`clock.rs`): user code runs now.
        crate::clock::forget_left();
        let Upcall {
            conn,
            version,
            request,
            ctx,
            chain,
        } = u;
        let (request_id, twoway) = (
            request.header.request_id,
            request.header.response_expected(),
        );
        let deadline = ctx.deadline();
        let span = upcall_span(request_id, &ctx, &conn);
        let _enter = span.enter();
        let serving = Serving::enter(Some(conn), deadline, chain);
        // The next request read on this thread (a nested one, during the servant, or the
        // next after it) is decoded into the same allocation.
        let params = request.into_body();
        // A two-way request's result is encoded into its reply frame, if it can be.
        let mut result = if twoway {
            ResultSlot::framed()
        } else {
            ResultSlot::for_bytes()
        };
        let answer = self.run_servant(params, &ctx, serving.depth(), &mut result);
        let reply = (version, request_id, twoway);
        self.after_servant(serving, ctx, &mut result, answer, reply, _enter);
    }

    /// The rest of [`upcall`](Self::upcall) once the servant has returned: the reply sent
    /// (or the deferral installed), the request's bookkeeping ended. Out of line, so that
    /// its locals are not in `upcall`'s frame, which each nested upcall stacks up.
    #[inline(never)]
    fn after_servant(
        &self,
        serving: Serving,
        ctx: Context,
        result: &mut ResultSlot,
        answer: Answer,
        (version, request_id, twoway): (Version, u32, bool),
        _enter: tracing::span::Entered<'_>,
    ) {
        // Closed to `defer` from here on: a clone of the context kept by the servant cannot
        // defer a request whose dispatch has returned.
        let deferral = ctx.close_deferral();
        let Some(conn) = serving.leave() else {
            // Not reached: `enter` put it on this thread's stack, which lives as long as
            // the thread does.
            tracing::error!(request_id, "the upcall's connection is gone; no reply sent");
            return;
        };
        // The reply would wake the caller, whose next request would then wake the standby
        // before this thread is back to lead: stop watching for the short rest of the way.
        self.lf.user_code_done(self);
        if let Some(d) = deferral {
            if twoway {
                // The reply handle answers. Until it does, the reply stays owed, the request
                // holds its dispatch slot and counts as a running upcall (so shutdown's
                // grace period waits for it): `finish_deferred` ends all three.
                tracing::debug!("reply deferred");
                let sink = ConnectionSink {
                    orb: self.me_any.clone(),
                    conn: Arc::downgrade(&conn),
                    version,
                    request_id,
                };
                d.install(Box::new(sink), &ctx);
                return;
            }
            // A oneway has no reply to send: the handle's answer goes nowhere.
            d.install(Box::new(Discard), &ctx);
        } else if twoway {
            if ctx.is_cancelled() {
                tracing::debug!("reply dropped: request was cancelled");
            } else {
                let md = ctx.take_reply_metadata();
                let md = md.as_deref().filter(|md| !md.is_empty());
                match answer {
                    // The common reply: its head goes in front of the result.
                    Answer::InSlot if md.is_none() && result.has_frame() => {
                        if let Some(frame) = result.take_frame() {
                            self.send_in_frame(&conn, version, request_id, frame)
                        }
                    }
                    // With contexts, or not in a frame: the general way, the result taken
                    // out of the slot.
                    answer => {
                        let body = answer.into_body(result);
                        self.send_reply(&conn, version, request_id, body, md)
                    }
                }
            }
            // Owed until sent: a shutdown that found it gone would send CloseConnection
            // ahead of the reply, and the caller would run the request again.
            conn.owed.finish(request_id);
        }
        drop(_enter);
        ctx.recycle();
        self.dispatch_finished(&conn);
        // Only `shutdown` waits for this (and re-checks every 50 ms): no wake-up per call.
        self.upcalls
            .finished(|| self.shutting_down.load(Ordering::Acquire));
    }

    /// Runs the servant for one request on this thread (`depth` upcalls below it on the
    /// stack): the cancellation and stack checks, the dispatch, a panic turned into UNKNOWN.
    /// Shared by upcalls from the network and collocated calls. Server interceptors, if any,
    /// run around it (`server/intercept.rs`).
    ///
    /// A result the servant puts into a framed `result` ([`ResultSlot::framed`]) stays there,
    /// and the answer is [`Answer::InSlot`]; the caller takes it out.
    pub(crate) fn run_servant(
        &self,
        body: Body,
        ctx: &Context,
        depth: usize,
        result: &mut ResultSlot,
    ) -> Answer {
        if !self.config.interceptors.server.is_empty() {
            return self.run_intercepted(body, ctx, depth, result);
        }
        self.run_guarded(body, ctx, depth, result)
    }

    /// [`run_servant`](Self::run_servant) without the interceptors.
    pub(super) fn run_guarded(
        &self,
        body: Body,
        ctx: &Context,
        depth: usize,
        result: &mut ResultSlot,
    ) -> Answer {
        catch_unwind(AssertUnwindSafe(|| {
            if ctx.is_cancelled() {
                // Cancelled while it waited for a thread: the caller has given up.
                tracing::debug!("request cancelled before it started; not dispatched");
                let e = SystemException::timeout("cancelled before dispatch");
                return Answer::Body(ReplyBody::System(e));
            }
            // Nested upcalls recurse on this thread's stack: refuse rather than overflow it
            // (an overflow aborts the whole process, whatever thread it happens on).
            if let Some(left) = stacker::remaining_stack() {
                if left < self.config.upcall_stack_reserve {
                    return Answer::Body(stack_low(left, depth));
                }
            }
            self.dispatch(body, ctx.object_key(), ctx, result)
        }))
        .unwrap_or_else(|panic| Answer::Body(servant_panicked(panic, ctx)))
    }

    /// A deferred reply's answer, on the thread that answered (or on the upcall's, if the
    /// handle answered before `dispatch` returned): sends it on the request's connection, or
    /// drops and counts it if the caller is gone (cancelled, past its deadline, connection
    /// closed); then ends what the upcall left open (the owed reply, the dispatch slot, the
    /// running upcall).
    fn finish_deferred(
        &self,
        conn: &Weak<Connection>,
        version: Version,
        request_id: u32,
        answer: Result<Bytes, Exception>,
        ctx: &Context,
    ) {
        let span = tracing::debug_span!("deferred_reply", request_id, operation = ctx.operation(),);
        let _enter = span.enter();
        match conn.upgrade() {
            Some(conn) => {
                let late = ctx.is_cancelled()
                    || conn.is_closed()
                    || ctx.deadline().is_some_and(|d| Instant::now() >= d);
                if late {
                    self.stats
                        .deferred_replies_dropped
                        .fetch_add(1, Ordering::Relaxed);
                    tracing::debug!("deferred reply dropped: the caller is gone");
                } else {
                    let md = ctx.take_reply_metadata();
                    let body = ReplyBody::from_result(answer);
                    self.send_reply(&conn, version, request_id, body, md.as_deref());
                }
                conn.owed.finish(request_id);
                self.dispatch_finished(&conn);
            }
            None => {
                self.stats
                    .deferred_replies_dropped
                    .fetch_add(1, Ordering::Relaxed);
                tracing::debug!("deferred reply dropped: the connection is gone");
            }
        }
        self.upcalls
            .finished(|| self.shutting_down.load(Ordering::Acquire));
    }

    fn dispatch(&self, body: Body, key: &[u8], ctx: &Context, result: &mut ResultSlot) -> Answer {
        let op = ctx.operation();
        let Some(servant) = self.adapter.get(key) else {
            return Answer::Body(no_object(key));
        };
        // The CORBA::Object operations (all named with a leading underscore) out of line:
        // the servant's dispatch below runs in this frame, which nested upcalls stack up.
        if op.starts_with('_') {
            if let Some(answer) = object_operation(op, &body, servant.as_ref()) {
                return Answer::Body(answer);
            }
        }
        match body.into_octets() {
            Err(e) => Answer::Body(bad_parameters(op, e)),
            Ok(params) => match servant.dispatch_into(op, params, ctx, result) {
                Ok(()) => Answer::InSlot,
                Err(e) => Answer::Body(ReplyBody::from_result(Err(e))),
            },
        }
    }

    /// Sends an upcall's reply (not the leader: it may wait for the queue to drain, up to
    /// `call_timeout`; a peer that does not read for that long loses its connection).
    fn send_reply(
        &self,
        conn: &Arc<Connection>,
        version: Version,
        request_id: u32,
        body: ReplyBody,
        metadata: Option<&Metadata>,
    ) {
        let plan = self.reply_plan(request_id, body, metadata);
        let timeout = self.config.call_timeout;
        let deadline = || Instant::now() + timeout;
        // With reply batching on, queued behind the hold for the batch this request came
        // in, if one is kept: this thread waits for nothing once the reply is queued. Else
        // not behind anyone's kept hold (a driver's lasts until its next poll).
        let queued = !self.config.reply_batch_hold.is_zero();
        let sent = match plan.large_parts(version) {
            Some(parts) => self.send_or_wait(conn, parts, queued, deadline),
            None => self.send_encoded(
                conn,
                plan.capacity(),
                |buf| plan.write(buf, version),
                queued,
                deadline,
            ),
        };
        self.reply_sent(conn, sent);
    }

    /// [`send_reply`](Self::send_reply) for a NO_EXCEPTION reply without contexts whose
    /// result is encoded in `frame` already: its head is written in front, and the frame is
    /// sent from where it lies (`result_slot.rs`).
    fn send_in_frame(
        &self,
        conn: &Arc<Connection>,
        version: Version,
        request_id: u32,
        mut frame: InFrame,
    ) {
        if frame.frame().len() - BODY_AT > self.config.max_message_size {
            // MARSHAL, as `reply_plan` says it.
            let body = ReplyBody::Octets(frame.body());
            return self.send_reply(conn, version, request_id, body, None);
        }
        write_plain_reply_head(frame.frame(), version, request_id);
        let timeout = self.config.call_timeout;
        let queued = !self.config.reply_batch_hold.is_zero();
        let sent = self.send_from(conn, frame.frame(), queued, || Instant::now() + timeout);
        self.reply_sent(conn, sent);
    }

    /// After a reply's send: a peer that has not read its replies for `call_timeout` loses
    /// its connection (other failures closed it already).
    fn reply_sent(&self, conn: &Arc<Connection>, sent: Result<(), SystemException>) {
        if let Err(e) = sent {
            if e.kind == SystemExceptionKind::TIMEOUT {
                // The peer does not read its replies: give up on it.
                self.close_connection(conn, CloseCause::Io("peer stopped reading".into()));
            }
        }
    }

    /// Encodes a Reply as (head, body) parts.
    pub(crate) fn reply_parts(
        &self,
        version: Version,
        request_id: u32,
        body: ReplyBody,
    ) -> [Bytes; 4] {
        self.reply_parts_with(version, request_id, body, None)
    }

    /// [`reply_parts`](Self::reply_parts) with the servant's and interceptors' reply
    /// metadata, if any, among the reply's service contexts.
    pub(crate) fn reply_parts_with(
        &self,
        version: Version,
        request_id: u32,
        body: ReplyBody,
        metadata: Option<&Metadata>,
    ) -> [Bytes; 4] {
        let plan = self.reply_plan(request_id, body, metadata);
        plan.large_parts(version).unwrap_or_else(|| {
            let frame = outbuf::encode(plan.capacity(), |buf| plan.write(buf, version));
            [frame, Bytes::new(), Bytes::new(), Bytes::new()]
        })
    }

    /// A reply's header and body, ready to be written: a result over the maximum message
    /// size is replaced by MARSHAL, and the reply's contexts are gathered.
    fn reply_plan(
        &self,
        request_id: u32,
        body: ReplyBody,
        metadata: Option<&Metadata>,
    ) -> ReplyPlan {
        let too_big = match &body {
            ReplyBody::Octets(b) => b.len() > self.config.max_message_size,
            ReplyBody::Parts(p) => crate::octets::len(p) > self.config.max_message_size,
            ReplyBody::User(u) => u.payload.len() > self.config.max_message_size,
            _ => false,
        };
        let body = if too_big {
            ReplyBody::System(SystemException::marshal(
                minor::MESSAGE_TOO_LARGE,
                CompletionStatus::Yes,
                "reply exceeds the maximum message size",
            ))
        } else {
            body
        };
        let status = match &body {
            ReplyBody::Octets(_) | ReplyBody::Parts(_) | ReplyBody::Bool(_) => {
                ReplyStatus::NoException
            }
            ReplyBody::User(_) => ReplyStatus::UserException,
            ReplyBody::System(_) => ReplyStatus::SystemException,
        };
        let header = ReplyHeader {
            request_id,
            status,
            service_context: reply_contexts(&body, metadata),
        };
        ReplyPlan { header, body }
    }
}

/// A reply to write ([`OrbInner::reply_plan`]).
struct ReplyPlan {
    header: ReplyHeader,
    body: ReplyBody,
}

impl ReplyPlan {
    /// A large result's frame as two parts: the head (with the octets' length), and the
    /// octets from their own buffer, uncopied (see `frame_parts`). `None` for any other
    /// reply, which is written whole ([`write`](Self::write)).
    fn large_parts(&self, version: Version) -> Option<[Bytes; 4]> {
        match &self.body {
            ReplyBody::Octets(b) if crate::octets::is_large(b.len()) => Some(frame_parts(
                |head| write_reply(head, version, &self.header, |w| w.write_len(b.len())),
                &crate::octets::one_part(b.clone()),
            )),
            ReplyBody::Parts(p) => Some(frame_parts(
                |head| {
                    let len = crate::octets::len(p);
                    write_reply(head, version, &self.header, |w| w.write_len(len))
                },
                p,
            )),
            _ => None,
        }
    }

    /// Room for the whole frame.
    fn capacity(&self) -> usize {
        64 + match &self.body {
            ReplyBody::Octets(b) => b.len(),
            ReplyBody::Parts(p) => crate::octets::len(p),
            ReplyBody::User(u) => u.payload.len() + u.repository_id.len(),
            _ => 64,
        }
    }

    /// Writes the whole frame into `buf`.
    fn write(&self, buf: &mut BytesMut, version: Version) {
        write_reply(buf, version, &self.header, |w| match &self.body {
            ReplyBody::Octets(b) => w.write_octets(b),
            ReplyBody::Parts(p) => crate::octets::write_parts(w, p),
            ReplyBody::Bool(v) => w.write_bool(*v),
            ReplyBody::User(u) => {
                w.write_string(&u.repository_id);
                w.write_octets(&u.payload);
            }
            ReplyBody::System(e) => encode_system_exception(e, w),
        });
    }
}

/// The service contexts of a reply: a system exception's detail text travels in an
/// ERROR_TEXT context ([`ErrorText`]). A panic's message stays in the server's log: it may
/// say things about the server the caller has no business reading. Then the reply's
/// `metadata` ([`Context::reply_metadata_mut`]), if any.
pub(super) fn reply_contexts(body: &ReplyBody, metadata: Option<&Metadata>) -> ServiceContextList {
    let mut list = ServiceContextList::default();
    if let Some(md) = metadata.filter(|md| !md.is_empty()) {
        list.0.extend(md.to_contexts());
    }
    if let ReplyBody::System(e) = body {
        let text = match e.detail() {
            _ if e.minor == minor::SERVANT_PANIC => Some("servant panicked (see the server's log)"),
            detail => detail,
        };
        if let Some(text) = text {
            list.0.push(ErrorText::context(text));
        }
    }
    list
}
