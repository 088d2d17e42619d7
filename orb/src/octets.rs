//! Large octet sequences (a call's or a reply's protobuf bytes of `SPLIT_BODY_AT` or more)
//! as parts sent one after another behind the frame's head, none copied into the frame.
//!
//! prost encodes a `bytes` field held as `Bytes` with `buf.put(value.clone())`. Into a
//! `BytesMut` that is a copy of the field: a 1 MiB payload cost each side of a `big` call a
//! 1 MiB `memcpy` (callgrind: 99% of the server's instructions), which raw TCP does not
//! make. [`encode_message_parts`] encodes into a buffer that keeps such a field as a part of
//! its own, a reference count on the caller's (or the servant's) bytes, and the fields
//! around it in its own buffer.

use crate::cdr::CdrWriter;
use bytes::buf::UninitSlice;
use bytes::{Buf, BufMut, Bytes, BytesMut};

/// Octet sequences (a call's or a reply's protobuf bytes) at least this long are sent in
/// parts from their own buffers (a vectored write) instead of being copied into the frame.
pub(crate) const SPLIT_BODY_AT: usize = 8 * 1024;

/// Whether an octet sequence of `len` bytes is sent in parts ([`SPLIT_BODY_AT`]).
pub(crate) fn is_large(len: usize) -> bool {
    len >= SPLIT_BODY_AT
}

/// A message encoded to be sent: under [`SPLIT_BODY_AT`] in one buffer (to be copied into
/// the frame), else in parts (none copied).
pub(crate) enum Encoded {
    Whole(Bytes),
    Parts(OctetParts),
}

/// `m` encoded as its size says ([`Encoded`]).
pub(crate) fn encode_message<M: prost::Message>(m: &M) -> Encoded {
    let len = m.encoded_len();
    if is_large(len) {
        Encoded::Parts(encode_message_parts(m, len))
    } else {
        Encoded::Whole(crate::outbuf::encode(len, |buf| m.encode_raw(buf)))
    }
}

/// An octet sequence as up to three parts, in order: one buffer (and two empty parts), or a
/// message's fields before a large `bytes` field, that field, and the fields after it.
pub(crate) type OctetParts = [Bytes; 3];

/// A `bytes` field this long or longer is referenced, not copied (a reference count and an
/// iovec cost more than copying a short one).
const REFERENCE_AT: usize = 4 * 1024;

/// The bytes of `parts` together.
pub(crate) fn len(parts: &OctetParts) -> usize {
    parts.iter().map(Bytes::len).sum()
}

/// One buffer as [`OctetParts`].
pub(crate) fn one_part(b: Bytes) -> OctetParts {
    [b, Bytes::new(), Bytes::new()]
}

/// Writes `parts` as one octet sequence (its length, then each part): for a collocated
/// call, or a reply written whole.
pub(crate) fn write_parts(w: &mut CdrWriter<'_>, parts: &OctetParts) {
    w.write_len(len(parts));
    for p in parts {
        w.write_raw(p);
    }
}

/// `m` (of encoded length `len`) encoded as parts: its first large `bytes` field held as
/// `Bytes` referenced where it lies, the rest copied around it.
pub(crate) fn encode_message_parts<M: prost::Message>(m: &M, len: usize) -> OctetParts {
    let mut buf = PartsBuf {
        parts: OctetParts::default(),
        done: 0,
        cur: BytesMut::with_capacity(len.min(REFERENCE_AT)),
    };
    m.encode_raw(&mut buf);
    let PartsBuf {
        mut parts,
        done,
        cur,
    } = buf;
    if !cur.is_empty() {
        parts[done] = cur.freeze();
    }
    parts
}

/// A `BufMut` that takes a large `Buf` put into it as a part of its own
/// (`Buf::copy_to_bytes`: for `Bytes`, a slice of the same memory) and copies the rest into
/// `cur`.
///
/// Invariant: `parts[..done]` are the parts finished, in order, and `done < 3` (a part is
/// taken only while room is left for it, the part before it and one after it).
struct PartsBuf {
    parts: OctetParts,
    done: usize,
    cur: BytesMut,
}

// SAFETY: `BufMut` is an unsafe trait because callers write through `chunk_mut` and then
// trust `advance_mut`; every method here hands both to `cur`, a `BytesMut`, whose own
// implementation keeps that contract. `put` and `put_slice` only call safe methods.
#[allow(unsafe_code)]
unsafe impl BufMut for PartsBuf {
    fn remaining_mut(&self) -> usize {
        self.cur.remaining_mut()
    }

    unsafe fn advance_mut(&mut self, cnt: usize) {
        // SAFETY: the caller's promise (the first `cnt` bytes of `chunk_mut` are written)
        // is about `cur`'s chunk, which `chunk_mut` returned.
        unsafe { self.cur.advance_mut(cnt) }
    }

    fn chunk_mut(&mut self) -> &mut UninitSlice {
        self.cur.chunk_mut()
    }

    fn put_slice(&mut self, src: &[u8]) {
        self.cur.put_slice(src);
    }

    fn put<T: Buf>(&mut self, mut src: T)
    where
        Self: Sized,
    {
        let n = src.remaining();
        let before = usize::from(!self.cur.is_empty());
        if n < REFERENCE_AT || self.done + before + 2 > self.parts.len() {
            self.cur.put(src);
            return;
        }
        if before == 1 {
            self.parts[self.done] = self.cur.split().freeze();
            self.done += 1;
        }
        self.parts[self.done] = src.copy_to_bytes(n);
        self.done += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, PartialEq, prost::Message)]
    struct Two {
        #[prost(uint32, tag = "1")]
        before: u32,
        #[prost(bytes = "bytes", tag = "2")]
        big: Bytes,
        #[prost(string, tag = "3")]
        after: String,
        #[prost(bytes = "bytes", tag = "4")]
        second: Bytes,
    }

    fn joined(parts: &OctetParts) -> Vec<u8> {
        parts.iter().flat_map(|p| p.iter().copied()).collect()
    }

    #[test]
    fn a_large_bytes_field_is_referenced_not_copied() {
        let big = Bytes::from(vec![7u8; 100_000]);
        let m = Two {
            before: 300,
            big: big.clone(),
            after: "tail".into(),
            second: Bytes::new(),
        };
        let parts = encode_message_parts(&m, prost::Message::encoded_len(&m));
        assert_eq!(joined(&parts), prost::Message::encode_to_vec(&m));
        assert_eq!(parts[1].as_ptr(), big.as_ptr(), "the field's own memory");
        assert_eq!(parts[1].len(), big.len());
        assert!(parts[0].len() < 16 && parts[2].len() < 16);
    }

    #[test]
    fn only_the_first_large_field_is_referenced() {
        let (a, b) = (
            Bytes::from(vec![1u8; 10_000]),
            Bytes::from(vec![2u8; 20_000]),
        );
        let m = Two {
            before: 1,
            big: a.clone(),
            after: String::new(),
            second: b,
        };
        let parts = encode_message_parts(&m, prost::Message::encoded_len(&m));
        assert_eq!(joined(&parts), prost::Message::encode_to_vec(&m));
        assert_eq!(parts[1].as_ptr(), a.as_ptr());
        assert!(parts[2].len() > 20_000, "the second one copied after it");
    }

    #[test]
    fn a_message_without_large_fields_is_one_part() {
        let m = Two {
            before: 5,
            big: Bytes::from_static(b"small"),
            after: "x".repeat(9_000),
            second: Bytes::new(),
        };
        let parts = encode_message_parts(&m, prost::Message::encoded_len(&m));
        assert_eq!(parts[0], prost::Message::encode_to_vec(&m));
        assert!(parts[1].is_empty() && parts[2].is_empty());
        assert_eq!(len(&parts), prost::Message::encoded_len(&m));
    }
}
