//! Reply messages: GIOP 1.2 `ReplyHeader_1_2` (1.0/1.1 too), and system-exception bodies.
//!
//! Layouts (offsets from the GIOP header's first byte):
//!
//! ```text
//! 1.2:     request_id, reply_status, ServiceContextList, pad to 8 only if a body follows, body
//! 1.0/1.1: ServiceContextList, request_id, reply_status (0..=3), body directly after
//! ```

use super::direct::Direct;
use super::service_context::{context_id, ErrorText};
use super::{
    begin_message, end_message, rest_as_body, Body, BodyAt, MsgType, ServiceContextList, Version,
};
use crate::cdr::{
    ByteOrder, CdrReader, CdrReply, CdrWriter, DecodeError, DecodeErrorKind, DecodeResultExt,
};
use crate::exception::{minor, CompletionStatus, SystemException, SystemExceptionKind};
use bytes::{Bytes, BytesMut};

/// `ReplyStatusType_1_2`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReplyStatus {
    /// 0: the body holds the results.
    NoException,
    /// 1: the body holds a user exception (repository id, members).
    UserException,
    /// 2: the body holds a SystemExceptionReplyBody.
    SystemException,
    /// 3: the body holds an IOR to retry at.
    LocationForward,
    /// 4 (1.2): permanent forward.
    LocationForwardPerm,
    /// 5 (1.2): the body holds a short AddressingDisposition.
    NeedsAddressingMode,
}

impl ReplyStatus {
    /// From the wire value.
    pub fn from_u32(v: u32) -> Option<Self> {
        Some(match v {
            0 => ReplyStatus::NoException,
            1 => ReplyStatus::UserException,
            2 => ReplyStatus::SystemException,
            3 => ReplyStatus::LocationForward,
            4 => ReplyStatus::LocationForwardPerm,
            5 => ReplyStatus::NeedsAddressingMode,
            _ => return None,
        })
    }

    /// The wire value.
    pub fn to_u32(self) -> u32 {
        self as u32
    }
}

/// The fields of a Reply header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplyHeader {
    /// The request this answers.
    pub request_id: u32,
    /// Outcome.
    pub status: ReplyStatus,
    /// Service contexts.
    pub service_context: ServiceContextList,
}

/// A decoded Reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    /// Header fields.
    pub header: ReplyHeader,
    /// The body, a zero-copy slice of the frame.
    pub body: Body,
}

std::thread_local! {
    /// This thread's spare allocation for a decoded reply ([`Reply::boxed`]): the thread
    /// that hands a reply to its caller takes it out of its box ([`Reply::unboxed`]), which
    /// stays here for the next reply it reads. It holds no bytes of any frame.
    static SPARE: std::cell::Cell<Option<Box<Reply>>> = const { std::cell::Cell::new(None) };
}

impl Reply {
    /// A reply that holds nothing (of any frame): what a spare box keeps.
    fn stale() -> Self {
        Reply {
            header: ReplyHeader {
                request_id: 0,
                status: ReplyStatus::NoException,
                service_context: ServiceContextList::default(),
            },
            body: Body::empty(ByteOrder::NATIVE),
        }
    }

    /// The reply, boxed in this thread's spare allocation if it has one (field by field, in
    /// place), else in a new one. Boxed, a frame is a fifth of its size, and frames are moved
    /// several times between the socket and the caller (callgrind).
    pub(crate) fn boxed(header: ReplyHeader, body: Body) -> Box<Reply> {
        match SPARE.with(|s| s.take()) {
            Some(mut spare) => {
                spare.header = header;
                spare.body = body;
                spare
            }
            None => Box::new(Reply { header, body }),
        }
    }

    /// The reply out of its box, which stays as this thread's spare for the next
    /// [`boxed`](Self::boxed), holding nothing of the frame.
    pub(crate) fn unboxed(mut boxed: Box<Reply>) -> Reply {
        let reply = std::mem::replace(&mut *boxed, Reply::stale());
        SPARE.with(|s| s.set(Some(boxed)));
        reply
    }

    /// The reply as [`ObjectProxy::invoke_cdr`](crate::ObjectProxy::invoke_cdr) returns it:
    /// the results, or a user exception split into its repository id and members.
    ///
    /// A system exception is the error, decoded (MARSHAL, COMPLETED_MAYBE, if it does not
    /// decode); so is a user exception whose id does not decode (MARSHAL, COMPLETED_YES), and
    /// any other status (a forward the ORB stopped following, NEEDS_ADDRESSING_MODE): MARSHAL,
    /// COMPLETED_NO, as for calls through [`ObjectProxy::invoke`](crate::ObjectProxy::invoke).
    pub fn into_cdr_reply(self) -> Result<CdrReply, SystemException> {
        match self.header.status {
            ReplyStatus::NoException => Ok(CdrReply::NoException(self.body.into_cdr_body())),
            ReplyStatus::UserException => {
                let mut r = self.body.reader();
                let id = r.read_string_bytes().field("exception_id").map_err(|e| {
                    SystemException::marshal(
                        minor::BAD_REPLY,
                        CompletionStatus::Yes,
                        format!("user exception does not decode: {e}"),
                    )
                })?;
                let repository_id = String::from_utf8_lossy(id).into_owned();
                let read = self.body.bytes.len() - r.remaining();
                let members = Body {
                    bytes: self.body.bytes.slice(read..),
                    offset: self.body.offset + read,
                    order: self.body.order,
                };
                Ok(CdrReply::UserException {
                    repository_id,
                    members: members.into_cdr_body(),
                })
            }
            ReplyStatus::SystemException => Err(self.system_exception()),
            s => Err(unsupported_status(s)),
        }
    }

    /// The system exception a `SYSTEM_EXCEPTION` reply carries (MARSHAL, completed MAYBE, if
    /// its body does not decode).
    ///
    /// The detail text comes from the reply's ERROR_TEXT context ([`ErrorText`]), when the
    /// peer sent one and the exception has no detail of its own.
    pub(crate) fn system_exception(&self) -> SystemException {
        let e = decode_system_exception(&mut self.body.reader()).unwrap_or_else(|e| {
            SystemException::marshal(
                minor::BAD_REPLY,
                CompletionStatus::Maybe,
                format!("system exception does not decode: {e}"),
            )
        });
        match self.header.service_context.get(context_id::ERROR_TEXT) {
            Some(data) if e.detail().is_none() => match ErrorText::from_context_data(data) {
                Ok(ErrorText(text)) if !text.is_empty() => e.with_detail(text),
                _ => e,
            },
            _ => e,
        }
    }
}

/// What a caller sees of a reply status it cannot take here (MARSHAL, completed NO).
pub(crate) fn unsupported_status(s: ReplyStatus) -> SystemException {
    SystemException::marshal(
        minor::BAD_REPLY,
        CompletionStatus::No,
        format!("unsupported reply status {s:?}"),
    )
}

/// [`decode_reply_parts`] with the body sliced out of `msg` (tests).
#[cfg(test)]
pub(crate) fn decode_reply(
    version: Version,
    msg: &Bytes,
    r: &mut CdrReader<'_>,
) -> Result<Reply, DecodeError> {
    let (header, body) = decode_reply_parts(version, msg, r)?;
    Ok(Reply {
        header,
        body: body.sliced(msg),
    })
}

/// Decodes a Reply message (reader positioned at offset 12 of `msg`): its header, and where
/// its body is, for a decoder that owns `msg` and lets the body take it over
/// ([`BodyAt::owned`]).
///
/// A status value outside the version's range (0..=5 in 1.2, 0..=3 before) is an error.
pub(crate) fn decode_reply_parts(
    version: Version,
    msg: &Bytes,
    r: &mut CdrReader<'_>,
) -> Result<(ReplyHeader, BodyAt), DecodeError> {
    decode_reply_inner(version, msg, r).field("Reply")
}

/// Decodes a well-formed GIOP 1.2 Reply straight from the frame's bytes ([`Direct`]), for
/// a reader at the reply header; `None` for anything else, which the reader's way then
/// decodes or reports.
fn decode_reply_1_2_fast(msg: &Bytes, r: &mut CdrReader<'_>) -> Option<(ReplyHeader, BodyAt)> {
    let d = Direct::at_header(msg, r)?;
    let request_id = d.u32_at(12)?;
    let status = ReplyStatus::from_u32(d.u32_at(16)?)?;
    let (service_context, at) = d.contexts_at(20, |_, _| false)?;
    let body = d.body_at(at, r)?;
    let header = ReplyHeader {
        request_id,
        status,
        service_context,
    };
    Some((header, body))
}

fn decode_reply_inner(
    version: Version,
    msg: &Bytes,
    r: &mut CdrReader<'_>,
) -> Result<(ReplyHeader, BodyAt), DecodeError> {
    if version.minor >= 2 {
        if let Some(reply) = decode_reply_1_2_fast(msg, r) {
            return Ok(reply);
        }
    }
    let reply = decode_reply_fields(version, msg, r)?;
    Ok((reply.header, BodyAt::Made(reply.body)))
}

/// [`decode_reply_inner`] field by field through the reader: any reply, and the errors with
/// their field path.
fn decode_reply_fields(
    version: Version,
    msg: &Bytes,
    r: &mut CdrReader<'_>,
) -> Result<Reply, DecodeError> {
    let header = if version.minor >= 2 {
        let request_id = r.read_u32().field("request_id")?;
        let status = read_status(version, r)?;
        let service_context = ServiceContextList::decode_in(msg, r)?;
        r.align_if_remaining(8).field("body")?;
        ReplyHeader {
            request_id,
            status,
            service_context,
        }
    } else {
        let service_context = ServiceContextList::decode_in(msg, r)?;
        let request_id = r.read_u32().field("request_id")?;
        let status = read_status(version, r)?;
        ReplyHeader {
            request_id,
            status,
            service_context,
        }
    };
    let body = rest_as_body(msg, r);
    Ok(Reply { header, body })
}

fn read_status(version: Version, r: &mut CdrReader<'_>) -> Result<ReplyStatus, DecodeError> {
    let at = r.position();
    let v = r.read_u32().field("reply_status")?;
    // LOCATION_FORWARD_PERM and NEEDS_ADDRESSING_MODE only exist from GIOP 1.2 on.
    let max = if version.minor >= 2 { 5 } else { 3 };
    match ReplyStatus::from_u32(v) {
        Some(s) if v <= max => Ok(s),
        _ => Err(DecodeError::new(DecodeErrorKind::BadEnum(v), at).in_field("reply_status")),
    }
}

/// Writes a whole Reply message into `dst` (native order); `body` is called with a writer at the
/// body start. In 1.2 the padding before an empty body is left out.
///
/// The writer's alignment origin is the GIOP header's first byte, so a 1.0/1.1 body (directly
/// after the header) is aligned correctly. Statuses 4 and 5 do not exist before GIOP 1.2; the
/// caller must not send them there (they are written as given).
pub fn write_reply(
    dst: &mut BytesMut,
    version: Version,
    header: &ReplyHeader,
    body: impl FnOnce(&mut CdrWriter<'_>),
) {
    write_reply_in(dst, version, ByteOrder::NATIVE, header, body);
}

/// [`write_reply`] in a chosen byte order (used to re-encode received frames in their order).
pub(crate) fn write_reply_in(
    dst: &mut BytesMut,
    version: Version,
    order: ByteOrder,
    header: &ReplyHeader,
    body: impl FnOnce(&mut CdrWriter<'_>),
) {
    let start = begin_message(dst, version, order, MsgType::Reply);
    let plain = version.minor >= 2 && header.service_context.0.is_empty();
    if plain {
        // Request id, status and an empty context list in one append (almost every reply):
        // what the writer writes field by field, each a capacity check and a copy.
        dst.extend_from_slice(&fixed_head(order, header.request_id, header.status));
    }
    let mut w = CdrWriter::with_origin(dst, order, start);
    if version.minor >= 2 {
        if !plain {
            w.write_u32(header.request_id);
            w.write_u32(header.status.to_u32());
            header.service_context.encode(&mut w);
        }
        let before_pad = w.buffer_index();
        w.align(8);
        let body_start = w.buffer_index();
        body(&mut w);
        let body_end = w.buffer_index();
        if body_end == body_start {
            // No body: no padding either (WIRE-GIOP §2.2).
            dst.truncate(before_pad);
        }
    } else {
        header.service_context.encode(&mut w);
        w.write_u32(header.request_id);
        w.write_u32(header.status.to_u32());
        body(&mut w);
    }
    end_message(dst, start, order);
}

/// A GIOP 1.2 reply header without service contexts, after the GIOP header (position 12,
/// 4-aligned): request id, status, context count 0.
fn fixed_head(order: ByteOrder, request_id: u32, status: ReplyStatus) -> [u8; 12] {
    let mut b = [0u8; 12];
    b[..4].copy_from_slice(&order.u32_bytes(request_id));
    b[4..8].copy_from_slice(&order.u32_bytes(status.to_u32()));
    b
}

/// Length of the head of a NO_EXCEPTION reply without service contexts: the GIOP header and
/// the reply header, 24 bytes in every GIOP version (1.2: request id, status, context count;
/// 1.0 and 1.1: context count, request id, status) and 8-aligned, so that a 1.2 body follows
/// it without padding, as it does in 1.0 and 1.1.
pub(crate) const PLAIN_REPLY_HEAD: usize = 24;

/// Writes the head of a NO_EXCEPTION reply to `request_id`, without service contexts, into
/// `frame[..PLAIN_REPLY_HEAD]`, in native byte order, for the body that follows it in
/// `frame` (non-empty, as an octet sequence always is): the frame [`write_reply`] writes for
/// that reply and body (the server's results encoded in place, `result_slot.rs`).
pub(crate) fn write_plain_reply_head(frame: &mut [u8], version: Version, request_id: u32) {
    let order = ByteOrder::NATIVE;
    let size = frame.len().saturating_sub(super::HEADER_LEN);
    let header = super::Header {
        version,
        order,
        more_fragments: false,
        msg_type: MsgType::Reply,
        size: u32::try_from(size).unwrap_or(u32::MAX),
    };
    let mut head = [0u8; PLAIN_REPLY_HEAD];
    head[..12].copy_from_slice(&header.to_bytes());
    // The context count and the status (NO_EXCEPTION) are 0 in both layouts.
    let id_at = if version.minor >= 2 { 12 } else { 16 };
    head[id_at..id_at + 4].copy_from_slice(&order.u32_bytes(request_id));
    if let Some(h) = frame.get_mut(..PLAIN_REPLY_HEAD) {
        h.copy_from_slice(&head);
    }
}

/// Writes a SystemExceptionReplyBody: repository id, minor, completion status.
pub fn encode_system_exception(e: &SystemException, w: &mut CdrWriter<'_>) {
    w.write_string(e.kind.repository_id());
    w.write_u32(e.minor);
    w.write_u32(e.completed.to_u32());
}

/// Reads a SystemExceptionReplyBody. An unknown repository id or completion status gives
/// UNKNOWN (COMPLETED_YES... as omniORB does, but we use MAYBE) rather than an error.
///
/// That UNKNOWN carries minor [`minor::UNKNOWN_EXCEPTION_ID`] and a detail naming the
/// received id, minor and completion. Malformed CDR (a bad string, missing bytes) is an error.
pub fn decode_system_exception(r: &mut CdrReader<'_>) -> Result<SystemException, DecodeError> {
    let id = r.read_string_bytes().field("exception_id")?;
    let id = String::from_utf8_lossy(id);
    let minor_code = r.read_u32().field("minor_code_value")?;
    let completion = r.read_u32().field("completion_status")?;
    let kind = SystemExceptionKind::from_repository_id(&id);
    let completed = CompletionStatus::from_u32(completion);
    match (kind, completed) {
        (Some(kind), Some(completed)) => Ok(SystemException::new(kind, minor_code, completed)),
        (None, _) => Ok(unknown_exception(format!(
            "peer raised unknown system exception `{id}` (minor {minor_code:#010x}, \
             completion {completion})"
        ))),
        (Some(_), None) => Ok(unknown_exception(format!(
            "peer raised `{id}` (minor {minor_code:#010x}) with invalid completion status \
             {completion}"
        ))),
    }
}

fn unknown_exception(detail: String) -> SystemException {
    SystemException::new(
        SystemExceptionKind::UNKNOWN,
        minor::UNKNOWN_EXCEPTION_ID,
        CompletionStatus::Maybe,
    )
    .with_detail(detail)
}

#[cfg(test)]
mod tests {
    /// A head written in front of a body encoded in place makes the frame `write_reply`
    /// writes for that reply, in every GIOP version.
    #[test]
    fn a_plain_reply_head_makes_the_frame_write_reply_writes() {
        use crate::version::Version as V;
        let body = b"protobuf bytes, 29 of them...";
        for version in [V::V1_0, V::V1_1, V::V1_2] {
            let header = ReplyHeader {
                request_id: 0x0102_0304,
                status: ReplyStatus::NoException,
                service_context: ServiceContextList::default(),
            };
            let mut want = BytesMut::new();
            write_reply(&mut want, version, &header, |w| w.write_octets(body));
            let mut frame = vec![0xAA; PLAIN_REPLY_HEAD];
            frame.extend_from_slice(&ByteOrder::NATIVE.u32_bytes(body.len() as u32));
            frame.extend_from_slice(body);
            write_plain_reply_head(&mut frame, version, 0x0102_0304);
            assert_eq!(frame, &want[..], "GIOP {version:?}");
        }
    }

    use super::*;

    /// A reply read on a thread whose last reply was taken out of its box goes into the
    /// same allocation, with its own fields; the spare keeps nothing of the frame.
    #[test]
    fn a_spare_reply_box_takes_the_next_reply_on_its_thread() {
        let frame = Bytes::from(b"reply-frame-bytes".to_vec());
        let header = |id| ReplyHeader {
            request_id: id,
            status: ReplyStatus::NoException,
            service_context: ServiceContextList::default(),
        };
        let body = Body {
            bytes: frame.slice(6..),
            offset: 0,
            order: ByteOrder::Big,
        };
        let first = Reply::boxed(header(1), body.clone());
        let at = &*first as *const Reply;
        let reply = Reply::unboxed(first);
        assert_eq!((reply.header.request_id, &reply.body), (1, &body));
        drop((reply, body));
        assert!(frame.is_unique(), "the spare box keeps the frame");
        let second = Reply::boxed(header(2), Body::empty(ByteOrder::Little));
        assert_eq!(&*second as *const Reply, at, "the spare box was not used");
        assert_eq!(second.header, header(2));
        assert_eq!(second.body, Body::empty(ByteOrder::Little));
        // Taken: another reply on this thread gets an allocation of its own.
        let third = Reply::boxed(header(3), Body::empty(ByteOrder::Little));
        assert_ne!(&*third as *const Reply, at);
    }
    use crate::giop::{Header, ServiceContext, HEADER_LEN};

    fn decode(buf: &[u8]) -> Result<Reply, DecodeError> {
        let msg = Bytes::copy_from_slice(buf);
        let h = Header::decode(&msg).expect("header");
        assert_eq!(h.msg_type, MsgType::Reply);
        assert_eq!(h.size as usize, msg.len() - HEADER_LEN, "size field");
        let mut r = CdrReader::new(&msg, h.order);
        r.skip(HEADER_LEN).unwrap();
        decode_reply(h.version, &msg, &mut r)
    }

    /// The reply header written in one append is what the writer writes field by field.
    #[test]
    fn the_fixed_reply_head_is_what_the_fields_write() {
        for order in [ByteOrder::Little, ByteOrder::Big] {
            for status in ALL {
                let mut fields = BytesMut::from(&[0u8; HEADER_LEN][..]);
                let mut w = CdrWriter::with_origin(&mut fields, order, 0);
                w.write_u32(0x0102_0304);
                w.write_u32(status.to_u32());
                ServiceContextList::<0>::default().encode(&mut w);
                assert_eq!(
                    &fixed_head(order, 0x0102_0304, status)[..],
                    &fields[HEADER_LEN..],
                    "{order:?} {status:?}"
                );
            }
        }
    }

    /// As `request::tests::the_direct_request_decoding_agrees_with_the_readers`, for
    /// replies: every status, 0-2 contexts, bodies of 0, 1 and 13 bytes, both byte orders;
    /// the direct way must answer for each (1.2) and agree with the reader's, and wherever
    /// it answers for a truncation or a changed header byte it must agree too.
    #[test]
    fn the_direct_reply_decoding_agrees_with_the_readers() {
        let mut answered = 0;
        for order in [ByteOrder::Little, ByteOrder::Big] {
            for status in ALL {
                for contexts in 0..3u32 {
                    for body in [&b""[..], &b"x"[..], &[7u8; 13][..]] {
                        let header = ReplyHeader {
                            request_id: 0x0A0B_0C0D,
                            status,
                            service_context: ServiceContextList(
                                (0..contexts)
                                    .map(|i| ServiceContext {
                                        id: 7 + i,
                                        data: Bytes::from(vec![i as u8; 1 + i as usize * 6]),
                                    })
                                    .collect(),
                            ),
                        };
                        let mut buf = BytesMut::new();
                        write_reply_in(&mut buf, Version::V1_2, order, &header, |w| {
                            w.write_raw(body)
                        });
                        let msg = buf.freeze();
                        let mut variants = vec![msg.clone()];
                        variants.extend((HEADER_LEN..msg.len()).map(|cut| msg.slice(..cut)));
                        for at in HEADER_LEN..msg.len().min(64) {
                            for v in [0u8, 1, 0x80, 0xFF] {
                                let mut m = msg.to_vec();
                                m[at] = v;
                                variants.push(Bytes::from(m));
                            }
                        }
                        for (i, m) in variants.iter().enumerate() {
                            let mut slow_r = CdrReader::new(m, order);
                            let mut fast_r = CdrReader::new(m, order);
                            slow_r.skip(HEADER_LEN).unwrap();
                            fast_r.skip(HEADER_LEN).unwrap();
                            let slow = decode_reply_fields(Version::V1_2, m, &mut slow_r);
                            let fast =
                                decode_reply_1_2_fast(m, &mut fast_r).map(|(header, body)| Reply {
                                    header,
                                    body: body.sliced(m),
                                });
                            let Some(fast) = fast else {
                                assert!(i > 0, "a well-formed reply not decoded directly");
                                assert_eq!(fast_r.position(), HEADER_LEN);
                                continue;
                            };
                            answered += 1;
                            assert_eq!(slow.as_ref().ok(), Some(&fast), "{m:?}");
                            assert_eq!(slow_r.position(), fast_r.position(), "{m:?}");
                        }
                    }
                }
            }
        }
        assert!(answered > 1000, "{answered}");
    }

    const ALL: [ReplyStatus; 6] = [
        ReplyStatus::NoException,
        ReplyStatus::UserException,
        ReplyStatus::SystemException,
        ReplyStatus::LocationForward,
        ReplyStatus::LocationForwardPerm,
        ReplyStatus::NeedsAddressingMode,
    ];

    #[test]
    fn status_values() {
        for (i, s) in ALL.iter().enumerate() {
            assert_eq!(s.to_u32(), i as u32);
            assert_eq!(ReplyStatus::from_u32(i as u32), Some(*s));
        }
        assert_eq!(ReplyStatus::from_u32(6), None);
    }

    #[test]
    fn round_trip_every_version_status_and_order() {
        for version in [Version::V1_0, Version::V1_1, Version::V1_2] {
            for order in [ByteOrder::Little, ByteOrder::Big] {
                for status in ALL {
                    if version.minor < 2 && status.to_u32() > 3 {
                        continue;
                    }
                    let h = ReplyHeader {
                        request_id: 99,
                        status,
                        service_context: ServiceContextList(smallvec::smallvec![ServiceContext {
                            id: 5,
                            data: Bytes::from_static(&[1, 2, 3]),
                        }]),
                    };
                    let mut buf = BytesMut::new();
                    write_reply_in(&mut buf, version, order, &h, |w| w.write_octets(b"result"));
                    let rep = decode(&buf).unwrap();
                    assert_eq!(rep.header, h);
                    assert_eq!(rep.body.order, order);
                    assert_eq!(&rep.body.octets().unwrap()[..], b"result");
                    assert_eq!(&buf[rep.body.offset..], &rep.body.bytes[..]);
                    if version.minor >= 2 {
                        assert_eq!(rep.body.offset % 8, 0);
                    }
                }
            }
        }
    }

    #[test]
    fn void_reply_is_24_bytes_in_1_2() {
        let h = ReplyHeader {
            request_id: 2,
            status: ReplyStatus::NoException,
            service_context: ServiceContextList::default(),
        };
        let mut buf = BytesMut::new();
        write_reply(&mut buf, Version::V1_2, &h, |_| {});
        assert_eq!(buf.len(), 24);
        // With a context the header ends unaligned, and still no padding is added.
        let h = ReplyHeader {
            service_context: ServiceContextList(smallvec::smallvec![ServiceContext {
                id: 1,
                data: Bytes::from_static(&[1]),
            }]),
            ..h
        };
        let mut buf = BytesMut::new();
        write_reply(&mut buf, Version::V1_2, &h, |_| {});
        assert_eq!(buf.len(), 33);
        let rep = decode(&buf).unwrap();
        assert!(rep.body.bytes.is_empty());
    }

    #[test]
    fn old_version_body_follows_the_status() {
        let h = ReplyHeader {
            request_id: 2,
            status: ReplyStatus::NoException,
            service_context: ServiceContextList::default(),
        };
        let mut buf = BytesMut::new();
        write_reply(&mut buf, Version::V1_0, &h, |w| w.write_bool(true));
        // WIRE-GIOP §2.7: ctx count, req id, status, TRUE.
        assert_eq!(&buf[12..], &[0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 1][..]);
        let rep = decode(&buf).unwrap();
        assert_eq!(rep.body.offset, 24);
        assert!(rep.body.reader().read_bool().unwrap());
    }

    #[test]
    fn bad_status_values_are_errors() {
        for (version, v) in [(Version::V1_2, 6), (Version::V1_1, 4), (Version::V1_0, 5)] {
            let mut buf = BytesMut::new();
            let start = begin_message(&mut buf, version, ByteOrder::Big, MsgType::Reply);
            let mut w = CdrWriter::with_origin(&mut buf, ByteOrder::Big, start);
            if version.minor >= 2 {
                w.write_u32(1);
                w.write_u32(v);
                w.write_u32(0);
            } else {
                w.write_u32(0);
                w.write_u32(1);
                w.write_u32(v);
            }
            end_message(&mut buf, start, ByteOrder::Big);
            let e = decode(&buf).unwrap_err();
            assert_eq!(e.kind(), &DecodeErrorKind::BadEnum(v));
            assert_eq!(e.path(), &["Reply", "reply_status"]);
        }
    }

    #[test]
    fn system_exception_round_trip() {
        for order in [ByteOrder::Little, ByteOrder::Big] {
            for kind in SystemExceptionKind::all() {
                for completed in [
                    CompletionStatus::Yes,
                    CompletionStatus::No,
                    CompletionStatus::Maybe,
                ] {
                    let e = SystemException::new(kind, 0x4f4d_0001, completed);
                    let mut buf = BytesMut::new();
                    encode_system_exception(&e, &mut CdrWriter::with_offset(&mut buf, order, 3));
                    let mut r = CdrReader::with_offset(&buf, order, 3);
                    assert_eq!(decode_system_exception(&mut r).unwrap(), e);
                    assert_eq!(r.remaining(), 0);
                }
            }
        }
    }

    fn raw_exception(id: &str, minor_code: u32, completion: u32) -> BytesMut {
        let mut buf = BytesMut::new();
        let mut w = CdrWriter::new(&mut buf, ByteOrder::Big);
        w.write_string(id);
        w.write_u32(minor_code);
        w.write_u32(completion);
        buf
    }

    #[test]
    fn unknown_ids_and_completions_become_unknown() {
        for (id, completion) in [
            ("IDL:omg.org/CORBA/NOT_A_THING:1.0", 1),
            ("IDL:omg.org/CORBA/TRANSIENT:1.0", 3),
            ("", 0),
        ] {
            let buf = raw_exception(id, 7, completion);
            let e = decode_system_exception(&mut CdrReader::new(&buf, ByteOrder::Big)).unwrap();
            assert_eq!(e.kind, SystemExceptionKind::UNKNOWN);
            assert_eq!(e.minor, minor::UNKNOWN_EXCEPTION_ID);
            assert_eq!(e.completed, CompletionStatus::Maybe);
            assert!(e.detail().unwrap().contains(&format!("`{id}`")), "{e}");
        }
        // Truncated bodies are errors.
        let buf = raw_exception("IDL:omg.org/CORBA/TRANSIENT:1.0", 7, 1);
        for cut in 0..buf.len() {
            assert!(
                decode_system_exception(&mut CdrReader::new(&buf[..cut], ByteOrder::Big)).is_err()
            );
        }
    }
}
