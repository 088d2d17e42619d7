//! Back-pressure: the handshakes by which the leader stops reading a connection and is
//! told to resume, in types of their own so that loom checks them (`loom_tests`, in loom.rs).

use std::sync::atomic::Ordering;

/// Back-pressure on upcalls (`max_dispatches_per_connection`): how many of a connection's
/// requests are being dispatched, and whether the leader stopped reading the connection
/// at the limit. A type of its own, sans-I/O and on [`crate::sync`]'s atomics, so that
/// loom checks the handshake between the leader pausing and upcalls finishing
/// (`loom_tests`); the caller does the I/O a `true` asks for (the connection on the ready
/// list, the reactor woken).
///
/// Each side writes one variable and then reads the other (`started` counts, pauses, and
/// reads the count again; `finished` counts down, then takes the pause back:
/// store-buffering). If both read the old values (x86 lets a load pass an earlier store),
/// the connection stays paused below the limit with nobody to resume it. SeqCst accesses
/// exclude that, but loom models them as acquire/release only (see its README) and so
/// reports that case against a plain SeqCst load. Hence the second read of the count is a
/// read-modify-write (`fetch_add(0)`, at the limit only), which excludes the case under
/// acquire/release too: every change of the count is then a read-modify-write, so a
/// `finished` that counts down after that read synchronises with it (a release sequence)
/// and sees the pause. The accesses stay SeqCst. The loom models pass as written and with
/// acquire/release; they fail with relaxed orderings, with a plain load there, and without
/// the second read.
#[derive(Debug)]
pub(crate) struct DispatchGate {
    /// Upcalls from this connection that are running now.
    dispatching: crate::sync::AtomicUsize,
    /// The leader stopped reading because `dispatching` hit the limit.
    paused: crate::sync::AtomicBool,
}

impl DispatchGate {
    pub(crate) fn new() -> Self {
        DispatchGate {
            dispatching: crate::sync::AtomicUsize::new(0),
            paused: crate::sync::AtomicBool::new(false),
        }
    }

    /// Counts a dispatch starting; pauses reading at `max`. True when the caller must
    /// resume reading: a dispatch finished between the count and the pause, and this call
    /// took the pause back.
    #[must_use]
    pub(crate) fn started(&self, max: usize) -> bool {
        let n = self.dispatching.fetch_add(1, Ordering::SeqCst) + 1;
        if n < max {
            return false;
        }
        self.paused.store(true, Ordering::SeqCst);
        // A dispatch may have finished between the increment and the store (a
        // read-modify-write, not a load: see above).
        self.dispatching.fetch_add(0, Ordering::SeqCst) < max
            && self.paused.swap(false, Ordering::SeqCst)
    }

    /// Counts a dispatch ending. True when the caller must resume reading (it was paused
    /// and the count is now below `max`); once per pause.
    #[must_use]
    pub(crate) fn finished(&self, max: usize) -> bool {
        let left = self.dispatching.fetch_sub(1, Ordering::SeqCst) - 1;
        // Read before it is taken back, so that an upcall finishing under the limit (all of
        // them, mostly) pays no second read-modify-write. The read sees a pause whose
        // `started` read the count before this decrement: that read-modify-write
        // synchronises with the decrement (see the type's docs). The swap keeps "once per
        // pause".
        left < max
            && self.paused.load(Ordering::SeqCst)
            && self.paused.swap(false, Ordering::SeqCst)
    }

    /// Dispatches running now.
    pub(crate) fn dispatching(&self) -> usize {
        self.dispatching.load(Ordering::SeqCst)
    }

    /// Whether reading is paused at the limit.
    pub(crate) fn is_paused(&self) -> bool {
        self.paused.load(Ordering::Acquire)
    }
}

/// Write back-pressure, the leader's side: it stopped reading a connection whose outgoing
/// queue is over its bound (the peer does not read what we send), after asking for a
/// writable event once the queue drains
/// ([`Connection::watch_drain`](super::Connection::watch_drain)); the leader's flush
/// on that event resumes it. Touched by the leader only (the idle sweep is the leader's
/// too); an atomic because the connection is shared. A type of its own so that loom checks
/// the handshake with a writer draining the queue (`loom_tests`).
#[derive(Debug)]
pub(crate) struct WriteBlock(crate::sync::AtomicBool);

impl WriteBlock {
    pub(crate) fn new() -> Self {
        WriteBlock(crate::sync::AtomicBool::new(false))
    }

    /// Stops reading until [`resume`](Self::resume).
    pub(crate) fn block(&self) {
        self.0.store(true, Ordering::Release);
    }

    /// The queue is under its bound again: true (once per block) if reading was stopped and
    /// the caller must resume it.
    #[must_use]
    pub(crate) fn resume(&self) -> bool {
        self.0.swap(false, Ordering::AcqRel)
    }

    /// Whether reading is stopped.
    pub(crate) fn is_blocked(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}
