//! What the client and the server share about connections: opening one (a non-blocking
//! connect the caller waits for as a Leader/Followers participant), registering and
//! closing one (the one place a close cause becomes the exception its waiters see), sending
//! frames without ever blocking the leader (and, for other threads, waiting for a drain),
//! and the BiDir route of an outgoing call. `client/` and `server/` (the
//! leader and upcalls) both build on it; neither imports the other for it.

use crate::connection::{CloseCause, ConnectState, Connection, Flush, Origin, WriteInterest};
use crate::exception::{minor, CompletionStatus, SystemException, SystemExceptionKind};
use crate::giop::Version;
use crate::lf::{Participant, Waiter};
use crate::orb::OrbInner;
use crate::outbuf;
use crate::reactor::{Entry, Reactor};
use crate::stream::Stream;
use crate::tls::stream::{Handshake, TlsStream};
use crate::upcall::current_upcall_connection;
use bytes::{Bytes, BytesMut};
use mio::Interest;
use std::io;
use std::net::Shutdown;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A frame as (head, body...) parts: `write_head` writes the head, ending with the octet
/// sequence's length, and the GIOP size is patched to cover `body`, which follows the head on
/// the wire uncopied.
pub(crate) fn frame_parts(
    write_head: impl FnOnce(&mut BytesMut),
    body: &crate::octets::OctetParts,
) -> [Bytes; 4] {
    let len = crate::octets::len(body);
    let head = outbuf::encode(64, |head| {
        write_head(head);
        let size = (head.len() - crate::giop::HEADER_LEN + len) as u32;
        crate::giop::Header::patch_size(head, 0, crate::cdr::ByteOrder::NATIVE, size);
    });
    let [a, b, c] = body.clone();
    [head, a, b, c]
}

/// The reactor is the connections' event loop: their writable interest is the socket's
/// registration.
impl<E: Clone> WriteInterest<Stream> for Reactor<E> {
    fn set_writable(&self, io: &Stream, token: usize, writable: bool) -> io::Result<()> {
        Reactor::set_writable(self, io.socket(), token, writable)
    }
}

impl OrbInner {
    /// Reads a connection whose reading was stopped (by either back-pressure) again: puts it
    /// on the ready list and wakes the leader's poll.
    pub(crate) fn resume_reading(&self, conn: &Arc<Connection>) {
        self.reactor.push_ready(conn.clone());
        self.reactor.wake();
    }

    /// Registers a connected, non-blocking socket with the reactor; with TLS on our
    /// listener, an accepted one starts its TLS handshake (driven on its events).
    pub(crate) fn add_connection(
        &self,
        s: std::net::TcpStream,
        peer: std::net::SocketAddr,
        origin: Origin,
    ) -> io::Result<Arc<Connection>> {
        s.set_nonblocking(true)?;
        let stream = match self.config.tls.as_ref().and_then(|t| t.server.clone()) {
            Some(server) if origin == Origin::Inbound => Stream::Tls(Box::new(
                TlsStream::server(s, server).map_err(io::Error::other)?,
            )),
            _ => Stream::Plain(s),
        };
        self.register_connection(stream, peer, origin, false)
    }

    /// Registers a non-blocking socket whose connect is under way: the reactor watches it for
    /// writable, and [`finish_connect`](Self::finish_connect) completes the handshake, so no
    /// thread blocks in `connect` (callers wait in [`wait_connected`](Self::wait_connected)).
    pub(crate) fn add_connecting(
        &self,
        s: Stream,
        peer: std::net::SocketAddr,
        origin: Origin,
    ) -> io::Result<Arc<Connection>> {
        self.register_connection(s, peer, origin, true)
    }

    fn register_connection(
        &self,
        s: Stream,
        peer: std::net::SocketAddr,
        origin: Origin,
        connecting: bool,
    ) -> io::Result<Arc<Connection>> {
        let max = self.config.max_message_size;
        // A TLS handshake writes as it reads: watched for writable events like a connect.
        let handshake = s.tls().is_some();
        let conn = self.reactor.insert(|token| {
            let c = Arc::new(Connection::new(token, s, peer, origin, max));
            if connecting {
                c.set_connecting();
            } else if handshake {
                c.set_writable_interest();
            }
            (Entry::Conn(c.clone()), c)
        });
        let interest = if connecting || handshake {
            Interest::READABLE | Interest::WRITABLE
        } else {
            Interest::READABLE
        };
        if let Err(e) = self.reactor.register(conn.socket(), conn.token, interest) {
            self.reactor.remove(conn.token);
            return Err(e);
        }
        self.stats.connections_open.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(%peer, origin = ?conn.origin, connecting, "connection open");
        if !connecting {
            // Bytes may have arrived before registration; look once.
            self.reactor.push_ready(conn.clone());
            self.reactor.wake();
        }
        Ok(conn)
    }

    /// On an event of a connection that does not carry messages yet (our connect under way,
    /// or its TLS handshake): moves it on, and returns whether it carries messages now.
    /// Completes the connect waiters once the connect (and the TLS handshake, if any) is
    /// done; closes the connection if either failed (its waiters then see TRANSIENT
    /// completed NO). Never blocks: a handshake only reads and writes what the socket has.
    pub(crate) fn finish_connect(&self, c: &Arc<Connection>) -> bool {
        if c.is_closed() {
            // An event polled before its close: nothing to move on (nor to count twice).
            return false;
        }
        if c.is_connecting() && !c.tcp_connected() {
            let failed = match c.socket().take_error() {
                Ok(None) => match c.socket().peer_addr() {
                    Ok(_) => None,
                    Err(e) if e.kind() == io::ErrorKind::NotConnected => return false,
                    Err(e) => Some(e),
                },
                Ok(Some(e)) | Err(e) => Some(e),
            };
            if let Some(e) = failed {
                self.close_connection(c, CloseCause::Io(e.to_string()));
                return false;
            }
            let _ = c.socket().set_nodelay(true);
            c.set_tcp_connected();
        }
        if let Some(tls) = c.stream().tls().filter(|t| t.is_handshaking()) {
            match tls.drive_handshake() {
                Handshake::InProgress => {
                    if tls.wants_write_call() {
                        // Its records wait for the socket: the writable event sends them.
                        self.flush(c);
                    }
                    return false;
                }
                Handshake::Failed(why) => {
                    self.stats
                        .tls_handshake_failures
                        .fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(peer = %c.peer, error = %why, "TLS handshake failed");
                    self.close_connection(
                        c,
                        CloseCause::Io(format!("TLS handshake failed: {why}")),
                    );
                    return false;
                }
                Handshake::Done => {
                    self.stats.tls_handshakes.fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(peer = %c.peer, identity = ?c.stream().peer_identity().map(|i| i.subject().to_owned()), "TLS handshake done");
                    // Records that came with the handshake's end are decrypted already: read
                    // them without waiting for an edge that will not come.
                    c.mark_readable(false);
                    self.reactor.push_ready(c.clone());
                }
            }
        }
        if c.is_connecting() {
            self.stats
                .connections_opened
                .fetch_add(1, Ordering::Relaxed);
            tracing::debug!(peer = %c.peer, "connected");
            for w in c.connected() {
                self.lf.complete(&w, Ok(None), None, self);
            }
        }
        if c.stream().tls().is_some() {
            // Frames queued during the handshake leave now, and the writable interest it
            // needed is dropped once done. (A plain connect ends on the writable event,
            // whose own flush does this.)
            self.flush(c);
        }
        true
    }

    /// Waits until our connect of `conn` has finished, as a bound Leader/Followers
    /// participant (so this thread leads and serves others meanwhile), at most until
    /// `deadline`. Returns at once on a connection that is connected. An error is the
    /// failure the close mapped (TRANSIENT completed NO), TIMEOUT, or the shutdown.
    pub(crate) fn wait_connected(
        &self,
        conn: &Arc<Connection>,
        deadline: Instant,
    ) -> Result<(), SystemException> {
        if !conn.is_connecting() {
            return Ok(());
        }
        let p = Participant::bound();
        match conn.add_connect_waiter(&p) {
            ConnectState::Connected => return Ok(()),
            ConnectState::Closed => {
                // Closed before this caller came to wait (its TLS handshake failed, say):
                // the reason the close noted.
                let why = conn
                    .close_reason()
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default();
                return Err(SystemException::transient(
                    minor::CONNECT_FAILED,
                    format!("connection to {} closed while connecting{why}", conn.peer),
                ));
            }
            ConnectState::Connecting => {}
        }
        let exit = {
            // A nested call's connect is a wait like its reply's (see `suspend_dispatch`).
            let _suspended = self.suspend_dispatch();
            self.lf.run(&p, Some(deadline), self)
        };
        conn.remove_connect_waiter(p.id);
        match (p.take(), exit) {
            (Some(Err(e)), _) => Err(e),
            (Some(Ok(_)), _) => Ok(()),
            (None, crate::lf::Exit::Shutdown) => Err(SystemException::shutdown()),
            // Finished as the wait ended.
            (None, _) if !conn.is_connecting() && !conn.is_closed() => Ok(()),
            // Nothing was sent: completed NO.
            (None, _) => Err(SystemException::new(
                SystemExceptionKind::TIMEOUT,
                minor::DEADLINE,
                CompletionStatus::No,
            )
            .with_detail(format!("connect to {} did not finish in time", conn.peer))),
        }
    }

    pub(crate) fn flush(&self, c: &Arc<Connection>) {
        let r = c.flush(&self.stats, &self.reactor);
        self.after_write(c, r);
    }

    /// After a write of the outgoing queue: lets senders waiting for it to drain go on, or
    /// closes the connection on a write error.
    pub(crate) fn after_write(&self, c: &Arc<Connection>, r: io::Result<Flush>) {
        match r {
            Ok(_) => {
                if c.queued_bytes() <= self.config.max_queued_bytes {
                    let waiters = c.take_drain_waiters();
                    for w in waiters {
                        self.lf.complete(&w, Ok(None), None, self);
                    }
                    if c.write_block.resume() {
                        // Read it again (see `service`).
                        self.resume_reading(c);
                    }
                }
            }
            Err(e) => self.close_connection(c, CloseCause::Io(e.to_string())),
        }
    }

    /// The inbound connection to call `host:port` over, for a reference that arrived over
    /// connection `arrived_over`: that connection, if its peer announced this endpoint as a
    /// BiDir listen point and it is still open.
    pub(crate) fn bidir_route(
        &self,
        arrived_over: u64,
        host: &str,
        port: u16,
    ) -> Option<Arc<Connection>> {
        self.bidir_routes.route(arrived_over, host, port)
    }

    /// Sends a whole frame on `conn` at once ([`send_now`](Self::send_now)).
    pub(crate) fn send_frame(
        &self,
        conn: &Arc<Connection>,
        frame: Bytes,
    ) -> Result<(), SystemException> {
        self.send_now(conn, [frame, Bytes::new()])
    }

    /// Sends a frame given as head and body parts (see [`frame_parts`]) without ever
    /// waiting: what the socket does not take is queued, whatever the queue holds. The
    /// leader's send: the queue it adds to stays bounded because a connection over its
    /// bound is not read (see the module docs). A failure closes the connection.
    pub(crate) fn send_now<const N: usize>(
        &self,
        conn: &Arc<Connection>,
        parts: [Bytes; N],
    ) -> Result<(), SystemException> {
        match conn.send_parts(parts, &self.stats, &self.reactor) {
            Ok(_) => {
                self.after_send(conn);
                Ok(())
            }
            Err(e) => Err(self.write_failed(conn, e)),
        }
    }

    /// After a frame was sent or queued on `conn`: if bytes are left queued (behind a full
    /// socket, or for another thread writing), the writable event may be needed while no
    /// thread watches the loop (the role left vacant unarmed in tick mode): it is armed
    /// ([`Lf::expect_event`](crate::lf::Lf::expect_event)). Two loads when nothing is
    /// left queued, one more when something is and no vacancy is unarmed.
    #[inline]
    fn after_send(&self, conn: &Arc<Connection>) {
        if !conn.needs_no_writable_event() {
            self.lf.expect_event(self);
        }
    }

    /// A write to `conn` failed: closes it, and says why to the sender.
    #[cold]
    fn write_failed(&self, conn: &Arc<Connection>, e: io::Error) -> SystemException {
        let detail = format!("write to {} failed: {e}", conn.peer);
        self.close_connection(conn, CloseCause::Io(e.to_string()));
        // Closed because the server's TLS refused our certificate: say so (nothing was
        // processed), not that a write failed.
        tls_refusal(conn).unwrap_or_else(|| SystemException::comm_failure(detail))
    }

    /// Sends a whole frame on `conn`, by a thread that is not the leader (an upcall's reply,
    /// a caller's request); a failure closes the connection. Makes room first (see
    /// [`make_room`](Self::make_room)). Never called inside
    /// [`Driver::lead`](crate::lf::Driver::lead).
    pub(crate) fn send_or_wait<const N: usize>(
        &self,
        conn: &Arc<Connection>,
        parts: [Bytes; N],
        queued: bool,
        deadline: impl FnOnce() -> Instant,
    ) -> Result<(), SystemException> {
        self.make_room(conn, queued, deadline)?;
        self.send_now(conn, parts)
    }

    /// [`send_or_wait`](Self::send_or_wait) for a frame encoded by `encode` (room for
    /// `hint` bytes) in this thread's buffer: a connection nobody is writing is written from
    /// that buffer directly (`outbuf::encode_offer`), a busy one queues the frame as `Bytes`.
    pub(crate) fn send_encoded(
        &self,
        conn: &Arc<Connection>,
        hint: usize,
        encode: impl FnOnce(&mut BytesMut),
        queued: bool,
        deadline: impl FnOnce() -> Instant,
    ) -> Result<(), SystemException> {
        self.make_room(conn, queued, deadline)?;
        let offered = outbuf::encode_offer(hint, encode, |frame| {
            conn.send_borrowed(frame, &self.stats, &self.reactor)
        });
        match offered {
            Ok(None) => {
                self.after_send(conn);
                Ok(())
            }
            Ok(Some(frame)) => self.send_now(conn, [frame, Bytes::new()]),
            Err(e) => Err(self.write_failed(conn, e)),
        }
    }

    /// [`send_encoded`](Self::send_encoded) for a frame encoded already, in `frame` (an
    /// upcall's reply with its result encoded in place, `result_slot.rs`): written from
    /// there if nobody is writing `conn`, else split off as `Bytes` and queued. What is left
    /// in `frame` afterwards is spare room.
    pub(crate) fn send_from(
        &self,
        conn: &Arc<Connection>,
        frame: &mut BytesMut,
        queued: bool,
        deadline: impl FnOnce() -> Instant,
    ) -> Result<(), SystemException> {
        self.make_room(conn, queued, deadline)?;
        match conn.send_borrowed(frame, &self.stats, &self.reactor) {
            Ok(true) => {
                self.after_send(conn);
                Ok(())
            }
            Ok(false) => self.send_now(conn, [frame.split().freeze(), Bytes::new()]),
            Err(e) => Err(self.write_failed(conn, e)),
        }
    }

    /// Before a sender that is not the leader adds a frame to `conn`: a frame is accepted
    /// while the outgoing queue is under its bound (a soft bound: one frame may take it
    /// over); over it, this thread first waits (as a bound Leader/Followers participant, so
    /// it can lead and flush meanwhile) until the queue drains, at most until `deadline()`
    /// (only asked then: a clock read per reply otherwise).
    ///
    /// A sender that may wait next (a blocking caller, for its reply) ends a kept hold
    /// first, not to sit behind it (a driver's lasts until the driver's next poll, a batch's
    /// until the batch's last dispatch). A sender that waits for nothing once its frame is
    /// queued (`queued`: an asynchronous call's request, which may go out with the other
    /// requests of the tasks a driver's turn woke (`Connection::keep_hold`); an upcall's
    /// reply with reply batching on, which may go out with the replies to one read's
    /// requests (`Connection::hold_for_batch`)) leaves the hold in place, unless the queue
    /// is over its bound: then it ends it, so that the queue can drain while it waits.
    #[inline]
    fn make_room(
        &self,
        conn: &Arc<Connection>,
        queued: bool,
        deadline: impl FnOnce() -> Instant,
    ) -> Result<(), SystemException> {
        if !queued {
            self.end_kept_hold(conn);
        }
        if conn.queued_bytes() > self.config.max_queued_bytes {
            if queued {
                self.end_kept_hold(conn);
            }
            self.wait_drain(conn, deadline())?;
        }
        Ok(())
    }

    /// Ends a kept hold of `conn`'s writes (an event-loop driver's, or one for a batch of
    /// replies), if one is kept, sending what queued behind it. Inlined down to the one
    /// load that finds none: asked for every frame a leader takes and every blocking send
    /// (a call about 20 instructions a side in `lat` otherwise, since reply batching is on
    /// by default).
    #[inline]
    pub(crate) fn end_kept_hold(&self, conn: &Arc<Connection>) {
        if conn.hold_is_kept() {
            self.end_hold_kept(conn);
        }
    }

    /// [`end_kept_hold`](Self::end_kept_hold) once a hold was seen.
    #[inline(never)]
    fn end_hold_kept(&self, conn: &Arc<Connection>) {
        if let Some(r) = conn.end_kept_hold(&self.stats, &self.reactor) {
            self.after_write(conn, r);
        }
    }

    /// Waits until `conn`'s outgoing queue is under its bound, or `deadline`.
    fn wait_drain(&self, conn: &Arc<Connection>, deadline: Instant) -> Result<(), SystemException> {
        let p = Participant::bound();
        conn.add_drain_waiter(&p);
        // Registered first, then watched: a drain after this check raises the writable
        // event whose flush (`after_write`) completes the waiters.
        if !conn.watch_drain(self.config.max_queued_bytes) {
            conn.remove_drain_waiter(p.id);
            return Ok(());
        }
        let exit = self.lf.run(&p, Some(deadline), self);
        conn.remove_drain_waiter(p.id);
        match (exit, p.take()) {
            (_, Some(Err(e))) => Err(e),
            (_, Some(Ok(_))) | (crate::lf::Exit::Completed, None) => Ok(()),
            (crate::lf::Exit::Shutdown, None) => Err(SystemException::shutdown()),
            (crate::lf::Exit::TimedOut, None) => Err(SystemException::timeout(format!(
                "outgoing queue to {} did not drain before the deadline",
                conn.peer
            ))),
        }
    }

    /// Tells the peer we no longer wait for the reply to `request_id` (GIOP CancelRequest,
    /// best effort, never waiting): a blocking call that timed out, an asynchronous one
    /// whose deadline passed or whose future was dropped. Its reply, if it still comes, is
    /// late: dropped and counted.
    pub(crate) fn send_cancel(&self, conn: &Arc<Connection>, version: Version, request_id: u32) {
        let mut c = BytesMut::with_capacity(16);
        crate::giop::write_cancel_request(&mut c, version, request_id);
        let _ = self.send_frame(conn, c.freeze());
    }

    /// Fails the asynchronous calls whose deadline is due at `now` with TIMEOUT and cancels
    /// them at the peer (the leader, from its timers; [`send_now`](Self::send_now) only, so
    /// it never waits). A call whose reply, close or drop came first is left alone: the
    /// connection's `Mux` hands each waiter out once.
    pub(crate) fn expire_calls(&self, now: Instant) {
        for due in self.call_deadlines.take_due(now) {
            let (conn, request_id, version) = match due {
                crate::orb::CallDeadline::Remote(c, id, v) => (c, id, v),
                crate::orb::CallDeadline::Local(slot, deferred, operation) => {
                    // A collocated call's deferred answer that has not come: the request is
                    // marked cancelled, and the answer, if it still comes, dropped.
                    if deferred.give_up() {
                        slot.complete(Err(SystemException::timeout(format!(
                            "no deferred reply to collocated `{operation}` within the deadline"
                        ))));
                    }
                    continue;
                }
            };
            let Some(w) = conn.mux.expire(request_id) else {
                continue;
            };
            self.send_cancel(&conn, version, request_id);
            tracing::debug!(request_id, peer = %conn.peer, "asynchronous call timed out; CancelRequest sent");
            let exc = SystemException::timeout(format!(
                "no reply to request {request_id} from {} within the deadline",
                conn.peer
            ));
            self.lf.complete_waiter(&w, Err(exc), None, self);
        }
    }

    /// Best-effort CloseConnection before an orderly close, in the connection's version,
    /// where GIOP lets us send it (a client of a 1.0 or 1.1 connection only closes; see
    /// [`Connection::may_send_close_connection`]).
    pub(crate) fn send_close_connection(&self, conn: &Arc<Connection>) {
        if !conn.may_send_close_connection() {
            return;
        }
        let version = conn.version().unwrap_or(Version::V1_2);
        let mut buf = BytesMut::with_capacity(12);
        crate::giop::write_close_connection(&mut buf, version);
        if conn.send(buf.freeze(), &self.stats, &self.reactor).is_ok() {
            conn.flush_before_close(&self.stats, &self.reactor);
        }
    }

    /// Closes a connection at shutdown. One that owes no reply gets CloseConnection first, so
    /// that its peer knows nothing unanswered was processed and may resend it. One whose
    /// upcalls still run (or whose replies are not sent yet) is closed without it, which
    /// would tell the peer those requests were not processed and invite it to run them
    /// twice: its callers see the connection end, COMM_FAILURE completed MAYBE, and the
    /// replies of those upcalls go nowhere. Its socket is shut down at once (FIN); with
    /// SO_LINGER 0, the final close, when the last upcall holding the connection ends,
    /// resets rather than lingers.
    pub(crate) fn close_for_shutdown(&self, conn: &Arc<Connection>) {
        if conn.owed.is_empty() && conn.dispatch.dispatching() == 0 {
            self.send_close_connection(conn);
        } else {
            tracing::debug!(peer = %conn.peer, "upcalls still running at shutdown: closed without CloseConnection");
            // Linger 0: the final close sends RST and drops what is queued.
            let _ = rustix::net::sockopt::set_socket_linger(conn.socket(), Some(Duration::ZERO));
        }
        self.close_connection(conn, CloseCause::Shutdown);
    }

    /// Closes a connection once: forgets it, shuts the socket, cancels its running upcalls and
    /// wakes every waiter on it with the exception its cause maps to.
    pub(crate) fn close_connection(&self, conn: &Arc<Connection>, cause: CloseCause) {
        if let CloseCause::Io(e) = &cause {
            // Before the close is visible: a caller that then finds it closed reads it.
            conn.set_close_reason(e.clone());
        }
        if !conn.mark_closed() {
            return;
        }
        self.reactor.deregister(conn.socket());
        self.reactor.remove(conn.token);
        let _ = conn.socket().shutdown(Shutdown::Both);
        self.stats.connections_open.fetch_sub(1, Ordering::Relaxed);
        if conn.origin == Origin::Inbound {
            self.housekeeping.inbound_closed();
        }
        conn.forget_buffered(&self.stats);
        // Forget it: in the connection cache if we opened it, among the BiDir connections
        // if the peer did.
        match &conn.origin {
            Origin::Outbound(host, port) => {
                self.outbound.closed(host, *port, conn);
            }
            Origin::Inbound => {
                self.bidir_routes.forget(conn.id);
            }
        }
        conn.owed.cancel_all();
        // The server's TLS refused our certificate: nothing we sent was processed.
        let exc = tls_refusal(conn).unwrap_or_else(|| match &cause {
            _ if conn.is_connecting() => SystemException::transient(
                minor::CONNECT_FAILED,
                match &cause {
                    CloseCause::Io(e) => format!("cannot connect to {}: {e}", conn.peer),
                    _ => format!("connection to {} closed while connecting", conn.peer),
                },
            ),
            CloseCause::PeerClosed => SystemException::new(
                SystemExceptionKind::COMM_FAILURE,
                minor::CLOSED_BY_PEER,
                CompletionStatus::No,
            )
            .with_detail(format!(
                "{} closed the connection (CloseConnection)",
                conn.peer
            )),
            CloseCause::Shutdown => SystemException::shutdown(),
            CloseCause::Io(e) => {
                SystemException::comm_failure(format!("connection to {} lost: {e}", conn.peer))
            }
            CloseCause::Protocol(e) => SystemException::comm_failure(format!(
                "connection to {} closed after a protocol error: {e}",
                conn.peer
            )),
            CloseCause::PeerMessageError => {
                SystemException::comm_failure(format!("{} sent MessageError", conn.peer))
            }
        });
        let mut waiters = conn.mux.close();
        waiters.extend(conn.take_drain_waiters().into_iter().map(Waiter::Thread));
        waiters.extend(conn.take_connect_waiters().into_iter().map(Waiter::Thread));
        tracing::debug!(peer = %conn.peer, ?cause, waiters = waiters.len(), "connection closed");
        for w in waiters {
            self.lf.complete_waiter(&w, Err(exc.clone()), None, self);
        }
    }
}

/// The exception for a connection whose peer refused our TLS certificate (its alert said so),
/// if it did: NO_PERMISSION, completed NO.
pub(crate) fn tls_refusal(conn: &Connection) -> Option<SystemException> {
    let why = conn.stream().tls()?.refusal()?;
    Some(
        SystemException::new(
            SystemExceptionKind::NO_PERMISSION,
            minor::TLS_REFUSED,
            CompletionStatus::No,
        )
        .with_detail(format!("{} refused our TLS certificate: {why}", conn.peer)),
    )
}

/// While alive, the innermost upcall on this thread does not count against its connection's
/// dispatch limit: it is waiting for a nested call, not running. Without this, nested
/// callbacks deeper than `max_dispatches_per_connection` would pause the very connection
/// that carries the replies and requests they wait for.
pub(crate) struct SuspendedDispatch<'a> {
    orb: &'a OrbInner,
    conn: Option<Arc<Connection>>,
}

impl OrbInner {
    /// Suspends the current upcall's dispatch slot (if this thread is in one).
    pub(crate) fn suspend_dispatch(&self) -> SuspendedDispatch<'_> {
        let conn = current_upcall_connection();
        if let Some(c) = &conn {
            self.dispatch_finished(c);
        }
        SuspendedDispatch { orb: self, conn }
    }

    /// Counts a dispatch starting on `conn`; pauses reading it at the limit (see
    /// [`DispatchGate`](crate::connection::DispatchGate) for the handshake with
    /// `dispatch_finished`).
    pub(crate) fn dispatch_started(&self, conn: &Arc<Connection>) {
        if conn
            .dispatch
            .started(self.config.max_dispatches_per_connection)
        {
            self.resume_reading(conn);
        }
    }

    /// Counts a dispatch ending on `conn`; resumes reading it below the limit.
    pub(crate) fn dispatch_finished(&self, conn: &Arc<Connection>) {
        if conn
            .dispatch
            .finished(self.config.max_dispatches_per_connection)
        {
            self.resume_reading(conn);
        }
    }
}

impl Drop for SuspendedDispatch<'_> {
    fn drop(&mut self) {
        if let Some(c) = &self.conn {
            self.orb.dispatch_started(c);
        }
    }
}
