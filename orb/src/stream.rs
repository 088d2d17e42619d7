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

use crate::identity::PeerIdentity;
use crate::tls::stream::{TlsReader, TlsStream, TlsWriter};
use rustix::net::{self, RecvFlags, SendAncillaryBuffer, SendFlags};
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;

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
        match self {
            Stream::Plain(s) => StreamReader::Plain(s),
            Stream::Tls(t) => StreamReader::Tls(t.reader()),
        }
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

/// [`Stream`]'s read half.
pub(crate) enum StreamReader<'a> {
    Plain(&'a TcpStream),
    Tls(TlsReader<'a>),
}

impl Read for StreamReader<'_> {
    #[inline]
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            StreamReader::Plain(s) => Ok(net::recv(s, buf, RecvFlags::empty())?.0),
            StreamReader::Tls(t) => t.read(buf),
        }
    }
}

/// [`Stream`]'s write half.
pub(crate) enum StreamWriter<'a> {
    Plain(&'a TcpStream),
    Tls(TlsWriter<'a>),
}

impl Write for StreamWriter<'_> {
    #[inline]
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            StreamWriter::Plain(s) => Ok(net::send(s, buf, SendFlags::NOSIGNAL)?),
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
            Some(net::send(s, &joined, SendFlags::NOSIGNAL).map_err(io::Error::from))
        })
        .ok()
        .flatten()
}

/// `write_vectored` on a plain socket: `send` for one buffer or a small message, else
/// `sendmsg`.
fn send_vectored(s: &TcpStream, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
    match bufs {
        [] => Ok(0),
        [one] => Ok(net::send(s, one, SendFlags::NOSIGNAL)?),
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
                    SendFlags::NOSIGNAL,
                )?),
            }
        }
    }
}
