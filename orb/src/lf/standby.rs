//! The standby (lazy promotion) and tick mode: the optimisation that spares a wake-up and
//! a context switch per upcall (see the module documentation in `super`). Kept apart from
//! the protocol proper; these are more `impl Lf` methods over the same promotion lock.

use super::{
    notify, Driver, Lf, Participant, State, Wake, IDLE_ARMS_FOR_TICK, LOOK_AFTER, LOOK_EVERY,
};
use crate::sync::{lock, MutexGuard};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

std::thread_local! {
    /// When this thread last left the leader role vacant unarmed for an upcall (tick mode):
    /// `user_code_done` asks how long its user code ran.
    static VACATED: std::cell::Cell<Option<Instant>> = const { std::cell::Cell::new(None) };
}

/// Whether this thread left the role vacant for an upcall less than `d` ago. False if it
/// never did (`user_code_done` also runs on threads that did not: they look). Under loom,
/// always false, so that what the model runs does not depend on the clock.
/// The clock reading is left for the thread's next turn (`clock.rs`): its owned read, which
/// follows the reply's send.
fn vacated_within(d: Duration) -> bool {
    !cfg!(orb_loom)
        && VACATED.with(|v| v.get()).is_some_and(|t| {
            // `now - t < d` as `now < t + d`: an inlined addition where the subtraction
            // is a call of ~40 instructions (callgrind).
            let now = crate::clock::now_and_leave();
            t.checked_add(d).is_none_or(|end| now < end)
        })
}

impl Lf {
    /// [`promote_locked`](Self::promote_locked), lazily, by a leader leaving for an upcall:
    /// in tick mode, with the standby ticking, nothing pending and no caller waiting for a
    /// reply, the role is left vacant unarmed (the standby's tick covers it, and the upcall
    /// thread comes back to lead). A caller's reply must not wait for a tick; a caller
    /// leaving with its own reply has rules of its own ([`promote_for_caller`]).
    ///
    /// [`promote_for_caller`]: Self::promote_for_caller
    pub(super) fn promote_for_upcall<D: Driver>(&self, st: &mut State, driver: &D) -> Wake {
        if self.vacate_unarmed(st, driver, false) {
            // No system call.
            return Wake::Nobody;
        }
        // Otherwise (also in tick mode while the standby is not ticking yet: see `retick`),
        // as before.
        self.promote_locked(st, driver, true)
    }

    /// Leaves the role vacant unarmed if tick mode allows: the standby ticking, nothing
    /// pending, no caller waiting for a reply, and for a `caller` leaving with its reply no
    /// asynchronous call in flight (`Driver::calls_unwatched`, read after the vacancy is
    /// marked: a call started meanwhile sees the mark, [`expect_event`](Self::expect_event)).
    /// True if it did.
    pub(super) fn vacate_unarmed<D: Driver>(
        &self,
        st: &mut State,
        driver: &D,
        caller: bool,
    ) -> bool {
        if !(st.tick_mode
            && st.ticking
            && st.standby.is_some()
            && !st.callers_waiting()
            && !driver.has_pending_work())
        {
            return false;
        }
        st.leader = None;
        // The reading the request's deadline took a moment ago, if it had one (`clock.rs`).
        let now = crate::clock::left_or_now();
        st.vacant_since = Some(now);
        if caller {
            self.tick_vacant.store(true, Ordering::SeqCst);
            if driver.calls_unwatched() {
                self.clear_vacancy(st);
                return false;
            }
        } else {
            self.tick_vacant.store(true, Ordering::Relaxed);
        }
        VACATED.with(|v| v.set(Some(now)));
        st.vacancies += 1;
        true
    }

    /// [`promote_locked`](Self::promote_locked) for a caller leaving with its reply
    /// ([`leave_with_reply`](Self::leave_with_reply)): the role left vacant unarmed as for
    /// an upcall, unless replies may come that no thread waits for. `user_code_done`'s rule
    /// for short upcalls (look once in `LOOK_EVERY`) applies to the caller's next call as to
    /// an upcall thread's reply.
    pub(super) fn promote_for_caller<D: Driver>(&self, st: &mut State, driver: &D) -> Wake {
        if self.vacate_unarmed(st, driver, true) {
            return Wake::Nobody;
        }
        self.promote_locked(st, driver, true)
    }

    /// Called by whoever has just started something that an event of the loop will finish
    /// and no thread waits for in the pool: an asynchronous call (once its deadline is in
    /// the timer table), whose reply comes as an event; a frame left queued behind a full
    /// socket, which goes out on the writable event. A vacancy left unarmed (tick mode: by
    /// a caller, [`promote_for_caller`](Self::promote_for_caller), or for an upcall) is
    /// armed (or handed on), so that the event does not wait for the standby's tick. One
    /// load when there is none.
    pub(crate) fn expect_event<D: Driver>(&self, driver: &D) {
        if !self.tick_vacant.load(Ordering::SeqCst) {
            return;
        }
        let next = {
            let mut st = lock(&self.state);
            if st.leader.is_some() || st.shutdown || st.vacant_since.is_none() {
                return;
            }
            self.clear_vacancy(&mut st);
            self.promote_locked(&mut st, driver, true)
        };
        notify(next, driver);
    }

    /// Called by an unbound leader after its turn. If the turn handed a reply to a caller and
    /// no other caller waits, the role is given up: a caller in a request-reply loop comes
    /// back at once, and then waits for its next reply as the leader, reading it itself,
    /// instead of sleeping while a pool thread reads it and wakes it (a wake-up and two
    /// context switches per call, measured: `lat` with client pool threads). The role is
    /// left vacant with the standby armed (this thread, if that place is free), so an event
    /// that arrives before a caller comes back is served as before. The caller just handed
    /// its reply does not count as waiting, though it may still be listed as a follower
    /// (woken, not yet back under the lock): counting it, a pool thread on another CPU than
    /// the caller's kept the role for good and woke the caller for every reply.
    pub(super) fn stand_aside<D: Driver>(&self, p: &Arc<Participant>, driver: &D) {
        let mut st = lock(&self.state);
        let handed = st.handed_reply.take() == Some(p.id);
        if !handed
            || st.leader != Some(p.id)
            || st.shutdown
            || !driver.supports_standby()
            || st.callers_waiting()
            || driver.has_pending_work()
        {
            return;
        }
        if st.standby.is_none() && !st.in_standby {
            // This thread becomes the armed standby.
            if !self.arm(&mut st, driver) {
                return;
            }
            st.leader = None;
            drop(self.wait_armed_standby(st, p, driver));
        } else if st.standby.is_some() {
            // Another thread is the standby: arm it, and sleep as an idle follower.
            if !self.arm(&mut st, driver) {
                return;
            }
            st.leader = None;
            st.followers.push(p.clone());
            crate::clock::forget_left();
            drop(crate::sync::wait(&p.cv, st));
        }
        // Else a thread just made leader from the standby is on its way out of the poll set
        // (it cannot be armed yet): keep the role.
    }

    /// Called by a thread whose upcall has finished running user code and that will rejoin
    /// the pool right after sending the reply: the armed standby (if the leader role is
    /// vacant) is disarmed, since this thread will take the role in a moment. Events that
    /// arrive meanwhile wait in the poll set for it, so the reply's own answer does not wake
    /// the standby. A send that has to wait for the peer joins the pool and leads, so nothing
    /// waits on this thread.
    pub(crate) fn user_code_done<D: Driver>(&self, driver: &D) {
        if self.tick_vacant.load(Ordering::Relaxed) {
            // Tick mode: did anything arrive while user code ran (what would have woken an
            // armed standby)? Asked now, before the reply goes out, so the answer to the
            // reply cannot count. If so, requests come in parallel, and serving them one
            // upcall after another would leave the other pool threads idle: arm again.
            // Asked (a system call) after user code that ran `LOOK_AFTER` or more, and after
            // one short one in `LOOK_EVERY`: what arrived during a short upcall has waited
            // little, and waits in the poll set for this thread, which leads next.
            let n = self.unlooked.load(Ordering::Relaxed);
            let look = n == 0 || !vacated_within(LOOK_AFTER);
            self.unlooked.store(
                if look { 1 } else { (n + 1) % LOOK_EVERY },
                Ordering::Relaxed,
            );
            if look && driver.events_waiting() {
                let mut st = lock(&self.state);
                st.idle_arms = 0;
                if st.tick_mode {
                    st.tick_mode = false;
                    tracing::debug!("standby: tick mode off (events arrived during an upcall)");
                }
            }
            return;
        }
        // Nothing armed (no standby, or a leader in place): no lock. A hint read a moment too
        // early only costs the standby a spurious wake-up, which it handles.
        if !self.armed.load(Ordering::Relaxed) {
            return;
        }
        let mut st = lock(&self.state);
        if st.leader.is_none() {
            self.disarm(&mut st, driver);
            // Nobody needed the standby this time: after enough such arms in a row, the pool
            // stops paying two system calls per upcall for it (tick mode).
            if self.tick.is_some() {
                st.idle_arms = st.idle_arms.saturating_add(1);
                if st.idle_arms >= IDLE_ARMS_FOR_TICK && !st.tick_mode {
                    st.tick_mode = true;
                    tracing::debug!("standby: tick mode on");
                }
            }
        }
    }

    /// Whether the standby must be woken (once the promotion lock is released) to start
    /// ticking: tick mode is on, but it went into its wait without a timeout (before tick
    /// mode, or after a tick that found the pool idle), so vacancies are still armed. Asked
    /// by a thread that has just taken the role, so the woken standby finds it held and only
    /// waits again, with the tick. Making it lead instead would pull it into work that a
    /// thread already has in hand (measured: `nest`, half a context switch more per level).
    pub(super) fn retick(&self, st: &mut State) -> bool {
        let wake = st.tick_mode && st.in_standby && !st.ticking && !st.retick_sent;
        st.retick_sent |= wake;
        wake
    }

    /// Ends an unarmed vacancy (the role is taken, or handed on).
    pub(super) fn clear_vacancy(&self, st: &mut State) {
        if st.vacant_since.take().is_some() {
            self.tick_vacant.store(false, Ordering::Relaxed);
        }
    }

    /// Whether the role was left vacant unarmed (tick mode) less than half a tick ago.
    pub(super) fn young_vacancy(&self, st: &State) -> bool {
        st.leader.is_none()
            && !st.shutdown
            && st.tick_mode
            && matches!((st.vacant_since, self.tick), (Some(since), Some(tick)) if since.elapsed() < tick / 2)
    }

    /// `p` waits as the standby of an armed vacancy (armed, so without a tick), then, back
    /// under the promotion lock, deregisters and takes the role if it is still vacant (as
    /// in `run`: a thread is the standby only while it is in the poll set).
    pub(super) fn wait_armed_standby<'a, D: Driver>(
        &'a self,
        mut st: MutexGuard<'a, State>,
        p: &Participant,
        driver: &D,
    ) -> MutexGuard<'a, State> {
        st.standby = Some(p.id);
        st.in_standby = true;
        drop(st);
        crate::clock::forget_left();
        driver.wait_standby(None);
        let mut st = lock(&self.state);
        st.in_standby = false;
        let reticked = std::mem::take(&mut st.retick_sent);
        if st.standby.take().is_some() && st.leader.is_none() {
            if !reticked {
                self.woken_vacant(&mut st, driver);
            }
            driver.count_promotion();
        }
        st
    }

    /// Bookkeeping for a standby woken with the role vacant (it takes the role next): an
    /// armed standby woken by an event means arming was needed, and a ticking standby that
    /// finds a vacancy at least half a tick old has found a long upcall; either way the pool
    /// goes (back) to arming before every upcall.
    pub(super) fn woken_vacant<D: Driver>(&self, st: &mut State, driver: &D) {
        let since = st.vacant_since;
        self.clear_vacancy(st);
        let long = match (since, self.tick) {
            (Some(since), Some(tick)) => {
                let long = since.elapsed() >= tick / 2;
                if long {
                    driver.count_tick_takeover();
                }
                long
            }
            // Armed (or made leader directly): an event arrived during the upcall.
            _ => true,
        };
        if long {
            st.idle_arms = 0;
            if st.tick_mode {
                st.tick_mode = false;
                tracing::debug!("standby: tick mode off");
            }
        }
    }

    /// Arms the standby's watch on the event loop (unless already armed); false if that
    /// failed. Takes the promotion lock's guard to say it runs under it.
    pub(super) fn arm<D: Driver>(&self, _st: &mut State, driver: &D) -> bool {
        if self.armed.load(Ordering::Relaxed) {
            return true;
        }
        let armed = driver.arm_standby(true);
        self.armed.store(armed, Ordering::Relaxed);
        armed
    }

    /// Stops the standby's watch on the event loop, if it was on (under the promotion lock).
    pub(super) fn disarm<D: Driver>(&self, _st: &mut State, driver: &D) {
        if self.armed.load(Ordering::Relaxed) {
            self.armed.store(false, Ordering::Relaxed);
            driver.arm_standby(false);
        }
    }

    /// Called by a caller about to send a two-way request and then wait for its reply, for
    /// the same reason as [`user_code_done`](Self::user_code_done): if the role is vacant it
    /// will take it, so the reply must not wake the armed standby first (measured: `lat`
    /// with client pool threads, a quarter of the replies did). If it then does not join
    /// the pool after all (the send failed), it calls [`did_not_wait`](Self::did_not_wait).
    pub(crate) fn caller_will_wait<D: Driver>(&self, driver: &D) {
        self.user_code_done(driver);
    }

    /// Undoes [`caller_will_wait`](Self::caller_will_wait) for a caller that returns without
    /// joining the pool: a vacant role is passed on (or the standby armed again), as a
    /// leaving leader would.
    pub(crate) fn did_not_wait<D: Driver>(&self, driver: &D) {
        let next = {
            let mut st = lock(&self.state);
            if st.leader.is_some() || st.shutdown {
                return;
            }
            self.promote_locked(&mut st, driver, true)
        };
        notify(next, driver);
    }
}
