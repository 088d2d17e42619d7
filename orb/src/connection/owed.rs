//! The requests a connection's peer is owed a reply to: request id → the running upcall's
//! `Context`. One owner, so the rules that at-most-once shutdown and cancellation rest on are
//! kept in one place.

use super::idmap::IdMap;
use crate::servant::Context;
use crate::sync::plain::Mutex;
use crate::sync::plain_lock as lock;

/// Peer request id → the context of its upcall, from the moment the request is read until
/// its reply is sent (or dropped).
///
/// Invariants, kept by its methods alone:
/// - An entry lives until the reply has been handed to the connection ([`finish`](Self::finish)
///   is called after the send), so a shutdown that finds the table empty may send
///   CloseConnection without overtaking a reply: nothing is owed. A deferred reply
///   ([`ReplyHandle`](crate::ReplyHandle)) is owed until the handle answers, or its answer is
///   dropped.
/// - Only two-way requests are entered (a oneway owes nothing).
/// - Its size is bounded by the dispatch limit (requests are entered when dispatched, and a
///   deferred one keeps its dispatch slot until answered), and
///   the ids are the peer's, so the map's hash seed is random ([`IdMap`]).
#[derive(Debug, Default)]
pub(crate) struct Owed {
    map: Mutex<IdMap<Context>>,
}

impl Owed {
    /// A two-way request was dispatched: its reply is owed from now on.
    pub(crate) fn start(&self, request_id: u32, ctx: Context) {
        lock(&self.map).insert(request_id, ctx);
    }

    /// Its reply was sent (or dropped because it was cancelled): nothing is owed for it.
    #[inline]
    pub(crate) fn finish(&self, request_id: u32) {
        lock(&self.map).remove(request_id);
    }

    /// A CancelRequest for `request_id`: marks its upcall cancelled. False if no such reply
    /// is owed (finished already, or never ours).
    pub(crate) fn cancel(&self, request_id: u32) -> bool {
        match lock(&self.map).get(request_id) {
            Some(ctx) => {
                ctx.cancel();
                true
            }
            None => false,
        }
    }

    /// The connection closed: every upcall still running is cancelled (their replies have
    /// nowhere to go).
    pub(crate) fn cancel_all(&self) {
        for ctx in lock(&self.map).values() {
            ctx.cancel();
        }
    }

    /// Whether no reply is owed.
    pub(crate) fn is_empty(&self) -> bool {
        lock(&self.map).is_empty()
    }
}

#[cfg(all(test, not(orb_loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_reply_is_owed_from_start_to_finish() {
        let owed = Owed::default();
        assert!(owed.is_empty());
        let ctx = Context::for_test("op");
        owed.start(7, ctx.clone());
        assert!(!owed.is_empty());
        assert!(owed.cancel(7));
        assert!(ctx.is_cancelled());
        assert!(!owed.cancel(9), "a reply never owed");
        owed.finish(7);
        assert!(owed.is_empty());
        assert!(!owed.cancel(7), "finished: nothing left to cancel");
    }

    #[test]
    fn close_cancels_every_running_upcall() {
        let owed = Owed::default();
        let ctxs: Vec<Context> = (0..3).map(|_| Context::for_test("op")).collect();
        for (i, c) in ctxs.iter().enumerate() {
            owed.start(i as u32, c.clone());
        }
        owed.cancel_all();
        assert!(ctxs.iter().all(Context::is_cancelled));
    }
}
