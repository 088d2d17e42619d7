//! The upcall half of a collocated call: a call from this ORB to one of its own objects,
//! which `client/` hands over through [`Collocated`] instead of writing it to a socket.
//!
//! Semantics, the same as over a connection where they can be:
//! - The servant runs on the **calling thread**, twoway and oneway alike (a oneway returns
//!   once the servant has run; what it returns or raises is dropped, as over the network).
//! - User and system exceptions come back as they would in a reply; a panicking servant
//!   becomes UNKNOWN (minor `SERVANT_PANIC`), completed MAYBE.
//! - The servant's [`Context`] has the call's deadline (a oneway's has none, as on the wire),
//!   request id 0 and no peer: [`Context::peer`] is `None`. Its metadata is the caller's.
//! - Interceptors run as over a connection: the client's around the call, the server's
//!   around the servant.
//! - The deadline cannot interrupt a servant running on the caller's own stack: a call whose
//!   deadline has passed before dispatch is not run (TIMEOUT, completed NO); one whose servant
//!   returns after it gets TIMEOUT, completed MAYBE, and the result is dropped.
//! - A deferred reply ([`Context::defer`]) is waited for as a remote reply is: as a bound
//!   Leader/Followers participant (leading the event loop meanwhile), until the deadline;
//!   an asynchronous call's ([`ReplyFuture`](crate::ReplyFuture)) is not waited for: the
//!   answer completes the future, whose deadline is an ORB timer as a remote call's is.
//!   On a timeout the request is marked cancelled (the handle sees
//!   [`is_cancelled`](crate::ReplyHandle::is_cancelled)) and a later answer is dropped and
//!   counted.
//! - Collocated calls are counted in `OrbStats::collocated_calls`, not in the request and
//!   upcall counters; shutdown's grace period does not wait for them (they run on
//!   application threads, as the caller of a remote call waits on one).

use crate::cdr::{ByteOrder, CdrWriter};
use crate::exception::{minor, CompletionStatus, Exception, SystemException, SystemExceptionKind};
use crate::giop::{encode_system_exception, Body, Reply, ReplyHeader, ReplyStatus, ServiceContext};
use crate::giop::{ByteString, ObjectKey};
use crate::lf::{Exit, Participant, TaskSlot};
use crate::metadata::Metadata;
use crate::orb::OrbInner;
use crate::result_slot::ResultSlot;
use crate::servant::{Context, Discard, ReplySink};
use crate::server::dispatch::ReplyBody;
use crate::upcall::{Collocated, LocalAnswer, LocalCaller, LocalDeferred, Serving};
use bytes::{Bytes, BytesMut};
use std::any::Any;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Instant;

impl Collocated for OrbInner {
    fn call_collocated(
        &self,
        key: Bytes,
        operation: &str,
        caller: LocalCaller<'_>,
        body: Body,
        deadline: Instant,
        metadata: &[ServiceContext],
    ) -> Result<LocalAnswer, SystemException> {
        let twoway = caller.twoway();
        self.stats.collocated_calls.fetch_add(1, Ordering::Relaxed);
        let span = tracing::debug_span!(
            "collocated",
            operation,
            object_key = %String::from_utf8_lossy(&key),
            trace_id = tracing::field::Empty,
        );
        let _enter = span.enter();
        if twoway && Instant::now() >= deadline {
            return Err(SystemException::new(
                SystemExceptionKind::TIMEOUT,
                minor::DEADLINE,
                CompletionStatus::No,
            )
            .with_detail("the deadline passed before the collocated call ran"));
        }
        if crate::upcall::current_depth() >= self.config.max_nesting_depth {
            return Err(crate::orb::Orb::nesting_error());
        }
        let ctx_deadline = twoway.then_some(deadline);
        let metadata = Metadata::boxed_from_contexts(metadata)?;
        let ctx = Context::for_upcall(
            ByteString::from(operation),
            ObjectKey::from(key),
            0,
            (None, None),
            ctx_deadline,
            metadata,
            &self.me_any,
        );
        let serving = Serving::enter(None, ctx_deadline, None);
        let mut result = ResultSlot::for_bytes();
        let reply = self
            .run_servant(body, &ctx, serving.depth(), &mut result)
            .into_body(&mut result);
        let deferral = ctx.close_deferral();
        drop(serving);
        if let Some(d) = deferral {
            if !twoway {
                d.install(Box::new(Discard), &ctx);
                return Ok(LocalAnswer::Now(None));
            }
            let LocalCaller::Task(slot) = caller else {
                return self.wait_deferred(d, ctx, deadline).map(LocalAnswer::Now);
            };
            // An asynchronous caller is not held up: the answer completes its future.
            let claimed = Arc::new(AtomicBool::new(false));
            let sink = TaskSink {
                orb: self.me_any.clone(),
                slot: slot.clone(),
                claimed: claimed.clone(),
            };
            d.install(Box::new(sink), &ctx);
            return Ok(LocalAnswer::Later(LocalDeferred { claimed, ctx }));
        }
        if !twoway {
            ctx.recycle();
            return Ok(LocalAnswer::Now(None));
        }
        if Instant::now() >= deadline {
            tracing::debug!("collocated call ran past its deadline; result dropped");
            return Err(SystemException::timeout(format!(
                "collocated call `{operation}` ran past its deadline"
            )));
        }
        let md = ctx.take_reply_metadata();
        ctx.recycle();
        Ok(LocalAnswer::Now(Some(local_reply(reply, md.as_deref()))))
    }
}

impl OrbInner {
    /// Waits for the answer of a collocated request the servant deferred, as a bound
    /// Leader/Followers participant, until `deadline`.
    fn wait_deferred(
        &self,
        d: Arc<crate::servant::Deferral>,
        ctx: Context,
        deadline: Instant,
    ) -> Result<Option<Reply>, SystemException> {
        let p = Participant::bound();
        let claimed = Arc::new(AtomicBool::new(false));
        let sink = CallerSink {
            orb: self.me_any.clone(),
            caller: p.clone(),
            claimed: claimed.clone(),
        };
        d.install(Box::new(sink), &ctx);
        let exit = {
            let _suspended = self.suspend_dispatch();
            self.lf.run(&p, Some(deadline), self)
        };
        if exit != Exit::Completed && !claimed.swap(true, Ordering::AcqRel) {
            // Nobody will complete it now; a later answer is dropped (and counted).
            ctx.cancel();
            return Err(match exit {
                Exit::Shutdown => SystemException::shutdown(),
                _ => SystemException::timeout(format!(
                    "no deferred reply to collocated `{}` within the deadline",
                    ctx.operation()
                )),
            });
        }
        // The sink claimed it and fills the slot right after.
        match Participant::finish(p) {
            Some(Ok(Some(reply))) => Ok(Some(reply)),
            Some(Err(e)) => Err(e),
            _ => Err(SystemException::internal("collocated reply slot empty")),
        }
    }
}

/// Where the deferred reply of a collocated call goes: to its caller, waiting in
/// [`wait_deferred`](OrbInner::wait_deferred). `claimed` decides between the answer and the
/// caller giving up: whoever sets it first owns the outcome.
struct CallerSink {
    orb: Weak<dyn Any + Send + Sync>,
    caller: Arc<Participant>,
    claimed: Arc<AtomicBool>,
}

impl ReplySink for CallerSink {
    fn send(self: Box<Self>, answer: Result<Bytes, Exception>, ctx: &Context) {
        let Some(orb) = OrbInner::upgrade(&self.orb) else {
            return;
        };
        if self.claimed.swap(true, Ordering::AcqRel) {
            orb.stats
                .deferred_replies_dropped
                .fetch_add(1, Ordering::Relaxed);
            tracing::debug!("deferred collocated reply dropped: the caller gave up");
            return;
        }
        let md = ctx.take_reply_metadata();
        let reply = local_reply(ReplyBody::from_result(answer), md.as_deref());
        orb.lf.complete(&self.caller, Ok(Some(reply)), None, &*orb);
    }
}

/// Where the deferred reply of an asynchronous collocated call goes: to its future's slot
/// (whose task it wakes), unless the caller gave up first (`claimed`, as in [`CallerSink`]).
struct TaskSink {
    orb: Weak<dyn Any + Send + Sync>,
    slot: Arc<TaskSlot>,
    claimed: Arc<AtomicBool>,
}

impl ReplySink for TaskSink {
    fn send(self: Box<Self>, answer: Result<Bytes, Exception>, ctx: &Context) {
        if self.claimed.swap(true, Ordering::AcqRel) {
            if let Some(orb) = OrbInner::upgrade(&self.orb) {
                orb.stats
                    .deferred_replies_dropped
                    .fetch_add(1, Ordering::Relaxed);
            }
            tracing::debug!("deferred collocated reply dropped: the caller gave up");
            return;
        }
        let md = ctx.take_reply_metadata();
        let reply = local_reply(ReplyBody::from_result(answer), md.as_deref());
        self.slot.complete(Ok(Some(reply)));
    }
}

/// A reply as the caller's side reads it from a connection, built without a frame: the
/// status, a system exception's detail text (ERROR_TEXT, as `reply_parts` writes it) and the
/// CDR body, aligned from its own start (a multiple of 8 from a GIOP header); then the
/// reply's metadata, if any.
fn local_reply(body: ReplyBody, metadata: Option<&Metadata>) -> Reply {
    let status = match &body {
        ReplyBody::Octets(_) | ReplyBody::Parts(_) | ReplyBody::Bool(_) => ReplyStatus::NoException,
        ReplyBody::User(_) => ReplyStatus::UserException,
        ReplyBody::System(_) => ReplyStatus::SystemException,
    };
    let mut buf = BytesMut::new();
    {
        let mut w = CdrWriter::new(&mut buf, ByteOrder::NATIVE);
        match &body {
            ReplyBody::Octets(b) => w.write_octets(b),
            ReplyBody::Parts(p) => crate::octets::write_parts(&mut w, p),
            ReplyBody::Bool(v) => w.write_bool(*v),
            ReplyBody::User(u) => {
                w.write_string(&u.repository_id);
                w.write_octets(&u.payload);
            }
            ReplyBody::System(e) => encode_system_exception(e, &mut w),
        }
    }
    Reply {
        header: ReplyHeader {
            request_id: 0,
            status,
            // The detail text travels as over a connection (a panic's stays in the log).
            service_context: crate::server::dispatch::reply_contexts(&body, metadata),
        },
        body: Body {
            bytes: buf.freeze(),
            offset: 0,
            order: ByteOrder::NATIVE,
        },
    }
}
