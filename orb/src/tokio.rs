//! Driving the ORB's event loop from a tokio runtime (the `tokio` cargo feature): why it
//! exists is [`Orb::turn`]'s reason, one thread wake-up per asynchronous reply instead of
//! two; this module is the few lines that wire it to tokio, so applications and our own
//! benchmarks and tests share one correct loop.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! // No pool thread: the runtime's thread reads the replies itself.
//! let orb = protorb::Orb::builder().no_listen().threads(0).build()?;
//! let driver = tokio::spawn(protorb::tokio::drive(orb.clone()));
//! // ... make asynchronous calls (`echo_async(..).await`) on this runtime ...
//! orb.shutdown(); // the driver returns
//! driver.await??;
//! # Ok(()) }
//! ```

use crate::sync::plain::Mutex;
use crate::Orb;
use ::tokio::io::unix::AsyncFd;
use ::tokio::io::Interest;
use std::future::Future;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

/// The ORB's event fd, owning the ORB so that the fd stays open while tokio watches it.
struct EventFd(Orb);

impl AsRawFd for EventFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.event_fd().as_raw_fd()
    }
}

/// Drives `orb`'s event loop on the current tokio runtime until the ORB is shut down (then
/// returns `Ok`), or the event fd fails. Spawn it as a task:
/// `tokio::spawn(protorb::tokio::drive(orb.clone()))`.
///
/// It waits, with [`AsyncFd`], for [`Orb::event_fd`] to become readable, then calls
/// [`Orb::turn`] and clears the readiness (unless the turn stopped at its budget: then it
/// yields to the runtime and turns again). The ORB's timers (an asynchronous call's
/// deadline, the idle sweep) make the fd readable when they are due, so it needs no sleep.
///
/// Upcalls the turns meet (requests to this ORB's objects) run on the runtime's thread
/// that polls this task: see [`Orb::turn`]. The task holds an [`Orb`] handle, so the ORB is
/// not shut down by dropping the application's handles: call [`Orb::shutdown`].
///
/// Needs a runtime with I/O enabled (`enable_io`, or `enable_all`). One driver per ORB is enough;
/// more compete harmlessly. See also [`drive_with`], which drives the loop inside the task
/// that awaits the replies.
// Not an `async fn`: the signature promises `Send + 'static`, which `tokio::spawn` needs,
// instead of leaving it to inference.
#[allow(clippy::manual_async_fn)]
pub fn drive(orb: Orb) -> impl Future<Output = std::io::Result<()>> + Send + 'static {
    async move {
        let mut driver = Driver::new(orb)?;
        std::future::poll_fn(move |cx| driver.poll(cx, None)).await
    }
}

/// Runs `future` with `orb`'s event loop driven in the same task (as [`drive`] does), until
/// `future` completes; returns its output, or the event fd's error.
///
/// Where [`drive`] is a task of its own, whose turns wake the task awaiting a reply, this
/// polls the two together: a reply that a turn reads wakes `future` inside the same poll,
/// and `future` is polled again at once. For the future given to `Runtime::block_on` (or
/// `#[tokio::main]`) that matters: tokio polls its I/O driver once more, without waiting,
/// before it polls a woken `block_on` future; here `future` is never woken from outside
/// while this poll runs, so that poll is spared (measured: one `epoll_wait` per call in
/// `lat-async`).
///
/// ```no_run
/// # fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let orb = protorb::Orb::builder().no_listen().threads(0).build()?;
/// let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
/// let answer = rt.block_on(protorb::tokio::drive_with(orb.clone(), async {
///     // ... asynchronous calls on `orb` ...
///     42
/// }))?;
/// # let _ = answer; Ok(()) }
/// ```
pub async fn drive_with<F: Future>(orb: Orb, future: F) -> std::io::Result<F::Output> {
    let mut driver = Some(Driver::new(orb)?);
    let mut future = std::pin::pin!(future);
    let inner = Arc::new(InnerWake {
        woken: AtomicBool::new(false),
        polling: AtomicBool::new(false),
        wakes: AtomicU64::new(0),
        outer: Mutex::new(None),
    });
    let waker = Waker::from(inner.clone());
    // The task's waker as last given to `inner` (the same on every poll, under `block_on`):
    // compared here, so that `inner`'s lock is taken only when it changes.
    let mut outer: Option<Waker> = None;
    std::future::poll_fn(move |cx| {
        if !outer.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            inner.set_outer(cx.waker());
            outer = Some(cx.waker().clone());
        }
        for _ in 0..ROUNDS {
            // Relaxed: a wake-up that misses it is forwarded to the task, which only costs
            // a poll more. A wake-up before the future's poll is seen by that poll, so
            // `woken` needs no reset here (a stale one costs one more round).
            inner.polling.store(true, Ordering::Relaxed);
            if let Poll::Ready(out) = future.as_mut().poll(&mut Context::from_waker(&waker)) {
                return Poll::Ready(Ok(out));
            }
            if let Some(d) = &mut driver {
                match d.poll(cx, Some(&inner)) {
                    Poll::Ready(Ok(())) => driver = None, // shut down: only `future` is left
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                    Poll::Pending => {}
                }
            }
            // Paired with `InnerWake::wake_by_ref`: a wake-up after this is forwarded.
            inner.polling.store(false, Ordering::SeqCst);
            if !inner.woken.swap(false, Ordering::SeqCst) {
                return Poll::Pending;
            }
        }
        // A future that keeps waking itself: let the runtime's other tasks run.
        cx.waker().wake_by_ref();
        Poll::Pending
    })
    .await
}

/// Rounds of polling the future again within one poll of [`drive_with`], at most.
const ROUNDS: usize = 16;

/// The waker `drive_with` gives its future: a wake-up during `drive_with`'s own poll (a
/// turn completing a reply) is noted, and the future polled again in that poll; any other
/// is forwarded to the task's waker.
struct InnerWake {
    woken: AtomicBool,
    polling: AtomicBool,
    /// Wake-ups so far: the driver compares it around a turn with the tasks the turn woke.
    wakes: AtomicU64,
    outer: Mutex<Option<Waker>>,
}

impl InnerWake {
    fn set_outer(&self, w: &Waker) {
        let mut outer = self.outer.lock();
        match &mut *outer {
            Some(o) if o.will_wake(w) => {}
            o => *o = Some(w.clone()),
        }
    }
}

impl Wake for InnerWake {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.wakes.fetch_add(1, Ordering::Relaxed);
        self.woken.store(true, Ordering::SeqCst);
        if !self.polling.load(Ordering::SeqCst) {
            let outer = self.outer.lock().clone();
            if let Some(w) = outer {
                w.wake();
            }
        }
    }
}

/// The driver's state: the event fd's registration.
struct Driver {
    orb: Orb,
    fd: AsyncFd<EventFd>,
    /// Whatever was ready before the fd was registered is turned first.
    first: bool,
    /// The connection whose writes the last turn kept held for the tasks it woke
    /// (`Connection::keep_hold`): their requests queue there and go out together, in
    /// one `writev`, when this driver is polled next (it wakes itself for that), instead of
    /// one system call each.
    held: Option<Arc<crate::connection::Connection>>,
}

impl Drop for Driver {
    fn drop(&mut self) {
        self.end_hold();
    }
}

impl Driver {
    fn new(orb: Orb) -> std::io::Result<Self> {
        // SAFETY: the fd is the ORB's epoll fd, which `EventFd` keeps open (it owns an `Orb`,
        // hence the reactor holding the fd) and unchanged for as long as the `AsyncFd` lives.
        #[allow(unsafe_code)]
        let fd =
            unsafe { AsyncFd::register_with_interest(EventFd(orb.clone()), Interest::READABLE)? };
        Ok(Driver {
            orb,
            fd,
            first: true,
            held: None,
        })
    }

    /// Sends what the woken tasks queued behind the last turn's hold, and ends it (unless
    /// a sender that had to wait ended it already).
    fn end_hold(&mut self) {
        if let Some(c) = self.held.take() {
            self.orb.inner.end_kept_hold(&c);
        }
    }

    /// Turns while the fd is readable; `Ready(Ok)` once the ORB is shut down. The ORB's
    /// timers need no sleep here: the fd becomes readable when one is due. `inner`: the
    /// future that [`drive_with`] polls beside this driver (polled next, so no writes are
    /// held for it alone).
    fn poll(
        &mut self,
        cx: &mut Context<'_>,
        inner: Option<&InnerWake>,
    ) -> Poll<std::io::Result<()>> {
        self.end_hold();
        loop {
            let orb = &self.orb;
            if orb.is_shut_down() {
                return Poll::Ready(Ok(()));
            }
            let ready = match self.fd.poll_read_ready(cx) {
                Poll::Ready(Ok(guard)) => Some(guard),
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => None,
            };
            if ready.is_none() && !std::mem::take(&mut self.first) {
                // Quiet, with this task's waker registered for the fd.
                return Poll::Pending;
            }
            let own = || inner.map_or(0, |i| i.wakes.load(Ordering::Relaxed));
            let (tasks0, own0) = (crate::lf::task_wakes(), own());
            let (turn, held) = orb.inner.turn_keeping();
            // Tasks the turn woke besides `inner`'s future: they run after this task's poll.
            let others = crate::lf::task_wakes().wrapping_sub(tasks0) > own().wrapping_sub(own0);
            if let Some(c) = held {
                if inner.is_some() && !others {
                    // Only `drive_with`'s future was woken: it is polled right after this
                    // (and this driver again), so the hold would batch only what it alone
                    // sends, typically one awaited call's next request: not worth its cost
                    // (callgrind, `lat-async`).
                    orb.inner.release_writes(&mut Some(c));
                } else {
                    c.keep_hold();
                    self.held = Some(c);
                }
            }
            if turn.more() {
                // Work left that the fd may not announce again: keep its readiness and
                // let the runtime's other tasks (the woken callers) run first.
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            if let Some(mut guard) = ready {
                guard.clear_ready();
            }
            if self.held.is_some() {
                // The woken tasks run first, then this poll again ends the hold.
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
        }
    }
}
