//! The per-thread buffer outgoing frames are encoded into.
//!
//! Each frame used to get its own `BytesMut`, and freezing one whose length is not its
//! capacity allocates the shared header as well: two allocations per frame, a third for the
//! deadline context's encapsulation (dhat, `lat`). Here a thread encodes into one buffer and
//! splits each frame off as `Bytes` (a reference count, no copy). Frames are written and
//! dropped soon after, so when the buffer runs out its memory is usually unique again and is
//! reused in place; a frame still queued keeps its chunk alive, and the next frame goes into
//! a new one. A small frame that has to wait behind a full socket is copied out first
//! ([`detach`]), so that a slow peer's queue does not hold a chunk per frame.
//!
//! The frames of the request path (a call's request, an upcall's reply) are not split off
//! at all when their connection is free: [`encode_offer`] lets the connection write them
//! from the buffer where they lie, and the next frame reuses the space.

use bytes::{Bytes, BytesMut};
use std::cell::RefCell;

/// Capacity reserved when the buffer runs out (frames of a small call take 100-200 bytes).
const CHUNK: usize = 4096;

/// Frames larger than this get a buffer of their own: the thread's buffer would otherwise
/// keep the largest frame's allocation (a reply carrying a big user exception, up to the
/// maximum message size) for the rest of the thread's life.
const SHARED_MAX: usize = 4 * CHUNK;

thread_local! {
    static BUF: RefCell<BytesMut> = RefCell::new(BytesMut::new());
}

/// Runs `f` on an empty buffer with room for `hint` bytes and returns what it wrote.
pub(crate) fn encode(hint: usize, f: impl FnOnce(&mut BytesMut)) -> Bytes {
    if hint > SHARED_MAX {
        return encode_alone(hint, f);
    }
    BUF.with(|b| {
        // Busy: `f` encodes another frame inside (not done today).
        let Ok(mut buf) = b.try_borrow_mut() else {
            return encode_alone(hint, f);
        };
        debug_assert!(buf.is_empty());
        if buf.capacity() < hint {
            buf.reserve(hint.max(CHUNK));
        }
        f(&mut buf);
        let frame = buf.split().freeze();
        if frame.len() > SHARED_MAX {
            // It outgrew its hint: let its allocation go with it.
            *buf = BytesMut::new();
        }
        frame
    })
}

/// Encodes a frame as [`encode`] does, then offers it to `send` where it lies, in this
/// thread's buffer. If `send` takes it (`Ok(true)`: written, or what the socket left copied
/// into a queue), the buffer's space is reused by the next frame: no `Bytes` is made, so no
/// reference count is taken and dropped (two atomic read-modify-writes and the split's
/// bookkeeping per frame; PROFILE.md). If not (`Ok(false)`: the connection is busy), the
/// frame is returned as `Bytes`, as [`encode`] would have, for the caller to queue. A frame
/// over `SHARED_MAX` is returned as `Bytes` without being offered: what a full socket leaves
/// of it then waits uncopied.
pub(crate) fn encode_offer<E>(
    hint: usize,
    f: impl FnOnce(&mut BytesMut),
    send: impl FnOnce(&[u8]) -> Result<bool, E>,
) -> Result<Option<Bytes>, E> {
    if hint > SHARED_MAX {
        return Ok(Some(encode_alone(hint, f)));
    }
    BUF.with(|b| {
        let Ok(mut buf) = b.try_borrow_mut() else {
            return Ok(Some(encode_alone(hint, f)));
        };
        debug_assert!(buf.is_empty());
        if buf.capacity() < hint {
            buf.reserve(hint.max(CHUNK));
        }
        f(&mut buf);
        if buf.len() > SHARED_MAX {
            // It outgrew its hint: let its allocation go with it.
            let frame = buf.split().freeze();
            *buf = BytesMut::new();
            return Ok(Some(frame));
        }
        let sent = send(&buf);
        if !matches!(sent, Ok(false)) {
            // Taken (or failed): the space is this thread's again.
            buf.clear();
            return sent.map(|_| None);
        }
        Ok(Some(buf.split().freeze()))
    })
}

/// [`encode`] into a buffer of the frame's own.
fn encode_alone(hint: usize, f: impl FnOnce(&mut BytesMut)) -> Bytes {
    let mut buf = BytesMut::with_capacity(hint);
    f(&mut buf);
    buf.freeze()
}

/// A frame that is going to wait in an outgoing queue (the socket is full: the peer is slow
/// or gone): a small one is copied out of its chunk, which it would otherwise keep alive with
/// every frame around it. Without this a stalled peer's queue of small frames held up to
/// `CHUNK` bytes per frame, far more than the queue's own byte bound says. Large frames
/// fill most of their chunk and are returned as they are.
pub(crate) fn detach(frame: Bytes) -> Bytes {
    if frame.len() < CHUNK / 2 {
        Bytes::copy_from_slice(&frame)
    } else {
        frame
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_independent_and_whole() {
        let a = encode(8, |b| b.extend_from_slice(b"first"));
        let big = encode(10_000, |b| b.extend_from_slice(&[7; 10_000]));
        let c = encode(8, |b| b.extend_from_slice(b"third"));
        let nested = encode(8, |b| {
            let inner = encode(8, |i| i.extend_from_slice(b"inner"));
            b.extend_from_slice(b"outer+");
            b.extend_from_slice(&inner);
        });
        assert_eq!(&a[..], b"first");
        assert_eq!(big.len(), 10_000);
        assert!(big.iter().all(|&x| x == 7));
        assert_eq!(&c[..], b"third");
        assert_eq!(&nested[..], b"outer+inner");
    }

    /// A large frame does not leave its allocation behind in the thread's buffer.
    #[test]
    fn a_large_frame_is_not_retained() {
        let hinted = encode(SHARED_MAX + 1, |b| {
            b.extend_from_slice(&[1; SHARED_MAX + 1])
        });
        let unhinted = encode(8, |b| b.extend_from_slice(&[2; 4 * SHARED_MAX]));
        assert_eq!(hinted.len(), SHARED_MAX + 1);
        assert_eq!(unhinted.len(), 4 * SHARED_MAX);
        drop((hinted, unhinted));
        // Had the buffer kept the large allocation, this would reuse it.
        let small = encode(8, |b| b.extend_from_slice(b"small"));
        assert_eq!(&small[..], b"small");
        BUF.with(|b| assert!(b.borrow().capacity() < CHUNK, "the buffer kept a large one"));
    }

    #[test]
    fn a_detached_small_frame_no_longer_shares_the_chunk() {
        let small = encode(100, |b| b.extend_from_slice(&[5; 100]));
        let copy = detach(small.clone());
        assert_eq!(copy, small);
        assert_ne!(copy.as_ptr(), small.as_ptr());
        let big = encode(CHUNK, |b| b.extend_from_slice(&[6; CHUNK]));
        assert_eq!(detach(big.clone()).as_ptr(), big.as_ptr());
    }

    /// A frame that was taken where it lay leaves its space to the next one; a frame that
    /// was not is returned whole, and the next frame does not overwrite it.
    #[test]
    fn an_offered_frame_is_taken_in_place_or_returned_whole() {
        let mut seen = Vec::new();
        let taken = encode_offer::<()>(
            100,
            |b| b.extend_from_slice(&[1; 100]),
            |f| {
                seen.extend_from_slice(f);
                Ok(true)
            },
        );
        assert_eq!(taken, Ok(None));
        assert_eq!(seen, [1; 100]);
        let at = BUF.with(|b| b.borrow().as_ptr() as usize);
        let kept = encode_offer::<()>(
            100,
            |b| b.extend_from_slice(&[2; 100]),
            |f| {
                assert_eq!(f.as_ptr() as usize, at, "written where the taken one was");
                Ok(false)
            },
        )
        .expect("no error")
        .expect("returned");
        let next = encode(100, |b| b.extend_from_slice(&[3; 100]));
        assert_eq!(&kept[..], &[2; 100]);
        assert_eq!(&next[..], &[3; 100]);
        let failed = encode_offer(8, |b| b.extend_from_slice(b"x"), |_| Err("broken"));
        assert_eq!(failed, Err("broken"));
        BUF.with(|b| assert!(b.borrow().is_empty(), "a failed frame is not left behind"));
        // Large frames are not offered: returned whole, their buffer not kept.
        let offered = |f: &[u8]| -> Result<bool, ()> { panic!("offered {} bytes", f.len()) };
        let large = encode_offer(SHARED_MAX + 1, |b| b.extend_from_slice(&[4; 5]), offered);
        assert_eq!(large.expect("no error").as_deref(), Some(&[4u8; 5][..]));
        let grown = encode_offer(8, |b| b.extend_from_slice(&[5; SHARED_MAX + 1]), offered);
        assert_eq!(
            grown.expect("no error").map(|f| f.len()),
            Some(SHARED_MAX + 1)
        );
        BUF.with(|b| assert!(b.borrow().capacity() < CHUNK, "the buffer kept a large one"));
    }

    /// Once earlier frames are dropped, the buffer's memory is reused: encoding many frames
    /// one after another stays within one chunk.
    #[test]
    fn dropped_frames_give_their_memory_back() {
        let first = encode(100, |b| b.extend_from_slice(&[1; 100]));
        let base = first.as_ptr() as usize;
        drop(first);
        for i in 0..1000u32 {
            let f = encode(100, |b| b.extend_from_slice(&[i as u8; 100]));
            let at = f.as_ptr() as usize;
            assert!(
                (base..base + CHUNK).contains(&at),
                "frame {i} not in the first chunk"
            );
            assert!(f.iter().all(|&x| x == i as u8));
        }
    }
}
