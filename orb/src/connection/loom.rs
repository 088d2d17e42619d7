//! Model checks of the two back-pressure handshakes with loom (issue 16, scenario 8):
//! every interleaving of a few threads. The dispatch limit is checked on the real
//! [`DispatchGate`]. The outgoing queue's bound is checked on the real decisions
//! ([`WriteState::watch_drain`], [`WriteState::interest_after_write`], [`WriteBlock`])
//! and the real queue accounting ([`OutQueue`]), inside stand-ins for what is I/O: the
//! socket (takes whole buffers, or none when full), the reactor (a registration with
//! writable interest, or a full socket draining, raises one writable event) and the
//! leader's loop around `service`, `flush` and `after_write`.
use super::write::PART_OVERHEAD;
use super::{DispatchGate, WriteBlock, WriteState};
use bytes::Bytes;
use loom::sync::atomic::AtomicUsize;
use loom::sync::{Arc, Condvar, Mutex, MutexGuard};
use loom::thread;
use std::sync::atomic::Ordering;

/// Runs dispatch scripts against one gate with limit `max`: `pre` dispatches started
/// first, then one thread per script, each starting (`true`) and finishing (`false`)
/// dispatches in its order. Then the pause must be owed: paused only at the limit (else
/// some thread would have been told to resume), and once the dispatches still running
/// finish, reading resumed. Every `true` a call returns is a resume the caller owes.
fn dispatch_model(
    max: usize,
    pre: usize,
    scripts: &'static [&'static [bool]],
    preemption_bound: Option<usize>,
) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = preemption_bound;
    b.check(move || {
        let gate = Arc::new(DispatchGate::new());
        for _ in 0..pre {
            assert!(!gate.started(max), "a resume with nothing paused");
        }
        let threads: Vec<_> = scripts
            .iter()
            .map(|script| {
                let gate = gate.clone();
                thread::spawn(move || {
                    script
                        .iter()
                        .filter(|&&start| {
                            if start {
                                gate.started(max)
                            } else {
                                gate.finished(max)
                            }
                        })
                        .count()
                })
            })
            .collect();
        let resumes: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
        let running = gate.dispatching();
        let paused = gate.is_paused();
        assert!(
            !paused || running >= max,
            "left paused with {running} dispatches running (limit {max}) and nobody \
             told to resume ({resumes} resumes)"
        );
        let mut late = 0;
        for _ in 0..running {
            late += usize::from(gate.finished(max));
        }
        assert!(
            !gate.is_paused(),
            "still paused once every dispatch finished"
        );
        assert_eq!(late, usize::from(paused), "one resume per pause left");
    });
}

/// The leader reaches the limit (pauses, reads the count again) while an upcall
/// finishes (counts down, takes the pause back): the store-buffering race. With limit
/// 1 the gate starts paused; with limit 2 the leader's dispatch is the one that pauses.
#[test]
fn dispatch_gate_pause_races_a_finishing_upcall() {
    for max in [1, 2] {
        dispatch_model(max, 1, &[&[true], &[false]], None);
    }
}

/// At the limit (paused): one upcall suspends its slot for a nested call and takes it
/// back (`SuspendedDispatch`), another finishes, and the leader starts a dispatch from
/// a frame read just before the pause, whose upcall then runs on the same thread and
/// finishes.
#[test]
fn dispatch_gate_nested_calls_and_finishing_upcalls() {
    dispatch_model(2, 2, &[&[false, true], &[false], &[true, false]], Some(3));
}

/// The bound in the write models: two 100-byte frames are over it, one is under.
const MAX: usize = 200;

/// A connection's write side, as far as back-pressure goes: the write lock's state
/// (real), the lock-free mirror of the queue's charge (`Connection::queued`, with its
/// orderings), the leader's flag (real) and the writable event (a stand-in for the
/// reactor).
struct WriteSide {
    write: Mutex<WriteState>,
    queued: AtomicUsize,
    block: WriteBlock,
    event: Mutex<bool>,
    cv: Condvar,
    /// Writes the socket takes before it is full (for the rest of the model).
    takes: AtomicUsize,
}

impl WriteSide {
    /// The kernel reports the socket writable.
    fn raise(&self) {
        *self.event.lock().unwrap() = true;
        self.cv.notify_all();
    }

    /// The leader's poll, for this connection: blocks until a writable event.
    fn wait_event(&self) {
        let mut g = self.event.lock().unwrap();
        while !*g {
            g = self.cv.wait(g).unwrap();
        }
        *g = false;
    }

    /// `Connection::write_queue` with the socket stand-in: one buffer per write, until
    /// the queue is empty or the socket is full; then the real decision on the interest,
    /// whose writable registration raises an event, as a full socket does once drained.
    fn write_queue<'a>(&'a self, mut w: MutexGuard<'a, WriteState>) {
        let mut batch = Vec::new();
        let stop = loop {
            w.queue.take_front(&mut batch, 1);
            let total: usize = batch.iter().map(Bytes::len).sum();
            drop(w);
            let written = match self.takes.load(Ordering::Relaxed) {
                0 => 0,
                n => {
                    self.takes.store(n - 1, Ordering::Relaxed);
                    total
                }
            };
            w = self.write.lock().unwrap();
            w.queue.written(&mut batch, written);
            self.queued.store(w.queue.charge(), Ordering::Release);
            if w.queue.is_empty() {
                break None;
            }
            if written < total {
                break Some(true);
            }
        };
        w.writing = false;
        // Under the write lock, as the registration is.
        let interest = w.interest_after_write(stop);
        if let Some(writable) = interest {
            w.writable_interest = writable;
        }
        if interest == Some(true) || stop == Some(true) {
            self.raise();
        }
    }

    /// `Connection::flush` (on a writable event).
    fn flush(&self) {
        let mut w = self.write.lock().unwrap();
        if w.writing || w.closed {
            return;
        }
        w.writing = true;
        self.write_queue(w);
    }
}

/// A writer (an upcall sending its reply) is draining a queue that is over its bound
/// while the leader, about to read the connection, finds it over the bound and stops
/// reading (`service`: the mirror, then the drain watch under the write lock, then the
/// block). Whatever the interleaving, reading resumes: the leader is not left waiting
/// for a writable event that never comes (loom reports that as a deadlock), and it
/// resumes once the queue is under its bound. `takes` is how many writes the socket
/// takes before it is full: the leader's flush writes the rest.
fn write_model(takes: usize) {
    loom::model(move || {
        let mut ws = WriteState::default();
        ws.queue.push(Bytes::from(vec![1; 100]));
        ws.queue.push(Bytes::from(vec![2; 100]));
        assert!(ws.queue.charge() > MAX && 100 + PART_OVERHEAD <= MAX);
        // The writer has the role (it appended its frame and is writing the queue).
        ws.writing = true;
        let side = Arc::new(WriteSide {
            queued: AtomicUsize::new(ws.queue.charge()),
            write: Mutex::new(ws),
            block: WriteBlock::new(),
            event: Mutex::new(false),
            cv: Condvar::new(),
            takes: AtomicUsize::new(takes),
        });
        let writer = {
            let side = side.clone();
            thread::spawn(move || {
                let w = side.write.lock().unwrap();
                side.write_queue(w);
            })
        };
        // The leader: `service`'s check, then its poll loop for this connection.
        let s = &*side;
        if s.queued.load(Ordering::Acquire) > MAX && s.write.lock().unwrap().watch_drain(MAX) {
            s.block.block();
        }
        let mut resumed = 0;
        while s.block.is_blocked() {
            s.wait_event();
            s.flush();
            // `after_write`.
            if s.queued.load(Ordering::Acquire) <= MAX && s.block.resume() {
                resumed += 1;
            }
        }
        writer.join().unwrap();
        assert!(resumed <= 1, "resumed twice for one block");
        assert!(s.queued.load(Ordering::Acquire) <= MAX);
    });
}

/// The socket takes everything: the writer empties the queue.
#[test]
fn write_block_resumes_when_a_writer_drains_the_queue() {
    write_model(usize::MAX);
}

/// The socket fills after one frame: the writer leaves the rest to the leader's flush
/// on the writable event.
#[test]
fn write_block_resumes_when_the_leader_flushes_a_full_socket() {
    write_model(1);
}
