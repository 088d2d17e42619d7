//! A TLS session over a non-blocking socket, read and written through shared references like
//! the socket itself: rustls holds the session state, this type feeds it. All socket I/O of a
//! TLS connection happens under the session's lock, so handshake messages, alerts and
//! records written by the reader never interleave with the records of a frame.
//!
//! - The handshake is driven by [`TlsStream::drive_handshake`] on every event of the
//!   connection until it is done: it reads what arrived, answers, and returns at once when
//!   the socket has nothing more (never blocks).
//! - The reader decrypts into the caller's buffer and reads the socket until it would block
//!   (so a short read means the socket is drained, as for plain TCP).
//! - The writer encrypts only when the TLS records of earlier writes have left: records the
//!   socket did not take make it answer `WouldBlock`, and [`TlsStream::wants_write_call`]
//!   asks for a flush even when the connection's own queue is empty.

use crate::identity::PeerIdentity;
use crate::sync::plain::Mutex;
use crate::sync::plain_lock as lock;
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, ServerConfig, ServerConnection};
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

/// A TLS session and its socket.
///
/// Invariants: the socket is read and written only with `session` locked; `want_flush` is
/// true whenever the session holds TLS records the socket did not take (it may be true
/// without: then a flush finds nothing to do); `handshaking` mirrors the session's, and goes
/// from true to false once.
#[derive(Debug)]
pub(crate) struct TlsStream {
    sock: TcpStream,
    session: Mutex<rustls::Connection>,
    want_flush: AtomicBool,
    handshaking: AtomicBool,
    started: Instant,
    identity: OnceLock<Option<Arc<PeerIdentity>>>,
    /// The peer's alert, if it refused our certificate (see [`TlsStream::refusal`]).
    refused: OnceLock<String>,
}

/// Whether an alert from the peer says it refused our certificate (or our lack of one).
fn refuses_our_certificate(alert: rustls::AlertDescription) -> bool {
    use rustls::AlertDescription as A;
    matches!(
        alert,
        A::CertificateRequired
            | A::BadCertificate
            | A::UnsupportedCertificate
            | A::CertificateRevoked
            | A::CertificateExpired
            | A::CertificateUnknown
            | A::UnknownCA
            | A::AccessDenied
    )
}

/// Where a handshake stands after [`TlsStream::drive_handshake`].
#[derive(Debug)]
pub(crate) enum Handshake {
    /// Waiting for the peer.
    InProgress,
    /// Done: the connection carries records.
    Done,
    /// Failed (a certificate that does not verify, bytes that are not TLS, the peer's alert
    /// or its end of stream); the connection must close.
    Failed(String),
}

impl TlsStream {
    /// Our side of a connection we opened to `server`, whose certificate must name it.
    pub(crate) fn client(
        sock: TcpStream,
        config: Arc<ClientConfig>,
        server: &str,
    ) -> Result<Self, String> {
        let name = ServerName::try_from(server.to_owned())
            .map_err(|e| format!("{server} cannot name a TLS server: {e}"))?;
        let session = ClientConnection::new(config, name).map_err(|e| e.to_string())?;
        Ok(TlsStream::new(sock, session.into()))
    }

    /// Our side of a connection a client opened to our listener.
    pub(crate) fn server(sock: TcpStream, config: Arc<ServerConfig>) -> Result<Self, String> {
        let session = ServerConnection::new(config).map_err(|e| e.to_string())?;
        Ok(TlsStream::new(sock, session.into()))
    }

    fn new(sock: TcpStream, session: rustls::Connection) -> Self {
        TlsStream {
            sock,
            // A client's first flight (its ClientHello) is ready at once.
            want_flush: AtomicBool::new(session.wants_write()),
            session: Mutex::new(session),
            handshaking: AtomicBool::new(true),
            started: Instant::now(),
            identity: OnceLock::new(),
            refused: OnceLock::new(),
        }
    }

    /// The peer's alert if it refused our certificate (under TLS 1.3 a server checks the
    /// client's certificate after the client's handshake is done, so the refusal arrives as
    /// an alert on a connection that looked open): what its callers are told.
    pub(crate) fn refusal(&self) -> Option<&str> {
        self.refused.get().map(String::as_str)
    }

    /// The socket, for what only a socket does (registration, options, shutdown).
    pub(crate) fn socket(&self) -> &TcpStream {
        &self.sock
    }

    /// Whether the handshake is still under way.
    pub(crate) fn is_handshaking(&self) -> bool {
        self.handshaking.load(Ordering::Acquire)
    }

    /// When the session began (for the handshake timeout).
    pub(crate) fn started(&self) -> Instant {
        self.started
    }

    /// The identity in the certificate the peer presented, once the handshake is done and if
    /// it sent one.
    pub(crate) fn peer_identity(&self) -> Option<Arc<PeerIdentity>> {
        self.identity.get().cloned().flatten()
    }

    /// Whether the session holds TLS records for the socket: a flush is due even if no frame
    /// is queued.
    pub(crate) fn wants_write_call(&self) -> bool {
        self.want_flush.load(Ordering::Acquire)
    }

    /// Moves the handshake on with what the socket holds, answering the peer. Never blocks.
    pub(crate) fn drive_handshake(&self) -> Handshake {
        let mut s = lock(&self.session);
        loop {
            if let Err(e) = self.flush_tls(&mut s) {
                return Handshake::Failed(e.to_string());
            }
            if !s.is_handshaking() {
                self.finished(&s);
                return Handshake::Done;
            }
            match s.read_tls(&mut &self.sock) {
                Ok(0) => {
                    return Handshake::Failed("the peer closed during the TLS handshake".into())
                }
                Ok(_) => {
                    if let Err(e) = self.process(&mut s) {
                        return Handshake::Failed(e.to_string());
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Handshake::InProgress,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Handshake::Failed(e.to_string()),
            }
        }
    }

    /// Decrypts what `read_tls` brought; writes what the session answers (alerts, key
    /// updates, tickets) as far as the socket takes it.
    fn process(&self, s: &mut rustls::Connection) -> io::Result<()> {
        if let Err(e) = s.process_new_packets() {
            if let rustls::Error::AlertReceived(alert) = &e {
                if refuses_our_certificate(*alert) {
                    let _ = self.refused.set(format!("{e}"));
                }
            }
            // The alert that says why, if the socket takes it.
            let _ = s.write_tls(&mut &self.sock);
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("TLS: {e}"),
            ));
        }
        if !s.is_handshaking() && self.handshaking.load(Ordering::Relaxed) {
            self.finished(s);
        }
        self.flush_tls(s).map(|_| ())
    }

    fn finished(&self, s: &rustls::Connection) {
        let identity = s
            .peer_certificates()
            .and_then(|certs| certs.first())
            .and_then(|der| match PeerIdentity::from_der(der) {
                Ok(id) => Some(Arc::new(id)),
                Err(e) => {
                    tracing::debug!(error = %e, "peer certificate verified but does not parse");
                    None
                }
            });
        let _ = self.identity.set(identity);
        self.handshaking.store(false, Ordering::Release);
    }

    /// Writes the session's pending TLS records until done (true) or the socket is full
    /// (false, and `want_flush` set).
    fn flush_tls(&self, s: &mut rustls::Connection) -> io::Result<bool> {
        while s.wants_write() {
            match s.write_tls(&mut &self.sock) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.want_flush.store(true, Ordering::Release);
                    return Ok(false);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.want_flush.store(false, Ordering::Release);
        Ok(true)
    }

    /// The read half.
    pub(crate) fn reader(&self) -> TlsReader<'_> {
        TlsReader(self)
    }

    /// The write half.
    pub(crate) fn writer(&self) -> TlsWriter<'_> {
        TlsWriter(self)
    }
}

/// Reads plaintext: what the session has decrypted, then more records from the socket, until
/// the buffer is full or the socket would block.
pub(crate) struct TlsReader<'a>(&'a TlsStream);

impl Read for TlsReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let t = self.0;
        let mut s = lock(&t.session);
        let mut filled = 0;
        loop {
            if filled == buf.len() {
                return Ok(filled);
            }
            match s.reader().read(&mut buf[filled..]) {
                // The peer's close_notify: the end of the stream.
                Ok(0) => return Ok(filled),
                Ok(n) => {
                    filled += n;
                    continue;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                // The socket ended without close_notify: to GIOP, the end of the stream
                // (its framing tells a cut message).
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(filled),
                Err(e) => return Err(e),
            }
            match s.read_tls(&mut &t.sock) {
                // rustls notes the end; the next `reader().read` reports it.
                Ok(0) => {}
                Ok(_) => t.process(&mut s)?,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    return if filled > 0 { Ok(filled) } else { Err(e) };
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// Writes plaintext as TLS records, once the handshake is done and earlier records have left.
pub(crate) struct TlsWriter<'a>(&'a TlsStream);

impl Write for TlsWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_vectored(&[io::IoSlice::new(buf)])
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        let t = self.0;
        let mut s = lock(&t.session);
        if !t.flush_tls(&mut s)? || s.is_handshaking() {
            // Records wait for the socket (its writable event flushes them), or the
            // handshake is not done (its end flushes the queue).
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = s.writer().write_vectored(bufs)?;
        t.flush_tls(&mut s)?;
        if n == 0 && bufs.iter().any(|b| !b.is_empty()) {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        let t = self.0;
        let mut s = lock(&t.session);
        if t.flush_tls(&mut s)? {
            Ok(())
        } else {
            Err(io::ErrorKind::WouldBlock.into())
        }
    }
}
