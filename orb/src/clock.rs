//! One clock reading for two steps of a thread that follow each other within microseconds.
//!
//! A `lat` request cost the server four readings of the monotonic clock (`clock_gettime`
//! through the vDSO, ~25 ns each on a KVM guest, more than a lock): the deadline of the
//! request, the vacancy its upcall leaves, the end of the user code, and the owned read that
//! waits for the next request. The last two, and the first two, are microseconds apart on
//! one thread. The first of each pair [leaves](now_and_leave) its reading here; the second
//! [takes](take_left) it instead of reading the clock again.
//!
//! A reading is taken at most once, and dropped ([`forget_left`]) before anything that
//! waits (a follower's or the standby's sleep, the leader's poll, user code) and when a
//! thread comes into the pool from the application (`Lf::run_from`, a caller's
//! `read_own_reply`), so a taker
//! sees a reading made before the last step of its own thread, never one from before a
//! wait. The takers only use it where a reading some microseconds old is harmless: when a
//! run of owned reads ends (`reactor.rs`), when the role was left vacant (`lf/standby.rs`).

use std::cell::Cell;
use std::time::Instant;

thread_local! {
    static LEFT: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// Reads the clock and leaves the reading for this thread's next [`take_left`].
#[inline]
pub(crate) fn now_and_leave() -> Instant {
    let now = Instant::now();
    LEFT.with(|l| l.set(Some(now)));
    now
}

/// The reading this thread left with [`now_and_leave`] since its last wait, if any; taken.
#[inline]
pub(crate) fn take_left() -> Option<Instant> {
    LEFT.with(Cell::take)
}

/// The left reading if there is one, else a new one.
#[inline]
pub(crate) fn left_or_now() -> Instant {
    take_left().unwrap_or_else(Instant::now)
}

/// Drops a reading left on this thread: called before the thread waits or runs user code.
#[inline]
pub(crate) fn forget_left() {
    LEFT.with(|l| l.set(None));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_left_reading_is_taken_once_and_forgotten_before_a_wait() {
        assert_eq!(take_left(), None);
        let t = now_and_leave();
        assert_eq!(take_left(), Some(t));
        assert_eq!(take_left(), None, "taken once");
        let t = now_and_leave();
        assert_eq!(left_or_now(), t);
        let fresh = left_or_now();
        assert!(fresh >= t, "a new reading once the left one was taken");
        now_and_leave();
        forget_left();
        assert_eq!(take_left(), None);
        // Per thread: another thread's reading is not this one's.
        now_and_leave();
        std::thread::spawn(|| assert_eq!(take_left(), None))
            .join()
            .unwrap();
    }
}
