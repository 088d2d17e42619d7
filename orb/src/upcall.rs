//! An upcall: a request on its way to a servant ([`Upcall`], parked until a thread takes it,
//! or run at once), and what the thread serving it knows about it: the per-thread state that
//! nested calls made from the servant read (depth, inherited deadline, call chain, the
//! connection the request came over). The client reads it, the server writes it (through
//! [`Serving`] only); neither imports the other for it.

use crate::connection::{Connection, Origin};
use crate::exception::SystemException;
use crate::giop::{Body, Reply, Request, Version};
use crate::servant::Context;
use crate::sync::plain::{Condvar, Mutex};
use crate::sync::{plain_lock as lock, Queue};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A request waiting for (or being run by) an upcall thread.
#[derive(Debug)]
pub(crate) struct Upcall {
    pub(crate) conn: Arc<Connection>,
    pub(crate) version: Version,
    pub(crate) request: Box<Request>,
    /// Built when the request was read: its deadline counts from arrival, and a
    /// CancelRequest can mark it even while it waits for a thread.
    pub(crate) ctx: Context,
    /// The call chain the request carried (see [`CallChain`](crate::giop::CallChain)), if any.
    pub(crate) chain: Option<u64>,
}

/// A call from this ORB to one of its own objects, run without a socket (collocation):
/// `server/` implements it (the upcall half), `client/` calls it (the invocation half), and
/// neither imports the other for it.
pub(crate) trait Collocated {
    /// Runs `operation` of the object under `key` on the calling thread, with `body` as its
    /// CDR-encoded parameters, and returns its reply as if it had come over a connection
    /// (`None` for a oneway). `metadata` are the service contexts the caller attached.
    ///
    /// `caller` says who waits for the answer (see [`LocalCaller`]).
    fn call_collocated(
        &self,
        key: bytes::Bytes,
        operation: &str,
        caller: LocalCaller<'_>,
        body: Body,
        deadline: Instant,
        metadata: &[crate::giop::ServiceContext],
    ) -> Result<LocalAnswer, SystemException>;
}

/// Who waits for a collocated call's answer.
#[derive(Debug, Clone, Copy)]
pub(crate) enum LocalCaller<'a> {
    /// Nobody: a oneway.
    Oneway,
    /// The calling thread: a deferred answer is waited for, as a bound participant.
    Thread,
    /// A task, through this slot (an asynchronous call, a
    /// [`ReplyFuture`](crate::ReplyFuture)): a deferred answer completes the slot later
    /// ([`LocalAnswer::Later`]) instead of being waited for on the calling thread.
    Task(&'a Arc<crate::lf::TaskSlot>),
}

impl LocalCaller<'_> {
    /// Whether an answer is expected.
    pub(crate) fn twoway(self) -> bool {
        !matches!(self, LocalCaller::Oneway)
    }
}

/// What a collocated call returned.
pub(crate) enum LocalAnswer {
    /// The reply (`None`: a oneway), as if it had come over a connection.
    Now(Option<Reply>),
    /// The servant deferred its answer in an asynchronous call: it completes the task's slot
    /// unless the caller gives up first (see [`LocalDeferred`]).
    Later(LocalDeferred),
}

/// A deferred answer of an asynchronous collocated call, still to come. Whoever sets
/// `claimed` first owns the outcome: the answer (which then completes the task's slot) or the
/// caller giving up (deadline, drop), which marks the request cancelled through `ctx`.
#[derive(Debug)]
pub(crate) struct LocalDeferred {
    pub(crate) claimed: Arc<std::sync::atomic::AtomicBool>,
    pub(crate) ctx: Context,
}

impl LocalDeferred {
    /// The caller gives up: true if the answer had not come (the request is then marked
    /// cancelled, and a later answer is dropped and counted).
    pub(crate) fn give_up(&self) -> bool {
        if self.claimed.swap(true, Ordering::AcqRel) {
            return false;
        }
        self.ctx.cancel();
        true
    }
}

/// The ORB's upcalls: those parked for a pool thread, and how many run.
///
/// Invariants: `running` counts the upcalls between [`started`](Self::started) and
/// [`finished`](Self::finished), each called once per upcall (a deferred upcall runs until
/// its reply handle answers, so shutdown's grace period waits for deferred replies too); a parked upcall is taken by one
/// thread or dropped at shutdown, never both; once shutdown started, the last upcall to finish
/// wakes [`wait_idle`](Self::wait_idle), and nothing else does (no wake-up per call).
#[derive(Debug, Default)]
pub(crate) struct Upcalls {
    /// Requests read by a bound leader that it will not run itself (nested upcalls disabled,
    /// or another call chain's request), waiting for a pool thread.
    parked: Queue<Upcall>,
    /// Requests read by a pool thread that it handed, with the leader role, to the bound
    /// thread waiting in the request's call chain (`Lf::step_down_for`): that thread runs
    /// them, or passes them to `parked` if it leaves the pool first.
    addressed: Queue<Upcall>,
    running: AtomicUsize,
    idle: (Mutex<()>, Condvar),
}

impl Upcalls {
    /// Leaves `u` for a pool thread.
    pub(crate) fn park(&self, u: Upcall) {
        self.parked.push_back(u);
    }

    /// A parked upcall, for a pool thread to run.
    pub(crate) fn take_parked(&self) -> Option<Upcall> {
        self.parked.pop_front()
    }

    pub(crate) fn has_parked(&self) -> bool {
        !self.parked.is_empty()
    }

    /// Drops the parked upcalls (at shutdown, once no thread is left to run them).
    pub(crate) fn clear_parked(&self) {
        self.parked.clear();
        self.addressed.clear();
    }

    /// Sets `u` aside for the bound thread of its call chain.
    pub(crate) fn address(&self, u: Upcall) {
        self.addressed.push_back(u);
    }

    /// The request set aside for the thread of call chain `chain`, if any (asked on every
    /// turn of a bound leader: no lock when none is).
    #[inline]
    pub(crate) fn take_addressed(&self, chain: u64) -> Option<Upcall> {
        if self.addressed.is_empty() {
            return None;
        }
        self.addressed.take_first(|u| u.chain == Some(chain))
    }

    /// Passes the requests set aside for call chain `chain` to the pool threads (their
    /// thread leaves the pool without having run them); says whether there were any.
    #[inline]
    pub(crate) fn release_addressed(&self, chain: u64) -> bool {
        let mut any = false;
        while let Some(u) = self.take_addressed(chain) {
            self.parked.push_back(u);
            any = true;
        }
        any
    }

    /// An upcall was read and will run.
    pub(crate) fn started(&self) {
        self.running.fetch_add(1, Ordering::AcqRel);
    }

    /// An upcall ended; `shutting_down` says whether a `wait_idle` may be waiting.
    pub(crate) fn finished(&self, shutting_down: impl FnOnce() -> bool) {
        if self.running.fetch_sub(1, Ordering::AcqRel) == 1 && shutting_down() {
            let (m, cv) = &self.idle;
            let _g = lock(m);
            cv.notify_all();
        }
    }

    /// Upcalls running now.
    pub(crate) fn running(&self) -> usize {
        self.running.load(Ordering::Acquire)
    }

    /// Waits until at most `own` upcalls run (the caller's own, if it shuts down from one)
    /// or `deadline` passes; false if upcalls still run then.
    pub(crate) fn wait_idle(&self, own: usize, deadline: Instant) -> bool {
        let (m, cv) = &self.idle;
        let mut g = lock(m);
        while self.running() > own {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            // Re-checked every 50 ms: `finished` notifies only once shutdown started.
            cv.wait_for(&mut g, left.min(Duration::from_millis(50)));
        }
        true
    }
}

thread_local! {
    /// Upcalls running on this thread's stack.
    static DEPTH: Cell<usize> = const { Cell::new(0) };
    /// Deadline of the upcall this thread is serving (nested calls inherit it).
    static DEADLINE: Cell<Option<Instant>> = const { Cell::new(None) };
    /// The call chain this thread's calls belong to (0: not chosen yet): its own while it
    /// serves no upcall, the request's while it serves one that carried a chain.
    static CHAIN: Cell<u64> = const { Cell::new(0) };
    /// Connections of the upcalls on this thread's stack, innermost last.
    /// (`None` for a collocated call's upcall, which came over no connection.)
    static UPCALL_CONNS: std::cell::RefCell<Vec<Option<Arc<Connection>>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The id of the connection whose request this thread is serving, if another ORB opened it
/// (0 otherwise): references in the request's parameters are marked with it (BiDir GIOP).
pub(crate) fn upcall_connection_id() -> u64 {
    UPCALL_CONNS.with(|c| match c.borrow().last() {
        Some(Some(conn)) if conn.origin == Origin::Inbound => conn.id,
        _ => 0,
    })
}

/// The call chain of the current thread's calls (see [`CallChain`](crate::giop::CallChain)): the chain of the upcall
/// it serves, else its own, chosen at random on first use.
pub(crate) fn current_chain() -> u64 {
    CHAIN.with(|c| match c.get() {
        0 => {
            use std::hash::BuildHasher;
            static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let n = N.fetch_add(1, Ordering::Relaxed);
            let id = std::collections::hash_map::RandomState::new()
                .hash_one((n, std::process::id()))
                .max(1);
            c.set(id);
            id
        }
        id => id,
    })
}

/// Upcalls running on the current thread.
pub(crate) fn current_depth() -> usize {
    DEPTH.with(Cell::get)
}

/// The deadline a nested call made from the current upcall inherits.
pub(crate) fn inherited_deadline() -> Option<Instant> {
    DEADLINE.with(Cell::get)
}

/// The connection of the innermost upcall this thread is serving that came over one, if
/// any (collocated upcalls above it are skipped: they hold no dispatch slot).
pub(crate) fn current_upcall_connection() -> Option<Arc<Connection>> {
    UPCALL_CONNS.with(|c| c.borrow().iter().rev().find_map(Clone::clone))
}

/// While alive, the current thread serves an upcall: one level deeper, its deadline
/// inherited by nested calls, its call chain (if the request carried one) carried on by
/// them, its connection the innermost. [`leave`](Self::leave) (or dropping it) restores what
/// was before.
pub(crate) struct Serving {
    depth: usize,
    outer_deadline: Option<Instant>,
    outer_chain: Option<u64>,
    /// Whether `leave` restored it already.
    left: bool,
}

impl Serving {
    /// Enters an upcall from `conn` (`None`: a collocated call) with `deadline` and
    /// `chain` (the depth before it: [`depth`](Self::depth)).
    ///
    /// The connection is kept on the thread's stack of upcall connections until `leave`
    /// gives it back: moved there, not cloned (two atomic read-modify-writes per upcall
    /// fewer).
    #[inline]
    pub(crate) fn enter(
        conn: Option<Arc<Connection>>,
        deadline: Option<Instant>,
        chain: Option<u64>,
    ) -> Serving {
        let depth = DEPTH.with(|d| {
            let v = d.get();
            d.set(v + 1);
            v
        });
        let outer_deadline = DEADLINE.with(|d| d.replace(deadline));
        // Nested calls made from here carry the request's chain, so that its callbacks
        // may run on the thread that waits for them.
        let outer_chain = chain.map(|id| CHAIN.with(|c| c.replace(id)));
        UPCALL_CONNS.with(|c| c.borrow_mut().push(conn));
        Serving {
            depth,
            outer_deadline,
            outer_chain,
            left: false,
        }
    }

    /// Leaves the upcall: restores what was before it and gives its connection back
    /// (`None` for a collocated call's, or if the thread's locals are being torn down).
    pub(crate) fn leave(mut self) -> Option<Arc<Connection>> {
        self.left = true;
        self.restore()
    }

    /// Pops this upcall's connection and restores the outer upcall's state.
    fn restore(&self) -> Option<Arc<Connection>> {
        let conn = UPCALL_CONNS
            .try_with(|c| c.borrow_mut().pop().flatten())
            .ok()
            .flatten();
        DEADLINE.with(|d| d.set(self.outer_deadline));
        if let Some(id) = self.outer_chain {
            CHAIN.with(|c| c.set(id));
        }
        DEPTH.with(|d| d.set(self.depth));
        conn
    }

    /// Upcalls that were running on this thread when this one entered.
    pub(crate) fn depth(&self) -> usize {
        self.depth
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        if !self.left {
            drop(self.restore());
        }
    }
}
