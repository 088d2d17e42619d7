//! The leader's housekeeping, apart from the way of a message: accepting connections (with
//! `max_connections` and the accept retry) and the timers that bound what an idle or stalled
//! peer holds (the idle sweep). The timers' state is `timers.rs`'s `Housekeeping`; this file
//! is what the leader does when they are due.

use crate::connection::{CloseCause, Expired, Origin};
use crate::lf::Until;
use crate::orb::OrbInner;
use crate::reactor::Entry;
use crate::timers::earliest;
use std::io;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

impl OrbInner {
    /// The leader's poll timeout: until its own deadline, if it has one. The timers need
    /// none: the reactor's alarm, armed for the nearest whenever one is set, wakes the poll
    /// when it is due, and the leader then runs it ([`run_due_timers`](Self::run_due_timers)).
    /// So the clock is read only for a deadline: a server's leader, which has none, reads it
    /// not at all (the clock read and the timer arithmetic cost ~130 instructions a poll).
    /// Should the alarm have failed to arm, every poll reads the timers as well.
    ///
    /// A leader's own deadline (a caller waiting for its reply, a turn) needs no timeout
    /// either once the alarm covers it, armed for it or earlier
    /// ([`Reactor::alarm_covers`](crate::reactor::Reactor::alarm_covers)): the alarm then
    /// ends the wait by the deadline, and the leader's loop returns for its caller to see
    /// it. That costs a `timerfd_settime` only when the alarm must move earlier (for calls
    /// that all have the same timeout, once per timeout period, as for the timers), where
    /// an `epoll_wait` with a timeout starts and cancels a kernel high-resolution timer on
    /// every wait (`nest`, whose callers wait in the poll: 3% a level, PROFILE.md). A
    /// deadline that has passed keeps its poll that does not wait.
    pub(super) fn poll_timeout(&self, until: Option<Until>) -> Option<Duration> {
        if !self.reactor.alarm_works() {
            return self.poll_timeout_with_timers(until.map(|u| u.deadline));
        }
        let u = until?;
        let left = u.left();
        if left.is_zero() || !self.reactor.alarm_covers(u.deadline) {
            return Some(left);
        }
        None
    }

    /// After the alarm fired: runs the timers that are due, wakes the callers whose
    /// deadline passed while they waited untimed (`Lf::wake_timed`), and arms the alarm for
    /// what is left of both.
    pub(super) fn run_due_timers(&self) {
        let now = Instant::now();
        if self.next_timer().is_some_and(|d| d <= now) {
            self.run_timers(now);
        }
        if let Some(d) = self.lf.wake_timed(now) {
            self.reactor.arm_alarm(d);
        }
        self.rearm_timers();
    }

    /// The poll timeout without the alarm: until the leader's deadline or the next timer,
    /// whichever comes first; timers that are due run first.
    fn poll_timeout_with_timers(&self, deadline: Option<Instant>) -> Option<Duration> {
        // Callers covered by the alarm before it broke wait untimed: their deadlines count
        // as timers.
        let next = || earliest(self.next_timer(), self.lf.earliest_timed());
        let mut due = next();
        if due.is_none() && deadline.is_none() {
            return None;
        }
        let now = Instant::now();
        if due.is_some_and(|d| d <= now) {
            self.run_timers(now);
            self.lf.wake_timed(now);
            due = next();
            if let Some(d) = due {
                self.reactor.arm_alarm(d);
            }
        }
        let until = earliest(deadline, due)?;
        Some(until.saturating_duration_since(now))
    }

    /// Arms the reactor's alarm for the next timer and for the earliest deadline a caller
    /// waits for untimed (`Lf::wake_timed`), if there are any: after the alarm fired (it may
    /// have been armed for a deadline since removed), and when a timer is set outside
    /// [`poll_timeout`](Self::poll_timeout) (no system call unless the alarm moves earlier).
    pub(crate) fn rearm_alarm(&self) {
        if let Some(d) = self.lf.earliest_timed() {
            self.reactor.arm_alarm(d);
        }
        self.rearm_timers();
    }

    /// [`rearm_alarm`](Self::rearm_alarm) for the timers alone.
    fn rearm_timers(&self) {
        if let Some(d) = self.next_timer() {
            self.reactor.arm_alarm(d);
        }
    }

    /// Runs the timers that are due at `now` (leader only).
    pub(super) fn run_timers(&self, now: Instant) {
        if self.call_deadlines.next_due().is_some_and(|d| d <= now) {
            self.expire_calls(now);
        }
        let hk = &self.housekeeping;
        if hk.take_accept_retry(now) {
            for e in self.reactor.entries() {
                if let Entry::Listener(l) = e {
                    self.accept_all(&l);
                }
            }
        }
        if let Some(period) = self.config.sweep_timeout() {
            if hk.take_sweep(now, period) {
                self.sweep(now);
            }
        }
    }

    /// Closes connections that have been idle, or whose partial message has stalled, for
    /// `timeout` (see [`OrbBuilder::idle_timeout`](crate::OrbBuilder::idle_timeout)). A
    /// connection counts as unchanged while it reads no byte and sends no request.
    /// Also closes connections whose TLS handshake has taken longer than the handshake
    /// timeout ([`TlsConfig::handshake_timeout`](crate::TlsConfig::handshake_timeout)).
    fn sweep(&self, now: Instant) {
        for e in self.reactor.entries() {
            let Entry::Conn(c) = e else { continue };
            if c.is_closed() {
                continue;
            }
            if let (Some(t), Some(tls)) = (c.stream().tls(), &self.config.tls) {
                if t.is_handshaking() {
                    if now.saturating_duration_since(t.started()) >= tls.handshake_timeout {
                        self.stats
                            .tls_handshake_timeouts
                            .fetch_add(1, Ordering::Relaxed);
                        tracing::debug!(peer = %c.peer, "TLS handshake timed out; closing connection");
                        self.close_connection(&c, CloseCause::Io("TLS handshake timed out".into()));
                    }
                    continue;
                }
            }
            let Some(timeout) = self.config.idle_timeout else {
                continue;
            };
            let Some(expired) = c.sweep_look(now, timeout) else {
                continue;
            };
            self.stats
                .connections_timed_out
                .fetch_add(1, Ordering::Relaxed);
            match expired {
                Expired::Stalled => {
                    tracing::debug!(peer = %c.peer, "partial message stalled; closing connection");
                    self.close_connection(&c, CloseCause::Io("partial message stalled".into()));
                }
                Expired::Idle => {
                    tracing::debug!(peer = %c.peer, "idle connection closed");
                    // Accepted connections only: as the server, we may always send
                    // CloseConnection.
                    self.send_close_connection(&c);
                    self.close_connection(&c, CloseCause::Io("idle timeout".into()));
                }
            }
        }
    }

    /// Accepts every connection waiting on `l`, up to `max_connections` open (the rest are
    /// closed at once); on a failure (out of file descriptors) arms the accept retry.
    pub(super) fn accept_all(&self, l: &mio::net::TcpListener) {
        loop {
            match l.accept() {
                Ok((s, peer)) => {
                    let hk = &self.housekeeping;
                    hk.accepted();
                    if hk.inbound_full(self.config.max_connections) {
                        self.stats
                            .connections_refused
                            .fetch_add(1, Ordering::Relaxed);
                        tracing::debug!(%peer, "max_connections open; connection refused");
                        drop(s);
                        continue;
                    }
                    let s = std::net::TcpStream::from(s);
                    let _ = s.set_nodelay(true);
                    match self.add_connection(s, peer, Origin::Inbound) {
                        Ok(_) => {
                            hk.inbound_opened();
                            self.stats
                                .connections_accepted
                                .fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => tracing::warn!(%peer, error = %e, "cannot register connection"),
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    // EMFILE and friends. The connections left in the backlog raise no new
                    // readiness event, so retry after a back-off (the leader's poll timeout).
                    self.stats.accept_errors.fetch_add(1, Ordering::Relaxed);
                    let ms = self.housekeeping.accept_failed();
                    tracing::warn!(error = %e, retry_ms = ms, "accept failed");
                    self.rearm_alarm();
                    self.reactor.wake();
                    return;
                }
            }
        }
    }
}
