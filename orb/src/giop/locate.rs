//! LocateRequest and LocateReply (all versions).
//!
//! Layouts (offsets from the GIOP header's first byte):
//!
//! ```text
//! LocateRequest 1.2:     request_id @12, TargetAddress @16; no body, no padding
//! LocateRequest 1.0/1.1: request_id @12, sequence<octet> object_key @16
//! LocateReply (all):     request_id @12, locate_status @16, body directly @20
//! ```
//!
//! The LocateReply body is **not** 8-aligned (WIRE-GIOP §9.1: OMG issue 4314 withdrew the
//! alignment; omniORB, TAO, ORBacus and Combat do not align).

use super::{begin_message, end_message, read_key_of, rest_as_body, Body, MsgType};
use super::{TargetAddress, Version};
use crate::cdr::{ByteOrder, CdrReader, CdrWriter, DecodeError, DecodeErrorKind, DecodeResultExt};
use bytes::{Bytes, BytesMut};

/// `LocateStatusType_1_2`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LocateStatus {
    /// 0
    UnknownObject,
    /// 1
    ObjectHere,
    /// 2 (body: IOR)
    ObjectForward,
    /// 3 (body: IOR)
    ObjectForwardPerm,
    /// 4 (body: SystemExceptionReplyBody)
    LocSystemException,
    /// 5 (body: short)
    LocNeedsAddressingMode,
}

impl LocateStatus {
    /// From the wire value.
    pub fn from_u32(v: u32) -> Option<Self> {
        Some(match v {
            0 => LocateStatus::UnknownObject,
            1 => LocateStatus::ObjectHere,
            2 => LocateStatus::ObjectForward,
            3 => LocateStatus::ObjectForwardPerm,
            4 => LocateStatus::LocSystemException,
            5 => LocateStatus::LocNeedsAddressingMode,
            _ => return None,
        })
    }

    /// The wire value.
    pub fn to_u32(self) -> u32 {
        self as u32
    }
}

/// A decoded LocateRequest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocateRequest {
    /// Request id.
    pub request_id: u32,
    /// Target (1.0/1.1: always a key).
    pub target: TargetAddress,
}

/// A decoded LocateReply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocateReply {
    /// Request id.
    pub request_id: u32,
    /// Status.
    pub status: LocateStatus,
    /// Body at offset 20, not 8-aligned (WIRE-GIOP §9.1).
    pub body: Body,
}

/// Decodes a LocateRequest (reader positioned at offset 12). The key (or profile data) is
/// copied, since the message is not at hand (keys are small); bytes after the target are
/// ignored.
pub(crate) fn decode_locate_request(
    version: Version,
    r: &mut CdrReader<'_>,
) -> Result<LocateRequest, DecodeError> {
    // With an empty `msg`, `read_octets_of` copies.
    let msg = Bytes::new();
    let inner = |r: &mut CdrReader<'_>| -> Result<LocateRequest, DecodeError> {
        let request_id = r.read_u32().field("request_id")?;
        let target = if version.minor >= 2 {
            TargetAddress::decode(&msg, r).field("target")?
        } else {
            TargetAddress::Key(read_key_of(&msg, r).field("object_key")?)
        };
        Ok(LocateRequest { request_id, target })
    };
    inner(r).field("LocateRequest")
}

/// Decodes a LocateReply (reader positioned at offset 12 of `msg`). 1.0/1.1 only know the
/// statuses 0..=2.
pub(crate) fn decode_locate_reply(
    version: Version,
    msg: &Bytes,
    r: &mut CdrReader<'_>,
) -> Result<LocateReply, DecodeError> {
    let inner = |r: &mut CdrReader<'_>| -> Result<LocateReply, DecodeError> {
        let request_id = r.read_u32().field("request_id")?;
        let at = r.position();
        let v = r.read_u32().field("locate_status")?;
        let max = if version.minor >= 2 { 5 } else { 2 };
        let status = match LocateStatus::from_u32(v) {
            Some(s) if v <= max => s,
            _ => {
                return Err(
                    DecodeError::new(DecodeErrorKind::BadEnum(v), at).in_field("locate_status")
                )
            }
        };
        // No alignment before the body (WIRE-GIOP §9.1).
        let body = rest_as_body(msg, r);
        Ok(LocateReply {
            request_id,
            status,
            body,
        })
    };
    inner(r).field("LocateReply")
}

/// Writes a LocateRequest (1.2: TargetAddress; 1.0/1.1: object key; we always send KeyAddr).
///
/// In 1.2 every TargetAddress variant is encoded as given (send [`TargetAddress::Key`] to
/// omniORB). In 1.0/1.1 the key of the address is sent ([`TargetAddress::object_key`], empty
/// if it has none).
pub fn write_locate_request(
    dst: &mut BytesMut,
    version: Version,
    request_id: u32,
    target: &TargetAddress,
) {
    write_locate_request_in(dst, version, ByteOrder::NATIVE, request_id, target);
}

/// [`write_locate_request`] in a chosen byte order.
pub(crate) fn write_locate_request_in(
    dst: &mut BytesMut,
    version: Version,
    order: ByteOrder,
    request_id: u32,
    target: &TargetAddress,
) {
    let start = begin_message(dst, version, order, MsgType::LocateRequest);
    let mut w = CdrWriter::with_origin(dst, order, start);
    w.write_u32(request_id);
    if version.minor >= 2 {
        target.encode(&mut w);
    } else {
        w.write_octets(&target.key_for_old_versions());
    }
    end_message(dst, start, order);
}

/// Writes a LocateReply; `body` writes what the status needs (nothing for OBJECT_HERE).
///
/// The body starts at offset 20 with no padding (WIRE-GIOP §9.1). Statuses 3..=5 do not exist
/// before GIOP 1.2; the caller must not send them there (they are written as given).
pub fn write_locate_reply(
    dst: &mut BytesMut,
    version: Version,
    request_id: u32,
    status: LocateStatus,
    body: impl FnOnce(&mut CdrWriter<'_>),
) {
    write_locate_reply_in(dst, version, ByteOrder::NATIVE, request_id, status, body);
}

/// [`write_locate_reply`] in a chosen byte order.
pub(crate) fn write_locate_reply_in(
    dst: &mut BytesMut,
    version: Version,
    order: ByteOrder,
    request_id: u32,
    status: LocateStatus,
    body: impl FnOnce(&mut CdrWriter<'_>),
) {
    let start = begin_message(dst, version, order, MsgType::LocateReply);
    let mut w = CdrWriter::with_origin(dst, order, start);
    w.write_u32(request_id);
    w.write_u32(status.to_u32());
    body(&mut w);
    end_message(dst, start, order);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::giop::{Header, HEADER_LEN};
    use crate::ior::ObjectRef;

    fn reader_over(msg: &Bytes) -> (Header, CdrReader<'_>) {
        let h = Header::decode(msg).expect("header");
        assert_eq!(h.size as usize, msg.len() - HEADER_LEN, "size field");
        let mut r = CdrReader::new(msg, h.order);
        r.skip(HEADER_LEN).unwrap();
        (h, r)
    }

    fn decode_req(buf: &[u8]) -> Result<LocateRequest, DecodeError> {
        let msg = Bytes::copy_from_slice(buf);
        let (h, mut r) = reader_over(&msg);
        assert_eq!(h.msg_type, MsgType::LocateRequest);
        decode_locate_request(h.version, &mut r)
    }

    fn decode_rep(buf: &[u8]) -> Result<LocateReply, DecodeError> {
        let msg = Bytes::copy_from_slice(buf);
        let (h, mut r) = reader_over(&msg);
        assert_eq!(h.msg_type, MsgType::LocateReply);
        decode_locate_reply(h.version, &msg, &mut r)
    }

    #[test]
    fn locate_request_round_trip() {
        let objref = ObjectRef::new("IDL:x:1.0", "h", 1, &b"key"[..]);
        let targets = [
            TargetAddress::Key(Bytes::from_static(b"NameService").into()),
            TargetAddress::Profile(objref.profiles()[0].clone()),
            TargetAddress::Reference {
                selected_profile_index: 0,
                ior: Box::new(objref),
            },
        ];
        for order in [ByteOrder::Little, ByteOrder::Big] {
            for t in &targets {
                let mut buf = BytesMut::new();
                write_locate_request_in(&mut buf, Version::V1_2, order, 4, t);
                let lr = decode_req(&buf).unwrap();
                assert_eq!(lr.request_id, 4);
                assert_eq!(&lr.target, t);
                for v in [Version::V1_0, Version::V1_1] {
                    let mut buf = BytesMut::new();
                    write_locate_request_in(&mut buf, v, order, 4, t);
                    let lr = decode_req(&buf).unwrap();
                    assert_eq!(lr.target, TargetAddress::Key(t.object_key().unwrap()));
                }
            }
        }
        // 1.0 layout: request id, then the key directly.
        let mut buf = BytesMut::new();
        write_locate_request(&mut buf, Version::V1_0, 2, &targets[0]);
        assert_eq!(buf.len(), 12 + 4 + 4 + 11);
        assert_eq!(&buf[20..], b"NameService");
    }

    #[test]
    fn locate_reply_body_is_not_aligned() {
        for order in [ByteOrder::Little, ByteOrder::Big] {
            for v in [Version::V1_0, Version::V1_1, Version::V1_2] {
                let mut buf = BytesMut::new();
                write_locate_reply_in(&mut buf, v, order, 9, LocateStatus::ObjectForward, |w| {
                    assert_eq!(w.position(), 20);
                    w.write_u32(0xabcd);
                });
                assert_eq!(buf.len(), 24);
                let lr = decode_rep(&buf).unwrap();
                assert_eq!(lr.request_id, 9);
                assert_eq!(lr.status, LocateStatus::ObjectForward);
                assert_eq!(lr.body.offset, 20);
                assert_eq!(lr.body.order, order);
                assert_eq!(lr.body.reader().read_u32().unwrap(), 0xabcd);
            }
            // A short body right at 20 (NEEDS_ADDRESSING_MODE), no padding.
            let mut buf = BytesMut::new();
            write_locate_reply_in(
                &mut buf,
                Version::V1_2,
                order,
                1,
                LocateStatus::LocNeedsAddressingMode,
                |w| w.write_i16(0),
            );
            assert_eq!(buf.len(), 22);
            let lr = decode_rep(&buf).unwrap();
            assert_eq!(lr.body.bytes.len(), 2);
        }
    }

    #[test]
    fn locate_status_ranges() {
        for v in 0..=5 {
            let mut buf = BytesMut::new();
            let status = LocateStatus::from_u32(v).unwrap();
            assert_eq!(status.to_u32(), v);
            write_locate_reply(&mut buf, Version::V1_2, 1, status, |_| {});
            assert_eq!(decode_rep(&buf).unwrap().status, status);
            let mut buf = BytesMut::new();
            write_locate_reply(&mut buf, Version::V1_1, 1, status, |_| {});
            let r = decode_rep(&buf);
            if v <= 2 {
                assert_eq!(r.unwrap().status, status);
            } else {
                let e = r.unwrap_err();
                assert_eq!(e.kind(), &DecodeErrorKind::BadEnum(v));
                assert_eq!(e.path(), &["LocateReply", "locate_status"]);
            }
        }
        assert_eq!(LocateStatus::from_u32(6), None);
    }

    #[test]
    fn truncated_locate_messages_are_errors() {
        let mut buf = BytesMut::new();
        write_locate_request(
            &mut buf,
            Version::V1_2,
            2,
            &TargetAddress::Key(Bytes::from_static(b"NameService").into()),
        );
        for cut in HEADER_LEN..buf.len() {
            let mut t = BytesMut::from(&buf[..cut]);
            Header::patch_size(&mut t, 0, ByteOrder::NATIVE, (cut - HEADER_LEN) as u32);
            assert!(decode_req(&t).is_err());
        }
    }
}
