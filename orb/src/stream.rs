//! The byte stream of a production connection: a plain TCP socket or a TLS session over one.
//! The connection reads and writes it through `connection::Io` without knowing which; what
//! only one kind has (the socket, the handshake, the peer's identity) is asked of it here.
//!
//! A plain socket is read with `recv` and written with `send` or `sendmsg` (rustix's direct
//! system calls), not `read`/`writev` through libc: on the benchmarks' Linux VM a round trip
//! of one small message each way costs 0.2 µs less with `send` than with `write` or a
//! two-buffer `writev` (the VFS layer), and libc's wrappers of the blocking calls spend about
//! 45 instructions each on thread cancellation, which a non-blocking socket never needs
//! (`examples/bench/PROFILE.md`, 2026-11-27). `MSG_NOSIGNAL` also spares a process that has
//! not ignored SIGPIPE from dying of a peer that went away.
//!
//! **Owned reads.** A plain socket may be switched to blocking mode
//! ([`Stream::prepare_owned_read`]), once, so that the leader can wait for its next bytes in
//! `recv` itself instead of in the poll and then `recv` (one system call fewer per message: see
//! `server/leader.rs`, "owned reads"). Its receive timeout ([`OWNED_WAIT`]) bounds that wait.
//! Every other read and write passes `MSG_DONTWAIT`, so the socket behaves as a non-blocking
//! one everywhere else, whichever mode it is in. TLS streams are never switched.

use crate::identity::PeerIdentity;
use crate::tls::stream::{TlsReader, TlsStream, TlsWriter};
use rustix::net::{self, RecvFlags, SendAncillaryBuffer, SendFlags};
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

/// The receive timeout of a socket switched for owned reads: the longest an owned read waits
/// before the leader goes back to its poll. The kernel rounds it up to its tick (4 ms at
/// 250 Hz).
pub(crate) const OWNED_WAIT: Duration = Duration::from_micros(200);

/// A connection's byte stream.
#[derive(Debug)]
pub(crate) enum Stream {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS over TCP.
    Tls(Box<TlsStream>),
}

impl From<TcpStream> for Stream {
    fn from(s: TcpStream) -> Self {
        Stream::Plain(s)
    }
}

impl Stream {
    /// The socket under the stream.
    #[inline]
    pub(crate) fn socket(&self) -> &TcpStream {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(t) => t.socket(),
        }
    }

    /// The TLS session, if the stream has one.
    #[inline]
    pub(crate) fn tls(&self) -> Option<&TlsStream> {
        match self {
            Stream::Plain(_) => None,
            Stream::Tls(t) => Some(t),
        }
    }

    /// The peer's certificate identity (TLS with a peer certificate only).
    pub(crate) fn peer_identity(&self) -> Option<Arc<PeerIdentity>> {
        self.tls().and_then(TlsStream::peer_identity)
    }

    /// Whether the stream holds bytes of its own to write (TLS records the socket did not
    /// take).
    #[inline]
    pub(crate) fn wants_write_call(&self) -> bool {
        match self {
            Stream::Plain(_) => false,
            Stream::Tls(t) => t.wants_write_call(),
        }
    }

    /// The read half.
    #[inline]
    pub(crate) fn reader(&self) -> StreamReader<'_> {
        self.reader_waiting(false)
    }

    /// The read half; with `wait` (an owned read), a plain socket's first read waits for
    /// bytes, at most [`OWNED_WAIT`], and the rest do not. `wait` only for a socket switched by
    /// [`prepare_owned_read`](Self::prepare_owned_read); a TLS stream's reader never waits.
    #[inline]
    pub(crate) fn reader_waiting(&self, wait: bool) -> StreamReader<'_> {
        match self {
            Stream::Plain(s) => StreamReader::Plain(s, wait),
            Stream::Tls(t) => StreamReader::Tls(t.reader()),
        }
    }

    /// Switches a plain socket to blocking mode with the receive timeout [`OWNED_WAIT`], so
    /// that [`reader_waiting`](Self::reader_waiting) can wait in `recv`. Two system calls, once
    /// per connection. False for TLS (never switched) or if the socket refused.
    pub(crate) fn prepare_owned_read(&self) -> bool {
        let Stream::Plain(s) = self else {
            return false;
        };
        // The timeout first: a blocking socket without it could hold the leader for good.
        if let Err(e) = s.set_read_timeout(Some(OWNED_WAIT)) {
            tracing::debug!(error = %e, "cannot set a receive timeout: no owned reads");
            return false;
        }
        if let Err(e) = s.set_nonblocking(false) {
            tracing::debug!(error = %e, "cannot make the socket blocking: no owned reads");
            return false;
        }
        true
    }

    /// The write half.
    #[inline]
    pub(crate) fn writer(&self) -> StreamWriter<'_> {
        match self {
            Stream::Plain(s) => StreamWriter::Plain(s),
            Stream::Tls(t) => StreamWriter::Tls(t.writer()),
        }
    }
}

/// [`Stream`]'s read half. A plain socket's reader with `true` waits in its next read (an
/// owned read's first), once.
pub(crate) enum StreamReader<'a> {
    Plain(&'a TcpStream, bool),
    Tls(TlsReader<'a>),
}

impl Read for StreamReader<'_> {
    #[inline]
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            StreamReader::Plain(s, wait) => {
                let flags = if std::mem::take(wait) {
                    RecvFlags::empty()
                } else {
                    RecvFlags::DONTWAIT
                };
                Ok(net::recv(s, buf, flags)?.0)
            }
            StreamReader::Tls(t) => t.read(buf),
        }
    }
}

/// Appends up to `want` bytes of a plain socket to `buf` without waiting, until the end of
/// the stream or an error (`WouldBlock` included: what was read stays in `buf`). Received
/// into `buf`'s spare capacity, never zeroed first; the capacity grows as bytes arrive (by
/// doubling, as `read_to_end` grows it), so what a peer makes us reserve follows what it
/// sent.
pub(crate) fn recv_large(s: &TcpStream, buf: &mut Vec<u8>, want: u64) -> io::Result<usize> {
    let start = buf.len();
    let end = start.saturating_add(usize::try_from(want).unwrap_or(usize::MAX));
    loop {
        let left = end - buf.len();
        if left == 0 {
            return Ok(buf.len() - start);
        }
        if buf.capacity() == buf.len() {
            buf.try_reserve_exact(left.min(buf.len().max(READ_PROBE)))
                .map_err(|_| io::Error::from(io::ErrorKind::OutOfMemory))?;
        }
        let r = if buf.capacity() - buf.len() <= left {
            net::recv(s, rustix::buffer::spare_capacity(buf), RecvFlags::DONTWAIT).map(|(n, _)| n)
        } else {
            // More room than the frame needs (the allocator gave more than asked): receive
            // only what the frame lacks, the rest is the next frame's.
            let mut part = vec![0; left.min(READ_PROBE)];
            net::recv(s, &mut part[..], RecvFlags::DONTWAIT).map(|(_, n)| {
                buf.extend_from_slice(&part[..n]);
                n
            })
        };
        match r {
            Ok(0) => return Ok(buf.len() - start),
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

/// The first reservation of [`recv_large`] for an empty buffer.
const READ_PROBE: usize = 64 << 10;

/// [`Stream`]'s write half.
pub(crate) enum StreamWriter<'a> {
    Plain(&'a TcpStream),
    Tls(TlsWriter<'a>),
}

impl Write for StreamWriter<'_> {
    #[inline]
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            StreamWriter::Plain(s) => Ok(net::send(s, buf, SEND)?),
            StreamWriter::Tls(t) => t.write(buf),
        }
    }

    #[inline]
    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        match self {
            StreamWriter::Plain(s) => send_vectored(s, bufs),
            StreamWriter::Tls(t) => t.write_vectored(bufs),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            StreamWriter::Plain(_) => Ok(()),
            StreamWriter::Tls(t) => t.flush(),
        }
    }
}

/// Every send's flags: no SIGPIPE, and no waiting even on a socket switched to blocking mode
/// for owned reads.
const SEND: SendFlags = SendFlags::NOSIGNAL.union(SendFlags::DONTWAIT);

/// Messages up to this size, in several buffers (a GIOP header and a body), are copied
/// together and sent with one `send`: cheaper than `sendmsg` with their buffers
/// (PROFILE.md, 2026-11-27); larger ones go with `sendmsg`, uncopied.
const JOIN_UP_TO: usize = 512;

std::thread_local! {
    /// Where [`send_vectored`] joins a small message's buffers.
    static JOINED: std::cell::RefCell<Vec<u8>> =
        std::cell::RefCell::new(Vec::with_capacity(JOIN_UP_TO));
}

/// Joins `bufs` in this thread's buffer and sends them with one `send` (a stack array would
/// be zeroed on every send first: a 512-byte `memset`). `None` where the buffer cannot be
/// had: the thread is exiting (its locals are gone) or already joining (not reached today).
fn send_joined(s: &TcpStream, bufs: &[io::IoSlice<'_>]) -> Option<io::Result<usize>> {
    JOINED
        .try_with(|j| {
            let mut joined = j.try_borrow_mut().ok()?;
            joined.clear();
            for b in bufs {
                joined.extend_from_slice(b);
            }
            Some(net::send(s, &joined, SEND).map_err(io::Error::from))
        })
        .ok()
        .flatten()
}

/// `write_vectored` on a plain socket: `send` for one buffer or a small message, else
/// `sendmsg`.
fn send_vectored(s: &TcpStream, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
    match bufs {
        [] => Ok(0),
        [one] => Ok(net::send(s, one, SEND)?),
        _ => {
            let total: usize = bufs.iter().map(|b| b.len()).sum();
            match (total <= JOIN_UP_TO)
                .then(|| send_joined(s, bufs))
                .flatten()
            {
                Some(sent) => sent,
                None => Ok(net::sendmsg(
                    s,
                    bufs,
                    &mut SendAncillaryBuffer::default(),
                    SEND,
                )?),
            }
        }
    }
}
