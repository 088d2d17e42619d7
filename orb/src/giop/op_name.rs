//! Operation names of received requests, held as `&'static str` once seen.
//!
//! A request's operation name used to become a `ByteString` slice of its frame: a reference
//! count taken and later dropped (two atomic read-modify-writes) and a UTF-8 check, ~100
//! instructions of each request on the server (callgrind, PROFILE.md). A service has a few
//! operation names, and its requests repeat them: a name seen before is found in this
//! thread's recent names (one place per name, picked from its length and three of its bytes,
//! then compared byte for byte) and held as a static string, whose clone and drop cost
//! nothing. A name not found there is looked up in the process's kept names (a hash set
//! behind a lock: once per name and thread, unless two hot names share a place).
//!
//! Memory is bounded whatever peers send: at most [`MAX_NAMES`] names of at most
//! [`MAX_LEN`] bytes are ever kept (leaked, for the process's life: 16 KiB at most). Once
//! full (a peer sending many names fills it as well as a large service does), other names
//! are sliced from the frame as before; nothing is refused.
//!
//! An asynchronous call keeps its own operation name the same way (`client/ami.rs`: the
//! name is kept with the call, to send it again after a forward), instead of a copy of its
//! own per call.

use crate::sync::plain::Mutex;
use std::cell::Cell;
use std::collections::HashSet;
use std::sync::LazyLock;

/// The most names kept for the process.
const MAX_NAMES: usize = 256;
/// The longest name kept.
const MAX_LEN: usize = 64;

/// Every name kept so far (randomly seeded: peers choose the names).
static KEPT: LazyLock<Mutex<Kept>> = LazyLock::new(|| Mutex::new(Kept::default()));

/// The process's kept names, at most [`MAX_NAMES`].
#[derive(Default)]
struct Kept(HashSet<&'static str, foldhash::fast::RandomState>);

impl Kept {
    /// `name` as kept before, or kept now if there is room.
    fn find_or_keep(&mut self, name: &str) -> Option<&'static str> {
        if let Some(k) = self.0.get(name) {
            return Some(k);
        }
        if self.0.len() >= MAX_NAMES || name.len() > MAX_LEN {
            return None;
        }
        let k: &'static str = Box::leak(name.into());
        self.0.insert(k);
        Some(k)
    }
}

/// How many places a thread's recent names have (a power of two).
const RECENT: usize = 32;

std::thread_local! {
    /// This thread's recent names, each at its [`place`] ("" is an empty place: a name is
    /// never empty here).
    static RECENT_NAMES: [Cell<&'static str>; RECENT] = const { [const { Cell::new("") }; RECENT] };
}

/// Where a (non-empty) name goes among a thread's recent names.
#[inline]
fn place(name: &[u8]) -> usize {
    let n = name.len();
    let byte = |i: usize| usize::from(name[i]);
    (n.wrapping_mul(31) ^ byte(0).wrapping_mul(7) ^ byte(n / 2).wrapping_mul(17) ^ byte(n - 1))
        % RECENT
}

/// `name` as a static string, if it is UTF-8, not empty, and seen before or kept now;
/// `None` for anything else (the caller then slices it from its frame).
#[inline]
pub(crate) fn kept(name: &[u8]) -> Option<&'static str> {
    if name.is_empty() {
        return None;
    }
    let at = place(name);
    let recent = RECENT_NAMES.with(|r| r[at].get());
    if recent.as_bytes() == name {
        return Some(recent);
    }
    keep(name, at)
}

/// [`kept`] for a name not at its place among this thread's recent names: the process's kept
/// names, where it is added if there is room, and then that place. Out of line: once per
/// name and thread.
#[cold]
#[inline(never)]
fn keep(name: &[u8], at: usize) -> Option<&'static str> {
    if name.len() > MAX_LEN {
        return None;
    }
    let name = std::str::from_utf8(name).ok()?;
    let found = KEPT.lock().find_or_keep(name)?;
    RECENT_NAMES.with(|r| r[at].set(found));
    Some(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Other tests of this process decode requests with many names (some changed byte by
    /// byte), which may have filled the process's kept names: where a name is not kept, the
    /// caller slices it, as before.
    #[test]
    fn a_name_seen_before_is_the_same_static_string() {
        let Some(a) = kept(b"op_name_test_a") else {
            assert_eq!(KEPT.lock().0.len(), MAX_NAMES);
            return;
        };
        assert_eq!(a, "op_name_test_a");
        // Found among the recent names, and from another thread among the kept ones.
        assert!(std::ptr::eq(a, kept(b"op_name_test_a").unwrap()));
        let b = std::thread::spawn(|| kept(b"op_name_test_a").unwrap())
            .join()
            .unwrap();
        assert!(std::ptr::eq(a, b));
    }

    #[test]
    fn empty_long_and_invalid_names_are_not_kept() {
        assert_eq!(kept(b""), None);
        assert_eq!(kept(&[b'x'; MAX_LEN + 1]), None);
        assert_eq!(kept(&[0xff, 0xfe]), None);
    }

    /// However many names arrive, at most `MAX_NAMES` are kept; the others are declined (the
    /// caller slices them), and names kept before are still found, as themselves.
    #[test]
    fn the_kept_names_are_bounded() {
        let mut k = Kept::default();
        let first = k.find_or_keep("first").expect("room");
        assert_eq!(
            k.find_or_keep(&"y".repeat(MAX_LEN)).map(str::len),
            Some(MAX_LEN)
        );
        assert_eq!(k.find_or_keep(&"y".repeat(MAX_LEN + 1)), None);
        for i in 0..MAX_NAMES + 10 {
            let n = format!("name_{i}");
            match k.find_or_keep(&n) {
                Some(kept) => assert_eq!(kept, n),
                None => assert_eq!(k.0.len(), MAX_NAMES),
            }
        }
        assert_eq!(k.0.len(), MAX_NAMES);
        assert_eq!(k.find_or_keep("another"), None);
        assert!(std::ptr::eq(first, k.find_or_keep("first").unwrap()));
    }

    /// More names than a thread has places for: all still found, as themselves (from the
    /// process's kept names where two share a place).
    #[test]
    fn more_names_than_a_thread_holds_are_found() {
        let names: Vec<String> = (0..2 * RECENT)
            .map(|i| format!("op_name_test_{i}"))
            .collect();
        for n in names.iter().chain(names.iter()) {
            if let Some(k) = kept(n.as_bytes()) {
                assert_eq!(k, n);
            }
        }
    }
}
