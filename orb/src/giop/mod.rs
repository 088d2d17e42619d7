//! GIOP messages (versions 1.0, 1.1 and 1.2) and the framing codec.
//!
//! Sans-I/O: everything here works on byte slices and `BytesMut`. The layout follows h2's
//! `frame/` + `codec/` split: `header.rs` (the 12-byte header), `request.rs`, `reply.rs`,
//! `locate.rs` (message bodies), `service_context.rs` (contexts and helpers), `codec.rs`
//! (framing, size limit, fragment reassembly). See `shared/design/WIRE-GIOP.md` for layouts.
//!
//! Decoding keeps bodies as [`Body`] slices of the received frame (no copy); encoding writes a
//! whole message into a `BytesMut`, the body through a closure that gets a [`CdrWriter`](crate::cdr::CdrWriter) already
//! positioned (and aligned) where the body starts, so a GIOP 1.0 body and a 1.2 body are both
//! written with the right alignment.
//!
//! Public only with the `unstable-wire` feature (benchmarks, fuzzing, tests that play a hostile
//! peer), and then with no semver promise: applications call plain CORBA operations through
//! [`ObjectProxy::invoke_cdr`](crate::ObjectProxy::invoke_cdr) and [`crate::cdr`] instead.

mod codec;
mod direct;
mod error;
mod header;
mod locate;
mod object_key;
pub(crate) mod op_name;
mod reply;
pub(crate) mod request;
mod service_context;

#[cfg(test)]
pub(crate) use codec::fragment;
pub use codec::{GiopCodec, DEFAULT_MAX_MESSAGE_SIZE};
pub use error::FrameError;
pub use header::{Header, MsgType, HEADER_LEN};
pub use locate::{
    write_locate_reply, write_locate_request, LocateReply, LocateRequest, LocateStatus,
};
#[cfg(any(test, feature = "unstable-wire"))]
pub use reply::decode_system_exception;
pub(crate) use reply::unsupported_status;
pub(crate) use reply::write_plain_reply_head;
pub use reply::{encode_system_exception, write_reply, Reply, ReplyHeader, ReplyStatus};
#[cfg(any(test, feature = "unstable-wire"))]
pub use request::{write_request, RequestHeader};
pub use request::{Request, TargetAddress};
pub use service_context::{
    context_id, BiDirListenPoints, CallChain, Deadline, ErrorText, RequestContexts, ServiceContext,
    ServiceContextList,
};

use crate::cdr::{ByteOrder, CdrBody, CdrReader};
pub use crate::version::Version;
use bytes::{Buf, BufMut, Bytes, BytesMut};
/// The operation name's type in a decoded request: UTF-8 sharing the received frame's
/// buffer, so decoding a request allocates no string.
pub use bytestring::ByteString;
pub use object_key::ObjectKey;

/// A message body as received: a zero-copy slice of the frame, plus what is needed to decode it
/// with the right alignment and byte order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Body {
    /// The body bytes (everything after the header and its padding).
    pub bytes: Bytes,
    /// Offset of `bytes[0]` from the first byte of the GIOP header (the alignment origin).
    pub offset: usize,
    /// Byte order of the message.
    pub order: ByteOrder,
}

impl Body {
    /// An empty body.
    pub fn empty(order: ByteOrder) -> Self {
        Body {
            bytes: Bytes::new(),
            offset: 0,
            order,
        }
    }

    /// A reader over the body with the message's alignment origin and byte order.
    pub fn reader(&self) -> CdrReader<'_> {
        CdrReader::with_offset(&self.bytes, self.order, self.offset)
    }

    /// The body as the stable API shows it to callers of plain CORBA operations.
    pub fn into_cdr_body(self) -> CdrBody {
        CdrBody::new(self.bytes, self.offset, self.order)
    }

    /// Decodes a body that is a single `sequence<octet>` (how protobuf parameters travel) and
    /// returns those octets, narrowing this body's bytes to them: no copy, and no reference
    /// count changes hands. Trailing bytes are an error (omniORB's strictIIOP rule).
    pub fn into_octets(self) -> Result<Bytes, crate::cdr::DecodeError> {
        if let Some(start) = self.octets_start() {
            let mut bytes = self.bytes;
            bytes.advance(start);
            return Ok(bytes);
        }
        let range = self.octets_range()?;
        let mut bytes = self.bytes;
        bytes.truncate(range.end);
        bytes.advance(range.start);
        Ok(bytes)
    }

    /// [`into_octets`](Self::into_octets) without consuming the body: the octets as a
    /// zero-copy slice.
    #[cfg(any(test, feature = "unstable-wire"))]
    pub fn octets(&self) -> Result<Bytes, crate::cdr::DecodeError> {
        Ok(self.bytes.slice(self.octets_range()?))
    }

    /// Where the octets start if the body is well-formed, read straight from the bytes (every
    /// call's parameters and result): the count, 4-aligned from the origin, then exactly that
    /// many octets to the end. `None` otherwise; the reader's way then says what is wrong.
    fn octets_start(&self) -> Option<usize> {
        let at = self.offset.wrapping_neg() & 3;
        let n = self
            .order
            .u32_from(self.bytes.get(at..at + 4)?.try_into().ok()?);
        ((n as usize).checked_add(at + 4)? == self.bytes.len()).then_some(at + 4)
    }

    fn octets_range(&self) -> Result<std::ops::Range<usize>, crate::cdr::DecodeError> {
        let mut r = self.reader();
        let range = r.read_octets_range()?;
        if r.remaining() != 0 {
            return Err(crate::cdr::DecodeError::new(
                crate::cdr::DecodeErrorKind::Invalid("trailing bytes after body"),
                r.position(),
            ));
        }
        Ok(range)
    }
}

/// One decoded GIOP message. Fragments never appear here: the codec reassembles them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// A Request (type 0). Boxed: a request header is the largest message by far, and frames
    /// are moved several times between the socket and the upcall.
    Request(Box<Request>),
    /// A Reply (type 1). Boxed, as the locate messages: a frame is then 24 bytes where it
    /// was 88, and each move of one between the socket and its reader cost ~15 instructions
    /// (callgrind).
    Reply(Box<Reply>),
    /// A CancelRequest (type 2) for this request id.
    CancelRequest {
        /// The request to cancel.
        request_id: u32,
    },
    /// A LocateRequest (type 3).
    LocateRequest(Box<LocateRequest>),
    /// A LocateReply (type 4).
    LocateReply(Box<LocateReply>),
    /// CloseConnection (type 5).
    CloseConnection,
    /// MessageError (type 6).
    #[allow(clippy::enum_variant_names)] // GIOP's own name for the message type
    MessageError,
}

/// A decoded message with the version it came in (a server answers in the peer's version).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// The GIOP version of the message.
    pub version: Version,
    /// The message.
    pub message: Message,
}

/// Writes a CancelRequest (12-byte header + request id).
pub fn write_cancel_request(dst: &mut BytesMut, version: Version, request_id: u32) {
    Header::new(version, MsgType::CancelRequest, 4).encode(dst);
    put_u32_native(dst, request_id);
}

/// Writes a CloseConnection (header only).
pub fn write_close_connection(dst: &mut BytesMut, version: Version) {
    Header::new(version, MsgType::CloseConnection, 0).encode(dst);
}

/// Writes a MessageError (header only).
pub fn write_message_error(dst: &mut BytesMut, version: Version) {
    Header::new(version, MsgType::MessageError, 0).encode(dst);
}

/// Writes a header for a message of `msg_type` with size 0 (patched by [`end_message`]) and
/// returns the index of its first byte in `dst` (the alignment origin of the message).
pub(crate) fn begin_message(
    dst: &mut BytesMut,
    version: Version,
    order: ByteOrder,
    msg_type: MsgType,
) -> usize {
    let start = dst.len();
    Header {
        version,
        order,
        more_fragments: false,
        msg_type,
        size: 0,
    }
    .encode(dst);
    start
}

/// Patches the size field of the message that starts at `dst[start]` to cover everything
/// written after its header. Sizes over 4 GiB cannot be expressed; they saturate (the codec and
/// the CDR writer refuse such messages long before).
pub(crate) fn end_message(dst: &mut BytesMut, start: usize, order: ByteOrder) {
    let size = dst.len().saturating_sub(start + HEADER_LEN);
    Header::patch_size(dst, start, order, u32::try_from(size).unwrap_or(u32::MAX));
}

/// Where a decoded message's body is: from an offset to the end of the frame, not yet cut
/// (the direct readings of `direct.rs`), or a body already made (the reader's way).
/// [`owned`](Self::owned) lets the body take the frame over by move, where the decoder owns
/// it (`decode_message`): no slice is made and no reference count changes hands (two atomic
/// read-modify-writes per message fewer, a slice's and the frame's drop).
#[derive(Debug)]
pub(crate) enum BodyAt {
    /// `msg[offset..]`.
    Rest(usize, ByteOrder),
    /// Made already.
    Made(Body),
}

impl BodyAt {
    /// The body as a slice of `msg`.
    #[cfg(test)]
    pub(crate) fn sliced(self, msg: &Bytes) -> Body {
        match self {
            BodyAt::Rest(offset, order) => Body {
                bytes: msg.slice(offset..),
                offset,
                order,
            },
            BodyAt::Made(body) => body,
        }
    }

    /// The body, taking over the frame `msg` itself.
    pub(crate) fn owned(self, mut msg: Bytes) -> Body {
        match self {
            BodyAt::Rest(offset, order) => {
                msg.advance(offset.min(msg.len()));
                Body {
                    bytes: msg,
                    offset,
                    order,
                }
            }
            BodyAt::Made(body) => body,
        }
    }
}

/// The unread rest of `r` as a zero-copy [`Body`] of `msg` (consuming it).
///
/// `r` should read `msg` with its alignment origin at `msg[0]` (either
/// `CdrReader::new(&msg, ..)` or `CdrReader::with_offset(&msg[k..], .., k)`), so that logical
/// positions are indices into `msg`; otherwise the bytes are copied.
pub(crate) fn rest_as_body(msg: &Bytes, r: &mut CdrReader<'_>) -> Body {
    let offset = r.position();
    let rest = r.rest();
    let bytes = share(msg, offset, rest);
    // Consume what the body took; `skip` cannot fail for exactly `remaining()` bytes.
    let _ = r.skip(rest.len());
    Body {
        bytes,
        offset,
        order: r.order(),
    }
}

/// `bytes`, which a reader over `msg` returned from logical position `at`, as a zero-copy
/// slice of `msg`; a copy if the reader was over other bytes after all (see [`rest_as_body`]:
/// a logical position is an index into `msg` only for a reader with its origin at `msg[0]`).
fn share(msg: &Bytes, at: usize, bytes: &[u8]) -> Bytes {
    let range = at..at.saturating_add(bytes.len());
    match msg.get(range.clone()) {
        Some(s) if std::ptr::eq(s.as_ptr(), bytes.as_ptr()) => msg.slice(range),
        _ => Bytes::copy_from_slice(bytes),
    }
}

/// Reads a `sequence<octet>` from `r` and returns it as a zero-copy slice of `msg` (same
/// requirement on `r` as [`rest_as_body`]).
pub(crate) fn read_octets_of(
    msg: &Bytes,
    r: &mut CdrReader<'_>,
) -> Result<Bytes, crate::cdr::DecodeError> {
    let bytes = r.read_octets()?;
    Ok(share(msg, r.position() - bytes.len(), bytes))
}

/// Reads a CDR string from `r` as a zero-copy slice of `msg`, without its NUL (same
/// requirement on `r` as [`rest_as_body`]).
pub(crate) fn read_string_of(
    msg: &Bytes,
    r: &mut CdrReader<'_>,
) -> Result<ByteString, crate::cdr::DecodeError> {
    let at = r.position();
    let text = r.read_string_bytes()?;
    // The NUL follows the text.
    let bytes = share(msg, r.position() - text.len() - 1, text);
    ByteString::try_from(bytes)
        .map_err(|_| crate::cdr::DecodeError::new(crate::cdr::DecodeErrorKind::NotUtf8, at))
}

/// Reads a `sequence<octet>` from `r` as an object key (inline when short, else a zero-copy
/// slice of `msg`; same requirement on `r` as [`rest_as_body`]).
pub(crate) fn read_key_of(
    msg: &Bytes,
    r: &mut CdrReader<'_>,
) -> Result<ObjectKey, crate::cdr::DecodeError> {
    let bytes = r.read_octets()?;
    if bytes.len() <= object_key::INLINE {
        return Ok(ObjectKey::from(bytes));
    }
    Ok(ObjectKey::from(share(
        msg,
        r.position() - bytes.len(),
        bytes,
    )))
}

fn put_u32_native(dst: &mut BytesMut, v: u32) {
    match ByteOrder::NATIVE {
        ByteOrder::Little => dst.put_u32_le(v),
        ByteOrder::Big => dst.put_u32(v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cdr::{CdrWriter, DecodeErrorKind};

    /// Reads back, after a 4-byte id, the string `string_at` wrote; and what is left.
    fn read_back(msg: &Bytes) -> (Result<ByteString, crate::cdr::DecodeError>, usize) {
        let mut r = CdrReader::new(msg, ByteOrder::Little);
        r.skip(4).unwrap();
        (read_string_of(msg, &mut r), r.remaining())
    }

    fn string_at(text: &[u8]) -> Bytes {
        let mut buf = BytesMut::new();
        let mut w = CdrWriter::new(&mut buf, ByteOrder::Little);
        w.write_u32(7);
        w.write_len(text.len() + 1);
        w.write_raw(text);
        w.write_octet(0);
        buf.freeze()
    }

    #[test]
    fn a_string_is_read_as_a_slice_of_the_message() {
        let msg = string_at(b"echo");
        let (s, left) = read_back(&msg);
        let s = s.unwrap();
        assert_eq!(s, "echo");
        assert_eq!(left, 0);
        let range = msg.as_ptr_range();
        assert!(range.contains(&s.as_ptr()), "the name was copied");
    }

    /// `into_octets`'s direct reading agrees with the reader's (`octets`) on every alignment,
    /// both orders, and on bodies cut short, lengthened or with a lying count.
    #[test]
    fn into_octets_agrees_with_the_reader() {
        for order in [ByteOrder::Little, ByteOrder::Big] {
            for offset in 0..8 {
                for len in 0..6 {
                    let mut buf = BytesMut::new();
                    CdrWriter::with_offset(&mut buf, order, offset).write_octets(&[7; 5][..len]);
                    let whole = buf.freeze();
                    let mut variants: Vec<Bytes> =
                        (0..whole.len()).map(|cut| whole.slice(..cut)).collect();
                    variants.push(Bytes::from([&whole[..], &[0]].concat()));
                    for at in 0..whole.len().min(8) {
                        let mut m = whole.to_vec();
                        m[at] ^= 1;
                        variants.push(Bytes::from(m));
                    }
                    let well_formed = Body {
                        bytes: whole.clone(),
                        offset,
                        order,
                    };
                    assert_eq!(
                        well_formed.octets_start(),
                        Some(whole.len() - len),
                        "a well-formed body not read directly: {well_formed:?}"
                    );
                    variants.push(whole);
                    for bytes in variants {
                        let body = Body {
                            bytes,
                            offset,
                            order,
                        };
                        let by_reader = body.octets();
                        assert_eq!(
                            body.clone().into_octets().ok(),
                            by_reader.as_ref().ok().cloned(),
                            "{body:?}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn octets_are_the_same_sliced_or_narrowed() {
        for (offset, order) in [
            (0, ByteOrder::Little),
            (12, ByteOrder::Big),
            (5, ByteOrder::Big),
        ] {
            let mut buf = BytesMut::new();
            let mut w = CdrWriter::with_offset(&mut buf, order, offset);
            w.write_octets(b"payload");
            let body = Body {
                bytes: buf.freeze(),
                offset,
                order,
            };
            let sliced = body.octets().unwrap();
            assert_eq!(&sliced[..], b"payload");
            assert_eq!(body.clone().into_octets().unwrap(), sliced);
            let mut long = BytesMut::from(&body.bytes[..]);
            long.extend_from_slice(&[0]);
            let trailing = Body {
                bytes: long.freeze(),
                ..body
            };
            assert!(trailing.octets().is_err());
            assert!(trailing.into_octets().is_err());
        }
    }

    #[test]
    fn a_string_that_is_not_utf8_is_a_decode_error() {
        let msg = string_at(b"ec\xffho");
        let e = read_back(&msg).0.unwrap_err();
        assert_eq!(e.kind(), &DecodeErrorKind::NotUtf8);
        assert_eq!(e.offset(), 4);
    }
}
