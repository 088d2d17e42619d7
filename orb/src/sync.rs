//! Synchronisation primitives of the Leader/Followers pool and of the connections'
//! back-pressure gates, swappable for loom's model-checked ones
//! (`RUSTFLAGS="--cfg orb_loom" cargo test -p protorb --lib loom`), as tokio does.

#[cfg(not(orb_loom))]
pub(crate) use parking_lot::{Condvar, Mutex, MutexGuard};
#[cfg(not(orb_loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicUsize};

#[cfg(orb_loom)]
pub(crate) use loom::sync::{
    atomic::{AtomicBool, AtomicUsize},
    Condvar, Mutex, MutexGuard,
};

/// The mutexes outside the loom model, with and without it: parking_lot's, which do not
/// poison. A std mutex checks the thread's panic count on every lock and again on every
/// unlock, for a poisoning the ORB ignores anyway (a panicking servant must not take the pool
/// down; nothing behind these mutexes is left half-updated by a panic): about 80
/// instructions of a `lat` call on each side (callgrind, PROFILE.md).
pub(crate) mod plain {
    pub(crate) use parking_lot::{Condvar, Mutex, MutexGuard};
}

/// Locks a mutex of the loom model (parking_lot's without loom: no poisoning to ignore).
#[inline]
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    #[cfg(not(orb_loom))]
    return m.lock();
    #[cfg(orb_loom)]
    return m.lock().unwrap_or_else(|p| p.into_inner());
}

/// Waits on `cv` with `g` (a guard of the loom model's mutex), as `Condvar::wait`.
#[inline]
pub(crate) fn wait<'a, T>(cv: &Condvar, g: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    #[cfg(not(orb_loom))]
    {
        let mut g = g;
        cv.wait(&mut g);
        g
    }
    #[cfg(orb_loom)]
    return cv.wait(g).unwrap_or_else(|p| p.into_inner());
}

/// Waits on `cv` with `g` for at most `dur`, as `Condvar::wait_timeout`: the guard, and
/// whether the time ran out.
#[inline]
pub(crate) fn wait_timeout<'a, T>(
    cv: &Condvar,
    g: MutexGuard<'a, T>,
    dur: std::time::Duration,
) -> (MutexGuard<'a, T>, bool) {
    #[cfg(not(orb_loom))]
    {
        let mut g = g;
        let r = cv.wait_for(&mut g, dur);
        (g, r.timed_out())
    }
    #[cfg(orb_loom)]
    {
        let (g, r) = cv.wait_timeout(g, dur).unwrap_or_else(|p| p.into_inner());
        (g, r.timed_out())
    }
}

/// Locks a mutex outside the loom model ([`plain`]).
#[inline]
pub(crate) fn plain_lock<T>(m: &plain::Mutex<T>) -> plain::MutexGuard<'_, T> {
    m.lock()
}

use std::collections::VecDeque;
use std::sync::atomic::Ordering;

/// A FIFO behind a mutex, with its length kept beside it so that "is it empty?" (asked on
/// every call and every poll, and nearly always answered yes) needs no lock: a lock and an
/// unlock are two atomic read-modify-writes, the dearest instructions on the request path.
///
/// The length is written under the lock and read without it, so a reader may see it a
/// moment late. Callers must not depend on seeing a push made concurrently by another
/// thread: the ORB's ready list is pushed to by the leader, or by a thread that wakes the
/// leader's poll right after, and parked upcalls are pushed by a leader before it hands the
/// role on under the promotion lock.
///
/// Not part of the loom model (the reactor and the driver are not), so always [`plain`]'s mutex.
#[derive(Debug)]
pub(crate) struct Queue<T> {
    items: plain::Mutex<VecDeque<T>>,
    len: std::sync::atomic::AtomicUsize,
}

impl<T> Default for Queue<T> {
    fn default() -> Self {
        Queue {
            items: plain::Mutex::new(VecDeque::new()),
            len: std::sync::atomic::AtomicUsize::new(0),
        }
    }
}

impl<T> Queue<T> {
    /// Appends `item`.
    pub(crate) fn push_back(&self, item: T) {
        let mut q = plain_lock(&self.items);
        q.push_back(item);
        self.len.store(q.len(), Ordering::Release);
    }

    /// Takes the first item; no lock when the queue looks empty.
    pub(crate) fn pop_front(&self) -> Option<T> {
        if self.is_empty() {
            return None;
        }
        let mut q = plain_lock(&self.items);
        let item = q.pop_front();
        self.len.store(q.len(), Ordering::Release);
        item
    }

    /// Whether the queue looks empty (no lock).
    pub(crate) fn is_empty(&self) -> bool {
        self.len.load(Ordering::Acquire) == 0
    }

    /// Takes out the first item that `pred` accepts.
    pub(crate) fn take_first(&self, pred: impl Fn(&T) -> bool) -> Option<T> {
        if self.is_empty() {
            return None;
        }
        let mut q = plain_lock(&self.items);
        let item = q.iter().position(pred).and_then(|i| q.remove(i));
        self.len.store(q.len(), Ordering::Release);
        item
    }

    /// Drops every item.
    pub(crate) fn clear(&self) {
        let mut q = plain_lock(&self.items);
        let items = std::mem::take(&mut *q);
        self.len.store(0, Ordering::Release);
        drop(q);
        drop(items);
    }
}

#[cfg(all(test, not(orb_loom)))]
mod tests {
    use super::Queue;

    #[test]
    fn queue_is_fifo_and_its_length_follows() {
        let q = Queue::default();
        assert!(q.is_empty());
        assert_eq!(q.pop_front(), None::<u32>);
        for i in 0..5 {
            q.push_back(i);
            assert!(!q.is_empty());
        }
        assert_eq!(q.pop_front(), Some(0));
        assert_eq!(q.pop_front(), Some(1));
        q.clear();
        assert!(q.is_empty());
        assert_eq!(q.pop_front(), None);
        q.push_back(7);
        assert_eq!((q.pop_front(), q.is_empty()), (Some(7), true));
    }

    /// Items pushed by several threads all come out, once each.
    #[test]
    fn queue_loses_nothing_across_threads() {
        let q = std::sync::Arc::new(Queue::default());
        let pushers: Vec<_> = (0..4u32)
            .map(|t| {
                let q = q.clone();
                std::thread::spawn(move || (0..1000).for_each(|i| q.push_back(t * 1000 + i)))
            })
            .collect();
        let mut seen = Vec::new();
        while seen.len() < 4000 {
            match q.pop_front() {
                Some(v) => seen.push(v),
                None => std::thread::yield_now(),
            }
        }
        pushers.into_iter().for_each(|h| h.join().unwrap());
        seen.sort_unstable();
        assert_eq!(seen, (0..4000).collect::<Vec<_>>());
        assert!(q.is_empty());
    }
}
