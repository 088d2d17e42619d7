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

use crate::Orb;
use ::tokio::io::unix::AsyncFd;
use ::tokio::io::Interest;
use std::future::Future;
use std::os::fd::{AsRawFd, RawFd};
use std::task::Poll;
use std::time::{Duration, Instant};

/// The ORB's event fd, owning the ORB so that the fd stays open while tokio watches it.
struct EventFd(Orb);

impl AsRawFd for EventFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.event_fd().as_raw_fd()
    }
}

/// How long to wait before looking again at a timer that is due while another thread leads
/// the event loop (that thread runs it): so the driver does not spin meanwhile.
const DUE_RETRY: Duration = Duration::from_millis(1);

/// Drives `orb`'s event loop on the current tokio runtime until the ORB is shut down (then
/// returns `Ok`), or the event fd fails. Spawn it as a task:
/// `tokio::spawn(protorb::tokio::drive(orb.clone()))`.
///
/// It waits, with [`AsyncFd`], for [`Orb::event_fd`] to become readable, then calls
/// [`Orb::turn`] and clears the readiness (unless the turn stopped at its budget: then it
/// yields to the runtime and turns again); and it sleeps until the ORB's next timer (an
/// asynchronous call's deadline, the idle sweep), hearing of nearer ones through
/// [`Orb::watch_timers`].
///
/// Upcalls the turns meet (requests to this ORB's objects) run on the runtime's thread
/// that polls this task: see [`Orb::turn`]. The task holds an [`Orb`] handle, so the ORB is
/// not shut down by dropping the application's handles: call [`Orb::shutdown`].
///
/// Needs a runtime with I/O and time enabled (`enable_all`). One driver per ORB is enough;
/// more compete harmlessly.
// Not an `async fn`: the signature promises `Send + 'static`, which `tokio::spawn` needs,
// instead of leaving it to inference.
#[allow(clippy::manual_async_fn)]
pub fn drive(orb: Orb) -> impl Future<Output = std::io::Result<()>> + Send + 'static {
    async move {
        // SAFETY: the fd is the ORB's epoll fd, which `EventFd` keeps open (it owns an `Orb`,
        // hence the reactor holding the fd) and unchanged for as long as the `AsyncFd` lives.
        #[allow(unsafe_code)]
        let fd =
            unsafe { AsyncFd::register_with_interest(EventFd(orb.clone()), Interest::READABLE)? };
        let mut sleep = Box::pin(::tokio::time::sleep(Duration::ZERO));
        let mut sleeping_until: Option<Instant> = None;
        let mut not_before = Instant::now();
        // Whatever was ready before the fd was registered.
        let mut first = true;
        std::future::poll_fn(move |cx| loop {
            if orb.is_shut_down() {
                return Poll::Ready(Ok(()));
            }
            let ready = match fd.poll_read_ready(cx) {
                Poll::Ready(Ok(guard)) => Some(guard),
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => None,
            };
            if ready.is_some() || std::mem::take(&mut first) {
                let turn = orb.turn();
                if turn.more() {
                    // Work left that the fd may not announce again: keep its readiness and
                    // let the runtime's other tasks (the woken callers) run first.
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
                if let Some(mut guard) = ready {
                    guard.clear_ready();
                }
                continue;
            }
            // The fd is quiet (and this task's waker registered for it): sleep until the next
            // timer, registered to hear of a nearer one.
            let Some(due) = orb.watch_timers(cx.waker()) else {
                sleeping_until = None;
                return Poll::Pending;
            };
            let at = due.max(not_before);
            if sleeping_until != Some(at) {
                sleep.as_mut().reset(::tokio::time::Instant::from_std(at));
                sleeping_until = Some(at);
            }
            if sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            sleeping_until = None;
            let turn = orb.turn();
            if turn.more() {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            let now = Instant::now();
            if turn.next_timer().is_some_and(|t| t <= now) {
                // Another thread leads and has not run it yet: look again in a moment.
                not_before = now + DUE_RETRY;
            }
        })
        .await
    }
}
