//! The raw-TCP baseline (`--impl raw`): what the hardware and kernel give for the same echo.
//!
//! Blocking std sockets, TCP_NODELAY on both sides, one thread per connection on the server,
//! one connection per client thread. A message is a 4-byte little-endian length, then the
//! payload. Each side reads through a `BufReader` (a small message costs one `read`) and writes
//! prefix and payload with one `writev` (no copy into a combined buffer): one read and one write
//! system call per message, the least a request/reply over TCP can cost.
//!
//! `--impl raw-epoll` is the same program with non-blocking sockets that wait in `epoll_wait`
//! (mio) whenever a read or write would block: the system calls of an event loop (an
//! `epoll_wait` before each read), with none of the ORB's code. Not part of the protocol; it
//! splits the ORB's cost over raw into what a reactor design costs in the kernel and what the
//! ORB's own code costs.

use crate::metrics::{
    cross_check, main_thread_ctx_switches, peak_rss_kb, proc_status_ctx_switches, CtxSwitches,
    JsonLine,
};
use crate::workload::EchoConn;
use bytes::Bytes;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use std::io::{self, BufReader, IoSlice, IoSliceMut, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Largest message either side accepts (the ORB's default maximum message size).
const MAX_LEN: usize = 64 << 20;

/// Writes every byte of `bufs` (`Write::write_all_vectored` is not stable yet).
fn write_all_vectored(mut w: impl Write, bufs: &mut [IoSlice<'_>]) -> io::Result<()> {
    let mut bufs = bufs;
    IoSlice::advance_slices(&mut bufs, 0);
    while !bufs.is_empty() {
        match w.write_vectored(bufs) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut bufs, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// One side of a connection: a blocking socket, or (`raw-epoll`) a non-blocking one that waits
/// in its own epoll set, for readiness in one direction, whenever it would block.
pub enum Sock {
    Blocking(TcpStream),
    Polled {
        s: TcpStream,
        poll: Poll,
        events: Events,
    },
}

impl Sock {
    /// `s` as is (`polled` false) or made non-blocking and registered for `interest`.
    fn new(s: TcpStream, polled: bool, interest: Interest) -> io::Result<Self> {
        if !polled {
            return Ok(Sock::Blocking(s));
        }
        s.set_nonblocking(true)?;
        let poll = Poll::new()?;
        poll.registry()
            .register(&mut SourceFd(&s.as_raw_fd()), Token(0), interest)?;
        Ok(Sock::Polled {
            s,
            poll,
            events: Events::with_capacity(4),
        })
    }

    /// Runs `op` on the socket; while it would block, waits for readiness and runs it again.
    fn retry<T>(&mut self, mut op: impl FnMut(&TcpStream) -> io::Result<T>) -> io::Result<T> {
        match self {
            Sock::Blocking(s) => op(s),
            Sock::Polled { s, poll, events } => loop {
                match op(s) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        match poll.poll(events, None) {
                            Ok(()) => {}
                            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                            Err(e) => return Err(e),
                        }
                    }
                    r => return r,
                }
            },
        }
    }
}

impl Read for Sock {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.retry(|mut s| s.read(buf))
    }

    fn read_vectored(&mut self, bufs: &mut [IoSliceMut<'_>]) -> io::Result<usize> {
        self.retry(|mut s| s.read_vectored(bufs))
    }
}

impl Write for Sock {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.retry(|mut s| s.write(buf))
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        self.retry(|mut s| s.write_vectored(bufs))
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A connection's reading and writing halves (each with its own epoll set when polled).
fn split(s: TcpStream, polled: bool) -> io::Result<(BufReader<Sock>, Sock)> {
    s.set_nodelay(true)?;
    let writer = Sock::new(s.try_clone()?, polled, Interest::WRITABLE)?;
    let reader = BufReader::with_capacity(64 * 1024, Sock::new(s, polled, Interest::READABLE)?);
    Ok((reader, writer))
}

fn write_msg(w: &mut Sock, data: &[u8]) -> io::Result<()> {
    let len = u32::try_from(data.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "message too long"))?;
    let prefix = len.to_le_bytes();
    write_all_vectored(w, &mut [IoSlice::new(&prefix), IoSlice::new(data)])
}

/// Reads one message into `buf` (replacing its contents); `Ok(false)` on a clean end of stream.
fn read_msg(r: &mut impl Read, buf: &mut Vec<u8>) -> io::Result<bool> {
    let mut prefix = [0u8; 4];
    match r.read_exact(&mut prefix) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(false),
        Err(e) => return Err(e),
    }
    let len = u32::from_le_bytes(prefix) as usize;
    if len > MAX_LEN {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "message too long",
        ));
    }
    buf.clear();
    buf.reserve(len);
    let got = r.take(len as u64).read_to_end(buf)?;
    if got != len {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    Ok(true)
}

/// A client connection of the baseline.
pub struct RawConn {
    reader: BufReader<Sock>,
    writer: Sock,
}

impl RawConn {
    /// A connection to the baseline server; `polled` for `raw-epoll`.
    pub fn connect(port: u16, polled: bool) -> Result<Self, String> {
        let s = TcpStream::connect(("127.0.0.1", port))
            .map_err(|e| format!("cannot connect to 127.0.0.1:{port}: {e}"))?;
        let (reader, writer) = split(s, polled).map_err(|e| e.to_string())?;
        Ok(RawConn { reader, writer })
    }
}

impl EchoConn for RawConn {
    type Reply = Vec<u8>;

    fn echo(&mut self, data: Bytes) -> Result<Vec<u8>, String> {
        write_msg(&mut self.writer, &data).map_err(|e| format!("write: {e}"))?;
        let mut reply = Vec::new();
        match read_msg(&mut self.reader, &mut reply) {
            Ok(true) => Ok(reply),
            Ok(false) => Err("server closed the connection".into()),
            Err(e) => Err(format!("read: {e}")),
        }
    }
}

/// Serves one connection: echo every message until the peer closes.
fn serve(s: TcpStream, polled: bool, calls: &AtomicU64) -> io::Result<()> {
    let (mut reader, mut writer) = split(s, polled)?;
    let mut buf = Vec::new();
    while read_msg(&mut reader, &mut buf)? {
        write_msg(&mut writer, &buf)?;
        calls.fetch_add(1, Ordering::Relaxed);
    }
    Ok(())
}

/// `server --impl raw` (`raw-epoll` with `polled`): accepts on a thread of its own and serves
/// each connection on a new thread until SIGTERM/SIGINT, then prints its JSON line.
pub fn server(port: u16, polled: bool, wait_for_signal: impl FnOnce()) -> Result<(), String> {
    let l = TcpListener::bind(("127.0.0.1", port))
        .map_err(|e| format!("cannot listen on 127.0.0.1:{port}: {e}"))?;
    let addr = l.local_addr().map_err(|e| e.to_string())?;
    let calls = Arc::new(AtomicU64::new(0));
    let live = Arc::new(AtomicUsize::new(0));
    let conns = Arc::new(AtomicU64::new(0));
    let before = CtxSwitches::now();
    let (proc_before, main_before) = (proc_status_ctx_switches(), main_thread_ctx_switches());
    {
        let (calls, live, conns) = (calls.clone(), live.clone(), conns.clone());
        std::thread::Builder::new()
            .name("raw-accept".into())
            .spawn(move || {
                for s in l.incoming() {
                    let Ok(s) = s else { continue };
                    conns.fetch_add(1, Ordering::Relaxed);
                    live.fetch_add(1, Ordering::AcqRel);
                    let (calls, live) = (calls.clone(), live.clone());
                    let spawned =
                        std::thread::Builder::new()
                            .name("raw-conn".into())
                            .spawn(move || {
                                if let Err(e) = serve(s, polled, &calls) {
                                    eprintln!("raw server: connection ended: {e}");
                                }
                                live.fetch_sub(1, Ordering::AcqRel);
                            });
                    if let Err(e) = spawned {
                        eprintln!("raw server: cannot start a thread: {e}");
                    }
                }
            })
            .map_err(|e| e.to_string())?;
    }
    eprintln!("listening on {addr}");
    wait_for_signal();
    // Let connection threads that saw their client leave finish (their counts then sit in the
    // process totals), but do not wait for clients still connected.
    let until = Instant::now() + Duration::from_millis(500);
    while live.load(Ordering::Acquire) > 0 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(5));
    }
    cross_check(before, proc_before, main_before);
    let ctx = CtxSwitches::now().since(before);
    let n = calls.load(Ordering::Relaxed);
    JsonLine::new()
        .str("impl", if polled { "raw-epoll" } else { "raw" })
        .str("role", "server")
        .int("threads", conns.load(Ordering::Relaxed))
        .int("calls", n)
        .num("ctx_switches_per_call", ctx.per_call(n))
        .int("voluntary_ctx_switches", ctx.voluntary)
        .int("involuntary_ctx_switches", ctx.involuntary)
        .int("peak_rss_kb", peak_rss_kb())
        .print();
    Ok(())
}
