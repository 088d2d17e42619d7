//! One multiplexed GIOP connection: read buffer and decoded-frame queue, outgoing queue,
//! request-id allocation, the table of pending replies and the table of running upcalls.
//!
//! | state | protected by | who touches it |
//! |---|---|---|
//! | `read` (buffer, codec, decoded frames) | its mutex | the leader only (so uncontended); the socket is read only here |
//! | `write` (outgoing queue) | the write lock | any thread sending a frame; the leader on a writable event |
//! | `pending` (request id → waiter) | its mutex | callers (insert before sending, remove on timeout), the leader (reply), `close` |
//! | `running` (request id → upcall context) | its mutex | upcall threads, the leader (CancelRequest) |
//!
//! [`ReadState`] is sans-I/O: it takes bytes and yields frames, and is tested with byte slices.
//! The socket calls live in the small `read_from`/`send` functions beside it.

use crate::giop::{Frame, FrameError, GiopCodec, Header, HEADER_LEN};
use crate::lf::Participant;
use crate::reactor::Reactor;
use crate::servant::Context;
use crate::stats::Stats;
use bytes::{Bytes, BytesMut};
use mio::Interest;
use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio_util::codec::Decoder;

/// Locks a mutex, ignoring poisoning: a panicking servant must not take the ORB down, and every
/// structure behind our mutexes stays consistent across a panic (we never unwind mid-update).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

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
    codec: GiopCodec,
    frames: VecDeque<Frame>,
    /// The socket may hold unread bytes (we stopped before `WouldBlock`).
    pub(crate) maybe_readable: bool,
    /// The reactor reported the peer's end of the stream: keep reading until EOF even after
    /// a short read.
    pub(crate) read_closed: bool,
}

/// Size of the staging buffer for small reads (and of a read when no large frame is pending).
const STAGING: usize = 16 * 1024;

/// Frames decoded ahead of processing, per connection, before we stop reading the socket.
const MAX_QUEUED_FRAMES: usize = 16;
/// Bytes read from one socket per leader visit before letting other connections run.
const READ_BUDGET: usize = 1 << 20;

impl ReadState {
    pub(crate) fn new(max_message_size: usize) -> Self {
        ReadState {
            buf: BytesMut::new(),
            staging: None,
            codec: GiopCodec::new(max_message_size),
            frames: VecDeque::new(),
            maybe_readable: true,
            read_closed: false,
        }
    }

    /// Takes received bytes and decodes every complete frame in them.
    #[cfg(test)]
    pub(crate) fn handle_bytes(&mut self, data: &[u8]) -> Result<(), FrameError> {
        self.buf.extend_from_slice(data);
        self.decode_all()
    }

    fn decode_all(&mut self) -> Result<(), FrameError> {
        while let Some(f) = self.codec.decode(&mut self.buf)? {
            self.frames.push_back(f);
        }
        Ok(())
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
        if let Some(f) = self.codec.decode_eof(&mut self.buf)? {
            self.frames.push_back(f);
        }
        Ok(())
    }

    /// Bytes held: undecoded input plus partial fragment chains.
    pub(crate) fn buffered(&self) -> usize {
        self.buf.len() + self.codec.buffered_fragment_bytes()
    }

    /// How much to read next: the rest of the frame in progress if its header is here (so a
    /// large body arrives in few reads), else a small chunk.
    fn next_read_size(&self) -> usize {
        const MIN: usize = STAGING;
        if self.buf.len() >= HEADER_LEN {
            if let Ok(h) = Header::decode(&self.buf[..HEADER_LEN]) {
                let total = HEADER_LEN + h.size as usize;
                if total > self.buf.len() && total <= self.codec.max_message_size() + HEADER_LEN {
                    return (total - self.buf.len()).clamp(MIN, 4 << 20);
                }
            }
        }
        MIN
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
            let want = self.next_read_size();
            let start = self.buf.len();
            let r = if want > STAGING {
                // The rest of a large frame: read in place (zeroing it once per read).
                self.buf.resize(start + want, 0);
                io.read(&mut self.buf[start..])
            } else {
                let st = self
                    .staging
                    .get_or_insert_with(|| vec![0; STAGING].into_boxed_slice());
                let r = io.read(&mut st[..want]);
                if let Ok(n) = r {
                    // `buf` now ends at `start + n`: the truncations below are no-ops.
                    self.buf.extend_from_slice(&st[..n]);
                }
                r
            };
            match r {
                Ok(0) => {
                    self.buf.truncate(start);
                    self.maybe_readable = false;
                    return Ok(false);
                }
                Ok(n) => {
                    self.buf.truncate(start + n);
                    total += n;
                    stats.bytes_received.fetch_add(n as u64, Ordering::Relaxed);
                    self.decode_all().map_err(ReadError::Frame)?;
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
                    self.buf.truncate(start);
                    self.maybe_readable = false;
                    return Ok(true);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                    self.buf.truncate(start);
                }
                Err(e) => {
                    self.buf.truncate(start);
                    return Err(ReadError::Io(e));
                }
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

/// Outgoing state, under the connection's write lock.
#[derive(Debug, Default)]
pub(crate) struct WriteState {
    queue: VecDeque<Bytes>,
    pub(crate) queued_bytes: usize,
    pub(crate) writable_interest: bool,
    closed: bool,
}

/// What `send` did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum SendOutcome {
    /// The whole frame went to the socket.
    Written,
    /// Part or all of it waits in the outgoing queue; writable interest is needed.
    Queued { newly_interested: bool },
}

/// One TCP connection carrying GIOP in both directions.
#[derive(Debug)]
pub(crate) struct Connection {
    /// Reactor token of this connection (slab index and generation).
    pub(crate) token: usize,
    pub(crate) peer: SocketAddr,
    pub(crate) origin: Origin,
    pub(crate) stream: TcpStream,
    next_request_id: AtomicU32,
    pub(crate) read: Mutex<ReadState>,
    pub(crate) write: Mutex<WriteState>,
    pub(crate) pending: Mutex<HashMap<u32, Arc<Participant>>>,
    pub(crate) running: Mutex<HashMap<u32, Context>>,
    /// Endpoints the peer announced with BI_DIR_IIOP (calls to them use this connection).
    pub(crate) bidir_endpoints: Mutex<Vec<(String, u16)>>,
    /// Whether we sent our BI_DIR_IIOP listen points on this (outbound) connection.
    pub(crate) bidir_announced: AtomicBool,
    /// Senders waiting for the outgoing queue to drain below its bound.
    pub(crate) drain_waiters: Mutex<Vec<Arc<Participant>>>,
    /// Upcalls from this connection that are running now (back-pressure).
    pub(crate) dispatching: AtomicUsize,
    /// The leader stopped reading because `dispatching` hit the limit.
    pub(crate) paused: AtomicBool,
    closed: AtomicBool,
    /// Bytes this connection has in read buffers, as last reported to the ORB's gauge.
    pub(crate) accounted: AtomicUsize,
    /// Mirror of `WriteState::queued_bytes`, updated under the write lock.
    queued: AtomicUsize,
}

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
        Connection {
            token,
            peer,
            origin,
            stream,
            next_request_id: AtomicU32::new(first),
            read: Mutex::new(ReadState::new(max_message_size)),
            write: Mutex::new(WriteState::default()),
            pending: Mutex::new(HashMap::new()),
            running: Mutex::new(HashMap::new()),
            drain_waiters: Mutex::new(Vec::new()),
            bidir_endpoints: Mutex::new(Vec::new()),
            bidir_announced: AtomicBool::new(false),
            dispatching: AtomicUsize::new(0),
            paused: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            accounted: AtomicUsize::new(0),
            queued: AtomicUsize::new(0),
        }
    }

    /// A fresh request id (step 2 keeps the parity).
    pub(crate) fn next_request_id(&self) -> u32 {
        self.next_request_id.fetch_add(2, Ordering::Relaxed)
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Marks the connection closed; true for the first caller only.
    pub(crate) fn mark_closed(&self) -> bool {
        lock(&self.write).closed = true;
        !self.closed.swap(true, Ordering::AcqRel)
    }

    /// Writes a whole frame, or queues what the socket does not take now. Frames never
    /// interleave: a frame goes straight to the socket only when nothing is queued.
    pub(crate) fn send(
        &self,
        frame: Bytes,
        stats: &Stats,
        reactor: &Reactor,
    ) -> io::Result<SendOutcome> {
        self.send_parts([frame, Bytes::new()], stats, reactor)
    }

    /// Writes one frame given as two parts (a header and a large body that is not copied),
    /// with vectored writes; what the socket does not take is queued, as in [`send`](Self::send).
    pub(crate) fn send_parts(
        &self,
        parts: [Bytes; 2],
        stats: &Stats,
        reactor: &Reactor,
    ) -> io::Result<SendOutcome> {
        let mut w = lock(&self.write);
        if w.closed {
            return Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "connection closed",
            ));
        }
        let [head, body] = parts;
        let mut written = 0;
        if w.queue.is_empty() {
            written = if body.is_empty() {
                write_some(&self.stream, &head)?
            } else {
                write_pair_some(&self.stream, &head, &body)?
            };
            stats
                .bytes_sent
                .fetch_add(written as u64, Ordering::Relaxed);
            if written == head.len() + body.len() {
                return Ok(SendOutcome::Written);
            }
        }
        // Queue what the socket did not take, in order.
        for part in [head, body] {
            let skip = written.min(part.len());
            written -= skip;
            if skip < part.len() {
                w.queued_bytes += part.len() - skip;
                w.queue.push_back(part.slice(skip..));
            }
        }
        self.queued.store(w.queued_bytes, Ordering::Release);
        let newly_interested = !w.writable_interest;
        if newly_interested {
            // Under the write lock, so a concurrent flush cannot drop the interest we add.
            reactor.reregister(
                &self.stream,
                self.token,
                Interest::READABLE | Interest::WRITABLE,
            )?;
            w.writable_interest = true;
        }
        Ok(SendOutcome::Queued { newly_interested })
    }

    /// Writes queued frames (on a writable event). Returns true when the queue is empty and
    /// writable interest can be dropped.
    pub(crate) fn flush(&self, stats: &Stats, reactor: &Reactor) -> io::Result<bool> {
        let mut w = lock(&self.write);
        let w = &mut *w;
        while let Some(front) = w.queue.front_mut() {
            let n = write_some(&self.stream, front)?;
            stats.bytes_sent.fetch_add(n as u64, Ordering::Relaxed);
            w.queued_bytes -= n;
            self.queued.store(w.queued_bytes, Ordering::Release);
            if n == front.len() {
                w.queue.pop_front();
            } else {
                let rest = front.slice(n..);
                *front = rest;
                return Ok(false);
            }
        }
        if w.writable_interest {
            reactor.reregister(&self.stream, self.token, Interest::READABLE)?;
            w.writable_interest = false;
        }
        Ok(true)
    }

    /// Bytes waiting in the outgoing queue. Read without the write lock (which a sender holds
    /// across its syscall): every send checks this, and taking the lock for it was the
    /// hottest futex under 32 concurrent callers.
    pub(crate) fn queued_bytes(&self) -> usize {
        self.queued.load(Ordering::Acquire)
    }
}

/// Writes as much of `head` then `body` as the socket takes now, with `writev` (no copy, no
/// allocation); `WouldBlock` is not an error. Returns the bytes written.
fn write_pair_some(mut s: &TcpStream, head: &[u8], body: &[u8]) -> io::Result<usize> {
    let total = head.len() + body.len();
    let mut done = 0;
    while done < total {
        let r = if done < head.len() {
            s.write_vectored(&[io::IoSlice::new(&head[done..]), io::IoSlice::new(body)])
        } else {
            s.write(&body[done - head.len()..])
        };
        match r {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "socket wrote 0")),
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// Writes as much of `buf` as the socket takes now; `WouldBlock` is not an error.
fn write_some(mut s: &TcpStream, buf: &[u8]) -> io::Result<usize> {
    let mut off = 0;
    while off < buf.len() {
        match s.write(&buf[off..]) {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "socket wrote 0")),
            Ok(n) => off += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(off)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::giop::{write_close_connection, Message, Version};

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

    #[test]
    fn eof_inside_a_frame_is_an_error() {
        let mut rs = ReadState::new(1024);
        rs.handle_bytes(b"GIOP\x01\x02\x01").unwrap();
        assert!(rs.handle_eof().is_err());
    }

    #[test]
    fn garbage_is_a_frame_error() {
        let mut rs = ReadState::new(1024);
        assert!(rs.handle_bytes(b"HTTP/1.1 200 OK\r\n\r\n").is_err());
    }
}
