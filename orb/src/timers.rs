//! The leader's timers: when to sweep for idle connections and when to retry a failed
//! `accept`, plus the count of accepted connections open (against `max_connections`). Plain
//! atomics read by the leader before each poll (its timeout), so an ORB with no timer set
//! reads no clock.

use std::sync::atomic::Ordering;
use std::task::Waker;
use std::time::{Duration, Instant};

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

/// Where a [`Deadlines`] entry is, to remove it before it is due.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct DeadlineKey(Instant, u64);

/// Deadlines of asynchronous calls, each with what its expiry needs (`T`): the leader's
/// poll timeout covers the nearest, and the leader takes those that are due
/// ([`take_due`](Self::take_due)) to fail them with TIMEOUT. Blocking calls need none: their
/// own thread times out.
///
/// Invariants, kept by its methods alone:
/// - An entry leaves the table once: removed by its owner (the call finished first) or taken
///   by the leader as due, whichever comes first.
/// - `nearest` is never later than the earliest entry (it may be earlier, after a removal:
///   the leader then wakes for nothing and reads the next one); 0 when the table is empty.
///   It is written under the table's lock and read without it, so the leader's poll reads no
///   lock while no asynchronous call is pending.
/// - Nobody who waits on the timers misses a nearer deadline, and nobody else is woken for
///   one. A thread about to wait in a poll set with a timeout taken from the timers counts
///   itself in `pollers` first ([`watch`](Self::watch)); [`insert`](Self::insert) stores
///   `nearest` and then reads `pollers`, both sequentially consistent, so either the poller
///   sees the new deadline or the insert sees the poller (and wakes it). An event-loop
///   driver waiting outside the ORB (`Orb::turn`'s caller) registers a `Waker` with the time
///   it will look anyway (`driver`, under its own lock, read by the insert after `nearest`
///   is stored): it is woken, once, only for a deadline before that time. So a caller whose
///   ORB nobody polls (`threads(0)` and a driver) costs no wake-up per asynchronous call.
#[derive(Debug)]
pub(crate) struct Deadlines<T> {
    epoch: Instant,
    nearest: std::sync::atomic::AtomicU64,
    seq: std::sync::atomic::AtomicU64,
    table: std::sync::Mutex<std::collections::BTreeMap<DeadlineKey, T>>,
    /// Threads waiting in a poll set with a timeout taken from these timers.
    pollers: std::sync::atomic::AtomicUsize,
    /// A driver's waker and the time (`at`'s nanoseconds; `u64::MAX`: none) by which it looks
    /// at the timers anyway.
    driver: std::sync::Mutex<Option<(Waker, u64)>>,
}

/// Who must hear of a deadline [`Deadlines::insert`] just added.
#[must_use]
#[derive(Debug, Default)]
pub(crate) struct Nearer {
    /// A thread waits in a poll set with a later timeout: wake the event loop.
    pub(crate) pollers: bool,
    /// The driver waits for a later time: wake it (it registered again to hear of the next).
    pub(crate) driver: Option<Waker>,
}

/// A thread counted among those waiting on the timers ([`Deadlines::watch`]), until dropped.
pub(crate) struct Watching<'a>(&'a std::sync::atomic::AtomicUsize);

impl Drop for Watching<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Release);
    }
}

impl<T> Deadlines<T> {
    pub(crate) fn new() -> Self {
        Deadlines {
            epoch: Instant::now(),
            nearest: Default::default(),
            seq: Default::default(),
            table: Default::default(),
            pollers: Default::default(),
            driver: Default::default(),
        }
    }

    fn at(&self, t: Instant) -> u64 {
        (t.saturating_duration_since(self.epoch).as_nanos() as u64).max(1)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::BTreeMap<DeadlineKey, T>> {
        crate::sync::std_lock(&self.table)
    }

    /// Adds `value` due at `at`, and says who must be woken because it is now the nearest
    /// deadline: a poller waiting with a later timeout, a driver waiting for a later time.
    pub(crate) fn insert(&self, at: Instant, value: T) -> (DeadlineKey, Nearer) {
        let key = DeadlineKey(at, self.seq.fetch_add(1, Ordering::Relaxed));
        let ns = self.at(at);
        let nearest = {
            let mut t = self.lock();
            t.insert(key, value);
            let old = self.nearest.load(Ordering::Relaxed);
            let nearest = old == 0 || ns < old;
            if nearest {
                self.nearest.store(ns, Ordering::SeqCst);
            }
            nearest
        };
        let mut wake = Nearer::default();
        if nearest {
            // Paired with `watch`: see the invariants.
            wake.pollers = self.pollers.load(Ordering::SeqCst) > 0;
            let mut d = crate::sync::std_lock(&self.driver);
            if d.as_ref().is_some_and(|(_, until)| ns < *until) {
                wake.driver = d.take().map(|(w, _)| w);
            }
        }
        (key, wake)
    }

    /// Counts the calling thread among those about to wait on the timers in a poll set
    /// (until the guard is dropped); read [`next_due`](Self::next_due) after this.
    pub(crate) fn watch(&self) -> Watching<'_> {
        self.pollers.fetch_add(1, Ordering::SeqCst);
        Watching(&self.pollers)
    }

    /// Registers a driver's `waker`, to be woken once for a deadline inserted before the
    /// time `until` computes (called under the registration's lock, so after it an insert
    /// either is seen by `until` or sees the registration). Returns that time.
    pub(crate) fn watch_with(
        &self,
        waker: &Waker,
        until: impl FnOnce() -> Option<Instant>,
    ) -> Option<Instant> {
        let mut d = crate::sync::std_lock(&self.driver);
        let due = until();
        let ns = due.map_or(u64::MAX, |t| self.at(t));
        match &mut *d {
            Some((w, at)) if w.will_wake(waker) => *at = ns,
            other => *other = Some((waker.clone(), ns)),
        }
        due
    }

    /// Removes the entry under `key` (its call finished); `None` if the leader took it.
    pub(crate) fn remove(&self, key: DeadlineKey) -> Option<T> {
        let mut t = self.lock();
        let v = t.remove(&key);
        if t.is_empty() {
            self.nearest.store(0, Ordering::Release);
        }
        v
    }

    /// The nearest deadline, if any (no lock).
    pub(crate) fn next_due(&self) -> Option<Instant> {
        match self.nearest.load(Ordering::SeqCst) {
            0 => None,
            ns => Some(self.epoch + Duration::from_nanos(ns)),
        }
    }

    /// Takes every entry due at `now` out of the table.
    pub(crate) fn take_due(&self, now: Instant) -> Vec<T> {
        let mut t = self.lock();
        let later = t.split_off(&DeadlineKey(now, u64::MAX));
        let due = std::mem::replace(&mut *t, later);
        let ns = t.keys().next().map_or(0, |k| self.at(k.0));
        self.nearest.store(ns, Ordering::Release);
        due.into_values().collect()
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
        let _poller = d.watch();
        let (_, first) = d.insert(t0 + Duration::from_secs(10), "late");
        assert!(first.pollers);
        let (k, nearer) = d.insert(t0 + Duration::from_secs(1), "gone");
        assert!(nearer.pollers);
        let (_, nearer) = d.insert(t0 + Duration::from_secs(2), "early");
        assert!(!nearer.pollers, "not before the nearest");
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

    /// A deadline wakes only who waits past it: no poller counted, no wake-up; a driver
    /// looking by `until` anyway is woken only for an earlier deadline, and once.
    #[test]
    fn a_nearer_deadline_wakes_only_who_waits_past_it() {
        use std::sync::atomic::AtomicUsize;
        use std::sync::Arc;
        struct Count(AtomicUsize);
        impl std::task::Wake for Count {
            fn wake(self: Arc<Self>) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let d = Deadlines::new();
        let t0 = Instant::now();
        let (k, w) = d.insert(t0 + Duration::from_secs(10), 1);
        assert!(!w.pollers && w.driver.is_none(), "nobody waits");
        d.remove(k);
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let due = d.watch_with(&waker, || Some(t0 + Duration::from_secs(5)));
        assert_eq!(due, Some(t0 + Duration::from_secs(5)));
        let (_, w) = d.insert(t0 + Duration::from_secs(6), 2);
        assert!(w.driver.is_none(), "the driver looks before it anyway");
        let (k3, w) = d.insert(t0 + Duration::from_secs(1), 3);
        w.driver
            .expect("an earlier deadline wakes the driver")
            .wake();
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        d.remove(k3);
        let (_, w) = d.insert(t0 + Duration::from_millis(500), 4);
        assert!(w.driver.is_none(), "once per registration");
        {
            let _p = d.watch();
            let (_, w) = d.insert(t0 + Duration::from_millis(100), 5);
            assert!(w.pollers);
        }
        let (_, w) = d.insert(t0 + Duration::from_millis(50), 6);
        assert!(!w.pollers, "the poller is gone");
    }
}
