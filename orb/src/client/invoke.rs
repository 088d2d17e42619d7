//! The client side: the connection cache (one connection per remote endpoint), marshalling a
//! request, waiting for its reply as a bound Leader/Followers participant, deadlines and
//! cancellation, and turning replies into results or exceptions.

use crate::cdr::CdrWriter;
use crate::connection::{CloseCause, Connection, Origin};
use crate::endpoints::EndpointSlot;
use crate::exception::{
    minor, CompletionStatus, Exception, SystemException, SystemExceptionKind, UserException,
};
use crate::giop::request::{write_request_head, HeadTarget, RequestHead};
use crate::giop::{
    unsupported_status, BiDirListenPoints, CallChain, Deadline, Reply, ReplyStatus, ServiceContext,
    Version,
};
use crate::ior::{IiopProfile, ObjectRef};
use crate::lf::{Exit, OwnReply, Participant, Until, Waiter};
use crate::octets::{Encoded, OctetParts};
use crate::orb::{Orb, OrbInner};
use crate::stream::Stream;
use crate::sync::plain_lock as lock;
use crate::tls::stream::TlsStream;
use crate::upcall::{current_chain, inherited_deadline};
use bytes::Bytes;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a call sends as its parameters.
#[derive(Clone, Copy)]
pub(crate) struct Params<'a> {
    /// Writes the parameters into the request frame (for a split body: the count only).
    pub(crate) write: &'a dyn Fn(&mut CdrWriter<'_>),
    /// One octet sequence of `octets::SPLIT_BODY_AT` bytes or more, sent from its own buffers
    /// (`write` writes the same, for a collocated call).
    pub(crate) split: Option<&'a OctetParts>,
    /// About how many bytes `write` writes, to size the frame buffer (without `split`).
    pub(crate) hint: usize,
    /// The application's service contexts (metadata), sent after the ORB's own.
    pub(crate) metadata: &'a [ServiceContext],
}

/// How many LOCATION_FORWARD hops (and CloseConnection retries) one call follows.
pub(crate) const MAX_HOPS: usize = 8;

/// A clock reading a call took, with the time its deadline left as of it: the call's timeout
/// when the deadline was made from this reading (no `Instant` subtraction, ~40 instructions
/// out of line, to work it out again for the DEADLINE context).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Reading {
    pub(crate) now: Instant,
    pub(crate) left: Duration,
}

impl Reading {
    /// A call's deadline, `timeout` from now unless an upcall this thread runs has an earlier
    /// one (it is inherited), with the clock reading it was made from: one reading for both
    /// (blocking and asynchronous calls alike).
    pub(crate) fn deadline(timeout: Duration) -> (Instant, Reading) {
        let now = Instant::now();
        let mut deadline = now + timeout;
        // The time left as of `now` is the timeout, unless an earlier deadline is inherited.
        let mut first = Reading { now, left: timeout };
        if let Some(inherited) = inherited_deadline().filter(|&d| d < deadline) {
            deadline = inherited;
            first.left = deadline.saturating_duration_since(now);
        }
        (deadline, first)
    }
}

/// A request on the wire, whose reply (if two-way) its registered waiter awaits.
#[derive(Debug)]
pub(crate) struct Sent {
    pub(crate) conn: Arc<Connection>,
    pub(crate) request_id: u32,
    /// The request's GIOP version (its CancelRequest is written in it).
    pub(crate) version: Version,
    /// The call's `invoke` span.
    pub(crate) span: tracing::Span,
    /// The caller's clock reading that stood for the send's (no connect in between), with
    /// the time left as of it: the wait's first deadline check uses it instead of reading the
    /// clock again.
    pub(crate) clock: Option<Reading>,
}

impl Orb {
    pub(crate) fn invoke(
        &self,
        target: &ObjectRef,
        operation: &str,
        body: Bytes,
        timeout: Option<Duration>,
        md: &[ServiceContext],
    ) -> Result<Bytes, Exception> {
        self.check_request_size(body.len())?;
        let reply = self
            .inner
            .call_octets(target, operation, true, &body, timeout, md)?
            .ok_or_else(|| SystemException::internal("two-way call without reply"))?;
        octets_reply(reply)
    }

    /// [`invoke`](Self::invoke) with the request message itself: a small one is encoded
    /// straight into the request frame (no buffer of its own and no copy, where `encode` then
    /// `invoke` cost an allocation and a copy per call); a large one into its own buffer,
    /// which is then sent without a copy.
    pub(crate) fn invoke_message<M: prost::Message>(
        &self,
        target: &ObjectRef,
        operation: &str,
        req: &M,
        timeout: Option<Duration>,
        md: &[ServiceContext],
    ) -> Result<Bytes, Exception> {
        let len = req.encoded_len();
        if crate::octets::is_large(len) {
            return self.invoke_encoded(target, operation, req, timeout, md);
        }
        let write = |w: &mut CdrWriter<'_>| w.write_message(req);
        self.invoke_written(target, operation, &write, len, timeout, md)
    }

    /// The rest of [`invoke_message`](Self::invoke_message), not generic: one copy for all
    /// the stubs' operations, whose frames (which nested calls stack up) stay small.
    #[inline(never)]
    fn invoke_written(
        &self,
        target: &ObjectRef,
        operation: &str,
        write: &dyn Fn(&mut CdrWriter<'_>),
        len: usize,
        timeout: Option<Duration>,
        md: &[ServiceContext],
    ) -> Result<Bytes, Exception> {
        self.check_request_size(len)?;
        let reply = self
            .inner
            .call_written(target, operation, write, len, timeout, md)?
            .ok_or_else(|| SystemException::internal("two-way call without reply"))?;
        octets_reply(reply)
    }

    /// [`invoke_message`](Self::invoke_message) of a large message: encoded as parts (its
    /// large `bytes` field referenced where it lies, the rest in a buffer of its own), sent
    /// without a copy. Out of line, so that the stub's frame, which nested
    /// calls stack up, does not hold this path's locals.
    #[inline(never)]
    fn invoke_encoded<M: prost::Message>(
        &self,
        target: &ObjectRef,
        operation: &str,
        req: &M,
        timeout: Option<Duration>,
        md: &[ServiceContext],
    ) -> Result<Bytes, Exception> {
        let parts = crate::octets::encode_message_parts(req, req.encoded_len());
        self.check_request_size(crate::octets::len(&parts))?;
        let reply = self
            .inner
            .call_parts(target, operation, true, &parts, timeout, md)?
            .ok_or_else(|| SystemException::internal("two-way call without reply"))?;
        octets_reply(reply)
    }

    /// MARSHAL if a request body of `len` bytes is over the maximum message size.
    fn check_request_size(&self, len: usize) -> Result<(), SystemException> {
        let max = self.inner.config.max_message_size;
        if len > max {
            return Err(request_too_large(len, max));
        }
        Ok(())
    }

    /// A oneway call. Its deadline (`timeout`, else the ORB's call timeout, capped by the
    /// one inherited from the upcall being served) bounds what a oneway waits for: opening
    /// the connection and waiting for room in its outgoing queue. No reply is awaited.
    pub(crate) fn invoke_oneway(
        &self,
        target: &ObjectRef,
        operation: &str,
        body: Bytes,
        timeout: Option<Duration>,
        md: &[ServiceContext],
    ) -> Result<(), SystemException> {
        self.inner
            .call_octets(target, operation, false, &body, timeout, md)
            .map(|_| ())
    }

    /// [`invoke_oneway`](Self::invoke_oneway) with the request message itself: a large one
    /// in parts, its large `bytes` field not copied (`octets.rs`).
    pub(crate) fn invoke_oneway_message<M: prost::Message>(
        &self,
        target: &ObjectRef,
        operation: &str,
        req: &M,
        timeout: Option<Duration>,
        md: &[ServiceContext],
    ) -> Result<(), SystemException> {
        match crate::octets::encode_message(req) {
            Encoded::Whole(body) => self.invoke_oneway(target, operation, body, timeout, md),
            Encoded::Parts(parts) => self
                .inner
                .call_parts(target, operation, false, &parts, timeout, md)
                .map(|_| ()),
        }
    }

    pub(crate) fn is_a(&self, target: &ObjectRef, id: &str) -> Result<bool, SystemException> {
        let reply = self
            .inner
            .call(target, "_is_a", true, &|w| w.write_string(id), None, &[])?
            .ok_or_else(|| SystemException::internal("two-way call without reply"))?;
        bool_reply(&reply)
    }

    pub(crate) fn non_existent(&self, target: &ObjectRef) -> Result<bool, SystemException> {
        let reply = self
            .inner
            .call(target, "_non_existent", true, &|_| {}, None, &[])?
            .ok_or_else(|| SystemException::internal("two-way call without reply"))?;
        match bool_reply(&reply) {
            Err(e) if e.kind == SystemExceptionKind::OBJECT_NOT_EXIST => Ok(true),
            other => other,
        }
    }
}

/// The result of a two-way call with one octet-sequence result: the octets, the user
/// exception (id and octets), or the system exception the reply stands for.
pub(crate) fn octets_reply(reply: Reply) -> Result<Bytes, Exception> {
    match reply.header.status {
        ReplyStatus::NoException => reply.body.into_octets().map_err(bad_reply),
        _ => Err(exception_reply(reply)),
    }
}

/// MARSHAL for a NO_EXCEPTION reply whose result does not decode.
#[cold]
#[inline(never)]
fn bad_reply(e: crate::cdr::DecodeError) -> Exception {
    SystemException::marshal(minor::BAD_REPLY, CompletionStatus::Yes, e.to_string()).into()
}

/// The exception of a reply other than NO_EXCEPTION: the user exception (id and octets),
/// or the system exception the reply stands for. Out of line, so that the frame of a
/// waiting call (which nested calls stack up) does not hold its locals.
#[inline(never)]
fn exception_reply(reply: Reply) -> Exception {
    if reply.header.status != ReplyStatus::UserException {
        return reply_to_exception(&reply).into();
    }
    let mut r = reply.body.reader();
    let decoded = r.read_string().and_then(|id| {
        let range = r.read_octets_range()?;
        Ok((id, range))
    });
    match decoded {
        Ok((id, range)) => Exception::User(UserException::new(id, reply.body.bytes.slice(range))),
        Err(e) => SystemException::marshal(
            minor::BAD_REPLY,
            CompletionStatus::Yes,
            format!("user exception does not decode: {e}"),
        )
        .into(),
    }
}

pub(crate) fn bool_reply(reply: &Reply) -> Result<bool, SystemException> {
    match reply.header.status {
        ReplyStatus::NoException => reply.body.reader().read_bool().map_err(|e| {
            SystemException::marshal(minor::BAD_REPLY, CompletionStatus::Yes, e.to_string())
        }),
        _ => Err(reply_to_exception(reply)),
    }
}

/// The exception a non-NO_EXCEPTION reply stands for.
fn reply_to_exception(reply: &Reply) -> SystemException {
    match reply.header.status {
        ReplyStatus::SystemException => reply.system_exception(),
        ReplyStatus::UserException => SystemException::new(
            SystemExceptionKind::UNKNOWN,
            minor::UNKNOWN_EXCEPTION_ID,
            CompletionStatus::Yes,
        )
        .with_detail("unexpected user exception"),
        s => unsupported_status(s),
    }
}

impl OrbInner {
    /// Sends a request and, for two-way calls, waits for its reply (following forwards and
    /// retrying once on a connection the peer closed before answering).
    pub(crate) fn call(
        &self,
        target: &ObjectRef,
        operation: &str,
        twoway: bool,
        body: &dyn Fn(&mut CdrWriter<'_>),
        timeout: Option<Duration>,
        metadata: &[ServiceContext],
    ) -> Result<Option<Reply>, SystemException> {
        let params = Params {
            write: body,
            split: None,
            hint: 64,
            metadata,
        };
        self.call_with(target, operation, twoway, params, timeout)
    }

    /// [`call`](Self::call) whose parameters are one octet sequence (protobuf bytes): large
    /// ones are written from their own buffer instead of being copied into the frame.
    pub(crate) fn call_octets(
        &self,
        target: &ObjectRef,
        operation: &str,
        twoway: bool,
        octets: &Bytes,
        timeout: Option<Duration>,
        metadata: &[ServiceContext],
    ) -> Result<Option<Reply>, SystemException> {
        if crate::octets::is_large(octets.len()) {
            let parts = crate::octets::one_part(octets.clone());
            return self.call_parts(target, operation, twoway, &parts, timeout, metadata);
        }
        let body = |w: &mut CdrWriter<'_>| w.write_octets(octets);
        let params = Params {
            write: &body,
            split: None,
            hint: octets.len() + 8,
            metadata,
        };
        self.call_with(target, operation, twoway, params, timeout)
    }

    /// [`call_octets`](Self::call_octets) of a large octet sequence in parts, each written
    /// from its own buffer.
    pub(crate) fn call_parts(
        &self,
        target: &ObjectRef,
        operation: &str,
        twoway: bool,
        parts: &OctetParts,
        timeout: Option<Duration>,
        metadata: &[ServiceContext],
    ) -> Result<Option<Reply>, SystemException> {
        let body = |w: &mut CdrWriter<'_>| crate::octets::write_parts(w, parts);
        let params = Params {
            write: &body,
            split: Some(parts),
            hint: 0,
            metadata,
        };
        self.call_with(target, operation, twoway, params, timeout)
    }

    /// [`call`](Self::call) whose parameter `write` writes (a protobuf message of encoded
    /// length `len`, below [`SPLIT_BODY_AT`](crate::octets::SPLIT_BODY_AT), as an octet
    /// sequence) straight into the request frame: no buffer of its own, no copy.
    pub(crate) fn call_written(
        &self,
        target: &ObjectRef,
        operation: &str,
        write: &dyn Fn(&mut CdrWriter<'_>),
        len: usize,
        timeout: Option<Duration>,
        metadata: &[ServiceContext],
    ) -> Result<Option<Reply>, SystemException> {
        let params = Params {
            write,
            split: None,
            hint: len + 8,
            metadata,
        };
        self.call_with(target, operation, true, params, timeout)
    }

    fn call_with(
        &self,
        target: &ObjectRef,
        operation: &str,
        twoway: bool,
        params: Params<'_>,
        timeout: Option<Duration>,
    ) -> Result<Option<Reply>, SystemException> {
        if !self.config.interceptors.client.is_empty() {
            // Around the whole call, hops and resends included (`client/intercept.rs`).
            return self.call_intercepted(target, operation, twoway, params, timeout);
        }
        self.call_hops(target, operation, twoway, params, timeout)
    }

    /// [`call_with`](Self::call_with) without the interceptors.
    pub(super) fn call_hops(
        &self,
        target: &ObjectRef,
        operation: &str,
        twoway: bool,
        params: Params<'_>,
        timeout: Option<Duration>,
    ) -> Result<Option<Reply>, SystemException> {
        self.check_running()?;
        let (deadline, first) = Reading::deadline(timeout.unwrap_or(self.config.call_timeout));
        // Only a LOCATION_FORWARD makes a new target; the common path borrows the caller's.
        let mut forwarded: Option<ObjectRef> = None;
        let mut hops = 0;
        loop {
            let current = forwarded.as_ref().unwrap_or(target);
            // The clock read above stands for the send's too on the first attempt (the
            // DEADLINE context's remaining time), unless the send has to connect first.
            let clock = (hops == 0).then_some(first);
            let result = self.call_once(current, operation, twoway, params, deadline, clock);
            match result {
                Ok(Some(reply))
                    if matches!(
                        reply.header.status,
                        ReplyStatus::LocationForward | ReplyStatus::LocationForwardPerm
                    ) && hops < MAX_HOPS =>
                {
                    forwarded = Some(forward_target(&reply.body)?);
                    hops += 1;
                }
                Err(e)
                    if e.minor == minor::CLOSED_BY_PEER
                        && e.completed == CompletionStatus::No
                        && hops < MAX_HOPS
                        && Instant::now() < deadline =>
                {
                    // CloseConnection: the request was not processed; resend on a new
                    // connection (WIRE-GIOP §2.5).
                    hops += 1;
                }
                other => return other,
            }
        }
    }

    fn call_once(
        &self,
        target: &ObjectRef,
        operation: &str,
        twoway: bool,
        params: Params<'_>,
        deadline: Instant,
        clock: Option<Reading>,
    ) -> Result<Option<Reply>, SystemException> {
        if let Some(profile) = target.primary().filter(|p| self.is_collocated(p)) {
            return self.call_local(profile, operation, twoway, params, deadline);
        }
        let participant = twoway.then(Participant::bound);
        if let Some(p) = &participant {
            // A callback of this call that a pool thread reads comes to this thread
            // (`Lf::step_down_for`).
            p.in_chain(current_chain());
        }
        let waiter = participant.as_ref().map(|p| Waiter::Thread(p.clone()));
        let sent = self.send_request(target, operation, params, deadline, clock, waiter)?;
        let _enter = sent.span.enter();
        let Some(p) = participant else {
            return Ok(None);
        };
        let (conn, request_id) = (&sent.conn, sent.request_id);
        let exit = {
            let _suspended = self.suspend_dispatch();
            let until = match sent.clock {
                Some(r) => Until {
                    deadline,
                    now: r.now,
                },
                None => Until::from_now(deadline),
            };
            // The caller reads its own reply if it can (an idle client); else it waits in
            // the pool, which may make it leader.
            match self.read_own_reply(&p, conn, request_id, until) {
                OwnReply::Read(reply) => {
                    drop(_suspended);
                    Participant::recycle(p);
                    return Ok(Some(reply));
                }
                OwnReply::Wait(clock) => self.lf.run_from(&p, Some(deadline), clock, self),
            }
        };
        if exit != Exit::Completed && conn.mux.forget(request_id) {
            // Nobody will complete it now.
            return Err(self.call_abandoned(exit, conn, sent.version, request_id, operation));
        }
        // Completed, or completed while we were giving up: whoever removed the pending
        // entry fills the slot right after.
        match Participant::finish(p) {
            Some(Ok(Some(reply))) => Ok(Some(reply)),
            Some(Ok(None)) => Err(SystemException::internal("completed without a reply")),
            Some(Err(e)) => Err(e),
            None => Err(SystemException::internal(
                "reply slot empty after completion",
            )),
        }
    }

    /// The error of a call given up before its reply (`exit`: timed out or shut down), with
    /// the CancelRequest a timeout sends. Out of line: rare, and its formatting would
    /// otherwise sit in the frame of every waiting call, nested ones included.
    #[cold]
    #[inline(never)]
    fn call_abandoned(
        &self,
        exit: Exit,
        conn: &Arc<Connection>,
        version: Version,
        request_id: u32,
        operation: &str,
    ) -> SystemException {
        if exit != Exit::TimedOut {
            return SystemException::shutdown();
        }
        self.send_cancel(conn, version, request_id);
        tracing::debug!("call timed out; CancelRequest sent");
        SystemException::timeout(format!(
            "no reply to `{operation}` from {} within the deadline",
            conn.peer
        ))
    }

    /// Writes one request to `target` (connecting first if need be, as a Leader/Followers
    /// participant bounded by `deadline`), with `waiter` registered for its reply before it
    /// is sent (`None`: a oneway). What both a blocking call and an asynchronous one do
    /// before they wait, each in its own way. `clock`: a clock reading the caller took
    /// just before, with the time left as of it: the DEADLINE context's remaining time if
    /// the connection is there already (else the clock is read again once connected).
    pub(crate) fn send_request(
        &self,
        target: &ObjectRef,
        operation: &str,
        params: Params<'_>,
        deadline: Instant,
        clock: Option<Reading>,
        waiter: Option<Waiter>,
    ) -> Result<Sent, SystemException> {
        let twoway = waiter.is_some();
        let profile = target.primary().ok_or_else(|| {
            SystemException::new(SystemExceptionKind::INV_OBJREF, 0, CompletionStatus::No)
                .with_detail("the reference is nil or has no IIOP profile")
        })?;
        let version = profile.version.min(Version::V1_2);
        let (port, tls) = self.endpoint_of(profile)?;
        let bidir = target
            .arrived_over()
            .filter(|_| self.config.bidir_accept)
            .and_then(|id| self.bidir_route(id, &profile.host, port));
        let (conn, at_once) = match bidir {
            // Not remembered as this thread's last connection: only this reference, which
            // arrived over it, may use it.
            Some(c) => (c, true),
            None => self.connection_to(&profile.host, port, tls, deadline)?,
        };
        conn.note_version(version.minor);
        let thread = matches!(waiter, Some(Waiter::Thread(_)));
        // A process that listens can be called back within this call (`Lf::coming`).
        let coming = match &waiter {
            Some(Waiter::Thread(p)) if !self.listen_addrs.is_empty() => Some(p.clone()),
            _ => None,
        };
        let task = matches!(waiter, Some(Waiter::Task(_)));
        let request_id = match waiter {
            // Registered before the request is written (the reply can arrive first), and
            // given its id under the same lock.
            Some(w) => match conn.mux.register(|id| {
                if let Waiter::Thread(p) = &w {
                    p.will_await(id);
                }
                w
            }) {
                Ok(id) => id,
                Err(_) => return Err(Self::closed_before_sending(&conn)),
            },
            None => conn.mux.next_id(),
        };
        let span = tracing::debug_span!(
            "invoke",
            request_id,
            operation,
            peer = %conn.peer,
        );
        let _enter = span.enter();
        // The DEADLINE context (first among the contexts), written straight into the frame.
        let deadline_data = (twoway && version >= Version::V1_1).then(|| {
            let remaining = match clock.filter(|_| at_once) {
                Some(r) => r.left,
                None => deadline.saturating_duration_since(Instant::now()),
            };
            CallChain(current_chain()).deadline_data(Deadline(remaining))
        });
        // Holds contexts only on the one request per connection that announces BiDir, and on
        // requests with metadata.
        let first_contexts;
        let mut contexts: &[ServiceContext] = &[];
        let announce = self.config.bidir
            && version >= Version::V1_2
            && matches!(conn.origin, Origin::Outbound(..))
            && !self.listen_addrs.is_empty()
            && !conn.bidir_announced.swap(true, Ordering::AcqRel);
        if announce || !params.metadata.is_empty() {
            first_contexts = self.request_contexts(announce, params.metadata);
            contexts = &first_contexts;
        }
        let header = RequestHead {
            request_id,
            response_flags: if twoway { 0x03 } else { 0x00 },
            target: HeadTarget::Key(&profile.object_key),
            operation,
            deadline: deadline_data.as_ref(),
            service_context: contexts,
        };
        // Sized for the whole frame (header, contexts, inline body): growing it mid-write cost
        // more than the rest of encoding a small request (callgrind).
        let inline_body = match params.split {
            Some(_) => 0,
            None => params.hint,
        };
        let contexts_len: usize = contexts.iter().map(|c| c.data.len() + 12).sum::<usize>()
            + if deadline_data.is_some() { 32 } else { 0 };
        let hint = 64 + profile.object_key.len() + operation.len() + contexts_len + inline_body;
        if thread {
            self.lf.caller_will_wait(self);
        }
        // Announced before the request can reach the peer; withdrawn unless the send
        // succeeds (the caller then joins the pool, which takes it off the list).
        let mut coming = coming.map(|p| {
            let (id, chain) = (p.id, p.chain());
            self.lf.coming(p);
            NotComing {
                orb: self,
                id,
                chain,
                sent: false,
            }
        });
        let sent = match params.split {
            Some(b) => {
                // Large payload: write the head and length here, the octets from their own
                // buffers (no copy into the frame).
                let len = crate::octets::len(b);
                let parts = crate::transport::frame_parts(
                    |buf| write_request_head(buf, version, &header, |w| w.write_len(len)),
                    b,
                );
                self.send_or_wait(&conn, parts, task, || deadline)
            }
            // The whole frame, written from the thread's buffer if the connection is free.
            _ => self.send_encoded(
                &conn,
                hint,
                |buf| write_request_head(buf, version, &header, |w| (params.write)(w)),
                task,
                || deadline,
            ),
        };
        if let Err(e) = sent {
            conn.mux.forget(request_id);
            drop(coming);
            if thread {
                self.lf.did_not_wait(self);
            }
            return Err(e);
        }
        if let Some(c) = &mut coming {
            c.sent = true;
        }
        self.stats.requests_sent.fetch_add(1, Ordering::Relaxed);
        drop(_enter);
        Ok(Sent {
            conn,
            request_id,
            clock: clock.filter(|_| at_once),
            version,
            span,
        })
    }

    /// Why a request could not be registered on `conn`, which closed since it was picked.
    #[cold]
    fn closed_before_sending(conn: &Connection) -> SystemException {
        if let Some(refused) = crate::transport::tls_refusal(conn) {
            // Closed because the server's TLS refused our certificate: another connection
            // would be refused too.
            return refused;
        }
        // Nothing was sent, so it is resent on a new connection, as after a CloseConnection
        // (see `call_with`).
        SystemException::new(
            SystemExceptionKind::COMM_FAILURE,
            minor::CLOSED_BY_PEER,
            CompletionStatus::No,
        )
        .with_detail(format!(
            "connection to {} closed before the request was sent",
            conn.peer
        ))
    }

    /// The service contexts of a request that has any besides the DEADLINE: the BiDir
    /// listen points if it `announce`s them, then the caller's metadata. Out of line, so
    /// that the common request (none) does not carry its locals in its frame.
    #[inline(never)]
    fn request_contexts(&self, announce: bool, metadata: &[ServiceContext]) -> Vec<ServiceContext> {
        let mut contexts = Vec::with_capacity(metadata.len() + usize::from(announce));
        if announce {
            // Once per connection, as omniORB does: the peer may call our objects back
            // over this connection instead of opening one to us.
            let points = self
                .listen_addrs
                .iter()
                .map(|a| (self.host.clone(), a.port()))
                .collect();
            contexts.push(BiDirListenPoints(points).to_context());
        }
        contexts.extend_from_slice(metadata);
        contexts
    }

    /// The port to call `profile` at, and whether over TLS: the TAG_SSL_SEC_TRANS port when
    /// the profile has one and this ORB speaks TLS, else the plain port. A TLS-only profile
    /// (plain port 0) without TLS here is NO_PERMISSION: we will not send it plaintext.
    /// Without TLS here and with a plain port, the components are not even looked at.
    #[inline]
    fn endpoint_of(&self, profile: &IiopProfile) -> Result<(u16, bool), SystemException> {
        if self.config.tls.is_none() && profile.port != 0 {
            return Ok((profile.port, false));
        }
        match profile.ssl() {
            Some(ssl) if self.config.tls.is_some() => Ok((ssl.port, true)),
            Some(_) if profile.port == 0 => Err(SystemException::new(
                SystemExceptionKind::NO_PERMISSION,
                minor::TLS_REQUIRED,
                CompletionStatus::No,
            )
            .with_detail(format!(
                "{} accepts TLS only, and this ORB has no TlsConfig (OrbBuilder::tls)",
                profile.host
            ))),
            _ if profile.port == 0 => {
                Err(
                    SystemException::new(SystemExceptionKind::INV_OBJREF, 0, CompletionStatus::No)
                        .with_detail("the reference's IIOP profile has port 0 and no TLS port"),
                )
            }
            _ => Ok((profile.port, false)),
        }
    }

    /// The shared connection to `host:port`, opening it if needed. No lock is held across
    /// DNS or the connect: the endpoint's slot is locked only to look and to publish a
    /// connection whose non-blocking connect has started, and the caller waits for the
    /// handshake as a Leader/Followers participant, bounded by its deadline. With it, whether
    /// it was found at once (this thread's last connection), without any wait.
    fn connection_to(
        &self,
        host: &str,
        port: u16,
        tls: bool,
        deadline: Instant,
    ) -> Result<(Arc<Connection>, bool), SystemException> {
        if let Some(c) = crate::endpoints::last_connection(self.id, host, port) {
            return Ok((c, true));
        }
        self.shared_connection_to(host, port, tls, deadline)
            .map(|c| (c, false))
    }

    /// [`connection_to`](Self::connection_to) past the thread's last connection: the
    /// endpoint table, and the connect if needed. Out of line: inlined, its locals (the
    /// connect, TLS set-up) made every call's `send_request` frame 5.5 KiB, each page of it
    /// probed on every call.
    #[cold]
    #[inline(never)]
    fn shared_connection_to(
        &self,
        host: &str,
        port: u16,
        tls: bool,
        deadline: Instant,
    ) -> Result<Arc<Connection>, SystemException> {
        let slot = self.outbound.slot(host, port);
        let open = lock(&slot).clone().filter(|c| !c.is_closed());
        let result = match open {
            Some(c) => self.wait_connected(&c, deadline).map(|()| c),
            None => self.connect(&slot, host, port, tls, deadline),
        };
        drop(slot);
        match &result {
            Ok(c) => crate::endpoints::remember_connection(self.id, host, port, c),
            // Do not keep an entry per unreachable endpoint (references arrive from peers).
            Err(_) => self.outbound.forget_unused(host, port),
        }
        result
    }

    /// Opens a connection to `host:port` and publishes it in `slot`: each address in turn,
    /// until one connects, within `connect_timeout` each and the caller's deadline in all.
    /// DNS runs in the calling thread, holding no lock.
    fn connect(
        &self,
        slot: &EndpointSlot,
        host: &str,
        port: u16,
        tls: bool,
        deadline: Instant,
    ) -> Result<Arc<Connection>, SystemException> {
        self.check_running()?;
        let addrs: Vec<SocketAddr> = (host, port)
            .to_socket_addrs()
            .map_err(|e| {
                SystemException::transient(
                    minor::CONNECT_FAILED,
                    format!("cannot resolve {host}:{port}: {e}"),
                )
            })?
            .collect();
        let mut why = "no address".to_string();
        for a in addrs {
            let timeout = self
                .config
                .connect_timeout
                .min(deadline.saturating_duration_since(Instant::now()));
            if timeout.is_zero() {
                why = "the deadline passed".into();
                break;
            }
            let conn = {
                let mut s = lock(slot);
                if let Some(c) = s.as_ref().filter(|c| !c.is_closed()) {
                    // Another caller opened one meanwhile: share it.
                    let c = c.clone();
                    drop(s);
                    self.wait_connected(&c, deadline)?;
                    return Ok(c);
                }
                // Returns at once (EINPROGRESS); the reactor sees the handshake end.
                let stream = match mio::net::TcpStream::connect(a) {
                    Ok(st) => std::net::TcpStream::from(st),
                    Err(e) => {
                        why = e.to_string();
                        continue;
                    }
                };
                let stream = match self.config.tls.as_ref().filter(|_| tls) {
                    // The handshake starts once the TCP connect is done (`finish_connect`);
                    // the server's certificate must name `host`.
                    Some(cfg) => match TlsStream::client(stream, cfg.client.clone(), host) {
                        Ok(t) => Stream::Tls(Box::new(t)),
                        Err(e) => {
                            return Err(SystemException::transient(
                                minor::TLS_HANDSHAKE_FAILED,
                                format!("TLS to {host}:{port}: {e}"),
                            ))
                        }
                    },
                    None => Stream::Plain(stream),
                };
                let conn = self
                    .add_connecting(stream, a, Origin::Outbound(host.to_string(), port))
                    .map_err(|e| {
                        SystemException::transient(
                            minor::CONNECT_FAILED,
                            format!("register {a}: {e}"),
                        )
                    })?;
                *s = Some(conn.clone());
                conn
            };
            match self.wait_connected(&conn, Instant::now() + timeout) {
                Ok(()) => {
                    if self.shutting_down.load(Ordering::Acquire) {
                        self.close_connection(&conn, CloseCause::Shutdown);
                        return Err(SystemException::shutdown());
                    }
                    return Ok(conn);
                }
                Err(e) if e.kind == SystemExceptionKind::TIMEOUT => {
                    why = format!("timed out after {} ms", timeout.as_millis());
                    // Gives up this attempt; whoever shares it sees TRANSIENT completed NO.
                    self.close_connection(&conn, CloseCause::Io(why.clone()));
                }
                Err(e) if e.minor == minor::CONNECT_FAILED => {
                    why = e.detail().unwrap_or("connect failed").to_string();
                }
                Err(e) => return Err(e),
            }
        }
        let detail = format!("cannot connect to {host}:{port}: {why}");
        if Instant::now() >= deadline {
            // The call's own deadline ended the attempt; nothing was sent.
            return Err(SystemException::new(
                SystemExceptionKind::TIMEOUT,
                minor::DEADLINE,
                CompletionStatus::No,
            )
            .with_detail(detail));
        }
        Err(SystemException::transient(minor::CONNECT_FAILED, detail))
    }
}

/// MARSHAL for a request body of `len` bytes over the maximum message size `max`.
#[cold]
#[inline(never)]
fn request_too_large(len: usize, max: usize) -> SystemException {
    SystemException::marshal(
        minor::MESSAGE_TOO_LARGE,
        CompletionStatus::No,
        format!("request of {len} bytes exceeds the maximum message size {max}"),
    )
}

/// Decodes an inline IOR from a LOCATION_FORWARD body.
#[inline(never)]
pub(crate) fn forward_target(body: &crate::giop::Body) -> Result<ObjectRef, SystemException> {
    let mut r = body.reader();
    ObjectRef::decode(&mut r).map_err(|e| {
        SystemException::marshal(minor::BAD_REPLY, CompletionStatus::No, e.to_string())
    })
}

/// Withdraws a caller's [`Lf::coming`](crate::lf::Lf::coming) when dropped: on a failed
/// send, and on a panic between the announcement and the send's end (else a callback of
/// its chain could be set aside for a thread that never comes). Not once the request is
/// `sent`. Holds the participant's id and chain, not the participant (no reference count
/// moved per call).
struct NotComing<'a> {
    orb: &'a OrbInner,
    id: u64,
    chain: u64,
    sent: bool,
}

impl Drop for NotComing<'_> {
    fn drop(&mut self) {
        if !self.sent {
            self.orb.lf.not_coming(self.id, self.chain, self.orb);
        }
    }
}
