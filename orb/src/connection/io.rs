//! The connection's two seams to the outside: [`Io`], the byte stream it reads and writes, and
//! [`WriteInterest`], the event loop's interest in that stream's writable events. The state
//! logic in this module names neither a socket nor the reactor; [`Stream`] (TCP or TLS) is the
//! one [`Io`] of production (below) and the reactor the one [`WriteInterest`] (in `transport`), while
//! the unit tests put an in-memory pipe (`mem`, test-only) and a recorder in their place.

use super::read::Source;
use crate::stream::{Stream, StreamReader};
use std::fmt::Debug;
use std::io::{Read, Write};
use std::net::TcpStream;

/// A non-blocking byte stream, read and written through shared references (as `&TcpStream`
/// is): the leader reads while any thread writes, each under its own lock of the connection.
/// (A plain socket switched for owned reads is in blocking mode, but its reader and writer
/// never wait: see `stream`.)
///
/// Reads and writes return `WouldBlock` when the stream has nothing to give or no room; a
/// read of 0 bytes is the end of the stream. The halves are std's [`Read`] and [`Write`] so
/// that a transport keeps its specialised methods: `TcpStream`'s `read_buf` lets
/// `read_to_end` fill a large frame's buffer without zeroing it first (see `ReadState`).
pub(crate) trait Io: Send + Sync + Debug {
    /// The read half.
    fn reader(&self) -> impl Source + '_;
    /// The write half (`write_vectored` is what the write path calls; `flush` pushes out
    /// what the stream holds of its own, `WouldBlock` if the stream cannot take it yet).
    fn writer(&self) -> impl Write + '_;
    /// Makes the stream ready for owned reads (a plain socket: blocking mode and a receive
    /// timeout, see `stream`): false if it cannot have them (the default).
    fn prepare_owned_read(&self) -> bool {
        false
    }
    /// The read half; with `wait` (an owned read, only after
    /// [`prepare_owned_read`](Self::prepare_owned_read) said yes) its first read waits for
    /// bytes, at most the stream's receive timeout.
    fn reader_waiting(&self, wait: bool) -> impl Source + '_ {
        let _ = wait;
        self.reader()
    }
    /// Whether the stream holds bytes of its own to write (a TLS session's records that the
    /// socket did not take): the write path then flushes and keeps its writable interest even
    /// with an empty queue. Checked under the connection's write lock by the writing thread
    /// as it gives up the writer role, so a reader that sets it and then calls the
    /// connection's flush cannot be missed.
    #[inline]
    fn wants_write_call(&self) -> bool {
        false
    }
}

impl Io for Stream {
    #[inline]
    fn reader(&self) -> impl Source + '_ {
        Stream::reader(self)
    }

    #[inline]
    fn writer(&self) -> impl Write + '_ {
        Stream::writer(self)
    }

    #[inline]
    fn wants_write_call(&self) -> bool {
        Stream::wants_write_call(self)
    }

    fn prepare_owned_read(&self) -> bool {
        Stream::prepare_owned_read(self)
    }

    #[inline]
    fn reader_waiting(&self, wait: bool) -> impl Source + '_ {
        Stream::reader_waiting(self, wait)
    }
}

impl Io for TcpStream {
    #[inline]
    fn reader(&self) -> impl Source + '_ {
        self
    }

    #[inline]
    fn writer(&self) -> impl Write + '_ {
        self
    }
}

impl Source for &TcpStream {
    fn read_large(&mut self, buf: &mut Vec<u8>, want: u64) -> std::io::Result<usize> {
        // `Take<&TcpStream>` forwards `read_buf`: no zeroing of the spare capacity.
        (*self).take(want).read_to_end(buf)
    }
}

impl Source for StreamReader<'_> {
    fn read_large(&mut self, buf: &mut Vec<u8>, want: u64) -> std::io::Result<usize> {
        match self {
            // Not std's `read_to_end`: its reads would wait on a socket switched to blocking
            // mode for owned reads.
            StreamReader::Plain(s, _) => crate::stream::recv_large(s, buf, want),
            StreamReader::Tls(t) => t.by_ref().take(want).read_to_end(buf),
        }
    }
}

/// What the write path needs of the event loop: a stream's interest in writable events,
/// turned on while frames wait for the stream (or a drain is watched) and off again after.
/// Called under the connection's write lock, so that a concurrent flush cannot drop an
/// interest just added. The reactor implements it for sockets (in `transport`, which joins
/// the two); a trait keeps this module apart from the reactor and lets tests record the calls.
pub(crate) trait WriteInterest<S: ?Sized> {
    /// Watches `io` (registered under `token`) for readable events, and for writable ones
    /// too if `writable`. With `writable`, a stream that has room raises a writable event
    /// at once (epoll's behaviour on a re-registration); a full one, when it drains.
    fn set_writable(&self, io: &S, token: usize, writable: bool) -> std::io::Result<()>;
}
