//! The read side of a connection: [`ReadState`] turns the stream's bytes into decoded frames,
//! apart from the write path and the connection it serves. Sans-I/O: it takes byte slices
//! (`handle_bytes`) or reads from any [`Read`] it is handed (`read_from`; the connection hands
//! it its stream), so its tests use slices and stand-ins.

use super::{Connection, Io};
use crate::giop::{Frame, FrameError, GiopCodec, Header, HEADER_LEN};
use crate::stats::Stats;
use crate::sync::plain::MutexGuard;
use crate::sync::plain_lock as lock;
use bytes::{Bytes, BytesMut};
use std::collections::VecDeque;
use std::io::{self, Read};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use tokio_util::codec::Decoder;

/// What [`ReadState::read_from`] reads: a [`Read`] that may fill a large frame's buffer its
/// own way. A TCP socket's `read_to_end` reads into the buffer's spare capacity without
/// zeroing it first, so a peer that announces a large frame and sends part of it costs
/// memory for what it sent only; the default (through `Read::read`) zeroes each chunk first.
pub(crate) trait Source: Read + Sized {
    /// Appends up to `want` bytes to `buf`, until the end of the stream or an error
    /// (`WouldBlock` included: what was read stays in `buf`).
    fn read_large(&mut self, buf: &mut Vec<u8>, want: u64) -> io::Result<usize> {
        self.by_ref().take(want).read_to_end(buf)
    }
}

impl<S: Source> Source for &mut S {
    fn read_large(&mut self, buf: &mut Vec<u8>, want: u64) -> io::Result<usize> {
        (**self).read_large(buf, want)
    }
}

/// The sans-I/O read side: bytes in, frames out.
///
/// Invariants:
/// - At most one of `buf` and `large` holds undecoded bytes: a large frame starts in `large`
///   only once `buf` has been moved into it, and goes back into `buf` when complete.
/// - Reading stops once `MAX_QUEUED_FRAMES` frames, or `MAX_QUEUED_BYTES` bytes of frames,
///   wait in `frames` (so what a peer makes us hold is bounded: those, plus the one read or
///   the one frame that crossed the bound), or once `READ_BUDGET` bytes were read in one call
///   (so one peer cannot hold the leader); then `maybe_readable` stays set, and the leader
///   puts the connection on the ready list. `queued_bytes` is the wire size of the frames
///   in `frames`.
/// - No frame over the codec's size limit is reserved for or decoded; a header alone never
///   makes it reserve more than `LARGE_UPFRONT`.
#[derive(Debug)]
pub(crate) struct ReadState {
    pub(super) buf: BytesMut,
    /// Small reads land here first (zeroed once, when the connection first reads) and are
    /// appended to `buf`: zeroing a 16 KiB read window per read cost more instructions than
    /// the rest of a small call (callgrind, examples/bench/PROFILE.md).
    staging: Option<Box<[u8]>>,
    /// A frame too large for the staging buffer, received in place: the bytes so far, in a
    /// `Vec` reserved for the frame (up to `LARGE_UPFRONT` ahead), and the frame's size. std's `read_to_end` fills
    /// the spare capacity without zeroing it first; growing `buf` with `resize` before each
    /// read zeroed the rest of the frame (about 1 MiB of `memset` per 1 MiB body, callgrind).
    pub(super) large: Option<(Vec<u8>, usize)>,
    codec: GiopCodec,
    /// Decoded frames, each with its wire size.
    frames: VecDeque<(Frame, usize)>,
    /// The wire sizes of `frames`, summed.
    queued_bytes: usize,
    /// The socket may hold unread bytes (we stopped before `WouldBlock`).
    maybe_readable: bool,
    /// The reactor reported the peer's end of the stream: keep reading until EOF even after
    /// a short read.
    read_closed: bool,
    /// Bytes read from the socket so far (the idle sweep's sign of life).
    bytes_in: u64,
    /// The idle sweep's last look: (bytes read, request ids used) then, and since when the
    /// connection has looked the same.
    sweep_mark: Option<((u64, u32), Instant)>,
    /// The minor version of the last GIOP header received (see `note_header_version`).
    version_seen: Option<u8>,
    /// Owned reads (see `server/leader.rs`): the socket was switched for them (`Some(true)`),
    /// refused the switch (`Some(false)`), or has not been asked (`None`).
    owned_mode: Option<bool>,
    /// The last read that decides it gave a complete frame: an owned read may wait for the
    /// next. An owned read that gives none (its wait timed out, or a part of a frame came)
    /// clears it, and the leader polls until a read from the poll brings a frame: so a peer
    /// that stalls, or trickles, holds the leader in `recv` once, not on every turn.
    own_ok: bool,
}

/// Smallest allocation for received bytes that frames are split from (as tokio's `FramedRead`
/// reserves 8 KiB). A received frame keeps the chunk it lies in alive as long as it (or a
/// slice of its body) lives.
const READ_CHUNK: usize = 8 * 1024;
/// Size of the staging buffer for small reads (and of a read when no large frame is pending).
pub(super) const STAGING: usize = 16 * 1024;
/// Most memory reserved for a large frame before its bytes arrive: a peer's header alone
/// must not make us reserve `max_message_size`, on every connection.
pub(super) const LARGE_UPFRONT: usize = 4 << 20;

/// Frames decoded ahead of processing, per connection, before we stop reading the socket.
/// With 16, a peer with 1,000 small requests in flight left most of them in the kernel's
/// receive queue, read 16 at a time; reading on to the byte bound below keeps that queue
/// short (`tput-async 1000`, examples/bench/PROFILE.md, 2026-11-26).
const MAX_QUEUED_FRAMES: usize = 1024;
/// Bytes of decoded frames held ahead of processing, per connection, before we stop
/// reading the socket (the bound on what a flooding peer makes us hold, with the frame
/// that crosses it).
pub(super) const MAX_QUEUED_BYTES: usize = 256 * 1024;
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
            queued_bytes: 0,
            maybe_readable: true,
            read_closed: false,
            version_seen: None,
            bytes_in: 0,
            sweep_mark: None,
            owned_mode: None,
            own_ok: true,
        }
    }

    /// Whether the leader may wait in this connection's `recv` now: the last read gave a
    /// frame, no decoded frame or large frame is pending, and the peer has not closed.
    pub(crate) fn may_own(&self) -> bool {
        self.own_ok
            && self.frames.is_empty()
            && self.large.is_none()
            && !self.read_closed
            && self.owned_mode != Some(false)
    }

    /// Notes whether the last read (owned or from the poll) brought a frame: see `own_ok`.
    #[inline]
    pub(crate) fn note_read_gave_frame(&mut self, gave: bool) {
        self.own_ok = gave;
    }

    /// Takes received bytes and decodes every complete frame in them.
    #[cfg(test)]
    pub(crate) fn handle_bytes(&mut self, data: &[u8]) -> Result<(), FrameError> {
        self.buf.extend_from_slice(data);
        self.decode_all()
    }

    fn decode_all(&mut self) -> Result<(), FrameError> {
        loop {
            // Nothing left to decode (the common end of a read: whole frames only). The codec
            // would say `None` too, but through the header check and the size bookkeeping.
            if self.buf.is_empty() {
                return Ok(());
            }
            self.note_header_version();
            let before = self.undecoded();
            match self.codec.decode(&mut self.buf)? {
                Some(f) => self.queue(f, before),
                None => return Ok(()),
            }
        }
    }

    /// Bytes received and not yet in a frame: undecoded input and open fragment chains.
    fn undecoded(&self) -> usize {
        self.buf.len() + self.codec.buffered_fragment_bytes()
    }

    /// Queues a frame just decoded, with `before` = [`undecoded`](Self::undecoded) before
    /// the decode: its size is what left the input and the fragment chains, so a fragmented
    /// message counts whole (its earlier fragments waited in a chain), not as its last piece.
    fn queue(&mut self, f: Frame, before: usize) {
        let size = before.saturating_sub(self.undecoded());
        self.queued_bytes += size;
        self.frames.push_back((f, size));
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
        let (f, size) = self.frames.pop_front()?;
        self.queued_bytes -= size;
        Some(f)
    }

    /// Whether decoded frames are waiting.
    /// Whether the stream may hold unread bytes (the reactor said so, and no read has
    /// drained it since).
    pub(crate) fn maybe_readable(&self) -> bool {
        self.maybe_readable
    }

    /// The wire size of the frames waiting (tests).
    #[cfg(test)]
    pub(super) fn queued_bytes(&self) -> usize {
        self.queued_bytes
    }

    pub(crate) fn has_frames(&self) -> bool {
        !self.frames.is_empty()
    }

    /// The stream ended: an error if it ended inside a frame.
    pub(crate) fn handle_eof(&mut self) -> Result<(), FrameError> {
        if let Some((big, _)) = self.large.take() {
            // Inside a large frame: hand the part received to the codec, which says so.
            self.buf = BytesMut::from(&big[..]);
        }
        let before = self.undecoded();
        if let Some(f) = self.codec.decode_eof(&mut self.buf)? {
            self.queue(f, before);
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
        mut io: impl Source,
        stats: &Stats,
    ) -> Result<bool, ReadError> {
        let mut total = 0;
        loop {
            if self.frames.len() >= MAX_QUEUED_FRAMES
                || self.queued_bytes >= MAX_QUEUED_BYTES
                || total >= READ_BUDGET
            {
                self.maybe_readable = true;
                return Ok(true);
            }
            if self.large.is_none() {
                if let Some(size) = self.large_frame_size() {
                    // Capacity for what a header claims only up to a bound: the rest is
                    // reserved as bytes arrive (read_to_end grows it, fallibly).
                    // Into the allocation `buf` lies in (the last large frame's, usually) if
                    // nothing else holds any of it any more and it has room (`try_reclaim`
                    // allocates nothing): its pages are mapped already, where a new `Vec`
                    // of a large frame's size is often fresh memory from the kernel (~40
                    // page faults a 1 MiB frame, PROFILE.md "2026-12-07"). Otherwise the
                    // bytes buffered so far are copied into a new one.
                    let upfront = size.min(LARGE_UPFRONT);
                    let mut big = if self.buf.try_reclaim(upfront.saturating_sub(self.buf.len())) {
                        Vec::from(std::mem::take(&mut self.buf))
                    } else {
                        let mut v = Vec::with_capacity(upfront);
                        v.extend_from_slice(&self.buf);
                        self.buf.clear();
                        v
                    };
                    if big.capacity() < upfront {
                        // Room at the end of an allocation shared still (rare): copied once more.
                        big.reserve_exact(upfront - big.len());
                    }
                    self.large = Some((big, size));
                }
            }
            let (r, want) = match &mut self.large {
                Some((big, size)) => {
                    let want = *size - big.len();
                    let before = big.len();
                    // Reads until the frame is complete, the end of the stream, or
                    // WouldBlock; what it read stays in `big` either way.
                    let r = io.read_large(big, want as u64);
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
                    // Read by the leader only (see `Connection`).
                    crate::stats::add_as_leader(&stats.bytes_received, n as u64);
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

/// What the idle sweep found a connection to be ([`Connection::sweep_look`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expired {
    /// Idle for the whole timeout (accepted connections only).
    Idle,
    /// A partial message has not grown for the whole timeout.
    Stalled,
}

impl<S: Io> Connection<S> {
    /// The read state, locked (the leader only: it is the one reader, so the lock is
    /// uncontended). The leader reads through it in a shape callgrind tuned: the next frame,
    /// else [`read_available`](Self::read_available) and the frames that brought.
    pub(crate) fn read_state(&self) -> MutexGuard<'_, ReadState> {
        lock(&self.read)
    }

    /// Reads the stream into `rs` (this connection's read state, locked by the caller: the
    /// leader) until `WouldBlock`, the read budget or enough queued frames; see
    /// [`ReadState::read_from`]. `Ok(false)` at the end of the stream. With `wait` (an owned
    /// read, after [`prepare_owned_read`](Self::prepare_owned_read)), the first `recv` waits
    /// for bytes, at most the socket's receive timeout; if none came, nothing was read.
    // Inlined into the leader's `service`, which has two copies: called, it cost the
    // server's loop instructions per request (callgrind.sh).
    #[inline(always)]
    pub(crate) fn read_available(
        &self,
        rs: &mut ReadState,
        stats: &Stats,
        wait: bool,
    ) -> Result<bool, ReadError> {
        rs.read_from(self.io.reader_waiting(wait), stats)
    }

    /// Makes the stream ready for owned reads, once (a plain socket goes to blocking mode
    /// with a receive timeout: `stream::OWNED_WAIT`, which the kernel rounds up to its
    /// tick): whether it has them (not TLS, nor a socket that refused).
    pub(crate) fn prepare_owned_read(&self, rs: &mut ReadState) -> bool {
        *rs.owned_mode
            .get_or_insert_with(|| self.io.prepare_owned_read())
    }

    /// Brings the ORB's read-buffer gauge up to date with the `now` bytes this connection
    /// holds (nothing to do when unchanged: no atomic swap then).
    /// [`forget_buffered`](Self::forget_buffered) swaps it to 0 at close without the read
    /// lock; either order accounts each byte once.
    pub(crate) fn account_buffered(&self, now: usize, stats: &Stats) {
        if self.accounted.load(Ordering::Relaxed) != now {
            let before = self.accounted.swap(now, Ordering::Relaxed);
            stats.account_buffer(before, now);
        }
    }
}

impl<S: Io> Connection<S> {
    /// The reactor reported the stream readable, or its end (`read_closed`).
    pub(crate) fn mark_readable(&self, read_closed: bool) {
        let mut rs = lock(&self.read);
        rs.maybe_readable = true;
        rs.read_closed |= read_closed;
    }

    /// Drops this connection's share of the ORB's read-buffer gauge (at close).
    pub(crate) fn forget_buffered(&self, stats: &Stats) {
        let held = self.accounted.swap(0, Ordering::Relaxed);
        stats.account_buffer(held, 0);
    }

    /// The idle sweep's look at this connection at `now` (leader only): expired once it has
    /// looked the same (no byte read, no request id used) for `timeout` while it was idle, or
    /// while a partial message sat in its buffer. Busy connections (a reply owed or awaited,
    /// upcalls, bytes to send, reading stopped) never expire. Only accepted connections
    /// expire for idling: closing one of ours could race a caller that has just picked it
    /// from the cache, and fail a call that was never sent (the server at the other end
    /// closes it with CloseConnection, after which our callers resend). A stalled partial
    /// message expires either way.
    pub(crate) fn sweep_look(&self, now: Instant, timeout: Duration) -> Option<Expired> {
        let busy = self.dispatch.dispatching() > 0
            || self.queued_bytes() > 0
            || self.dispatch.is_paused()
            || self.write_block.is_blocked()
            || !self.mux.is_idle()
            || !self.owed.is_empty();
        let mut rs = lock(&self.read);
        let partial = rs.buffered() > 0;
        let sign = (rs.bytes_in(), self.mux.ids_used());
        let candidate =
            !busy && !rs.has_frames() && (partial || self.origin == super::Origin::Inbound);
        let expired = match rs.sweep_mark {
            Some((seen, since)) if candidate && seen == sign => {
                now.saturating_duration_since(since) >= timeout
            }
            _ => {
                rs.sweep_mark = Some((sign, now));
                false
            }
        };
        match (expired, partial) {
            (false, _) => None,
            (true, true) => Some(Expired::Stalled),
            (true, false) => Some(Expired::Idle),
        }
    }
}

/// A failure while reading a connection.
#[derive(Debug)]
pub(crate) enum ReadError {
    Io(io::Error),
    Frame(FrameError),
}
