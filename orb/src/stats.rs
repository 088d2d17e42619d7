//! Counters the ORB keeps about itself, readable by tests and operators ([`Orb::stats`]).
//!
//! [`Orb::stats`]: crate::Orb::stats

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Live counters (relaxed atomics; a snapshot is consistent per field, not across fields).
#[derive(Debug, Default)]
pub(crate) struct Stats {
    pub(crate) connections_open: AtomicUsize,
    pub(crate) connections_opened: AtomicU64,
    pub(crate) connections_accepted: AtomicU64,
    pub(crate) requests_sent: AtomicU64,
    pub(crate) requests_received: AtomicU64,
    pub(crate) replies_received: AtomicU64,
    pub(crate) late_replies_dropped: AtomicU64,
    pub(crate) leader_promotions: AtomicU64,
    pub(crate) follower_wakeups: AtomicU64,
    pub(crate) standby_tick_takeovers: AtomicU64,
    pub(crate) leader_reclaims: AtomicU64,
    pub(crate) upcalls_cancelled: AtomicU64,
    pub(crate) upcalls_handed_to_pool: AtomicU64,
    pub(crate) protocol_errors: AtomicU64,
    pub(crate) read_buffer_bytes: AtomicUsize,
    pub(crate) read_buffer_peak: AtomicUsize,
    pub(crate) bytes_sent: AtomicU64,
    pub(crate) socket_writes: AtomicU64,
    pub(crate) bytes_received: AtomicU64,
    pub(crate) accept_errors: AtomicU64,
    pub(crate) connections_refused: AtomicU64,
    pub(crate) connections_timed_out: AtomicU64,
    pub(crate) deferred_replies_dropped: AtomicU64,
    pub(crate) collocated_calls: AtomicU64,
    pub(crate) tls_handshakes: AtomicU64,
    pub(crate) tls_handshake_failures: AtomicU64,
    pub(crate) tls_handshake_timeouts: AtomicU64,
    pub(crate) tls_errors: AtomicU64,
    pub(crate) owned_reads: AtomicU64,
    pub(crate) unpolled_reads: AtomicU64,
    pub(crate) standby_arms: AtomicU64,
}

/// A snapshot of an ORB's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct OrbStats {
    /// Connections open now (both directions).
    pub connections_open: usize,
    /// Connections this ORB opened, in total.
    pub connections_opened: u64,
    /// Connections this ORB accepted, in total.
    pub connections_accepted: u64,
    /// Requests sent (two-way, oneway, locate).
    pub requests_sent: u64,
    /// Requests received (including locate requests).
    pub requests_received: u64,
    /// Replies received and handed to their waiters.
    pub replies_received: u64,
    /// Replies that arrived for no waiter (after a timeout) and were dropped.
    pub late_replies_dropped: u64,
    /// Times a leader handed leadership to a follower.
    pub leader_promotions: u64,
    /// Times a sleeping follower was woken (promotion or reply hand-off).
    pub follower_wakeups: u64,
    /// Times the standby, woken by its tick in tick mode, took the leader role over from an
    /// upcall that had held it for half a tick or more (see [`OrbBuilder::standby_tick`]).
    ///
    /// [`OrbBuilder::standby_tick`]: crate::OrbBuilder::standby_tick
    pub standby_tick_takeovers: u64,
    /// Times a thread took the leader role from a thread promoted to it that had not yet
    /// run (it was still being woken), instead of waiting for it.
    pub leader_reclaims: u64,
    /// Upcalls marked cancelled by a CancelRequest.
    pub upcalls_cancelled: u64,
    /// Requests that a thread waiting for its own reply read but left to an idle pool
    /// thread, as they were not of its call chain.
    pub upcalls_handed_to_pool: u64,
    /// Connections closed for a protocol error.
    pub protocol_errors: u64,
    /// Bytes held in read buffers now (undecoded input and fragment chains).
    pub read_buffer_bytes: usize,
    /// The highest `read_buffer_bytes` seen.
    pub read_buffer_peak: usize,
    /// Bytes written to sockets.
    pub bytes_sent: u64,
    /// System calls that wrote to a socket (each a `writev` of one or more messages):
    /// `bytes_sent / socket_writes` is the mean batch.
    pub socket_writes: u64,
    /// Bytes read from sockets.
    pub bytes_received: u64,
    /// Failed `accept` calls (out of file descriptors, say); the ORB retries after a short
    /// back-off.
    pub accept_errors: u64,
    /// Connections accepted and closed at once because `max_connections` were open.
    pub connections_refused: u64,
    /// Connections closed by the idle timeout: idle ones, and ones whose partial message
    /// stalled.
    pub connections_timed_out: u64,
    /// BiDir listen points held now, announced by peers over the connections they opened
    /// (accepted with `bidir_accept`; at most 16 per connection, forgotten with it).
    pub bidir_listen_points: usize,
    /// Deferred replies ([`ReplyHandle`](crate::ReplyHandle)) dropped instead of sent: the
    /// caller had cancelled, its deadline had passed, or the connection had closed.
    pub deferred_replies_dropped: u64,
    /// Calls this ORB made to its own objects without a socket (collocation, see
    /// [`OrbBuilder::collocation`](crate::OrbBuilder::collocation)).
    pub collocated_calls: u64,
    /// TLS handshakes completed, both directions.
    pub tls_handshakes: u64,
    /// TLS handshakes that failed, each closing its connection: a certificate that did not
    /// verify (untrusted, expired, or missing when required), bytes that were not TLS (such
    /// as plaintext GIOP sent to a TLS port), or the peer's alert.
    pub tls_handshake_failures: u64,
    /// TLS handshakes that did not finish within the handshake timeout (their connections
    /// closed; see [`TlsConfig::handshake_timeout`](crate::TlsConfig::handshake_timeout)).
    pub tls_handshake_timeouts: u64,
    /// TLS connections closed after their handshake because the peer sent records that did
    /// not decrypt or broke TLS.
    pub tls_errors: u64,
    /// Reads in which the leader waited in a connection's `recv` instead of polling (owned
    /// reads, see [`OrbBuilder::owned_reads`](crate::OrbBuilder::owned_reads)).
    pub owned_reads: u64,
    /// Turns of an event-loop driver ([`Orb::turn`](crate::Orb::turn), `protorb::tokio`)
    /// that read the ORB's one connection in place of polling the event loop's own set,
    /// whose fd the driver's runtime had just reported (a read that brings no frame polls
    /// after all).
    pub unpolled_reads: u64,
    /// Times the pool armed its standby (one `epoll_ctl`, and one more to disarm it) for a
    /// vacant leader role: before tick mode, around every upcall and every call of a caller
    /// that leads its own wait; in tick mode, rarely (see `OrbBuilder::standby_tick`).
    pub standby_arms: u64,
}

/// Adds `n` to a counter that only the leader writes (what it reads from the sockets: the
/// leader role is the permission to read one, held by one thread at a time and handed on
/// under the pool's lock, which orders the successive writers): a load and a store, where a
/// `fetch_add` would cost a read-modify-write (~6 ns) per message.
#[inline]
pub(crate) fn add_as_leader(counter: &AtomicU64, n: u64) {
    counter.store(
        counter.load(Ordering::Relaxed).wrapping_add(n),
        Ordering::Relaxed,
    );
}

impl Stats {
    pub(crate) fn snapshot(&self) -> OrbStats {
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        OrbStats {
            connections_open: self.connections_open.load(Ordering::Relaxed),
            connections_opened: r(&self.connections_opened),
            connections_accepted: r(&self.connections_accepted),
            requests_sent: r(&self.requests_sent),
            requests_received: r(&self.requests_received),
            replies_received: r(&self.replies_received),
            late_replies_dropped: r(&self.late_replies_dropped),
            leader_promotions: r(&self.leader_promotions),
            follower_wakeups: r(&self.follower_wakeups),
            standby_tick_takeovers: r(&self.standby_tick_takeovers),
            leader_reclaims: r(&self.leader_reclaims),
            upcalls_cancelled: r(&self.upcalls_cancelled),
            upcalls_handed_to_pool: r(&self.upcalls_handed_to_pool),
            protocol_errors: r(&self.protocol_errors),
            read_buffer_bytes: self.read_buffer_bytes.load(Ordering::Relaxed),
            read_buffer_peak: self.read_buffer_peak.load(Ordering::Relaxed),
            bytes_sent: r(&self.bytes_sent),
            socket_writes: r(&self.socket_writes),
            bytes_received: r(&self.bytes_received),
            accept_errors: r(&self.accept_errors),
            connections_refused: r(&self.connections_refused),
            connections_timed_out: r(&self.connections_timed_out),
            bidir_listen_points: 0,
            deferred_replies_dropped: r(&self.deferred_replies_dropped),
            collocated_calls: r(&self.collocated_calls),
            tls_handshakes: r(&self.tls_handshakes),
            tls_handshake_failures: r(&self.tls_handshake_failures),
            tls_handshake_timeouts: r(&self.tls_handshake_timeouts),
            tls_errors: r(&self.tls_errors),
            owned_reads: r(&self.owned_reads),
            unpolled_reads: r(&self.unpolled_reads),
            standby_arms: r(&self.standby_arms),
        }
    }

    /// Records a connection's new buffered size (delta against what it reported before).
    pub(crate) fn account_buffer(&self, previous: usize, now: usize) {
        if now >= previous {
            let v = self
                .read_buffer_bytes
                .fetch_add(now - previous, Ordering::Relaxed)
                + (now - previous);
            self.read_buffer_peak.fetch_max(v, Ordering::Relaxed);
        } else {
            self.read_buffer_bytes
                .fetch_sub(previous - now, Ordering::Relaxed);
        }
    }
}
