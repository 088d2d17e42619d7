//! LocateRequest and LocateReply (all versions).

use super::{Body, TargetAddress, Version};
use crate::cdr::{CdrReader, CdrWriter, DecodeError};
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

pub(crate) fn decode_locate_request(version: Version, r: &mut CdrReader<'_>) -> Result<LocateRequest, DecodeError> {
    let _ = (version, r);
    todo!()
}

pub(crate) fn decode_locate_reply(version: Version, msg: &Bytes, r: &mut CdrReader<'_>) -> Result<LocateReply, DecodeError> {
    let _ = (version, msg, r);
    todo!()
}

/// Writes a LocateRequest (1.2: TargetAddress; 1.0/1.1: object key; we always send KeyAddr).
pub fn write_locate_request(dst: &mut BytesMut, version: Version, request_id: u32, target: &TargetAddress) {
    let _ = (dst, version, request_id, target);
    todo!()
}

/// Writes a LocateReply; `body` writes what the status needs (nothing for OBJECT_HERE).
pub fn write_locate_reply(
    dst: &mut BytesMut,
    version: Version,
    request_id: u32,
    status: LocateStatus,
    body: impl FnOnce(&mut CdrWriter<'_>),
) {
    let _ = (dst, version, request_id, status, body);
    todo!()
}
