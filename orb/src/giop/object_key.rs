//! The object key of a decoded request: held inline (up to 22 bytes) when it fits, and as a
//! slice of the received frame when it does not.
//!
//! Why: a slice of the frame costs a reference count taken when it is made and dropped when
//! it goes (an atomic read-modify-write each, two of the server's ~40 per `lat` call), plus
//! ~40 instructions to make and drop; copying a few bytes costs less, and the keys of this
//! ORB's objects and omniORB's transient keys are usually this short. The inline form is no
//! bigger than a `Bytes`.
//!
//! The operation name stays a slice of the frame: held inline it would need `str::from_utf8`
//! on every read (the crate has no `unsafe`), ~60 instructions for a name of four bytes,
//! more than the reference count saves (measured, PROFILE.md "2026-12-06, evening").

use bytes::Bytes;
use std::fmt;
use std::ops::{Deref, Range};

/// The longest string held inline: 22 bytes and a length fit beside the `Bytes` form's
/// non-null field, so the enum is as big as a `Bytes` (32 bytes on 64-bit targets).
pub(crate) const INLINE: usize = 22;

#[derive(Clone)]
enum Repr {
    Inline { len: u8, buf: [u8; INLINE] },
    Shared(Bytes),
}

impl Repr {
    const EMPTY: Repr = Repr::Inline {
        len: 0,
        buf: [0; INLINE],
    };

    /// `bytes` copied inline if they fit.
    #[inline]
    fn inline(bytes: &[u8]) -> Option<Repr> {
        let len = u8::try_from(bytes.len())
            .ok()
            .filter(|&n| usize::from(n) <= INLINE)?;
        let mut buf = [0; INLINE];
        buf.get_mut(..bytes.len())?.copy_from_slice(bytes);
        Some(Repr::Inline { len, buf })
    }

    /// `msg[range]`, copied inline if it fits, else a slice of `msg`; `None` out of bounds.
    #[inline]
    fn of_frame(msg: &Bytes, range: Range<usize>) -> Option<Repr> {
        let bytes = msg.get(range.clone())?;
        if bytes.len() > INLINE {
            return Some(Repr::Shared(msg.slice(range)));
        }
        // The frame usually holds a whole window of `INLINE` bytes from the start: copied
        // with a fixed length (two vector moves, no `memcpy` call); past `len`, the window's
        // bytes are never read.
        let window = range
            .start
            .checked_add(INLINE)
            .and_then(|end| msg.get(range.start..end))
            .and_then(|w| <[u8; INLINE]>::try_from(w).ok());
        match (window, u8::try_from(bytes.len())) {
            (Some(buf), Ok(len)) => Some(Repr::Inline { len, buf }),
            _ => Repr::inline(bytes),
        }
    }

    fn of_bytes(bytes: Bytes) -> Repr {
        Repr::inline(&bytes).unwrap_or(Repr::Shared(bytes))
    }

    #[inline]
    fn as_slice(&self) -> &[u8] {
        match self {
            // `len <= INLINE` by construction; the empty slice cannot be reached.
            Repr::Inline { len, buf } => buf.get(..usize::from(*len)).unwrap_or_default(),
            Repr::Shared(b) => b,
        }
    }
}

/// An object key as a decoded request names it ([`TargetAddress::Key`](super::TargetAddress)):
/// inline when short, else a slice of the frame. Reads as `&[u8]`.
#[derive(Clone)]
pub struct ObjectKey(Repr);

impl ObjectKey {
    /// The empty key.
    pub const fn new() -> ObjectKey {
        ObjectKey(Repr::EMPTY)
    }

    /// `msg[range]` (see the module doc); `None` out of bounds.
    #[inline]
    pub(crate) fn of_frame(msg: &Bytes, range: Range<usize>) -> Option<ObjectKey> {
        Repr::of_frame(msg, range).map(ObjectKey)
    }

    /// Whether the key is a slice of a received frame (and keeps its buffer alive).
    #[inline]
    pub(crate) fn holds_frame(&self) -> bool {
        matches!(self.0, Repr::Shared(_))
    }

    /// The key as `Bytes` (a copy if it was held inline).
    #[cfg(any(test, feature = "unstable-wire"))]
    pub fn to_bytes(&self) -> Bytes {
        match &self.0 {
            Repr::Shared(b) => b.clone(),
            Repr::Inline { .. } => Bytes::copy_from_slice(self),
        }
    }
}

impl Default for ObjectKey {
    fn default() -> Self {
        ObjectKey::new()
    }
}

impl Deref for ObjectKey {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        self.0.as_slice()
    }
}

impl AsRef<[u8]> for ObjectKey {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl PartialEq for ObjectKey {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl Eq for ObjectKey {}

impl fmt::Debug for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "b\"{}\"", self.escape_ascii())
    }
}

impl From<Bytes> for ObjectKey {
    fn from(bytes: Bytes) -> Self {
        ObjectKey(Repr::of_bytes(bytes))
    }
}

impl From<Vec<u8>> for ObjectKey {
    fn from(bytes: Vec<u8>) -> Self {
        ObjectKey::from(Bytes::from(bytes))
    }
}

impl From<&[u8]> for ObjectKey {
    fn from(bytes: &[u8]) -> Self {
        ObjectKey(
            Repr::inline(bytes).unwrap_or_else(|| Repr::Shared(Bytes::copy_from_slice(bytes))),
        )
    }
}

impl<const N: usize> From<&[u8; N]> for ObjectKey {
    fn from(bytes: &[u8; N]) -> Self {
        ObjectKey::from(&bytes[..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_inline_form_is_no_bigger_than_bytes() {
        assert_eq!(
            std::mem::size_of::<ObjectKey>(),
            std::mem::size_of::<Bytes>()
        );
    }

    #[test]
    fn short_strings_are_copied_and_long_ones_sliced() {
        let frame = Bytes::from((0u8..64).collect::<Vec<_>>());
        for len in [0, 1, 21, 22, 23, 40] {
            let k = ObjectKey::of_frame(&frame, 3..3 + len).expect("in bounds");
            assert_eq!(&k[..], &frame[3..3 + len]);
            assert_eq!(
                matches!(k.0, Repr::Inline { .. }),
                len <= INLINE,
                "len {len}"
            );
            if let Repr::Shared(b) = &k.0 {
                // A slice of the frame, not a copy.
                assert_eq!(b.as_ptr(), frame[3..].as_ptr());
            }
            assert_eq!(k.to_bytes(), frame.slice(3..3 + len));
            assert_eq!(k, ObjectKey::from(frame.slice(3..3 + len)));
        }
        // Near the frame's end (no whole window to copy), and equal whatever the window held
        // past the key.
        let end = ObjectKey::of_frame(&frame, 60..64).expect("in bounds");
        assert_eq!(&end[..], &frame[60..]);
        let k = ObjectKey::of_frame(&frame, 3..5).expect("in bounds");
        assert_eq!(k, ObjectKey::from(&frame[3..5]));
        assert_eq!(k, ObjectKey::from(&[3u8, 4]));
        assert!(ObjectKey::of_frame(&frame, 60..65).is_none());
        assert_eq!(format!("{:?}", ObjectKey::from(b"k\x01")), "b\"k\\x01\"");
    }
}
