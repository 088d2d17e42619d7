//! One non-blocking turn of the event loop, for an application that drives the ORB from its
//! own event loop (an async runtime's thread) instead of, or beside, the ORB's pool threads.
//!
//! Why: an asynchronous call's reply is otherwise read by a pool thread, which then wakes the
//! task's thread: two thread wake-ups per reply where a blocking call, whose thread leads the
//! event loop and reads its own reply, has one. A driver waits for the event loop's fd
//! ([`Orb::event_fd`](crate::Orb::event_fd)) in its runtime and calls
//! [`Orb::turn`](crate::Orb::turn) when it is readable: the thread the socket wakes is then
//! the one that awaits the reply.
//!
//! A turn is a Leader/Followers participant that never waits: it takes the leader role only
//! if it is vacant (`Lf::try_lead`), leads with a zero poll timeout exactly as a pool
//! thread's leader would (replies to their waiters, requests to upcalls, accepts, flushes,
//! due timers), and gives the role back (`Lf::leave`), promoting a follower or arming the
//! standby as a leaving leader does. An upcall it meets runs on the turn's thread, after the
//! role has been given up (as on a pool thread), and the turn goes on afterwards.
//!
//! Nothing is lost to the edge-triggered nesting (the ORB's epoll set inside the runtime's):
//! a turn polls until the poll set has nothing more (a poll that fills its buffer is
//! followed by another) and the ready list is empty, or stops at its budget and says so
//! ([`Turn::more`]); the driver clears its readiness only after a turn that did not stop
//! early. A turn that finds the role taken returns at once: the leader polls before it
//! waits, so it sees what woke the driver, and a leader that leaves work on the ready list
//! with nobody to promote wakes the event loop (`lf`'s `Wake::EventLoop`), which wakes the
//! driver again.

use crate::connection::Connection;
use crate::lf::{Lead, Participant, Until};
use crate::orb::{Orb, OrbInner};
use std::sync::Arc;
use std::time::Instant;

/// Rounds of leading one turn does at most (a round: the ready list and one poll, or one
/// upcall) before it hands control back to its caller's runtime with [`Turn::more`] set.
const ROUNDS: usize = 16;

/// Replies one turn hands out at most before it returns with [`Turn::more`] set. The tasks it
/// wakes run only after it: a turn that handed out every reply waiting woke hundreds of
/// tasks at once (`tput-async 1000`), and the driver read the socket, and sent their next
/// requests, only after all of them ran. In bounded batches the driver reads and writes
/// more often: `tput-async 1000`, server and client pinned apart, 222k -> 241k calls/s
/// (examples/bench/PROFILE.md, 2026-11-26).
const TURN_REPLIES: usize = 64;

/// What one [`Orb::turn`](crate::Orb::turn) did, and when the ORB next needs one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Turn {
    led: bool,
    more: bool,
    next_timer: Option<Instant>,
    shut_down: bool,
}

impl Turn {
    /// Whether this turn led the event loop. False: another thread was leading (a pool
    /// thread, a thread blocked in a call) and handles what is ready, or the ORB is shut
    /// down.
    pub fn led(&self) -> bool {
        self.led
    }

    /// Whether the turn stopped at its budget with work left that the event fd may not
    /// announce again: turn again soon (after letting other tasks run), without waiting for
    /// the fd to become readable, and keep its readiness.
    pub fn more(&self) -> bool {
        self.more
    }

    /// When the ORB's next timer is due (an asynchronous call's deadline, the idle sweep, an
    /// accept retry); `None`: no timer is set. For information: the event fd becomes
    /// readable when it is due, so a driver need not wait for it itself.
    pub fn next_timer(&self) -> Option<Instant> {
        self.next_timer
    }

    /// Whether the ORB is shut down: no turn will do anything any more.
    pub fn is_shut_down(&self) -> bool {
        self.shut_down
    }
}

impl Orb {
    /// The event loop's file descriptor, for an application that drives the ORB from its own
    /// event loop with [`Orb::turn`]: it is readable (level: while; edge: whenever one is
    /// added) when the ORB's poll set holds events, and when one of the ORB's timers is due
    /// (an asynchronous call's deadline, the idle sweep: a timerfd in the poll set announces
    /// them), so a driver needs no timer of its own. On Linux it is the ORB's epoll fd (a
    /// duplicate the ORB owns): register it for readability only, in an edge- or
    /// level-triggered poller, and never read it.
    ///
    /// A driver loop, in outline (the `tokio` feature's
    /// `protorb::tokio::drive` is one):
    ///
    /// 1. Wait until the fd is readable.
    /// 2. Call [`turn`](Self::turn). If it says [`more`](Turn::more), turn again soon (keep
    ///    the fd's readiness); otherwise clear the readiness (an edge-triggered poller needs
    ///    nothing) and go to 1.
    pub fn event_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.inner.reactor.event_fd()
    }

    /// One turn of the ORB's event loop on the calling thread, without blocking: if no other
    /// thread leads the event loop (the Leader/Followers leader role is vacant), it takes the
    /// role, handles whatever is ready exactly as a pool thread's leader would, and gives the
    /// role back; otherwise it returns at once (the leading thread handles it).
    ///
    /// What a turn handles: replies (each to its waiting thread, or to its
    /// [`ReplyFuture`](crate::ReplyFuture), whose task is woken), incoming requests,
    /// accepts, queued writes, closed connections, and the timers that are due (asynchronous
    /// calls past their deadline, the idle sweep). It stops when nothing more is ready, or
    /// at a budget ([`Turn::more`]): 16 rounds of leading, or 64 replies handed out, so
    /// that the tasks they woke run (and send their next requests) before it reads more.
    ///
    /// **Where upcalls run.** An incoming request met by a turn is run on the turn's thread
    /// (after the leader role is given up, so other threads can lead meanwhile), before
    /// `turn` returns: on an async runtime, servant code runs on the runtime's thread and
    /// holds it up as long as it runs. A nested blocking call made by that servant is
    /// served as any blocking call (its thread leads the event loop while it waits).
    ///
    /// With `threads(0)` and a driver calling this, the thread that awaits a reply is the
    /// one woken by its socket: one thread wake-up per reply, as in a blocking call. With
    /// pool threads too, they and the turns compete for the role; nothing is lost either
    /// way. Calling it concurrently from several threads is allowed (one of them leads).
    pub fn turn(&self) -> Turn {
        self.inner.turn()
    }
}

impl OrbInner {
    /// [`Orb::turn`](crate::Orb::turn).
    pub(crate) fn turn(&self) -> Turn {
        let (turn, mut held) = self.turn_keeping();
        self.release_writes(&mut held);
        turn
    }

    /// A turn that keeps the writes it holds for the tasks it woke: returns the connection
    /// whose replies it handed out, if it could hold its writes, still held. The caller
    /// releases it ([`release_writes`](Self::release_writes)), or keeps it for a driver
    /// (`Connection::keep_hold`) until the driver's next poll, when those tasks
    /// have sent their next requests ([`OrbInner::end_kept_hold`]).
    pub(crate) fn turn_keeping(&self) -> (Turn, Option<Arc<Connection>>) {
        let p = Participant::for_turn();
        let mut held = None;
        let (mut led, mut more, mut rounds) = (false, false, 0);
        // Whether this turn holds the role, or left it vacant for an upcall (and must pass
        // it on if it does not take it back).
        let (mut holding, mut vacated) = (false, false);
        let mut replies_left = TURN_REPLIES;
        loop {
            if !holding {
                if !self.lf.try_lead(&p, self) {
                    break;
                }
                (holding, vacated, led) = (true, false, true);
            }
            rounds += 1;
            // A deadline of now: the poll does not wait (timers that are due run first).
            match self.lead_keeping(&p, Some(Until::now()), &mut held, &mut replies_left) {
                Lead::Upcall(u) => {
                    // User code may wait for the peer: not behind our own hold.
                    self.release_writes(&mut held);
                    // Here as on a pool thread: a successor first, then user code.
                    self.lf.leave(&p, self, true);
                    (holding, vacated) = (false, true);
                    self.upcall(u);
                    if rounds >= ROUNDS {
                        more = true;
                        break;
                    }
                }
                Lead::Idle | Lead::StepDown | Lead::Served => {
                    let left = self.reactor.has_ready()
                        || self.reactor.poll_was_full()
                        || self.upcalls.has_parked();
                    if !left || rounds >= ROUNDS || replies_left == 0 {
                        more = left;
                        break;
                    }
                }
            }
        }
        if holding || vacated {
            // As a leaving leader: the standby (armed), a follower, or nobody.
            self.lf.leave(&p, self, false);
        }
        Participant::recycle_turn(p);
        let shut_down = self.lf.is_shutdown();
        let turn = Turn {
            led,
            more: more && !shut_down,
            next_timer: if shut_down { None } else { self.next_timer() },
            shut_down,
        };
        (turn, held)
    }

    /// When the leader's next timer is due, if one is set.
    pub(crate) fn next_timer(&self) -> Option<Instant> {
        crate::timers::earliest(self.housekeeping.next_due(), self.call_deadlines.next_due())
    }
}
