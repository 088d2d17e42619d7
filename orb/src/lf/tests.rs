//! Threaded tests of the pool with a scripted driver (no sockets): replies produced by the
//! leader are handed to the right waiters, leadership is never held twice, nobody hangs.
use super::*;
use crate::cdr::ByteOrder;
use crate::giop::{Body, Reply, ReplyHeader, ReplyStatus, ServiceContextList};
use crate::sync::Condvar;
use std::collections::VecDeque;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

/// A caller's participant is reused for its next call, with a fresh id and an empty slot,
/// but only once nothing else holds it.
#[test]
fn a_participant_is_reused_only_when_nobody_else_holds_it() {
    let p = Participant::bound();
    *lock(&p.slot) = Some(Ok(None));
    p.done.store(true, Ordering::Release);
    p.will_await(5);
    assert!(p.is_complete() && p.awaits(5));
    let (addr, id) = (Arc::as_ptr(&p), p.id);
    Participant::recycle(p);
    let q = Participant::bound();
    assert_eq!(Arc::as_ptr(&q), addr, "the spare was not reused");
    assert_ne!(q.id, id, "a reused participant keeps its old id");
    assert!(
        !q.is_complete(),
        "a reused participant keeps its old completion"
    );
    assert!(!q.awaits(5), "a reused participant awaits its old request");
    let held = q.clone();
    Participant::recycle(q);
    let r = Participant::bound();
    assert_ne!(
        Arc::as_ptr(&r),
        Arc::as_ptr(&held),
        "reused while still held"
    );
    assert!(
        std::thread::spawn(|| Participant::bound().id)
            .join()
            .unwrap()
            != r.id
    );
}

fn reply(id: u32) -> Reply {
    Reply {
        header: ReplyHeader {
            request_id: id,
            status: ReplyStatus::NoException,
            service_context: ServiceContextList::default(),
        },
        body: Body::empty(ByteOrder::Little),
    }
}

/// A fake event source: a queue of (waiter, request id) "arrivals" plus upcall events.
struct Script {
    lf: Arc<Lf>,
    queue: Mutex<VecDeque<Event>>,
    cv: Condvar,
    leaders: AtomicUsize,
    max_leaders: AtomicUsize,
    upcalls: AtomicUsize,
    /// Some: pool threads may wait as the standby, woken by `(armed, woken)` like the
    /// reactor's standby poll set (armed: any queued event wakes it).
    standby: Option<(Mutex<(bool, bool)>, Condvar)>,
    /// Times the standby woke because an event arrived while it was armed.
    armed_wakes: AtomicUsize,
    /// Threads inside `wait_standby` now, and the most ever seen: the standby's wake-up
    /// is not addressed (like an eventfd), so two at once could lose one.
    in_standby: AtomicUsize,
    max_in_standby: AtomicUsize,
    /// Turns led by a participant that was registered as the standby at the time (a
    /// stale standby: no event could wake it, so arming it would strand events).
    stale_standby: AtomicUsize,
    /// Upcalls still to hold until `gate` opens (`.1`), and how many are held now.
    gate: (Mutex<(usize, bool)>, Condvar, AtomicUsize),
    /// Standby waits that ended by their tick (tick mode).
    ticks: AtomicUsize,
    /// Each upcall makes a nested two-way call (its reply comes as the next event).
    nested: std::sync::atomic::AtomicBool,
    /// Times the standby was armed.
    arms: AtomicUsize,
    /// Requests a bound leader set aside for a pool thread (`take_parked`).
    parked: AtomicUsize,
    /// A pool thread's turn runs the upcalls it reads and leads on where the pool allows it
    /// (`Lf::serve_and_lead_on`, as the ORB's driver does), instead of returning each.
    lead_on: std::sync::atomic::AtomicBool,
    /// Upcalls run that way, and of those the ones after which the role was another's.
    led_on: AtomicUsize,
    served: AtomicUsize,
}

impl Script {
    fn new(lf: &Arc<Lf>, standby: bool) -> Arc<Self> {
        Arc::new(Script {
            lf: lf.clone(),
            queue: Mutex::new(VecDeque::new()),
            cv: Condvar::new(),
            leaders: AtomicUsize::new(0),
            max_leaders: AtomicUsize::new(0),
            upcalls: AtomicUsize::new(0),
            standby: standby.then(|| (Mutex::new((false, false)), Condvar::new())),
            armed_wakes: AtomicUsize::new(0),
            in_standby: AtomicUsize::new(0),
            max_in_standby: AtomicUsize::new(0),
            stale_standby: AtomicUsize::new(0),
            gate: (Mutex::new((0, false)), Condvar::new(), AtomicUsize::new(0)),
            ticks: AtomicUsize::new(0),
            nested: std::sync::atomic::AtomicBool::new(false),
            arms: AtomicUsize::new(0),
            parked: AtomicUsize::new(0),
            lead_on: std::sync::atomic::AtomicBool::new(false),
            led_on: AtomicUsize::new(0),
            served: AtomicUsize::new(0),
        })
    }

    /// Wakes whoever waits for events: the leader and an armed standby.
    fn notify(&self) {
        self.cv.notify_all();
        if let Some((m, cv)) = &self.standby {
            let _g = lock(m);
            cv.notify_all();
        }
    }
}

enum Event {
    Reply(Arc<Participant>, u32),
    Upcall,
}

impl Script {
    /// One turn as leader: the next scripted event, or `Idle` after a short wait.
    fn lead_once(&self, p: &Arc<Participant>, until: Option<Until>) -> Lead<()> {
        let n = self.leaders.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_leaders.fetch_max(n, Ordering::SeqCst);
        if lock(&self.lf.state).standby == Some(p.id) {
            self.stale_standby.fetch_add(1, Ordering::SeqCst);
        }
        let ev = {
            let mut q = lock(&self.queue);
            if q.is_empty() {
                let wait = until
                    .map(|u| u.deadline.saturating_duration_since(Instant::now()))
                    .unwrap_or(Duration::from_millis(5))
                    .min(Duration::from_millis(5));
                q = crate::sync::wait_timeout(&self.cv, q, wait).0;
            }
            q.pop_front()
        };
        self.leaders.fetch_sub(1, Ordering::SeqCst);
        match ev {
            Some(Event::Reply(w, id)) => {
                self.lf.complete(&w, Ok(Some(reply(id))), Some(p.id), self);
                Lead::Idle
            }
            Some(Event::Upcall) => Lead::Upcall(()),
            None => Lead::Idle,
        }
    }
    /// The scripted user code of an upcall (held at the gate, a nested call, or a short
    /// sleep).
    fn run_scripted_upcall(&self) {
        let (m, cv, held) = &self.gate;
        let mut g = lock(m);
        if g.0 > 0 {
            g.0 -= 1;
            held.fetch_add(1, Ordering::SeqCst);
            while !g.1 {
                g = crate::sync::wait(cv, g);
            }
        }
        drop(g);
        if self.nested.load(Ordering::SeqCst) {
            // A nested call: this thread leads its wait and reads its own reply.
            let p = Participant::bound();
            self.lf.caller_will_wait(self);
            lock(&self.queue).push_back(Event::Reply(p.clone(), 99));
            self.notify();
            let deadline = Instant::now() + Duration::from_secs(20);
            assert_eq!(self.lf.run(&p, Some(deadline), self), Exit::Completed);
            assert_eq!(p.take().unwrap().unwrap().unwrap().header.request_id, 99);
        } else if self.standby.is_some() {
            // Long enough for events to arrive while the leader role is vacant.
            std::thread::sleep(Duration::from_micros(200));
        }
        self.upcalls.fetch_add(1, Ordering::SeqCst);
        self.lf.user_code_done(self);
    }
}

impl Driver for Script {
    type Upcall = ();
    fn lead(&self, p: &Arc<Participant>, until: Option<Until>) -> Lead<()> {
        loop {
            let lead = self.lead_once(p, until);
            if !(p.unbound
                && self.lead_on.load(Ordering::SeqCst)
                && matches!(lead, Lead::Upcall(())))
            {
                return lead;
            }
            match self.lf.serve_and_lead_on(p, (), self) {
                Ok(true) => {
                    self.led_on.fetch_add(1, Ordering::SeqCst);
                }
                Ok(false) => {
                    self.led_on.fetch_add(1, Ordering::SeqCst);
                    self.served.fetch_add(1, Ordering::SeqCst);
                    return Lead::Served;
                }
                Err(()) => return Lead::Upcall(()),
            }
        }
    }
    fn run_upcall(&self, _u: ()) {
        self.run_scripted_upcall();
    }
    fn take_parked(&self) -> Option<()> {
        self.parked
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .ok()
            .map(|_| ())
    }
    fn has_parked(&self) -> bool {
        self.parked.load(Ordering::SeqCst) > 0
    }
    fn address_upcall(&self, _u: ()) {
        unreachable!("these requests carry no call chain");
    }
    fn wake_leader(&self) {
        self.cv.notify_all();
    }
    fn supports_standby(&self) -> bool {
        self.standby.is_some()
    }
    fn wait_standby(&self, timeout: Option<Duration>) {
        assert!(
            timeout.is_none() || self.lf.tick.is_some(),
            "a tick without tick mode"
        );
        let Some((m, cv)) = &self.standby else { return };
        let n = self.in_standby.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_standby.fetch_max(n, Ordering::SeqCst);
        let mut g = lock(m);
        loop {
            if std::mem::take(&mut g.1) {
                break;
            }
            if g.0 && !lock(&self.queue).is_empty() {
                self.armed_wakes.fetch_add(1, Ordering::SeqCst);
                break;
            }
            // No timeout but the tick: a standby that is not armed or woken must not
            // wake by itself (that would hide a missing wake-up).
            match timeout {
                None => g = crate::sync::wait(cv, g),
                Some(t) => {
                    let (g2, timed_out) = crate::sync::wait_timeout(cv, g, t);
                    g = g2;
                    if timed_out {
                        self.ticks.fetch_add(1, Ordering::SeqCst);
                        break;
                    }
                }
            }
        }
        drop(g);
        // Linger like a thread on its way out of a poll call, so that a second thread
        // entering meanwhile (the bug this counts) is likely to be seen.
        std::thread::sleep(Duration::from_micros(50));
        self.in_standby.fetch_sub(1, Ordering::SeqCst);
    }
    fn wake_standby(&self) {
        if let Some((m, cv)) = &self.standby {
            lock(m).1 = true;
            cv.notify_all();
        }
    }
    fn arm_standby(&self, on: bool) -> bool {
        if on {
            self.arms.fetch_add(1, Ordering::SeqCst);
        }
        if let Some((m, cv)) = &self.standby {
            lock(m).0 = on;
            cv.notify_all();
        }
        self.standby.is_some()
    }
    fn has_pending_work(&self) -> bool {
        // Like the reactor's ready list: queued events make a leaving leader wake the
        // standby rather than arm it.
        !lock(&self.queue).is_empty()
    }
    fn events_waiting(&self) -> bool {
        !lock(&self.queue).is_empty()
    }
}

#[test]
fn every_reply_reaches_its_waiter_and_one_leader_at_a_time() {
    replies_reach_waiters(false);
}

/// The same with a standby: leaders leave lazily (the role stays vacant until an event
/// wakes the standby), and nobody is stranded.
#[test]
fn with_a_standby_every_reply_reaches_its_waiter() {
    replies_reach_waiters(true);
}

fn replies_reach_waiters(standby: bool) {
    let lf = Arc::new(Lf::new());
    let script = Script::new(&lf, standby);
    // Two pool threads.
    let pool = pool_threads(&lf, &script, 2);
    let callers: Vec<_> = (0..8u32)
        .map(|t| {
            let (lf, s) = (lf.clone(), script.clone());
            std::thread::spawn(move || {
                for i in 0..200u32 {
                    let id = t * 1000 + i;
                    let p = Participant::bound();
                    {
                        let mut q = lock(&s.queue);
                        q.push_back(Event::Reply(p.clone(), id));
                        if i % 7 == 0 {
                            q.push_back(Event::Upcall);
                        }
                    }
                    s.notify();
                    let deadline = Instant::now() + Duration::from_secs(20);
                    assert_eq!(lf.run(&p, Some(deadline), &*s), Exit::Completed);
                    let r = p.take().unwrap().unwrap().unwrap();
                    assert_eq!(r.header.request_id, id, "reply went to the wrong waiter");
                }
            })
        })
        .collect();
    for c in callers {
        c.join().unwrap();
    }
    // Drain outstanding upcall events, then stop.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !lock(&script.queue).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    shut_down_and_check(&lf, &script, pool);
    assert_eq!(script.upcalls.load(Ordering::SeqCst), 8 * (200 / 7 + 1));
}

/// A pool thread whose promotion a caller took over (it had not run yet) is idle until it is
/// back in the pool: a caller that leads meanwhile and finds an unrelated request sets it
/// aside for the pool rather than run it itself (`lf_chain`, under load: all three pool
/// threads of S were on their way back at once, and A ran a 100 ms upcall while waiting for
/// its own reply). The returning thread takes the parked request before it sleeps. A bound
/// thread taken over from is not a pool thread and does not count.
#[test]
fn a_pool_thread_taken_over_from_is_idle_until_it_is_back() {
    let lf = Arc::new(Lf::new());
    let script = Script::new(&lf, false);
    let caller = Participant::bound();
    let bound = Participant::bound();
    {
        let mut st = lock(&lf.state);
        st.followers.push(bound.clone());
        assert_eq!(st.promote().map(|f| f.id), Some(bound.id));
    }
    assert!(lf.try_lead(&caller, &*script));
    assert!(
        !lf.has_idle_unbound(),
        "a bound thread taken over from counts as an idle pool thread"
    );
    lf.leave(&caller, &*script, false);

    let pool = Participant::unbound();
    {
        let mut st = lock(&lf.state);
        st.followers.push(pool.clone());
        assert_eq!(st.promote().map(|f| f.id), Some(pool.id));
    }
    assert!(lf.try_lead(&caller, &*script));
    assert!(
        lf.has_idle_unbound(),
        "the pool thread on its way back does not count as idle: the caller would run an \
         unrelated request itself"
    );
    assert!(
        !lock(&lf.state).has_waiting_unbound(),
        "a thread on its way back counts as one to promote"
    );
    // The leader sets a request aside for the pool; the pool thread, once it runs, takes it
    // and then sleeps as a follower.
    script.parked.store(1, Ordering::SeqCst);
    let t = {
        let (lf, s, pool) = (lf.clone(), script.clone(), pool.clone());
        std::thread::spawn(move || lf.run(&pool, None, &*s))
    };
    let give_up = Instant::now() + Duration::from_secs(20);
    while !lock(&lf.state).followers.iter().any(|f| f.id == pool.id) {
        assert!(Instant::now() < give_up, "the pool thread never slept");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(
        script.upcalls.load(Ordering::SeqCst),
        1,
        "the parked request did not run"
    );
    assert_eq!(script.parked.load(Ordering::SeqCst), 0);
    assert!(
        lock(&lf.state).returning.is_empty(),
        "still counted as on its way back"
    );
    assert_eq!(lock(&lf.state).leader, Some(caller.id));
    lf.shutdown(&*script);
    assert_eq!(t.join().unwrap(), Exit::Shutdown);
}

/// A participant that joins while the role belongs to a thread promoted to it that has not
/// run yet (its wake-up is slow: another CPU, a busy VM) leads at once, instead of sleeping
/// until that thread takes the role. Here the promoted thread never runs at all (a
/// participant with no thread), so without the takeover the caller's reply, which only a
/// leader reads, would never come: `run` would end at its deadline.
#[test]
fn a_joining_thread_takes_the_role_from_a_promoted_thread_not_yet_running() {
    let lf = Arc::new(Lf::new());
    let script = Script::new(&lf, false);
    let promoted = Participant::unbound();
    {
        let mut st = lock(&lf.state);
        st.leader = Some(promoted.id);
        st.unclaimed = Some(promoted.id);
    }
    let p = Participant::bound();
    lock(&script.queue).push_back(Event::Reply(p.clone(), 7));
    let deadline = Instant::now() + Duration::from_secs(5);
    assert_eq!(lf.run(&p, Some(deadline), &*script), Exit::Completed);
    assert_eq!(p.take().unwrap().unwrap().unwrap().header.request_id, 7);
    let st = lock(&lf.state);
    assert_ne!(
        st.leader,
        Some(promoted.id),
        "the role went back to the promoted thread"
    );
    assert_eq!(st.unclaimed, None);
    drop(st);
    // An event-loop driver's turn takes an unclaimed role too, and only that.
    let another = Participant::unbound();
    {
        let mut st = lock(&lf.state);
        st.leader = Some(another.id);
        st.unclaimed = Some(another.id);
    }
    let turn = Participant::for_turn();
    assert!(
        lf.try_lead(&turn, &*script),
        "a turn left an unclaimed role alone"
    );
    assert_eq!(lock(&lf.state).leader, Some(turn.id));
    let other_turn = Participant::for_turn();
    assert!(
        !lf.try_lead(&other_turn, &*script),
        "a turn took a claimed role"
    );
    lf.leave(&turn, &*script, false);
    // A role that its promoted thread has taken is not taken from it: a second caller
    // sleeps as a follower until that leader hands it its reply.
    let leader = Participant::unbound();
    {
        let mut st = lock(&lf.state);
        st.leader = Some(leader.id);
        st.unclaimed = None;
    }
    let q = Participant::bound();
    let waiter = {
        let (lf, s, q) = (lf.clone(), script.clone(), q.clone());
        std::thread::spawn(move || lf.run(&q, Some(Instant::now() + Duration::from_secs(20)), &*s))
    };
    let give_up = Instant::now() + Duration::from_secs(20);
    while !lock(&lf.state).followers.iter().any(|f| f.id == q.id) {
        assert!(
            Instant::now() < give_up,
            "the second caller never slept as a follower"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(lock(&lf.state).leader, Some(leader.id));
    lf.complete(&q, Ok(Some(reply(8))), Some(leader.id), &*script);
    assert_eq!(waiter.join().unwrap(), Exit::Completed);
    assert_eq!(q.take().unwrap().unwrap().unwrap().header.request_id, 8);
}

/// Shuts the pool down, joins its threads and checks the invariants the script counted:
/// one leader at a time and, with a standby, one standby at a time and never a leader
/// still registered as the standby.
fn shut_down_and_check(lf: &Lf, script: &Script, pool: Vec<std::thread::JoinHandle<()>>) {
    lf.shutdown(script);
    for t in pool {
        t.join().unwrap();
    }
    assert_eq!(
        script.max_leaders.load(Ordering::SeqCst),
        1,
        "two leaders at once"
    );
    if script.standby.is_some() {
        assert_eq!(
            script.max_in_standby.load(Ordering::SeqCst),
            1,
            "two threads waited as the standby at once"
        );
        assert_eq!(
            script.stale_standby.load(Ordering::SeqCst),
            0,
            "a leader was still registered as the standby"
        );
    }
}

/// Tick mode with two pool threads and a scripted event source: a run of one-at-a-time
/// upcalls puts the pool in tick mode (upcalls leave the role vacant unarmed), one leader
/// at a time throughout; then, while an upcall is held in user code, five more requests
/// arrive and are served by the ticking standby, which takes the role over.
#[test]
fn tick_mode_leaves_upcalls_unarmed_and_a_held_upcall_is_taken_over() {
    tick_mode_and_a_takeover(false);
}

/// The same with pool threads that run the upcalls they read and lead on
/// (`Lf::serve_and_lead_on`, the ORB's driver): tick mode comes as before, those upcalls run
/// without returning to the pool, and the held one is still taken over by the standby,
/// one leader at a time; its thread, back, finds the role another's or takes it back.
#[test]
fn a_pool_thread_that_leads_on_after_its_upcalls_is_taken_over_alike() {
    let led_on = tick_mode_and_a_takeover(true);
    assert!(led_on > 5, "{led_on} upcalls ran with the turn leading on");
}

/// Runs the tick-mode scenario above; returns how many upcalls ran with the turn leading on.
fn tick_mode_and_a_takeover(lead_on: bool) -> usize {
    // Long enough that a thread descheduled on a busy machine rarely looks like a long
    // upcall (which would end tick mode early; the loop below then just runs longer).
    let lf = Arc::new(Lf::with_tick(Some(Duration::from_millis(20))));
    let script = Script::new(&lf, true);
    script.lead_on.store(lead_on, Ordering::SeqCst);
    let pool = pool_threads(&lf, &script, 2);
    let in_tick_mode = || {
        let st = lock(&lf.state);
        st.tick_mode && st.vacancies > 5
    };
    let mut n = 0;
    while n < 2000 && !in_tick_mode() {
        n += 1;
        lock(&script.queue).push_back(Event::Upcall);
        script.notify();
        // Done, and its thread back in the pool (so the next one does not arrive while
        // this one is still in user code, which would end tick mode).
        until("the upcall ran", &|| {
            script.upcalls.load(Ordering::SeqCst) >= n && lock(&lf.state).leader.is_some()
        });
    }
    assert!(
        in_tick_mode(),
        "{n} upcalls one at a time did not start tick mode"
    );
    let n = script.upcalls.load(Ordering::SeqCst);
    // Hold the next upcall in user code.
    lock(&script.gate.0).0 = 1;
    lock(&script.queue).push_back(Event::Upcall);
    script.notify();
    until("the upcall is held", &|| {
        script.gate.2.load(Ordering::SeqCst) == 1
    });
    for _ in 0..5 {
        lock(&script.queue).push_back(Event::Upcall);
    }
    script.notify();
    until("five upcalls ran beside the held one", &|| {
        script.upcalls.load(Ordering::SeqCst) >= n + 5
    });
    assert!(
        script.ticks.load(Ordering::SeqCst) > 0,
        "the standby never ticked"
    );
    assert!(
        !lock(&lf.state).tick_mode,
        "a takeover did not end tick mode"
    );
    {
        let (m, cv, _) = &script.gate;
        lock(m).1 = true;
        cv.notify_all();
    }
    until("the held upcall finished", &|| {
        script.upcalls.load(Ordering::SeqCst) == n + 6
    });
    shut_down_and_check(&lf, &script, pool);
    script.led_on.load(Ordering::SeqCst)
}

/// In tick mode, an upcall that makes a nested call, leads its wait and gets its reply
/// leaves the role vacant unarmed twice: for the upcall, and with its reply (back to user
/// code that ends in a reply, after which its thread leads again), so the standby is not
/// armed and disarmed (two system calls) per nested call. Every nested reply still reaches
/// its caller, one leader at a time.
#[test]
fn in_tick_mode_a_nested_callers_reply_leaves_the_role_unarmed() {
    nested_calls_in_tick_mode(false);
}

/// The same with pool threads that run the upcalls they read and lead on
/// (`Lf::serve_and_lead_on`): the nested call waits under the turn's frame, and its reply
/// still leaves the role unarmed, twice a round, nothing armed.
#[test]
fn a_pool_thread_that_leads_on_leaves_the_role_unarmed_around_nested_calls() {
    let led_on = nested_calls_in_tick_mode(true);
    assert!(
        led_on >= 50,
        "{led_on} upcalls ran with the turn leading on"
    );
}

/// Runs the nested-call scenario above; returns how many upcalls ran with the turn leading
/// on.
fn nested_calls_in_tick_mode(lead_on: bool) -> usize {
    // A tick far longer than the test: no tick fires and no upcall counts as long, so once
    // tick mode is on it stays on (requests come one at a time: nothing arrives during an
    // upcall to end it).
    let lf = Arc::new(Lf::with_tick(Some(Duration::from_secs(60))));
    let script = Script::new(&lf, true);
    script.lead_on.store(lead_on, Ordering::SeqCst);
    let pool = pool_threads(&lf, &script, 2);
    let mut n = 0;
    let mut judged = 0;
    while n < 2000 && judged < 50 {
        let (ticking, vacancies, arms) = {
            let st = lock(&lf.state);
            let ticking = st.tick_mode && st.ticking;
            (ticking, st.vacancies, script.arms.load(Ordering::SeqCst))
        };
        // Plain upcalls until the standby ticks; then each makes a nested call.
        script.nested.store(ticking, Ordering::SeqCst);
        n += 1;
        lock(&script.queue).push_back(Event::Upcall);
        script.notify();
        until("the upcall ran", &|| {
            script.upcalls.load(Ordering::SeqCst) >= n && lock(&lf.state).leader.is_some()
        });
        if ticking {
            judged += 1;
            let st = lock(&lf.state);
            assert!(st.tick_mode, "round {n}: tick mode ended");
            assert_eq!(
                st.vacancies - vacancies,
                2,
                "round {n}: two unarmed vacancies"
            );
            assert_eq!(script.arms.load(Ordering::SeqCst), arms, "round {n}: armed");
        }
    }
    assert_eq!(
        judged, 50,
        "{n} upcalls one at a time did not start tick mode"
    );
    shut_down_and_check(&lf, &script, pool);
    script.led_on.load(Ordering::SeqCst)
}

/// `n` pool threads serving `script` until shutdown.
fn pool_threads(lf: &Arc<Lf>, script: &Arc<Script>, n: usize) -> Vec<std::thread::JoinHandle<()>> {
    (0..n)
        .map(|_| {
            let (lf, s) = (lf.clone(), script.clone());
            std::thread::spawn(move || {
                let p = Participant::unbound();
                assert_eq!(lf.run(&p, None, &*s), Exit::Shutdown);
            })
        })
        .collect()
}

/// Waits until an idle pool has settled: one thread leads, one is the standby.
fn until_leader_and_standby(lf: &Lf) {
    until("a leader and a standby", &|| {
        let st = lock(&lf.state);
        st.leader.is_some() && st.standby.is_some()
    });
}

/// Polls `f` until it holds (at most 10 s, then fails naming `what`).
fn until(what: &str, f: &dyn Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting: {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A pool thread that hands a caller its reply, with no other caller waiting, leaves the
/// role vacant with the standby armed, so the caller leads its next wait itself. A caller
/// that said it would wait (disarming the standby) and then does not, passes the role on:
/// the next reply is still delivered by the pool.
#[test]
fn the_pool_stands_aside_and_a_caller_that_does_not_wait_re_arms() {
    let lf = Arc::new(Lf::new());
    let script = Script::new(&lf, true);
    let pool = pool_threads(&lf, &script, 2);
    until_leader_and_standby(&lf);
    // A reply for a caller that is not in the pool: the pool delivers it.
    let first = Participant::bound();
    lock(&script.queue).push_back(Event::Reply(first.clone(), 1));
    script.notify();
    until("the first reply", &|| first.is_complete());
    until("the pool to stand aside", &|| {
        let st = lock(&lf.state);
        st.leader.is_none() && lf.armed.load(Ordering::Relaxed)
    });
    // A caller about to send disarms; its send fails, so it does not join.
    lf.caller_will_wait(&*script);
    assert!(!lf.armed.load(Ordering::Relaxed), "disarmed for the caller");
    lf.did_not_wait(&*script);
    // Nobody leads now: only an armed (or woken) standby can deliver this.
    let second = Participant::bound();
    lock(&script.queue).push_back(Event::Reply(second.clone(), 2));
    script.notify();
    until("the second reply", &|| second.is_complete());
    assert_eq!(
        second.take().unwrap().unwrap().unwrap().header.request_id,
        2
    );
    lf.shutdown(&*script);
    for t in pool {
        t.join().unwrap();
    }
}

/// A leader leaving for an upcall arms the standby instead of waking it; the next event
/// wakes the standby, which serves it while the upcall still runs.
#[test]
fn an_event_wakes_the_armed_standby_during_a_long_upcall() {
    let lf = Arc::new(Lf::new());
    let script = Script::new(&lf, true);
    lock(&script.gate.0).0 = 1;
    let pool = pool_threads(&lf, &script, 2);
    until_leader_and_standby(&lf);
    lock(&script.queue).push_back(Event::Upcall);
    script.notify();
    until("the first upcall to run", &|| {
        script.gate.2.load(Ordering::SeqCst) == 1
    });
    {
        let st = lock(&lf.state);
        assert!(st.leader.is_none(), "the role is left vacant");
        assert!(
            lf.armed.load(Ordering::Relaxed),
            "the standby is armed, not woken"
        );
    }
    assert_eq!(script.armed_wakes.load(Ordering::SeqCst), 0);
    lock(&script.queue).push_back(Event::Upcall);
    script.notify();
    until("the second upcall to finish", &|| {
        script.upcalls.load(Ordering::SeqCst) == 1
    });
    assert_eq!(script.armed_wakes.load(Ordering::SeqCst), 1);
    {
        let (m, cv, _) = &script.gate;
        lock(m).1 = true;
        cv.notify_all();
    }
    until("the first upcall to finish", &|| {
        script.upcalls.load(Ordering::SeqCst) == 2
    });
    lf.shutdown(&*script);
    for t in pool {
        t.join().unwrap();
    }
    assert_eq!(script.max_leaders.load(Ordering::SeqCst), 1);
}

/// A bound thread that left the role for an upcall and then exits (its deadline passed
/// meanwhile) without taking the role back re-arms the standby: the next event is served.
#[test]
fn a_waiter_timing_out_in_an_upcall_leaves_the_role_watched() {
    let lf = Arc::new(Lf::new());
    let script = Script::new(&lf, true);
    lock(&script.gate.0).0 = 1;
    let b = Participant::bound();
    let waiter = {
        let (lf, s, b) = (lf.clone(), script.clone(), b.clone());
        let deadline = Instant::now() + Duration::from_millis(50);
        std::thread::spawn(move || lf.run(&b, Some(deadline), &*s))
    };
    until("the waiter to lead", &|| {
        lock(&lf.state).leader == Some(b.id)
    });
    let pool = {
        let (lf, s) = (lf.clone(), script.clone());
        std::thread::spawn(move || {
            let p = Participant::unbound();
            assert_eq!(lf.run(&p, None, &*s), Exit::Shutdown);
        })
    };
    until("a standby", &|| lock(&lf.state).standby.is_some());
    lock(&script.queue).push_back(Event::Upcall);
    script.notify();
    until("the upcall to run", &|| {
        script.gate.2.load(Ordering::SeqCst) == 1
    });
    std::thread::sleep(Duration::from_millis(60));
    {
        let (m, cv, _) = &script.gate;
        lock(m).1 = true;
        cv.notify_all();
    }
    assert_eq!(waiter.join().unwrap(), Exit::TimedOut);
    lock(&script.queue).push_back(Event::Upcall);
    script.notify();
    until("the next upcall to be served", &|| {
        script.upcalls.load(Ordering::SeqCst) == 2
    });
    lf.shutdown(&*script);
    pool.join().unwrap();
}

#[test]
fn a_timed_out_leader_passes_leadership_on() {
    let lf = Arc::new(Lf::new());
    let script = Script::new(&lf, false);
    // A waiter that times out (no reply ever comes) while another waits longer.
    let p1 = Participant::bound();
    let p2 = Participant::bound();
    let (lf2, s2, p2c) = (lf.clone(), script.clone(), p2.clone());
    let t = std::thread::spawn(move || {
        lf2.run(&p2c, Some(Instant::now() + Duration::from_secs(10)), &*s2)
    });
    let exit = lf.run(
        &p1,
        Some(Instant::now() + Duration::from_millis(30)),
        &*script,
    );
    assert_eq!(exit, Exit::TimedOut);
    // p2 must now be able to lead and receive its reply.
    lock(&script.queue).push_back(Event::Reply(p2.clone(), 7));
    script.cv.notify_all();
    assert_eq!(t.join().unwrap(), Exit::Completed);
    assert_eq!(p2.take().unwrap().unwrap().unwrap().header.request_id, 7);
}

/// `closer_than` is `left() < margin`, worked out with an addition: the same answer for a
/// deadline passed, within the margin, at it and beyond it.
#[test]
fn closer_than_agrees_with_the_time_left() {
    let now = Instant::now();
    let margin = Duration::from_millis(20);
    let cases = [
        Until { deadline: now, now },
        Until {
            deadline: now + Duration::from_millis(5),
            now,
        },
        Until {
            deadline: now + margin,
            now,
        },
        Until {
            deadline: now + Duration::from_secs(3),
            now,
        },
        Until {
            deadline: now,
            now: now + Duration::from_secs(1),
        },
    ];
    let closer: Vec<bool> = cases.iter().map(|u| u.closer_than(margin)).collect();
    assert_eq!(closer, [true, true, false, false, true]);
    for u in cases {
        assert_eq!(u.closer_than(margin), u.left() < margin, "{u:?}");
    }
}
