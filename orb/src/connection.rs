//! One multiplexed GIOP connection: read buffer and decoded-frame queue, outgoing queue,
//! request-id allocation, the table of pending replies and the table of running upcalls.
//!
//! | state | protected by | who touches it |
//! |---|---|---|
//! | `read` (buffer, codec, decoded frames) | its mutex | the leader only (so uncontended); the socket is read only here |
//! | `write` (outgoing queue, who writes) | the write lock, never held across a syscall | any thread sending a frame; the leader on a writable event |
//! | `pending` (request id → waiter) | its mutex | callers (insert before sending, remove on timeout), the leader (reply), `close` |
//! | `running` (request id → upcall context) | its mutex | upcall threads, the leader (CancelRequest) |
//!
//! [`ReadState`] is sans-I/O: it takes bytes and yields frames, and is tested with byte slices;
//! so is [`OutQueue`], the outgoing side. The socket calls live in the small `read_from` and
//! `write_queue` functions beside them.
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

use crate::giop::{Frame, FrameError, GiopCodec, Header, Version, HEADER_LEN};
use crate::lf::Participant;
use crate::mux::Mux;
use crate::servant::Context;
use crate::stats::Stats;
use crate::sync::std_lock as lock;
use bytes::{Buf, Bytes, BytesMut};
use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio_util::codec::Decoder;

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

/// The sans-I/O read side: bytes in, frames out.
#[derive(Debug)]
pub(crate) struct ReadState {
    buf: BytesMut,
    /// Small reads land here first (zeroed once, when the connection first reads) and are
    /// appended to `buf`: zeroing a 16 KiB read window per read cost more instructions than
    /// the rest of a small call (callgrind, examples/bench/PROFILE.md).
    staging: Option<Box<[u8]>>,
    /// A frame too large for the staging buffer, received in place: the bytes so far, in a
    /// `Vec` reserved for the frame (up to `LARGE_UPFRONT` ahead), and the frame's size. std's `read_to_end` fills
    /// the spare capacity without zeroing it first; growing `buf` with `resize` before each
    /// read zeroed the rest of the frame (about 1 MiB of `memset` per 1 MiB body, callgrind).
    large: Option<(Vec<u8>, usize)>,
    codec: GiopCodec,
    frames: VecDeque<Frame>,
    /// The socket may hold unread bytes (we stopped before `WouldBlock`).
    pub(crate) maybe_readable: bool,
    /// The reactor reported the peer's end of the stream: keep reading until EOF even after
    /// a short read.
    pub(crate) read_closed: bool,
    /// Bytes read from the socket so far (the idle sweep's sign of life).
    bytes_in: u64,
    /// The idle sweep's last look: (bytes read, request ids used) then, and since when the
    /// connection has looked the same.
    pub(crate) sweep_mark: Option<((u64, u32), std::time::Instant)>,
    /// The minor version of the last GIOP header received (see `note_header_version`).
    version_seen: Option<u8>,
}

/// Smallest allocation for received bytes that frames are split from (as tokio's `FramedRead`
/// reserves 8 KiB). A received frame keeps the chunk it lies in alive as long as it (or a
/// slice of its body) lives.
const READ_CHUNK: usize = 8 * 1024;
/// Size of the staging buffer for small reads (and of a read when no large frame is pending).
const STAGING: usize = 16 * 1024;
/// Most memory reserved for a large frame before its bytes arrive: a peer's header alone
/// must not make us reserve `max_message_size`, on every connection.
const LARGE_UPFRONT: usize = 4 << 20;

/// Frames decoded ahead of processing, per connection, before we stop reading the socket.
const MAX_QUEUED_FRAMES: usize = 16;
/// Bytes read from one socket per leader visit before letting other connections run.
const READ_BUDGET: usize = 1 << 20;

impl ReadState {
    pub(crate) fn new(max_message_size: usize) -> Self {
        ReadState {
            buf: BytesMut::new(),
            staging: None,
            large: None,
            codec: GiopCodec::new(max_message_size),
            frames: VecDeque::new(),
            maybe_readable: true,
            read_closed: false,
            version_seen: None,
            bytes_in: 0,
            sweep_mark: None,
        }
    }

    /// Takes received bytes and decodes every complete frame in them.
    #[cfg(test)]
    pub(crate) fn handle_bytes(&mut self, data: &[u8]) -> Result<(), FrameError> {
        self.buf.extend_from_slice(data);
        self.decode_all()
    }

    fn decode_all(&mut self) -> Result<(), FrameError> {
        loop {
            self.note_header_version();
            match self.codec.decode(&mut self.buf)? {
                Some(f) => self.frames.push_back(f),
                None => return Ok(()),
            }
        }
    }

    /// Records the GIOP version of the header that starts the undecoded bytes, if it is one we
    /// speak, before the codec looks at it: so a message that fails to decode still tells
    /// which version to answer MessageError in.
    fn note_header_version(&mut self) {
        if let [b'G', b'I', b'O', b'P', 1, minor @ 0..=2, ..] = self.buf[..] {
            self.version_seen = Some(minor);
        }
    }

    /// The GIOP minor version of the last message header the peer sent (1.0, 1.1 or 1.2).
    pub(crate) fn version_seen(&self) -> Option<u8> {
        self.version_seen
    }

    /// The next decoded frame.
    #[must_use]
    pub(crate) fn poll_frame(&mut self) -> Option<Frame> {
        self.frames.pop_front()
    }

    /// Whether decoded frames are waiting.
    pub(crate) fn has_frames(&self) -> bool {
        !self.frames.is_empty()
    }

    /// The stream ended: an error if it ended inside a frame.
    pub(crate) fn handle_eof(&mut self) -> Result<(), FrameError> {
        if let Some((big, _)) = self.large.take() {
            // Inside a large frame: hand the part received to the codec, which says so.
            self.buf = BytesMut::from(&big[..]);
        }
        if let Some(f) = self.codec.decode_eof(&mut self.buf)? {
            self.frames.push_back(f);
        }
        Ok(())
    }

    /// Bytes read from the socket so far.
    pub(crate) fn bytes_in(&self) -> u64 {
        self.bytes_in
    }

    /// Bytes held: undecoded input plus partial fragment chains.
    pub(crate) fn buffered(&self) -> usize {
        self.buf.len()
            + self.large.as_ref().map_or(0, |(big, _)| big.len())
            + self.codec.buffered_fragment_bytes()
    }

    /// The full size of the frame whose header starts `buf`, if the rest of it is too large
    /// for the staging buffer (and within the size limit, which the codec enforces).
    fn large_frame_size(&self) -> Option<usize> {
        if self.buf.len() < HEADER_LEN {
            return None;
        }
        let h = Header::decode(&self.buf[..HEADER_LEN]).ok()?;
        let total = HEADER_LEN + h.size as usize;
        (total > self.buf.len() + STAGING && total <= self.codec.max_message_size() + HEADER_LEN)
            .then_some(total)
    }

    /// Reads from `io` until `WouldBlock`, the budget, or enough queued frames, decoding as it
    /// goes. Returns `Ok(false)` on end of stream.
    pub(crate) fn read_from(
        &mut self,
        mut io: impl Read,
        stats: &Stats,
    ) -> Result<bool, ReadError> {
        let mut total = 0;
        loop {
            if self.frames.len() >= MAX_QUEUED_FRAMES || total >= READ_BUDGET {
                self.maybe_readable = true;
                return Ok(true);
            }
            if self.large.is_none() {
                if let Some(size) = self.large_frame_size() {
                    // Capacity for what a header claims only up to a bound: the rest is
                    // reserved as bytes arrive (read_to_end grows it, fallibly).
                    let mut big = Vec::with_capacity(size.min(LARGE_UPFRONT));
                    big.extend_from_slice(&self.buf);
                    self.buf.clear();
                    self.large = Some((big, size));
                }
            }
            let (r, want) = match &mut self.large {
                Some((big, size)) => {
                    let want = *size - big.len();
                    let before = big.len();
                    // Reads until the frame is complete, the end of the stream, or
                    // WouldBlock; what it read stays in `big` either way.
                    let r = (&mut io).take(want as u64).read_to_end(big);
                    let n = big.len() - before;
                    let r = match r {
                        Err(e) if n > 0 && e.kind() == io::ErrorKind::WouldBlock => Ok(n),
                        Err(e) => Err(e),
                        Ok(_) => Ok(n),
                    };
                    (r, want)
                }
                None => {
                    let st = self
                        .staging
                        .get_or_insert_with(|| vec![0; STAGING].into_boxed_slice());
                    let r = io.read(&mut st[..]);
                    if let Ok(n) = r {
                        if self.buf.capacity() - self.buf.len() < n {
                            // Frames are split off `buf` and share its allocation: reserving
                            // a chunk makes that one allocation per many small frames, where
                            // reserving only what arrived cost two per frame (the buffer and,
                            // on the first split, its shared header; callgrind).
                            self.buf.reserve(n.max(READ_CHUNK));
                        }
                        self.buf.extend_from_slice(&st[..n]);
                    }
                    (r, STAGING)
                }
            };
            match r {
                Ok(0) => {
                    self.maybe_readable = false;
                    return Ok(false);
                }
                Ok(n) => {
                    total += n;
                    self.bytes_in += n as u64;
                    stats.bytes_received.fetch_add(n as u64, Ordering::Relaxed);
                    if self
                        .large
                        .as_ref()
                        .is_some_and(|(b, size)| b.len() == *size)
                    {
                        if let Some((big, _)) = self.large.take() {
                            // `buf` was emptied when the large frame began. No copy.
                            self.buf = BytesMut::from(Bytes::from(big));
                        }
                    }
                    if self.large.is_none() {
                        self.decode_all().map_err(ReadError::Frame)?;
                    }
                    if n < want {
                        // A short read of a TCP socket means its receive buffer was drained;
                        // data arriving later raises a new edge, so skip the read that would
                        // only say WouldBlock (tokio does the same). The exception is a peer
                        // that has closed: its FIN may have come with this edge, so read on
                        // until EOF.
                        self.maybe_readable = self.read_closed;
                        return Ok(true);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.maybe_readable = false;
                    return Ok(true);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(ReadError::Io(e)),
            }
        }
    }
}

/// A failure while reading a connection.
#[derive(Debug)]
pub(crate) enum ReadError {
    Io(io::Error),
    Frame(FrameError),
}

/// Most buffers handed to one `writev`.
const MAX_IOV: usize = 32;
/// Memory a queued buffer costs beyond its bytes (its allocation's header and rounding, and
/// its `Bytes` handle in the queue), charged against the outgoing queue's bound.
pub(crate) const PART_OVERHEAD: usize = 64;
/// Batches one sender writes for others before leaving the rest to the reactor (a writable
/// event), so a sender's own call is not held up indefinitely by a busy connection.
const MAX_ROUNDS: usize = 8;

/// The bytes not yet written to a socket, in order: whole frames and the unwritten tail of
/// the one in progress. Sans-I/O.
#[derive(Debug, Default)]
pub(crate) struct OutQueue {
    parts: VecDeque<Bytes>,
    len: usize,
}

impl OutQueue {
    /// Appends a buffer (empty ones are skipped).
    pub(crate) fn push(&mut self, b: Bytes) {
        if !b.is_empty() {
            self.len += b.len();
            self.parts.push_back(b);
        }
    }

    /// Like [`written`](Self::written), for a batch that was written around the queue (not
    /// taken from it): its unwritten rest goes to the front. Empty buffers are dropped first,
    /// as [`push`](Self::push) does (`written` counts on the queue holding none).
    pub(crate) fn put_back(&mut self, batch: &mut Vec<Bytes>, n: usize) {
        batch.retain(|b| !b.is_empty());
        self.len += batch.iter().map(Bytes::len).sum::<usize>();
        self.written(batch, n);
    }

    /// Bytes queued.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// What the queue is charged against its bound: its bytes plus [`PART_OVERHEAD`] per
    /// buffer (a flood of tiny frames costs far more memory than its bytes).
    pub(crate) fn charge(&self) -> usize {
        self.len + self.parts.len() * PART_OVERHEAD
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Moves up to `max` buffers from the front into `out` (for the writer to write without
    /// the lock; their bytes still count in `len` until [`written`](Self::written)).
    pub(crate) fn take_front(&mut self, out: &mut Vec<Bytes>, max: usize) {
        let n = max.min(self.parts.len());
        out.extend(self.parts.drain(..n));
    }

    /// Hands back a batch from [`take_front`](Self::take_front) of which the first `n` bytes
    /// were written: those are dropped, the rest goes back to the front, in order. Leaves
    /// `batch` empty.
    pub(crate) fn written(&mut self, batch: &mut Vec<Bytes>, n: usize) {
        let mut left = n;
        let mut keep = 0;
        for b in batch.iter_mut() {
            if left >= b.len() {
                left -= b.len();
            } else {
                b.advance(left);
                left = 0;
                keep += 1;
            }
        }
        self.len -= n - left;
        for b in batch.drain(..).rev().take(keep) {
            self.parts.push_front(b);
        }
        batch.clear();
    }

    /// Replaces every queued buffer with `f` of it (the same bytes, perhaps elsewhere).
    pub(crate) fn map_parts(&mut self, f: impl Fn(Bytes) -> Bytes) {
        for part in self.parts.iter_mut() {
            *part = f(std::mem::take(part));
        }
    }

    /// Drops everything (the connection closed).
    pub(crate) fn clear(&mut self) {
        self.parts.clear();
        self.len = 0;
    }
}

/// What the write path needs of the event loop: a socket's interest in writable events,
/// turned on while frames wait for the socket (or a drain is watched) and off again after.
/// The reactor implements it; taking it as a trait keeps this module below the reactor
/// (which stores connections) and lets tests count the calls.
pub(crate) trait WriteInterest {
    /// Watches `stream` (registered under `token`) for readable events, and for writable
    /// ones too if `writable`.
    fn set_writable(&self, stream: &TcpStream, token: usize, writable: bool) -> io::Result<()>;
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

/// Outgoing state, under the connection's write lock.
#[derive(Debug, Default)]
pub(crate) struct WriteState {
    queue: OutQueue,
    /// A thread is writing the front of the queue to the socket (outside the lock); others
    /// only append.
    writing: bool,
    pub(crate) writable_interest: bool,
    closed: bool,
    /// The writer's batch storage, kept between writes (no allocation per write).
    spare: Vec<Bytes>,
    /// Someone waits for the queue to fall under its bound (the leader, which stopped
    /// reading the connection, or a sender): the writer that empties the queue raises a
    /// writable event, so that the leader's flush (`after_write`) sees it.
    drain_watched: bool,
}

impl WriteState {
    /// [`Connection::watch_drain`] under the write lock.
    fn watch_drain(&mut self, max: usize) -> bool {
        if self.closed || self.queue.charge() <= max {
            return false;
        }
        self.drain_watched = true;
        true
    }

    /// What a writer that gives up the writer role must do with the socket's interest,
    /// `stop` being how its writing ended: `None`, the queue empty; `Some(full)`, the rest
    /// left queued, `full` if the socket took less than offered. `Some(true)`: register for
    /// readable and writable events (a socket that is not full raises a writable event at
    /// once); `Some(false)`: for readable ones only; `None`: leave it. Takes the drain watch
    /// when the queue is empty: a waiter wants to hear that it drained, and only the leader's
    /// flush tells it, on the writable event this asks for. Sans-I/O, so that loom checks it
    /// against a leader watching the drain (`loom_tests`).
    fn interest_after_write(&mut self, stop: Option<bool>) -> Option<bool> {
        match stop {
            None if std::mem::take(&mut self.drain_watched) && !self.closed => Some(true),
            None if self.writable_interest && !self.closed => Some(false),
            None => None,
            // A full socket raises a writable event when it drains; one that is not full
            // raises one when (re-)registered, even if the interest was on.
            Some(full) => (!self.writable_interest || !full).then_some(true),
        }
    }
}

/// Back-pressure on upcalls (`max_dispatches_per_connection`): how many of a connection's
/// requests are being dispatched, and whether the leader stopped reading the connection
/// at the limit. A type of its own, sans-I/O and on [`crate::sync`]'s atomics, so that
/// loom checks the handshake between the leader pausing and upcalls finishing
/// (`loom_tests`); the caller does the I/O a `true` asks for (the connection on the ready
/// list, the reactor woken).
///
/// Each side writes one variable and then reads the other (`started` counts, pauses, and
/// reads the count again; `finished` counts down, then takes the pause back:
/// store-buffering). If both read the old values (x86 lets a load pass an earlier store),
/// the connection stays paused below the limit with nobody to resume it. SeqCst accesses
/// exclude that, but loom models them as acquire/release only (see its README) and so
/// reports that case against a plain SeqCst load. Hence the second read of the count is a
/// read-modify-write (`fetch_add(0)`, at the limit only), which excludes the case under
/// acquire/release too: every change of the count is then a read-modify-write, so a
/// `finished` that counts down after that read synchronises with it (a release sequence)
/// and sees the pause. The accesses stay SeqCst. The loom models pass as written and with
/// acquire/release; they fail with relaxed orderings, with a plain load there, and without
/// the second read.
#[derive(Debug)]
pub(crate) struct DispatchGate {
    /// Upcalls from this connection that are running now.
    dispatching: crate::sync::AtomicUsize,
    /// The leader stopped reading because `dispatching` hit the limit.
    paused: crate::sync::AtomicBool,
}

impl DispatchGate {
    pub(crate) fn new() -> Self {
        DispatchGate {
            dispatching: crate::sync::AtomicUsize::new(0),
            paused: crate::sync::AtomicBool::new(false),
        }
    }

    /// Counts a dispatch starting; pauses reading at `max`. True when the caller must
    /// resume reading: a dispatch finished between the count and the pause, and this call
    /// took the pause back.
    #[must_use]
    pub(crate) fn started(&self, max: usize) -> bool {
        let n = self.dispatching.fetch_add(1, Ordering::SeqCst) + 1;
        if n < max {
            return false;
        }
        self.paused.store(true, Ordering::SeqCst);
        // A dispatch may have finished between the increment and the store (a
        // read-modify-write, not a load: see above).
        self.dispatching.fetch_add(0, Ordering::SeqCst) < max
            && self.paused.swap(false, Ordering::SeqCst)
    }

    /// Counts a dispatch ending. True when the caller must resume reading (it was paused
    /// and the count is now below `max`); once per pause.
    #[must_use]
    pub(crate) fn finished(&self, max: usize) -> bool {
        let left = self.dispatching.fetch_sub(1, Ordering::SeqCst) - 1;
        left < max && self.paused.swap(false, Ordering::SeqCst)
    }

    /// Dispatches running now.
    pub(crate) fn dispatching(&self) -> usize {
        self.dispatching.load(Ordering::SeqCst)
    }

    /// Whether reading is paused at the limit.
    pub(crate) fn is_paused(&self) -> bool {
        self.paused.load(Ordering::Acquire)
    }
}

/// Write back-pressure, the leader's side: it stopped reading a connection whose outgoing
/// queue is over its bound (the peer does not read what we send), after asking for a
/// writable event once the queue drains ([`Connection::watch_drain`]); the leader's flush
/// on that event resumes it. Touched by the leader only (the idle sweep is the leader's
/// too); an atomic because the connection is shared. A type of its own so that loom checks
/// the handshake with a writer draining the queue (`loom_tests`).
#[derive(Debug)]
pub(crate) struct WriteBlock(crate::sync::AtomicBool);

impl WriteBlock {
    pub(crate) fn new() -> Self {
        WriteBlock(crate::sync::AtomicBool::new(false))
    }

    /// Stops reading until [`resume`](Self::resume).
    pub(crate) fn block(&self) {
        self.0.store(true, Ordering::Release);
    }

    /// The queue is under its bound again: true (once per block) if reading was stopped and
    /// the caller must resume it.
    #[must_use]
    pub(crate) fn resume(&self) -> bool {
        self.0.swap(false, Ordering::AcqRel)
    }

    /// Whether reading is stopped.
    pub(crate) fn is_blocked(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// One TCP connection carrying GIOP in both directions.
#[derive(Debug)]
pub(crate) struct Connection {
    /// Reactor token of this connection (slab index and generation).
    pub(crate) token: usize,
    /// Unique in the process (never reused): what object references that arrived over this
    /// connection name it by (bidirectional GIOP).
    pub(crate) id: u64,
    pub(crate) peer: SocketAddr,
    pub(crate) origin: Origin,
    pub(crate) stream: TcpStream,
    pub(crate) read: Mutex<ReadState>,
    pub(crate) write: Mutex<WriteState>,
    /// Our request ids and the callers waiting for their replies: the only place a reply is
    /// routed (see [`Mux`]).
    pub(crate) mux: Mux<Arc<Participant>>,
    /// Request id → running upcall. The ids are the peer's, so the seed is random and the
    /// size is bounded by the dispatch limit.
    pub(crate) running: Mutex<HashMap<u32, Context, foldhash::fast::RandomState>>,
    /// Endpoints the peer announced with BI_DIR_IIOP (accepted with `bidir_accept`): calls to
    /// references that arrived over this connection and name one of them use it.
    pub(crate) bidir_endpoints: Mutex<Vec<(String, u16)>>,
    /// Whether we sent our BI_DIR_IIOP listen points on this (outbound) connection.
    pub(crate) bidir_announced: AtomicBool,
    /// Senders waiting for the outgoing queue to drain below its bound.
    pub(crate) drain_waiters: Mutex<Vec<Arc<Participant>>>,
    /// Callers waiting for our non-blocking connect to finish (see
    /// [`add_connect_waiter`](Self::add_connect_waiter)).
    connect_waiters: Mutex<Vec<Arc<Participant>>>,
    /// Our connect has not finished yet: set before the connection is published, cleared
    /// once (under `connect_waiters`' lock) when the handshake completes. A connection closed
    /// while it is still set never carried a byte: its callers see TRANSIENT completed NO.
    connecting: AtomicBool,
    /// Upcalls from this connection that are running now, and whether the leader stopped
    /// reading at the limit (back-pressure).
    pub(crate) dispatch: DispatchGate,
    /// The leader stopped reading because the outgoing queue is over its bound (the peer
    /// does not read what we send); `after_write` resumes it.
    pub(crate) write_block: WriteBlock,
    closed: AtomicBool,
    /// Bytes this connection has in read buffers, as last reported to the ORB's gauge.
    pub(crate) accounted: AtomicUsize,
    /// Mirror of the outgoing queue's length, updated under the write lock.
    queued: AtomicUsize,
    /// The GIOP minor version of the last message sent or received here
    /// ([`NO_VERSION`] before any): what CloseConnection and MessageError are written in.
    version: AtomicU8,
}

/// [`Connection::version`] before any message: unknown.
const NO_VERSION: u8 = u8::MAX;

impl Connection {
    pub(crate) fn new(
        token: usize,
        stream: TcpStream,
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
            stream,
            mux: Mux::new(first),
            read: Mutex::new(ReadState::new(max_message_size)),
            write: Mutex::new(WriteState::default()),
            running: Mutex::new(HashMap::default()),
            drain_waiters: Mutex::new(Vec::new()),
            connect_waiters: Mutex::new(Vec::new()),
            connecting: AtomicBool::new(false),
            bidir_endpoints: Mutex::new(Vec::new()),
            bidir_announced: AtomicBool::new(false),
            dispatch: DispatchGate::new(),
            write_block: WriteBlock::new(),
            closed: AtomicBool::new(false),
            accounted: AtomicUsize::new(0),
            queued: AtomicUsize::new(0),
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
        lock(&self.write).writable_interest = true;
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

    /// The connect waiters, taken at close (`connecting` stays as it was: it tells the
    /// close which exception the waiters get).
    pub(crate) fn take_connect_waiters(&self) -> Vec<Arc<Participant>> {
        std::mem::take(&mut *lock(&self.connect_waiters))
    }

    /// If the outgoing queue is charged more than `max`, asks for a writable event once it
    /// drains (see `WriteState::drain_watched`) and returns true; false if it is under `max`
    /// already or the connection is closed. Checked and set under the write lock, so that no
    /// drain can slip between the check and the watch.
    pub(crate) fn watch_drain(&self, max: usize) -> bool {
        lock(&self.write).watch_drain(max)
    }

    /// Sends a whole frame (see [`send_parts`](Self::send_parts)).
    pub(crate) fn send(
        &self,
        frame: Bytes,
        stats: &Stats,
        reactor: &impl WriteInterest,
    ) -> io::Result<()> {
        self.send_parts([frame, Bytes::new()], stats, reactor)
    }

    /// Sends one frame given as two parts (a header and a large body that is not copied).
    /// Frames never interleave. If another thread is writing, the frame is appended for it
    /// to send (combining); else this thread writes the queue with vectored writes, and what
    /// the socket does not take waits for a writable event.
    pub(crate) fn send_parts(
        &self,
        parts: [Bytes; 2],
        stats: &Stats,
        reactor: &impl WriteInterest,
    ) -> io::Result<()> {
        let mut w = lock(&self.write);
        if w.closed {
            return Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "connection closed",
            ));
        }
        if !w.writing && !w.writable_interest && w.queue.is_empty() {
            // Nothing queued and nobody writing (a call at a time): write the frame from its
            // own buffers, around the queue. Frames sent meanwhile queue behind it.
            w.writing = true;
            drop(w);
            let r = write_vectored_some::<2>(&self.stream, &parts);
            #[cfg(test)]
            tests::after_direct_write();
            let mut w = lock(&self.write);
            let n = match r {
                Ok(n) => n,
                Err(e) => {
                    w.writing = false;
                    return Err(e);
                }
            };
            stats.bytes_sent.fetch_add(n as u64, Ordering::Relaxed);
            if w.closed {
                w.writing = false;
                return Ok(());
            }
            if n < parts[0].len() + parts[1].len() {
                // The rest goes first, ahead of what others queued meanwhile.
                let mut batch = std::mem::take(&mut w.spare);
                batch.extend(parts);
                w.queue.put_back(&mut batch, n);
                w.spare = batch;
                self.queued.store(w.queue.charge(), Ordering::Release);
            }
            if w.queue.is_empty() {
                w.writing = false;
                return Ok(());
            }
            self.write_queue(w, stats, reactor)?;
            return Ok(());
        }
        let [mut head, body] = parts;
        if w.writable_interest {
            // Queued behind a full socket: may wait long (see `outbuf::detach`).
            head = crate::outbuf::detach(head);
        }
        w.queue.push(head);
        w.queue.push(body);
        self.queued.store(w.queue.charge(), Ordering::Release);
        // Another thread writing sends this frame with its own; a full socket (writable
        // interest on) is written by the leader on the writable event.
        if !w.writing && !w.writable_interest {
            w.writing = true;
            self.write_queue(w, stats, reactor)?;
        }
        Ok(())
    }

    /// Writes queued frames (on a writable event). Returns true when the queue is empty and
    /// writable interest was dropped.
    pub(crate) fn flush(&self, stats: &Stats, reactor: &impl WriteInterest) -> io::Result<bool> {
        let mut w = lock(&self.write);
        if w.writing || w.closed {
            // The writing thread finishes the job (and drops the interest when done).
            return Ok(false);
        }
        w.writing = true;
        self.write_queue(w, stats, reactor)
    }

    /// Before an orderly close: lets a write in progress on another thread finish (a
    /// non-blocking system call, or a leader's short hold of the writer role: never a wait for
    /// the peer), then writes what is queued once, without waiting for the peer. Without it, a
    /// frame queued behind that write (the CloseConnection) would be dropped by the close.
    /// What the socket does not take now is lost with the close.
    pub(crate) fn flush_before_close(&self, stats: &Stats, reactor: &impl WriteInterest) {
        for _ in 0..100_000 {
            let w = lock(&self.write);
            if w.closed || w.queue.is_empty() {
                return;
            }
            if !w.writing {
                drop(w);
                let _ = self.flush(stats, reactor);
                return;
            }
            drop(w);
            std::thread::yield_now();
        }
    }

    /// Takes the writer role without writing: frames sent from now on are queued, and go out
    /// at [`release_writes`](Self::release_writes). For a thread that will not block before
    /// releasing. False (nothing held) if another thread is writing, the socket is full (its
    /// writable event flushes) or the connection is closed.
    pub(crate) fn hold_writes(&self) -> bool {
        let mut w = lock(&self.write);
        if w.writing || w.writable_interest || w.closed {
            return false;
        }
        w.writing = true;
        true
    }

    /// Gives back the role taken by [`hold_writes`](Self::hold_writes), writing what was queued
    /// meanwhile. Returns true when the queue is empty.
    pub(crate) fn release_writes(
        &self,
        stats: &Stats,
        reactor: &impl WriteInterest,
    ) -> io::Result<bool> {
        let mut w = lock(&self.write);
        if w.closed || w.queue.is_empty() {
            w.writing = false;
            return Ok(true);
        }
        self.write_queue(w, stats, reactor)
    }

    /// The writing thread's loop: takes batches off the front of the queue and writes them
    /// without the lock, until the queue is empty, the socket is full, or `MAX_ROUNDS`; what
    /// is left waits for a writable event. Clears `writing` before returning. Returns true
    /// when the queue is empty.
    fn write_queue<'a>(
        &'a self,
        mut w: MutexGuard<'a, WriteState>,
        stats: &Stats,
        reactor: &impl WriteInterest,
    ) -> io::Result<bool> {
        let mut batch = std::mem::take(&mut w.spare);
        let mut rounds = 0;
        // None: nothing left to write; Some(full): leave the rest, the socket full or not.
        let end = loop {
            w.queue.take_front(&mut batch, MAX_IOV);
            let total: usize = batch.iter().map(Bytes::len).sum();
            drop(w);
            let r = write_vectored_some::<MAX_IOV>(&self.stream, &batch);
            w = lock(&self.write);
            let written = match r {
                Ok(k) => k,
                Err(e) => break Err(e),
            };
            stats
                .bytes_sent
                .fetch_add(written as u64, Ordering::Relaxed);
            if w.closed {
                break Ok(None); // the queue was cleared
            }
            w.queue.written(&mut batch, written);
            self.queued.store(w.queue.charge(), Ordering::Release);
            rounds += 1;
            if w.queue.is_empty() {
                break Ok(None);
            }
            if written < total || rounds == MAX_ROUNDS {
                break Ok(Some(written < total));
            }
        };
        batch.clear();
        w.spare = batch;
        w.writing = false;
        let stop = end?;
        if stop == Some(true) && !w.writable_interest {
            // What is left now waits for the peer (see `outbuf::detach`).
            w.queue.map_parts(crate::outbuf::detach);
        }
        // Under the write lock, so a concurrent flush cannot drop the interest we add.
        if let Some(writable) = w.interest_after_write(stop) {
            reactor.set_writable(&self.stream, self.token, writable)?;
            w.writable_interest = writable;
        }
        Ok(stop.is_none())
    }

    /// The outgoing queue's charge (its bytes plus [`PART_OVERHEAD`] per buffer), read
    /// without the write lock: every send checks
    /// this, and taking the lock for it was the hottest futex under 32 concurrent callers.
    pub(crate) fn queued_bytes(&self) -> usize {
        self.queued.load(Ordering::Acquire)
    }
}

/// Writes as much of `bufs` as the socket takes now, with `writev` (no copy, no allocation);
/// `WouldBlock` is not an error. Returns the bytes written.
/// `N` bounds the buffers taken from `bufs` (the stack array's size: 2 for one frame, `MAX_IOV`
/// for a batch).
fn write_vectored_some<const N: usize>(mut s: &TcpStream, bufs: &[Bytes]) -> io::Result<usize> {
    let mut slices = [io::IoSlice::new(&[]); N];
    for (sl, b) in slices.iter_mut().zip(bufs) {
        *sl = io::IoSlice::new(b);
    }
    let mut rest = &mut slices[..bufs.len().min(N)];
    let mut done = 0;
    while !rest.is_empty() {
        match s.write_vectored(rest) {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "socket wrote 0")),
            Ok(n) => {
                done += n;
                io::IoSlice::advance_slices(&mut rest, n);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::giop::{write_close_connection, Message, Version};
    use crate::reactor::Reactor;
    use mio::Interest;

    #[test]
    fn frames_split_anywhere_come_out_whole() {
        let mut bytes = BytesMut::new();
        write_close_connection(&mut bytes, Version::V1_2);
        write_close_connection(&mut bytes, Version::V1_2);
        for split in 0..bytes.len() {
            let mut rs = ReadState::new(1024);
            rs.handle_bytes(&bytes[..split]).unwrap();
            rs.handle_bytes(&bytes[split..]).unwrap();
            for _ in 0..2 {
                let f = rs.poll_frame().expect("a frame");
                assert_eq!(f.message, Message::CloseConnection);
            }
            assert!(rs.poll_frame().is_none());
            assert_eq!(rs.buffered(), 0);
        }
    }

    /// A socket stand-in: hands out `data` in chunks of the given sizes (cycled), one chunk
    /// per readable edge, then `WouldBlock`.
    struct Chunks {
        data: Vec<u8>,
        pos: usize,
        sizes: Vec<usize>,
        next: usize,
        edge: bool,
    }

    impl Read for Chunks {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if !std::mem::take(&mut self.edge) || self.pos == self.data.len() {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let size = self.sizes[self.next % self.sizes.len()];
            self.next += 1;
            let n = size.min(buf.len()).min(self.data.len() - self.pos);
            buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
            self.pos += n;
            // A short read ends the edge; a full one leaves more for the same edge.
            self.edge = n == buf.len();
            Ok(n)
        }
    }

    /// Small, large (received in place) and small frames again, arriving in chunks of
    /// awkward sizes: each comes out whole, with its body intact.
    #[test]
    fn large_frames_arrive_whole_between_small_ones() {
        use crate::giop::{RequestHeader, ServiceContextList, TargetAddress};
        let mut data = BytesMut::new();
        let bodies: Vec<Vec<u8>> = [10, 300_000, 20, 70_000, STAGING + 1, 5]
            .iter()
            .enumerate()
            .map(|(i, &n)| (0..n).map(|j| (i * 7 + j % 251) as u8).collect())
            .collect();
        for (i, body) in bodies.iter().enumerate() {
            let header = RequestHeader {
                request_id: i as u32,
                response_flags: 3,
                target: TargetAddress::Key(Bytes::from_static(b"key")),
                operation: "op".into(),
                service_context: ServiceContextList::default(),
            };
            crate::giop::write_request(&mut data, Version::V1_2, &header, |w| w.write_octets(body));
        }
        for sizes in [
            vec![1000],
            vec![65_536, 7, 100_000],
            vec![1 << 20],
            vec![13],
        ] {
            let mut src = Chunks {
                data: data.to_vec(),
                pos: 0,
                sizes,
                next: 0,
                edge: false,
            };
            let mut rs = ReadState::new(1 << 20);
            let stats = Stats::default();
            let mut got = Vec::new();
            while src.pos < src.data.len() || rs.has_frames() {
                src.edge = true;
                assert!(rs.read_from(&mut src, &stats).unwrap());
                while let Some(f) = rs.poll_frame() {
                    let Message::Request(r) = f.message else {
                        panic!("not a request")
                    };
                    let mut rd = r.body.reader();
                    got.push((r.header.request_id, rd.read_octets().unwrap().to_vec()));
                }
            }
            assert_eq!(got.len(), bodies.len());
            for (i, (id, body)) in got.iter().enumerate() {
                assert_eq!(*id, i as u32);
                assert!(body == &bodies[i], "body {i} differs");
            }
            assert_eq!(rs.buffered(), 0);
        }
    }

    /// Small frames arriving one read at a time are split from one chunk (each frame's bytes
    /// follow the previous one's in memory), not from an allocation per read.
    #[test]
    fn small_frames_from_separate_reads_share_a_chunk() {
        let mut one = BytesMut::new();
        write_close_connection(&mut one, Version::V1_2);
        let n = 20;
        let mut src = Chunks {
            data: one.repeat(n),
            pos: 0,
            sizes: vec![one.len()],
            next: 0,
            edge: false,
        };
        let mut rs = ReadState::new(1024);
        let stats = Stats::default();
        let mut starts = Vec::new();
        for _ in 0..n {
            src.edge = true;
            assert!(rs.read_from(&mut src, &stats).unwrap());
            // The frame's message bytes are not exposed for CloseConnection: the read
            // buffer's next free byte is where the following frame will land.
            starts.push(rs.buf.as_ptr() as usize);
            assert_eq!(
                rs.poll_frame().map(|f| f.message),
                Some(Message::CloseConnection)
            );
        }
        let adjacent = starts
            .windows(2)
            .filter(|w| w[1] == w[0] + one.len())
            .count();
        assert_eq!(adjacent, n - 1, "each read landed in a new allocation");
    }

    /// A header claiming a frame larger than `LARGE_UPFRONT` reserves no more than that
    /// before the bytes arrive, and the frame still arrives whole.
    #[test]
    fn a_large_header_alone_reserves_a_bounded_buffer() {
        use crate::giop::{RequestHeader, ServiceContextList, TargetAddress};
        let body: Vec<u8> = (0..6 << 20).map(|i: usize| (i % 253) as u8).collect();
        let header = RequestHeader {
            request_id: 7,
            response_flags: 3,
            target: TargetAddress::Key(Bytes::from_static(b"key")),
            operation: "op".into(),
            service_context: ServiceContextList::default(),
        };
        let mut data = BytesMut::new();
        crate::giop::write_request(&mut data, Version::V1_2, &header, |w| w.write_octets(&body));
        let mut rs = ReadState::new(8 << 20);
        let stats = Stats::default();
        let mut src = Chunks {
            data: data.to_vec(),
            pos: 0,
            sizes: vec![100, 1 << 20],
            next: 0,
            edge: true,
        };
        rs.read_from(&mut src, &stats).unwrap();
        src.edge = true;
        rs.read_from(&mut src, &stats).unwrap();
        let reserved = rs.large.as_ref().map(|(b, _)| b.capacity());
        assert!(
            reserved.is_some_and(|c| c <= LARGE_UPFRONT && c < body.len()),
            "reserved {reserved:?} for a frame that has not arrived"
        );
        while src.pos < src.data.len() {
            src.edge = true;
            rs.read_from(&mut src, &stats).unwrap();
        }
        let f = rs.poll_frame().expect("the frame");
        let Message::Request(r) = f.message else {
            panic!("not a request")
        };
        assert_eq!(r.header.request_id, 7);
        assert!(r.body.reader().read_octets().unwrap() == &body[..]);
        assert_eq!(rs.buffered(), 0);
    }

    #[test]
    fn eof_inside_a_large_frame_is_an_error() {
        let mut rs = ReadState::new(1 << 20);
        let mut hdr = b"GIOP\x01\x02\x01\x00".to_vec();
        hdr.extend_from_slice(&100_000u32.to_le_bytes());
        hdr.extend_from_slice(&[0; 5000]);
        let mut src = Chunks {
            data: hdr,
            pos: 0,
            sizes: vec![2000],
            next: 0,
            edge: true,
        };
        while src.pos < src.data.len() {
            src.edge = true;
            rs.read_from(&mut src, &Stats::default()).unwrap();
        }
        assert_eq!(rs.buffered(), 5012);
        assert!(rs.handle_eof().is_err());
    }

    #[test]
    fn eof_inside_a_frame_is_an_error() {
        let mut rs = ReadState::new(1024);
        rs.handle_bytes(b"GIOP\x01\x02\x01").unwrap();
        assert!(rs.handle_eof().is_err());
    }

    /// Writes `n` bytes of the queue as a writer would; returns what was written.
    fn write_n(q: &mut OutQueue, max: usize, n: usize) -> Vec<u8> {
        let mut batch = Vec::new();
        q.take_front(&mut batch, max);
        let out = batch
            .iter()
            .flat_map(|b| b.iter().copied())
            .take(n)
            .collect();
        q.written(&mut batch, n);
        assert!(batch.is_empty());
        out
    }

    #[test]
    fn out_queue_partial_writes_resume_where_they_stopped() {
        let mut q = OutQueue::default();
        q.push(Bytes::from_static(b"abc"));
        q.push(Bytes::new());
        q.push(Bytes::from_static(b"defgh"));
        q.push(Bytes::from_static(b"i"));
        assert_eq!(q.len(), 9);
        assert_eq!(write_n(&mut q, 8, 2), b"ab");
        assert_eq!(q.len(), 7);
        // A sender appends while the writer holds a batch.
        let mut batch = Vec::new();
        q.take_front(&mut batch, 2);
        q.push(Bytes::from_static(b"jk"));
        q.written(&mut batch, 3);
        assert_eq!(q.len(), 6);
        assert_eq!(write_n(&mut q, 8, 100), b"fghijk");
        assert!(q.is_empty());
    }

    /// A frame written around the queue (head and an empty body, as a small frame is sent)
    /// of which only part went out: its rest lands in front of what was queued meanwhile.
    #[test]
    fn out_queue_put_back_puts_the_rest_in_front() {
        let mut q = OutQueue::default();
        q.push(Bytes::from_static(b"xy")); // sent by another thread during the write
        let mut batch = vec![Bytes::from_static(b"abcde"), Bytes::new()];
        q.put_back(&mut batch, 2);
        assert!(batch.is_empty());
        assert_eq!(q.len(), 5);
        assert_eq!(write_n(&mut q, 8, 100), b"cdexy");
        assert!(q.is_empty());
    }

    #[test]
    fn out_queue_batch_is_bounded_and_in_order() {
        let mut q = OutQueue::default();
        for i in 0..20u8 {
            q.push(Bytes::from(vec![i; 2]));
        }
        let mut batch = Vec::new();
        q.take_front(&mut batch, 8);
        assert_eq!(batch.len(), 8);
        assert_eq!(batch[7][..], [7, 7]);
        q.written(&mut batch, 15);
        q.take_front(&mut batch, 8);
        assert_eq!(batch[0][..], [7]);
        assert_eq!(batch[1][..], [8, 8]);
        q.written(&mut batch, 0);
        assert_eq!(q.len(), 40 - 15);
    }

    /// A connection registered with `reactor`, over a loopback socket, and its peer's end
    /// (blocking).
    fn connected(reactor: &Reactor) -> (Arc<Connection>, std::net::TcpStream) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let stream = std::net::TcpStream::connect(addr).unwrap();
        stream.set_nonblocking(true).unwrap();
        let (peer, _) = listener.accept().unwrap();
        let conn = reactor.insert(|token| {
            let c = Arc::new(Connection::new(
                token,
                stream,
                addr,
                Origin::Inbound,
                1 << 20,
            ));
            (crate::reactor::Entry::Conn(c.clone()), c)
        });
        reactor
            .register(&conn.stream, conn.token, Interest::READABLE)
            .unwrap();
        (conn, peer)
    }

    /// Many threads send frames of mixed sizes at once on one connection whose peer reads
    /// slowly (so the socket fills and writes are combined, queued and flushed on writable
    /// events): the peer gets every frame whole, each sender's frames in its order.
    #[test]
    fn concurrent_senders_never_interleave_or_lose_frames() {
        use std::io::Read;
        const THREADS: u32 = 8;
        const FRAMES: u32 = 300;
        let reactor = Arc::new(Reactor::new().unwrap());
        let stats = Arc::new(Stats::default());
        let (conn, mut s) = connected(&reactor);
        let reader = std::thread::spawn(move || {
            // A stranded frame fails the test instead of hanging it.
            s.set_read_timeout(Some(std::time::Duration::from_secs(20)))
                .unwrap();
            // Let the socket fill before reading.
            std::thread::sleep(std::time::Duration::from_millis(50));
            let mut next = vec![0u32; THREADS as usize];
            let mut hdr = [0u8; 12];
            let mut body = Vec::new();
            for _ in 0..THREADS * FRAMES {
                s.read_exact(&mut hdr).unwrap();
                let t = u32::from_le_bytes(hdr[0..4].try_into().unwrap());
                let seq = u32::from_le_bytes(hdr[4..8].try_into().unwrap());
                let len = u32::from_le_bytes(hdr[8..12].try_into().unwrap()) as usize;
                body.resize(len, 0);
                s.read_exact(&mut body).unwrap();
                assert_eq!(seq, next[t as usize], "thread {t}'s frames out of order");
                next[t as usize] += 1;
                assert!(
                    body.iter().all(|&b| b == (t * 31 + seq) as u8),
                    "frame {t}/{seq} corrupted (interleaved?)"
                );
            }
            next
        });
        // The leader's part: flush on writable events.
        let done = Arc::new(AtomicBool::new(false));
        let leader = {
            let (reactor, stats, done) = (reactor.clone(), stats.clone(), done.clone());
            std::thread::spawn(move || {
                while !done.load(Ordering::Acquire) {
                    reactor
                        .poll(Some(std::time::Duration::from_millis(5)), |ev| {
                            if let (crate::reactor::Entry::Conn(c), true) = (ev.entry, ev.writable)
                            {
                                c.flush(&stats, &*reactor).unwrap();
                            }
                        })
                        .unwrap();
                }
            })
        };
        let senders: Vec<_> = (0..THREADS)
            .map(|t| {
                let (conn, reactor, stats) = (conn.clone(), reactor.clone(), stats.clone());
                std::thread::spawn(move || {
                    for seq in 0..FRAMES {
                        let len = if seq % 10 == 0 {
                            40_000
                        } else {
                            1 + (seq as usize * 7) % 300
                        };
                        let mut head = BytesMut::new();
                        head.extend_from_slice(&t.to_le_bytes());
                        head.extend_from_slice(&seq.to_le_bytes());
                        head.extend_from_slice(&(len as u32).to_le_bytes());
                        let body = Bytes::from(vec![(t * 31 + seq) as u8; len]);
                        conn.send_parts([head.freeze(), body], &stats, &*reactor)
                            .unwrap();
                    }
                })
            })
            .collect();
        for s in senders {
            s.join().unwrap();
        }
        let next = reader.join().unwrap();
        done.store(true, Ordering::Release);
        leader.join().unwrap();
        assert_eq!(next, vec![FRAMES; THREADS as usize]);
        assert_eq!(conn.queued_bytes(), 0);
    }

    /// While the leader holds the writer role, frames other threads send are queued, not
    /// written; releasing sends them all, in order, with one write.
    #[test]
    fn held_writes_go_out_together_on_release() {
        use std::io::Read;
        let reactor = Reactor::new().unwrap();
        let stats = Stats::default();
        let (conn, mut peer) = connected(&reactor);
        peer.set_nonblocking(true).unwrap();
        assert!(conn.hold_writes());
        assert!(!conn.hold_writes(), "the role is held once");
        let senders: Vec<_> = (0..4u8)
            .map(|i| {
                let conn = &*conn;
                let (reactor, stats) = (&reactor, &stats);
                move || conn.send(Bytes::from(vec![i; 10]), stats, reactor).unwrap()
            })
            .collect();
        std::thread::scope(|s| {
            for f in senders {
                s.spawn(f);
            }
        });
        std::thread::sleep(std::time::Duration::from_millis(20));
        let mut buf = [0u8; 64];
        let r = peer.read(&mut buf);
        assert!(
            matches!(&r, Err(e) if e.kind() == io::ErrorKind::WouldBlock),
            "nothing is written while held: {r:?}"
        );
        assert_eq!(lock(&conn.write).queue.len(), 40);
        assert!(conn.release_writes(&stats, &reactor).unwrap());
        assert_eq!(conn.queued_bytes(), 0);
        peer.set_nonblocking(false).unwrap();
        let mut got = [0u8; 40];
        peer.read_exact(&mut got).unwrap();
        for frame in got.chunks(10) {
            assert!(frame.iter().all(|&b| b == frame[0]), "frames interleaved");
        }
        let mut firsts: Vec<u8> = got.chunks(10).map(|f| f[0]).collect();
        firsts.sort_unstable();
        assert_eq!(firsts, vec![0, 1, 2, 3]);
        assert_eq!(stats.bytes_sent.load(Ordering::Relaxed), 40);
        // Released: the next sender writes at once.
        conn.send(Bytes::from_static(b"after"), &stats, &reactor)
            .unwrap();
        let mut after = [0u8; 5];
        peer.read_exact(&mut after).unwrap();
        assert_eq!(&after, b"after");
    }

    /// Frames left waiting behind a full socket (a peer that does not read) are copied out of
    /// the per-thread frame buffer, so that each holds only its own bytes.
    #[test]
    fn frames_queued_behind_a_full_socket_are_detached() {
        let reactor = Reactor::new().unwrap();
        let stats = Stats::default();
        let (conn, _peer) = connected(&reactor); // the peer never reads
        let mut sent = Vec::new();
        for i in 0..1_000_000u32 {
            let frame = crate::outbuf::encode(200, |b| b.extend_from_slice(&[i as u8; 200]));
            sent.push(frame.clone());
            conn.send(frame, &stats, &reactor).unwrap();
            if lock(&conn.write).writable_interest {
                break;
            }
        }
        assert!(
            lock(&conn.write).writable_interest,
            "the socket never filled"
        );
        // One more, sent while the socket is known to be full.
        let last = crate::outbuf::encode(200, |b| b.extend_from_slice(&[7; 200]));
        sent.push(last.clone());
        conn.send(last, &stats, &reactor).unwrap();
        let w = lock(&conn.write);
        assert!(!w.queue.parts.is_empty());
        for part in &w.queue.parts {
            let at = part.as_ptr() as usize;
            assert!(
                sent.iter().all(|f| {
                    let start = f.as_ptr() as usize;
                    !(start..start + f.len()).contains(&at)
                }),
                "a queued frame still points into the frame buffer"
            );
        }
    }

    thread_local! {
        /// Run once by `send_parts` right after a direct write, before it retakes the lock.
        static AFTER_DIRECT_WRITE: std::cell::RefCell<Option<Box<dyn FnOnce()>>> =
            const { std::cell::RefCell::new(None) };
    }

    pub(super) fn after_direct_write() {
        if let Some(f) = AFTER_DIRECT_WRITE.with(|h| h.borrow_mut().take()) {
            f();
        }
    }

    /// A frame written straight from its buffers (nothing queued) that the socket takes only
    /// in part, while another frame is sent during that write: the first frame's rest goes
    /// out before the other frame, and nothing is lost.
    #[test]
    fn a_frame_written_around_the_queue_keeps_its_place() {
        use std::io::Read;
        let reactor = Arc::new(Reactor::new().unwrap());
        let stats = Arc::new(Stats::default());
        let (conn, mut peer) = connected(&reactor); // the peer reads only later
        let head = Bytes::from(vec![1u8; 100]);
        let body = Bytes::from(
            (0..32u32 << 20)
                .map(|i| (i % 251) as u8)
                .collect::<Vec<_>>(),
        );
        let after = Bytes::from(vec![9u8; 300]);
        {
            // Sent while the direct write is in progress (the lock is free, `writing` set).
            let (conn, stats, reactor, after) =
                (conn.clone(), stats.clone(), reactor.clone(), after.clone());
            AFTER_DIRECT_WRITE.with(|h| {
                *h.borrow_mut() = Some(Box::new(move || {
                    conn.send(after, &stats, &*reactor).unwrap();
                }));
            });
        }
        conn.send_parts([head.clone(), body.clone()], &stats, &*reactor)
            .unwrap();
        assert!(
            lock(&conn.write).writable_interest,
            "32 MiB fit in the socket: the test needs a partial write"
        );
        assert!(
            AFTER_DIRECT_WRITE.with(|h| h.borrow().is_none()),
            "hook not run"
        );
        let expected: Vec<u8> = [&head[..], &body[..], &after[..]].concat();
        let reader = std::thread::spawn(move || {
            let mut got = vec![0u8; expected.len()];
            peer.read_exact(&mut got).unwrap();
            assert!(got == expected, "bytes out of order or lost");
        });
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while conn.queued_bytes() > 0 {
            assert!(std::time::Instant::now() < deadline, "queue never drained");
            conn.flush(&stats, &*reactor).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        reader.join().unwrap();
    }

    #[test]
    fn garbage_is_a_frame_error() {
        let mut rs = ReadState::new(1024);
        assert!(rs.handle_bytes(b"HTTP/1.1 200 OK\r\n\r\n").is_err());
    }
}

#[cfg(all(test, orb_loom))]
mod loom_tests {
    //! Model checks of the two back-pressure handshakes with loom (issue 16, scenario 8):
    //! every interleaving of a few threads. The dispatch limit is checked on the real
    //! [`DispatchGate`]. The outgoing queue's bound is checked on the real decisions
    //! ([`WriteState::watch_drain`], [`WriteState::interest_after_write`], [`WriteBlock`])
    //! and the real queue accounting ([`OutQueue`]), inside stand-ins for what is I/O: the
    //! socket (takes whole buffers, or none when full), the reactor (a registration with
    //! writable interest, or a full socket draining, raises one writable event) and the
    //! leader's loop around `service`, `flush` and `after_write`.
    use super::{DispatchGate, WriteBlock, WriteState, PART_OVERHEAD};
    use bytes::Bytes;
    use loom::sync::atomic::AtomicUsize;
    use loom::sync::{Arc, Condvar, Mutex, MutexGuard};
    use loom::thread;
    use std::sync::atomic::Ordering;

    /// Runs dispatch scripts against one gate with limit `max`: `pre` dispatches started
    /// first, then one thread per script, each starting (`true`) and finishing (`false`)
    /// dispatches in its order. Then the pause must be owed: paused only at the limit (else
    /// some thread would have been told to resume), and once the dispatches still running
    /// finish, reading resumed. Every `true` a call returns is a resume the caller owes.
    fn dispatch_model(
        max: usize,
        pre: usize,
        scripts: &'static [&'static [bool]],
        preemption_bound: Option<usize>,
    ) {
        let mut b = loom::model::Builder::new();
        b.preemption_bound = preemption_bound;
        b.check(move || {
            let gate = Arc::new(DispatchGate::new());
            for _ in 0..pre {
                assert!(!gate.started(max), "a resume with nothing paused");
            }
            let threads: Vec<_> = scripts
                .iter()
                .map(|script| {
                    let gate = gate.clone();
                    thread::spawn(move || {
                        script
                            .iter()
                            .filter(|&&start| {
                                if start {
                                    gate.started(max)
                                } else {
                                    gate.finished(max)
                                }
                            })
                            .count()
                    })
                })
                .collect();
            let resumes: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
            let running = gate.dispatching();
            let paused = gate.is_paused();
            assert!(
                !paused || running >= max,
                "left paused with {running} dispatches running (limit {max}) and nobody \
                 told to resume ({resumes} resumes)"
            );
            let mut late = 0;
            for _ in 0..running {
                late += usize::from(gate.finished(max));
            }
            assert!(
                !gate.is_paused(),
                "still paused once every dispatch finished"
            );
            assert_eq!(late, usize::from(paused), "one resume per pause left");
        });
    }

    /// The leader reaches the limit (pauses, reads the count again) while an upcall
    /// finishes (counts down, takes the pause back): the store-buffering race. With limit
    /// 1 the gate starts paused; with limit 2 the leader's dispatch is the one that pauses.
    #[test]
    fn dispatch_gate_pause_races_a_finishing_upcall() {
        for max in [1, 2] {
            dispatch_model(max, 1, &[&[true], &[false]], None);
        }
    }

    /// At the limit (paused): one upcall suspends its slot for a nested call and takes it
    /// back (`SuspendedDispatch`), another finishes, and the leader starts a dispatch from
    /// a frame read just before the pause, whose upcall then runs on the same thread and
    /// finishes.
    #[test]
    fn dispatch_gate_nested_calls_and_finishing_upcalls() {
        dispatch_model(2, 2, &[&[false, true], &[false], &[true, false]], Some(3));
    }

    /// The bound in the write models: two 100-byte frames are over it, one is under.
    const MAX: usize = 200;

    /// A connection's write side, as far as back-pressure goes: the write lock's state
    /// (real), the lock-free mirror of the queue's charge (`Connection::queued`, with its
    /// orderings), the leader's flag (real) and the writable event (a stand-in for the
    /// reactor).
    struct WriteSide {
        write: Mutex<WriteState>,
        queued: AtomicUsize,
        block: WriteBlock,
        event: Mutex<bool>,
        cv: Condvar,
        /// Writes the socket takes before it is full (for the rest of the model).
        takes: AtomicUsize,
    }

    impl WriteSide {
        /// The kernel reports the socket writable.
        fn raise(&self) {
            *self.event.lock().unwrap() = true;
            self.cv.notify_all();
        }

        /// The leader's poll, for this connection: blocks until a writable event.
        fn wait_event(&self) {
            let mut g = self.event.lock().unwrap();
            while !*g {
                g = self.cv.wait(g).unwrap();
            }
            *g = false;
        }

        /// `Connection::write_queue` with the socket stand-in: one buffer per write, until
        /// the queue is empty or the socket is full; then the real decision on the interest,
        /// whose writable registration raises an event, as a full socket does once drained.
        fn write_queue<'a>(&'a self, mut w: MutexGuard<'a, WriteState>) {
            let mut batch = Vec::new();
            let stop = loop {
                w.queue.take_front(&mut batch, 1);
                let total: usize = batch.iter().map(Bytes::len).sum();
                drop(w);
                let written = match self.takes.load(Ordering::Relaxed) {
                    0 => 0,
                    n => {
                        self.takes.store(n - 1, Ordering::Relaxed);
                        total
                    }
                };
                w = self.write.lock().unwrap();
                w.queue.written(&mut batch, written);
                self.queued.store(w.queue.charge(), Ordering::Release);
                if w.queue.is_empty() {
                    break None;
                }
                if written < total {
                    break Some(true);
                }
            };
            w.writing = false;
            // Under the write lock, as the registration is.
            let interest = w.interest_after_write(stop);
            if let Some(writable) = interest {
                w.writable_interest = writable;
            }
            if interest == Some(true) || stop == Some(true) {
                self.raise();
            }
        }

        /// `Connection::flush` (on a writable event).
        fn flush(&self) {
            let mut w = self.write.lock().unwrap();
            if w.writing || w.closed {
                return;
            }
            w.writing = true;
            self.write_queue(w);
        }
    }

    /// A writer (an upcall sending its reply) is draining a queue that is over its bound
    /// while the leader, about to read the connection, finds it over the bound and stops
    /// reading (`service`: the mirror, then the drain watch under the write lock, then the
    /// block). Whatever the interleaving, reading resumes: the leader is not left waiting
    /// for a writable event that never comes (loom reports that as a deadlock), and it
    /// resumes once the queue is under its bound. `takes` is how many writes the socket
    /// takes before it is full: the leader's flush writes the rest.
    fn write_model(takes: usize) {
        loom::model(move || {
            let mut ws = WriteState::default();
            ws.queue.push(Bytes::from(vec![1; 100]));
            ws.queue.push(Bytes::from(vec![2; 100]));
            assert!(ws.queue.charge() > MAX && 100 + PART_OVERHEAD <= MAX);
            // The writer has the role (it appended its frame and is writing the queue).
            ws.writing = true;
            let side = Arc::new(WriteSide {
                queued: AtomicUsize::new(ws.queue.charge()),
                write: Mutex::new(ws),
                block: WriteBlock::new(),
                event: Mutex::new(false),
                cv: Condvar::new(),
                takes: AtomicUsize::new(takes),
            });
            let writer = {
                let side = side.clone();
                thread::spawn(move || {
                    let w = side.write.lock().unwrap();
                    side.write_queue(w);
                })
            };
            // The leader: `service`'s check, then its poll loop for this connection.
            let s = &*side;
            if s.queued.load(Ordering::Acquire) > MAX && s.write.lock().unwrap().watch_drain(MAX) {
                s.block.block();
            }
            let mut resumed = 0;
            while s.block.is_blocked() {
                s.wait_event();
                s.flush();
                // `after_write`.
                if s.queued.load(Ordering::Acquire) <= MAX && s.block.resume() {
                    resumed += 1;
                }
            }
            writer.join().unwrap();
            assert!(resumed <= 1, "resumed twice for one block");
            assert!(s.queued.load(Ordering::Acquire) <= MAX);
        });
    }

    /// The socket takes everything: the writer empties the queue.
    #[test]
    fn write_block_resumes_when_a_writer_drains_the_queue() {
        write_model(usize::MAX);
    }

    /// The socket fills after one frame: the writer leaves the rest to the leader's flush
    /// on the writable event.
    #[test]
    fn write_block_resumes_when_the_leader_flushes_a_full_socket() {
        write_model(1);
    }
}
