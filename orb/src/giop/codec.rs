//! Framing: bytes to [`Frame`]s and back, with a size limit and fragment reassembly.
//!
//! Implements `tokio_util::codec::{Decoder, Encoder}` over `BytesMut` (no tokio runtime is
//! involved; the traits are just a convenient, well-known shape).
//!
//! # Decoding
//!
//! 1. Wait for the 12-byte header and decode it ([`Header::decode`]).
//! 2. Check the announced size against `max_message_size` **before** waiting for the rest
//!    ([`FrameError::TooLarge`]). Nothing is reserved on the strength of an announced size:
//!    the codec only ever splits off bytes that have arrived.
//! 3. Once the whole message is there, split it off (`split_to(12 + size).freeze()`) so bodies
//!    are zero-copy slices of it, and decode it.
//!
//! # Fragment reassembly (WIRE-GIOP §2.6)
//!
//! | | GIOP 1.2 | GIOP 1.1 |
//! |---|---|---|
//! | first piece | Request, Reply, LocateRequest or LocateReply with flag 0x02 | Request or Reply with flag 0x02 |
//! | chain key | the request id (first ulong after the header) | none: one chain at a time |
//! | continuation | Fragment, `ulong request_id`, data from offset 16 | Fragment, data from offset 12 |
//!
//! A chain is the first piece's bytes (header included) followed by each continuation's data,
//! so the alignment origin stays the first header. When the last piece (flag 0x02 clear)
//! arrives, the header's size is rewritten, the more-fragments flag cleared, and the result
//! decoded as one message.
//!
//! Invariants and limits, each a connection error:
//! - a chain's reassembled size stays within `max_message_size` ([`FrameError::TooLarge`],
//!   checked when a fragment's header arrives, before its bytes are awaited);
//! - all pending chains together hold at most `max_buffered_fragment_bytes` (default:
//!   `max_message_size`) bytes ([`FrameError::TooLarge`]);
//! - at most `max_pending_chains` (default 32) chains are open ([`FrameError::BadFragment`]);
//! - a continuation must match its chain's byte order and version, must continue a chain that
//!   exists, and a request id may have only one open chain ([`FrameError::BadFragment`]);
//! - a CancelRequest for a request id with an open GIOP 1.2 chain discards the chain (and is
//!   still returned). A 1.1 chain has no request id and is not affected.
//!
//! GIOP 1.1 continuation bytes are appended as they are; the 1.1 rule that alignment restarts
//! in each fragment is not modelled (omniORB fragments with 1.2 only in practice).

use super::error::FrameError;
use super::header::{Header, MsgType, HEADER_LEN};
use super::locate::{decode_locate_reply, decode_locate_request, write_locate_reply_in};
use super::reply::{decode_reply_parts, write_reply_in};
use super::request::{decode_request_into, write_request_in};
use super::{
    write_cancel_request, write_close_connection, write_locate_request, write_message_error, Frame,
    Message, Reply, Request,
};
use crate::cdr::{ByteOrder, CdrReader, DecodeResultExt};
use bytes::{Bytes, BytesMut};

/// Default bound on the number of fragmented messages being reassembled at once.
const DEFAULT_MAX_PENDING_CHAINS: usize = 32;

/// Offset of a GIOP 1.2 Fragment's data (header + `ulong request_id`).
const FRAGMENT_1_2_DATA: usize = HEADER_LEN + 4;

/// Default maximum message size (after reassembly, header excluded): 64 MiB.
pub const DEFAULT_MAX_MESSAGE_SIZE: usize = 64 * 1024 * 1024;

/// The GIOP framing codec: one per connection (it holds fragment reassembly state).
///
/// See the module documentation for the decoding rules and limits.
#[derive(Debug)]
pub struct GiopCodec {
    /// Limit on a message's size after the header, announced or reassembled.
    max_message_size: usize,
    /// Limit on the number of open fragment chains.
    max_pending_chains: usize,
    /// Limit on the bytes held by all open chains together.
    max_buffered_fragment_bytes: usize,
    /// Open fragment chains (few: a linear search is fine).
    chains: Vec<Chain>,
    /// Sum of `data.len()` over `chains`.
    buffered: usize,
}

/// A fragmented message being reassembled.
#[derive(Debug)]
struct Chain {
    /// The request id of a GIOP 1.2 chain; `None` for the single GIOP 1.1 chain.
    request_id: Option<u32>,
    /// The first piece's header (version, byte order, message type).
    first: Header,
    /// The first piece (header included), then each continuation's data.
    data: BytesMut,
}

impl Chain {
    /// Size of the reassembled message so far, header excluded.
    fn body_len(&self) -> usize {
        self.data.len().saturating_sub(HEADER_LEN)
    }
}

impl GiopCodec {
    /// A codec with the given maximum message size.
    ///
    /// Fragment chains are limited to 32 at a time holding at most `max_message_size` bytes
    /// together (`with_fragment_limits` sets other limits, for tests).
    pub fn new(max_message_size: usize) -> Self {
        GiopCodec {
            max_message_size,
            max_pending_chains: DEFAULT_MAX_PENDING_CHAINS,
            max_buffered_fragment_bytes: max_message_size,
            chains: Vec::new(),
            buffered: 0,
        }
    }

    /// Sets the limits on fragment reassembly: how many fragmented messages may be open at
    /// once, and how many bytes they may hold together (each one is also bounded by the
    /// maximum message size).
    #[must_use]
    #[cfg(any(test, feature = "unstable-wire"))]
    pub fn with_fragment_limits(mut self, max_pending_chains: usize, max_buffered: usize) -> Self {
        self.max_pending_chains = max_pending_chains;
        self.max_buffered_fragment_bytes = max_buffered;
        self
    }

    /// The maximum message size.
    pub fn max_message_size(&self) -> usize {
        self.max_message_size
    }

    /// Bytes currently held for partially reassembled messages (for buffer accounting).
    pub fn buffered_fragment_bytes(&self) -> usize {
        self.buffered
    }

    /// Number of fragmented messages currently being reassembled.
    #[cfg(any(test, feature = "unstable-wire"))]
    pub fn pending_fragment_chains(&self) -> usize {
        self.chains.len()
    }

    fn too_large(&self, size: usize) -> FrameError {
        FrameError::TooLarge {
            size: size as u64,
            max: self.max_message_size,
        }
    }

    fn find_chain(&self, request_id: Option<u32>) -> Option<usize> {
        self.chains.iter().position(|c| c.request_id == request_id)
    }

    /// For a Fragment whose header is `h` (at the front of `src`): finds its chain and checks
    /// the limits before the fragment's bytes are awaited. `Ok(None)`: more bytes are needed to
    /// tell (the 1.2 request id).
    fn check_fragment(&self, h: &Header, src: &[u8]) -> Result<Option<usize>, FrameError> {
        let (request_id, data_len) = if h.version.minor >= 2 {
            let Some(data_len) = (h.size as usize).checked_sub(4) else {
                return Err(FrameError::BadFragment(
                    "GIOP 1.2 fragment without a request id",
                ));
            };
            let Some(id) = src.get(HEADER_LEN..FRAGMENT_1_2_DATA) else {
                return Ok(None);
            };
            (Some(read_u32(id, h.order)), data_len)
        } else {
            (None, h.size as usize)
        };
        let Some(idx) = self.find_chain(request_id) else {
            return Err(FrameError::BadFragment(
                "fragment for a message that was not started",
            ));
        };
        let chain = &self.chains[idx];
        if chain.first.order != h.order {
            return Err(FrameError::BadFragment(
                "fragment byte order differs from the message it continues",
            ));
        }
        if chain.first.version != h.version {
            return Err(FrameError::BadFragment(
                "fragment version differs from the message it continues",
            ));
        }
        let total = chain.body_len().saturating_add(data_len);
        if total > self.max_message_size {
            return Err(self.too_large(total));
        }
        let buffered = self.buffered.saturating_add(data_len);
        if buffered > self.max_buffered_fragment_bytes {
            return Err(FrameError::TooLarge {
                size: buffered as u64,
                max: self.max_buffered_fragment_bytes,
            });
        }
        Ok(Some(idx))
    }

    /// Handles one whole piece (`piece` holds exactly `12 + h.size` bytes).
    fn handle_piece(&mut self, h: Header, piece: BytesMut) -> Result<Option<Frame>, FrameError> {
        if h.msg_type == MsgType::Fragment {
            return self.continue_chain(h, piece);
        }
        if h.more_fragments {
            self.start_chain(h, piece)?;
            return Ok(None);
        }
        let frame = decode_message(h, piece.freeze())?;
        if let Message::CancelRequest { request_id } = frame.message {
            // A CancelRequest may end a fragmented request early (WIRE-GIOP §2.6).
            if let Some(idx) = self.find_chain(Some(request_id)) {
                let chain = self.chains.swap_remove(idx);
                self.buffered -= chain.data.len();
            }
        }
        Ok(Some(frame))
    }

    fn start_chain(&mut self, h: Header, piece: BytesMut) -> Result<(), FrameError> {
        let fragmentable = match h.msg_type {
            MsgType::Request | MsgType::Reply => true,
            MsgType::LocateRequest | MsgType::LocateReply => h.version.minor >= 2,
            _ => false,
        };
        if !fragmentable {
            return Err(FrameError::BadFragment(
                "this message type cannot be fragmented in this GIOP version",
            ));
        }
        let request_id = if h.version.minor >= 2 {
            // Request, Reply, LocateRequest and LocateReply all start with the request id.
            match piece.get(HEADER_LEN..FRAGMENT_1_2_DATA) {
                Some(b) => Some(read_u32(b, h.order)),
                None => {
                    return Err(FrameError::BadFragment(
                        "fragmented message too short to hold its request id",
                    ))
                }
            }
        } else {
            None
        };
        if self.find_chain(request_id).is_some() {
            return Err(FrameError::BadFragment(if request_id.is_some() {
                "a fragmented message with this request id is already pending"
            } else {
                "a GIOP 1.1 fragmented message is already pending"
            }));
        }
        if self.chains.len() >= self.max_pending_chains {
            return Err(FrameError::BadFragment(
                "too many fragmented messages pending",
            ));
        }
        let buffered = self.buffered.saturating_add(piece.len());
        if buffered > self.max_buffered_fragment_bytes {
            return Err(FrameError::TooLarge {
                size: buffered as u64,
                max: self.max_buffered_fragment_bytes,
            });
        }
        self.buffered = buffered;
        self.chains.push(Chain {
            request_id,
            first: h,
            data: piece,
        });
        Ok(())
    }

    fn continue_chain(&mut self, h: Header, piece: BytesMut) -> Result<Option<Frame>, FrameError> {
        // Re-check (cheap): finds the chain and enforces the limits with the whole piece here.
        let Some(idx) = self.check_fragment(&h, &piece)? else {
            return Err(FrameError::BadFragment("fragment too short"));
        };
        let data_start = if h.version.minor >= 2 {
            FRAGMENT_1_2_DATA
        } else {
            HEADER_LEN
        };
        let data = piece.get(data_start..).unwrap_or_default();
        let chain = &mut self.chains[idx];
        chain.data.extend_from_slice(data);
        self.buffered += data.len();
        if h.more_fragments {
            return Ok(None);
        }
        let chain = self.chains.swap_remove(idx);
        self.buffered -= chain.data.len();
        let first = chain.first;
        let mut msg = chain.data;
        let Ok(size) = u32::try_from(msg.len() - HEADER_LEN) else {
            return Err(self.too_large(msg.len() - HEADER_LEN));
        };
        // The reassembled message is one unfragmented message: clear the flag, fix the size.
        msg[6] &= !0x02;
        Header::patch_size(&mut msg, 0, first.order, size);
        let h = Header {
            more_fragments: false,
            size,
            ..first
        };
        decode_message(h, msg.freeze()).map(Some)
    }
}

fn read_u32(b: &[u8], order: ByteOrder) -> u32 {
    let mut a = [0u8; 4];
    for (d, s) in a.iter_mut().zip(b) {
        *d = *s;
    }
    match order {
        ByteOrder::Big => u32::from_be_bytes(a),
        ByteOrder::Little => u32::from_le_bytes(a),
    }
}

/// Decodes one whole, unfragmented message (`msg` holds the header and `h.size` bytes).
fn decode_message(h: Header, msg: Bytes) -> Result<Frame, FrameError> {
    let mut r = CdrReader::new(&msg, h.order);
    r.skip(HEADER_LEN)?;
    let message = match h.msg_type {
        // The body takes the frame over (no slice of it made, no reference count moved).
        MsgType::Request => {
            // Decoded into this thread's spare box, in place.
            let mut request = Request::spare();
            let body = decode_request_into(h.version, &msg, &mut r, &mut request.header)?;
            request.body = body.owned(msg);
            Message::Request(request)
        }
        MsgType::Reply => {
            let (header, body) = decode_reply_parts(h.version, &msg, &mut r)?;
            Message::Reply(Reply::boxed(header, body.owned(msg)))
        }
        MsgType::CancelRequest => Message::CancelRequest {
            request_id: r.read_u32().field("request_id").field("CancelRequest")?,
        },
        MsgType::LocateRequest => {
            Message::LocateRequest(Box::new(decode_locate_request(h.version, &mut r)?))
        }
        MsgType::LocateReply => {
            Message::LocateReply(Box::new(decode_locate_reply(h.version, &msg, &mut r)?))
        }
        // Both should be empty; any body is ignored.
        MsgType::CloseConnection => Message::CloseConnection,
        MsgType::MessageError => Message::MessageError,
        MsgType::Fragment => return Err(FrameError::BadFragment("unexpected fragment")),
    };
    Ok(Frame {
        version: h.version,
        message,
    })
}

/// Writes `frame` into `dst`. Bodies are copied verbatim, in the byte order they came in, so a
/// decoded frame re-encodes to the bytes it came from (padding zeroed). Messages without a body
/// are written in our native order. In GIOP 1.0/1.1 the body follows the header directly, so
/// its alignment is right only if the header re-encodes to the same length (it does, unless
/// the original carried a non-empty requesting principal, which is not kept).
fn encode_frame(frame: &Frame, dst: &mut BytesMut) {
    let v = frame.version;
    match &frame.message {
        Message::Request(req) => write_request_in(dst, v, req.body.order, &req.header, |w| {
            w.write_raw(&req.body.bytes)
        }),
        Message::Reply(rep) => write_reply_in(dst, v, rep.body.order, &rep.header, |w| {
            w.write_raw(&rep.body.bytes)
        }),
        Message::CancelRequest { request_id } => write_cancel_request(dst, v, *request_id),
        Message::LocateRequest(lr) => write_locate_request(dst, v, lr.request_id, &lr.target),
        Message::LocateReply(lr) => {
            write_locate_reply_in(dst, v, lr.body.order, lr.request_id, lr.status, |w| {
                w.write_raw(&lr.body.bytes)
            })
        }
        Message::CloseConnection => write_close_connection(dst, v),
        Message::MessageError => write_message_error(dst, v),
    }
}

impl Default for GiopCodec {
    fn default() -> Self {
        GiopCodec::new(DEFAULT_MAX_MESSAGE_SIZE)
    }
}

impl tokio_util::codec::Decoder for GiopCodec {
    type Item = Frame;
    type Error = FrameError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Frame>, FrameError> {
        // Loop: a fragment consumes bytes without producing a frame, and whatever follows it in
        // `src` must still be decoded now (the caller only reads more on `Ok(None)`).
        loop {
            let Some(head) = src.get(..HEADER_LEN) else {
                return Ok(None);
            };
            let h = Header::decode(head)?;
            let size = h.size as usize;
            if h.size as u64 > self.max_message_size as u64 {
                return Err(self.too_large(size));
            }
            if h.msg_type == MsgType::Fragment && self.check_fragment(&h, src)?.is_none() {
                return Ok(None);
            }
            let total = HEADER_LEN.saturating_add(size);
            if src.len() < total {
                return Ok(None);
            }
            let piece = src.split_to(total);
            if let Some(frame) = self.handle_piece(h, piece)? {
                return Ok(Some(frame));
            }
        }
    }

    /// As `decode`; at the end of the stream, leftover bytes or an unfinished fragmented
    /// message are [`FrameError::Truncated`] (the unfinished chains are dropped).
    fn decode_eof(&mut self, src: &mut BytesMut) -> Result<Option<Frame>, FrameError> {
        if let Some(frame) = self.decode(src)? {
            return Ok(Some(frame));
        }
        if src.is_empty() && self.chains.is_empty() {
            return Ok(None);
        }
        self.chains.clear();
        self.buffered = 0;
        Err(FrameError::Truncated)
    }
}

impl<'a> tokio_util::codec::Encoder<&'a Frame> for GiopCodec {
    type Error = FrameError;

    /// Writes the frame (never fragmented). A message over `max_message_size` is not written
    /// ([`FrameError::TooLarge`]; `dst` is left as it was).
    fn encode(&mut self, frame: &'a Frame, dst: &mut BytesMut) -> Result<(), FrameError> {
        let start = dst.len();
        encode_frame(frame, dst);
        let size = dst.len() - start - HEADER_LEN;
        if size > self.max_message_size {
            dst.truncate(start);
            return Err(self.too_large(size));
        }
        Ok(())
    }
}

impl tokio_util::codec::Encoder<Frame> for GiopCodec {
    type Error = FrameError;

    /// As `Encoder<&Frame>`.
    fn encode(&mut self, frame: Frame, dst: &mut BytesMut) -> Result<(), FrameError> {
        <Self as tokio_util::codec::Encoder<&Frame>>::encode(self, &frame, dst)
    }
}

#[cfg(test)]
/// Splits a whole GIOP 1.2 message at `cuts` (multiples of 8) into a first piece and
/// Fragments (tests, here and of the read side).
pub(crate) fn fragment(msg: &[u8], cuts: &[usize]) -> Vec<BytesMut> {
    let h = Header::decode(msg).unwrap();
    let id = &msg[12..16];
    let mut bounds = vec![0];
    bounds.extend_from_slice(cuts);
    bounds.push(msg.len());
    let mut out = Vec::new();
    for (i, w) in bounds.windows(2).enumerate() {
        let last = i == bounds.len() - 2;
        let mut piece = BytesMut::new();
        if i == 0 {
            piece.extend_from_slice(&msg[..w[1]]);
        } else {
            piece.extend_from_slice(&msg[..12]);
            piece[7] = MsgType::Fragment.to_u8();
            piece.extend_from_slice(id);
            piece.extend_from_slice(&msg[w[0]..w[1]]);
        }
        if !last {
            piece[6] |= 2;
        } else {
            piece[6] &= !2;
        }
        let size = (piece.len() - 12) as u32;
        Header::patch_size(&mut piece, 0, h.order, size);
        out.push(piece);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::giop::{
        write_locate_reply, write_locate_request, write_reply, write_request, LocateStatus,
        ReplyHeader, ReplyStatus, RequestHeader, ServiceContextList, TargetAddress, Version,
    };
    use tokio_util::codec::{Decoder, Encoder};

    fn request(id: u32, body_len: usize) -> BytesMut {
        let h = RequestHeader {
            deadline: None,
            request_id: id,
            response_flags: 3,
            target: TargetAddress::Key(Bytes::from_static(b"key").into()),
            operation: "call".into(),
            service_context: ServiceContextList::default(),
        };
        let mut buf = BytesMut::new();
        write_request(&mut buf, Version::V1_2, &h, |w| {
            w.write_octets(&(0..body_len).map(|i| i as u8).collect::<Vec<_>>())
        });
        buf
    }

    fn decode_all(codec: &mut GiopCodec, bytes: &[u8]) -> Result<Vec<Frame>, FrameError> {
        let mut src = BytesMut::from(bytes);
        let mut out = Vec::new();
        while let Some(f) = codec.decode(&mut src)? {
            out.push(f);
        }
        assert!(src.is_empty());
        Ok(out)
    }

    fn concat(pieces: &[BytesMut]) -> Vec<u8> {
        pieces.iter().flat_map(|p| p.iter().copied()).collect()
    }

    #[test]
    fn partial_frames_wait_without_consuming() {
        let msg = request(2, 10);
        let mut codec = GiopCodec::default();
        for cut in 0..msg.len() {
            let mut src = BytesMut::from(&msg[..cut]);
            let cap = src.capacity();
            assert!(codec.decode(&mut src).unwrap().is_none());
            assert_eq!(src.len(), cut);
            assert!(src.capacity() <= cap);
            src.extend_from_slice(&msg[cut..]);
            let f = codec.decode(&mut src).unwrap().unwrap();
            assert!(matches!(f.message, Message::Request(ref r) if r.header.request_id == 2));
            assert!(src.is_empty());
        }
    }

    /// A request is decoded into this thread's spare box once the last one's upcall gave
    /// it back (`Request::into_body`), with its own fields, whether it took the direct way
    /// (1.2) or the reader's (1.0); a malformed one is an error and leaves no frame behind.
    #[test]
    fn requests_are_decoded_into_the_threads_spare_box() {
        let decode_one = |msg: &BytesMut| {
            let mut src = msg.clone();
            match GiopCodec::default().decode(&mut src) {
                Ok(Some(Frame {
                    message: Message::Request(r),
                    ..
                })) => r,
                other => panic!("not a request: {other:?}"),
            }
        };
        let first = decode_one(&request(1, 4));
        let at = &*first as *const Request;
        drop(first.into_body());
        let second = decode_one(&request(2, 6));
        assert_eq!(&*second as *const Request, at, "the spare box was not used");
        assert_eq!(second.header.request_id, 2);
        assert_eq!(second.header.operation, "call");
        assert_eq!(
            second.header.target.object_key().as_deref(),
            Some(&b"key"[..])
        );
        assert_eq!(second.body.bytes.len(), 4 + 6);
        drop(second.into_body());
        // The reader's way (1.0) into the same box.
        let mut old = BytesMut::new();
        let h = RequestHeader {
            deadline: None,
            request_id: 3,
            response_flags: 3,
            target: TargetAddress::Key(Bytes::from_static(b"other").into()),
            operation: "op".into(),
            service_context: ServiceContextList::default(),
        };
        write_request(&mut old, Version::V1_0, &h, |w| w.write_octets(b"x"));
        let third = decode_one(&old);
        assert_eq!(&*third as *const Request, at);
        assert_eq!(third.header, h);
        drop(third.into_body());
        // Cut after the operation name's length: an error, and the box is gone with it
        // (no frame kept), so the next request gets a new one.
        let mut bad = request(4, 0);
        bad.truncate(40);
        let size = (bad.len() - 12) as u32;
        let size = match bad[6] & 1 {
            1 => size.to_le_bytes(),
            _ => size.to_be_bytes(),
        };
        bad[8..12].copy_from_slice(&size);
        let mut src = bad.clone();
        match GiopCodec::default().decode(&mut src) {
            Err(FrameError::Decode(e)) => assert!(e.to_string().contains("Request"), "{e}"),
            other => panic!("not a decode error: {other:?}"),
        }
        let fourth = decode_one(&request(5, 1));
        assert_eq!(fourth.header.request_id, 5);
    }

    #[test]
    fn several_messages_in_one_buffer() {
        let mut bytes = request(2, 3);
        write_close_connection(&mut bytes, Version::V1_2);
        write_cancel_request(&mut bytes, Version::V1_1, 8);
        write_message_error(&mut bytes, Version::V1_0);
        let frames = decode_all(&mut GiopCodec::default(), &bytes).unwrap();
        assert_eq!(frames.len(), 4);
        assert_eq!(frames[1].message, Message::CloseConnection);
        assert_eq!(frames[2].message, Message::CancelRequest { request_id: 8 });
        assert_eq!(frames[2].version, Version::V1_1);
        assert_eq!(frames[3].message, Message::MessageError);
    }

    #[test]
    fn oversize_is_refused_from_the_header_alone() {
        let mut codec = GiopCodec::new(100);
        let mut src = BytesMut::from(&b"GIOP\x01\x02\x01\x00\x65\x00\x00\x00"[..]);
        let cap = src.capacity();
        match codec.decode(&mut src) {
            Err(FrameError::TooLarge {
                size: 101,
                max: 100,
            }) => {}
            other => panic!("{other:?}"),
        }
        assert_eq!(src.capacity(), cap, "nothing reserved");
        // Exactly the limit is fine.
        let mut src = BytesMut::from(&b"GIOP\x01\x02\x01\x05\x64\x00\x00\x00"[..]);
        assert!(codec.decode(&mut src).unwrap().is_none());
        // A huge announced size (big-endian) is refused too.
        let mut src = BytesMut::from(&b"GIOP\x01\x02\x00\x00\xff\xff\xff\xff"[..]);
        assert!(matches!(
            codec.decode(&mut src),
            Err(FrameError::TooLarge { .. })
        ));
    }

    #[test]
    fn eof_inside_a_message_is_truncated() {
        let msg = request(2, 10);
        let mut codec = GiopCodec::default();
        let mut src = BytesMut::from(&msg[..20]);
        assert!(matches!(
            codec.decode_eof(&mut src),
            Err(FrameError::Truncated)
        ));
        let mut src = BytesMut::from(&msg[..]);
        assert!(codec.decode_eof(&mut src).unwrap().is_some());
        assert!(codec.decode_eof(&mut src).unwrap().is_none());
        // An unfinished fragment chain at EOF is truncated too.
        let pieces = fragment(&request(4, 100), &[64]);
        let mut src = BytesMut::from(&pieces[0][..]);
        assert!(codec.decode(&mut src).unwrap().is_none());
        assert_eq!(codec.pending_fragment_chains(), 1);
        assert!(matches!(
            codec.decode_eof(&mut src),
            Err(FrameError::Truncated)
        ));
        assert_eq!(codec.buffered_fragment_bytes(), 0);
    }

    #[test]
    fn bad_headers_and_bodies_are_errors() {
        let mut codec = GiopCodec::default();
        let mut src = BytesMut::from(&b"GIOX\x01\x02\x01\x00\0\0\0\0"[..]);
        assert!(matches!(
            codec.decode(&mut src),
            Err(FrameError::BadMagic(_))
        ));
        let mut src = BytesMut::from(&b"GIOP\x01\x02\x01\x02\x02\0\0\0\0\0"[..]);
        assert!(matches!(codec.decode(&mut src), Err(FrameError::Decode(_))));
        let mut bad = request(2, 1);
        bad[20] = 9; // disposition
        assert!(matches!(
            decode_all(&mut codec, &bad),
            Err(FrameError::Decode(_))
        ));
        // CloseConnection and MessageError bodies are ignored.
        let mut src = BytesMut::from(&b"GIOP\x01\x02\x01\x05\x02\0\0\0\xaa\xbb"[..]);
        assert_eq!(
            codec.decode(&mut src).unwrap().unwrap().message,
            Message::CloseConnection
        );
    }

    #[test]
    fn reassembles_interleaved_1_2_fragments() {
        let a = request(4, 300);
        let b = request(6, 200);
        let whole_a = decode_all(&mut GiopCodec::default(), &a).unwrap();
        let whole_b = decode_all(&mut GiopCodec::default(), &b).unwrap();
        let fa = fragment(&a, &[40, 128, 256]);
        let fb = fragment(&b, &[64]);
        let mut close = BytesMut::new();
        write_close_connection(&mut close, Version::V1_2);
        let stream = concat(&[
            fa[0].clone(),
            fb[0].clone(),
            fa[1].clone(),
            close,
            fa[2].clone(),
            fb[1].clone(),
            fa[3].clone(),
        ]);
        let mut codec = GiopCodec::default();
        let mut src = BytesMut::from(&stream[..]);
        let mut frames = Vec::new();
        let mut max_buffered = 0;
        // Feed byte by byte to exercise the waiting paths too.
        let mut fed = BytesMut::new();
        for byte in src.split().iter() {
            fed.extend_from_slice(&[*byte]);
            while let Some(f) = codec.decode(&mut fed).unwrap() {
                frames.push(f);
            }
            max_buffered = max_buffered.max(codec.buffered_fragment_bytes());
        }
        assert_eq!(frames.len(), 3);
        assert_eq!(frames[0].message, Message::CloseConnection);
        assert_eq!(frames[1], whole_b[0]);
        assert_eq!(frames[2], whole_a[0]);
        assert_eq!(codec.buffered_fragment_bytes(), 0);
        assert_eq!(codec.pending_fragment_chains(), 0);
        assert!(max_buffered >= 256 && max_buffered <= a.len() + b.len());
    }

    #[test]
    fn fragmented_reply_locate_reply_and_locate_request() {
        let mut reply = BytesMut::new();
        write_reply(
            &mut reply,
            Version::V1_2,
            &ReplyHeader {
                request_id: 10,
                status: ReplyStatus::NoException,
                service_context: ServiceContextList::default(),
            },
            |w| w.write_octets(&[7; 50]),
        );
        let mut lreq = BytesMut::new();
        write_locate_request(
            &mut lreq,
            Version::V1_2,
            12,
            &TargetAddress::Key(Bytes::from_static(b"a-rather-long-object-key").into()),
        );
        let mut lrep = BytesMut::new();
        write_locate_reply(
            &mut lrep,
            Version::V1_2,
            14,
            LocateStatus::ObjectForward,
            |w| w.write_octets(&[1; 40]),
        );
        for msg in [reply, lreq, lrep] {
            let whole = decode_all(&mut GiopCodec::default(), &msg).unwrap();
            let pieces = fragment(&msg, &[24, 32]);
            let frames = decode_all(&mut GiopCodec::default(), &concat(&pieces)).unwrap();
            assert_eq!(frames, whole);
        }
    }

    #[test]
    fn reassembles_a_1_1_chain() {
        let h = RequestHeader {
            deadline: None,
            request_id: 3,
            response_flags: 3,
            target: TargetAddress::Key(Bytes::from_static(b"key").into()),
            operation: "call".into(),
            service_context: ServiceContextList::default(),
        };
        let mut msg = BytesMut::new();
        write_request(&mut msg, Version::V1_1, &h, |w| w.write_octets(&[5; 30]));
        let whole = decode_all(&mut GiopCodec::default(), &msg).unwrap();
        // First piece up to 40, then fragments with no request id.
        let mut stream = BytesMut::new();
        let mut first = BytesMut::from(&msg[..40]);
        first[6] |= 2;
        Header::patch_size(&mut first, 0, ByteOrder::NATIVE, 28);
        stream.extend_from_slice(&first);
        for (range, more) in [(40..50, true), (50..msg.len(), false)] {
            Header {
                version: Version::V1_1,
                order: ByteOrder::NATIVE,
                more_fragments: more,
                msg_type: MsgType::Fragment,
                size: range.len() as u32,
            }
            .encode(&mut stream);
            stream.extend_from_slice(&msg[range]);
        }
        let frames = decode_all(&mut GiopCodec::default(), &stream).unwrap();
        assert_eq!(frames, whole);
        // A second 1.1 chain while one is open is refused.
        let mut codec = GiopCodec::default();
        let twice = concat(&[first.clone(), first]);
        assert!(matches!(
            decode_all(&mut codec, &twice),
            Err(FrameError::BadFragment(_))
        ));
    }

    #[test]
    fn broken_chains_are_bad_fragments() {
        let msg = request(4, 100);
        let pieces = fragment(&msg, &[64]);
        // A fragment with no started message: refused from its first 16 bytes.
        let mut codec = GiopCodec::default();
        let mut src = BytesMut::from(&pieces[1][..16]);
        assert!(matches!(
            codec.decode(&mut src),
            Err(FrameError::BadFragment(_))
        ));
        // Byte order mismatch.
        let mut other_order = pieces[1].clone();
        other_order[6] ^= 1;
        let size = (other_order.len() - 12) as u32;
        let order = ByteOrder::from_flag(other_order[6] & 1 != 0);
        Header::patch_size(&mut other_order, 0, order, size);
        other_order[12..16].copy_from_slice(&match order {
            ByteOrder::Big => 4u32.to_be_bytes(),
            ByteOrder::Little => 4u32.to_le_bytes(),
        });
        let r = decode_all(
            &mut GiopCodec::default(),
            &concat(&[pieces[0].clone(), other_order]),
        );
        assert!(matches!(r, Err(FrameError::BadFragment(_))), "{r:?}");
        // Version mismatch: a 1.1 Fragment after a 1.2 first piece.
        let mut v11 = pieces[1].clone();
        v11[5] = 1;
        let r = decode_all(
            &mut GiopCodec::default(),
            &concat(&[pieces[0].clone(), v11]),
        );
        assert!(matches!(r, Err(FrameError::BadFragment(_))), "{r:?}");
        // The same request id twice.
        let r = decode_all(
            &mut GiopCodec::default(),
            &concat(&[pieces[0].clone(), pieces[0].clone()]),
        );
        assert!(matches!(r, Err(FrameError::BadFragment(_))), "{r:?}");
        // A 1.2 fragment too short for its request id.
        let mut codec = GiopCodec::default();
        let mut src = BytesMut::from(&b"GIOP\x01\x02\x01\x07\x02\0\0\0\0\0"[..]);
        assert!(matches!(
            codec.decode(&mut src),
            Err(FrameError::BadFragment(_))
        ));
        // Fragmented CancelRequest, fragmented 1.1 LocateRequest.
        let mut cancel = BytesMut::new();
        write_cancel_request(&mut cancel, Version::V1_2, 4);
        cancel[6] |= 2;
        let r = decode_all(&mut GiopCodec::default(), &cancel);
        assert!(matches!(r, Err(FrameError::BadFragment(_))), "{r:?}");
        let mut lr = BytesMut::new();
        write_locate_request(
            &mut lr,
            Version::V1_1,
            4,
            &TargetAddress::Key(Bytes::new().into()),
        );
        lr[6] |= 2;
        let r = decode_all(&mut GiopCodec::default(), &lr);
        assert!(matches!(r, Err(FrameError::BadFragment(_))), "{r:?}");
    }

    #[test]
    fn pending_chains_are_bounded() {
        let mut codec = GiopCodec::default();
        let mut stream = Vec::new();
        for id in 0..32 {
            stream.extend_from_slice(&fragment(&request(id, 100), &[64])[0]);
        }
        assert!(decode_all(&mut codec, &stream).unwrap().is_empty());
        assert_eq!(codec.pending_fragment_chains(), 32);
        let r = decode_all(&mut codec, &fragment(&request(99, 100), &[64])[0]);
        assert!(matches!(r, Err(FrameError::BadFragment(_))), "{r:?}");
        // Custom limits.
        let mut codec = GiopCodec::new(1000).with_fragment_limits(1, 1000);
        assert!(
            decode_all(&mut codec, &fragment(&request(1, 100), &[64])[0])
                .unwrap()
                .is_empty()
        );
        let r = decode_all(&mut codec, &fragment(&request(2, 100), &[64])[0]);
        assert!(matches!(r, Err(FrameError::BadFragment(_))), "{r:?}");
    }

    #[test]
    fn reassembled_size_is_bounded() {
        let msg = request(4, 400);
        let pieces = fragment(&msg, &[64, 128, 192, 256, 320, 384]);
        let total = msg.len() - 12;
        // Each piece is small, but the whole message is over the limit.
        let mut codec = GiopCodec::new(total - 1);
        let stream = concat(&pieces);
        let mut src = BytesMut::from(&stream[..]);
        // One call: `decode` keeps going through the fragments until it has a frame or fails.
        let r = codec.decode(&mut src);
        assert!(matches!(r, Err(FrameError::TooLarge { .. })), "{r:?}");
        assert!(codec.buffered_fragment_bytes() < total);
        // The total held by all chains is bounded too.
        let mut codec = GiopCodec::new(1000).with_fragment_limits(32, 150);
        let mut stream = Vec::new();
        for id in 0..3 {
            stream.extend_from_slice(&fragment(&request(id, 100), &[64])[0]);
        }
        let r = decode_all(&mut codec, &stream);
        assert!(matches!(r, Err(FrameError::TooLarge { .. })), "{r:?}");
        assert!(codec.buffered_fragment_bytes() <= 150);
    }

    #[test]
    fn cancel_discards_a_pending_chain() {
        let pieces = fragment(&request(4, 100), &[64]);
        let mut cancel = BytesMut::new();
        write_cancel_request(&mut cancel, Version::V1_2, 4);
        let mut codec = GiopCodec::default();
        let frames = decode_all(&mut codec, &concat(&[pieces[0].clone(), cancel])).unwrap();
        assert_eq!(frames.len(), 1);
        assert_eq!(frames[0].message, Message::CancelRequest { request_id: 4 });
        assert_eq!(codec.pending_fragment_chains(), 0);
        assert_eq!(codec.buffered_fragment_bytes(), 0);
        // The rest of the chain is now an orphan.
        let r = decode_all(&mut codec, &pieces[1]);
        assert!(matches!(r, Err(FrameError::BadFragment(_))), "{r:?}");
    }

    #[test]
    fn encoder_reproduces_decoded_frames() {
        let mut msgs = vec![request(2, 0), request(4, 17)];
        for order in [ByteOrder::Big, ByteOrder::Little] {
            for v in [Version::V1_0, Version::V1_1, Version::V1_2] {
                let mut b = BytesMut::new();
                crate::giop::request::write_request_in(
                    &mut b,
                    v,
                    order,
                    &RequestHeader {
                        deadline: None,
                        request_id: 6,
                        response_flags: 0,
                        target: TargetAddress::Key(Bytes::from_static(b"k").into()),
                        operation: "op".into(),
                        service_context: ServiceContextList::default(),
                    },
                    |w| w.write_u64(5),
                );
                msgs.push(b);
                let mut b = BytesMut::new();
                crate::giop::reply::write_reply_in(
                    &mut b,
                    v,
                    order,
                    &ReplyHeader {
                        request_id: 6,
                        status: ReplyStatus::SystemException,
                        service_context: ServiceContextList::default(),
                    },
                    |w| w.write_u16(5),
                );
                msgs.push(b);
                let mut b = BytesMut::new();
                crate::giop::locate::write_locate_reply_in(
                    &mut b,
                    v,
                    order,
                    6,
                    LocateStatus::ObjectHere,
                    |_| {},
                );
                msgs.push(b);
            }
        }
        let mut b = BytesMut::new();
        write_locate_request(
            &mut b,
            Version::V1_2,
            1,
            &TargetAddress::Key(Bytes::new().into()),
        );
        write_cancel_request(&mut b, Version::V1_2, 1);
        write_close_connection(&mut b, Version::V1_1);
        write_message_error(&mut b, Version::V1_0);
        msgs.push(b);
        for msg in msgs {
            let mut codec = GiopCodec::default();
            let frames = decode_all(&mut codec, &msg).unwrap();
            let mut out = BytesMut::new();
            for f in &frames {
                codec.encode(f, &mut out).unwrap();
            }
            assert_eq!(&out[..], &msg[..]);
            let mut out2 = BytesMut::new();
            for f in frames {
                codec.encode(f, &mut out2).unwrap();
            }
            assert_eq!(out2, out);
        }
    }

    #[test]
    fn encoder_refuses_oversize_frames() {
        let msg = request(2, 100);
        let frame = decode_all(&mut GiopCodec::default(), &msg)
            .unwrap()
            .remove(0);
        let mut codec = GiopCodec::new(50);
        let mut out = BytesMut::from(&b"xy"[..]);
        assert!(matches!(
            codec.encode(&frame, &mut out),
            Err(FrameError::TooLarge { .. })
        ));
        assert_eq!(&out[..], b"xy");
    }
}
