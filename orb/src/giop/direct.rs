//! Reading the common GIOP 1.2 Request and Reply headers straight from a frame's bytes.
//!
//! Every call decodes one request on the server and one reply on the client. Through
//! [`CdrReader`] each field costs an alignment, a bounds check and its error's field path
//! (callgrind: ~950 instructions for a request, ~290 for a reply; PROFILE.md). A [`Direct`]
//! reads the fixed layout with one bounds check per field and the same zero-copy slices, and
//! answers `None` for anything it does not cover, malformed input included, consuming
//! nothing; the reader's way then decodes it, or reports the error with its field path. So
//! this module decides no error of its own: tests check that wherever it answers, the
//! reader's way gives the same message and position.

use super::{context_id, BodyAt, ServiceContext, ServiceContextList, HEADER_LEN};
use crate::cdr::{ByteOrder, CdrReader};
use bytes::Bytes;

/// A frame being read directly: `msg` is the whole message (GIOP header included), whose
/// first byte is the alignment origin.
pub(super) struct Direct<'m> {
    msg: &'m Bytes,
    order: ByteOrder,
}

impl<'m> Direct<'m> {
    /// A direct reading of `msg` for a reader `r` at its message header (offset 12) over
    /// `msg` itself; `None` for any other reader.
    #[inline]
    pub(super) fn at_header(msg: &'m Bytes, r: &CdrReader<'_>) -> Option<Self> {
        let at_header = r.position() == HEADER_LEN
            && msg
                .get(HEADER_LEN..)
                .is_some_and(|rest| std::ptr::eq(rest, r.rest()));
        at_header.then_some(Direct {
            msg,
            order: r.order(),
        })
    }

    /// The ulong at `at` (which the caller has aligned).
    #[inline]
    pub(super) fn u32_at(&self, at: usize) -> Option<u32> {
        let b: [u8; 4] = self.msg.get(at..at.checked_add(4)?)?.try_into().ok()?;
        Some(self.order.u32_from(b))
    }

    /// The `sequence<octet>` whose count is at `at` (aligned): its bytes' range, ending
    /// within the message.
    #[inline]
    pub(super) fn octets_at(&self, at: usize) -> Option<std::ops::Range<usize>> {
        let len = self.u32_at(at)? as usize;
        let start = at + 4;
        let end = start.checked_add(len)?;
        (end <= self.msg.len()).then_some(start..end)
    }

    /// The ServiceContextList whose count is at `at` (4-aligned), and the position after it.
    /// `held(id, data)` may keep a context out of the list (true: it copied what it needs).
    #[inline]
    pub(super) fn contexts_at<const N: usize>(
        &self,
        at: usize,
        mut held: impl FnMut(u32, &[u8]) -> bool,
    ) -> Option<(ServiceContextList<N>, usize)> {
        let count = self.u32_at(at)? as usize;
        let mut at = at + 4;
        // Each context takes 8 bytes at least: a lying count fails here, before any
        // allocation (the reader's `read_count` rule).
        if count > self.msg.len().saturating_sub(at) / 8 {
            return None;
        }
        let mut list = ServiceContextList::<N>::default();
        for _ in 0..count {
            at = align(at, 4)?;
            let id = self.u32_at(at)?;
            let data = self.octets_at(at + 4)?;
            at = data.end;
            if held(id, &self.msg[data.clone()]) {
                continue;
            }
            list.0.push(ServiceContext {
                id,
                data: self.msg.slice(data),
            });
        }
        Some((list, at))
    }

    /// The ServiceContextList whose count is at `at` (4-aligned) when it is the ORB's own:
    /// exactly one context, a DEADLINE of 24 bytes. Its data and the position after it, read
    /// at once: what [`contexts_at`](Self::contexts_at) would hold apart, without its loop
    /// and list (~80 instructions of a request, callgrind).
    #[inline]
    pub(super) fn sole_deadline_at(&self, at: usize) -> Option<([u8; 24], usize)> {
        let end = at.checked_add(36)?;
        let b: &[u8; 36] = self.msg.get(at..end)?.try_into().ok()?;
        let word = |i: usize| self.order.u32_from([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        if word(0) != 1 || word(4) != context_id::DEADLINE || word(8) != 24 {
            return None;
        }
        let mut data = [0u8; 24];
        data.copy_from_slice(&b[12..]);
        Some((data, end))
    }

    /// The body from `at` on: 8-aligned, the padding only if bytes remain (senders omit it
    /// before an empty body). Consumes the rest of `r`, as `rest_as_body` does.
    #[inline]
    pub(super) fn body_at(&self, at: usize, r: &mut CdrReader<'_>) -> Option<BodyAt> {
        let len = self.msg.len();
        let at = if at < len { align(at, 8)? } else { at };
        if at > len {
            return None;
        }
        r.skip(len - HEADER_LEN).ok()?;
        Some(BodyAt::Rest(at, self.order))
    }
}

/// `at` rounded up to a multiple of `n` (a power of two).
#[inline]
pub(super) fn align(at: usize, n: usize) -> Option<usize> {
    Some(at.checked_add(n - 1)? & !(n - 1))
}
