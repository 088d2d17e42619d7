//! A map keyed by GIOP request ids, for the per-connection tables that hold one entry per
//! call or upcall in flight (the reply table, the owed replies): a request-reply loop has
//! one entry at a time, which hashing served at ~100 instructions a call more than a short
//! list does (callgrind).

use std::collections::HashMap;

/// How many entries [`IdMap`] keeps in its list before they move to its map.
const FEW: usize = 16;

/// Request id → `V`: while few entries are held, a short list searched in order, whose
/// insert is a push and whose removal a swap-remove; past [`FEW`], a hash map, foldhash
/// (randomly seeded, as the ids may be the peer's; SipHash showed up in the per-call
/// profile). At most one of the two holds entries: the list's move into the map when it is
/// full, and the map's emptying, switch between them. The map keeps its capacity when
/// emptied, so that the next burst (the next chain of nested callbacks, say) does not grow
/// it again. An id chosen by the peer costs at most `FEW` comparisons to look up.
///
/// Ids are meant to be unique among the entries (ours come from a counter). A peer may
/// repeat its own, and that stays harmless: the list keeps an entry per insert and the map
/// one per id, each removal takes one, so the entries never outnumber the inserts.
#[derive(Debug)]
pub(crate) struct IdMap<V> {
    few: Vec<(u32, V)>,
    many: HashMap<u32, V, foldhash::fast::RandomState>,
}

impl<V> Default for IdMap<V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<V> IdMap<V> {
    pub(crate) fn new() -> Self {
        IdMap {
            few: Vec::new(),
            many: HashMap::default(),
        }
    }

    /// Adds the entry of `id`.
    pub(crate) fn insert(&mut self, id: u32, v: V) {
        if self.many.is_empty() {
            if self.few.len() < FEW {
                self.few.push((id, v));
                return;
            }
            self.many.extend(self.few.drain(..));
        }
        self.many.insert(id, v);
    }

    /// Takes the entry of `id` out, if there is one.
    pub(crate) fn remove(&mut self, id: u32) -> Option<V> {
        if self.few.is_empty() {
            return self.many.remove(&id);
        }
        let i = self.few.iter().position(|(k, _)| *k == id)?;
        Some(self.few.swap_remove(i).1)
    }

    /// The entry of `id`, if there is one.
    pub(crate) fn get(&self, id: u32) -> Option<&V> {
        if self.few.is_empty() {
            return self.many.get(&id);
        }
        self.few.iter().find(|(k, _)| *k == id).map(|(_, v)| v)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.few.is_empty() && self.many.is_empty()
    }

    /// Every entry.
    pub(crate) fn values(&self) -> impl Iterator<Item = &V> {
        self.few.iter().map(|(_, v)| v).chain(self.many.values())
    }

    /// Takes every entry out.
    pub(crate) fn drain(&mut self) -> Vec<V> {
        let mut all: Vec<V> = self.few.drain(..).map(|(_, v)| v).collect();
        all.extend(self.many.drain().map(|(_, v)| v));
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Entries come back by their own ids in any order, through the list, the map and the
    /// list again; unknown ids find nothing.
    #[test]
    fn entries_are_found_by_id_across_the_list_and_the_map() {
        let mut m = IdMap::new();
        for round in 0..3u32 {
            let n = [3, FEW as u32 + 1, 5 * FEW as u32][round as usize];
            let ids: Vec<u32> = (0..n).map(|i| 1000 * round + 2 * i).collect();
            for &id in &ids {
                m.insert(id, (round, id));
            }
            assert_eq!(m.values().count(), ids.len());
            assert_eq!(m.get(1), None);
            assert_eq!(m.remove(1), None);
            assert_eq!(m.get(ids[0]), Some(&(round, ids[0])));
            let order = ids
                .iter()
                .step_by(2)
                .chain(ids.iter().skip(1).step_by(2).rev());
            for &id in order {
                assert_eq!(m.remove(id), Some((round, id)));
                assert_eq!(m.remove(id), None, "removed twice");
            }
            assert!(m.is_empty());
        }
        for id in 0..40 {
            m.insert(id, (9, id));
        }
        assert_eq!(m.drain().len(), 40);
        assert!(m.is_empty());
    }
}
