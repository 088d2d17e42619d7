//! Per-thread spares: objects a thread reuses for its next call or upcall instead of
//! allocating one each time (a participant, an upcall's context). One at hand covers a
//! thread that does one thing at a time; nested callbacks hold one per level at once, so the
//! rest wait on a stack for the next chain as deep (measured: `nest`, a context and a
//! participant allocated and freed per level on each side before).

use std::cell::{Cell, RefCell};

/// How many spares a thread keeps beyond the one at hand: the default nesting limit
/// (`OrbBuilder::max_nesting_depth`), so that a chain as deep as the ORB allows is served
/// from spares the second time. What it costs: the objects of the deepest chain the thread
/// ran, a few hundred bytes per level, kept until the thread exits.
const MORE: usize = 1024;

/// A thread's spares of one kind (in a `thread_local!`).
pub(crate) struct Spares<T> {
    /// The one at hand: a `Cell`, so that a thread doing one thing at a time pays no more
    /// than a take and a set per use.
    first: Cell<Option<T>>,
    /// The others, most recently used last.
    more: RefCell<Vec<T>>,
}

impl<T> Spares<T> {
    pub(crate) const fn new() -> Self {
        Spares {
            first: Cell::new(None),
            more: RefCell::new(Vec::new()),
        }
    }

    /// A spare, if the thread has one.
    #[inline]
    pub(crate) fn take(&self) -> Option<T> {
        self.first.take().or_else(|| self.take_more())
    }

    #[cold]
    fn take_more(&self) -> Option<T> {
        self.more.try_borrow_mut().ok()?.pop()
    }

    /// Keeps `t` for a later [`take`](Self::take) (dropped if the thread keeps enough).
    #[inline]
    pub(crate) fn put(&self, t: T) {
        match self.first.take() {
            None => self.first.set(Some(t)),
            Some(held) => {
                self.first.set(Some(t));
                self.put_more(held);
            }
        }
    }

    #[cold]
    fn put_more(&self, t: T) {
        if let Ok(mut more) = self.more.try_borrow_mut() {
            if more.len() < MORE {
                more.push(t);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Taken last in, first out, one at hand and the rest stacked, up to the bound.
    #[test]
    fn spares_are_reused_nested_and_bounded() {
        let s: Spares<usize> = Spares::new();
        assert_eq!(s.take(), None);
        s.put(1);
        assert_eq!(s.take(), Some(1));
        // A chain three deep gives back its three, and the next one as deep reuses them all.
        for i in 0..3 {
            s.put(i);
        }
        let again: Vec<usize> = (0..3).map_while(|_| s.take()).collect();
        assert_eq!(again, [2, 1, 0]);
        assert_eq!(s.take(), None);
        for i in 0..MORE + 10 {
            s.put(i);
        }
        let kept = std::iter::from_fn(|| s.take()).count();
        assert_eq!(kept, MORE + 1, "one at hand and MORE stacked");
    }
}
