//! The object adapter: object key → servant.
//!
//! Every request looks its servant up here, so the lookup is on every call's path: a thread
//! remembers the last object it looked up (most threads serve one object after another, the
//! same one), and finds it again without hashing the key or locking the map's shard (two
//! atomic read-modify-writes and ~100 instructions per request, callgrind).

use crate::servant::Servant;
use bytes::Bytes;
use dashmap::DashMap;
use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

/// Active objects of one ORB, looked up concurrently by every serving thread.
///
/// Invariants: one servant per key (activating a key again replaces its servant); entries are
/// added and removed only by the application (`Orb::activate*`, `Orb::deactivate`), never
/// by peer input, so a peer cannot grow it. An upcall holds its servant's `Arc`, so a
/// deactivated servant finishes the requests it is running.
///
/// Hashed with foldhash, randomly seeded: SipHash cost more per request than the rest of the
/// lookup (callgrind), and the keys stored are our own (a peer only chooses what it looks up).
///
/// A thread's remembered lookup (`LAST`) is used only while `gen` is what it was before that
/// lookup: every change of the map bumps `gen` after it is made, so a lookup that may have
/// seen the map before a change is never used after it. It holds the servant weakly (a
/// deactivated servant is not kept alive by a thread that served it) and a copy of the key
/// (not the request's buffer).
pub(crate) struct Adapter {
    servants: DashMap<Bytes, Arc<dyn Servant>, foldhash::fast::RandomState>,
    /// This adapter among the process's (an ORB's): a thread's remembered lookup is this
    /// adapter's only if it says this id.
    id: u64,
    /// Bumped after every change of `servants`.
    gen: AtomicU64,
}

/// The last lookup of a thread (see [`Adapter`]).
struct Last {
    adapter: u64,
    gen: u64,
    key: Vec<u8>,
    servant: Weak<dyn Servant>,
}

thread_local! {
    static LAST: RefCell<Option<Last>> = const { RefCell::new(None) };
}

/// Source of [`Adapter::id`]s.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl Default for Adapter {
    fn default() -> Self {
        Adapter {
            servants: DashMap::default(),
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            gen: AtomicU64::new(0),
        }
    }
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
        self.gen.fetch_add(1, Ordering::Release);
    }

    pub(crate) fn remove(&self, key: &[u8]) -> bool {
        let removed = self.servants.remove(key).is_some();
        self.gen.fetch_add(1, Ordering::Release);
        removed
    }

    pub(crate) fn contains(&self, key: &[u8]) -> bool {
        self.servants.contains_key(key)
    }

    /// The servant of `key`: this thread's last lookup if it is still valid, else the map's
    /// (remembered for next time).
    pub(crate) fn get(&self, key: &[u8]) -> Option<Arc<dyn Servant>> {
        // Read before the map: see the invariants.
        let gen = self.gen.load(Ordering::Acquire);
        LAST.with(|last| {
            // Busy (cannot happen: nothing here calls out) or not ours: the map alone.
            let Ok(mut last) = last.try_borrow_mut() else {
                return self.lookup(key);
            };
            if let Some(l) = last.as_ref() {
                if l.adapter == self.id && l.gen == gen && l.key == key {
                    if let Some(s) = l.servant.upgrade() {
                        return Some(s);
                    }
                }
            }
            let found = self.lookup(key)?;
            match last.as_mut() {
                Some(l) => {
                    l.key.clear();
                    l.key.extend_from_slice(key);
                    (l.adapter, l.gen, l.servant) = (self.id, gen, Arc::downgrade(&found));
                }
                None => {
                    *last = Some(Last {
                        adapter: self.id,
                        gen,
                        key: key.to_vec(),
                        servant: Arc::downgrade(&found),
                    })
                }
            }
            Some(found)
        })
    }

    fn lookup(&self, key: &[u8]) -> Option<Arc<dyn Servant>> {
        self.servants.get(key).map(|s| s.value().clone())
    }
}

#[cfg(test)]
mod tests {
    //! The remembered lookup never outlives a change of the map, nor mixes two adapters.

    use super::*;
    use crate::servant::{Context, Servant};

    struct Named(&'static str);

    impl Servant for Named {
        fn repository_id(&self) -> &'static str {
            self.0
        }

        fn dispatch(
            &self,
            _op: &str,
            _params: Bytes,
            _ctx: &Context,
        ) -> Result<Bytes, crate::exception::Exception> {
            Ok(Bytes::from_static(self.0.as_bytes()))
        }
    }

    fn id(a: &Adapter, key: &[u8]) -> Option<String> {
        a.get(key).map(|s| s.repository_id().to_owned())
    }

    #[test]
    fn a_remembered_lookup_follows_every_change_and_stays_in_its_adapter() {
        let (a, b) = (Adapter::default(), Adapter::default());
        a.insert(Bytes::from_static(b"k"), Arc::new(Named("one")));
        b.insert(Bytes::from_static(b"k"), Arc::new(Named("other")));
        assert_eq!(id(&a, b"k").as_deref(), Some("one"));
        assert_eq!(id(&a, b"k").as_deref(), Some("one"), "remembered");
        assert_eq!(
            id(&b, b"k").as_deref(),
            Some("other"),
            "same key, other adapter"
        );
        assert_eq!(id(&a, b"k").as_deref(), Some("one"));
        a.insert(Bytes::from_static(b"k"), Arc::new(Named("two")));
        assert_eq!(id(&a, b"k").as_deref(), Some("two"), "replaced");
        assert!(a.remove(b"k"));
        assert_eq!(id(&a, b"k"), None, "deactivated");
        assert_eq!(id(&a, b"x"), None);
        // A deactivated servant is not kept alive by the thread that served it last.
        let s: Arc<dyn Servant> = Arc::new(Named("three"));
        a.insert(Bytes::from_static(b"k"), s.clone());
        assert!(id(&a, b"k").is_some());
        a.remove(b"k");
        assert_eq!(Arc::strong_count(&s), 1);
    }
}
