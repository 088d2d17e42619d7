//! Where an upcall's result goes: straight into its reply frame.
//!
//! A generated skeleton used to encode its operation's result into `Bytes` of its own
//! (`codegen::encode`), which the ORB then copied into the reply frame behind the
//! reply's header: a split of the thread's buffer (a reference count taken and dropped), a
//! reply plan, the header writer and a copy per reply (callgrind: several hundred of the
//! ~4,500 instructions a `lat` request costs the server; PROFILE.md). A [`ResultSlot`] given
//! to [`Servant::dispatch_into`] by the ORB's upcall instead has the skeleton encode the
//! result where the reply's body goes, behind room for the reply's head; the ORB writes the
//! head in front and sends the frame from where it lies.
//!
//! Only the common reply uses the frame: NO_EXCEPTION, no service contexts (the head is then
//! 24 bytes in every GIOP version), a result under `octets::SPLIT_BODY_AT` (a larger one is
//! encoded in parts, its large `bytes` field uncopied: `octets.rs`). For anything else (an
//! exception, reply metadata, a deferred or cancelled request) the ORB takes the result out
//! of the frame as the reply's body ([`InFrame::body`]) and goes the general way. The frame's
//! buffer is this thread's spare, taken when the result is encoded (after the servant's user
//! code, so nested upcalls during it have it too) and given back once the frame is sent.
//!
//! [`Servant::dispatch_into`]: crate::Servant::dispatch_into

use crate::cdr::ByteOrder;
use crate::octets::OctetParts;
use bytes::{Bytes, BytesMut};
use std::cell::Cell;

/// Bytes before the result in a frame: the reply's head (the GIOP header and a reply header
/// without contexts: 24 in every GIOP version, and 8-aligned, so a GIOP 1.2 body needs no
/// padding) and the octet sequence's length (4).
pub(crate) const BODY_AT: usize = 28;

/// The reply's head: `frame[..HEAD]`.
pub(crate) const HEAD: usize = 24;

thread_local! {
    /// This thread's spare frame buffer, for its allocation.
    static SPARE: Cell<BytesMut> = Cell::new(BytesMut::new());
}

/// Where a servant puts an operation's encoded result ([`Servant::dispatch_into`]).
///
/// The ORB gives one to each upcall; [`message`](Self::message) encodes a protobuf result
/// into it, in the reply frame when the ORB asked for one, else as `Bytes` (which
/// [`into_bytes`](Self::into_bytes) returns). The last result put in counts.
///
/// [`Servant::dispatch_into`]: crate::Servant::dispatch_into
#[derive(Debug, Default)]
pub struct ResultSlot {
    /// Whether results go into a reply frame (the ORB's upcalls from the network).
    framed: bool,
    /// The result, in one of its three forms.
    held: Held,
}

/// The forms a result takes in a [`ResultSlot`]: one at a time, so one field.
#[derive(Debug, Default)]
pub(crate) enum Held {
    /// No result (yet, or any more: taken out).
    #[default]
    Empty,
    /// As bytes: an unframed slot's result, or one put in encoded.
    Bytes(Bytes),
    /// In the reply frame, behind room for the reply's head.
    Frame(InFrame),
    /// A large result for a reply, in parts: its large `bytes` field referenced where the
    /// servant's message holds it, not copied (`octets::encode_message_parts`). Boxed: a
    /// reply body is moved a few times on every reply's path, and small ones are the many.
    Parts(Box<OctetParts>),
}

impl ResultSlot {
    /// A slot whose result is returned as bytes ([`into_bytes`](Self::into_bytes)): what a
    /// generated `dispatch` uses.
    pub fn for_bytes() -> Self {
        Self::default()
    }

    /// A slot that encodes small results into a reply frame (the ORB's upcalls).
    pub(crate) fn framed() -> Self {
        ResultSlot {
            framed: true,
            held: Held::default(),
        }
    }

    /// Puts in the encoded result `m`.
    pub fn message<M: prost::Message>(&mut self, m: &M) {
        let len = m.encoded_len();
        if !self.framed {
            self.set_bytes(crate::outbuf::encode(len, |buf| m.encode_raw(buf)));
            return;
        }
        if crate::octets::is_large(len) {
            self.held = Held::Parts(Box::new(crate::octets::encode_message_parts(m, len)));
            return;
        }
        // A result put in before is replaced; its frame's buffer is reused.
        let mut frame = match &mut self.held {
            Held::Frame(f) => std::mem::take(&mut f.frame),
            _ => SPARE.with(Cell::take),
        };
        frame.clear();
        frame.reserve(BODY_AT + len);
        frame.extend_from_slice(&[0; BODY_AT]);
        m.encode_raw(&mut frame);
        let n = u32::try_from(frame.len() - BODY_AT).unwrap_or(u32::MAX);
        // The octet sequence's length, in the frame's (native) byte order.
        frame[HEAD..BODY_AT].copy_from_slice(&ByteOrder::NATIVE.u32_bytes(n));
        self.held = Held::Frame(InFrame { frame });
    }

    /// Puts in a result encoded already.
    pub fn set_bytes(&mut self, bytes: Bytes) {
        self.held = Held::Bytes(bytes);
    }

    /// The encoded result.
    pub fn into_bytes(self) -> Bytes {
        match self.held {
            Held::Empty => Bytes::new(),
            Held::Bytes(b) => b,
            Held::Frame(f) => f.body(),
            Held::Parts(parts) => joined(*parts),
        }
    }

    /// Whether the result went into a reply frame.
    pub(crate) fn has_frame(&self) -> bool {
        matches!(self.held, Held::Frame(_))
    }

    /// The reply frame holding the result, if the result went into one (the slot is then
    /// left empty; else it is left as it was).
    pub(crate) fn take_frame(&mut self) -> Option<InFrame> {
        if !self.has_frame() {
            return None;
        }
        match std::mem::take(&mut self.held) {
            Held::Frame(f) => Some(f),
            _ => None,
        }
    }

    /// The result, in whichever form it is; the slot is left empty.
    pub(crate) fn take(&mut self) -> Held {
        std::mem::take(&mut self.held)
    }
}

/// `parts` as one buffer (copied together unless only the first holds bytes).
fn joined(parts: OctetParts) -> Bytes {
    let [a, b, c] = parts;
    if b.is_empty() && c.is_empty() {
        return a;
    }
    let mut all = BytesMut::with_capacity(a.len() + b.len() + c.len());
    for p in [a, b, c] {
        all.extend_from_slice(&p);
    }
    all.freeze()
}

/// A reply frame holding a result: `frame[..HEAD]` is room for the reply's head,
/// `frame[HEAD..BODY_AT]` the octet sequence's length, the result after it. Its buffer goes
/// back to the thread as its spare when dropped.
#[derive(Debug)]
pub(crate) struct InFrame {
    frame: BytesMut,
}

impl InFrame {
    /// The whole frame, for the head to be written and the frame sent.
    pub(crate) fn frame(&mut self) -> &mut BytesMut {
        &mut self.frame
    }

    /// The encoded result, taken out as `Bytes` (for the general reply path).
    pub(crate) fn body(mut self) -> Bytes {
        self.frame.split().split_off(BODY_AT).freeze()
    }
}

impl Drop for InFrame {
    fn drop(&mut self) {
        let mut frame = std::mem::take(&mut self.frame);
        frame.clear();
        let _ = SPARE.try_with(|s| {
            // A nested upcall may have left a spare of its own meanwhile: keep the larger.
            let spare = s.take();
            s.set(if spare.capacity() >= frame.capacity() {
                spare
            } else {
                frame
            });
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, PartialEq, prost::Message)]
    struct M {
        #[prost(bytes = "vec", tag = "1")]
        data: Vec<u8>,
    }

    fn m(data: &[u8]) -> M {
        M {
            data: data.to_vec(),
        }
    }

    fn encoded(data: &[u8]) -> Vec<u8> {
        prost::Message::encode_to_vec(&m(data))
    }

    #[test]
    fn a_framed_slot_encodes_behind_room_for_the_head() {
        let mut slot = ResultSlot::framed();
        slot.message(&m(b"hello"));
        assert!(slot.has_frame());
        let mut f = slot.take_frame().expect("in a frame");
        assert!(matches!(slot.take(), Held::Empty), "taken out");
        let want = encoded(b"hello");
        let frame = f.frame();
        assert_eq!(&frame[..HEAD], &[0; HEAD]);
        assert_eq!(
            &frame[HEAD..BODY_AT],
            &ByteOrder::NATIVE.u32_bytes(want.len() as u32)
        );
        assert_eq!(&frame[BODY_AT..], &want[..]);
        assert_eq!(f.body(), want);
    }

    #[test]
    fn the_last_result_counts() {
        let mut slot = ResultSlot::framed();
        slot.message(&m(b"first"));
        slot.message(&m(b"second"));
        assert_eq!(slot.into_bytes(), encoded(b"second"));
        let mut slot = ResultSlot::framed();
        slot.message(&m(b"first"));
        slot.set_bytes(Bytes::from_static(b"raw"));
        assert!(slot.take_frame().is_none());
        assert_eq!(slot.into_bytes(), &b"raw"[..]);
    }

    #[test]
    fn unframed_and_large_results_are_bytes() {
        let mut slot = ResultSlot::for_bytes();
        slot.message(&m(b"x"));
        assert!(slot.take_frame().is_none());
        assert_eq!(slot.into_bytes(), encoded(b"x"));
        let big = vec![7; crate::octets::SPLIT_BODY_AT];
        let mut slot = ResultSlot::framed();
        slot.message(&m(&big));
        assert!(slot.take_frame().is_none());
        assert_eq!(slot.into_bytes(), encoded(&big));
    }

    /// A frame's buffer is the thread's spare: given back when the frame is done with, and
    /// reused by the next one; one taken while another frame is out (a nested upcall during
    /// a send) is a fresh one, and the larger of the two is kept.
    #[test]
    fn frames_reuse_the_thread_spare() {
        let mut a = ResultSlot::framed();
        a.message(&m(&[1; 100]));
        let fa = a.take_frame().expect("frame");
        let at = fa.frame.as_ptr();
        let mut b = ResultSlot::framed();
        b.message(&m(&[2; 10]));
        let fb = b.take_frame().expect("frame");
        assert_ne!(fb.frame.as_ptr(), at, "a's buffer is still out");
        drop(fb);
        drop(fa);
        let mut c = ResultSlot::framed();
        c.message(&m(&[3; 50]));
        let mut fc = c.take_frame().expect("frame");
        assert_eq!(fc.frame().as_ptr(), at, "the larger spare, a's, is reused");
        assert_eq!(&fc.frame()[BODY_AT..], &encoded(&[3; 50])[..]);
    }
}
