//! The write side of a connection: [`OutQueue`] (sans-I/O), the write lock's [`WriteState`],
//! and the write path (`send`, combining, `flush`, the held writer role) as methods of
//! [`Connection`], apart from the read side and the connection's lifecycle. The path writes
//! to the connection's [`Io`] stream and reports what is left as a [`Flush`].

use super::{Connection, Io, WriteInterest};
use crate::stats::Stats;
use crate::sync::plain::MutexGuard;
use crate::sync::plain_lock as lock;
use bytes::{Buf, Bytes};
use std::collections::VecDeque;
use std::io::{self, Write};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Most buffers handed to one `writev`.
const MAX_IOV: usize = 32;
/// Memory a queued buffer costs beyond its bytes (its allocation's header and rounding, and
/// its `Bytes` handle in the queue), charged against the outgoing queue's bound.
pub(crate) const PART_OVERHEAD: usize = 64;
/// Batches one sender writes for others before leaving the rest to the reactor (a writable
/// event), so a sender's own call is not held up indefinitely by a busy connection.
const MAX_ROUNDS: usize = 8;

/// How a write of the outgoing queue ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub(crate) enum Flush {
    /// The queue is empty (or the connection closed, which emptied it).
    Done,
    /// Bytes are left queued, and writable interest is on: the stream was full (or the
    /// writer's rounds ran out), and the writable event's flush sends the rest.
    WantWritable,
    /// Another thread holds the writer role; it sends what is queued.
    Busy,
}

/// The bytes not yet written to a socket, in order: whole frames and the unwritten tail of
/// the one in progress. Sans-I/O.
///
/// Invariants: `len` is the sum of the lengths of `parts` plus those of a batch taken by
/// [`take_front`](Self::take_front) and not yet handed back by
/// [`written`](Self::written); no part is empty.
#[derive(Debug, Default)]
pub(crate) struct OutQueue {
    pub(super) parts: VecDeque<Bytes>,
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

    /// Buffers queued (a small frame is one).
    pub(crate) fn buffers(&self) -> usize {
        self.parts.len()
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

/// Outgoing state, under the connection's write lock.
///
/// Invariants:
/// - At most one thread holds the writer role (`writing`) and only it writes the stream,
///   without the lock; others append to `queue`. So frames leave whole and in queue order.
/// - `writable_interest` is the stream's registration as last set through [`WriteInterest`],
///   changed only under this lock together with the registration; while it is set a
///   writable event is due (bytes wait, a drain is watched, or the connect is under way), and
///   senders queue rather than write.
/// - `closed` is set once; after it the queue is empty and nothing is appended.
#[derive(Debug, Default)]
pub(crate) struct WriteState {
    pub(super) queue: OutQueue,
    /// A thread is writing the front of the queue to the socket (outside the lock); others
    /// only append.
    pub(super) writing: bool,
    pub(crate) writable_interest: bool,
    pub(super) closed: bool,
    /// The writer's batch storage, kept between writes (no allocation per write).
    spare: Vec<Bytes>,
    /// When the writer role was taken for a batch of replies
    /// ([`Connection::hold_for_batch`]); `None` when it was not.
    batch_since: Option<Instant>,
    /// Someone waits for the queue to fall under its bound (the leader, which stopped
    /// reading the connection, or a sender): the writer that empties the queue raises a
    /// writable event, so that the leader's flush (`after_write`) sees it.
    drain_watched: bool,
}

impl WriteState {
    /// Nobody is writing and nothing waits: a frame may be written around the queue.
    fn is_free(&self) -> bool {
        !self.writing && !self.writable_interest && self.queue.is_empty()
    }

    /// [`Connection::watch_drain`] under the write lock.
    pub(super) fn watch_drain(&mut self, max: usize) -> bool {
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
    pub(super) fn interest_after_write(&mut self, stop: Option<bool>) -> Option<bool> {
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

impl<S: Io> Connection<S> {
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
        reactor: &impl WriteInterest<S>,
    ) -> io::Result<()> {
        self.send_parts([frame, Bytes::new()], stats, reactor)
    }

    /// Sends one frame given as parts (a header, then a large body that is not copied, in
    /// one or more parts; empty parts are skipped).
    /// Frames never interleave. If another thread is writing, the frame is appended for it
    /// to send (combining); else this thread writes the queue with vectored writes, and what
    /// the socket does not take waits for a writable event.
    pub(crate) fn send_parts<const N: usize>(
        &self,
        parts: [Bytes; N],
        stats: &Stats,
        reactor: &impl WriteInterest<S>,
    ) -> io::Result<()> {
        let mut w = self.lock_open()?;
        if w.is_free() {
            // Nothing queued and nobody writing (a call at a time): write the frame from its
            // own buffers, around the queue. Frames sent meanwhile queue behind it.
            return self.write_around_queue(
                w,
                parts,
                |io, parts| write_vectored_some::<N>(io.writer(), parts),
                |n, parts, batch| {
                    if n < parts.iter().map(Bytes::len).sum::<usize>() {
                        batch.extend(parts);
                    }
                    n
                },
                stats,
                reactor,
            );
        }
        for (i, mut part) in parts.into_iter().enumerate() {
            if i == 0 && w.writable_interest {
                // Queued behind a full socket: may wait long (see `outbuf::detach`).
                part = crate::outbuf::detach(part);
            }
            w.queue.push(part);
        }
        self.queued.store(w.queue.charge(), Ordering::Release);
        // Another thread writing sends this frame with its own; a full socket (writable
        // interest on) is written by the leader on the writable event.
        if !w.writing && !w.writable_interest {
            w.writing = true;
            let _: Flush = self.write_queue(w, stats, reactor)?;
        }
        Ok(())
    }

    /// Sends a whole frame from the caller's buffer if nobody is writing and nothing is
    /// queued (a call at a time): true when it was taken, false (nothing done) when the
    /// connection is busy and the caller must queue the frame as `Bytes` with
    /// [`send_parts`](Self::send_parts). What the socket does not take now is copied into
    /// the queue, to go out on the writable event. The frame stays in the caller's buffer,
    /// which it reuses: no reference count to take and drop per frame (`outbuf::encode_offer`).
    pub(crate) fn send_borrowed(
        &self,
        frame: &[u8],
        stats: &Stats,
        reactor: &impl WriteInterest<S>,
    ) -> io::Result<bool> {
        let w = self.lock_open()?;
        if !w.is_free() {
            return Ok(false);
        }
        self.write_around_queue(
            w,
            frame,
            |io, frame| write_vectored_some::<1>(io.writer(), &[*frame]),
            |n, frame, batch| {
                if n < frame.len() {
                    // It may wait for the peer: a copy of its own (as `outbuf::detach` makes).
                    batch.push(Bytes::copy_from_slice(&frame[n..]));
                }
                0
            },
            stats,
            reactor,
        )?;
        Ok(true)
    }

    /// The write lock, for a frame to send: `NotConnected` once the connection is closed.
    #[inline]
    fn lock_open(&self) -> io::Result<MutexGuard<'_, WriteState>> {
        let w = lock(&self.write);
        if w.closed {
            return Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "connection closed",
            ));
        }
        Ok(w)
    }

    /// Writes `frame` around the queue, which `w` (the write lock) found free: the writer
    /// role is taken, `write` runs without the lock, and what the socket did not take goes
    /// first in the queue, ahead of what others queued meanwhile, to be written on (or on
    /// the writable event). `rest(n, frame, batch)` puts the frame's unwritten buffers into
    /// `batch` (`n` bytes of the frame were written) and says how many bytes of those
    /// buffers were written already.
    #[inline]
    fn write_around_queue<F>(
        &self,
        mut w: MutexGuard<'_, WriteState>,
        frame: F,
        write: impl FnOnce(&S, &F) -> io::Result<usize>,
        rest: impl FnOnce(usize, F, &mut Vec<Bytes>) -> usize,
        stats: &Stats,
        reactor: &impl WriteInterest<S>,
    ) -> io::Result<()> {
        w.writing = true;
        drop(w);
        let r = write(&self.io, &frame);
        let mut w = lock(&self.write);
        let n = match r {
            Ok(n) => n,
            Err(e) => {
                w.writing = false;
                return Err(e);
            }
        };
        stats.bytes_sent.fetch_add(n as u64, Ordering::Relaxed);
        stats.socket_writes.fetch_add(1, Ordering::Relaxed);
        if w.closed {
            w.writing = false;
            return Ok(());
        }
        // The spare batch is empty between uses: filled only with an unwritten rest.
        let written = rest(n, frame, &mut w.spare);
        if !w.spare.is_empty() {
            let mut batch = std::mem::take(&mut w.spare);
            w.queue.put_back(&mut batch, written);
            w.spare = batch;
            self.queued.store(w.queue.charge(), Ordering::Release);
        }
        if w.queue.is_empty() && !self.io.wants_write_call() {
            w.writing = false;
            return Ok(());
        }
        // Sent, whether now or on the writable event (`WantWritable`).
        let _: Flush = self.write_queue(w, stats, reactor)?;
        Ok(())
    }

    /// Writes queued frames (on a writable event). [`Flush::Done`] when the queue is empty
    /// and writable interest was dropped (or the connection is closed).
    pub(crate) fn flush(
        &self,
        stats: &Stats,
        reactor: &impl WriteInterest<S>,
    ) -> io::Result<Flush> {
        let mut w = lock(&self.write);
        if w.closed {
            return Ok(Flush::Done);
        }
        if w.writing {
            // The writing thread finishes the job (and drops the interest when done).
            return Ok(Flush::Busy);
        }
        w.writing = true;
        self.write_queue(w, stats, reactor)
    }

    /// Before an orderly close: lets a write in progress on another thread finish (a
    /// non-blocking system call, or a leader's short hold of the writer role: never a wait for
    /// the peer), then writes what is queued once, without waiting for the peer. Without it, a
    /// frame queued behind that write (the CloseConnection) would be dropped by the close.
    /// What the socket does not take now is lost with the close.
    pub(crate) fn flush_before_close(&self, stats: &Stats, reactor: &impl WriteInterest<S>) {
        // A kept hold (a driver's, a batch's) would keep `writing` set below.
        let _ = self.end_kept_hold(stats, reactor);
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

    /// Takes the writer role and keeps it past this thread (as `keep_hold`
    /// does) for the replies to the requests of one read: the leader, dispatching one of
    /// several requests it read at once, lets their replies queue and go out in one
    /// `writev` instead of one system call each (`tput` on the server, PROFILE.md
    /// 2026-11-26 afternoon). True if a hold is kept now (taken, or kept already); false if
    /// another thread writes, the socket is full or the connection closed.
    pub(crate) fn hold_for_batch(&self, now: Instant) -> bool {
        if self.hold_kept.load(Ordering::Acquire) {
            return true;
        }
        let mut w = lock(&self.write);
        if w.writing || w.writable_interest || w.closed {
            return false;
        }
        w.writing = true;
        w.batch_since = Some(now);
        self.hold_kept.store(true, Ordering::Release);
        true
    }

    /// Whether a hold is kept past the thread that took it (a driver's or a batch's).
    #[inline]
    pub(crate) fn hold_is_kept(&self) -> bool {
        self.hold_kept.load(Ordering::Acquire)
    }

    /// Whether a hold kept for a batch ([`hold_for_batch`](Self::hold_for_batch)) has
    /// enough behind it: `max_parts` buffers queued (a reply is one, a large one a few), or
    /// taken more than `max_age` before `now`: the replies queued behind it have waited long
    /// enough.
    pub(crate) fn batch_hold_full(
        &self,
        max_parts: usize,
        max_age: Duration,
        now: Instant,
    ) -> bool {
        if !self.hold_kept.load(Ordering::Acquire) {
            return false;
        }
        let w = lock(&self.write);
        w.queue.buffers() >= max_parts
            || w.batch_since
                .is_some_and(|t| now.saturating_duration_since(t) > max_age)
    }

    /// Keeps the role taken by [`hold_writes`](Self::hold_writes) past the turn that took it,
    /// for an event-loop driver (`protorb::tokio`): the replies the turn handed out wake
    /// tasks that run only after it, on the driver's thread, and each sends its next
    /// request at once; held, those requests go out in one `writev` when the driver is
    /// polled next ([`end_kept_hold`](Self::end_kept_hold)) instead of one system call
    /// each. Anyone who must not wait behind the hold (a sender about to wait for its reply
    /// or for room in the queue, a close) ends it first.
    #[cfg(feature = "tokio")]
    pub(crate) fn keep_hold(&self) {
        self.hold_kept.store(true, Ordering::Release);
    }

    /// Ends a hold kept by `keep_hold` or `hold_for_batch`, writing what was
    /// queued behind it; `None` if there was none (or another thread ended it first).
    pub(crate) fn end_kept_hold(
        &self,
        stats: &Stats,
        reactor: &impl WriteInterest<S>,
    ) -> Option<io::Result<Flush>> {
        // The plain load first: on every blocking send, where a hold is rare.
        if !self.hold_kept.load(Ordering::Acquire) || !self.hold_kept.swap(false, Ordering::AcqRel)
        {
            return None;
        }
        Some(self.release_writes(stats, reactor))
    }

    /// Gives back the role taken by [`hold_writes`](Self::hold_writes), writing what was queued
    /// meanwhile.
    pub(crate) fn release_writes(
        &self,
        stats: &Stats,
        reactor: &impl WriteInterest<S>,
    ) -> io::Result<Flush> {
        let mut w = lock(&self.write);
        w.batch_since = None;
        if w.closed || (w.queue.is_empty() && !self.io.wants_write_call()) {
            w.writing = false;
            return Ok(Flush::Done);
        }
        self.write_queue(w, stats, reactor)
    }

    /// The writing thread's loop: takes batches off the front of the queue and writes them
    /// without the lock, until the queue is empty, the socket is full, or `MAX_ROUNDS`; what
    /// is left waits for a writable event. Clears `writing` before returning.
    fn write_queue<'a>(
        &'a self,
        mut w: MutexGuard<'a, WriteState>,
        stats: &Stats,
        reactor: &impl WriteInterest<S>,
    ) -> io::Result<Flush> {
        let mut batch = std::mem::take(&mut w.spare);
        let mut rounds = 0;
        // None: nothing left to write; Some(full): leave the rest, the socket full or not.
        let end = loop {
            w.queue.take_front(&mut batch, MAX_IOV);
            let total: usize = batch.iter().map(Bytes::len).sum();
            drop(w);
            let r = write_vectored_some::<MAX_IOV>(self.io.writer(), &batch);
            w = lock(&self.write);
            let written = match r {
                Ok(k) => k,
                Err(e) => break Err(e),
            };
            stats
                .bytes_sent
                .fetch_add(written as u64, Ordering::Relaxed);
            stats.socket_writes.fetch_add(1, Ordering::Relaxed);
            if w.closed {
                break Ok(None); // the queue was cleared
            }
            w.queue.written(&mut batch, written);
            self.queued.store(w.queue.charge(), Ordering::Release);
            rounds += 1;
            if w.queue.is_empty() {
                if !self.io.wants_write_call() {
                    break Ok(None);
                }
                // The stream's own bytes (TLS records) are left: push them out, and wait
                // for the writable event if the socket does not take them all.
                drop(w);
                let r = self.io.writer().flush();
                w = lock(&self.write);
                match r {
                    Ok(()) if w.closed => break Ok(None),
                    Ok(()) => continue,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break Ok(Some(true)),
                    Err(e) => break Err(e),
                }
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
            // The mirror is on before the registration asks for the event and off after it
            // stops (see `writable_wanted`).
            if writable {
                self.writable_wanted.store(true, Ordering::Release);
            }
            reactor.set_writable(&self.io, self.token, writable)?;
            w.writable_interest = writable;
            if !writable {
                self.writable_wanted.store(false, Ordering::Release);
            }
        }
        Ok(match stop {
            None => Flush::Done,
            Some(_) => Flush::WantWritable,
        })
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
fn write_vectored_some<const N: usize>(
    mut s: impl Write,
    bufs: &[impl AsRef<[u8]>],
) -> io::Result<usize> {
    let mut slices = [io::IoSlice::new(&[]); N];
    for (sl, b) in slices.iter_mut().zip(bufs) {
        *sl = io::IoSlice::new(b.as_ref());
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
