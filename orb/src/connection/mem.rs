//! An in-memory transport for the unit tests (h2's mock I/O with a write capacity): a pair of
//! [`MemStream`]s joined by two bounded byte queues, and [`Interest`], a [`WriteInterest`]
//! that records what the write path asks of the event loop. Non-blocking as a socket is: a
//! read of an empty queue and a write to a full one return `WouldBlock`, a write to a queue
//! with some room takes only what fits (a partial write), so the write path's queue, its
//! writable interest and the read state machine are driven step by step, without a socket,
//! a reactor or a timing assumption.

use super::{Io, WriteInterest};
use crate::sync::plain::{Condvar, Mutex};
use crate::sync::plain_lock as lock;
use std::collections::VecDeque;
use std::fmt;
use std::io::{self, IoSlice, Read, Write};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One direction of the pair.
#[derive(Debug, Default)]
struct Pipe {
    bytes: VecDeque<u8>,
    /// Most bytes the pipe holds; a write beyond it is partial or `WouldBlock`.
    capacity: usize,
    /// The writing end shut down: once drained, reads return 0 (end of stream).
    write_closed: bool,
}

#[derive(Debug, Default)]
struct Shared {
    pipe: Mutex<Pipe>,
    /// Signalled on every change of `pipe` (for the blocking helpers of a test's peer).
    changed: Condvar,
}

/// Code a test runs inside the next write, after the write lock was released and before the
/// bytes are taken: what another thread could do during a write system call.
type Hook = Box<dyn FnOnce() + Send>;

/// One end of an in-memory byte stream.
pub(crate) struct MemStream {
    /// What this end reads.
    incoming: Arc<Shared>,
    /// What this end writes (the peer's `incoming`).
    outgoing: Arc<Shared>,
    during_next_write: Mutex<Option<Hook>>,
    /// Write calls made on this end (combining shows as fewer writes than frames).
    writes: AtomicUsize,
}

impl fmt::Debug for MemStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemStream")
            .field("incoming", &lock(&self.incoming.pipe).bytes.len())
            .field("outgoing", &lock(&self.outgoing.pipe).bytes.len())
            .finish()
    }
}

/// Two joined ends: what `a` writes `b` reads (up to `a_to_b` bytes in flight) and the other
/// way round (up to `b_to_a`).
pub(crate) fn pair(a_to_b: usize, b_to_a: usize) -> (MemStream, MemStream) {
    let pipe = |capacity| {
        Arc::new(Shared {
            pipe: Mutex::new(Pipe {
                capacity,
                ..Pipe::default()
            }),
            changed: Condvar::new(),
        })
    };
    let (ab, ba) = (pipe(a_to_b), pipe(b_to_a));
    let a = MemStream {
        incoming: ba.clone(),
        outgoing: ab.clone(),
        during_next_write: Mutex::new(None),
        writes: AtomicUsize::new(0),
    };
    let b = MemStream {
        incoming: ab,
        outgoing: ba,
        during_next_write: Mutex::new(None),
        writes: AtomicUsize::new(0),
    };
    (a, b)
}

impl MemStream {
    /// Runs `f` inside the next write to this end, before it takes any byte.
    pub(crate) fn during_next_write(&self, f: impl FnOnce() + Send + 'static) {
        *lock(&self.during_next_write) = Some(Box::new(f));
    }

    /// Whether the hook set by [`during_next_write`](Self::during_next_write) has run.
    pub(crate) fn hook_ran(&self) -> bool {
        lock(&self.during_next_write).is_none()
    }

    /// Write calls made on this end so far.
    pub(crate) fn writes(&self) -> usize {
        self.writes.load(Ordering::Acquire)
    }

    /// Changes how many bytes may be in flight from this end.
    pub(crate) fn set_capacity(&self, capacity: usize) {
        lock(&self.outgoing.pipe).capacity = capacity;
        self.outgoing.changed.notify_all();
    }

    /// Whether a write from this end would take at least one byte now.
    pub(crate) fn has_room(&self) -> bool {
        let p = lock(&self.outgoing.pipe);
        p.bytes.len() < p.capacity
    }

    /// Bytes written by the peer and not read yet.
    pub(crate) fn available(&self) -> usize {
        lock(&self.incoming.pipe).bytes.len()
    }

    /// Shuts this end's writing down: the peer reads what is in flight, then the end of the
    /// stream.
    pub(crate) fn shutdown_write(&self) {
        lock(&self.outgoing.pipe).write_closed = true;
        self.outgoing.changed.notify_all();
    }

    /// Takes everything the peer has written so far (never blocks).
    pub(crate) fn drain(&self) -> Vec<u8> {
        let mut p = lock(&self.incoming.pipe);
        let out = p.bytes.drain(..).collect();
        self.incoming.changed.notify_all();
        out
    }

    /// Takes exactly `n` bytes, waiting for the peer to write them; panics after `timeout`
    /// (a test that strands bytes fails instead of hanging).
    pub(crate) fn read_exact_within(&self, n: usize, timeout: Duration) -> Vec<u8> {
        let deadline = Instant::now() + timeout;
        let mut out = Vec::with_capacity(n);
        let mut p = lock(&self.incoming.pipe);
        while out.len() < n {
            if p.bytes.is_empty() {
                let now = Instant::now();
                assert!(
                    now < deadline,
                    "{} of {n} bytes arrived in {timeout:?}",
                    out.len()
                );
                self.incoming.changed.wait_for(&mut p, deadline - now);
                continue;
            }
            let k = (n - out.len()).min(p.bytes.len());
            out.extend(p.bytes.drain(..k));
            self.incoming.changed.notify_all();
        }
        out
    }
}

impl super::read::Source for &MemStream {}

impl Read for &MemStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut p = lock(&self.incoming.pipe);
        if p.bytes.is_empty() {
            return if p.write_closed || buf.is_empty() {
                Ok(0)
            } else {
                Err(io::ErrorKind::WouldBlock.into())
            };
        }
        let n = buf.len().min(p.bytes.len());
        for (dst, src) in buf.iter_mut().zip(p.bytes.drain(..n)) {
            *dst = src;
        }
        self.incoming.changed.notify_all();
        Ok(n)
    }
}

impl Write for &MemStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_vectored(&[IoSlice::new(buf)])
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        self.writes.fetch_add(1, Ordering::AcqRel);
        let hook = lock(&self.during_next_write).take();
        if let Some(f) = hook {
            f();
        }
        let mut p = lock(&self.outgoing.pipe);
        if p.write_closed {
            return Err(io::ErrorKind::BrokenPipe.into());
        }
        let room = p.capacity.saturating_sub(p.bytes.len());
        if room == 0 && bufs.iter().any(|b| !b.is_empty()) {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let mut n = 0;
        for b in bufs {
            let k = b.len().min(room - n);
            p.bytes.extend(&b[..k]);
            n += k;
            if n == room {
                break;
            }
        }
        self.outgoing.changed.notify_all();
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Io for MemStream {
    fn reader(&self) -> impl super::read::Source + '_ {
        self
    }

    fn writer(&self) -> impl Write + '_ {
        self
    }
}

/// The event loop's side of the write path, recorded: whether writable interest is on, and
/// how many times it was set.
#[derive(Debug, Default)]
pub(crate) struct Interest {
    writable: AtomicBool,
    calls: AtomicUsize,
}

impl Interest {
    /// Whether the write path last asked for writable events.
    pub(crate) fn writable(&self) -> bool {
        self.writable.load(Ordering::Acquire)
    }

    /// How many times the write path changed the interest.
    pub(crate) fn calls(&self) -> usize {
        self.calls.load(Ordering::Acquire)
    }
}

impl WriteInterest<MemStream> for Interest {
    fn set_writable(&self, _io: &MemStream, _token: usize, writable: bool) -> io::Result<()> {
        self.calls.fetch_add(1, Ordering::AcqRel);
        self.writable.store(writable, Ordering::Release);
        Ok(())
    }
}

#[test]
fn a_write_takes_what_fits_and_a_full_pipe_would_block() {
    let (a, b) = pair(5, 5);
    let mut w = &a;
    assert_eq!(
        w.write_vectored(&[IoSlice::new(b"abc"), IoSlice::new(b"defg")])
            .unwrap(),
        5
    );
    assert!(!a.has_room());
    let e = w.write(b"x").unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
    let mut buf = [0u8; 3];
    let mut r = &b;
    assert_eq!(r.read(&mut buf).unwrap(), 3);
    assert_eq!(&buf, b"abc");
    assert_eq!(b.drain(), b"de");
    let e = r.read(&mut buf).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
    a.shutdown_write();
    assert_eq!(r.read(&mut buf).unwrap(), 0, "end of stream");
}
