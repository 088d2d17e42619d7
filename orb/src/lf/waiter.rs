//! Who waits for a reply: a thread ([`Participant`], which takes part in the pool while it
//! waits) or a task ([`TaskSlot`], an asynchronous call's future, which does not). The
//! connection's `Mux` holds one [`Waiter`] per request id; whoever takes it out of the table
//! (the leader with the reply, the close, an expired deadline) completes it here.

use super::{Completion, Driver, Lf, Participant};
use crate::sync::{lock, Mutex};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

/// The waiter of one outstanding two-way request.
#[derive(Debug, Clone)]
pub(crate) enum Waiter {
    /// A thread blocked in a call, as a bound Leader/Followers participant.
    Thread(Arc<Participant>),
    /// A future (AMI): completed by storing the completion and waking its task.
    Task(Arc<TaskSlot>),
}

/// The completion slot of an asynchronous call: where its reply (or failure) is stored for
/// the future to take, and the [`Waker`] of the task that polled it last.
///
/// Invariants, kept by its two methods under its one lock:
/// - It is completed at most once ([`complete`](Self::complete) ignores later completions;
///   the `Mux` hands each waiter out once anyway).
/// - No wake-up is lost: `poll` stores the waker and `complete` takes it under the same
///   lock, so a completion either finds the waker of the last poll or happens before that
///   poll, which then sees it.
/// - The waker is called outside the lock (it may run the task at once, on this thread, in
///   some executors), and never by anyone but the completing thread.
#[derive(Debug)]
pub(crate) struct TaskSlot {
    state: Mutex<TaskState>,
}

#[derive(Debug, Default)]
struct TaskState {
    completion: Option<Completion>,
    waker: Option<Waker>,
    /// Completed (the completion may have been taken since).
    done: bool,
}

impl TaskSlot {
    /// An empty slot.
    pub(crate) fn new() -> Self {
        TaskSlot {
            state: Mutex::new(TaskState::default()),
        }
    }

    /// A slot for a new call: this thread's spare if it has one (see
    /// [`recycle`](Self::recycle)), else a new one.
    pub(crate) fn fresh() -> Arc<Self> {
        #[cfg(not(orb_loom))]
        if let Some(slot) = SPARE_SLOT.with(|s| s.take()) {
            return slot;
        }
        Arc::new(TaskSlot::new())
    }

    /// Keeps `slot`, whose call is over, as this thread's spare, emptied, if nobody else
    /// holds it (else it is only dropped). Under loom, never (its threads share the
    /// process's thread-locals).
    pub(crate) fn recycle(slot: Arc<Self>) {
        #[cfg(not(orb_loom))]
        {
            let mut slot = slot;
            if let Some(s) = Arc::get_mut(&mut slot) {
                *s.state.get_mut() = TaskState::default();
                SPARE_SLOT.with(|spare| spare.set(Some(slot)));
            }
        }
        #[cfg(orb_loom)]
        drop(slot);
    }

    /// Stores the completion, once, and wakes the task that polled last.
    pub(crate) fn complete(&self, c: Completion) {
        let waker = {
            let mut s = lock(&self.state);
            if s.done {
                return;
            }
            s.done = true;
            s.completion = Some(c);
            s.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
            #[cfg(feature = "tokio")]
            TASK_WAKES.with(|n| n.set(n.get().wrapping_add(1)));
        }
    }

    /// The completion if it has come (taken out: `None` on later polls), else `Pending`
    /// with `cx`'s waker stored for [`complete`](Self::complete).
    pub(crate) fn poll(&self, cx: &mut Context<'_>) -> Poll<Option<Completion>> {
        let mut s = lock(&self.state);
        if s.done {
            return Poll::Ready(s.completion.take());
        }
        match &mut s.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            w => *w = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

#[cfg(not(orb_loom))]
thread_local! {
    /// This thread's spare task slot ([`TaskSlot::recycle`]): empty, held by nobody else.
    static SPARE_SLOT: std::cell::Cell<Option<Arc<TaskSlot>>> = const { std::cell::Cell::new(None) };
}

#[cfg(feature = "tokio")]
thread_local! {
    /// Wakers this thread has called for completed asynchronous calls (see [`task_wakes`]).
    static TASK_WAKES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// How many tasks this thread has woken by completing their calls, so far (wrapping): an
/// event-loop driver compares it around a turn to learn whether the turn woke tasks other
/// than its own future (`protorb::tokio`).
#[cfg(feature = "tokio")]
pub(crate) fn task_wakes() -> u64 {
    TASK_WAKES.with(|n| n.get())
}

impl Lf {
    /// Completes `w`: a thread as [`complete`](Self::complete) does (its slot, then its
    /// condition variable or the reactor), a task through its slot and waker. `by` is the
    /// leader handing it over, if any.
    pub(crate) fn complete_waiter<D: Driver>(
        &self,
        w: &Waiter,
        c: Completion,
        by: Option<u64>,
        driver: &D,
    ) {
        match w {
            Waiter::Thread(p) => self.complete(p, c, by, driver),
            Waiter::Task(t) => t.complete(c),
        }
    }
}

#[cfg(all(test, not(orb_loom)))]
mod tests {
    use super::*;
    use crate::exception::SystemException;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_completion_wakes_the_last_poller_once_and_is_taken_once() {
        let slot = TaskSlot::new();
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        assert!(slot.poll(&mut cx).is_pending());
        assert!(
            slot.poll(&mut cx).is_pending(),
            "a second poll keeps one waker"
        );
        slot.complete(Err(SystemException::internal("first")));
        slot.complete(Err(SystemException::internal("second")));
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        match slot.poll(&mut cx) {
            Poll::Ready(Some(Err(e))) => assert_eq!(e.detail(), Some("first")),
            other => panic!("unexpected {other:?}"),
        }
        assert!(matches!(slot.poll(&mut cx), Poll::Ready(None)));
    }

    /// A slot whose call is over comes back, emptied, for this thread's next call; one that
    /// someone else still holds is not taken.
    #[test]
    fn a_slot_nobody_holds_is_reused_empty() {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        let slot = TaskSlot::fresh();
        assert!(slot.poll(&mut cx).is_pending());
        slot.complete(Err(SystemException::internal("done")));
        let at = Arc::as_ptr(&slot);
        TaskSlot::recycle(slot);
        let again = TaskSlot::fresh();
        assert_eq!(Arc::as_ptr(&again), at, "the spare is reused");
        assert!(
            again.poll(&mut cx).is_pending(),
            "emptied: no completion, not done"
        );
        let held = again.clone();
        TaskSlot::recycle(again);
        let other = TaskSlot::fresh();
        assert_ne!(
            Arc::as_ptr(&other),
            Arc::as_ptr(&held),
            "a held slot is not reused"
        );
        held.complete(Ok(None));
        assert!(other.poll(&mut cx).is_pending());
    }

    #[test]
    fn a_completion_before_the_first_poll_is_seen_without_a_wake() {
        let slot = TaskSlot::new();
        slot.complete(Ok(None));
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        assert!(matches!(
            slot.poll(&mut Context::from_waker(&waker)),
            Poll::Ready(Some(Ok(None)))
        ));
        assert_eq!(count.0.load(Ordering::SeqCst), 0);
    }
}

#[cfg(all(test, orb_loom))]
mod loom_tests {
    //! The slot's promise under every interleaving of a poll and a completion: the task is
    //! woken, or its poll sees the completion; never neither (a lost wake-up).
    use super::*;
    use crate::exception::SystemException;
    use loom::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn loom_task_slot_loses_no_wake_up() {
        loom::model(|| {
            let slot = loom::sync::Arc::new(TaskSlot::new());
            let completer = {
                let slot = slot.clone();
                loom::thread::spawn(move || slot.complete(Err(SystemException::internal("x"))))
            };
            let count = Arc::new(Count(AtomicUsize::new(0)));
            let waker = Waker::from(count.clone());
            let first = slot.poll(&mut Context::from_waker(&waker));
            completer.join().unwrap();
            match first {
                Poll::Ready(c) => assert!(c.is_some()),
                Poll::Pending => {
                    assert_eq!(count.0.load(Ordering::SeqCst), 1, "woken once");
                    assert!(matches!(
                        slot.poll(&mut Context::from_waker(&waker)),
                        Poll::Ready(Some(_))
                    ));
                }
            }
        });
    }
}
