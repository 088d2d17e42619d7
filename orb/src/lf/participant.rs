//! The participant: one thread's presence in the pool, with its completion slot and the
//! per-thread spare that lets a caller reuse it. Split from the protocol (`super`) so the
//! protocol reads without the allocation details.

use crate::exception::SystemException;
use crate::giop::Reply;
use crate::sync::{lock, AtomicBool, Condvar, Mutex};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// How a bound participant's wait ended: its reply, `None` for a wait that needs no reply
/// (an outgoing queue drained below its bound), or the failure that ended it.
pub(crate) type Completion = Result<Option<Reply>, SystemException>;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// How many participant ids a thread takes from [`NEXT_ID`] at a time.
#[cfg(not(orb_loom))]
const ID_BLOCK: u64 = 1 << 16;

/// A participant id no other participant has had. A caller takes one per call: each thread
/// takes them from its own block, so that a call makes no read-modify-write on the shared
/// counter (one per call before, a locked instruction).
fn next_id() -> u64 {
    #[cfg(not(orb_loom))]
    {
        thread_local! {
            /// The next id of this thread's block, and the block's end.
            static IDS: std::cell::Cell<(u64, u64)> = const { std::cell::Cell::new((0, 0)) };
        }
        let from_block = IDS.try_with(|ids| {
            let (next, end) = ids.get();
            if next < end {
                ids.set((next + 1, end));
                return next;
            }
            let base = NEXT_ID.fetch_add(ID_BLOCK, Ordering::Relaxed);
            ids.set((base + 1, base + ID_BLOCK));
            base
        });
        if let Ok(id) = from_block {
            return id;
        }
    }
    // A thread whose locals are gone (exiting), or loom's model.
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

#[cfg(not(orb_loom))]
thread_local! {
    /// This thread's bound participants from its last calls (one per level of the deepest
    /// nesting), for its next ones.
    static SPARE: crate::spare::Spares<Arc<Participant>> = const { crate::spare::Spares::new() };
    /// This thread's participant from its last turn (`Orb::turn`), for its next one.
    static TURN_SPARE: std::cell::Cell<Option<Arc<Participant>>> = const { std::cell::Cell::new(None) };
}

/// One thread's presence in the pool (for one wait).
#[derive(Debug)]
pub(crate) struct Participant {
    pub(crate) id: u64,
    /// A pool thread that only serves (no reply to wait for).
    pub(crate) unbound: bool,
    /// An event-loop driver's turn (`Orb::turn`; unbound too): the replies it hands out wake
    /// tasks that run only after the turn, so it holds no writes for them.
    pub(crate) turn: bool,
    pub(super) cv: Condvar,
    pub(super) slot: Mutex<Option<Completion>>,
    /// Whether `slot` holds a completion: written under the slot's lock, read without it
    /// (callers check it after every frame and before every sleep; a lock and an unlock are
    /// the dearest instructions on that path).
    pub(super) done: AtomicBool,
    /// The request id this (bound) participant waits for, plus one; 0 for none. Only a hint
    /// for its own thread (see [`awaits`](Self::awaits)).
    awaited: AtomicU64,
    /// The call chain of the call this (bound) participant waits in; 0 for none. Written by
    /// its thread before it joins the pool, read under the promotion lock
    /// (`Lf::step_down_for`).
    chain: AtomicU64,
}

impl Participant {
    /// A participant waiting for a reply: this thread's spare one (see
    /// [`recycle`](Self::recycle)) with a fresh id, or a new one.
    pub(crate) fn bound() -> Arc<Self> {
        #[cfg(not(orb_loom))]
        if let Some(mut p) = SPARE.with(|s| s.take()) {
            if let Some(q) = Arc::get_mut(&mut p) {
                q.id = next_id();
                *q.slot.get_mut() = None;
                q.done = AtomicBool::new(false);
                *q.awaited.get_mut() = 0;
                *q.chain.get_mut() = 0;
                return p;
            }
        }
        Arc::new(Self::new(false))
    }

    /// Keeps a bound participant whose wait is over as this thread's spare, if nothing else
    /// holds it any more (the pending map, the pool's lists and the thread that completed it
    /// have all let go): a caller then allocates no participant per call. Asked with a load
    /// of the count, not `Arc::get_mut` (a locked compare-exchange per call): [`bound`]
    /// makes sure it is the only holder before it reuses the participant, and empties its
    /// slot. The slot is empty here anyway: a completion is taken before the caller recycles
    /// ([`finish`](Self::finish)), and a caller that read its own reply had none.
    ///
    /// [`bound`]: Self::bound
    pub(crate) fn recycle(p: Arc<Self>) {
        #[cfg(not(orb_loom))]
        if !p.unbound && Arc::strong_count(&p) == 1 {
            SPARE.with(|s| s.put(p));
        }
        #[cfg(orb_loom)]
        drop(p);
    }

    /// Notes the request id whose reply this participant will wait for.
    pub(crate) fn will_await(&self, request_id: u32) {
        self.awaited
            .store(u64::from(request_id) + 1, Ordering::Relaxed);
    }

    /// Whether a reply with `request_id` is (probably) the one this participant waits for:
    /// ids are per connection, so another connection's reply may match too. Only for
    /// choices that are safe either way.
    pub(crate) fn awaits(&self, request_id: u32) -> bool {
        self.awaited.load(Ordering::Relaxed) == u64::from(request_id) + 1
    }

    /// Notes the call chain of the call this participant will wait in (see
    /// `Lf::step_down_for`).
    pub(crate) fn in_chain(&self, chain: u64) {
        self.chain.store(chain, Ordering::Relaxed);
    }

    /// The call chain noted with [`in_chain`](Self::in_chain) (0: none).
    pub(crate) fn chain(&self) -> u64 {
        self.chain.load(Ordering::Relaxed)
    }

    /// A pool thread.
    pub(crate) fn unbound() -> Arc<Self> {
        Arc::new(Self::new(true))
    }

    /// A participant for one turn of an event-loop driver: this thread's spare one from its
    /// last turn (a turn leaves nothing behind in it: it waits for nothing and is in no list
    /// once the turn is over), or a new one. Give it back with
    /// [`recycle_turn`](Self::recycle_turn).
    pub(crate) fn for_turn() -> Arc<Self> {
        #[cfg(not(orb_loom))]
        if let Some(p) = TURN_SPARE.take() {
            return p;
        }
        let mut p = Self::new(true);
        p.turn = true;
        Arc::new(p)
    }

    /// Keeps a turn's participant for this thread's next turn, if nothing else holds it.
    pub(crate) fn recycle_turn(p: Arc<Self>) {
        #[cfg(not(orb_loom))]
        {
            let mut p = p;
            if p.turn && Arc::get_mut(&mut p).is_some() {
                TURN_SPARE.set(Some(p));
            }
        }
        #[cfg(orb_loom)]
        drop(p);
    }

    fn new(unbound: bool) -> Self {
        Participant {
            id: next_id(),
            unbound,
            turn: false,
            cv: Condvar::new(),
            slot: Mutex::new(None),
            done: AtomicBool::new(false),
            awaited: AtomicU64::new(0),
            chain: AtomicU64::new(0),
        }
    }

    /// Whether the reply (or a failure) has been handed to this participant.
    pub(crate) fn is_complete(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    /// The end of a bound wait that completed: waits out the short window between whoever
    /// removed this participant's entry and its filling the slot (no lock or wait in
    /// between), takes the completion, and keeps the participant as this thread's spare.
    pub(crate) fn finish(p: Arc<Self>) -> Option<Completion> {
        while !p.is_complete() {
            std::thread::yield_now();
        }
        let completion = p.take();
        Self::recycle(p);
        completion
    }

    /// Takes the completion out of the slot.
    pub(crate) fn take(&self) -> Option<Completion> {
        let mut slot = lock(&self.slot);
        self.done.store(false, Ordering::Release);
        slot.take()
    }
}
