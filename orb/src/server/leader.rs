//! What the Leader/Followers leader does with the reactor: accept, read, route frames (replies
//! to their waiters, requests to upcalls), flush queued writes, close connections, and decide
//! which thread runs a request (`server/dispatch.rs` runs it).
//!
//! Cheap work (a reply hand-off, a CancelRequest, a LocateRequest, accepting) is done in the
//! leader role; anything that runs user code (a Request) is returned to the pool as an upcall,
//! so the pool promotes a follower first (Ice's `ioCompleted` lesson).
//!
//! **The leader never waits for a drain.** Two send paths, chosen by who sends:
//! [`send_now`](OrbInner::send_now) queues and returns (the leader's path: replies it makes
//! itself past the nesting limit, LocateReplies, MessageError), and
//! [`send_or_wait`](OrbInner::send_or_wait) waits, as a bound Leader/Followers participant
//! up to its deadline, for an over-full queue to drain before it queues (an upcall's reply, a
//! caller's request). A connection whose outgoing queue is over `max_queued_bytes` is not
//! read (`service` skips it, as it skips one paused at the dispatch limit) until a flush
//! brings it back under; so what the leader queues there is bounded too, by the replies to
//! the frames of one read.
//!
//! **Timers** (`timers.rs` holds them, `housekeeping.rs` runs them): the leader's poll timeout is the nearest of its own
//! deadline, the next idle sweep and an accept retry. The sweep (every quarter of
//! `idle_timeout`, so not per call) closes idle connections and drops stalled partial
//! messages; an accept that failed (out of file descriptors) is retried after a back-off,
//! since the connections left in the listen backlog raise no new readiness event.

//!
//! **Owned reads** ([`OrbBuilder::owned_reads`](crate::OrbBuilder::owned_reads)). Where the
//! leader would poll, it may instead wait in a connection's `recv` (`read_owned`): one system
//! call per message where the poll and the read are two, as omniORB's thread per connection
//! has it. It is still the leader reading (the role is the permission to read a socket), and
//! it holds the poll lock while it waits, so no one polls meanwhile. The rules, each closing a
//! way to miss an event:
//! - Only while the connection is the only one registered (listeners aside, but not while
//!   listening for a connection we opened, unless the peer has called us back over it: a
//!   process calling out expects callbacks, over a connection to its listener unless the
//!   peer takes them over this one, bidirectional GIOP), plain TCP,
//!   connected, with no bytes queued to send (their flush needs the writable event; so does
//!   the connect's completion) and no frame or large
//!   frame pending in its read state, and not for a turn of an event-loop driver (it must
//!   return) or a leader within `OWNED_DEADLINE_MARGIN` of its deadline.
//! - The socket is switched to blocking mode once, with a receive timeout
//!   (`stream::OWNED_WAIT`); every other read and write passes `MSG_DONTWAIT`.
//! - For the run, the socket leaves the poll set (`Reactor::park`: the kernel's callback
//!   into the set cost every message ~0.1 µs on each side), unless the standby is armed; any
//!   poll (but the looks that ask the parked socket itself), the standby's arming and a
//!   writer needing the writable event put it back, with what arrived meanwhile reported.
//!   While the owner is in an upcall with the role left vacant unarmed, a request on its
//!   connection waits for the owner or the standby's tick, as every event does in tick mode.
//! - What the wait does not hear (a new connection on a listener, a connection another thread
//!   registers, timers, the waker: shutdown, say) waits at most `reactor::OWNED_RUN` (a run of
//!   owned reads then ends with a look at the poll set) plus one receive timeout, rounded up to the kernel's
//!   tick. A close from another thread shuts the socket down, which ends the wait at once.
//! - A wait that brings no whole frame (the timeout, or a part of one) makes the leader poll
//!   until a read from the poll brings a frame (`ReadState::may_own`), so a peer that stalls
//!   or trickles costs the bound once, not on every turn.
//!
//! **A pool thread leads on after its upcall.** In tick mode (the pool leaves the role
//! vacant unarmed for a short upcall: `lf/standby.rs`), a pool thread that read a request
//! runs it within its turn and takes the role back right after
//! ([`Lf::serve_and_lead_on`](crate::lf::Lf::serve_and_lead_on)), the same steps under the
//! promotion lock as stepping down and coming back through the pool, so the turn goes on to
//! the connection it owns: a server answering one client's requests one after another reads,
//! runs and replies as a thread per connection would. Anything else (no tick mode, a caller
//! waiting, work pending, the role taken meanwhile) goes back to the pool as before.
//!
//! **A caller's own reply** ([`read_own_reply`](OrbInner::read_own_reply)). On a client that
//! does not listen, a caller that finds the role vacant makes that owned read itself, between
//! its send and the pool: if the frame is its reply, it returns it and leaves, without the
//! loop above, the hand-over through its participant's slot or the pool's exit steps (the
//! whole wait of an idle client's call). Any other frame is handled as the loop would, and
//! the caller then waits in the pool.

use crate::connection::{CloseCause, Connection, Origin, ReadError, MAX_LISTEN_POINTS};
use crate::exception::{minor, CompletionStatus, SystemException, SystemExceptionKind};
use crate::giop::{
    context_id, write_locate_reply, write_message_error, BiDirListenPoints, Deadline, Frame,
    FrameError, LocateStatus, Message, Reply, TargetAddress, Version,
};
use crate::lf::{Driver, Lead, OwnReply, Participant, Until};
use crate::metadata::Metadata;
use crate::orb::OrbInner;
use crate::reactor::{Entry, Own, Owning, Ready};
use crate::servant::Context;
use crate::server::dispatch::ReplyBody;
use crate::stats::add_as_leader;
use crate::upcall::{current_chain, current_depth, Upcall};
use bytes::{Bytes, BytesMut};
use std::os::fd::AsFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A leader whose deadline is this close polls rather than wait in an owned read, whose
/// receive timeout the kernel rounds up to its tick (up to 10 ms at 100 Hz).
const OWNED_DEADLINE_MARGIN: Duration = Duration::from_millis(20);

// Short-lived on the stack; boxing the upcall would add an allocation per request.
#[allow(clippy::large_enum_variant)]
enum Handled {
    Done,
    Upcall(Upcall),
    Parked,
}

impl Driver for OrbInner {
    type Upcall = Upcall;

    fn lead(&self, p: &Arc<Participant>, until: Option<Until>) -> Lead<Upcall> {
        // The connection whose writes this leader holds while it hands out replies: each
        // caller it wakes sends its next request at once, and those go out in one `writev`
        // when the leader is done with the batch (before it reads, polls or leaves).
        let mut held = None;
        loop {
            if p.unbound {
                if let Some(u) = self.upcalls.take_parked() {
                    return Lead::Upcall(u);
                }
            } else if p.chain() != 0 {
                // A callback of this thread's call, handed over with the role by the pool
                // thread that read it (`Lf::step_down_for`).
                if let Some(u) = self.upcalls.take_addressed(p.chain()) {
                    return Lead::Upcall(u);
                }
            }
            let mut unbounded = usize::MAX;
            let lead = self.lead_holding(p, until, &mut held, false, &mut unbounded);
            self.release_writes(&mut held);
            // A pool thread in tick mode runs the request it read and leads on from here
            // (reading on the connection it owns, as a thread per connection would).
            match lead {
                Lead::Upcall(u) if p.unbound => match self.lf.serve_and_lead_on(p, u, self) {
                    Ok(true) => {}
                    Ok(false) => return Lead::Served,
                    Err(u) => return Lead::Upcall(u),
                },
                lead => return lead,
            }
        }
    }

    fn run_upcall(&self, u: Upcall) {
        self.upcall(u);
    }

    fn take_parked(&self) -> Option<Upcall> {
        self.upcalls.take_parked()
    }

    fn has_parked(&self) -> bool {
        self.upcalls.has_parked()
    }

    fn upcall_chain(&self, u: &Upcall) -> Option<u64> {
        // Without nested upcalls a thread waiting for a reply runs none.
        u.chain.filter(|_| self.config.nested_upcalls)
    }

    fn address_upcall(&self, u: Upcall) {
        self.upcalls.address(u);
    }

    fn release_addressed(&self, chain: u64) -> bool {
        self.upcalls.release_addressed(chain)
    }

    fn take_addressed(&self, chain: u64) -> Option<Upcall> {
        self.upcalls.take_addressed(chain)
    }

    fn wake_leader(&self) {
        self.reactor.wake();
    }

    fn wake_event_loop(&self) {
        self.reactor.wake_watcher();
    }

    fn supports_standby(&self) -> bool {
        true
    }

    fn wait_standby(&self, timeout: Option<Duration>) {
        // An asynchronous call's deadline needs a leader to fire even when no event comes
        // (the role may be vacant with this standby armed): the reactor's alarm, in the
        // standby's poll set too, wakes it then.
        self.reactor.wait_standby(timeout);
    }

    fn wake_standby(&self) {
        self.reactor.wake_standby();
    }

    fn arm_standby(&self, on: bool) -> bool {
        if on {
            // Under the promotion lock: one writer at a time.
            add_as_leader(&self.stats.standby_arms, 1);
        }
        self.reactor.arm_standby(on)
    }

    fn calls_unwatched(&self) -> bool {
        self.call_deadlines.next_due().is_some() || !self.listen_addrs.is_empty()
    }

    fn has_pending_work(&self) -> bool {
        self.reactor.has_ready() || self.upcalls.has_parked()
    }

    fn cover_deadline(&self, deadline: Instant) -> bool {
        self.reactor.alarm_covers(deadline)
    }

    fn events_waiting(&self) -> bool {
        if self.reactor.has_ready() {
            return true;
        }
        let mut first = None;
        let polled = self.reactor.poll_now(
            |c| Some(c.socket().as_fd()),
            |ev| self.handle_ready(ev, &mut first),
        );
        if let Some(c) = first {
            self.reactor.push_ready(c);
        }
        if polled.alarm {
            // Taken here, where no timer may run: armed again for the timers and the
            // waiting callers' deadlines left (the leader's next poll, woken, runs those
            // that are due).
            self.rearm_alarm();
        }
        let found = polled.events > 0;
        if found {
            // A thread may have taken the role meanwhile and be about to wait in the poll,
            // where the events taken here would raise nothing again (issue 16, scenario 8;
            // modelled in `lf::loom_tests::tick_mode_look_at_the_loop_strands_no_event`).
            self.reactor.wake();
        }
        found
    }

    fn count_promotion(&self) {
        self.stats.leader_promotions.fetch_add(1, Ordering::Relaxed);
    }

    fn count_wakeup(&self) {
        self.stats.follower_wakeups.fetch_add(1, Ordering::Relaxed);
    }

    fn count_reclaim(&self) {
        self.stats.leader_reclaims.fetch_add(1, Ordering::Relaxed);
    }

    fn count_tick_takeover(&self) {
        self.stats
            .standby_tick_takeovers
            .fetch_add(1, Ordering::Relaxed);
    }
}

/// Replies a batch's hold lets queue before the next dispatch of its read writes them
/// ([`OrbInner::hold_for_batch`]): a count, unlike `reply_batch_hold`'s time, that does not
/// depend on how fast this machine dispatches. With 8 on the benchmarks' 2-vCPU VM, against a
/// time limit alone of 10 µs: `tput-async 1000` 542k → 584k calls/s, `tput 32` split
/// placement 142k → 148k, unpinned 143k → 147k (medians of five interleaved rounds; 4 and
/// 12 did worse on one of the three: examples/bench/PROFILE.md, 2026-12-08 00:20).
const BATCH_REPLIES: usize = 8;

impl OrbInner {
    /// [`Driver::lead`] for a turn of an event-loop driver that keeps the writes it holds
    /// past the turn (`protorb::tokio`; see `Connection::keep_hold`): the replies
    /// it hands out wake tasks that run after the turn, and their requests queue in `held`
    /// until the driver ends the hold. `held` carries over from one call to the next.
    ///
    /// It hands out at most `replies_left` replies (counted down), and returns
    /// [`Lead::Idle`] at 0 with what is left on the ready list: see
    /// [`turn_keeping`](Self::turn_keeping).
    pub(super) fn lead_keeping(
        &self,
        p: &Arc<Participant>,
        until: Option<Until>,
        held: &mut Option<Arc<Connection>>,
        replies_left: &mut usize,
    ) -> Lead<Upcall> {
        if let Some(u) = self.upcalls.take_parked() {
            return Lead::Upcall(u);
        }
        self.lead_holding(p, until, held, true, replies_left)
    }

    /// The leader's loop ([`Driver::lead`]); `held` is the connection whose writes it holds,
    /// released before each read and poll unless `keep` (a driver's turn: see
    /// [`lead_keeping`](Self::lead_keeping)); it returns once it has handed out
    /// `replies_left` replies (counted down).
    fn lead_holding(
        &self,
        p: &Arc<Participant>,
        until: Option<Until>,
        held: &mut Option<Arc<Connection>>,
        keep: bool,
        replies_left: &mut usize,
    ) -> Lead<Upcall> {
        let mut polled = false;
        // The first connection the last poll reported, served straight from the poll rather
        // than through the ready list (whose lock and reference count cost more than the
        // rest of reading a small request); the others queue behind it on the list.
        let mut first = None;
        // An owned read in place of the poll: the permission (the poll lock) for `first`,
        // which the next `service` reads waiting; tried once per turn.
        let mut owning = None;
        let mut tried_own = false;
        // A driver's turn reads its one connection in place of the poll (`unpolled`: that
        // read is under way), once per turn.
        let (mut tried_unpolled, mut unpolled) = (false, false);
        loop {
            while let Some(conn) = first.take().or_else(|| self.reactor.pop_ready()) {
                let permit = owning.take();
                let mut own = false;
                let got = self.service(&conn, held, keep, permit.as_ref(), &mut own);
                if permit.is_some() && !own && got.is_none() {
                    // The connection would not be owned after all: poll.
                    polled = false;
                }
                if std::mem::take(&mut unpolled) && got.is_none() {
                    // No frame (no bytes, or a part): whatever woke the driver, the poll
                    // finds it.
                    polled = false;
                }
                // The poll lock, held through the wait.
                drop(permit);
                let Some((frame, buffered)) = got else {
                    continue;
                };
                if !keep {
                    let request = matches!(frame.message, Message::Request(_));
                    self.hold_for_batch(&conn, buffered, request);
                }
                let holding = held.as_ref().is_some_and(|h| Arc::ptr_eq(h, &conn));
                // Holding writes batches the requests of the callers this leader wakes; for
                // the leader's own reply (it leaves right after) it would only cost locks.
                let (for_others, reply) = match &frame.message {
                    // Not for a plain turn: the tasks it wakes run after it (a driver's
                    // turn keeps the hold for them).
                    Message::Reply(r) => (
                        (keep || !p.turn) && (p.unbound || !p.awaits(r.header.request_id)),
                        true,
                    ),
                    _ => (false, false),
                };
                if for_others && !holding {
                    self.release_writes(held);
                    if conn.hold_writes() {
                        *held = Some(conn.clone());
                    }
                }
                match self.handle_frame(conn, frame, p) {
                    Handled::Done => {
                        if !p.unbound && p.is_complete() {
                            return Lead::Idle;
                        }
                        if reply {
                            *replies_left = replies_left.saturating_sub(1);
                            if *replies_left == 0 {
                                // What is left waits on the ready list (`service` put the
                                // connection back if it has more).
                                if let Some(c) = first.take() {
                                    self.reactor.push_ready(c);
                                }
                                return Lead::Idle;
                            }
                        }
                    }
                    Handled::Upcall(u) => return Lead::Upcall(u),
                    Handled::Parked => return Lead::StepDown,
                }
            }
            if !keep {
                self.release_writes(held);
            }
            if polled || self.lf.is_shutdown() {
                return Lead::Idle;
            }
            if !keep && !p.turn && !std::mem::replace(&mut tried_own, true) {
                match self.may_own(until, &mut first) {
                    Own::Yes(permit, conn) => {
                        // The owned read stands for the turn's poll.
                        first = Some(conn);
                        owning = Some(permit);
                        polled = true;
                        continue;
                    }
                    Own::Looked(p) => {
                        // The look that ended a run of owned reads stands for the poll.
                        if p.alarm {
                            self.run_due_timers();
                        }
                        polled = true;
                        continue;
                    }
                    Own::No => {}
                }
            }
            if keep && !std::mem::replace(&mut tried_unpolled, true) {
                if let Some(conn) = self.sole_unpolled(until) {
                    first = Some(conn);
                    (polled, unpolled) = (true, true);
                    continue;
                }
            }
            let timeout = self.poll_timeout(until);
            crate::clock::forget_left();
            match self
                .reactor
                .poll(timeout, |ev| self.handle_ready(ev, &mut first))
            {
                // A timer is due: run it now, and re-arm the alarm, before an upcall among
                // the events takes this thread away (the standby's wake-up for the timers
                // left depends on the alarm).
                Ok(p) if p.alarm => self.run_due_timers(),
                Ok(_) => {}
                Err(e) => {
                    tracing::error!(error = %e, "poll failed");
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            polled = true;
        }
    }

    /// A bound caller's wait for its reply, first as a plain read of its own connection
    /// (`client/invoke.rs` calls it between the send and [`Lf::run_from`](crate::lf::Lf)):
    /// where the pool would make it leader and the leader's loop would own that connection
    /// anyway (one connection, plain TCP, no listener: see [`may_own`](Self::may_own)), it
    /// takes the role if it is vacant, reads one frame waiting in `recv`, and returns it if
    /// it is the reply to `request_id` on `conn`. That is the whole of a call's wait on an
    /// idle client, without the general loop, the reply's hand-over through the
    /// participant's slot or the pool's exit steps: about 255 instructions, 4 atomic
    /// read-modify-writes and 75 lines of hot code fewer per `lat` call on the client
    /// (PROFILE.md, 2026-11-28).
    ///
    /// Anything else goes the general way, as the leader would take it: another caller's
    /// reply is routed to it, a request becomes an upcall run (or handed on) as the pool
    /// runs one ([`Lf::follow`](crate::lf::Lf)), and the caller then waits in the pool,
    /// still leading if it led. Not for a process that listens (a caller announces itself
    /// there for callbacks, which the pool's wait takes back: `Lf::coming`) nor within an
    /// upcall (its role goes back to the upcall's pool when the call returns), nor while
    /// the deadline is within `OWNED_DEADLINE_MARGIN`.
    // Not inlined into the call: its frame (a frame read, a reply) would stay on the stack
    // under every nested upcall of a caller that waits in the pool instead.
    #[inline(never)]
    pub(crate) fn read_own_reply(
        &self,
        p: &Arc<Participant>,
        conn: &Arc<Connection>,
        request_id: u32,
        until: Until,
    ) -> OwnReply {
        // A reading left before the call (from the application) is not taken here.
        crate::clock::forget_left();
        if !self.config.owned_reads || !self.listen_addrs.is_empty() || current_depth() != 0 {
            return OwnReply::Wait(Some(until.now));
        }
        if !self.lf.try_lead(p, self) {
            // Someone leads (and reads the connection), or the pool is shut down.
            return OwnReply::Wait(Some(until.now));
        }
        let mut first = None;
        let mut held = None;
        let frame = match self.may_own(Some(until), &mut first) {
            Own::Yes(permit, c) if Arc::ptr_eq(&c, conn) => {
                let mut own = false;
                let got = self.service(&c, &mut held, false, Some(&permit), &mut own);
                // The poll lock, held through the wait.
                drop(permit);
                got
            }
            Own::Yes(_, c) => {
                // The only connection is not this call's any more (it closed): the loop
                // serves it.
                first = Some(c);
                None
            }
            Own::Looked(l) => {
                // The look that ended a run of owned reads found events (in `first` and
                // on the ready list, for the loop) or a timer.
                if l.alarm {
                    self.run_due_timers();
                }
                None
            }
            Own::No => None,
        };
        if let Some(c) = first.take() {
            self.reactor.push_ready(c);
        }
        let Some((frame, buffered)) = frame else {
            self.release_writes(&mut held);
            return OwnReply::Wait(None);
        };
        let request = matches!(frame.message, Message::Request(_));
        self.hold_for_batch(conn, buffered, request);
        let lead = match frame.message {
            // Taken out of the pending table here, as `handle_frame` would route it (if its
            // entry is gone, the connection failed meanwhile and completed it: then the
            // reply is a late one, which `handle_frame` drops and counts).
            Message::Reply(r)
                if r.header.request_id == request_id && conn.mux.route(request_id).is_some() =>
            {
                add_as_leader(&self.stats.replies_received, 1);
                self.release_writes(&mut held);
                // Nothing can be addressed to this caller's chain (`Lf::step_down_for`): it
                // was neither a follower nor `coming`.
                self.lf.leave_with_reply(p, self);
                return OwnReply::Read(Reply::unboxed(r));
            }
            _ => self.handle_frame(conn.clone(), frame, p),
        };
        self.release_writes(&mut held);
        match lead {
            Handled::Done => {}
            Handled::Upcall(u) => {
                self.lf.follow(p, Lead::Upcall(u), self);
            }
            Handled::Parked => {
                self.lf.follow(p, Lead::StepDown, self);
            }
        }
        OwnReply::Wait(None)
    }

    /// For a driver's turn: the one connection, marked readable, when reading it may stand
    /// for the poll (see `reactor.rs`, **Unpolled turns**): besides the reactor's own
    /// conditions, no timer due at the turn's clock reading and nothing that needs the
    /// connection's writable event. `None`: the turn polls.
    fn sole_unpolled(&self, until: Option<Until>) -> Option<Arc<Connection>> {
        let now = until.map_or_else(Instant::now, |u| u.now);
        if self.next_timer().is_some_and(|t| t <= now) {
            return None;
        }
        let conn = self.reactor.sole_unpolled(now, |c| {
            !c.is_closed()
                && !c.is_connecting()
                && !c.is_handshaking()
                && c.needs_no_writable_event()
        })?;
        conn.mark_readable(false);
        add_as_leader(&self.stats.unpolled_reads, 1);
        Some(conn)
    }

    /// Whether the leader may wait in a connection's `recv` in place of its poll (see the
    /// module docs): the permission, with the connection, or `None` (the leader polls).
    /// `service` makes the owned read, if the connection allows it.
    fn may_own(
        &self,
        until: Option<Until>,
        first: &mut Option<Arc<Connection>>,
    ) -> Own<'_, Arc<Connection>> {
        if !self.config.owned_reads
            || until.is_some_and(|u| u.closer_than(OWNED_DEADLINE_MARGIN))
            || !self.reactor.alarm_works()
        {
            return Own::No;
        }
        // The deadline's clock reading, taken just before this turn, if there is one. A
        // process that listens and waits on a connection it opened is calling out and
        // expects its peers to call back, typically over a connection to its listener
        // (`nest`'s first chain: each callback connection waited for the owned read's
        // timeout to be accepted), unless the peer has called back over this connection
        // already (bidirectional GIOP). A server reading its one client's connection owns it.
        self.reactor.try_own(
            until.map(|u| u.now),
            |conn, listening| !listening || conn.peer_calls_over_it(),
            |ev| self.handle_ready(ev, first),
        )
    }

    /// Before a request is dispatched: while more requests of the same read wait in
    /// `conn`'s buffer (`buffered`), their replies are held and go out together
    /// (`Connection::hold_for_batch`), in one `writev` instead of one each. The hold ends,
    /// writing what queued behind it, when the last of them is dispatched (before its
    /// upcall runs), when [`BATCH_REPLIES`] replies are queued behind it or it is older than
    /// `reply_batch_hold` at the next dispatch, before the connection's socket is read
    /// again, or when anyone sending on the connection must wait (a nested call, a full
    /// queue). So a reply waits at most for the next dispatch of the same read: behind one
    /// upcall that runs long after short ones, on a pool whose threads are all in upcalls
    /// (`OrbBuilder::reply_batch_hold`).
    ///
    /// Called for every frame taken (`request`: whether it is a Request): the last frame of
    /// a read ends the hold whatever it is (a Reply on a bidirectional connection, say), so
    /// that no hold outlives its read when no further read of the connection comes.
    fn hold_for_batch(&self, conn: &Arc<Connection>, buffered: bool, request: bool) {
        let hold = self.config.reply_batch_hold;
        if hold.is_zero() {
            return;
        }
        if !buffered {
            self.end_kept_hold(conn);
            return;
        }
        if !request {
            return;
        }
        let now = Instant::now();
        if conn.batch_hold_full(BATCH_REPLIES, hold, now) {
            self.end_kept_hold(conn);
        }
        conn.hold_for_batch(now);
    }

    /// Gives back the writer role taken in [`lead_holding`](Self::lead_holding), sending what
    /// the woken callers queued meanwhile.
    pub(crate) fn release_writes(&self, held: &mut Option<Arc<Connection>>) {
        if let Some(c) = held.take() {
            let r = c.release_writes(&self.stats, &self.reactor);
            self.after_write(&c, r);
        }
    }

    /// Marks a connection the poll reported readable and puts it in `first` if that is free,
    /// else on the ready list. (The leader polls only once the list is empty, so `first`
    /// does not overtake anything queued before the poll.)
    fn handle_ready(&self, ev: Ready<Arc<Connection>>, first: &mut Option<Arc<Connection>>) {
        match ev.entry {
            Entry::Listener(l) => self.accept_all(&l),
            Entry::Conn(c) => {
                if (c.is_connecting() || c.is_handshaking()) && !self.finish_connect(&c) {
                    return;
                }
                if ev.writable {
                    self.flush(&c);
                }
                if ev.readable || ev.read_closed {
                    c.mark_readable(ev.read_closed);
                    if first.is_none() {
                        *first = Some(c);
                    } else {
                        self.reactor.push_ready(c);
                    }
                }
            }
        }
    }

    /// Gets the next frame of a connection, reading the socket if none is decoded yet.
    /// Writes held by the leader are released before it reads the socket, so that a hold
    /// spans one read's worth of frames at most (unless `keep`: a driver's turn holds them
    /// to its end, as the tasks they are held for run only after it).
    ///
    /// With the permission of [`may_own`](Self::may_own), the read may be an owned one: if
    /// the connection allows it, its first `recv` waits for bytes, with the connection out of
    /// the poll set for the run (`Reactor::park`). `own` says on return whether it did.
    // Inlined into both callers (the leader's loop and `read_own_reply`): called, it and
    // what it inlines cost the server's loop ~150 instructions per request (callgrind.sh).
    #[inline(always)]
    fn service(
        &self,
        conn: &Arc<Connection>,
        held: &mut Option<Arc<Connection>>,
        keep: bool,
        permit: Option<&Owning<'_, Arc<Connection>>>,
        own: &mut bool,
    ) -> Option<(Frame, bool)> {
        let want_own = permit.is_some();
        if conn.is_closed() {
            return None;
        }
        // Reply batching on (`reply_batch_hold`): the holds below are this leader's to end.
        let batching = !self.config.reply_batch_hold.is_zero();
        if conn.dispatch.is_paused() {
            if batching {
                // Its other requests wait for a running upcall: their replies are not held.
                self.end_kept_hold(conn);
            }
            return None;
        }
        if conn.is_handshaking() && !self.finish_connect(conn) {
            // Its TLS handshake goes on (or failed, and closed it).
            return None;
        }
        let max = self.config.max_queued_bytes;
        if batching && conn.queued_bytes() > max {
            // A held queue drains only once the hold ends.
            self.end_kept_hold(conn);
        }
        if conn.queued_bytes() > max && conn.watch_drain(max) {
            // The peer does not read what we send: stop reading what it sends (its next
            // requests wait in its socket) until a flush brings the queue under its bound
            // (`after_write`). So the leader never waits for a drain, and what it queues
            // here is bounded too.
            conn.write_block.block();
            return None;
        }
        let mut rs = conn.read_state();
        let mut frame = rs.poll_frame();
        let mut eof = false;
        // Nothing queued to send either: its flush needs the writable event, which the
        // owned read would not hear.
        // Nor while it connects: its completion is a writable event too, and a `recv` on a
        // socket not yet connected fails.
        let owning = want_own
            && frame.is_none()
            && rs.may_own()
            && conn.queued_bytes() == 0
            && !conn.is_connecting()
            && conn.prepare_owned_read(&mut rs);
        if frame.is_none() && (owning || rs.maybe_readable()) {
            if !keep && (held.is_some() || (batching && conn.hold_is_kept())) {
                // The replies held for the last read's requests go out before the next
                // read (see `hold_for_batch`).
                drop(rs);
                self.release_writes(held);
                if batching {
                    self.end_kept_hold(conn);
                }
                rs = conn.read_state();
            }
            if let Some(permit) = permit.filter(|_| owning) {
                *own = true;
                // Nothing queued to send and no writable event wanted (a drain watch asks
                // for one with the queue empty), asked under the parking lock: a writer
                // that wants the event afterwards puts the socket back.
                self.reactor
                    .park(permit, conn, conn.socket(), conn.token, || {
                        conn.needs_no_writable_event()
                    });
                add_as_leader(&self.stats.owned_reads, 1);
            }
            let read = conn.read_available(&mut rs, &self.stats, owning);
            if let Some(minor) = rs.version_seen() {
                // Before the frames are handled: a frame that failed to decode counts too.
                conn.note_version(minor);
            }
            match read {
                Ok(true) => {}
                Ok(false) => {
                    eof = true;
                    if let Err(e) = rs.handle_eof() {
                        drop(rs);
                        self.protocol_error(conn, e);
                        return None;
                    }
                }
                Err(ReadError::Io(e)) => {
                    drop(rs);
                    if e.kind() == std::io::ErrorKind::InvalidData && conn.stream().tls().is_some()
                    {
                        // Records that do not decrypt, or TLS broken otherwise.
                        self.stats.tls_errors.fetch_add(1, Ordering::Relaxed);
                    }
                    self.close_connection(conn, CloseCause::Io(e.to_string()));
                    return None;
                }
                Err(ReadError::Frame(e)) => {
                    drop(rs);
                    self.protocol_error(conn, e);
                    return None;
                }
            }
            frame = rs.poll_frame();
            rs.note_read_gave_frame(frame.is_some());
        }
        conn.account_buffered(rs.buffered(), &self.stats);
        let buffered = rs.has_frames();
        let more = buffered || rs.maybe_readable();
        drop(rs);
        if conn.stream().wants_write_call() {
            // Reading made TLS records (an alert, a key update, session tickets) that the
            // socket did not take: the write path sends them and watches for writable.
            self.flush(conn);
        }
        if eof {
            if frame.is_none() {
                self.close_connection(conn, CloseCause::Io("closed by peer".into()));
                return None;
            }
            // Serve what arrived before the end, then close on the next visit.
            conn.mark_readable(false);
            self.reactor.push_ready(conn.clone());
        } else if more {
            self.reactor.push_ready(conn.clone());
        }
        frame.map(|f| (f, buffered))
    }

    /// Handles one frame read from `owned` (taken by value: an upcall keeps it, uncloned).
    // Inlined into both callers, as `service` is.
    #[inline(always)]
    fn handle_frame(&self, owned: Arc<Connection>, frame: Frame, p: &Arc<Participant>) -> Handled {
        let conn = &owned;
        let version = frame.version;
        match frame.message {
            Message::Reply(r) => {
                let id = r.header.request_id;
                let waiter = conn.mux.route(id);
                match waiter {
                    Some(w) => {
                        add_as_leader(&self.stats.replies_received, 1);
                        let r = Reply::unboxed(r);
                        self.lf.complete_waiter(&w, Ok(Some(r)), Some(p.id), self);
                    }
                    None => {
                        self.stats
                            .late_replies_dropped
                            .fetch_add(1, Ordering::Relaxed);
                        tracing::debug!(request_id = id, peer = %conn.peer, "late reply dropped");
                    }
                }
                Handled::Done
            }
            Message::Request(mut request) => {
                add_as_leader(&self.stats.requests_received, 1);
                if conn.note_request() {
                    // Whether the connection may be owned (`may_own`) depends on it.
                    self.reactor.ownable_changed();
                }
                if self.shutting_down.load(Ordering::Acquire) {
                    // Shutting down: no new work, so that the grace period is for the
                    // upcalls already running. Not processed, and the caller is told so.
                    let exc = SystemException::new(
                        SystemExceptionKind::TRANSIENT,
                        minor::SHUTTING_DOWN,
                        CompletionStatus::No,
                    );
                    self.refuse(conn, version, &request, exc);
                    return Handled::Done;
                }
                if self.config.bidir_accept && conn.origin == Origin::Inbound {
                    if let Some(data) = request.header.service_context.get(context_id::BI_DIR_IIOP)
                    {
                        if self.bidir_allowed(conn) {
                            self.accept_bidir(conn, data);
                        }
                    }
                }
                if current_depth() >= self.config.max_nesting_depth {
                    self.refuse(conn, version, &request, crate::orb::Orb::nesting_error());
                    return Handled::Done;
                }
                // The application's contexts, bounded (no allocation when there are none).
                let metadata =
                    match Metadata::boxed_from_contexts(&request.header.service_context.0) {
                        Ok(m) => m,
                        Err(e) => {
                            self.refuse(conn, version, &request, e);
                            return Handled::Done;
                        }
                    };
                self.dispatch_started(conn);
                self.upcalls.started();
                let h = &request.header;
                let (deadline, chain) = match h
                    .deadline_data()
                    .and_then(|d| Deadline::with_chain_from(d).ok())
                {
                    // The reading is left for the vacancy this upcall leaves (`clock.rs`).
                    Some((d, chain)) => (
                        Some(crate::clock::now_and_leave() + d.0),
                        chain.map(|c| c.0),
                    ),
                    None => (None, None),
                };
                let request_id = h.request_id;
                // Moved out of the header (nothing reads it there again), not cloned.
                let key = match &mut request.header.target {
                    TargetAddress::Key(k) => std::mem::take(k),
                    other => other.object_key().unwrap_or_default(),
                };
                let ctx = Context::for_upcall(
                    // Moved, not copied: the upcall reads it from the context.
                    std::mem::take(&mut request.header.operation),
                    key,
                    request_id,
                    (Some(conn.peer), conn.stream().peer_identity()),
                    deadline,
                    metadata,
                    &self.me_any,
                );
                if request.header.response_expected() {
                    conn.owed.start(request_id, ctx.clone());
                }
                let u = Upcall {
                    conn: owned,
                    version,
                    request,
                    ctx,
                    chain,
                };
                if !p.unbound {
                    if !self.config.nested_upcalls {
                        self.upcalls.park(u);
                        if self.lf.has_idle_unbound() {
                            return Handled::Parked;
                        }
                        return Handled::Done;
                    }
                    // A thread waiting for its own reply runs only requests of its own call
                    // chain (the callbacks it may be waiting for), unless no pool thread is
                    // free: an unrelated upcall would hold its reply up (TAO bug 3531b).
                    if u.chain != Some(current_chain()) && self.lf.has_idle_unbound() {
                        self.stats
                            .upcalls_handed_to_pool
                            .fetch_add(1, Ordering::Relaxed);
                        self.upcalls.park(u);
                        return Handled::Parked;
                    }
                }
                Handled::Upcall(u)
            }
            Message::CancelRequest { request_id } => {
                if conn.owed.cancel(request_id) {
                    self.stats.upcalls_cancelled.fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(request_id, "upcall cancelled by peer");
                }
                Handled::Done
            }
            Message::LocateRequest(lr) => {
                add_as_leader(&self.stats.requests_received, 1);
                let here = lr
                    .target
                    .object_key()
                    .is_some_and(|k| self.adapter.get(&k).is_some());
                let status = if here {
                    LocateStatus::ObjectHere
                } else {
                    LocateStatus::UnknownObject
                };
                let mut buf = BytesMut::with_capacity(24);
                write_locate_reply(&mut buf, version, lr.request_id, status, |_| {});
                let _ = self.send_now(conn, [buf.freeze(), Bytes::new()]);
                Handled::Done
            }
            Message::LocateReply(lr) => {
                // We send no LocateRequests; treat as a late reply.
                let _ = lr;
                self.stats
                    .late_replies_dropped
                    .fetch_add(1, Ordering::Relaxed);
                Handled::Done
            }
            Message::CloseConnection => {
                tracing::debug!(peer = %conn.peer, "peer sent CloseConnection");
                self.close_connection(conn, CloseCause::PeerClosed);
                Handled::Done
            }
            Message::MessageError => {
                tracing::warn!(peer = %conn.peer, "peer sent MessageError");
                self.close_connection(conn, CloseCause::PeerMessageError);
                Handled::Done
            }
        }
    }

    /// Whether the peer of `conn` may announce BiDir listen points: anyone over plain TCP
    /// (`bidir_accept` says the application trusts its network), and over TLS only a peer
    /// that presented a verified certificate whose identity `bidir_allow` (if set) allows.
    fn bidir_allowed(&self, conn: &Arc<Connection>) -> bool {
        if conn.stream().tls().is_none() {
            return true;
        }
        let allowed = match conn.stream().peer_identity() {
            None => false,
            Some(id) => self
                .config
                .bidir_allow
                .as_ref()
                .is_none_or(|rule| (rule.0)(&id)),
        };
        if !allowed {
            tracing::warn!(peer = %conn.peer, "BiDir listen points from an unauthenticated or refused TLS peer ignored");
        }
        allowed
    }

    /// Records the listen points a peer announced on a connection it opened: calls to those
    /// endpoints then go over this connection (with odd request ids) instead of a new one.
    /// Host strings are compared textually, as omniORB does (WIRE-GIOP §5.1).
    ///
    /// Notes the listen points a peer announced on a connection it opened (`bidir_accept`).
    /// They route nothing by themselves: only references that arrive over this connection
    /// and name one of them are called over it (see `OrbInner::bidir_route`), so a peer
    /// announcing another server's address cannot receive that server's calls. Takes no
    /// lock but the connection's own and the map of such connections: never the endpoint
    /// slots that a connecting caller holds.
    fn accept_bidir(&self, conn: &Arc<Connection>, data: &[u8]) {
        let points = match BiDirListenPoints::from_context_data(data) {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(peer = %conn.peer, error = %e, "malformed BI_DIR_IIOP context ignored");
                return;
            }
        };
        let offered = points.0.len();
        let added = conn.bidir_endpoints.announce(points.0);
        for ep in &added {
            tracing::debug!(peer = %conn.peer, host = %ep.0, port = ep.1, "bidirectional GIOP: references from this peer to this endpoint are called over its connection");
        }
        if offered > added.len() && conn.bidir_endpoints.len() >= MAX_LISTEN_POINTS {
            tracing::warn!(peer = %conn.peer, "more than {MAX_LISTEN_POINTS} BiDir listen points; ignoring the rest");
        }
        if !added.is_empty() {
            self.bidir_routes.admit(conn);
        }
    }

    /// Answers a request the leader will not run with `exc` (if it expects a reply): the
    /// leader's own reply, queued and never waited for.
    fn refuse(
        &self,
        conn: &Arc<Connection>,
        version: Version,
        request: &crate::giop::Request,
        exc: SystemException,
    ) {
        if request.header.response_expected() {
            let parts =
                self.reply_parts(version, request.header.request_id, ReplyBody::System(exc));
            let _ = self.send_now(conn, parts);
        }
    }

    fn protocol_error(&self, conn: &Arc<Connection>, e: FrameError) {
        self.stats.protocol_errors.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(peer = %conn.peer, error = %e, "protocol error; closing connection");
        if !matches!(e, FrameError::Io(_)) {
            // In the connection's version; a version we do not speak gets our highest
            // (CORBA 3.0 §15.4.1), as does a connection that sent nothing readable yet.
            let version = match e {
                FrameError::UnsupportedVersion(_) => Version::V1_2,
                _ => conn.version().unwrap_or(Version::V1_2),
            };
            let mut buf = BytesMut::with_capacity(12);
            write_message_error(&mut buf, version);
            if conn.send(buf.freeze(), &self.stats, &self.reactor).is_ok() {
                conn.flush_before_close(&self.stats, &self.reactor);
            }
        }
        self.close_connection(conn, CloseCause::Protocol(e.to_string()));
    }
}
