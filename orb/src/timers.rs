//! The leader's timers: when to sweep for idle connections and when to retry a failed
//! `accept`, plus the count of accepted connections open (against `max_connections`). Plain
//! atomics read by the leader before each poll (its timeout), so an ORB with no timer set
//! reads no clock.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// The earlier of two optional instants (of two timers, say): `None` only if both are.
pub(crate) fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The leader's timers and the inbound connection count (see the module docs). Times are
/// nanoseconds since `epoch` in atomics, so the leader reads one to know whether a timer is
/// set; 0 means none.
#[derive(Debug)]
pub(crate) struct Housekeeping {
    epoch: Instant,
    /// When the next idle sweep is due.
    next_sweep: std::sync::atomic::AtomicU64,
    /// When to retry accepting after a failed `accept`.
    accept_retry: std::sync::atomic::AtomicU64,
    /// The current accept back-off, in milliseconds (doubles per failure, reset by success).
    accept_backoff_ms: std::sync::atomic::AtomicU64,
    /// Accepted connections open now (against `max_connections`).
    inbound_open: std::sync::atomic::AtomicUsize,
}

/// First and longest back-off before accepting again after `accept` failed.
const ACCEPT_BACKOFF_MS: (u64, u64) = (10, 1000);

impl Housekeeping {
    pub(crate) fn new(idle_timeout: Option<Duration>) -> Self {
        let h = Housekeeping {
            epoch: Instant::now(),
            next_sweep: Default::default(),
            accept_retry: Default::default(),
            accept_backoff_ms: std::sync::atomic::AtomicU64::new(ACCEPT_BACKOFF_MS.0),
            inbound_open: Default::default(),
        };
        if let Some(t) = idle_timeout {
            h.next_sweep.store(
                h.at(Instant::now() + Self::sweep_every(t)),
                Ordering::Relaxed,
            );
        }
        h
    }

    pub(crate) fn sweep_every(idle_timeout: Duration) -> Duration {
        (idle_timeout / 4).max(Duration::from_millis(5))
    }

    fn at(&self, t: Instant) -> u64 {
        (t.saturating_duration_since(self.epoch).as_nanos() as u64).max(1)
    }

    fn instant(&self, ns: u64) -> Instant {
        self.epoch + Duration::from_nanos(ns)
    }

    /// Whether `max` accepted connections are open (a new one is refused).
    pub(crate) fn inbound_full(&self, max: usize) -> bool {
        self.inbound_open.load(Ordering::Relaxed) >= max
    }

    /// An accepted connection was registered.
    pub(crate) fn inbound_opened(&self) {
        self.inbound_open.fetch_add(1, Ordering::Relaxed);
    }

    /// An accepted connection closed (once per `inbound_opened`).
    pub(crate) fn inbound_closed(&self) {
        self.inbound_open.fetch_sub(1, Ordering::Relaxed);
    }

    /// The nearest timer, if any is set.
    pub(crate) fn next_due(&self) -> Option<Instant> {
        let (a, b) = (
            self.next_sweep.load(Ordering::Relaxed),
            self.accept_retry.load(Ordering::Relaxed),
        );
        match (a, b) {
            (0, 0) => None,
            (0, x) | (x, 0) => Some(self.instant(x)),
            (a, b) => Some(self.instant(a.min(b))),
        }
    }
}

impl Housekeeping {
    /// Whether the accept retry is due at `now`; if so it is cleared (the caller accepts).
    pub(crate) fn take_accept_retry(&self, now: Instant) -> bool {
        let retry = self.accept_retry.load(Ordering::Relaxed);
        if retry != 0 && self.instant(retry) <= now {
            self.accept_retry.store(0, Ordering::Relaxed);
            return true;
        }
        false
    }

    /// Whether an idle sweep is due at `now`; if so the next one is scheduled (the caller
    /// sweeps).
    pub(crate) fn take_sweep(&self, now: Instant, idle_timeout: Duration) -> bool {
        let sweep = self.next_sweep.load(Ordering::Relaxed);
        if sweep != 0 && self.instant(sweep) <= now {
            self.next_sweep.store(
                self.at(now + Self::sweep_every(idle_timeout)),
                Ordering::Relaxed,
            );
            return true;
        }
        false
    }

    /// An `accept` succeeded: the next failure backs off from the start again.
    pub(crate) fn accepted(&self) {
        self.accept_backoff_ms
            .store(ACCEPT_BACKOFF_MS.0, Ordering::Relaxed);
    }

    /// An `accept` failed: schedules a retry after the current back-off (which then doubles,
    /// up to its cap) and returns that back-off in milliseconds.
    pub(crate) fn accept_failed(&self) -> u64 {
        let ms = self.accept_backoff_ms.load(Ordering::Relaxed);
        self.accept_backoff_ms
            .store((ms * 2).min(ACCEPT_BACKOFF_MS.1), Ordering::Relaxed);
        self.accept_retry.store(
            self.at(Instant::now() + Duration::from_millis(ms)),
            Ordering::Relaxed,
        );
        ms
    }
}

/// Where a [`Deadlines`] entry is, to remove it before it is due: its slot in the table and
/// the entry's number (a slot is reused; the number is not).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DeadlineKey {
    slot: usize,
    seq: u64,
}

/// Deadlines of asynchronous calls, each with what its expiry needs (`T`): the leader's
/// poll timeout covers the nearest, and the leader takes those that are due
/// ([`take_due`](Self::take_due)) to fail them with TIMEOUT. Blocking calls need none: their
/// own thread times out.
///
/// The entries are in a slab (insert and remove: no search, no allocation once it has
/// grown), their times in a min-heap that a removal does not touch: a removed entry's time
/// stays in the heap until it reaches the top or the heap is rebuilt, which an insert does
/// when it holds more than twice the live entries (so it never holds much more than twice
/// the most entries live at once, whatever the pattern). A `BTreeMap` here cost an allocation and a free per call when
/// calls are made one at a time (its root node comes and goes with its one entry).
///
/// Invariants, kept by its methods alone:
/// - An entry leaves the table once: removed by its owner (the call finished first) or taken
///   by the leader as due, whichever comes first. A heap item is live iff the slab's entry
///   in its slot has its number.
/// - Every live entry has its item in the heap.
/// - `nearest` is never later than the earliest entry (it may be earlier, after a removal:
///   the leader then wakes for nothing and reads the next one); 0 when the table is empty.
///   It is written under the table's lock and read without it, so the leader's poll reads no
///   lock while no asynchronous call is pending.
/// - [`insert`](Self::insert) stores `nearest` sequentially consistently before it returns,
///   so that its caller's arming of the reactor's alarm (which wakes whoever waits on the
///   timers) pairs with the poller that clears the alarm and then reads `nearest` (see
///   `reactor`'s `Alarm`).
#[derive(Debug)]
pub(crate) struct Deadlines<T> {
    epoch: Instant,
    nearest: std::sync::atomic::AtomicU64,
    table: crate::sync::plain::Mutex<Table<T>>,
}

/// The entries and their times (see [`Deadlines`]).
#[derive(Debug)]
struct Table<T> {
    entries: slab::Slab<(u64, T)>,
    /// (time, number, slot), earliest first.
    heap: std::collections::BinaryHeap<std::cmp::Reverse<(Instant, u64, usize)>>,
    seq: u64,
}

impl<T> Table<T> {
    fn is_live(&self, &(_, seq, slot): &(Instant, u64, usize)) -> bool {
        self.entries.get(slot).is_some_and(|(s, _)| *s == seq)
    }

    /// Drops removed entries' items from the top of the heap; the earliest live time.
    fn earliest(&mut self) -> Option<Instant> {
        while let Some(std::cmp::Reverse(top)) = self.heap.peek() {
            if self.is_live(top) {
                return Some(top.0);
            }
            self.heap.pop();
        }
        None
    }
}

impl<T> Deadlines<T> {
    pub(crate) fn new() -> Self {
        Deadlines {
            epoch: Instant::now(),
            nearest: Default::default(),
            table: crate::sync::plain::Mutex::new(Table {
                entries: slab::Slab::new(),
                heap: std::collections::BinaryHeap::new(),
                seq: 0,
            }),
        }
    }

    fn at(&self, t: Instant) -> u64 {
        (t.saturating_duration_since(self.epoch).as_nanos() as u64).max(1)
    }

    fn lock(&self) -> crate::sync::plain::MutexGuard<'_, Table<T>> {
        crate::sync::plain_lock(&self.table)
    }

    /// Adds `value` due at `at`. The caller then arms the reactor's alarm for `at`, so that
    /// whoever waits on the timers hears of it.
    pub(crate) fn insert(&self, at: Instant, value: T) -> DeadlineKey {
        let mut t = self.lock();
        t.seq += 1;
        let seq = t.seq;
        let slot = t.entries.insert((seq, value));
        if t.heap.len() >= 2 * t.entries.len() + 32 {
            // Mostly removed entries' items: rebuilt from the live ones (amortised: at least
            // as many inserts come between two rebuilds as the rebuild moves).
            let Table { entries, heap, .. } = &mut *t;
            let live: Vec<_> = std::mem::take(heap)
                .into_vec()
                .into_iter()
                .filter(|std::cmp::Reverse((_, seq, slot))| {
                    entries.get(*slot).is_some_and(|(s, _)| s == seq)
                })
                .collect();
            *heap = live.into();
        }
        t.heap.push(std::cmp::Reverse((at, seq, slot)));
        let ns = self.at(at);
        let old = self.nearest.load(Ordering::Relaxed);
        if old == 0 || ns < old {
            self.nearest.store(ns, Ordering::SeqCst);
        }
        DeadlineKey { slot, seq }
    }

    /// Removes the entry under `key` (its call finished); `None` if the leader took it.
    pub(crate) fn remove(&self, key: DeadlineKey) -> Option<T> {
        let mut t = self.lock();
        if t.entries.get(key.slot).is_none_or(|(s, _)| *s != key.seq) {
            return None;
        }
        let (_, v) = t.entries.remove(key.slot);
        if t.entries.is_empty() {
            t.heap.clear();
            self.nearest.store(0, Ordering::Release);
        }
        Some(v)
    }

    /// The nearest deadline, if any (no lock).
    pub(crate) fn next_due(&self) -> Option<Instant> {
        match self.nearest.load(Ordering::SeqCst) {
            0 => None,
            ns => Some(self.epoch + Duration::from_nanos(ns)),
        }
    }

    /// Takes every entry due at `now` out of the table, earliest first.
    pub(crate) fn take_due(&self, now: Instant) -> Vec<T> {
        let mut t = self.lock();
        let mut due = Vec::new();
        while let Some(at) = t.earliest() {
            if at > now {
                break;
            }
            if let Some(std::cmp::Reverse((_, _, slot))) = t.heap.pop() {
                due.push(t.entries.remove(slot).1);
            }
        }
        let ns = t.earliest().map_or(0, |at| self.at(at));
        self.nearest.store(ns, Ordering::Release);
        due
    }
}

#[cfg(all(test, not(orb_loom)))]
mod tests {
    use super::*;

    #[test]
    fn deadlines_come_due_in_order_and_removed_ones_never() {
        let d = Deadlines::new();
        let t0 = Instant::now();
        assert_eq!(d.next_due(), None);
        d.insert(t0 + Duration::from_secs(10), "late");
        let k = d.insert(t0 + Duration::from_secs(1), "gone");
        d.insert(t0 + Duration::from_secs(2), "early");
        assert_eq!(d.remove(k), Some("gone"));
        assert_eq!(d.remove(k), None);
        assert!(d.next_due().unwrap() <= t0 + Duration::from_secs(2));
        assert!(d.take_due(t0).is_empty());
        assert_eq!(d.take_due(t0 + Duration::from_secs(5)), vec!["early"]);
        let next = d.next_due().unwrap();
        assert!(next > t0 + Duration::from_secs(9) && next <= t0 + Duration::from_secs(10));
        assert_eq!(d.take_due(t0 + Duration::from_secs(10)), vec!["late"]);
        assert_eq!(d.next_due(), None);
    }

    /// Entries removed in any order never come due, the heap's removed items are dropped
    /// (after an insert it holds at most about twice the live entries), and the live ones
    /// come due in time order, equal times in insertion order.
    #[test]
    fn removed_entries_do_not_pile_up_and_the_rest_come_due_in_order() {
        let d = Deadlines::new();
        let t0 = Instant::now();
        let mut keep = Vec::new();
        for i in 0..10_000u64 {
            // Times out of order; every tenth entry stays.
            let at = t0 + Duration::from_millis(1 + (i * 7919) % 1000);
            let k = d.insert(at, i);
            {
                let t = d.lock();
                let (heap, live) = (t.heap.len(), t.entries.len());
                assert!(heap <= 2 * live + 33, "heap {heap} live {live}");
            }
            if i % 10 == 0 {
                keep.push((at, i));
            } else {
                assert_eq!(d.remove(k), Some(i));
                assert_eq!(d.remove(k), None);
            }
        }
        keep.sort();
        assert!(d.next_due().unwrap() <= keep[0].0);
        let due = d.take_due(t0 + Duration::from_secs(2));
        assert_eq!(due, keep.iter().map(|&(_, i)| i).collect::<Vec<_>>());
        assert_eq!(d.next_due(), None);
        let (a, b) = (d.insert(t0, 1), d.insert(t0, 2));
        assert_ne!(a, b);
        assert_eq!(d.take_due(t0), vec![1, 2]);
        assert_eq!(d.remove(a), None, "taken by the leader");
    }
}
