//! Reply messages: GIOP 1.2 `ReplyHeader_1_2` (1.0/1.1 too), and system-exception bodies.

use super::{Body, ServiceContextList, Version};
use crate::cdr::{CdrReader, CdrWriter, DecodeError};
use crate::exception::SystemException;
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

/// Decodes a Reply message (reader positioned at offset 12 of `msg`).
pub(crate) fn decode_reply(version: Version, msg: &Bytes, r: &mut CdrReader<'_>) -> Result<Reply, DecodeError> {
    let _ = (version, msg, r);
    todo!()
}

/// Writes a whole Reply message into `dst` (native order); `body` is called with a writer at the
/// body start. In 1.2 the padding before an empty body is left out.
pub fn write_reply(
    dst: &mut BytesMut,
    version: Version,
    header: &ReplyHeader,
    body: impl FnOnce(&mut CdrWriter<'_>),
) {
    let _ = (dst, version, header, body);
    todo!()
}

/// Writes a SystemExceptionReplyBody: repository id, minor, completion status.
pub fn encode_system_exception(e: &SystemException, w: &mut CdrWriter<'_>) {
    let _ = (e, w);
    todo!()
}

/// Reads a SystemExceptionReplyBody. An unknown repository id or completion status gives
/// UNKNOWN (COMPLETED_YES... as omniORB does, but we use MAYBE) rather than an error.
pub fn decode_system_exception(r: &mut CdrReader<'_>) -> Result<SystemException, DecodeError> {
    let _ = r;
    todo!()
}
