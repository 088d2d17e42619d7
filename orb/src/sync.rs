//! Synchronisation primitives of the Leader/Followers pool and of the connections'
//! back-pressure gates, swappable for loom's model-checked ones
//! (`RUSTFLAGS="--cfg orb_loom" cargo test -p protorb --lib loom`), as tokio does.

#[cfg(not(orb_loom))]
pub(crate) use std::sync::{
    atomic::{AtomicBool, AtomicUsize},
    Condvar, Mutex, MutexGuard,
};

#[cfg(orb_loom)]
pub(crate) use loom::sync::{
    atomic::{AtomicBool, AtomicUsize},
    Condvar, Mutex, MutexGuard,
};

/// Locks, ignoring poisoning (a panicking servant must not take the pool down; nothing behind
/// these mutexes is left half-updated by a panic).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Locks a std mutex, ignoring poisoning, as [`lock`] does: for the mutexes outside the loom
/// model, which stay std's under `orb_loom` too (without loom the two are the same function).
pub(crate) fn std_lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
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
/// Not part of the loom model (the reactor and the driver are not), so always std's mutex.
#[derive(Debug)]
pub(crate) struct Queue<T> {
    items: std::sync::Mutex<VecDeque<T>>,
    len: std::sync::atomic::AtomicUsize,
}

impl<T> Default for Queue<T> {
    fn default() -> Self {
        Queue {
            items: std::sync::Mutex::new(VecDeque::new()),
            len: std::sync::atomic::AtomicUsize::new(0),
        }
    }
}

impl<T> Queue<T> {
    /// Appends `item`.
    pub(crate) fn push_back(&self, item: T) {
        let mut q = std_lock(&self.items);
        q.push_back(item);
        self.len.store(q.len(), Ordering::Release);
    }

    /// Takes the first item; no lock when the queue looks empty.
    pub(crate) fn pop_front(&self) -> Option<T> {
        if self.is_empty() {
            return None;
        }
        let mut q = std_lock(&self.items);
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
        let mut q = std_lock(&self.items);
        let item = q.iter().position(pred).and_then(|i| q.remove(i));
        self.len.store(q.len(), Ordering::Release);
        item
    }

    /// Drops every item.
    pub(crate) fn clear(&self) {
        let mut q = std_lock(&self.items);
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
