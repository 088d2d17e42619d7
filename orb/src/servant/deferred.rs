//! Deferred replies (AMH, asynchronous method handling): a servant takes a [`ReplyHandle`]
//! for its request with [`Context::defer`], returns from `dispatch` at once, and answers
//! later from any thread (or async task).
//!
//! Who sends the answer is decided by a small state machine, [`Deferral`], shared by the
//! handle and the ORB: the handle may answer before the ORB has learnt where the reply goes
//! (the servant handed the handle to another thread, which answered before `dispatch`
//! returned), or after. Whichever of the two comes second sends, on its own thread, with no
//! lock held:
//!
//! ```text
//!             answer                      install(sink)
//!   Waiting ───────────> Answered(a) ──────────────────> Done   (the installer sends a)
//!      │ install(sink)                    answer
//!      └───────────────> Ready(sink) ──────────────────> Done   (the answerer sends)
//! ```
//!
//! The sink ([`ReplySink`]) is the ORB's: the request's connection for a request that came
//! over the network (`server/`), the waiting caller for a collocated call, nothing for a
//! oneway. This module knows none of them.

use crate::exception::{CompletionStatus, Exception, SystemException, SystemExceptionKind};
use crate::servant::Context;
use crate::sync::plain::Mutex;
use crate::sync::plain_lock as lock;
use bytes::Bytes;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Instant;

/// Where a deferred reply goes, once the servant answers (the ORB's side, see the module
/// docs). Called at most once, on the thread that completes the [`Deferral`], with no lock
/// of the deferral held.
pub(crate) trait ReplySink: Send + 'static {
    /// Sends (or drops) `answer` to request `ctx`.
    fn send(self: Box<Self>, answer: Result<Bytes, Exception>, ctx: &Context);
}

/// A sink that drops the answer: a oneway request's (no reply is ever sent for it).
pub(crate) struct Discard;

impl ReplySink for Discard {
    fn send(self: Box<Self>, _answer: Result<Bytes, Exception>, _ctx: &Context) {}
}

enum Slot {
    /// Neither the answer nor the sink is known.
    Waiting,
    /// The ORB has said where the reply goes; the handle has not answered.
    Ready(Box<dyn ReplySink>),
    /// The handle answered before the ORB said where the reply goes.
    Answered(Result<Bytes, Exception>),
    /// Sent (or handed to the sink): nothing left to do.
    Done,
}

/// The meeting point of a deferred request's answer and its sink.
///
/// Invariant: the sink's `send` runs exactly once per deferral that gets both an answer and
/// a sink, on the thread that brought the second of them, outside the lock. A handle always
/// answers (its drop answers NO_RESPONSE); the ORB always installs a sink once `dispatch`
/// returned, so no deferral is forgotten.
pub(crate) struct Deferral {
    slot: Mutex<Slot>,
}

impl std::fmt::Debug for Deferral {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match &*lock(&self.slot) {
            Slot::Waiting => "waiting",
            Slot::Ready(_) => "ready",
            Slot::Answered(_) => "answered",
            Slot::Done => "done",
        };
        f.debug_struct("Deferral").field("state", &state).finish()
    }
}

impl Deferral {
    pub(crate) fn new() -> Self {
        Deferral {
            slot: Mutex::new(Slot::Waiting),
        }
    }

    /// The handle's answer.
    fn answer(&self, answer: Result<Bytes, Exception>, ctx: &Context) {
        let mut slot = lock(&self.slot);
        match std::mem::replace(&mut *slot, Slot::Done) {
            Slot::Waiting => *slot = Slot::Answered(answer),
            Slot::Ready(sink) => {
                drop(slot);
                sink.send(answer, ctx);
            }
            // A handle answers once (it is consumed); keep what was there.
            other => *slot = other,
        }
    }

    /// The ORB says where the reply goes (once, after `dispatch` returned).
    pub(crate) fn install(&self, sink: Box<dyn ReplySink>, ctx: &Context) {
        let mut slot = lock(&self.slot);
        match std::mem::replace(&mut *slot, Slot::Done) {
            Slot::Waiting => *slot = Slot::Ready(sink),
            Slot::Answered(answer) => {
                drop(slot);
                sink.send(answer, ctx);
            }
            other => *slot = other,
        }
    }
}

/// The exception a caller sees when the servant dropped its [`ReplyHandle`] without
/// answering: NO_RESPONSE, minor [`REPLY_HANDLE_DROPPED`](crate::minor::REPLY_HANDLE_DROPPED),
/// completed MAYBE (the servant may have done part of the work).
pub(crate) fn dropped_handle() -> SystemException {
    SystemException::new(
        SystemExceptionKind::NO_RESPONSE,
        crate::exception::minor::REPLY_HANDLE_DROPPED,
        CompletionStatus::Maybe,
    )
    .with_detail("the servant dropped its reply handle without answering")
}

/// The right, and the duty, to answer one deferred request (see [`Context::defer`]).
///
/// `Send + Sync`: move it to another thread, a pool or an async task and call one of the
/// `reply*` methods there, once (they take `self`). Dropping it unanswered answers the
/// caller with NO_RESPONSE (minor [`REPLY_HANDLE_DROPPED`](crate::minor::REPLY_HANDLE_DROPPED),
/// completed MAYBE), so a caller is never left waiting by a lost handle.
///
/// Answering takes the same path as an ordinary reply: the frame is written if the socket
/// takes it and queued otherwise; only when the connection's outgoing queue is over its
/// bound (a peer that does not read) does the answering thread wait for room, at most the
/// ORB's call timeout, as an upcall's reply would. No lock is held meanwhile. The answer is
/// dropped quietly, and counted in
/// [`OrbStats::deferred_replies_dropped`](crate::OrbStats::deferred_replies_dropped), when the
/// caller cancelled (CancelRequest, sent on its timeout), the request's deadline has passed,
/// or the connection closed.
#[derive(Debug)]
#[must_use = "dropping a ReplyHandle answers the caller with NO_RESPONSE"]
pub struct ReplyHandle {
    ctx: Context,
    deferral: Arc<Deferral>,
    answered: bool,
}

impl ReplyHandle {
    pub(crate) fn new(ctx: Context, deferral: Arc<Deferral>) -> Self {
        ReplyHandle {
            ctx,
            deferral,
            answered: false,
        }
    }

    /// The request's context (operation, object key, peer, deadline, cancellation).
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// Whether the caller gave up: it cancelled the request (CancelRequest, which a caller of
    /// this ORB sends when its call times out), the connection closed, or the ORB shut down.
    /// An answer given now is dropped; stop working early.
    pub fn is_cancelled(&self) -> bool {
        self.ctx.is_cancelled()
    }

    /// The caller's deadline, if it sent one; an answer given after it is dropped.
    pub fn deadline(&self) -> Option<Instant> {
        self.ctx.deadline()
    }

    /// Answers with the protobuf-encoded result `body` (what `dispatch` would have returned).
    pub fn reply(self, body: Bytes) {
        self.reply_result(Ok(body));
    }

    /// Answers with a user exception.
    pub fn reply_user_exception(self, e: crate::exception::UserException) {
        self.reply_result(Err(Exception::User(e)));
    }

    /// Answers with a system exception.
    pub fn reply_system_exception(self, e: SystemException) {
        self.reply_result(Err(Exception::System(e)));
    }

    /// Answers with what `dispatch` would have returned.
    pub fn reply_result(mut self, result: Result<Bytes, Exception>) {
        self.answered = true;
        self.deferral.answer(result, &self.ctx);
    }

    /// This handle with the result and error types of a generated operation, e.g.
    /// `ctx.defer()?.typed::<Payload, protorb::Exception>()`, or with the operation's
    /// error enum (`EchoWithdrawError`) for one that declares `raises`.
    pub fn typed<T: prost::Message, E: Into<Exception>>(self) -> TypedReplyHandle<T, E> {
        TypedReplyHandle {
            handle: self,
            _types: PhantomData,
        }
    }
}

impl Drop for ReplyHandle {
    fn drop(&mut self) {
        if !self.answered {
            tracing::debug!(
                operation = self.ctx.operation(),
                request_id = self.ctx.request_id(),
                "reply handle dropped without an answer; answering NO_RESPONSE"
            );
            self.deferral
                .answer(Err(Exception::System(dropped_handle())), &self.ctx);
        }
    }
}

/// A [`ReplyHandle`] for an operation whose result is the message `T` and whose error is
/// `E` (`protorb::Exception`, or the error enum generated for an operation with `raises`): the
/// typed face a generated servant answers through. Made with [`ReplyHandle::typed`].
#[must_use = "dropping a TypedReplyHandle answers the caller with NO_RESPONSE"]
pub struct TypedReplyHandle<T, E = Exception> {
    handle: ReplyHandle,
    // `fn() -> ..`: the handle stays `Send + Sync` whatever `T` and `E` are.
    _types: PhantomData<fn() -> (T, E)>,
}

impl<T, E> std::fmt::Debug for TypedReplyHandle<T, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("TypedReplyHandle")
            .field(&self.handle)
            .finish()
    }
}

impl<T: prost::Message, E: Into<Exception>> TypedReplyHandle<T, E> {
    /// Answers with what the servant method would have returned.
    pub fn reply(self, result: Result<T, E>) {
        let result = result
            .map(|m| crate::outbuf::encode(m.encoded_len(), |buf| m.encode_raw(buf)))
            .map_err(Into::into);
        self.handle.reply_result(result);
    }

    /// The untyped handle.
    pub fn into_untyped(self) -> ReplyHandle {
        self.handle
    }

    /// See [`ReplyHandle::context`].
    pub fn context(&self) -> &Context {
        self.handle.context()
    }

    /// See [`ReplyHandle::is_cancelled`].
    pub fn is_cancelled(&self) -> bool {
        self.handle.is_cancelled()
    }

    /// See [`ReplyHandle::deadline`].
    pub fn deadline(&self) -> Option<Instant> {
        self.handle.deadline()
    }
}

#[cfg(all(test, not(orb_loom)))]
mod tests {
    use super::*;
    use std::sync::Mutex as StdMutex;

    /// A sink that records what it was given.
    struct Record(Arc<StdMutex<Vec<Result<Bytes, Exception>>>>);

    impl ReplySink for Record {
        fn send(self: Box<Self>, answer: Result<Bytes, Exception>, _ctx: &Context) {
            self.0.lock().unwrap().push(answer);
        }
    }

    fn pair() -> (Context, ReplyHandle, Arc<Deferral>) {
        let ctx = Context::for_test("op");
        let h = ctx.defer().expect("a fresh context defers");
        let d = ctx.close_deferral().expect("deferred");
        (ctx, h, d)
    }

    #[test]
    fn an_answer_before_the_sink_is_sent_by_the_installer() {
        let (ctx, h, d) = pair();
        h.reply(Bytes::from_static(b"x"));
        let got = Arc::new(StdMutex::new(Vec::new()));
        d.install(Box::new(Record(got.clone())), &ctx);
        let got = got.lock().unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(&got[0].as_ref().unwrap()[..], b"x");
    }

    #[test]
    fn an_answer_after_the_sink_is_sent_by_the_answerer() {
        let (ctx, h, d) = pair();
        let got = Arc::new(StdMutex::new(Vec::new()));
        d.install(Box::new(Record(got.clone())), &ctx);
        assert!(got.lock().unwrap().is_empty());
        drop(h);
        let got = got.lock().unwrap();
        let Err(Exception::System(e)) = &got[0] else {
            panic!("{:?}", got[0])
        };
        assert_eq!(e.kind, SystemExceptionKind::NO_RESPONSE);
    }

    #[test]
    fn a_request_defers_once_and_only_while_dispatched() {
        let ctx = Context::for_test("op");
        let h = ctx.defer().unwrap();
        let again = ctx.defer().unwrap_err();
        assert_eq!(again.kind, SystemExceptionKind::BAD_INV_ORDER);
        drop(h);
        let ctx = Context::for_test("op");
        assert!(ctx.close_deferral().is_none());
        assert!(ctx.defer().is_err(), "deferred after dispatch returned");
    }
}
