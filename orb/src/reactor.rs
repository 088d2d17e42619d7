//! The ORB's one event loop: a `mio::Poll` holding every listener, every connection's socket
//! and a waker, with tokens from a `slab`.
//!
//! Split as tokio's I/O driver is: the `Poll` and its `Events` buffer sit behind a mutex that
//! only the Leader/Followers leader takes (so it is never contended); the `Registry`, the
//! `Waker`, the token table and the ready list are shared, so any thread can register a new
//! connection or wake the leader.
//!
//! A token is a slab index plus a generation (`gen << 32 | index`), so a stale event for a slot
//! that was freed and reused is recognised and ignored.
//!
//! The standby is an idle pool thread that waits in a second, tiny poll set holding only the
//! main poll's own fd (armed or not) and a waker. While the leader runs a short upcall, the
//! standby is armed instead of promoted: the kernel wakes it only if an event arrives before
//! the leader comes back (Leader/Followers promotes before every upcall; this makes that
//! promotion free when nothing happens in the meantime, which is what a latency-bound
//! request-reply exchange looks like). In the pool's tick mode the standby is not armed but
//! waits with a timeout, and the upcall thread looks once with [`Reactor::poll_now`] whether
//! anything arrived while its user code ran (see `lf`).
//!
//! The ready list holds entries that may have more to give without a new readiness event:
//! decoded frames not yet handled, or unread socket bytes (mio is edge-triggered; we stop
//! reading at a budget). The leader serves it before polling.
//!
//! The alarm is a timerfd in both poll sets, armed for the ORB's nearest timer (an
//! asynchronous call's deadline, the idle sweep): whoever waits in either set (the leader,
//! the standby, or an async runtime waiting on the event fd) is woken when a timer is due,
//! without counting itself among the timers' watchers or computing a timeout for them. It is
//! only ever moved earlier: a deadline removed leaves it armed, and it then fires once for
//! nothing and is re-armed for what is left. So a stream of calls with the same timeout
//! costs one `timerfd_settime` per timeout period, not one per call.
//!
//! The reactor knows readiness, not connections: it is generic over the entry `E` the ORB
//! registers for a stream (`Arc<Connection>` in production, anything `Clone` in the tests), and
//! hands it back with each event. It owns the listeners itself (it accepts nothing, but
//! registers and drops them). Who owns what:
//!
//! | state | owner | protected by | who touches it |
//! |---|---|---|---|
//! | `Poll` and its `Events` | [`Reactor`] | `poll`'s mutex | the leader (its wait), an upcall thread's `poll_now` (try-lock only) |
//! | `Registry`, `Waker` | [`Reactor`] | nothing (thread-safe) | any thread registering a stream or waking the leader |
//! | token → entry (`slots`) | [`Reactor`] | `slots`' mutex | `insert` and `remove` (any thread), event resolution (the leader) |
//! | the ready list | [`Reactor`] | [`Queue`]'s own lock | pushed by the leader or by a thread that wakes it next; popped by the leader |
//! | the standby's poll set | `Standby` | its mutex | the one standby thread; armed by the leader |
//! | the alarm's armed time | `Alarm` | its mutex (a lock-free read first) | any thread setting a timer; reset by whoever polls its expiry |
//! | when a run of owned reads must end (`MainPoll`'s third part) | [`Reactor`] | the poll lock | the leader |
//! | the socket parked for a run of owned reads (`Parking`) | [`Reactor`] | its own mutex (a leaf: nothing is locked under it) | parked by the owner (holding the poll lock); put back by any poll, the standby's arming, a writer that needs the writable event; forgotten by `deregister` |
//!
//! **Owned reads.** Instead of polling, the leader may wait in one connection's `recv`
//! ([`try_own`](Reactor::try_own), the rules in `server/leader.rs`): only while that
//! connection is the only one registered, and holding the poll lock meanwhile, so that it is
//! the one poller (an upcall thread's `poll_now` then sees someone polling). Other sources (a
//! listener's new connections, the waker, the alarm, a connection registered meanwhile) are
//! not heard during such a wait: a run of owned reads ends with a look at the poll set (a
//! poll without waiting) once it has lasted [`OWNED_RUN`], so they wait at most that plus
//! one wait's receive timeout. The look leaves the owned socket parked (below); if it finds
//! nothing, the next run starts at once.
//!
//! **Parking.** A socket in an epoll set costs every segment that arrives on it the kernel's
//! callback into that set (a lock and a ready-list check, ~0.1 µs a message on each side of
//! a call: PROFILE.md), which an owned read does not need: it reads the socket itself. So the
//! owner takes its connection out of the main poll set for its run ([`Reactor::park`]), and
//! whoever needs the set to report that connection again puts it back first: any poll of
//! the set but the look that ends a run (the owner reads the socket next) and the upcall
//! thread's look at the loop (tick mode's [`poll_now`](Reactor::poll_now), which asks the
//! socket and the set together with one `poll(2)`), the standby's arming (it watches the set
//! for the vacant role), and a writer that needs the writable event (the owner takes a
//! socket out only while no writable event is wanted: nothing queued, no drain watched).
//! Putting back is an
//! `EPOLL_CTL_ADD`, which looks at the socket's readiness: bytes that arrived meanwhile are
//! reported as a fresh event, so nothing is missed. A parked socket is heard by nobody but
//! its owner: while the owner runs an upcall with the role left vacant unarmed (tick mode),
//! its next request waits for the owner, or for the standby's tick, the bound tick mode keeps
//! for every event anyway.
//!
//! **Unpolled turns.** A driver of `Orb::turn` (`protorb::tokio`) is woken by its runtime's
//! own poll, in which the main set's fd is one source: polling the main set then, to learn
//! what is ready, is a second `epoll_wait` for one event. When the set holds one
//! connection and nothing else can be ready in it, the turn reads that connection instead
//! ([`sole_unpolled`](Reactor::sole_unpolled)); the read finds the bytes, or finds none and
//! the turn polls after all. The other sources each leave a mark in memory that the turn
//! looks at first, set before their event: the ready list (a connection registered, a read
//! resumed, work left by a leaving leader), the slot table's change count (a listener or a
//! second connection), the parked upcalls and the pool's shutdown (`server/turn.rs`
//! looks at those), the timers and the alarm's armed time, a connection's queued bytes
//! (its writable event), and, besides, a wake-up asked since the last poll. An event a
//! turn leaves in the set is not lost: the driver's runtime reported the set's fd before
//! the turn and reports it again for any event after; and the next poll takes it (a stale
//! readable event costs one read that finds nothing). The connection stays in the set, so
//! that the runtime hears it.

use crate::sync::plain::{Mutex, MutexGuard};
use crate::sync::plain_lock as lock;
use crate::sync::Queue;
use mio::net::TcpListener;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Registry, Token, Waker};
use rustix::event::epoll;
use slab::Slab;
use std::io;
use std::os::fd::AsRawFd;
use std::os::fd::OwnedFd;
use std::os::fd::RawFd;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a run of owned reads may go without a look at the poll set (see the module
/// docs).
pub(crate) const OWNED_RUN: Duration = Duration::from_millis(1);

/// The waker's token (never a slab index).
pub(crate) const WAKER: Token = Token(usize::MAX);

/// The alarm's token, in both poll sets (never a slab index: its index half is not one).
const ALARM: Token = Token(usize::MAX - 1);

/// The main poll set's token in the standby's poll set.
const MAIN: Token = Token(0);

/// What a token refers to.
#[derive(Debug, Clone)]
pub(crate) enum Entry<E> {
    /// A listener the reactor registered ([`Reactor::add_listener`]).
    Listener(Arc<TcpListener>),
    /// A stream the ORB registered, as the ORB's own entry for it (its connection).
    Conn(E),
}

#[derive(Debug)]
struct Slot<E> {
    gen: u32,
    entry: Entry<E>,
}

/// What one [`Reactor::poll`] saw.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Polled {
    /// Events handed to the handler (wake-ups and the alarm not counted).
    pub(crate) events: usize,
    /// The alarm fired: a timer is due, and the alarm needs re-arming.
    pub(crate) alarm: bool,
}

/// The main poll set and its events buffer, with what owned reads keep (the leader's, under
/// the poll lock; see [`Reactor::try_own`]).
#[derive(Debug)]
struct MainPoll<E> {
    poll: Poll,
    events: Events,
    /// When the current run of owned reads must end with a look (`None`: no owned read since
    /// the last poll).
    owned_until: Option<Instant>,
    /// The one connection registered, if exactly one is and it may be owned, as of the slot
    /// table's change count (`Reactor::slots_changed`) given with it: looked up again only
    /// when that moved.
    sole: Option<(u64, Option<E>)>,
    /// The one connection registered, if exactly one is and no listener, as of the slot
    /// table's change count: for [`sole_unpolled`](Reactor::sole_unpolled).
    unpolled_sole: Option<(u64, Option<E>)>,
}

/// What [`Reactor::try_own`] answers.
pub(crate) enum Own<'a, E> {
    /// The leader may wait in this connection's `recv`, holding the poll lock.
    Yes(Owning<'a, E>, E),
    /// It may not: it polls.
    No,
    /// A run of owned reads was over, and the look that ends it found events (handed to
    /// the caller's `look`), the alarm or a wake-up: the caller goes on as after a poll.
    Looked(Polled),
}

/// The leader's permission to wait in the `recv` of the connection [`Reactor::try_own`]
/// returns with it instead of polling: it holds the poll lock, so no one polls meanwhile.
pub(crate) struct Owning<'a, E> {
    _poll: MutexGuard<'a, MainPoll<E>>,
}

/// A socket taken out of the main poll set for a run of owned reads ([`Reactor::park`]).
#[derive(Debug)]
struct Parked<E> {
    /// Its entry, which keeps the socket open: `fd` names it until it is put back or
    /// forgotten ([`Reactor::deregister`]).
    _entry: E,
    fd: RawFd,
    token: usize,
}

/// What parking keeps, under a lock of its own: never the poll lock, which an owner holds
/// through its wait, so that a writer or the standby's arming never waits for a `recv`.
#[derive(Debug)]
struct Parking<E> {
    parked: Option<Parked<E>>,
    /// The standby is armed: it watches the main poll set for the vacant role, so no socket
    /// may leave it.
    armed: bool,
}

/// [`Parked::token`] of the parked socket in [`Reactor::parked_token`] when none is.
const NOT_PARKED: usize = usize::MAX;

/// One readiness event, resolved to its entry.
#[derive(Debug)]
pub(crate) struct Ready<E> {
    pub(crate) entry: Entry<E>,
    pub(crate) readable: bool,
    pub(crate) writable: bool,
    pub(crate) read_closed: bool,
}

/// The event loop's shared parts, with entries of type `E`.
///
/// Invariants:
/// - A token is `gen << 32 | index`: the slab index of its slot and the generation the slot
///   got when it was filled (a counter bumped on every insert). An event or a
///   [`remove`](Self::remove) whose token's generation is not the slot's is stale and is
///   ignored, so an event for a freed slot never reaches the entry that reused it.
/// - Only the holder of `poll`'s lock waits in it or reads its `Events`; everything else
///   here is usable from any thread.
/// - The ready list holds entries, not tokens: an entry removed from the slab may still be on
///   it, and whoever pops it checks whether it is still open.
#[derive(Debug)]
pub(crate) struct Reactor<E> {
    poll: Mutex<MainPoll<E>>,
    registry: Registry,
    waker: Waker,
    slots: Mutex<(Slab<Slot<E>>, u32)>,
    /// Bumped (under `slots`' lock) whenever an entry is added or removed: tells the leader
    /// whether what it knows of the entries (`MainPoll::sole`) still holds.
    slots_changed: AtomicU64,
    /// The value of `slots_changed` at which [`try_own`](Self::try_own) last found no
    /// connection it may own (`u64::MAX`: none yet): until the table changes, it answers no
    /// without the poll lock.
    not_ownable_at: AtomicU64,
    ready: Queue<E>,
    standby: Standby,
    /// The last poll filled its `Events` buffer: more events may be waiting in the poll set,
    /// which (edge-triggered) announces them no more. Written by the poll's holder.
    full: AtomicBool,
    alarm: Alarm,
    /// An event loop outside the ORB watches the poll set's fd ([`event_fd`](Self::event_fd)
    /// was asked for): only then does work left on the ready list need the waker's event
    /// ([`wake_watcher`](Self::wake_watcher)); the ORB's own threads look at the list first.
    watched: AtomicBool,
    /// The socket parked for a run of owned reads, if any (see the module docs).
    parking: Mutex<Parking<E>>,
    /// The parked socket's token ([`NOT_PARKED`]: none), written under `parking`'s lock: read
    /// without it by the owner, which alone parks, and by a poller, which holds the poll
    /// lock the owner parks under, so that neither takes the lock when nothing is parked.
    parked_token: AtomicUsize,
    /// An arm put a parked socket back since the last poll: no parking until the next poll.
    /// Without it a pool out of tick mode, which arms before every upcall, would put back
    /// and take out its socket around every request (two system calls more, not fewer).
    held_off: AtomicBool,
    /// A wake-up asked ([`wake`](Reactor::wake)) and not yet polled: the waker's event is
    /// in the poll set. Cleared before each poll of the main set.
    wake_pending: AtomicBool,
}

/// A timerfd registered in both poll sets, armed for the nearest timer (see the module docs).
///
/// Invariant: whenever a timer is set for time `t`, the timerfd is armed for `t` or earlier,
/// or an expiry of it is on its way to a poller that will re-arm it. `armed` is the time it
/// is armed for (nanoseconds since `epoch`; 0: not armed, or its expiry was taken). A thread
/// setting a timer stores it (sequentially consistent) before it reads `armed`
/// ([`Reactor::arm_alarm`]); the poller that takes an expiry clears `armed` before it reads
/// the timers again: so either the setter arms, or the poller sees its timer.
#[derive(Debug)]
struct Alarm {
    fd: OwnedFd,
    epoch: Instant,
    armed: AtomicU64,
    /// Set if arming ever failed: pollers then compute timeouts for the timers themselves.
    broken: AtomicBool,
    /// Serialises `timerfd_settime` with the update of `armed`.
    lock: Mutex<()>,
}

impl Alarm {
    fn new() -> io::Result<Self> {
        use rustix::time::{timerfd_create, TimerfdClockId, TimerfdFlags};
        Ok(Alarm {
            fd: timerfd_create(
                TimerfdClockId::Monotonic,
                TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
            )?,
            epoch: Instant::now(),
            armed: AtomicU64::new(0),
            broken: AtomicBool::new(false),
            lock: Mutex::new(()),
        })
    }

    /// `t` in nanoseconds since `epoch`, at least 1 (0 means not armed); a time over 584
    /// years away saturates instead of wrapping to an early one.
    fn ns(&self, t: Instant) -> u64 {
        u64::try_from(t.saturating_duration_since(self.epoch).as_nanos())
            .unwrap_or(u64::MAX)
            .max(1)
    }

    /// Arms the timerfd for `at` unless it is armed for `at` or earlier.
    fn arm(&self, at: Instant) {
        let ns = self.ns(at);
        let armed = self.armed.load(Ordering::SeqCst);
        if armed != 0 && armed <= ns {
            return;
        }
        let _g = lock(&self.lock);
        let armed = self.armed.load(Ordering::SeqCst);
        if armed != 0 && armed <= ns {
            return;
        }
        use rustix::time::{timerfd_settime, Itimerspec, TimerfdTimerFlags, Timespec};
        // Relative: `Instant` has no public clock value. At least a nanosecond: zero disarms.
        let left = at
            .saturating_duration_since(Instant::now())
            .max(Duration::from_nanos(1));
        let spec = Itimerspec {
            it_interval: Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: Timespec {
                tv_sec: left.as_secs().try_into().unwrap_or(i64::MAX),
                tv_nsec: left.subsec_nanos().into(),
            },
        };
        match timerfd_settime(&self.fd, TimerfdTimerFlags::empty(), &spec) {
            Ok(_) => self.armed.store(ns, Ordering::SeqCst),
            Err(e) => {
                tracing::error!(error = %e, "cannot arm the ORB's timer");
                self.broken.store(true, Ordering::Relaxed);
            }
        }
    }

    /// Whether the alarm is armed for `now` or earlier: its event may be in the poll sets,
    /// not yet taken (an alarm still armed for a past time is also one that
    /// [`arm`](Self::arm) does not move later).
    fn due(&self, now: Instant) -> bool {
        let armed = self.armed.load(Ordering::SeqCst);
        armed != 0 && armed <= self.ns(now)
    }

    /// Takes an expiry the poll reported: not armed any more (until the poller re-arms it for
    /// the timers left).
    fn fired(&self) {
        let _g = lock(&self.lock);
        self.armed.store(0, Ordering::SeqCst);
        let mut count = [0u8; 8];
        // Nothing to read (an expiry already taken, or re-armed since) is fine: edge-triggered
        // pollers are told of every expiry anyway.
        let _ = rustix::io::read(&self.fd, &mut count);
    }
}

/// The standby's poll set (see the module docs).
#[derive(Debug)]
struct Standby {
    poll: Mutex<(Poll, Events)>,
    registry: Registry,
    waker: Waker,
    /// Whether `arm` can switch the main poll set's registration in `poll` on and off with
    /// `EPOLL_CTL_MOD` (registered once, disarmed by an empty event mask); if that first
    /// registration failed, arming adds and removes it instead.
    registered: bool,
}

impl<E: Clone> Reactor<E> {
    pub(crate) fn new() -> io::Result<Self> {
        let poll = Poll::new()?;
        let registry = poll.registry().try_clone()?;
        let waker = Waker::new(poll.registry(), WAKER)?;
        let standby_poll = Poll::new()?;
        let standby_registry = standby_poll.registry().try_clone()?;
        // Registered once with no events: arming and disarming then are one `EPOLL_CTL_MOD`
        // each. Adding an epoll fd to another epoll set runs the kernel's loop and path checks
        // and removing it frees the item, which made ADD + DEL cost about 2.5 us per request
        // (perf, `lat`: 10% of all samples); mio cannot register an empty interest, hence rustix.
        let registered = epoll::add(
            &standby_registry,
            &registry,
            epoll::EventData::new_u64(MAIN.0 as u64),
            epoll::EventFlags::empty(),
        )
        .inspect_err(|e| tracing::warn!(error = %e, "cannot pre-register the standby"))
        .is_ok();
        let alarm = Alarm::new()?;
        let alarm_fd = alarm.fd.as_raw_fd();
        registry.register(&mut SourceFd(&alarm_fd), ALARM, Interest::READABLE)?;
        standby_registry.register(&mut SourceFd(&alarm_fd), ALARM, Interest::READABLE)?;
        let standby = Standby {
            registry: standby_registry,
            waker: Waker::new(standby_poll.registry(), WAKER)?,
            poll: Mutex::new((standby_poll, Events::with_capacity(4))),
            registered,
        };
        Ok(Reactor {
            poll: Mutex::new(MainPoll {
                poll,
                events: Events::with_capacity(256),
                owned_until: None,
                sole: None,
                unpolled_sole: None,
            }),
            slots_changed: AtomicU64::new(0),
            not_ownable_at: AtomicU64::new(u64::MAX),
            registry,
            waker,
            slots: Mutex::new((Slab::new(), 0)),
            ready: Queue::default(),
            standby,
            full: AtomicBool::new(false),
            alarm,
            watched: AtomicBool::new(false),
            parking: Mutex::new(Parking {
                parked: None,
                armed: false,
            }),
            parked_token: AtomicUsize::new(NOT_PARKED),
            held_off: AtomicBool::new(false),
            wake_pending: AtomicBool::new(false),
        })
    }

    /// Makes sure whoever waits in a poll set (or on [`event_fd`](Self::event_fd)) is woken
    /// by `at`: arms the alarm unless it is armed for then or earlier. Call it after the
    /// timer for `at` is stored where the leader reads its timers. No system call unless the
    /// alarm moves earlier.
    pub(crate) fn arm_alarm(&self, at: Instant) {
        self.alarm.arm(at);
    }

    /// Arms the alarm for `at` unless it is armed for `at` or earlier (no system call then),
    /// and says whether it covers `at`: a poll without a timeout then ends by `at` (false
    /// if arming failed; the poller then needs its timeout).
    pub(crate) fn alarm_covers(&self, at: Instant) -> bool {
        self.alarm.arm(at);
        self.alarm_works()
    }

    /// Whether the alarm has armed whenever asked, so that a poller needs no timeout for the
    /// timers (false once arming failed).
    pub(crate) fn alarm_works(&self) -> bool {
        !self.alarm.broken.load(Ordering::Relaxed)
    }

    /// When the alarm is armed for, if it is (tests).
    #[cfg(test)]
    fn alarm_armed(&self) -> Option<Duration> {
        match self.alarm.armed.load(Ordering::SeqCst) {
            0 => None,
            ns => Some(Duration::from_nanos(ns)),
        }
    }

    /// Blocks the standby until it is woken or, while armed, the main poll set has events;
    /// at most for `timeout`.
    pub(crate) fn wait_standby(&self, timeout: Option<Duration>) {
        let mut g = lock(&self.standby.poll);
        let (poll, events) = &mut *g;
        if let Err(e) = poll.poll(events, timeout) {
            if e.kind() != io::ErrorKind::Interrupted {
                tracing::error!(error = %e, "standby poll failed");
                // Do not spin: the caller re-checks the pool state and waits again.
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }

    /// Wakes the standby.
    pub(crate) fn wake_standby(&self) {
        let _ = self.standby.waker.wake();
    }

    /// Arms (the main poll set's readiness wakes the standby) or disarms the standby.
    pub(crate) fn arm_standby(&self, on: bool) -> bool {
        {
            // Armed, the standby hears the main set only: a parked socket goes back first
            // (what arrived on it meanwhile then wakes the standby as soon as it is armed).
            let mut g = lock(&self.parking);
            g.armed = on;
            if on && g.parked.is_some() {
                let _ = self.unpark(&mut g, false);
                self.held_off.store(true, Ordering::Relaxed);
            }
        }
        let (epoll_fd, main) = (&self.standby.registry, &self.registry);
        let data = epoll::EventData::new_u64(MAIN.0 as u64);
        // Edge-triggered like every mio registration: arming while the main set has events
        // reports them at once; after that, only new ones wake the standby again.
        let armed = epoll::EventFlags::IN | epoll::EventFlags::ET;
        let r = match (self.standby.registered, on) {
            (true, true) => epoll::modify(epoll_fd, main, data, armed),
            (true, false) => epoll::modify(epoll_fd, main, data, epoll::EventFlags::empty()),
            (false, true) => epoll::add(epoll_fd, main, data, armed),
            (false, false) => epoll::delete(epoll_fd, main),
        };
        if let Err(e) = &r {
            tracing::warn!(error = %e, on, "cannot arm or disarm the standby");
        }
        r.is_ok()
    }

    /// Whether the last poll may have left events in the poll set (it filled its buffer).
    pub(crate) fn poll_was_full(&self) -> bool {
        self.full.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The poll set's file descriptor: readable while it holds events (an epoll fd is), so
    /// an event loop outside the ORB can wait for it (`Orb::event_fd`). A duplicate of the
    /// poll's own, held by the registry.
    /// The first call marks the poll set watched and wakes it once, so that work left on the
    /// ready list before (unannounced then: nobody watched) is announced to the new watcher.
    pub(crate) fn event_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        // Sequentially consistent, paired with `wake_watcher`: a leader that put work on the
        // ready list and then saw no watcher did so before this store, so the wake-up below
        // comes after that work.
        if !self.watched.load(Ordering::Relaxed) && !self.watched.swap(true, Ordering::SeqCst) {
            self.wake();
        }
        self.registry.as_fd()
    }

    /// Announces work left on the ready list to a watcher of [`event_fd`](Self::event_fd),
    /// if there is one: a driver waiting for the fd to call `Orb::turn`. Without one, the
    /// ORB's next leader takes the list before it polls, and the wake-up (an `eventfd`
    /// write per request when a pool thread leaves a read's other requests for the next
    /// thread: `tput` on the server) would be a system call for nobody.
    pub(crate) fn wake_watcher(&self) {
        if self.watched.load(Ordering::SeqCst) {
            self.wake();
        }
    }

    /// Whether entries wait on the ready list.
    pub(crate) fn has_ready(&self) -> bool {
        !self.ready.is_empty()
    }

    /// Reserves a token for an entry built by `make` (which gets the token).
    pub(crate) fn insert<T>(&self, make: impl FnOnce(usize) -> (Entry<E>, T)) -> T {
        let mut g = lock(&self.slots);
        let (slab, gen) = &mut *g;
        *gen = gen.wrapping_add(1);
        let gen_now = *gen;
        let vacant = slab.vacant_entry();
        let token = ((gen_now as usize) << 32) | vacant.key();
        let (entry, out) = make(token);
        vacant.insert(Slot {
            gen: gen_now,
            entry,
        });
        self.slots_changed.fetch_add(1, Ordering::Release);
        out
    }

    fn lookup(&self, token: usize) -> Option<Entry<E>> {
        let g = lock(&self.slots);
        let idx = token & 0xffff_ffff;
        let gen = (token >> 32) as u32;
        g.0.get(idx)
            .filter(|s| s.gen == gen)
            .map(|s| s.entry.clone())
    }

    /// The slot table's one connection, if it holds exactly one; whether it holds a
    /// listener; and its change count, read under its lock so that it goes with what the
    /// table held (for [`try_own`](Self::try_own)'s and
    /// [`sole_unpolled`](Self::sole_unpolled)'s cached answers).
    fn sole_conn(&self) -> (Option<E>, bool, u64) {
        let slots = lock(&self.slots);
        let (mut conns, mut listening, mut sole) = (0, false, None);
        for (_, s) in slots.0.iter() {
            match &s.entry {
                Entry::Conn(c) => {
                    conns += 1;
                    sole = Some(c);
                }
                Entry::Listener(_) => listening = true,
            }
        }
        let sole = sole.filter(|_| conns == 1).cloned();
        (sole, listening, self.slots_changed.load(Ordering::Relaxed))
    }

    /// Forgets a token.
    pub(crate) fn remove(&self, token: usize) {
        let mut g = lock(&self.slots);
        let idx = token & 0xffff_ffff;
        let gen = (token >> 32) as u32;
        if g.0.get(idx).is_some_and(|s| s.gen == gen) {
            g.0.remove(idx);
            self.slots_changed.fetch_add(1, Ordering::Release);
        }
    }

    /// Every entry (for shutdown).
    pub(crate) fn entries(&self) -> Vec<Entry<E>> {
        lock(&self.slots)
            .0
            .iter()
            .map(|(_, s)| s.entry.clone())
            .collect()
    }

    /// Registers a socket's fd for `interest`.
    pub(crate) fn register(
        &self,
        fd: &impl AsRawFd,
        token: usize,
        interest: Interest,
    ) -> io::Result<()> {
        self.registry
            .register(&mut SourceFd(&fd.as_raw_fd()), Token(token), interest)
    }

    /// Changes a socket's interest (readable only, or readable and writable): the connections'
    /// writable interest, set through `WriteInterest` (see `transport`).
    pub(crate) fn set_writable(
        &self,
        fd: &impl AsRawFd,
        token: usize,
        writable: bool,
    ) -> io::Result<()> {
        // Under the parking lock, so that the socket is not taken out between the look and
        // the change.
        let mut g = lock(&self.parking);
        if g.parked.as_ref().is_some_and(|p| p.token == token) {
            // Parked: goes back with the writable interest if it is wanted (what wants it
            // now cannot wait for the owner's run to end); else it stays out.
            if writable {
                return self.unpark(&mut g, true);
            }
            return Ok(());
        }
        let interest = if writable {
            Interest::READABLE | Interest::WRITABLE
        } else {
            Interest::READABLE
        };
        self.registry
            .reregister(&mut SourceFd(&fd.as_raw_fd()), Token(token), interest)
    }

    /// Removes a socket from the poll set (a parked one is forgotten, not put back).
    pub(crate) fn deregister(&self, fd: &impl AsRawFd) {
        let fd = fd.as_raw_fd();
        let mut g = lock(&self.parking);
        if g.parked.as_ref().is_some_and(|p| p.fd == fd) {
            g.parked = None;
            self.parked_token.store(NOT_PARKED, Ordering::Relaxed);
            return;
        }
        let _ = self.registry.deregister(&mut SourceFd(&fd));
    }

    /// Takes the socket of `entry` (`fd`, registered under `token` for readability only) out
    /// of the main poll set while the caller reads it with owned reads, holding the poll lock
    /// through `_permit` (see the module docs); true if it is out (now or already). Refused
    /// while the standby is armed, while a watcher outside the ORB waits on the poll set, when
    /// an arm put a socket back since the last poll, or when `still`, asked under the parking
    /// lock, says no: the caller's check that the socket wants no writable event, which a
    /// [`set_writable`](Self::set_writable) then comes wholly before or after.
    pub(crate) fn park(
        &self,
        _permit: &Owning<'_, E>,
        entry: &E,
        fd: &impl AsRawFd,
        token: usize,
        still: impl FnOnce() -> bool,
    ) -> bool {
        if self.parked_token.load(Ordering::Relaxed) == token {
            return true;
        }
        if self.watched.load(Ordering::Relaxed) || self.held_off.load(Ordering::Relaxed) {
            return false;
        }
        let mut g = lock(&self.parking);
        if g.armed || g.parked.is_some() || !still() {
            return false;
        }
        let fd = fd.as_raw_fd();
        if let Err(e) = self.registry.deregister(&mut SourceFd(&fd)) {
            tracing::debug!(error = %e, "cannot take an owned connection out of the poll set");
            return false;
        }
        g.parked = Some(Parked {
            _entry: entry.clone(),
            fd,
            token,
        });
        self.parked_token.store(token, Ordering::Relaxed);
        true
    }

    /// Puts the parked socket, if any, back into the main poll set (with the writable
    /// interest if `writable`). If the kernel refuses (it just freed the socket's place, so
    /// only an allocation can fail), the socket stays parked, still read by owned reads, and
    /// every poll tries again; a writer that needed it back gets the error.
    fn unpark(&self, g: &mut Parking<E>, writable: bool) -> io::Result<()> {
        let Some(p) = &g.parked else {
            return Ok(());
        };
        let interest = if writable {
            Interest::READABLE | Interest::WRITABLE
        } else {
            Interest::READABLE
        };
        let r = self
            .registry
            .register(&mut SourceFd(&p.fd), Token(p.token), interest);
        match &r {
            Ok(()) => {
                g.parked = None;
                self.parked_token.store(NOT_PARKED, Ordering::Relaxed);
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot put a parked connection back into the poll set")
            }
        }
        r
    }

    /// Before a poll: puts a parked socket back, and lets the next run park again.
    fn unpark_for_poll(&self) {
        if self.parked_token.load(Ordering::Relaxed) != NOT_PARKED {
            let _ = self.unpark(&mut lock(&self.parking), false);
        }
        if self.held_off.load(Ordering::Relaxed) {
            self.held_off.store(false, Ordering::Relaxed);
        }
    }

    /// Registers a listener under a new token.
    pub(crate) fn add_listener(&self, mut l: TcpListener) -> io::Result<Arc<TcpListener>> {
        let registry = &self.registry;
        self.insert(|token| {
            let r = registry.register(&mut l, Token(token), Interest::READABLE);
            let l = Arc::new(l);
            (Entry::Listener(l.clone()), r.map(|_| l))
        })
    }

    /// Deregisters and drops every listener (stop accepting).
    pub(crate) fn close_listeners(&self) {
        let mut g = lock(&self.slots);
        let keys: Vec<usize> =
            g.0.iter()
                .filter(|(_, s)| matches!(s.entry, Entry::Listener(_)))
                .map(|(k, _)| k)
                .collect();
        for k in keys {
            let slot = g.0.remove(k);
            if let Entry::Listener(l) = slot.entry {
                self.deregister(&*l);
            }
        }
        self.slots_changed.fetch_add(1, Ordering::Release);
    }

    /// Tells [`try_own`](Self::try_own) that what its `ownable` answers for a registered
    /// entry may have changed: it looks at the table again.
    pub(crate) fn ownable_changed(&self) {
        let _g = lock(&self.slots);
        self.slots_changed.fetch_add(1, Ordering::Release);
    }

    /// Interrupts the leader's `poll`.
    pub(crate) fn wake(&self) {
        // Before the waker's event: a turn that sees no wake-up pending knows its event is
        // not in the set (see `sole_unpolled`).
        self.wake_pending.store(true, Ordering::SeqCst);
        let _ = self.waker.wake();
    }

    /// Puts an entry on the ready list.
    pub(crate) fn push_ready(&self, e: E) {
        self.ready.push_back(e);
    }

    /// Takes the next entry from the ready list.
    pub(crate) fn pop_ready(&self) -> Option<E> {
        self.ready.pop_front()
    }

    /// Drops everything on the ready list.
    pub(crate) fn clear_ready(&self) {
        self.ready.clear();
    }

    /// Polls without waiting, handing each resolved event to `handle`; says how many there
    /// were (wake-ups not counted) and whether the alarm fired (then the caller re-arms it
    /// for the timers left). Nothing at once if another thread holds the poll. A wake-up or
    /// an alarm it finds is posted again (as a wake-up), so that the leader's next `poll`
    /// still returns at once (and runs the timers that are due).
    ///
    /// A parked socket stays parked: it and the set are asked together, with one `poll(2)`
    /// of the set's fd and the socket's (no event is taken by that), and the set is polled
    /// only if it has something. Putting the socket back for the look and taking it out
    /// again after cost two `epoll_ctl`s more, in the middle of a request (PROFILE.md,
    /// 2026-11-29). `socket_of` gives a parked entry's socket (`None`: the usual way for it).
    pub(crate) fn poll_now(
        &self,
        socket_of: impl for<'a> Fn(&'a E) -> Option<BorrowedFd<'a>>,
        mut handle: impl FnMut(Ready<E>),
    ) -> Polled {
        // Not the leader's own wait: never block behind a thread waiting in the poll.
        let Some(mut g) = self.poll.try_lock() else {
            return Polled::default();
        };
        // (token, readable, read_closed) of a parked socket with an event; whether the set
        // has one (None: not asked that way).
        let mut parked = None;
        let mut set_ready = None;
        if self.parked_token.load(Ordering::Relaxed) != NOT_PARKED {
            // Held through the `ppoll` (its descriptor stays the parked entry's), not after:
            // `lookup` and `handle` take locks that are taken before this one elsewhere.
            let parking = lock(&self.parking);
            if let Some((p, socket)) = parking
                .parked
                .as_ref()
                .and_then(|p| Some((p, socket_of(&p._entry)?)))
            {
                match readiness(self.registry.as_fd(), socket) {
                    Ok((set, socket)) => {
                        parked = socket.map(|(readable, closed)| (p.token, readable, closed));
                        set_ready = Some(set);
                    }
                    // Asked the usual way instead: the socket put back, the set polled.
                    Err(e) => tracing::debug!(error = %e, "poll(2) of a parked socket failed"),
                }
            }
        }
        let mut parked_events = 0;
        if let Some((token, readable, read_closed)) = parked {
            if let Some(entry) = self.lookup(token) {
                parked_events = 1;
                handle(Ready {
                    entry,
                    readable,
                    writable: false,
                    read_closed,
                });
            }
        }
        if set_ready == Some(false) {
            return Polled {
                events: parked_events,
                alarm: false,
            };
        }
        let keep_parked = set_ready.is_some();
        let (mut polled, woken) =
            match self.poll_locked(&mut g, Some(Duration::ZERO), keep_parked, handle) {
                Ok(r) => r,
                Err(e) => {
                    tracing::error!(error = %e, "poll failed");
                    return Polled::default();
                }
            };
        polled.events += parked_events;
        if woken {
            self.wake();
        }
        polled
    }

    /// The leader may wait in a connection's `recv` instead of polling (an owned read): if the
    /// ready list is empty, the last poll did not fill its buffer, no other thread is in the
    /// poll, the run of owned reads since the last poll is under [`OWNED_RUN`], and exactly
    /// one connection is registered, which `ownable` accepts (given whether a listener is
    /// registered too): that connection is returned with the poll lock. The leader waits
    /// with the lock held and drops it after. `now`: a clock reading the caller has at hand,
    /// microseconds old (else one is taken).
    ///
    /// What it finds is kept until an entry is added or removed, so that `ownable` must
    /// depend only on what does not change for a registered entry, or that change be told
    /// with [`ownable_changed`](Self::ownable_changed). While that says no
    /// connection can be owned (several connections, say), the answer costs two loads: no
    /// lock, no read-modify-write.
    ///
    /// When the run is over, the sources an owned read does not hear are looked at first,
    /// with the owned socket left out of the poll set: a poll without waiting, whose events
    /// go to `look` as a poll's would. If it finds nothing (no event, no alarm, no wake-up),
    /// a new run starts at once; if it finds anything, the answer is [`Own::Looked`] and the
    /// caller goes on as after a poll. (The poll that ended a run before put the socket back,
    /// waited in the set and took it out again: two `epoll_ctl` and an `epoll_wait` where
    /// this makes one `epoll_wait`, once a run.)
    pub(crate) fn try_own(
        &self,
        now: Option<Instant>,
        ownable: impl Fn(&E, bool) -> bool,
        look: impl FnMut(Ready<E>),
    ) -> Own<'_, E> {
        if !self.ready.is_empty() || self.full.load(Ordering::Relaxed) {
            return Own::No;
        }
        if self.not_ownable_at.load(Ordering::Relaxed) == self.slots_changed.load(Ordering::Acquire)
        {
            return Own::No;
        }
        let Some(mut g) = self.poll.try_lock() else {
            return Own::No;
        };
        let changed = self.slots_changed.load(Ordering::Acquire);
        let sole = match &g.sole {
            Some((seen, sole)) if *seen == changed => match sole {
                Some(s) => s.clone(),
                None => return Own::No,
            },
            _ => {
                let (sole, listening, changed) = self.sole_conn();
                let sole = sole.filter(|c| ownable(c, listening));
                if sole.is_none() {
                    self.not_ownable_at.store(changed, Ordering::Relaxed);
                }
                g.sole = Some((changed, sole.clone()));
                match sole {
                    Some(s) => s,
                    None => return Own::No,
                }
            }
        };
        // Else the reading the end of the last upcall's user code left (`clock.rs`): the
        // reply's send ago. Taken either way, so no later step of the turn takes it.
        let left = crate::clock::take_left();
        let now = now.or(left).unwrap_or_else(Instant::now);
        match g.owned_until {
            None => {}
            // Time to look at the sources an owned read does not hear.
            Some(end) if now >= end => {
                match self.poll_locked(&mut g, Some(Duration::ZERO), true, look) {
                    // Nothing came, and the table is as it was: a new run.
                    Ok((p, false))
                        if p.events == 0
                            && !p.alarm
                            && g.sole.as_ref().is_some_and(|(seen, _)| {
                                *seen == self.slots_changed.load(Ordering::Acquire)
                            }) => {}
                    Ok((p, woken)) => {
                        if woken {
                            // For the caller's next poll, as `poll_now` does.
                            self.wake();
                        }
                        return Own::Looked(p);
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "poll failed");
                        return Own::No;
                    }
                }
            }
            Some(_) => return Own::Yes(Owning { _poll: g }, sole),
        }
        match now.checked_add(OWNED_RUN) {
            Some(end) => g.owned_until = Some(end),
            None => return Own::No,
        }
        Own::Yes(Owning { _poll: g }, sole)
    }

    /// For an event-loop driver's turn (`Orb::turn`): the one connection registered, to be
    /// read without a poll, when nothing but its socket can have put an event in the main
    /// set since the last poll (see the module docs, **Unpolled turns**): no listener and no
    /// other connection, no wake-up asked since the last poll, the alarm not due at `now`,
    /// nothing parked, nothing left on the ready list or in the kernel's ready list beyond
    /// the last poll's buffer. `alone` adds the connection's own conditions (nothing to
    /// write, no connect or handshake under way: no writable event wanted). `None`: poll.
    pub(crate) fn sole_unpolled(&self, now: Instant, alone: impl FnOnce(&E) -> bool) -> Option<E> {
        if !self.ready.is_empty()
            || self.full.load(Ordering::Relaxed)
            || self.wake_pending.load(Ordering::SeqCst)
            || !self.alarm_works()
            || self.alarm.due(now)
            || self.parked_token.load(Ordering::Relaxed) != NOT_PARKED
        {
            return None;
        }
        // The leader's lock, never contended here; a thread that holds it is polling, and
        // the turn polls after it.
        let mut g = self.poll.try_lock()?;
        let sole = match &g.unpolled_sole {
            Some((seen, sole)) if *seen == self.slots_changed.load(Ordering::Acquire) => {
                sole.clone()
            }
            _ => {
                let (sole, listening, changed) = self.sole_conn();
                let sole = sole.filter(|_| !listening);
                g.unpolled_sole = Some((changed, sole.clone()));
                sole
            }
        }?;
        drop(g);
        alone(&sole).then_some(sole)
    }

    /// Waits for readiness (leader only) and hands each resolved event to `handle`, without
    /// collecting them. Says how many events it handled (0: a wake-up or a timeout) and
    /// whether the alarm fired: then a timer is due, and the alarm is not armed until the
    /// caller re-arms it for the timers left ([`arm_alarm`](Self::arm_alarm)).
    pub(crate) fn poll(
        &self,
        timeout: Option<Duration>,
        handle: impl FnMut(Ready<E>),
    ) -> io::Result<Polled> {
        self.poll_locked(&mut lock(&self.poll), timeout, false, handle)
            .map(|(p, _)| p)
    }

    /// The poll itself, with the poll set's lock held (`g`); also says whether the waker
    /// (or the alarm) fired. `keep_parked`: the look of [`try_own`](Self::try_own), which
    /// leaves a parked socket out (its owner reads it next; only this thread polls).
    fn poll_locked(
        &self,
        g: &mut MainPoll<E>,
        timeout: Option<Duration>,
        keep_parked: bool,
        mut handle: impl FnMut(Ready<E>),
    ) -> io::Result<(Polled, bool)> {
        // A poll ends a run of owned reads (`try_own`), and lets go of a connection that
        // is no longer the only one (or registered at all).
        g.owned_until = None;
        if keep_parked {
            if self.held_off.load(Ordering::Relaxed) {
                self.held_off.store(false, Ordering::Relaxed);
            }
        } else {
            self.unpark_for_poll();
        }
        if g.sole
            .as_ref()
            .is_some_and(|(seen, ..)| *seen != self.slots_changed.load(Ordering::Relaxed))
        {
            g.sole = None;
        }
        // Before the wait: a wake-up asked after this is seen by it or by the next poll.
        if self.wake_pending.load(Ordering::Relaxed) {
            self.wake_pending.store(false, Ordering::SeqCst);
        }
        let MainPoll { poll, events, .. } = g;
        match poll.poll(events, timeout) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                return Ok((Polled::default(), false))
            }
            Err(e) => return Err(e),
        }
        let (mut n, mut woken, mut alarm) = (0, false, false);
        let full = events.iter().count() >= events.capacity();
        if full || self.full.load(std::sync::atomic::Ordering::Relaxed) {
            self.full.store(full, std::sync::atomic::Ordering::Relaxed);
        }
        for ev in events.iter() {
            if ev.token() == WAKER {
                woken = true;
                continue;
            }
            if ev.token() == ALARM {
                // A timer is due: the poller's caller runs it and re-arms the alarm.
                self.alarm.fired();
                (woken, alarm) = (true, true);
                continue;
            }
            if let Some(entry) = self.lookup(ev.token().0) {
                n += 1;
                handle(Ready {
                    entry,
                    readable: ev.is_readable() || ev.is_read_closed(),
                    writable: ev.is_writable(),
                    read_closed: ev.is_error() || ev.is_read_closed(),
                });
            }
        }
        Ok((Polled { events: n, alarm }, woken))
    }
}

/// Whether the poll set `set` has an event waiting, and, if the socket `socket` (parked: out
/// of that set) has one, whether it is readable and whether its read side is closed: one
/// `poll(2)` without waiting, which takes nothing from either.
fn readiness(
    set: BorrowedFd<'_>,
    socket: BorrowedFd<'_>,
) -> io::Result<(bool, Option<(bool, bool)>)> {
    use rustix::event::{PollFd, PollFlags, Timespec};
    let closed = PollFlags::HUP | PollFlags::ERR | PollFlags::RDHUP;
    let mut fds = [
        PollFd::from_borrowed_fd(set, PollFlags::IN),
        PollFd::from_borrowed_fd(socket, PollFlags::IN | PollFlags::RDHUP),
    ];
    let now = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    rustix::event::poll(&mut fds, Some(&now))?;
    let set_ready = !fds[0].revents().is_empty();
    let r = fds[1].revents();
    let socket_ready =
        (!r.is_empty()).then(|| (r.intersects(PollFlags::IN | closed), r.intersects(closed)));
    Ok((set_ready, socket_ready))
}

#[cfg(test)]
mod tests {
    //! The reactor with plain values as entries: tokens and their generations, the ready
    //! list, and events resolved to entries (over a Unix socket pair, not TCP).

    use super::*;
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream;

    /// [`Reactor::try_own`] with nothing to look at: the permit and the connection, if it
    /// may be owned.
    fn own<'a>(
        r: &'a Reactor<&'static str>,
        ok: impl Fn(&&'static str, bool) -> bool,
    ) -> Option<(Owning<'a, &'static str>, &'static str)> {
        match r.try_own(None, ok, |_| {}) {
            Own::Yes(permit, conn) => Some((permit, conn)),
            Own::No | Own::Looked(_) => None,
        }
    }

    fn conn(e: Option<Entry<&'static str>>) -> Option<&'static str> {
        match e {
            Some(Entry::Conn(s)) => Some(s),
            _ => None,
        }
    }

    #[test]
    fn a_token_of_a_reused_slot_is_stale() {
        let r: Reactor<&'static str> = Reactor::new().unwrap();
        let a = r.insert(|t| (Entry::Conn("a"), t));
        let b = r.insert(|t| (Entry::Conn("b"), t));
        assert_eq!(conn(r.lookup(a)), Some("a"));
        r.remove(a);
        assert_eq!(conn(r.lookup(a)), None);
        let c = r.insert(|t| (Entry::Conn("c"), t));
        assert_eq!(c & 0xffff_ffff, a & 0xffff_ffff, "the slot is reused");
        assert_ne!(c, a, "under a new generation");
        assert_eq!(conn(r.lookup(a)), None, "the old token finds nothing");
        r.remove(a);
        assert_eq!(
            conn(r.lookup(c)),
            Some("c"),
            "a stale remove removed the new entry"
        );
        let mut all: Vec<_> = r.entries().into_iter().map(|e| conn(Some(e))).collect();
        all.sort();
        assert_eq!(all, [Some("b"), Some("c")]);
        r.remove(b);
        r.remove(c);
        assert!(r.entries().is_empty());
    }

    #[test]
    fn a_turn_reads_the_sole_connection_unpolled_only_when_nothing_else_can_be_ready() {
        let r: Reactor<&'static str> = Reactor::new().unwrap();
        let now = Instant::now();
        // A poll first, each time: it takes the wake-ups asked so far.
        let sole = |r: &Reactor<&'static str>| {
            r.poll(Some(Duration::ZERO), |_| {}).unwrap();
            r.sole_unpolled(now, |_| true)
        };
        assert_eq!(sole(&r), None, "nothing registered");
        let a = r.insert(|t| (Entry::Conn("a"), t));
        assert_eq!(sole(&r), Some("a"));
        assert_eq!(r.sole_unpolled(now, |_| false), None, "its own conditions");
        r.wake();
        assert_eq!(r.sole_unpolled(now, |_| true), None, "a wake-up asked");
        assert_eq!(sole(&r), Some("a"), "and polled");
        let b = r.insert(|t| (Entry::Conn("b"), t));
        assert_eq!(sole(&r), None, "two connections");
        assert_eq!(sole(&r), None, "still two (the answer kept)");
        r.remove(b);
        assert_eq!(sole(&r), Some("a"), "one again");
        r.push_ready("a");
        assert_eq!(
            r.sole_unpolled(now, |_| true),
            None,
            "work on the ready list"
        );
        assert_eq!(r.pop_ready(), Some("a"));
        let l = mio::net::TcpListener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        r.add_listener(l).unwrap();
        assert_eq!(sole(&r), None, "a listener");
        r.close_listeners();
        assert_eq!(sole(&r), Some("a"), "no listener left");
        // The alarm, armed for a minute from now: not due now, due a minute on (its event
        // may then be in the set, whether it fired or not yet).
        r.arm_alarm(now + Duration::from_secs(60));
        assert_eq!(r.sole_unpolled(now, |_| true), Some("a"), "alarm not due");
        let later = now + Duration::from_secs(61);
        assert_eq!(r.sole_unpolled(later, |_| true), None, "alarm due");
        r.remove(a);
        assert_eq!(sole(&r), None, "removed");
    }

    #[test]
    fn only_the_one_ownable_connection_may_be_read_as_an_owner() {
        let r: Reactor<&'static str> = Reactor::new().unwrap();
        let any = |_: &&str, _: bool| true;
        // A poll first, each time: it starts a new run of owned reads, so that no answer
        // depends on how long the test takes (a run ends after `OWNED_RUN`).
        let owned = |r: &Reactor<&'static str>, ok: &dyn Fn(&&str, bool) -> bool| {
            r.poll(Some(Duration::ZERO), |_| {}).unwrap();
            own(r, ok).map(|(_, conn)| conn)
        };
        assert_eq!(owned(&r, &any), None, "nothing registered");
        let a = r.insert(|t| (Entry::Conn("a"), t));
        {
            r.poll(Some(Duration::ZERO), |_| {}).unwrap();
            let (permit, conn) = own(&r, any).expect("the only connection");
            assert_eq!(conn, "a");
            assert!(own(&r, any).is_none(), "the permit holds the poll lock");
            drop(permit);
            assert!(own(&r, any).is_some(), "and lets it go when dropped");
        }
        let b = r.insert(|t| (Entry::Conn("b"), t));
        assert_eq!(owned(&r, &any), None, "two connections");
        assert_eq!(owned(&r, &any), None, "still two (the answer kept)");
        r.remove(b);
        assert_eq!(owned(&r, &any), Some("a"), "one again");
        r.push_ready("a");
        assert_eq!(owned(&r, &any), None, "work waits on the ready list");
        assert_eq!(r.pop_ready(), Some("a"));
        let l = mio::net::TcpListener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        r.add_listener(l).unwrap();
        let not_while_listening = |_: &&str, listening: bool| !listening;
        assert_eq!(
            owned(&r, &not_while_listening),
            None,
            "refused while listening"
        );
        r.close_listeners();
        assert_eq!(
            owned(&r, &not_while_listening),
            Some("a"),
            "no listener left"
        );
        r.remove(a);
        assert_eq!(owned(&r, &any), None, "removed");
    }

    /// A reactor with one end of a socket pair registered (readable) as the only entry
    /// `"ours"`, and the permit of an owned read of it.
    fn parking_fixture() -> (Reactor<&'static str>, UnixStream, UnixStream, usize) {
        let r: Reactor<&'static str> = Reactor::new().unwrap();
        let (ours, peer) = UnixStream::pair().unwrap();
        ours.set_nonblocking(true).unwrap();
        let token = r.insert(|t| (Entry::Conn("ours"), t));
        r.register(&ours, token, Interest::READABLE).unwrap();
        (r, ours, peer, token)
    }

    /// Parks `ours` under an owned read's permit; says whether it was taken out.
    fn park(r: &Reactor<&'static str>, ours: &UnixStream, token: usize) -> bool {
        let (permit, conn) = own(r, |_, _| true).expect("the only connection");
        r.park(&permit, &conn, ours, token, || true)
    }

    /// Every event the poll reports at once, as (entry, readable, writable).
    fn events(r: &Reactor<&'static str>) -> Vec<(Option<&'static str>, bool, bool)> {
        let mut seen = Vec::new();
        r.poll(Some(Duration::ZERO), |ev| {
            seen.push((conn(Some(ev.entry)), ev.readable, ev.writable))
        })
        .unwrap();
        seen
    }

    /// A parked socket is out of the poll set (bytes arriving on it make nothing readable
    /// there), and the next poll puts it back and reports the bytes that came meanwhile.
    #[test]
    fn a_parked_socket_is_reported_again_by_the_next_poll() {
        let (r, ours, mut peer, token) = parking_fixture();
        assert!(park(&r, &ours, token));
        assert!(park(&r, &ours, token), "already out: nothing to do");
        peer.write_all(b"x").unwrap();
        assert!(
            !event_fd_readable(&r),
            "a parked socket's bytes reached the poll set"
        );
        assert_eq!(events(&r), [(Some("ours"), true, false)]);
        assert_eq!(r.parked_token.load(Ordering::Relaxed), NOT_PARKED);
        let mut buf = [0u8; 8];
        assert_eq!((&ours).read(&mut buf).unwrap(), 1);
        // Back in the set for good: the next bytes are reported as before.
        peer.write_all(b"y").unwrap();
        assert_eq!(events(&r), [(Some("ours"), true, false)]);
        r.deregister(&ours);
    }

    /// The look that ends a run of owned reads leaves the owned socket out of the poll set:
    /// with nothing else to report, a new run starts at once (bytes for the owner stay for
    /// its `recv`); an event elsewhere (a connection to the listener) or a wake-up goes to
    /// the caller as after a poll, the socket still out.
    #[test]
    fn the_look_that_ends_a_run_keeps_the_owned_socket_out() {
        let (r, ours, mut peer, token) = parking_fixture();
        let listener = r
            .add_listener(TcpListener::bind("127.0.0.1:0".parse().unwrap()).unwrap())
            .unwrap();
        assert!(park(&r, &ours, token));
        peer.write_all(b"x").unwrap();
        // Each call a run later than the last one started.
        let t0 = Instant::now();
        let later = |runs: u32| Some(t0 + 4 * runs * OWNED_RUN);
        let mut seen = Vec::new();
        match r.try_own(later(1), |_, _| true, |ev| seen.push(ev.entry)) {
            Own::Yes(_, conn) => assert_eq!(conn, "ours"),
            _ => panic!("nothing else to report: the run goes on"),
        }
        assert!(seen.is_empty(), "the owned socket's bytes were reported");
        assert_eq!(r.parked_token.load(Ordering::Relaxed), token);

        let _client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let looked = r.try_own(later(2), |_, _| true, |ev| seen.push(ev.entry));
        assert!(matches!(looked, Own::Looked(p) if p.events == 1));
        assert!(matches!(seen.as_slice(), [Entry::Listener(_)]));
        assert_eq!(r.parked_token.load(Ordering::Relaxed), token, "put back");

        // As after a poll, the next try starts a new run.
        assert!(matches!(
            r.try_own(later(3), |_, _| true, |_| {}),
            Own::Yes(..)
        ));
        r.wake();
        seen.clear();
        let looked = r.try_own(later(4), |_, _| true, |ev| seen.push(ev.entry));
        assert!(matches!(looked, Own::Looked(p) if p.events == 0));
        // The wake-up is posted again, for the caller's next poll (after which the parked
        // socket is back and its bytes reported).
        let mut again = Vec::new();
        let (_, woken) = r
            .poll_locked(&mut lock(&r.poll), Some(Duration::ZERO), false, |ev| {
                again.push(conn(Some(ev.entry)))
            })
            .unwrap();
        assert!(woken);
        assert_eq!(again, [Some("ours")]);
        r.deregister(&ours);
    }

    /// The upcall thread's look (`poll_now`) asks a parked socket and the set together and
    /// leaves the socket out: quiet, nothing; bytes or the peer's close, the socket's entry
    /// reported (the bytes left for its reader); an event elsewhere or a wake-up, handled
    /// as by a poll. Without the socket's descriptor, the usual way: put back and polled.
    #[test]
    fn the_upcall_threads_look_leaves_a_parked_socket_out() {
        let (r, ours, mut peer, token) = parking_fixture();
        let ours: &'static UnixStream = Box::leak(Box::new(ours));
        let listener = r
            .add_listener(TcpListener::bind("127.0.0.1:0".parse().unwrap()).unwrap())
            .unwrap();
        let look = |r: &Reactor<&'static str>| {
            let mut seen = Vec::new();
            let polled = r.poll_now(
                |_| Some(ours.as_fd()),
                |ev| seen.push((conn(Some(ev.entry)), ev.readable, ev.read_closed)),
            );
            assert_eq!(polled.events, seen.len());
            seen
        };
        assert!(park(&r, ours, token));
        assert_eq!(look(&r), []);
        assert_eq!(r.parked_token.load(Ordering::Relaxed), token);

        peer.write_all(b"x").unwrap();
        assert_eq!(look(&r), [(Some("ours"), true, false)]);
        assert_eq!(r.parked_token.load(Ordering::Relaxed), token, "still out");
        let mut buf = [0u8; 8];
        assert_eq!(
            (&*ours).read(&mut buf).unwrap(),
            1,
            "the bytes stay for the reader"
        );

        let _client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        assert_eq!(look(&r), [(None, true, false)], "the listener's event");
        assert_eq!(r.parked_token.load(Ordering::Relaxed), token);

        r.wake();
        assert_eq!(look(&r), []);
        assert_eq!(r.parked_token.load(Ordering::Relaxed), token);
        let (_, woken) = r
            .poll_locked(&mut lock(&r.poll), Some(Duration::ZERO), true, |_| {})
            .unwrap();
        assert!(woken, "the wake-up is posted again for the next poll");

        drop(peer);
        assert_eq!(look(&r), [(Some("ours"), true, true)], "the peer's close");
        assert_eq!(r.parked_token.load(Ordering::Relaxed), token);

        let polled = r.poll_now(|_| None, |_| {});
        assert_eq!(
            polled.events, 1,
            "put back, and its close reported by the set"
        );
        assert_eq!(r.parked_token.load(Ordering::Relaxed), NOT_PARKED);
        r.deregister(ours);
    }

    /// A writer that needs the writable event of a parked socket puts it back with that
    /// interest; dropping the interest while it is out leaves it out.
    #[test]
    fn a_writer_puts_a_parked_socket_back_with_its_writable_interest() {
        let (r, ours, _peer, token) = parking_fixture();
        assert!(park(&r, &ours, token));
        r.set_writable(&ours, token, false).unwrap();
        assert_ne!(
            r.parked_token.load(Ordering::Relaxed),
            NOT_PARKED,
            "put back"
        );
        r.set_writable(&ours, token, true).unwrap();
        assert_eq!(r.parked_token.load(Ordering::Relaxed), NOT_PARKED);
        assert!(
            event_fd_readable(&r),
            "the writable event is not in the poll set"
        );
        assert_eq!(events(&r), [(Some("ours"), false, true)]);
        r.deregister(&ours);
    }

    /// Arming the standby puts a parked socket back first, so that the armed standby is
    /// woken by what arrived on it; no socket is parked while the standby is armed, nor,
    /// after an arm put one back, until the next poll. The hang guard is the standby's own
    /// 10 s timeout (the bytes are there before it waits).
    #[test]
    fn arming_the_standby_puts_a_parked_socket_back() {
        let (r, ours, mut peer, token) = parking_fixture();
        assert!(park(&r, &ours, token));
        peer.write_all(b"x").unwrap();
        assert!(r.arm_standby(true));
        assert_eq!(r.parked_token.load(Ordering::Relaxed), NOT_PARKED);
        let start = Instant::now();
        r.wait_standby(Some(Duration::from_secs(10)));
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "the armed standby did not hear the parked socket's bytes"
        );
        assert!(!park(&r, &ours, token), "parked while the standby is armed");
        assert!(r.arm_standby(false));
        assert!(!park(&r, &ours, token), "parked again before a poll");
        assert_eq!(events(&r), [(Some("ours"), true, false)]);
        assert!(park(&r, &ours, token), "a poll lets the next run park");
        r.deregister(&ours);
    }

    /// A socket deregistered while parked is forgotten, not put back by the next poll; a
    /// socket is not parked when the caller's check says no or a watcher outside the ORB
    /// waits on the poll set.
    #[test]
    fn parking_is_refused_or_forgotten_when_it_must_be() {
        let (r, ours, mut peer, token) = parking_fixture();
        {
            let (permit, conn) = own(&r, |_, _| true).unwrap();
            assert!(
                !r.park(&permit, &conn, &ours, token, || false),
                "still said no"
            );
        }
        assert!(park(&r, &ours, token));
        r.deregister(&ours);
        assert_eq!(r.parked_token.load(Ordering::Relaxed), NOT_PARKED);
        peer.write_all(b"x").unwrap();
        assert_eq!(events(&r), [], "a forgotten socket was put back");
        let (r, ours, _peer, token) = parking_fixture();
        let _fd = r.event_fd();
        r.poll(Some(Duration::ZERO), |_| {}).unwrap();
        assert!(!park(&r, &ours, token), "parked under an outside watcher");
        r.deregister(&ours);
    }

    #[test]
    fn the_ready_list_is_fifo() {
        let r: Reactor<u32> = Reactor::new().unwrap();
        assert!(!r.has_ready());
        for i in 1..=3 {
            r.push_ready(i);
        }
        assert!(r.has_ready());
        assert_eq!(r.pop_ready(), Some(1));
        assert_eq!(r.pop_ready(), Some(2));
        r.clear_ready();
        assert!(!r.has_ready());
        assert_eq!(r.pop_ready(), None);
    }

    /// An event comes back as the entry its token names; once the slot is reused, an event
    /// under the old token (the stream still registered with it) reaches nobody.
    #[test]
    fn events_resolve_to_their_entry_and_stale_ones_are_dropped() {
        let r: Reactor<&'static str> = Reactor::new().unwrap();
        let (ours, mut peer) = UnixStream::pair().unwrap();
        ours.set_nonblocking(true).unwrap();
        let token = r.insert(|t| (Entry::Conn("ours"), t));
        r.register(&ours, token, Interest::READABLE).unwrap();
        peer.write_all(b"x").unwrap();
        let mut seen = Vec::new();
        let n = r
            .poll(Some(Duration::from_secs(10)), |ev| {
                seen.push((conn(Some(ev.entry)), ev.readable, ev.writable))
            })
            .unwrap()
            .events;
        assert_eq!(n, 1);
        assert_eq!(seen, [(Some("ours"), true, false)]);
        // Writable interest on: the socket has room, so a writable event at once.
        r.set_writable(&ours, token, true).unwrap();
        let mut writable = Vec::new();
        r.poll(Some(Duration::from_secs(10)), |ev| {
            writable.push(ev.writable)
        })
        .unwrap();
        assert_eq!(writable, [true]);
        r.set_writable(&ours, token, false).unwrap();
        let mut buf = [0u8; 8];
        assert_eq!((&ours).read(&mut buf).unwrap(), 1);
        // The slot is freed and reused while the socket stays registered under the old token.
        r.remove(token);
        let reused = r.insert(|t| (Entry::Conn("new"), t));
        assert_eq!(reused & 0xffff_ffff, token & 0xffff_ffff);
        peer.write_all(b"y").unwrap();
        let n = r
            .poll(Some(Duration::from_secs(10)), |_| {
                panic!("a stale event reached an entry")
            })
            .unwrap()
            .events;
        assert_eq!(n, 0);
        r.deregister(&ours);
    }

    /// A wake-up ends the leader's poll with no event; `poll_now` finding one posts it again,
    /// so the leader's next poll still returns at once.
    #[test]
    fn a_wake_up_is_not_lost_by_a_look_at_the_loop() {
        let r: Reactor<u32> = Reactor::new().unwrap();
        r.wake();
        assert_eq!(
            r.poll_now(|_| None, |_| panic!("no entry registered"))
                .events,
            0
        );
        let start = std::time::Instant::now();
        let n = r
            .poll(Some(Duration::from_secs(10)), |_| {})
            .unwrap()
            .events;
        assert_eq!(n, 0);
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "the wake-up was lost"
        );
    }

    /// Whether the poll set's fd is readable now, as a watcher outside the ORB sees it.
    fn event_fd_readable<E>(r: &Reactor<E>) -> bool {
        use rustix::event::{poll, PollFd, PollFlags};
        let zero = rustix::time::Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        let mut fds = [PollFd::new(&r.registry, PollFlags::IN)];
        poll(&mut fds, Some(&zero)).unwrap() == 1
    }

    /// Work left on the ready list is announced on the event fd only once someone watches
    /// it: before that the wake-up is a system call for nobody. The first watcher is woken
    /// once, for whatever was left before it came.
    #[test]
    fn work_left_is_announced_only_to_a_watcher_of_the_event_fd() {
        let r: Reactor<u32> = Reactor::new().unwrap();
        r.wake_watcher();
        assert!(!event_fd_readable(&r), "woken with nobody watching");
        // Work left before the watcher came: its first look at the fd finds an event.
        let _fd = r.event_fd();
        assert!(event_fd_readable(&r), "the new watcher was not woken");
        r.poll(Some(Duration::ZERO), |_| {}).unwrap();
        assert!(!event_fd_readable(&r));
        let _again = r.event_fd();
        assert!(!event_fd_readable(&r), "only the first watcher is woken");
        r.wake_watcher();
        assert!(event_fd_readable(&r), "a watcher was not told of work left");
    }

    /// A deadline the alarm covers needs no poll timeout (a leader waiting for its reply,
    /// `OrbInner::poll_timeout`): covering it arms the alarm once, a later deadline is
    /// covered as it stands (no system call), and the poll ends by the deadline. A deadline
    /// centuries away (a huge call timeout) saturates instead of wrapping to an early alarm.
    /// The hang guard is the poll's own 10 s timeout (the deadline is 20 ms away).
    #[test]
    fn a_deadline_the_alarm_covers_ends_a_poll_without_a_timeout() {
        let r: Reactor<u32> = Reactor::new().unwrap();
        let hour = Instant::now() + Duration::from_secs(3600);
        assert!(r.alarm_covers(hour));
        let armed = r.alarm_armed().expect("armed");
        assert!(r.alarm_covers(hour + Duration::from_secs(60)));
        assert_eq!(r.alarm_armed(), Some(armed), "covered already: not moved");

        let start = Instant::now();
        assert!(r.alarm_covers(start + Duration::from_millis(20)));
        assert!(r.alarm_armed().expect("armed") < armed, "moved earlier");
        let polled = r
            .poll(Some(Duration::from_secs(10)), |_| {
                panic!("no entry registered")
            })
            .unwrap();
        assert!(polled.alarm, "the alarm ended the poll");
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "the alarm did not fire"
        );

        let centuries = Duration::from_secs(600 * 365 * 86_400);
        if let Some(far) = Instant::now().checked_add(centuries) {
            let r: Reactor<u32> = Reactor::new().unwrap();
            assert!(r.alarm_covers(far));
            let armed = r.alarm_armed().expect("armed");
            assert!(
                armed > Duration::from_secs(500 * 365 * 86_400),
                "armed {armed:?} after the epoch: wrapped"
            );
        }
    }

    /// The alarm wakes a poll without a timeout and the standby's wait, armed or not, and
    /// says so; it only ever moves earlier, and after firing it is armed again by whoever
    /// asks. The hang guard is the poll's own 10 s timeout (the alarms are 1 ms away).
    #[test]
    fn the_alarm_wakes_the_poll_and_the_standby_and_only_moves_earlier() {
        let r: Reactor<u32> = Reactor::new().unwrap();
        let now = Instant::now();
        assert_eq!(r.alarm_armed(), None);
        r.arm_alarm(now + Duration::from_secs(3600));
        let late = r.alarm_armed().expect("armed");
        r.arm_alarm(now + Duration::from_secs(7200));
        assert_eq!(r.alarm_armed(), Some(late), "a later time does not move it");
        r.arm_alarm(now + Duration::from_millis(1));
        let early = r.alarm_armed().expect("armed");
        assert!(early < late, "an earlier time moves it");
        // The standby (not armed) is woken by it; then the leader's poll takes it.
        let start = Instant::now();
        r.wait_standby(Some(Duration::from_secs(10)));
        let polled = r
            .poll(Some(Duration::from_secs(10)), |_| {
                panic!("no entry registered")
            })
            .unwrap();
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "the alarm did not fire"
        );
        assert!(polled.alarm && polled.events == 0);
        assert_eq!(r.alarm_armed(), None, "fired: not armed");
        // Armed again by the next timer, and a look at the loop that takes the expiry posts
        // a wake-up, so the leader's next poll returns at once.
        r.arm_alarm(Instant::now() + Duration::from_millis(1));
        std::thread::sleep(Duration::from_millis(5));
        let looked = r.poll_now(|_| None, |_| panic!("no entry registered"));
        assert!(looked.alarm && looked.events == 0);
        let start = Instant::now();
        let polled = r.poll(Some(Duration::from_secs(10)), |_| {}).unwrap();
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "the wake-up was lost"
        );
        assert!(!polled.alarm);
    }
}
