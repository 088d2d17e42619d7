//! Where the ORB finds a connection to call over: the connections it opened, one per remote
//! endpoint ([`Outbound`]), and the inbound connections whose peers announced BiDir listen
//! points ([`BidirRoutes`]). Each table has its lock inside and is changed only through its
//! methods. In front of `Outbound`, each calling thread caches the connection of its last call
//! ([`last_connection`]).

use crate::connection::Connection;
use crate::sync::plain::Mutex;
use crate::sync::plain_lock as lock;
use std::collections::HashMap;
use std::sync::{Arc, Weak};

/// The connection to one endpoint. Its lock is held only to look and to publish a
/// connection whose (non-blocking) connect has started: never across DNS or a connect.
pub(crate) type EndpointSlot = Arc<Mutex<Option<Arc<Connection>>>>;

/// Endpoint (`host` as written in the reference, port) → slot, looked up without allocating
/// a key.
///
/// Invariants: one slot per endpoint, so concurrent callers share one connection; an entry
/// is kept only while its slot holds an open connection or somebody holds the slot (a caller
/// connecting), so references from peers naming unreachable endpoints leave nothing behind.
#[derive(Debug, Default)]
pub(crate) struct Outbound {
    by_port: Mutex<ByPort>,
}

/// Port → the hosts named with it and their slots (few per port).
type ByPort = HashMap<u16, Vec<(String, EndpointSlot)>, foldhash::fast::RandomState>;

impl Outbound {
    /// The slot of `host:port`, created empty if needed.
    pub(crate) fn slot(&self, host: &str, port: u16) -> EndpointSlot {
        let mut by_port = lock(&self.by_port);
        let list = by_port.entry(port).or_default();
        if let Some((_, s)) = list.iter().find(|(h, _)| h == host) {
            return s.clone();
        }
        let s: EndpointSlot = Arc::new(Mutex::new(None));
        list.push((host.to_string(), s.clone()));
        s
    }

    /// Empties `host:port`'s slot if it holds `conn` (which closed), and forgets the entry
    /// if nobody else uses it.
    pub(crate) fn closed(&self, host: &str, port: u16, conn: &Arc<Connection>) {
        let slot = lock(&self.by_port)
            .get(&port)
            .and_then(|list| list.iter().find(|(h, _)| h == host))
            .map(|(_, s)| s.clone());
        if let Some(slot) = slot {
            let mut s = lock(&slot);
            if s.as_ref().is_some_and(|c| Arc::ptr_eq(c, conn)) {
                *s = None;
            }
        }
        self.forget_unused(host, port);
    }

    /// Drops the entry of `host:port` if it holds no open connection and nobody else holds
    /// its slot (a caller connecting right now does), so the map only keeps endpoints in use.
    pub(crate) fn forget_unused(&self, host: &str, port: u16) {
        let mut by_port = lock(&self.by_port);
        let Some(list) = by_port.get_mut(&port) else {
            return;
        };
        list.retain(|(h, s)| {
            h != host
                || Arc::strong_count(s) > 1
                || lock(s).as_ref().is_some_and(|c| !c.is_closed())
        });
        if list.is_empty() {
            by_port.remove(&port);
        }
    }

    /// Endpoints held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        lock(&self.by_port).values().map(Vec::len).sum()
    }

    /// Forgets every endpoint (at shutdown, once their connections are closed).
    pub(crate) fn clear(&self) {
        lock(&self.by_port).clear();
    }
}

/// Inbound connections whose peer announced BiDir listen points (with `bidir_accept`), by
/// connection id: where a call to a reference that arrived over one of them, naming one of
/// those points, goes.
///
/// Invariants: only open connections with at least one listen point are routed to (a
/// connection admitted while it closes is removed again, and a closed one is never
/// returned); a closed connection is forgotten.
///
/// Hashed with foldhash: a call to a reference that arrived over a BiDir connection looks
/// it up, and SipHash cost ~150 instructions of such a call (callgrind, `nest --bidir`); the
/// ids are ours (a counter), not the peer's.
#[derive(Debug, Default)]
pub(crate) struct BidirRoutes {
    by_id: Mutex<HashMap<u64, Arc<Connection>, foldhash::fast::RandomState>>,
}

impl BidirRoutes {
    /// Routes through `conn` from now on (it announced listen points).
    pub(crate) fn admit(&self, conn: &Arc<Connection>) {
        if conn.is_closed() {
            return;
        }
        lock(&self.by_id).insert(conn.id, conn.clone());
        if conn.is_closed() {
            // Closed meanwhile: `forget` may have run before the insert.
            self.forget(conn.id);
        }
    }

    /// The connection to call `host:port` over, for a reference that arrived over
    /// connection `arrived_over`: that connection, if its peer announced this endpoint and it
    /// is still open.
    pub(crate) fn route(
        &self,
        arrived_over: u64,
        host: &str,
        port: u16,
    ) -> Option<Arc<Connection>> {
        let conn = lock(&self.by_id).get(&arrived_over).cloned()?;
        let announced = conn.bidir_endpoints.contains(host, port);
        (announced && !conn.is_closed()).then_some(conn)
    }

    /// Forgets connection `id` (closed).
    pub(crate) fn forget(&self, id: u64) {
        lock(&self.by_id).remove(&id);
    }

    /// Listen points held over all routed connections (for [`OrbStats`](crate::OrbStats)).
    pub(crate) fn listen_points(&self) -> usize {
        lock(&self.by_id)
            .values()
            .map(|c| c.bidir_endpoints.len())
            .sum()
    }
}

thread_local! {
    /// The connection of this thread's last call: a caller in a loop calls the same endpoint,
    /// and finding it here skips the endpoint map's lock, hash and the slot's lock (callgrind:
    /// ~150 instructions per call).
    static LAST_CONNECTION: std::cell::RefCell<LastConnection> = const {
        std::cell::RefCell::new(LastConnection { orb: 0, port: 0, host: String::new(), conn: Weak::new() })
    };
}

/// One thread's cached endpoint → connection. Weak: a cache must not keep a closed
/// connection's socket open, nor an ORB's connection alive after the ORB.
struct LastConnection {
    orb: u64,
    port: u16,
    host: String,
    conn: Weak<Connection>,
}

impl LastConnection {
    /// The cached connection, if it is `orb`'s to `host:port` and still open.
    fn find(&self, orb: u64, host: &str, port: u16) -> Option<Arc<Connection>> {
        if self.orb != orb || self.port != port || self.host != host {
            return None;
        }
        self.conn.upgrade().filter(|c| !c.is_closed())
    }

    fn remember(&mut self, orb: u64, host: &str, port: u16, conn: &Arc<Connection>) {
        self.orb = orb;
        self.port = port;
        host.clone_into(&mut self.host);
        self.conn = Arc::downgrade(conn);
    }
}

/// The connection of this thread's last call, if it was `orb`'s to `host:port` and is still
/// open.
#[inline]
pub(crate) fn last_connection(orb: u64, host: &str, port: u16) -> Option<Arc<Connection>> {
    LAST_CONNECTION.with_borrow(|last| last.find(orb, host, port))
}

/// Notes `conn` as the connection of this thread's last call, to `orb`'s `host:port`.
#[inline]
pub(crate) fn remember_connection(orb: u64, host: &str, port: u16, conn: &Arc<Connection>) {
    LAST_CONNECTION.with_borrow_mut(|last| last.remember(orb, host, port, conn));
}

#[cfg(all(test, not(orb_loom)))]
mod tests {
    use super::*;

    #[test]
    fn one_slot_per_endpoint_kept_only_while_used() {
        let out = Outbound::default();
        let a = out.slot("h", 1);
        assert!(Arc::ptr_eq(&a, &out.slot("h", 1)), "callers share the slot");
        let b = out.slot("other", 1);
        assert!(!Arc::ptr_eq(&a, &b));
        assert_eq!(out.len(), 2);
        // Held by a caller (connecting): kept.
        out.forget_unused("h", 1);
        assert_eq!(out.len(), 2);
        drop(a);
        out.forget_unused("h", 1);
        assert_eq!(out.len(), 1, "unused and empty: forgotten");
        drop(b);
        out.forget_unused("other", 1);
        assert_eq!(out.len(), 0);
    }
}
