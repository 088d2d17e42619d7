//! The hybrid client/server Leader/Followers pool.
//!
//! Every thread that touches the ORB's event loop is a *participant*: the ORB's pool threads
//! (unbound: they only serve) and any application or servant thread waiting for a reply (bound to
//! its request). At most one participant is the leader and drives the reactor; the others sleep
//! as followers, each on its own condition variable (the paper's Specific Notification).
//!
//! | what | protected by | who may touch it |
//! |---|---|---|
//! | `leader`, the follower stack and its deadlines (`timed`), the standby (`standby`, `armed`, `in_standby`, tick mode), `shutdown` | the promotion lock (`Lf::state`; `armed` is an atomic changed only under it, read without it as a hint) | any participant, briefly |
//! | a participant's completion slot | its own mutex; written before the promotion lock is taken to notify | the leader (reply), `close`, the owner |
//! | a task's completion slot and `Waker` (an asynchronous call: `waiter.rs`) | its own mutex; the waker is called after it is released | the leader (reply, deadline), `close`, the future |
//! | the reactor (`mio::Poll`) | the leader role | the leader only |
//! | reading a socket | the leader role | the leader only (also when it waits in a socket's `recv` instead of the poll: an owned read, `server/leader.rs`) |
//! | writing a socket | the connection's write lock | anyone |
//!
//! A participant's states (h2-style diagram):
//!
//! ```text
//!             join (no leader)                 event needs an upcall
//!   ┌────────┐ ───────────────> ┌────────┐ ─────────────────────────> ┌────────────┐
//!   │ Joining│                  │ Leader │   (promote a follower first)│ Processing │
//!   └────────┘ ───────────────> └────────┘ <──────┐                    └────────────┘
//!      │  ^     promoted          │  ^   reply/   │ cheap event              │
//!      │  │                       │  │   accept   │ (reply hand-off)         │ upcall done:
//!      v  │ woken (reply,         │  └───────────┘                          │ rejoin
//!   ┌──────────┐ promotion,       │ own reply arrived / deadline / shutdown │
//!   │ Follower │ deadline)        v   (promote a follower first)            v
//!   └──────────┘               ┌──────┐ <─────────────────────────────  Joining
//!                              │ Done │
//!                              └──────┘
//! ```
//!
//! Rules that keep it correct (each learnt from TAO or Ice, see ARCHITECTURE.md):
//! - A follower is removed from the stack *before* it is signalled, and every wake-up re-checks
//!   the state, so spurious wake-ups are harmless and no thread is woken twice.
//! - A participant that leaves (reply, deadline, shutdown) while it is the leader promotes a
//!   follower first, so the loop never stops while followers wait.
//! - The leader promotes before it runs user code, not before cheap work: delivering a reply
//!   needs no promotion.
//! - Promotion prefers an idle unbound (pool) thread, so a waiting caller is not made leader when
//!   a free thread could serve; when only bound threads wait, one of them leads (that is what
//!   makes nested callbacks with one thread per process work).
//! - A reply is stored in the waiter's slot before the promotion lock is taken to notify it, and
//!   the waiter checks its slot under that lock before sleeping: no lost wake-up.
//! - A follower with a deadline sleeps without a timeout when the event loop's alarm (the
//!   reactor's timerfd) goes off by that deadline (`Driver::cover_deadline`, asked under the
//!   promotion lock once the follower is listed in `timed`; it arms the alarm only if it is
//!   set later). Whoever takes the alarm's expiry wakes the followers whose deadline passed
//!   and arms the alarm for the others ([`Lf::wake_timed`], under the promotion lock: a
//!   follower listed meanwhile is seen, or finds the alarm disarmed and arms it). A timed
//!   sleep starts and cancels a kernel high-resolution timer every time (1.2 a call on a
//!   `tput 32` client, PROFILE.md). The leader's poll hears the alarm at once; a leader in
//!   an owned read at its run's end (`reactor::OWNED_RUN` plus a receive timeout), which
//!   is how late a follower's deadline can then end its wait.
//! - A pool thread that leads and reads a callback of a call a bound follower waits in (the
//!   request carries that call's chain), with no idle pool thread to promote, hands the
//!   callback and the role to that follower (`step_down_for`) instead of promoting it and
//!   running the callback itself: the callback runs on the thread that made the call, which
//!   leads its chain on, and the pool thread waits as the standby. The role is claimed for
//!   the follower (no takeover); a follower that leaves the pool before it leads passes the
//!   callback to the pool threads (`Driver::release_addressed`). Without this, the pool
//!   thread's own nested call would bind it as well, and every level of the chain would
//!   wake the other thread.
//! - The same callback may arrive before its caller waits at all: the peer, woken by the
//!   request, can run and answer between the caller's send and its wait (on one CPU it
//!   preempts the caller). So a bound caller in a process that can be called back announces
//!   itself before it sends (`Lf::coming`), and a pool thread that reads a callback of its
//!   chain meanwhile sets the callback aside for it and leads on; the caller takes it when it
//!   joins, as leader or before it sleeps as a follower, and leaves the list then (or in
//!   `Lf::not_coming`, if its send fails: the callback goes to the pool threads).
//! - A promoted thread holds the role from the moment it is chosen, but it leads only once it
//!   runs; until then the role is *unclaimed* (`State::unclaimed`), and a participant that
//!   joins meanwhile (typically the upcall thread, back from a short upcall) takes it over
//!   rather than sleep. Waking a thread on another, idle vCPU took up to 18 ms on the
//!   benchmarks' VM, and with the role held by a thread not yet running nobody read the
//!   sockets: every call in flight stalled (examples/bench/PROFILE.md, 2026-11-26). The
//!   promoted thread re-checks the state when it runs, as any woken thread does, finds the
//!   role taken and waits again.
//!
//! **The standby (lazy promotion).** Promoting before every upcall costs a wake-up and a
//! context switch per request, though in a request-reply exchange nothing usually arrives while
//! the upcall runs. So one idle pool thread waits as the *standby*, in a poll set of its own
//! (see `reactor`), instead of on a condition variable. A leader leaving for an upcall, with no
//! work pending that no event would announce, leaves the role vacant and *arms* the standby: the
//! kernel wakes it if the event loop gets an event before someone takes the role back. The
//! upcall thread disarms once user code is done (it will lead again in a moment), and a thread
//! that finds the role vacant takes it. Two rules keep this safe:
//! - The standby's wake-up is not addressed to a thread, so only one thread at a time may wait
//!   in the standby poll set (`in_standby`); otherwise a thread on its way in could swallow the
//!   wake-up of the one just made leader, still on its way out.
//! - A thread that exits while the role is vacant passes it on as a leaving leader would: it
//!   may be the upcall thread that disarmed the standby, expecting to lead again.
//! - A pool thread that, as leader, hands a caller its reply and sees no other caller waiting
//!   *stands aside*: it leaves the role vacant with the standby armed (itself, if that place
//!   is free). A caller in a request-reply loop comes straight back and takes the role, so it
//!   reads its next reply itself rather than sleeping while a pool thread reads it and wakes
//!   it; a caller about to send disarms the standby first (`caller_will_wait`), so that its
//!   reply does not wake the standby before the caller gets to lead, and re-arms it if the
//!   send fails (`did_not_wait`).
//! - A thread is registered as the standby only while it is in the standby poll set; it
//!   deregisters as soon as it is back under the promotion lock. A standby left registered
//!   while it ran user code could be armed in vain, or made leader while it slept as a bound
//!   follower in a nested call: a follower of itself, with every other thread asleep too.
//!
//! **Tick mode.** Arming and disarming are one `epoll_ctl` each, per upcall: about 0.8 µs of
//! a 19 µs round trip on the benchmarks' VM, and in one-at-a-time request-reply traffic the
//! armed standby is never needed. So after [`IDLE_ARMS_FOR_TICK`] arms in a row that the
//! upcall thread disarmed itself, a pool built with a tick switches to tick mode: a leader
//! leaving for an upcall leaves the role vacant *unarmed* and notes when (`vacant_since`),
//! and the standby waits with the tick as its timeout instead. The rules:
//! - A leader leaving for an upcall leaves the role unarmed (`promote_for_upcall`), and so
//!   does a caller that has read its own reply on a client that does not listen
//!   (`leave_with_reply`, `promote_for_caller`: the caller of a request-reply loop is back
//!   within microseconds, and arming and disarming for it were two system calls a call);
//!   either only with no caller waiting for a reply (another caller's reply must not wait
//!   for a tick), and the caller's only with no asynchronous call in flight, whose reply no
//!   thread waits for: starting one arms a vacancy left unarmed (`expect_event`; the
//!   mark and the timer table are each written before the other is read, sequentially
//!   consistent, so one of the two sides sees the other). A sender that leaves a frame
//!   queued behind a full socket arms such a vacancy too (`expect_event`, from
//!   `OrbInner::after_send`), for the writable event; that side has no mark the vacating
//!   thread reads, so a vacancy made in the same instant leaves the frame to the tick. A
//!   caller that does not come back is covered by the tick as a long upcall is. A caller that leads
//!   and gets its reply *inside* an upcall of this pool (a nested call) counts as leaving
//!   for that upcall: its thread goes back to user code that ends in `user_code_done` and a
//!   reply, then leads again, as after any upcall.
//! - A vacancy is left unarmed only while the standby is in a timed wait (`ticking`), so some
//!   thread looks within a tick; otherwise it is armed as before. A standby that went into its
//!   wait without a timeout (before tick mode, or after an idle tick: see below) is woken
//!   once, by a thread that has just taken the role, so that it waits again with the tick
//!   (`retick`).
//! - A tick that finds the role vacant for less than half a tick waits again: the upcall is
//!   short and its thread is about to lead. One that finds it vacant for longer takes the role
//!   (a *takeover*, counted) and ends tick mode; so does an armed standby woken by an event.
//!   The pool then arms before every upcall again until the next quiet run.
//! - When user code is done (`user_code_done`, before the reply is sent, so the answer to
//!   the reply cannot count), the upcall thread polls the event loop once without waiting
//!   (`Driver::events_waiting`): whatever an armed standby would have been woken for. If
//!   anything arrived, requests come in parallel and tick mode ends, so that they are not
//!   served one upcall after another while the other pool threads sleep. That poll is one
//!   system call where arming took two, and it skips if a leader is already polling. It is
//!   made only after user code that ran [`LOOK_AFTER`] or more, and after one short upcall
//!   in [`LOOK_EVERY`]: a request that arrives during short user code waits little anyway,
//!   and nothing is lost by not looking, since what the look would find waits in the poll
//!   set for the thread that leads next.
//! - A standby whose tick saw no unarmed vacancy waits without a timeout next time, so an
//!   idle ORB does not tick.
//!
//! The price: a request that arrives during a long upcall in tick mode waits up to about a
//! tick (once), and a busy ORB's standby wakes once per tick
//! ([`OrbBuilder::standby_tick`](crate::OrbBuilder::standby_tick)).

use crate::sync::{lock, AtomicBool, AtomicUsize, Mutex, MutexGuard};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

std::thread_local! {
    /// The pool (its address) whose upcall this thread runs innermost, from `Lf::run`
    /// (0: none).
    static SERVING: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

mod participant;
mod standby;
mod waiter;

pub(crate) use participant::{Completion, Participant};
#[cfg(feature = "tokio")]
pub(crate) use waiter::task_wakes;
pub(crate) use waiter::{TaskSlot, Waiter};

/// What a bound caller's read of its own connection did (`OrbInner::read_own_reply`,
/// between its send and [`Lf::run_from`]).
pub(crate) enum OwnReply {
    /// Its reply, read by the caller itself, which no longer leads.
    Read(crate::giop::Reply),
    /// No reply yet: the caller waits in the pool ([`Lf::run_from`]), with this clock
    /// reading if nothing was waited for since it was taken.
    Wait(Option<Instant>),
}

/// Why `Lf::run` returned.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Exit {
    /// The participant's slot holds its completion.
    Completed,
    /// The deadline passed first.
    TimedOut,
    /// The pool is shutting down.
    Shutdown,
}

/// What the leader's turn produced.
pub(crate) enum Lead<U> {
    /// Nothing that needs this thread (events handled, a wake-up, or the poll timed out).
    Idle,
    /// A request to run: the pool promotes a follower, then runs it on this thread.
    Upcall(U),
    /// This (bound) thread should let an unbound follower lead if one is idle (nested upcalls
    /// are disabled and a request is waiting for a pool thread).
    StepDown,
    /// The turn ran upcalls on this (pool) thread, having left the role vacant for each, and
    /// did not take the role back after the last ([`Lf::serve_and_lead_on`]): nothing more
    /// to do.
    Served,
}

/// A leader's deadline, with the clock reading taken when it was last checked: `Lf::run`
/// checks it just before each turn, so the turn's poll timeout needs no clock read of its
/// own (the poll waits in milliseconds; the reading is microseconds old).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Until {
    pub(crate) deadline: Instant,
    pub(crate) now: Instant,
}

impl Until {
    /// `deadline`, as of now.
    pub(crate) fn from_now(deadline: Instant) -> Self {
        Until {
            deadline,
            now: Instant::now(),
        }
    }

    /// A deadline of now: a poll that does not wait (one clock read).
    pub(crate) fn now() -> Self {
        let now = Instant::now();
        Until { deadline: now, now }
    }

    /// The time left until the deadline, as of the reading.
    pub(crate) fn left(&self) -> Duration {
        self.deadline.saturating_duration_since(self.now)
    }

    /// Whether less than `margin` was left at the reading: `left() < margin` with an
    /// addition, where the subtraction is ~40 instructions (callgrind). Out of line: inlined
    /// into the leader's turn, it was worked out at the top of the turn whether the turn
    /// had a deadline or not.
    #[inline(never)]
    pub(crate) fn closer_than(&self, margin: Duration) -> bool {
        self.now
            .checked_add(margin)
            .is_none_or(|later| self.deadline < later)
    }
}

/// The ORB side of the pool: what a leader does.
pub(crate) trait Driver {
    /// Work that must run outside the leader role.
    type Upcall;
    /// One turn as leader: wait for events (until the deadline at most) and handle cheap
    /// ones. A pool thread's turn may also run the upcalls it reads and lead on after each,
    /// where the pool allows it ([`Lf::serve_and_lead_on`]; [`Lead::Served`] if the role is
    /// another's after one).
    fn lead(&self, p: &Arc<Participant>, until: Option<Until>) -> Lead<Self::Upcall>;
    /// Runs an upcall (the caller is no longer leader).
    fn run_upcall(&self, upcall: Self::Upcall);
    /// A request a bound leader set aside for a pool thread (nested upcalls disabled).
    fn take_parked(&self) -> Option<Self::Upcall> {
        None
    }
    /// Whether a set-aside request waits. Checked under the promotion lock before a pool
    /// thread sleeps: a leader parks first and then looks for an idle pool thread under that
    /// lock, so one of the two always sees the other.
    fn has_parked(&self) -> bool {
        false
    }
    /// The call chain a request belongs to, if it carried one and may be handed to the
    /// bound thread waiting in that chain (see `Lf::step_down_for`); `None` by default.
    fn upcall_chain(&self, _upcall: &Self::Upcall) -> Option<u64> {
        None
    }
    /// Sets `upcall` aside for the bound thread of its call chain, which is being made
    /// leader and takes it in its turn ([`Driver::lead`]). Called only with an upcall for
    /// which [`upcall_chain`](Self::upcall_chain) gave a chain.
    fn address_upcall(&self, upcall: Self::Upcall);
    /// A bound participant of call chain `chain` leaves the pool: requests set aside for
    /// it ([`address_upcall`](Self::address_upcall)) go to the pool threads instead; says
    /// whether there were any. Called under the promotion lock, before the leaving thread
    /// passes the role on (so that the promotion sees them pending).
    fn release_addressed(&self, _chain: u64) -> bool {
        false
    }
    /// The request set aside for call chain `chain` ([`address_upcall`](Self::address_upcall)),
    /// for a bound thread of that chain about to sleep as a follower (see `Lf::coming`).
    fn take_addressed(&self, _chain: u64) -> Option<Self::Upcall> {
        None
    }
    /// Interrupts the leader's wait in the reactor.
    fn wake_leader(&self);
    /// Announces work left for the next leader with nobody promoted to take it
    /// (`Wake::EventLoop`) to whoever waits on the event loop from outside the pool (a
    /// driver of `Orb::turn`). By default the leader's wake-up, which such a waiter sees.
    fn wake_event_loop(&self) {
        self.wake_leader();
    }
    /// Whether an idle pool thread may wait as the *standby* (see [`Lf`]): in the reactor's
    /// second poll set rather than on a condition variable.
    fn supports_standby(&self) -> bool {
        false
    }
    /// Blocks the standby until it is woken (`wake_standby`), while armed until the event
    /// loop has events, and at most for `timeout` (the tick, in tick mode). Spurious returns
    /// are allowed.
    fn wait_standby(&self, _timeout: Option<Duration>) {}
    /// Wakes the standby (it re-checks the pool state).
    fn wake_standby(&self) {}
    /// Arms (`true`) or disarms the standby's watch on the event loop. Called under the
    /// promotion lock, so arming and disarming happen in the order the state says. Returns
    /// false if arming failed (the caller then wakes the standby instead).
    fn arm_standby(&self, _on: bool) -> bool {
        false
    }
    /// Whether work is waiting that no readiness event will announce (frames already read,
    /// requests set aside): a leader that leaves must then wake a successor, not arm one.
    fn has_pending_work(&self) -> bool {
        true
    }
    /// Whether replies may come that no thread waits for in the pool (asynchronous calls
    /// in flight): a caller leaving with its reply then arms the standby, as before tick
    /// mode (see [`Lf::leave_with_reply`]). Read after the vacancy is marked
    /// (`Lf::tick_vacant`, sequentially consistent); whoever starts such a call marks it
    /// the same way and then looks at `tick_vacant` ([`Lf::expect_event`]).
    fn calls_unwatched(&self) -> bool {
        true
    }
    /// Looks at the event loop without waiting: whether events arrived (they stay queued for
    /// the next [`lead`](Self::lead)). Called by an upcall thread while the role may be
    /// vacant; false if someone else is polling (that one sees the events). Events it takes
    /// from the poll must be announced with a leader wake-up: a thread may have taken the
    /// role meanwhile, found nothing queued and be about to wait in the poll, where those
    /// events would raise nothing again.
    fn events_waiting(&self) -> bool {
        false
    }
    /// Makes sure the event loop's alarm goes off by `deadline`, for a follower that waits
    /// for it without a timed wait ([`Lf::wake_timed`] wakes it then): true if it will.
    /// Asked under the promotion lock, after the follower is listed. False (the default):
    /// the follower's wait is timed.
    fn cover_deadline(&self, _deadline: Instant) -> bool {
        false
    }
    /// Counts a promotion.
    fn count_promotion(&self) {}
    /// Counts a follower wake-up.
    fn count_wakeup(&self) {}
    /// Counts a standby that, woken by its tick, took over from a long upcall (tick mode).
    fn count_tick_takeover(&self) {}
    /// Counts a participant that took the role from a promoted thread not yet running.
    fn count_reclaim(&self) {}
}

#[derive(Debug, Default)]
struct State {
    leader: Option<u64>,
    /// LIFO stack of sleeping followers (top = last).
    followers: Vec<Arc<Participant>>,
    /// Followers waiting without a timed wait for a deadline the event loop's alarm covers
    /// (`Driver::cover_deadline`), by id: [`Lf::wake_timed`] wakes them once it passes.
    /// An entry may outlive its wait (the follower promoted meanwhile): it goes when the
    /// follower next looks at the state, or when its deadline is taken.
    timed: Vec<(u64, Instant)>,
    /// The idle pool thread waiting in the reactor's standby poll set, if any.
    standby: Option<u64>,
    /// A thread is inside `Driver::wait_standby` (the standby, or the one just made leader
    /// from it and not yet out).
    in_standby: bool,
    /// The leader (by id) that last handed a reply to a waiting caller (see
    /// `Lf::stand_aside`).
    handed_reply: Option<u64>,
    shutdown: bool,
    /// Tick mode (see [`Lf`]): a leader leaving for an upcall leaves the role vacant without
    /// arming the standby, which looks on a timer instead.
    tick_mode: bool,
    /// The standby is in a timed wait (it went in with tick mode on).
    ticking: bool,
    /// When the role was left vacant unarmed (tick mode), while it still is.
    vacant_since: Option<Instant>,
    /// Unarmed vacancies so far: a standby whose tick saw none stops ticking.
    vacancies: u64,
    /// Arms in a row that no event used (the upcall thread disarmed them itself).
    idle_arms: u32,
    /// The standby was woken to start ticking and has not returned from that wait yet.
    retick_sent: bool,
    /// The leader, when a promotion made it so and it has not yet run to take the role (a
    /// woken follower, or the standby): a participant that finds the role in this state
    /// takes it over (`Lf::run`), rather than sleep while the promoted thread wakes.
    unclaimed: Option<u64>,
    /// Whether `unclaimed` is a pool (unbound) thread.
    unclaimed_unbound: bool,
    /// Pool threads whose unclaimed role a joining participant took over, on their way back
    /// into the pool: idle (`has_idle_unbound`), and each takes a parked request, if one
    /// waits, before it sleeps. A thread leaves this list the next time it looks at the
    /// state in `Lf::run`.
    returning: Vec<u64>,
    /// Bound callers that are sending a request and will then join to wait for its reply
    /// (`Lf::coming`): a callback of their chain that a pool thread reads meanwhile is set
    /// aside for them (`step_down_for`), not run by the pool thread. A caller leaves this
    /// list the first time it looks at the state in `Lf::run`, or in `Lf::not_coming`.
    coming: Vec<Arc<Participant>>,
}

/// Unused arms in a row after which the pool switches to tick mode.
const IDLE_ARMS_FOR_TICK: u32 = 64;

/// In tick mode, the upcall thread looks at the event loop after user code
/// (`user_code_done`) if the user code ran this long or more...
const LOOK_AFTER: Duration = Duration::from_micros(20);

/// ...and otherwise once in this many upcalls. The look only detects requests arriving in
/// parallel; skipping it after short user code spares a system call per upcall (measured:
/// PROFILE.md, 2026-11-26), and a request that arrived meanwhile waited less than
/// `LOOK_AFTER` plus the reply's send, then waits in the poll set for this thread, which
/// serves it next. So the look only decides how soon parallel short requests get the other
/// pool threads too: within 64 short upcalls (about a millisecond). Once in 8, the look's
/// `ppoll` moved the `lat` median by ~1% on a VM with slow system calls (PROFILE.md,
/// 2026-12-07, later).
const LOOK_EVERY: usize = 64;

/// What a leader that read an upcall does with it (`Lf::step_down_for`).
enum StepDown<'a> {
    /// It runs it itself (having passed the role on, if it led).
    RunHere,
    /// It hands it, with the role, to this bound follower of its chain (woken once the
    /// promotion lock is released).
    Hand(MutexGuard<'a, State>, Arc<Participant>),
    /// It sets it aside for a bound caller of its chain on its way to join, and leads on.
    SetAside(MutexGuard<'a, State>),
}

/// Whom a callback goes to (`Lf::hand_to_chain`).
enum ToChain {
    Nobody,
    Follower(Arc<Participant>),
    Coming,
}

/// Whom a promotion must wake once the promotion lock is released.
#[must_use]
enum Wake {
    Nobody,
    Follower(Arc<Participant>),
    Standby,
    /// Nobody to promote, but work waits that no readiness event will announce: the next
    /// thread to lead takes it before it polls, and a driver of `Orb::turn` waiting on the
    /// event loop's fd hears of it from the event loop's own wake-up.
    EventLoop,
}

impl State {
    /// Whether a caller waits in the pool for its reply: a bound follower whose completion
    /// has not come (one just handed its reply, not yet back under this lock to leave the
    /// list, waits for nothing).
    fn callers_waiting(&self) -> bool {
        self.followers
            .iter()
            .any(|f| !f.unbound && !f.is_complete())
    }

    /// Whether an idle pool thread waits to be promoted: the standby or an unbound follower.
    fn has_waiting_unbound(&self) -> bool {
        self.standby.is_some() || self.followers.iter().any(|f| f.unbound)
    }

    /// Whether a pool thread is idle: waiting to be promoted, or on its way back into the
    /// pool after a takeover (it looks for parked requests before it sleeps). Without the
    /// latter, a caller leading while the pool's threads are all on their way back (each
    /// promoted and taken over, on a loaded machine) would run an unrelated upcall itself.
    fn has_idle_unbound(&self) -> bool {
        self.has_waiting_unbound() || !self.returning.is_empty()
    }

    /// The earliest deadline in `timed`, if any.
    fn earliest_timed(&self) -> Option<Instant> {
        self.timed.iter().map(|&(_, d)| d).min()
    }

    fn remove_follower(&mut self, id: u64) {
        if let Some(i) = self.followers.iter().rposition(|f| f.id == id) {
            self.followers.remove(i);
        }
        if !self.timed.is_empty() {
            self.timed.retain(|&(t, _)| t != id);
        }
    }

    /// Gives up leadership: the most recent idle unbound follower becomes leader, else the
    /// most recent follower, else nobody (the next participant to join leads).
    fn promote(&mut self) -> Option<Arc<Participant>> {
        self.leader = None;
        let i = self
            .followers
            .iter()
            .rposition(|f| f.unbound)
            .or_else(|| self.followers.len().checked_sub(1))?;
        let next = self.followers.remove(i);
        self.leader = Some(next.id);
        self.unclaimed = self.leader;
        self.unclaimed_unbound = next.unbound;
        Some(next)
    }

    /// Makes `id` the leader, a participant taking the role itself (vacant or unclaimed,
    /// or promoted and now running): the role is claimed.
    fn claim(&mut self, id: u64) {
        self.leader = Some(id);
        self.unclaimed = None;
    }

    /// `id` takes over the role of a promoted thread that has not run yet (`is_unclaimed`);
    /// a pool thread taken over from counts as idle until it is back (`returning`).
    fn take_over(&mut self, id: u64) {
        if let (Some(from), true) = (self.unclaimed, self.unclaimed_unbound) {
            self.returning.push(from);
        }
        self.claim(id);
    }

    /// The role belongs to a promoted thread that has not run yet: a joining participant
    /// may take it (see `State::unclaimed`).
    fn is_unclaimed(&self) -> bool {
        self.leader.is_some() && self.leader == self.unclaimed
    }
}

fn notify<D: Driver>(w: Wake, driver: &D) {
    match w {
        Wake::Nobody => {}
        Wake::Follower(p) => {
            p.cv.notify_one();
        }
        Wake::Standby => driver.wake_standby(),
        Wake::EventLoop => driver.wake_event_loop(),
    }
}

/// The pool's shared state: the promotion lock and what it protects.
#[derive(Debug)]
pub(crate) struct Lf {
    state: Mutex<State>,
    /// The standby watches the event loop: the leader role is vacant, and the first event
    /// wakes the standby to take it. Changed only under the promotion lock (`arm`,
    /// `disarm`); read without it only as a hint, by `user_code_done`, which runs on every
    /// call and upcall and has nothing to do when nothing is armed.
    armed: AtomicBool,
    /// `State::shutdown`, readable without the promotion lock (the leader asks before
    /// every poll). Set under the lock, after which `shutdown` wakes the leader anyway.
    shut: AtomicBool,
    /// The standby's tick in tick mode; `None`: the standby is always armed (no tick mode).
    tick: Option<Duration>,
    /// `State::vacant_since.is_some()`, readable without the promotion lock (by
    /// `user_code_done`, on every upcall). Changed only under the lock.
    tick_vacant: AtomicBool,
    /// Upcalls since `user_code_done` last looked at the event loop in tick mode, modulo
    /// [`LOOK_EVERY`]: it looks when this is 0. A hint (a lost update only moves a look).
    unlooked: AtomicUsize,
}

impl Lf {
    /// A pool without tick mode (the tests' pool).
    #[cfg(test)]
    pub(crate) fn new() -> Self {
        Self::with_tick(None)
    }

    /// A pool whose standby may switch to tick mode with this tick (`None`: never).
    pub(crate) fn with_tick(tick: Option<Duration>) -> Self {
        Lf {
            state: Mutex::new(State::default()),
            armed: AtomicBool::new(false),
            shut: AtomicBool::new(false),
            tick: tick.filter(|t| !t.is_zero()),
            tick_vacant: AtomicBool::new(false),
            unlooked: AtomicUsize::new(0),
        }
    }

    /// Takes part in the pool until `p` completes (bound), the deadline passes, or shutdown.
    pub(crate) fn run<D: Driver>(
        &self,
        p: &Arc<Participant>,
        deadline: Option<Instant>,
        driver: &D,
    ) -> Exit {
        self.run_from(p, deadline, None, driver)
    }

    /// [`run`](Self::run), with `clock`, if given, a reading the caller took microseconds
    /// ago (before a send, say) standing for the clock at the first deadline check: a clock
    /// read fewer per call. The checks after a wait read the clock.
    pub(crate) fn run_from<D: Driver>(
        &self,
        p: &Arc<Participant>,
        deadline: Option<Instant>,
        mut clock: Option<Instant>,
        driver: &D,
    ) -> Exit {
        // A reading left before the thread came (from the application) is not taken here.
        crate::clock::forget_left();
        // This thread's last standby wait was a whole tick without an unarmed vacancy: the
        // pool is idle, so its next one has no timeout (an idle ORB does not tick).
        let mut quiet = false;
        // This (pool) thread has just handed the role, with a callback, to the caller of its
        // chain (`step_down_for`).
        let mut handed = false;
        loop {
            let mut retick = false;
            // The last deadline check's reading, for the turn as leader that follows it.
            let mut until = None;
            {
                let mut st = lock(&self.state);
                loop {
                    // Only its first look at the state after the hand-over.
                    let just_handed = std::mem::take(&mut handed);
                    st.remove_follower(p.id);
                    if !st.returning.is_empty() {
                        st.returning.retain(|&id| id != p.id);
                    }
                    if !st.coming.is_empty() {
                        st.coming.retain(|c| c.id != p.id);
                    }
                    let leading = st.leader == Some(p.id);
                    if leading {
                        st.claim(p.id);
                    }
                    let exit = if !p.unbound && p.is_complete() {
                        Some(Exit::Completed)
                    } else if st.shutdown {
                        Some(Exit::Shutdown)
                    } else if deadline.is_some_and(|d| {
                        let u = match clock.take() {
                            Some(now) => Until { deadline: d, now },
                            None => Until::from_now(d),
                        };
                        until = Some(u);
                        u.now >= d
                    }) {
                        Some(Exit::TimedOut)
                    } else {
                        None
                    };
                    if let Some(exit) = exit {
                        // A request of its chain may have been handed to it with the role,
                        // or set aside for it while it was coming (`step_down_for`): it goes
                        // to the pool instead.
                        let released =
                            !p.unbound && p.chain() != 0 && driver.release_addressed(p.chain());
                        // A vacant role is passed on too: this thread may have left it
                        // for an upcall (disarming the standby once done, expecting to
                        // take it back) and now exits without leading.
                        let next = if leading
                            && matches!(exit, Exit::Completed)
                            && self.serving_upcall()
                        {
                            // Back to user code of an upcall this pool runs, which ends
                            // in `user_code_done` and a reply, and then this thread leads
                            // again: the same as leaving for that upcall (in tick mode, no
                            // system call; `nest` unwinding, PROFILE.md).
                            self.promote_for_upcall(&mut st, driver)
                        } else if leading || st.leader.is_none() {
                            self.promote_locked(&mut st, driver, true)
                        } else {
                            Wake::Nobody
                        };
                        // Set aside while it was coming, with another thread leading
                        // (maybe asleep in its poll): that one takes the request on its
                        // next turn, which the wake-up starts.
                        let other_leads = released && !leading && st.leader.is_some();
                        drop(st);
                        notify(next, driver);
                        if other_leads {
                            driver.wake_leader();
                        }
                        return exit;
                    }
                    if leading {
                        break;
                    }
                    if st.leader.is_none()
                        && just_handed
                        && driver.supports_standby()
                        && !st.in_standby
                        && !st.shutdown
                        && !driver.has_pending_work()
                        && self.arm(&mut st, driver)
                    {
                        // Left vacant by the caller this thread handed a callback to, for
                        // that callback's user code: the caller leads again once it is done.
                        // Taking the role here would make this thread the chain's leader and
                        // the caller its follower, to be handed the next callback too (a
                        // wake-up per level); it waits as the armed standby instead, as if
                        // the caller had armed it. Not with work pending that no event will
                        // announce (the callback itself, passed back by a caller that left
                        // the pool first): then it takes the role, as below.
                        st = self.wait_armed_standby(st, p, driver);
                        continue;
                    }
                    if st.leader.is_none() {
                        // Back before the standby was needed: it sleeps on.
                        self.disarm(&mut st, driver);
                        st.claim(p.id);
                        self.clear_vacancy(&mut st);
                        retick = self.retick(&mut st);
                        break;
                    }
                    if st.is_unclaimed() {
                        // The thread promoted when this one left for its upcall has not run
                        // yet (waking a thread on another, idle CPU can take milliseconds
                        // on a VM): lead now instead of sleeping until it does. It finds
                        // the role taken when it runs, and waits again.
                        st.take_over(p.id);
                        driver.count_reclaim();
                        break;
                    }
                    if p.unbound {
                        // Before sleeping, a pool thread takes a request that a waiting
                        // leader set aside for it (it would not be woken for it otherwise).
                        // Asked under the promotion lock it sleeps under: a leader parks
                        // first and then looks for an idle pool thread under that lock, so
                        // either this thread sees the request or the leader sees this
                        // thread (a follower or the standby, or still `returning`).
                        if driver.has_parked() {
                            drop(st);
                            if let Some(u) = driver.take_parked() {
                                self.run_upcall(driver, u);
                            }
                            st = lock(&self.state);
                            continue;
                        }
                        // Only one thread at a time waits in the standby poll set: its
                        // wake-up is not addressed to a thread, so a second one could
                        // swallow the wake-up meant for the first (which was made leader
                        // but is still on its way out).
                        if driver.supports_standby() && !st.in_standby {
                            st.in_standby = true;
                            let mut reticked = false;
                            let registered = loop {
                                st.standby = Some(p.id);
                                let tick = self.tick.filter(|_| st.tick_mode && !quiet);
                                st.ticking = tick.is_some();
                                let seen = st.vacancies;
                                drop(st);
                                crate::clock::forget_left();
                                driver.wait_standby(tick);
                                st = lock(&self.state);
                                st.ticking = false;
                                reticked |= std::mem::take(&mut st.retick_sent);
                                // Registered only while in the poll set: a standby that
                                // stayed registered on its way back to user code could be
                                // armed, or made leader, while no event can reach it (a
                                // nested call it makes would then sleep as a follower of
                                // itself). Still registered means not promoted: `standby`
                                // is this thread's.
                                let registered = st.standby.take().is_some();
                                quiet = registered && tick.is_some() && st.vacancies == seen;
                                if registered && tick.is_some() && self.young_vacancy(&st) {
                                    // Its tick found a short upcall under way: its thread
                                    // comes back to lead in a moment. Swapping roles with it
                                    // would cost two more context switches; wait again.
                                    quiet = false;
                                    continue;
                                }
                                break registered;
                            };
                            st.in_standby = false;
                            if registered && st.leader.is_none() {
                                // Woken with the role vacant: by an event (armed), or by its
                                // tick finding a long upcall (tick mode), or by a retick that
                                // met the next (armed) upcall. It takes the role; a retick
                                // says nothing about the upcalls, so tick mode stays.
                                if reticked {
                                    self.clear_vacancy(&mut st);
                                } else {
                                    self.woken_vacant(&mut st, driver);
                                }
                                driver.count_promotion();
                            }
                            continue;
                        }
                    }
                    if !p.unbound && p.chain() != 0 {
                        // A callback of this thread's chain that a pool thread read while
                        // this thread was on its way here (`coming`), set aside for it: it
                        // runs it now, as a leader would (the pool thread leads on), rather
                        // than sleep. Asked under the promotion lock the pool thread sets it
                        // aside under, so either this finds it or the pool thread finds this
                        // thread among the followers and hands it over (`hand_to_chain`).
                        if let Some(u) = driver.take_addressed(p.chain()) {
                            drop(st);
                            self.run_upcall(driver, u);
                            st = lock(&self.state);
                            continue;
                        }
                    }
                    st.followers.push(p.clone());
                    // Listed first, then covered: an alarm that goes off meanwhile finds
                    // the entry when it takes the promotion lock (`wake_timed`).
                    let timed_wait = deadline.filter(|&d| {
                        st.timed.push((p.id, d));
                        let covered = driver.cover_deadline(d);
                        if !covered {
                            st.timed.pop();
                        }
                        !covered
                    });
                    crate::clock::forget_left();
                    st = match timed_wait {
                        None => crate::sync::wait(&p.cv, st),
                        Some(d) => {
                            let left = d.saturating_duration_since(Instant::now());
                            crate::sync::wait_timeout(&p.cv, st, left).0
                        }
                    };
                }
            }
            if retick {
                driver.wake_standby();
            }
            let lead = driver.lead(p, until);
            handed = self.follow(p, lead, driver);
        }
    }

    /// What a participant does with its turn as leader ([`Driver::lead`]'s answer, or what
    /// a caller that read a frame for itself found instead of its reply:
    /// `OrbInner::read_own_reply`): runs the upcall it read, or hands it with the role to
    /// the thread of the call chain it belongs to, or steps down for the pool thread that
    /// takes a parked request. True if it handed an upcall over with the role (see
    /// [`step_down_for`](Self::step_down_for)).
    // Inlined into `run_from`, where it was written out before: called, it would move the
    // whole upcall into its argument.
    #[inline(always)]
    pub(crate) fn follow<D: Driver>(
        &self,
        p: &Arc<Participant>,
        lead: Lead<D::Upcall>,
        driver: &D,
    ) -> bool {
        match lead {
            Lead::Idle => {
                if p.unbound {
                    self.stand_aside(p, driver);
                }
                false
            }
            Lead::Served => false,
            Lead::Upcall(u) => match self.step_down_for(p, &u, driver) {
                StepDown::RunHere => {
                    self.run_upcall(driver, u);
                    false
                }
                StepDown::Hand(st, next) => {
                    // Set aside before the promotion lock is released: the follower
                    // made leader looks for it as soon as it runs.
                    driver.address_upcall(u);
                    drop(st);
                    notify(Wake::Follower(next), driver);
                    true
                }
                StepDown::SetAside(st) => {
                    // For the caller of its chain, on its way to join (`coming`): it
                    // takes the callback when it does. This thread leads on.
                    driver.address_upcall(u);
                    drop(st);
                    false
                }
            },
            Lead::StepDown => {
                // Only to a thread waiting to be promoted: one on its way back takes the
                // parked request itself.
                let mut st = lock(&self.state);
                let next = if st.leader == Some(p.id) && st.has_waiting_unbound() {
                    self.promote_locked(&mut st, driver, false)
                } else {
                    Wake::Nobody
                };
                drop(st);
                notify(next, driver);
                false
            }
        }
    }

    /// Gives up the leader role. With `lazy` and nothing pending that no event would
    /// announce, an idle standby is armed instead of woken: it sleeps on unless an event
    /// arrives before a participant takes the role back (the common case of a short upcall,
    /// which then costs no wake-up and no context switch). Otherwise the standby, else the
    /// top idle pool thread, else the top follower is made leader; the caller wakes it once
    /// the promotion lock is released (notifying under the lock would wake it only to block
    /// on that lock again).
    fn promote_locked<D: Driver>(&self, st: &mut State, driver: &D, lazy: bool) -> Wake {
        debug_assert!(
            st.standby.is_none() || st.standby != st.leader,
            "the leader is registered as the standby"
        );
        st.leader = None;
        if st.standby.is_some() {
            if lazy && !driver.has_pending_work() && self.arm(st, driver) {
                return Wake::Nobody;
            }
            self.disarm(st, driver);
            self.clear_vacancy(st);
            st.leader = st.standby.take();
            st.unclaimed = st.leader;
            st.unclaimed_unbound = true;
            driver.count_promotion();
            return Wake::Standby;
        }
        self.clear_vacancy(st);
        match st.promote() {
            Some(next) => {
                driver.count_promotion();
                Wake::Follower(next)
            }
            // A bound leader that leaves with its reply may leave frames of others on the
            // ready list; with no thread to take over, a driver (`Orb::turn`) that found the
            // role taken a moment ago must hear of them.
            None if driver.has_pending_work() => Wake::EventLoop,
            None => Wake::Nobody,
        }
    }

    /// Takes the leader role for `p` if it is vacant or unclaimed (a promoted thread has not
    /// run yet: see `run`), without waiting (an event-loop driver's turn: `Orb::turn`):
    /// false if another participant leads or the pool is shut down. As a joining
    /// participant that finds the role vacant, it disarms the standby.
    pub(crate) fn try_lead<D: Driver>(&self, p: &Participant, driver: &D) -> bool {
        let retick = {
            let mut st = lock(&self.state);
            if st.shutdown {
                return false;
            }
            if st.is_unclaimed() {
                // Disarmed and not vacant since the promotion: only the role changes hands.
                st.take_over(p.id);
                driver.count_reclaim();
                return true;
            }
            if st.leader.is_some() {
                return false;
            }
            self.disarm(&mut st, driver);
            st.claim(p.id);
            self.clear_vacancy(&mut st);
            self.retick(&mut st)
        };
        if retick {
            driver.wake_standby();
        }
        true
    }

    /// Gives up the role taken with [`try_lead`](Self::try_lead): before an upcall
    /// (`for_upcall`), as a leader leaving for one does; or for good, passing on a vacant
    /// role too (this thread may have left it vacant for an upcall). The successor is the
    /// standby (armed, if nothing is pending), a follower, or nobody (then the next
    /// participant, or the next turn, takes it).
    pub(crate) fn leave<D: Driver>(&self, p: &Participant, driver: &D, for_upcall: bool) {
        let next = {
            let mut st = lock(&self.state);
            if st.leader == Some(p.id) {
                if for_upcall {
                    self.promote_for_upcall(&mut st, driver)
                } else {
                    self.promote_locked(&mut st, driver, true)
                }
            } else if st.leader.is_none() && !for_upcall && !st.shutdown {
                self.promote_locked(&mut st, driver, true)
            } else {
                Wake::Nobody
            }
        };
        notify(next, driver);
    }

    /// [`leave`](Self::leave) for good by a caller that has just read its own reply
    /// (`OrbInner::read_own_reply`: an ORB that does not listen). In tick mode, under the
    /// same conditions as a leader leaving for an upcall and with no asynchronous call in
    /// flight, the role is left vacant unarmed: the caller of a request-reply loop is back
    /// within microseconds and takes it again (disarming an armed standby and arming it
    /// again were two system calls per call). If it does not come back, the standby's tick
    /// takes over, as from a long upcall: nothing waits longer than about a tick, once.
    pub(crate) fn leave_with_reply<D: Driver>(&self, p: &Participant, driver: &D) {
        let next = {
            let mut st = lock(&self.state);
            if st.leader != Some(p.id) {
                drop(st);
                return self.leave(p, driver, false);
            }
            self.promote_for_caller(&mut st, driver)
        };
        notify(next, driver);
    }

    /// Gives up leadership (if `p` holds it) before running `u`.
    ///
    /// One exception: a pool thread leading with nobody to hand the role to but bound
    /// followers, one of which waits in `u`'s call chain (`u` is a callback of that
    /// thread's call), gives `u` and the role to that thread instead: it returns the
    /// promotion lock and that follower, already made leader, for the caller to set `u`
    /// aside for it ([`Driver::address_upcall`]), release the lock and wake it. Otherwise it
    /// would promote the follower to lead and run `u` itself, and the nested call `u` makes
    /// would bind it too: from then on every level of the chain would wake the other thread
    /// (`nest`'s two-thread mode, PROFILE.md 2026-11-27). This way the callback runs on the
    /// thread that made the call, which leads its chain on, and the pool thread stays free.
    /// The follower is made leader with the role claimed for it, not left unclaimed (a
    /// joining thread taking it over would strand `u`); if it leaves the pool before it
    /// leads (its reply came, its deadline passed), it passes `u` to the pool threads
    /// (`Driver::release_addressed`).
    fn step_down_for<'a, D: Driver>(
        &'a self,
        p: &Participant,
        u: &D::Upcall,
        driver: &D,
    ) -> StepDown<'a> {
        let mut st = lock(&self.state);
        if st.leader != Some(p.id) {
            return StepDown::RunHere;
        }
        if p.unbound && !st.shutdown && !st.has_waiting_unbound() {
            match self.hand_to_chain(&mut st, u, driver) {
                ToChain::Nobody => {}
                ToChain::Follower(next) => return StepDown::Hand(st, next),
                ToChain::Coming => return StepDown::SetAside(st),
            }
        }
        let next = self.promote_for_upcall(&mut st, driver);
        drop(st);
        notify(next, driver);
        StepDown::RunHere
    }

    /// [`step_down_for`](Self::step_down_for)'s hand-over, under the promotion lock: the
    /// bound follower waiting in `u`'s call chain, made leader, if there is one; else
    /// whether a bound caller of that chain is on its way to join (`State::coming`). Out
    /// of line: only a pool thread leading with nobody but bound followers to promote gets
    /// here.
    #[cold]
    #[inline(never)]
    fn hand_to_chain<D: Driver>(&self, st: &mut State, u: &D::Upcall, driver: &D) -> ToChain {
        let Some(chain) = driver.upcall_chain(u).filter(|&c| c != 0) else {
            return ToChain::Nobody;
        };
        if let Some(i) = st
            .followers
            .iter()
            .rposition(|f| !f.unbound && f.chain() == chain)
        {
            let next = st.followers.remove(i);
            st.claim(next.id);
            self.clear_vacancy(st);
            driver.count_promotion();
            return ToChain::Follower(next);
        }
        if st.coming.iter().any(|c| c.chain() == chain) {
            return ToChain::Coming;
        }
        ToChain::Nobody
    }

    /// A bound caller about to send a request and then wait for its reply (`Lf::run`)
    /// announces itself, so that a callback of its chain read by a pool thread before it
    /// joins is set aside for it rather than run on the pool thread (which would then be
    /// bound in the chain too, and every level of it would wake the other thread: `nest`'s
    /// two-thread mode, PROFILE.md). Only worth a lock in a process that can be called
    /// back. A caller that then does not join calls [`not_coming`](Self::not_coming).
    pub(crate) fn coming(&self, p: Arc<Participant>) {
        lock(&self.state).coming.push(p);
    }

    /// Undoes [`coming`](Self::coming) for a caller (participant `id` of call chain
    /// `chain`) that will not join (its send failed): a callback set aside for its chain
    /// goes to the pool threads, and the leader is woken to see it.
    pub(crate) fn not_coming<D: Driver>(&self, id: u64, chain: u64, driver: &D) {
        let mut st = lock(&self.state);
        let before = st.coming.len();
        st.coming.retain(|c| c.id != id);
        if st.coming.len() == before {
            return;
        }
        if chain != 0 && driver.release_addressed(chain) {
            // The leader (maybe asleep in its poll) takes it on its next turn; with the role
            // vacant, whoever leads next does.
            drop(st);
            driver.wake_leader();
            driver.wake_event_loop();
        }
    }

    /// Runs an upcall this thread took as a participant of this pool, noting that it does
    /// (see [`serving_upcall`](Self::serving_upcall)).
    fn run_upcall<D: Driver>(&self, driver: &D, u: D::Upcall) {
        struct Restore(usize);
        impl Drop for Restore {
            fn drop(&mut self) {
                SERVING.with(|s| s.set(self.0));
            }
        }
        let _restore = Restore(SERVING.with(|s| s.replace(self as *const Lf as usize)));
        driver.run_upcall(u);
    }

    /// A pool thread leading with the upcall `u` it read, where the pool leaves the role
    /// vacant unarmed for it (tick mode: the standby ticking, nothing pending, no caller
    /// waiting): leaves the role so, runs `u` on this thread, and takes the role back, as
    /// [`follow`](Self::follow) (`step_down_for`, `promote_for_upcall`) and then `run_from`'s
    /// next look at the state would, without the way through them, so that the driver's turn
    /// goes on reading the connection it owns (a server answering one client's requests one
    /// after another: about 120 instructions and 26 lines of hot code fewer a `lat` call on
    /// the server, PROFILE.md 2026-12-08). `Err(u)`, with nothing done, where that is not the
    /// case: the upcall goes the general way ([`Lead::Upcall`]). `Ok(true)`: it ran, and this
    /// thread leads again; `Ok(false)`: it ran, and the role is another's or the pool shuts
    /// down ([`Lead::Served`]: `run_from` looks at the state as after any upcall).
    pub(crate) fn serve_and_lead_on<D: Driver>(
        &self,
        p: &Participant,
        u: D::Upcall,
        driver: &D,
    ) -> Result<bool, D::Upcall> {
        {
            let mut st = lock(&self.state);
            // `step_down_for`, then `promote_for_upcall`'s unarmed vacancy. That vacancy needs
            // the standby, an idle pool thread, so `step_down_for` would hand nothing to the
            // thread of a call chain.
            if !p.unbound
                || st.leader != Some(p.id)
                || st.shutdown
                || !self.vacate_unarmed(&mut st, driver, false)
            {
                return Err(u);
            }
        }
        self.run_upcall(driver, u);
        // `run_from`'s look after an upcall that left the role vacant: a pool thread has no
        // reply to exit with and no deadline, and is in no list.
        let mut st = lock(&self.state);
        if st.shutdown || st.leader.is_some() {
            return Ok(false);
        }
        self.disarm(&mut st, driver);
        st.claim(p.id);
        self.clear_vacancy(&mut st);
        let retick = self.retick(&mut st);
        drop(st);
        if retick {
            driver.wake_standby();
        }
        Ok(true)
    }

    /// Whether the innermost upcall this thread runs from [`run`](Self::run) is this pool's:
    /// the thread then comes back to this pool once that upcall has replied. Under loom,
    /// always false (its threads share the process's thread-locals).
    fn serving_upcall(&self) -> bool {
        !cfg!(orb_loom) && SERVING.with(|s| s.get()) == self as *const Lf as usize
    }

    /// Hands a completion to a bound participant and wakes it: its condition variable if it
    /// sleeps as a follower, the reactor if it is the leader (unless `by` is that leader).
    /// `by` is the participant that holds the leader role and hands the completion over (the
    /// leader routing a reply it read), `None` for anyone else (a connection failure, a
    /// collocated reply).
    pub(crate) fn complete<D: Driver>(
        &self,
        q: &Participant,
        c: Completion,
        by: Option<u64>,
        driver: &D,
    ) {
        {
            let mut slot = lock(&q.slot);
            if slot.is_some() {
                return; // first completion wins (a reply racing a connection failure)
            }
            *slot = Some(c);
            q.done.store(true, Ordering::Release);
        }
        if by == Some(q.id) {
            // The leader hands itself its own reply (a caller that leads, the common case
            // of one call at a time): it is not asleep, and a leader's own reply is not
            // a reply handed to another (`handed_reply`). Nothing else to do, so no
            // promotion lock (`lat`: one lock and unlock fewer per call).
            return;
        }
        let mut st = lock(&self.state);
        let leading = st.leader == Some(q.id);
        let following = !leading && st.followers.iter().any(|f| f.id == q.id);
        if by.is_some() && by == st.leader && !leading {
            st.handed_reply = by;
        }
        drop(st);
        // Woken outside the promotion lock: the waiter re-checks its slot under the lock, and
        // it either already waits (and gets this notification) or has not yet looked.
        if leading {
            if by != Some(q.id) {
                driver.wake_leader();
            }
        } else if following {
            driver.count_wakeup();
            q.cv.notify_one();
        }
    }

    /// Whether an idle unbound participant is waiting (a candidate for parked requests).
    pub(crate) fn has_idle_unbound(&self) -> bool {
        lock(&self.state).has_idle_unbound()
    }

    /// Wakes the followers waiting untimed for deadlines that have passed at `now` (the
    /// event loop's alarm went off: `Driver::cover_deadline`); they see their deadline and
    /// return [`Exit::TimedOut`]. Returns the earliest deadline still waited for, for the
    /// alarm.
    pub(crate) fn wake_timed(&self, now: Instant) -> Option<Instant> {
        let mut due = Vec::new();
        let next = {
            let mut st = lock(&self.state);
            if st.timed.is_empty() {
                return None;
            }
            let State {
                timed, followers, ..
            } = &mut *st;
            timed.retain(|&(id, d)| {
                if d > now {
                    return true;
                }
                // Off the stack before it is signalled, as a promoted follower is, so that
                // a leader does not promote it meanwhile. Not listed any more: promoted, it
                // looks at its deadline as it leads.
                if let Some(i) = followers.iter().position(|f| f.id == id) {
                    due.push(followers.remove(i));
                }
                false
            });
            st.earliest_timed()
        };
        for f in due {
            f.cv.notify_one();
        }
        next
    }

    /// The earliest deadline a follower waits for untimed ([`wake_timed`](Self::wake_timed)),
    /// if any: the event loop's alarm must go off by then.
    pub(crate) fn earliest_timed(&self) -> Option<Instant> {
        lock(&self.state).earliest_timed()
    }

    /// Ends the pool: every participant returns `Exit::Shutdown` (bound ones once woken).
    pub(crate) fn shutdown<D: Driver>(&self, driver: &D) {
        let st = {
            let mut st = lock(&self.state);
            st.shutdown = true;
            self.shut.store(true, Ordering::Release);
            st.timed.clear();
            std::mem::take(&mut st.followers)
        };
        for f in st {
            f.cv.notify_one();
        }
        driver.wake_standby();
        driver.wake_leader();
    }

    /// Whether `shutdown` was called.
    pub(crate) fn is_shutdown(&self) -> bool {
        self.shut.load(Ordering::Acquire)
    }
}

#[cfg(all(test, not(orb_loom)))]
mod tests;

#[cfg(all(test, orb_loom))]
#[path = "loom.rs"]
mod loom_tests;
