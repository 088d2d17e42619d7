//! The object adapter: object key → servant.

use crate::servant::Servant;
use bytes::Bytes;
use dashmap::DashMap;
use std::sync::Arc;

/// Active objects of one ORB, looked up concurrently by every serving thread.
///
/// Invariants: one servant per key (activating a key again replaces its servant); entries are
/// added and removed only by the application (`Orb::activate*`, `Orb::deactivate`), never
/// by peer input, so a peer cannot grow it. An upcall holds its servant's `Arc`, so a
/// deactivated servant finishes the requests it is running.
///
/// Hashed with foldhash, randomly seeded: SipHash cost more per request than the rest of the
/// lookup (callgrind), and the keys stored are our own (a peer only chooses what it looks up).
#[derive(Default)]
pub(crate) struct Adapter {
    servants: DashMap<Bytes, Arc<dyn Servant>, foldhash::fast::RandomState>,
}

impl std::fmt::Debug for Adapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Adapter")
            .field("objects", &self.servants.len())
            .finish()
    }
}

impl Adapter {
    pub(crate) fn insert(&self, key: Bytes, servant: Arc<dyn Servant>) {
        self.servants.insert(key, servant);
    }

    pub(crate) fn remove(&self, key: &[u8]) -> bool {
        self.servants.remove(key).is_some()
    }

    pub(crate) fn contains(&self, key: &[u8]) -> bool {
        self.servants.contains_key(key)
    }

    pub(crate) fn get(&self, key: &[u8]) -> Option<Arc<dyn Servant>> {
        self.servants.get(key).map(|s| s.value().clone())
    }
}
