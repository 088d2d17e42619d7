//! The byte stream of a production connection: a plain TCP socket or a TLS session over one.
//! The connection reads and writes it through `connection::Io` without knowing which; what
//! only one kind has (the socket, the handshake, the peer's identity) is asked of it here.

use crate::identity::PeerIdentity;
use crate::tls::stream::{TlsReader, TlsStream, TlsWriter};
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
            StreamReader::Plain(s) => s.read(buf),
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
            StreamWriter::Plain(s) => s.write(buf),
            StreamWriter::Tls(t) => t.write(buf),
        }
    }

    #[inline]
    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        match self {
            StreamWriter::Plain(s) => s.write_vectored(bufs),
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
