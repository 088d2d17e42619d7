//! Shutting an ORB down, at most once: stop accepting, let running upcalls finish within the
//! grace period, close every connection (CloseConnection only where no reply is owed), stop
//! the pool, and join its threads, detaching those stuck in user code. `Orb::shutdown` and
//! dropping the last handle both come here.

use crate::orb::OrbInner;
use crate::sync::plain_lock as lock;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// How long `shutdown` waits, after the grace period, for pool threads still in upcalls.
const STUCK_JOIN_MARGIN: Duration = Duration::from_millis(80);

impl OrbInner {
    /// [`Orb::shutdown`](crate::Orb::shutdown).
    pub(crate) fn shutdown(&self) {
        let inner = self;
        if inner.shutting_down.swap(true, Ordering::AcqRel) {
            self.join_threads();
            return;
        }
        let _span = tracing::debug_span!("shutdown").entered();
        // 1. Stop accepting.
        inner.reactor.close_listeners();
        // 2. Let running upcalls finish (the pool keeps serving meanwhile: they may need it).
        let deadline = Instant::now() + inner.config.shutdown_grace;
        let in_upcall = crate::upcall::current_depth() > 0;
        let own = usize::from(in_upcall);
        if !inner.upcalls.wait_idle(own, deadline) {
            tracing::warn!("shutdown grace period over with upcalls still running");
        }
        // 3. Close every connection (CloseConnection only where no reply is owed); waiters
        // wake with an error.
        for e in inner.reactor.entries() {
            match e {
                crate::reactor::Entry::Conn(c) => inner.close_for_shutdown(&c),
                crate::reactor::Entry::Listener(_) => {}
            }
        }
        inner.outbound.clear();
        // 4. Stop the pool. A pool thread stuck in an upcall past the grace period is not
        // waited for beyond a short margin (see the doc comment).
        inner.lf.shutdown(inner);
        inner.upcalls.clear_parked();
        inner.reactor.clear_ready();
        self.join_threads_until(Some(deadline + STUCK_JOIN_MARGIN), own);
        tracing::debug!("orb shut down");
    }

    /// Joins the pool threads. With `until`, stops waiting at that instant if upcalls (other
    /// than `own`, the caller's) still run, and detaches the threads that have not ended:
    /// they are stuck in user code.
    pub(crate) fn join_threads_until(&self, until: Option<Instant>, own: usize) {
        let me = std::thread::current().id();
        let mut handles: Vec<_> = std::mem::take(&mut *lock(&self.threads));
        handles.retain(|h| h.thread().id() != me);
        if let Some(until) = until {
            while handles.iter().any(|h| !h.is_finished()) {
                let stuck = self.upcalls.running() > own;
                if stuck && Instant::now() >= until {
                    let left = handles.iter().filter(|h| !h.is_finished()).count();
                    tracing::warn!(
                        threads = left,
                        "shutdown: pool threads stuck in upcalls are detached"
                    );
                    handles.retain(|h| h.is_finished());
                    break;
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        for h in handles {
            let _ = h.join();
        }
    }

    pub(crate) fn join_threads(&self) {
        self.join_threads_until(None, 0);
    }
}
