//! Synchronisation primitives of the Leader/Followers pool, swappable for loom's model-checked
//! ones (`RUSTFLAGS="--cfg orb_loom" cargo test -p orb --lib loom`), as tokio does.

#[cfg(not(orb_loom))]
pub(crate) use std::sync::{atomic::AtomicBool, Condvar, Mutex, MutexGuard};

#[cfg(orb_loom)]
pub(crate) use loom::sync::{atomic::AtomicBool, Condvar, Mutex, MutexGuard};

/// Locks, ignoring poisoning (a panicking servant must not take the pool down; nothing behind
/// these mutexes is left half-updated by a panic).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
