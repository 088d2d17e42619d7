//! One multiplexed GIOP connection: read buffer and decoded-frame queue, outgoing queue,
//! request-id allocation, the table of pending replies and the table of running upcalls.
//!
//! A [`Connection`] is a state object that holds no reactor and names no socket: it holds its
//! byte stream as an `S: `[`Io`] (a `TcpStream` in production, an in-memory pipe in the unit
//! tests) and is told of the event loop through [`WriteInterest`]. What only a socket does
//! (registration with the reactor, the connect handshake's checks, socket options, shutdown)
//! is done by `transport` through [`Connection::socket`]. The reactor stores the connection
//! as its readiness entry; this module does not know the reactor.
//!
//! Who owns what (each owner's doc states its invariants):
//!
//! | state | owner | protected by | who touches it |
//! |---|---|---|---|
//! | the byte stream `io` | [`Connection`] | nothing: [`Io`] is used through `&self` | read by the leader only ([`read_available`](Connection::read_available)), written by the thread holding the writer role |
//! | decoded frames, read buffer, codec | [`ReadState`] | the `read` mutex | the leader only (so uncontended) |
//! | outgoing queue, writer role, writable interest | [`WriteState`] | the write lock, never held across a write | any thread sending a frame; the leader on a writable event |
//! | request id → waiter | [`Mux`] | its mutex | callers (insert before sending, remove on timeout), the leader (reply), `close` |
//! | replies owed, running upcalls | [`Owed`] | its mutex | upcall threads, the leader (CancelRequest) |
//! | dispatches running, read paused | [`DispatchGate`] | atomics (loom-checked) | the leader, upcall threads |
//! | read stopped for a full queue | [`WriteBlock`] | an atomic (loom-checked) | the leader |
//! | BiDir listen points | [`ListenPoints`] | its mutex | the leader (a request's context), callers choosing a route |
//!
//! [`ReadState`] is sans-I/O: it takes bytes and yields frames, and is tested with byte slices;
//! so is [`OutQueue`](write::OutQueue), the outgoing side. The connection feeds them from its
//! stream in `read_available` and `write_queue`, which the unit tests drive over the in-memory
//! pipe (`mem`), with partial writes and a full stream at chosen points.
//!
//! Sends combine: a thread that sends while another is writing the socket only appends its
//! frame to the queue, and the writing thread sends it with its own in one `writev`. Under
//! many concurrent callers on one connection this turns one syscall (and one TCP segment)
//! per frame into one per batch, and nobody blocks on a lock held across a syscall.
//!
//! The leader also holds the writer role, without writing, while it hands a batch of replies
//! to their callers ([`hold_writes`](Connection::hold_writes)): each caller it wakes sends its
//! next request at once, and those requests leave together when the batch is done
//! ([`release_writes`](Connection::release_writes)) instead of one `writev` each.
//!
//! The parts, one file each: [`io`] (the seams: [`Io`] and [`WriteInterest`]), [`read`] (the
//! read state machine), [`write`](mod@write) (the outgoing queue and the write path, as methods
//! of [`Connection`] too), [`backpressure`] (the dispatch and write handshakes that loom
//! checks) and [`mux`] (the reply-routing table). This file holds the connection itself: its
//! fields, its lifecycle and the connect handshake.

mod backpressure;
mod idmap;
mod io;
mod listen_points;
#[cfg(test)]
mod mem;
mod mux;
mod owed;
mod read;
mod write;

pub(crate) use backpressure::{DispatchGate, WriteBlock};
pub(crate) use io::{Io, WriteInterest};
pub(crate) use listen_points::{ListenPoints, MAX_LISTEN_POINTS};
pub(crate) use owed::Owed;
pub(crate) use read::{Expired, ReadError, ReadState};
pub(crate) use write::{Flush, WriteState};

use crate::giop::Version;
use crate::lf::{Participant, Waiter};
use crate::stream::Stream;
use crate::sync::plain::Mutex;
use crate::sync::plain_lock as lock;
use mux::Mux;
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;

/// How a connection came to be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Origin {
    /// We opened it to this endpoint (host as written in the IOR, port).
    Outbound(String, u16),
    /// We accepted it on a listener.
    Inbound,
}

/// Why a connection ended; decides the completion status waiters see.
#[derive(Clone, Debug)]
pub(crate) enum CloseCause {
    /// The peer sent CloseConnection: owed replies were not processed (COMPLETED_NO).
    PeerClosed,
    /// The peer closed the socket or an I/O error happened.
    Io(String),
    /// The peer's bytes broke the protocol (we sent MessageError).
    Protocol(String),
    /// The peer sent MessageError.
    PeerMessageError,
    /// Our ORB shut down.
    Shutdown,
}

/// Where a non-blocking connect stands, for a caller that wants to use the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ConnectState {
    /// Under way: the caller was registered as a waiter.
    Connecting,
    /// Finished: the connection carries messages.
    Connected,
    /// Closed, whether or not the connect had finished.
    Closed,
}

/// One connection carrying GIOP in both directions, over the byte stream `S` (a TCP socket
/// unless a test says otherwise).
///
/// Invariants:
/// - `io` is read only by the leader, with the `read` lock held, and written only by the
///   thread holding the writer role (`WriteState::writing`), without the write lock: so no
///   two threads read it at once, and frames never interleave on it.
/// - Once `closed` is set (by [`mark_closed`](Self::mark_closed), once), the outgoing queue is
///   empty and stays empty, and `queued` is 0.
/// - `queued` mirrors the outgoing queue's charge; it is written under the write lock only.
/// - `connecting` goes from true to false at most once, under `connect_waiters`' lock.
#[derive(Debug)]
pub(crate) struct Connection<S = Stream> {
    /// Reactor token of this connection (slab index and generation).
    pub(crate) token: usize,
    /// Unique in the process (never reused): what object references that arrived over this
    /// connection name it by (bidirectional GIOP).
    pub(crate) id: u64,
    pub(crate) peer: SocketAddr,
    pub(crate) origin: Origin,
    /// The byte stream (see the invariants above; [`socket`](Connection::socket) for what
    /// only a socket does).
    io: S,
    read: Mutex<ReadState>,
    pub(crate) write: Mutex<WriteState>,
    /// Our request ids and the callers (threads or futures) waiting for their replies: the
    /// only place a reply is routed (see [`Mux`]).
    pub(crate) mux: Mux<Waiter>,
    /// The replies this connection's peer is owed, with their running upcalls (see [`Owed`]).
    pub(crate) owed: Owed,
    /// The BiDir listen points the peer announced (see [`ListenPoints`]).
    pub(crate) bidir_endpoints: ListenPoints,
    /// Whether we sent our BI_DIR_IIOP listen points on this (outbound) connection.
    pub(crate) bidir_announced: AtomicBool,
    /// A request came in over this connection although we opened it: the peer calls us back
    /// over it (bidirectional GIOP), not over a connection to our listener.
    called_back: AtomicBool,
    /// Senders waiting for the outgoing queue to drain below its bound.
    drain_waiters: Mutex<Vec<Arc<Participant>>>,
    /// Callers waiting for our non-blocking connect to finish (see
    /// [`add_connect_waiter`](Self::add_connect_waiter)).
    connect_waiters: Mutex<Vec<Arc<Participant>>>,
    /// Our connect has not finished yet: set before the connection is published, cleared
    /// once (under `connect_waiters`' lock) when the handshake completes. A connection closed
    /// while it is still set never carried a byte: its callers see TRANSIENT completed NO.
    connecting: AtomicBool,
    /// Our connect's TCP part is done (a TLS handshake may follow while `connecting`).
    tcp_connected: AtomicBool,
    /// Upcalls from this connection that are running now, and whether the leader stopped
    /// reading at the limit (back-pressure).
    pub(crate) dispatch: DispatchGate,
    /// The leader stopped reading because the outgoing queue is over its bound (the peer
    /// does not read what we send); `after_write` resumes it.
    pub(crate) write_block: WriteBlock,
    /// The writer role (`WriteState::writing`) is held past the thread that took it: for
    /// an event-loop driver across the tasks its turn woke (see `keep_hold`), or for the
    /// replies to the requests of one read (see `hold_for_batch`). Whoever takes this flag
    /// gives the role back.
    hold_kept: AtomicBool,
    closed: AtomicBool,
    /// Why it closed, in words (an I/O error, a failed TLS handshake), once it has: for a
    /// caller that comes to wait on it after the close.
    close_reason: std::sync::OnceLock<String>,
    /// Bytes this connection has in read buffers, as last reported to the ORB's gauge.
    accounted: AtomicUsize,
    /// Mirror of the outgoing queue's length, updated under the write lock.
    queued: AtomicUsize,
    /// Mirror of the write state's writable interest, for a look without the write lock
    /// (whether the socket may leave the poll set, `Reactor::park`): set before the
    /// registration asks for writable events, cleared after it stops, so that the look may
    /// see it on for longer than it is, never shorter.
    writable_wanted: AtomicBool,
    /// The GIOP minor version of the last message sent or received here
    /// ([`NO_VERSION`] before any): what CloseConnection and MessageError are written in.
    version: AtomicU8,
}

/// [`Connection::version`] before any message: unknown.
const NO_VERSION: u8 = u8::MAX;

impl<S> Connection<S> {
    pub(crate) fn new(
        token: usize,
        io: S,
        peer: SocketAddr,
        origin: Origin,
        max_message_size: usize,
    ) -> Self {
        // Request ids: even on connections we opened, odd on ones the peer opened (the BiDir
        // parity rule, WIRE-GIOP §5.1); omniORB starts at 2.
        let first = match origin {
            Origin::Outbound(..) => 2,
            Origin::Inbound => 1,
        };
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        Connection {
            token,
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            peer,
            origin,
            io,
            mux: Mux::new(first),
            read: Mutex::new(ReadState::new(max_message_size)),
            write: Mutex::new(WriteState::default()),
            owed: Owed::default(),
            drain_waiters: Mutex::new(Vec::new()),
            connect_waiters: Mutex::new(Vec::new()),
            connecting: AtomicBool::new(false),
            tcp_connected: AtomicBool::new(false),
            bidir_endpoints: ListenPoints::default(),
            bidir_announced: AtomicBool::new(false),
            called_back: AtomicBool::new(false),
            dispatch: DispatchGate::new(),
            write_block: WriteBlock::new(),
            hold_kept: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            close_reason: std::sync::OnceLock::new(),
            accounted: AtomicUsize::new(0),
            queued: AtomicUsize::new(0),
            writable_wanted: AtomicBool::new(false),
            version: AtomicU8::new(NO_VERSION),
        }
    }

    /// Notes the GIOP minor version of a message sent or received on this connection (a
    /// relaxed load per call; a store only when it changes).
    pub(crate) fn note_version(&self, minor: u8) {
        if self.version.load(Ordering::Relaxed) != minor {
            self.version.store(minor, Ordering::Relaxed);
        }
    }

    /// The GIOP version the connection speaks: that of the last message sent or received on
    /// it, `None` before any.
    pub(crate) fn version(&self) -> Option<Version> {
        match self.version.load(Ordering::Relaxed) {
            NO_VERSION => None,
            minor => Some(Version { major: 1, minor }),
        }
    }

    /// Whether we may send CloseConnection here. A server may in every version; a client
    /// only in GIOP 1.2, where either side may (WIRE-GIOP §2.5: in 1.0 and 1.1 it is a
    /// server's message). Before any message the connection counts as 1.2.
    pub(crate) fn may_send_close_connection(&self) -> bool {
        self.origin == Origin::Inbound || self.version().is_none_or(|v| v >= Version::V1_2)
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Notes why the connection closed (the first reason given is kept).
    pub(crate) fn set_close_reason(&self, why: String) {
        let _ = self.close_reason.set(why);
    }

    /// Why the connection closed, if a reason was noted.
    pub(crate) fn close_reason(&self) -> Option<&str> {
        self.close_reason.get().map(String::as_str)
    }

    /// Marks the connection closed; true for the first caller only.
    pub(crate) fn mark_closed(&self) -> bool {
        {
            let mut w = lock(&self.write);
            w.closed = true;
            w.queue.clear();
            self.queued.store(0, Ordering::Release);
        }
        !self.closed.swap(true, Ordering::AcqRel)
    }

    /// Marks a connection whose connect is under way; before it is published.
    /// The socket must be registered for writable events too: frames sent meanwhile are
    /// queued, and the handshake's writable event flushes them.
    pub(crate) fn set_connecting(&self) {
        self.connecting.store(true, Ordering::Release);
        self.writable_wanted.store(true, Ordering::Release);
        lock(&self.write).writable_interest = true;
    }

    /// Watches the stream for writable events from the start (a TLS handshake, which
    /// writes as it reads); before the connection is published.
    pub(crate) fn set_writable_interest(&self) {
        self.writable_wanted.store(true, Ordering::Release);
        lock(&self.write).writable_interest = true;
    }

    /// Whether nothing waits to be sent and no writable event is wanted (a drain watched
    /// with the queue empty wants one too): then the socket may leave the poll set for a
    /// run of owned reads. Read without the write lock; a writer that wants the event
    /// afterwards puts the socket back itself (`Reactor::set_writable`).
    pub(crate) fn needs_no_writable_event(&self) -> bool {
        self.queued.load(Ordering::Acquire) == 0 && !self.writable_wanted.load(Ordering::Acquire)
    }

    /// Whether our connect's TCP part is done.
    pub(crate) fn tcp_connected(&self) -> bool {
        self.tcp_connected.load(Ordering::Acquire)
    }

    /// Notes that our connect's TCP part is done (the leader, once).
    pub(crate) fn set_tcp_connected(&self) {
        self.tcp_connected.store(true, Ordering::Release);
    }

    /// Notes a request that came in (the leader): on a connection we opened, that is the
    /// peer calling us back over it. True the first time it is.
    pub(crate) fn note_request(&self) -> bool {
        matches!(self.origin, Origin::Outbound(..))
            && !self.called_back.load(Ordering::Relaxed)
            && !self.called_back.swap(true, Ordering::Relaxed)
    }

    /// Whether the peer that opened this connection, or that we opened it to and which has
    /// called us back over it, makes its calls over this connection rather than over a new
    /// one to our listener (see `called_back`).
    pub(crate) fn peer_calls_over_it(&self) -> bool {
        matches!(self.origin, Origin::Inbound) || self.called_back.load(Ordering::Relaxed)
    }

    /// Whether our connect has not finished yet (see `connecting`).
    pub(crate) fn is_connecting(&self) -> bool {
        self.connecting.load(Ordering::Acquire)
    }

    /// Registers `p` to be completed when the connect finishes or fails. Returns
    /// `Connected` (nothing registered) if it has finished, `Closed` if the connection is
    /// closed. Checked under the waiters' lock, which the completion and the close take too,
    /// so no outcome can slip between the check and the registration.
    pub(crate) fn add_connect_waiter(&self, p: &Arc<Participant>) -> ConnectState {
        let mut w = lock(&self.connect_waiters);
        if self.is_closed() {
            ConnectState::Closed
        } else if !self.is_connecting() {
            ConnectState::Connected
        } else {
            w.push(p.clone());
            ConnectState::Connecting
        }
    }

    /// Forgets a connect waiter that stopped waiting (timed out).
    pub(crate) fn remove_connect_waiter(&self, id: u64) {
        lock(&self.connect_waiters).retain(|w| w.id != id);
    }

    /// The connect finished: clears `connecting` and returns the waiters to complete.
    pub(crate) fn connected(&self) -> Vec<Arc<Participant>> {
        let mut w = lock(&self.connect_waiters);
        self.connecting.store(false, Ordering::Release);
        std::mem::take(&mut *w)
    }

    /// Registers `p` to be completed when the outgoing queue drains under its bound (or the
    /// connection closes).
    pub(crate) fn add_drain_waiter(&self, p: &Arc<Participant>) {
        lock(&self.drain_waiters).push(p.clone());
    }

    /// Forgets drain waiter `id` (it stopped waiting).
    pub(crate) fn remove_drain_waiter(&self, id: u64) {
        lock(&self.drain_waiters).retain(|w| w.id != id);
    }

    /// The drain waiters, to complete (the queue drained, or the connection closed).
    pub(crate) fn take_drain_waiters(&self) -> Vec<Arc<Participant>> {
        std::mem::take(&mut *lock(&self.drain_waiters))
    }

    /// The connect waiters, taken at close (`connecting` stays as it was: it tells the
    /// close which exception the waiters get).
    pub(crate) fn take_connect_waiters(&self) -> Vec<Arc<Participant>> {
        std::mem::take(&mut *lock(&self.connect_waiters))
    }
}

impl<S: Io> Connection<S> {}

impl Connection<Stream> {
    /// The socket, for what only a socket does: registration with the reactor, the connect
    /// handshake's checks, socket options and shutdown (all in `transport`). Reads and writes
    /// go through the connection's own methods.
    pub(crate) fn socket(&self) -> &TcpStream {
        self.io.socket()
    }

    /// Whether the stream's TLS handshake is under way (the connection carries no message
    /// yet).
    #[inline]
    pub(crate) fn is_handshaking(&self) -> bool {
        self.io.tls().is_some_and(|t| t.is_handshaking())
    }

    /// The stream, for what only it knows: its TLS session (the handshake, the peer's
    /// identity).
    pub(crate) fn stream(&self) -> &Stream {
        &self.io
    }
}

#[cfg(test)]
mod tests;

#[cfg(all(test, orb_loom))]
#[path = "loom.rs"]
mod loom_tests;
