//! Request messages: GIOP 1.2 `RequestHeader_1_2`, and the 1.0/1.1 header for decoding.

use super::{Body, ServiceContextList, Version};
use crate::cdr::{CdrReader, CdrWriter, DecodeError};
use crate::ior::{ObjectRef, TaggedProfile};
use bytes::{Bytes, BytesMut};

/// `GIOP::TargetAddress`: how a request names its target object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TargetAddress {
    /// KeyAddr (0): the object key. The only form we send (omniORB needs it).
    Key(Bytes),
    /// ProfileAddr (1): a tagged profile (IIOP) holding the key.
    Profile(TaggedProfile),
    /// ReferenceAddr (2): a whole IOR and which of its profiles is meant.
    Reference {
        /// Index of the selected profile.
        selected_profile_index: u32,
        /// The reference.
        ior: ObjectRef,
    },
}

impl TargetAddress {
    /// The object key this address names, if it can be found (for Profile/Reference, the key
    /// of the IIOP profile).
    pub fn object_key(&self) -> Option<Bytes> {
        todo!()
    }
}

/// The fields of a Request header we send or receive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestHeader {
    /// Request id, unique among outstanding requests on the connection and direction.
    pub request_id: u32,
    /// 0x03 for two-way (SYNC_WITH_TARGET), 0x00 for oneway. From 1.0/1.1
    /// `response_expected`: true → 0x03, false → 0x00.
    pub response_flags: u8,
    /// The target object.
    pub target: TargetAddress,
    /// Operation name.
    pub operation: String,
    /// Service contexts.
    pub service_context: ServiceContextList,
}

impl RequestHeader {
    /// Whether the sender expects a reply (bit 0 of the response flags).
    pub fn response_expected(&self) -> bool {
        self.response_flags & 1 != 0
    }
}

/// A decoded Request: header and body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// The header fields.
    pub header: RequestHeader,
    /// The body (parameters), a zero-copy slice of the frame.
    pub body: Body,
}

/// Decodes a Request message (everything after the 12-byte GIOP header) for `version`.
/// `msg` is the whole message including header, so the body can be sliced without copying;
/// the reader starts at offset 12.
pub(crate) fn decode_request(version: Version, msg: &Bytes, r: &mut CdrReader<'_>) -> Result<Request, DecodeError> {
    let _ = (version, msg, r);
    todo!()
}

/// Writes a whole Request message (header, request header, padding, body) into `dst` in our
/// native byte order. `body` writes the parameters; it is called with a writer positioned at the
/// body start (8-aligned in 1.2). For 1.2, when `body` writes nothing, the padding before the
/// body is left out (WIRE-GIOP §2.2 sender rule). The size field is patched at the end.
pub fn write_request(
    dst: &mut BytesMut,
    version: Version,
    header: &RequestHeader,
    body: impl FnOnce(&mut CdrWriter<'_>),
) {
    let _ = (dst, version, header, body);
    todo!()
}
