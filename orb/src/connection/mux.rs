//! The reply-routing table of one multiplexed connection: request-id allocation, the waiters
//! for replies, late replies, and the drain on close. It is the only place a reply is routed
//! (TAO's `Muxed_TMS`): callers register here before they send, the leader routes each reply
//! here, a caller that gives up forgets its entry here, and a close drains it here.
//!
//! Sans-I/O and generic over the waiter `W`, so its invariants are tested with plain values.

use super::idmap::IdMap;
use crate::sync::{lock, Mutex};
use std::sync::atomic::{AtomicU32, Ordering};

/// Request id → waiter, for one connection.
///
/// Invariants, kept by its methods alone:
/// - Ids step by 2 from the first one, so they keep the parity chosen at creation (even on
///   connections we opened, odd on ones the peer opened: the BiDir rule, WIRE-GIOP §5.1).
/// - A waiter leaves the table exactly once: routed to by its reply, forgotten by its caller
///   (a blocking call that timed out, a dropped future), expired by its deadline (a future's,
///   fired by the leader), or drained by the close, whichever comes first. So it is
///   completed at most once, and a reply whose waiter left is late: dropped and counted.
/// - The waiter `W` is, in the ORB, a thread (a bound participant, woken through the pool)
///   or a task (a future's slot, woken through its `Waker`); the table treats both alike.
/// - Once closed, nothing is registered: a caller learns at once that the connection is gone,
///   instead of waiting for a reply that cannot come.
#[derive(Debug)]
pub(crate) struct Mux<W> {
    next_id: AtomicU32,
    table: Mutex<Table<W>>,
}

#[derive(Debug)]
struct Table<W> {
    waiters: IdMap<W>,
    closed: bool,
}

/// Why [`Mux::register`] refused a waiter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Closed;

impl<W> Mux<W> {
    /// An empty table whose first request id is `first` (its parity is kept).
    pub(crate) fn new(first: u32) -> Self {
        Mux {
            next_id: AtomicU32::new(first),
            table: Mutex::new(Table {
                waiters: IdMap::new(),
                closed: false,
            }),
        }
    }

    /// A fresh request id, for a request that expects no reply (oneway, CancelRequest's own
    /// id is the cancelled one's).
    pub(crate) fn next_id(&self) -> u32 {
        let _t = lock(&self.table);
        self.take_id()
    }

    /// The next id, taken. Only under the table's lock, which makes the load and the store
    /// one step (a two-way call takes its id with its registration, under the lock it takes
    /// anyway: no read-modify-write of its own).
    fn take_id(&self) -> u32 {
        let id = self.next_id.load(Ordering::Relaxed);
        self.next_id.store(id.wrapping_add(2), Ordering::Relaxed);
        id
    }

    /// The next request id, without taking it (the idle sweep's sign of outgoing requests).
    pub(crate) fn ids_used(&self) -> u32 {
        self.next_id.load(Ordering::Relaxed)
    }

    /// Registers a waiter for the reply to a new request, before the request is sent (the
    /// reply can arrive first), and returns the request's id: `waiter` is given the id and
    /// returns the waiter. Refused once the connection is closed (`waiter` is not called).
    pub(crate) fn register(&self, waiter: impl FnOnce(u32) -> W) -> Result<u32, Closed> {
        let mut t = lock(&self.table);
        if t.closed {
            return Err(Closed);
        }
        let id = self.take_id();
        t.waiters.insert(id, waiter(id));
        Ok(id)
    }

    /// The waiter of the reply to request `id`, taken out of the table: the reply goes to it.
    /// `None` for a late reply (its caller gave up) or an id we never sent: drop it.
    pub(crate) fn route(&self, id: u32) -> Option<W> {
        lock(&self.table).waiters.remove(id)
    }

    /// A caller that gives up (timeout, a failed send) takes its waiter back. False if it was
    /// gone already: its reply or the close is completing it right now.
    pub(crate) fn forget(&self, id: u32) -> bool {
        lock(&self.table).waiters.remove(id).is_some()
    }

    /// The waiter of request `id`, taken out of the table because its deadline passed (an
    /// asynchronous call's, fired by the leader's timers): it is to be failed with TIMEOUT.
    /// `None` if its reply, its caller or the close took it first.
    pub(crate) fn expire(&self, id: u32) -> Option<W> {
        lock(&self.table).waiters.remove(id)
    }

    /// Whether no reply is awaited.
    pub(crate) fn is_idle(&self) -> bool {
        lock(&self.table).waiters.is_empty()
    }

    /// Closes the table and takes every waiter out of it, for the close to complete with its
    /// error. Later registrations are refused; a second close returns nothing.
    pub(crate) fn close(&self) -> Vec<W> {
        let mut t = lock(&self.table);
        t.closed = true;
        t.waiters.drain()
    }
}

#[cfg(all(test, not(orb_loom)))]
mod tests {
    use super::*;

    #[test]
    fn ids_keep_their_parity_and_never_repeat() {
        for first in [1, 2] {
            let m: Mux<()> = Mux::new(first);
            let ids: Vec<u32> = (0..1000).map(|_| m.next_id()).collect();
            assert!(ids.iter().all(|id| id % 2 == first % 2));
            let mut sorted = ids.clone();
            sorted.dedup();
            assert_eq!(sorted.len(), ids.len());
            assert_eq!(m.ids_used(), first + 2000);
        }
    }

    /// Ids taken with a registration (two-way calls) and alone (oneways), by many threads at
    /// once, are all different.
    #[test]
    fn ids_taken_by_many_threads_never_repeat() {
        let m: std::sync::Arc<Mux<()>> = std::sync::Arc::new(Mux::new(2));
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let m = m.clone();
                std::thread::spawn(move || {
                    (0..2000)
                        .map(|i| {
                            if (t + i) % 3 == 0 {
                                m.next_id()
                            } else {
                                m.register(|_| ()).expect("open")
                            }
                        })
                        .collect::<Vec<u32>>()
                })
            })
            .collect();
        let mut ids: Vec<u32> = threads
            .into_iter()
            .flat_map(|t| t.join().expect("thread"))
            .collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), 8 * 2000);
        assert!(ids.iter().all(|id| id % 2 == 0));
    }

    /// Past 16 outstanding calls the list becomes a map and, emptied, a list again: every
    /// reply still reaches its own waiter once, in any order, and an unknown id finds none.
    #[test]
    fn replies_reach_their_waiters_across_the_list_and_the_map() {
        let m = Mux::new(2);
        for round in 0..3u32 {
            let n = [3, 17, 80][round as usize];
            let ids: Vec<u32> = (0..n)
                .map(|i| m.register(|id| (round, i, id)).unwrap())
                .collect();
            assert_eq!(m.route(1), None, "an odd id was never ours");
            // Every other one first, then the rest backwards.
            let order = ids
                .iter()
                .step_by(2)
                .chain(ids.iter().skip(1).step_by(2).rev());
            for &id in order {
                let (r, i, got) = m.route(id).expect("its waiter");
                assert_eq!((r, got), (round, id), "waiter {i} got another's reply");
                assert_eq!(m.route(id), None, "routed twice");
            }
            assert!(m.is_idle());
        }
    }

    #[test]
    fn a_reply_reaches_its_own_waiter_once() {
        let m = Mux::new(2);
        let a = m.register(|_| "a").unwrap();
        let b = m.register(|_| "b").unwrap();
        assert_eq!(b, a + 2);
        assert_eq!(m.route(b), Some("b"));
        assert_eq!(m.route(b), None, "a second reply with the same id is late");
        assert_eq!(m.route(a), Some("a"));
        assert!(m.is_idle());
    }

    #[test]
    fn a_forgotten_waiter_makes_its_reply_late() {
        let m = Mux::new(2);
        let id = m.register(|_| 7).unwrap();
        assert!(m.forget(id));
        assert_eq!(m.route(id), None);
        assert!(!m.forget(id), "forgetting twice finds nothing");
    }

    #[test]
    fn an_expired_waiter_is_handed_out_once_and_its_reply_is_late() {
        // An asynchronous call's deadline: the leader takes the waiter to fail it; the
        // future's drop, the reply and the close then find nothing.
        let m = Mux::new(2);
        let id = m.register(|_| 7).unwrap();
        assert_eq!(m.expire(id), Some(7));
        assert_eq!(m.expire(id), None);
        assert!(!m.forget(id));
        assert_eq!(m.route(id), None);
        assert!(m.close().is_empty());
    }

    #[test]
    fn a_routed_waiter_cannot_be_forgotten() {
        // The reply won the race: the caller that gives up must wait for that completion.
        let m = Mux::new(2);
        let id = m.register(|_| 7).unwrap();
        assert_eq!(m.route(id), Some(7));
        assert!(!m.forget(id));
    }

    #[test]
    fn close_drains_every_waiter_once_and_refuses_new_ones() {
        let m = Mux::new(1);
        let ids: Vec<u32> = (0..5u32).map(|k| m.register(|_| k).unwrap()).collect();
        let mut drained: Vec<u32> = m.close().into_iter().map(|k| ids[k as usize]).collect();
        drained.sort_unstable();
        assert_eq!(drained, ids);
        assert!(m.close().is_empty());
        assert_eq!(m.register(|_| 0), Err(Closed));
        assert_eq!(m.route(ids[0]), None);
        assert!(m.is_idle());
    }
}

#[cfg(all(test, orb_loom))]
mod loom_tests {
    //! The table's one promise under every interleaving: a waiter leaves it exactly once,
    //! whether its reply, its caller giving up, or the close comes first.
    use super::*;
    use loom::sync::atomic::AtomicUsize;
    use loom::sync::Arc;

    #[test]
    fn a_waiter_leaves_the_table_exactly_once() {
        loom::model(|| {
            let m = Arc::new(Mux::new(2));
            let id = m.register(|_| ()).unwrap();
            let taken = Arc::new(AtomicUsize::new(0));
            let threads: Vec<_> = (0..3)
                .map(|k| {
                    let (m, taken) = (m.clone(), taken.clone());
                    loom::thread::spawn(move || {
                        let got = match k {
                            0 => m.route(id).is_some(),
                            1 => m.forget(id),
                            _ => !m.close().is_empty(),
                        };
                        if got {
                            taken.fetch_add(1, Ordering::SeqCst);
                        }
                    })
                })
                .collect();
            for t in threads {
                t.join().unwrap();
            }
            assert_eq!(taken.load(Ordering::SeqCst), 1);
            assert_eq!(m.register(|_| ()), Err(Closed));
        });
    }
}
