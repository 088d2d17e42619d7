//! The ORB's one event loop: a `mio::Poll` holding every listener, every connection and a
//! waker, with tokens from a `slab`.
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
//! The ready list holds connections that may have more to give without a new readiness event:
//! decoded frames not yet handled, or unread socket bytes (mio is edge-triggered; we stop
//! reading at a budget). The leader serves it before polling.

use crate::connection::{Connection, WriteInterest};
use crate::sync::std_lock as lock;
use crate::sync::Queue;
use mio::net::TcpListener;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Registry, Token, Waker};
use rustix::event::epoll;
use slab::Slab;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The waker's token (never a slab index).
pub(crate) const WAKER: Token = Token(usize::MAX);

/// The main poll set's token in the standby's poll set.
const MAIN: Token = Token(0);

/// What a token refers to.
#[derive(Debug, Clone)]
pub(crate) enum Entry {
    Listener(Arc<TcpListener>),
    Conn(Arc<Connection>),
}

#[derive(Debug)]
struct Slot {
    gen: u32,
    entry: Entry,
}

/// One readiness event, resolved to its entry.
#[derive(Debug)]
pub(crate) struct Ready {
    pub(crate) entry: Entry,
    pub(crate) readable: bool,
    pub(crate) writable: bool,
    pub(crate) read_closed: bool,
}

/// The event loop's shared parts.
#[derive(Debug)]
pub(crate) struct Reactor {
    poll: Mutex<(Poll, Events)>,
    registry: Registry,
    waker: Waker,
    slots: Mutex<(Slab<Slot>, u32)>,
    ready: Queue<Arc<Connection>>,
    standby: Standby,
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

impl Reactor {
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
        let standby = Standby {
            registry: standby_registry,
            waker: Waker::new(standby_poll.registry(), WAKER)?,
            poll: Mutex::new((standby_poll, Events::with_capacity(4))),
            registered,
        };
        Ok(Reactor {
            poll: Mutex::new((poll, Events::with_capacity(256))),
            registry,
            waker,
            slots: Mutex::new((Slab::new(), 0)),
            ready: Queue::default(),
            standby,
        })
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

    /// Whether connections wait on the ready list.
    pub(crate) fn has_ready(&self) -> bool {
        !self.ready.is_empty()
    }

    /// Reserves a token for an entry built by `make` (which gets the token).
    pub(crate) fn insert<T>(&self, make: impl FnOnce(usize) -> (Entry, T)) -> T {
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
        out
    }

    fn lookup(&self, token: usize) -> Option<Entry> {
        let g = lock(&self.slots);
        let idx = token & 0xffff_ffff;
        let gen = (token >> 32) as u32;
        g.0.get(idx)
            .filter(|s| s.gen == gen)
            .map(|s| s.entry.clone())
    }

    /// Forgets a token.
    pub(crate) fn remove(&self, token: usize) {
        let mut g = lock(&self.slots);
        let idx = token & 0xffff_ffff;
        let gen = (token >> 32) as u32;
        if g.0.get(idx).is_some_and(|s| s.gen == gen) {
            g.0.remove(idx);
        }
    }

    /// Every entry (for shutdown).
    pub(crate) fn entries(&self) -> Vec<Entry> {
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

    /// Changes a socket's interest.
    pub(crate) fn reregister(
        &self,
        fd: &impl AsRawFd,
        token: usize,
        interest: Interest,
    ) -> io::Result<()> {
        self.registry
            .reregister(&mut SourceFd(&fd.as_raw_fd()), Token(token), interest)
    }

    /// Removes a socket from the poll set.
    pub(crate) fn deregister(&self, fd: &impl AsRawFd) {
        let _ = self.registry.deregister(&mut SourceFd(&fd.as_raw_fd()));
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
    }

    /// Interrupts the leader's `poll`.
    pub(crate) fn wake(&self) {
        let _ = self.waker.wake();
    }

    /// Puts a connection on the ready list.
    pub(crate) fn push_ready(&self, c: Arc<Connection>) {
        self.ready.push_back(c);
    }

    /// Takes the next connection from the ready list.
    pub(crate) fn pop_ready(&self) -> Option<Arc<Connection>> {
        self.ready.pop_front()
    }

    /// Drops everything on the ready list.
    pub(crate) fn clear_ready(&self) {
        self.ready.clear();
    }

    /// Polls without waiting, handing each resolved event to `handle`; whether there was any
    /// (a wake-up does not count). False at once if another thread holds the poll. A wake-up
    /// it finds is posted again, so that the leader's next `poll` still returns at once.
    pub(crate) fn poll_now(&self, handle: impl FnMut(Ready)) -> bool {
        // Not the leader's own wait: never block behind a thread waiting in the poll.
        let Ok(mut g) = self.poll.try_lock() else {
            return false;
        };
        let (n, woken) = match self.poll_locked(&mut g, Some(Duration::ZERO), handle) {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(error = %e, "poll failed");
                return false;
            }
        };
        if woken {
            self.wake();
        }
        n > 0
    }

    /// Waits for readiness (leader only) and hands each resolved event to `handle`, without
    /// collecting them. Returns how many events it handled (0: a wake-up or a timeout).
    pub(crate) fn poll(
        &self,
        timeout: Option<Duration>,
        handle: impl FnMut(Ready),
    ) -> io::Result<usize> {
        self.poll_locked(&mut lock(&self.poll), timeout, handle)
            .map(|(n, _)| n)
    }

    /// The poll itself, with the poll set's lock held (`g`); also says whether the waker
    /// fired.
    fn poll_locked(
        &self,
        g: &mut (Poll, Events),
        timeout: Option<Duration>,
        mut handle: impl FnMut(Ready),
    ) -> io::Result<(usize, bool)> {
        let (poll, events) = g;
        match poll.poll(events, timeout) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok((0, false)),
            Err(e) => return Err(e),
        }
        let (mut n, mut woken) = (0, false);
        for ev in events.iter() {
            if ev.token() == WAKER {
                woken = true;
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
        Ok((n, woken))
    }
}

impl WriteInterest for Reactor {
    fn set_writable(
        &self,
        stream: &std::net::TcpStream,
        token: usize,
        writable: bool,
    ) -> io::Result<()> {
        let interest = if writable {
            Interest::READABLE | Interest::WRITABLE
        } else {
            Interest::READABLE
        };
        self.reregister(stream, token, interest)
    }
}
