//! Request messages: GIOP 1.2 `RequestHeader_1_2`, and the 1.0/1.1 header for decoding.
//!
//! Layouts (offsets from the GIOP header's first byte, the alignment origin):
//!
//! ```text
//! 1.2:     request_id, response_flags, reserved[3], TargetAddress, operation,
//!          ServiceContextList, pad to 8 only if a body follows, body
//! 1.0/1.1: ServiceContextList, request_id, boolean response_expected, (1.1: reserved[3]),
//!          sequence<octet> object_key, operation, sequence<octet> requesting_principal,
//!          body directly after (no 8-alignment)
//! ```
//!
//! Padding contents are never checked (omniORB sends garbage there, WIRE-GIOP §1.2).

use super::direct::{align, Direct};
use super::service_context::context_id;
use super::{begin_message, end_message, read_key_of, read_octets_of, read_string_of};
use super::{rest_as_body, Body, BodyAt, ByteString, MsgType, ObjectKey};
use super::{RequestContexts, ServiceContext, Version};
use crate::cdr::{ByteOrder, CdrReader, CdrWriter, DecodeError, DecodeErrorKind, DecodeResultExt};
use crate::ior::{IiopProfile, ObjectRef, TaggedProfile, TAG_INTERNET_IOP};
use bytes::{Bytes, BytesMut};

/// `AddressingDisposition` values: the TargetAddress union discriminator.
mod disposition {
    pub const KEY_ADDR: i16 = 0;
    pub const PROFILE_ADDR: i16 = 1;
    pub const REFERENCE_ADDR: i16 = 2;
}

/// `GIOP::TargetAddress`: how a request names its target object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TargetAddress {
    /// KeyAddr (0): the object key. The only form we send (omniORB needs it).
    Key(ObjectKey),
    /// ProfileAddr (1): a tagged profile (IIOP) holding the key.
    Profile(TaggedProfile),
    /// ReferenceAddr (2): a whole IOR and which of its profiles is meant.
    Reference {
        /// Index of the selected profile.
        selected_profile_index: u32,
        /// The reference (boxed: a rare form, kept out of every request's size).
        ior: Box<ObjectRef>,
    },
}

impl TargetAddress {
    /// The object key this address names, if it can be found (for Profile/Reference, the key
    /// of the IIOP profile).
    ///
    /// For ProfileAddr the profile must be an IIOP profile (tag 0) that parses; for
    /// ReferenceAddr the selected index must name such a profile of the IOR.
    pub fn object_key(&self) -> Option<ObjectKey> {
        fn iiop_key(p: &TaggedProfile) -> Option<ObjectKey> {
            if p.tag != TAG_INTERNET_IOP {
                return None;
            }
            IiopProfile::decode(&p.data)
                .ok()
                .map(|p| p.object_key.into())
        }
        match self {
            TargetAddress::Key(k) => Some(k.clone()),
            TargetAddress::Profile(p) => iiop_key(p),
            TargetAddress::Reference {
                selected_profile_index,
                ior,
            } => {
                let idx = usize::try_from(*selected_profile_index).ok()?;
                ior.profiles().get(idx).and_then(iiop_key)
            }
        }
    }

    /// Decodes the `GIOP::TargetAddress` union (GIOP 1.2). Key and profile data are zero-copy
    /// slices of `msg` when `r` reads `msg`.
    pub(crate) fn decode(msg: &Bytes, r: &mut CdrReader<'_>) -> Result<Self, DecodeError> {
        let at = r.position();
        let disc = r.read_i16().field("disposition")?;
        match disc {
            disposition::KEY_ADDR => {
                Ok(TargetAddress::Key(read_key_of(msg, r).field("object_key")?))
            }
            disposition::PROFILE_ADDR => {
                let tag = r.read_u32().field("tag").field("profile")?;
                let data = read_octets_of(msg, r)
                    .field("profile_data")
                    .field("profile")?;
                Ok(TargetAddress::Profile(TaggedProfile { tag, data }))
            }
            disposition::REFERENCE_ADDR => {
                let selected_profile_index = r.read_u32().field("selected_profile_index")?;
                let ior = Box::new(ObjectRef::decode(r).field("ior")?);
                Ok(TargetAddress::Reference {
                    selected_profile_index,
                    ior,
                })
            }
            other => Err(DecodeError::new(
                // Reinterpret the short's bits for the error report.
                DecodeErrorKind::BadEnum(u32::from(other as u16)),
                at,
            )
            .in_field("disposition")),
        }
    }

    /// Encodes the `GIOP::TargetAddress` union (GIOP 1.2).
    pub(crate) fn encode(&self, w: &mut CdrWriter<'_>) {
        match self {
            TargetAddress::Key(k) => {
                w.write_i16(disposition::KEY_ADDR);
                w.write_octets(k);
            }
            TargetAddress::Profile(p) => {
                w.write_i16(disposition::PROFILE_ADDR);
                w.write_u32(p.tag);
                w.write_octets(&p.data);
            }
            TargetAddress::Reference {
                selected_profile_index,
                ior,
            } => {
                w.write_i16(disposition::REFERENCE_ADDR);
                w.write_u32(*selected_profile_index);
                ior.encode(w);
            }
        }
    }

    /// The key to put in a GIOP 1.0/1.1 message, which has no TargetAddress: the key this
    /// address names, or an empty key if none can be found.
    pub(crate) fn key_for_old_versions(&self) -> ObjectKey {
        self.object_key().unwrap_or_default()
    }
}

/// The target of a request being written: an object key borrowed from the caller's
/// reference (what every call sends; an owned `TargetAddress::Key` would cost the key's
/// reference count a clone and a drop per call), or any address.
#[derive(Clone, Copy, Debug)]
pub(crate) enum HeadTarget<'a> {
    /// KeyAddr with this key.
    Key(&'a [u8]),
    /// Any address, as decoded or built.
    Address(&'a TargetAddress),
}

impl<'a> HeadTarget<'a> {
    /// The key, if this is a KeyAddr.
    fn key(self) -> Option<&'a [u8]> {
        match self {
            HeadTarget::Key(k) => Some(k),
            HeadTarget::Address(TargetAddress::Key(k)) => Some(k),
            HeadTarget::Address(_) => None,
        }
    }

    /// Encodes the `GIOP::TargetAddress` union (GIOP 1.2).
    fn encode(self, w: &mut CdrWriter<'_>) {
        match self {
            HeadTarget::Key(k) => {
                w.write_i16(disposition::KEY_ADDR);
                w.write_octets(k);
            }
            HeadTarget::Address(a) => a.encode(w),
        }
    }

    /// Writes the key of a GIOP 1.0/1.1 header (see
    /// [`TargetAddress::key_for_old_versions`]).
    fn encode_old_key(self, w: &mut CdrWriter<'_>) {
        match self {
            HeadTarget::Key(k) => w.write_octets(k),
            HeadTarget::Address(a) => w.write_octets(&a.key_for_old_versions()),
        }
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
    /// Operation name (decoded: a slice of the received frame).
    pub operation: ByteString,
    /// Service contexts (without the DEADLINE context held in `deadline`).
    pub service_context: RequestContexts,
    /// The first DEADLINE context's data, when it has the 24 bytes of the ORB's own form:
    /// copied out of the frame rather than sliced from it (a slice costs a reference count
    /// taken and dropped per request, and the list entry ~60 instructions more, callgrind).
    /// A DEADLINE of another length stays in `service_context`.
    pub deadline: Option<[u8; 24]>,
}

impl RequestHeader {
    /// A header that holds nothing (of any frame): what a spare request box keeps.
    fn stale() -> Self {
        RequestHeader {
            request_id: 0,
            response_flags: 0,
            target: TargetAddress::Key(ObjectKey::new()),
            operation: ByteString::new(),
            service_context: RequestContexts::default(),
            deadline: None,
        }
    }

    /// Whether the sender expects a reply (bit 0 of the response flags).
    pub fn response_expected(&self) -> bool {
        self.response_flags & 1 != 0
    }

    /// The data of the request's (first) DEADLINE context, wherever it is held.
    pub fn deadline_data(&self) -> Option<&[u8]> {
        match &self.deadline {
            Some(d) => Some(&d[..]),
            None => self
                .service_context
                .get(context_id::DEADLINE)
                .map(|d| &d[..]),
        }
    }

    /// Moves the first DEADLINE context of the list into `deadline` if it has the ORB's
    /// 24-byte form, as the direct decoding does (`Direct::contexts_at`).
    fn hold_deadline(&mut self) {
        let list = &mut self.service_context.0;
        let Some(i) = list.iter().position(|c| c.id == context_id::DEADLINE) else {
            return;
        };
        if let Ok(d) = <[u8; 24]>::try_from(&list[i].data[..]) {
            self.deadline = Some(d);
            list.remove(i);
        }
    }

    /// The header's fields, borrowed, as the writer takes them.
    pub(crate) fn head(&self) -> RequestHead<'_> {
        RequestHead {
            request_id: self.request_id,
            response_flags: self.response_flags,
            target: HeadTarget::Address(&self.target),
            operation: &self.operation[..],
            deadline: self.deadline.as_ref(),
            service_context: &self.service_context.0,
        }
    }
}

/// The fields of a Request header to send, borrowed: the send path of a call writes them
/// straight from the caller's operation name and its stack, without building an owned
/// [`RequestHeader`] first (an operation `String` and a context `Vec` per call).
#[derive(Clone, Copy, Debug)]
pub(crate) struct RequestHead<'a> {
    pub request_id: u32,
    pub response_flags: u8,
    pub target: HeadTarget<'a>,
    pub operation: &'a str,
    /// A DEADLINE context's data ([`CallChain::deadline_data`](super::CallChain::deadline_data)),
    /// written first among the contexts, straight into the frame.
    pub deadline: Option<&'a [u8; 24]>,
    pub service_context: &'a [ServiceContext],
}

impl RequestHead<'_> {
    fn response_expected(&self) -> bool {
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

std::thread_local! {
    /// This thread's spare allocation for a decoded request: the upcall that ran the last
    /// request read on this thread gives its box back ([`Request::into_body`]), and the next
    /// request read here is decoded into it ([`Request::spare`]). A thread that reads
    /// requests and runs them in turn (the leader of a `lat` server) then allocates nothing
    /// per request for it. It holds no bytes of any frame.
    static SPARE: std::cell::Cell<Option<Box<Request>>> = const { std::cell::Cell::new(None) };
}

impl Request {
    /// This thread's spare allocation if it has one, else a new one, for a request to be
    /// decoded into (its header and body hold nothing of any frame; they are stale values
    /// for the decoder to overwrite). Decoding into the box, field by field, spares the
    /// copies of a request built first and moved in (two `memcpy` calls of ~200 bytes,
    /// callgrind).
    pub(crate) fn spare() -> Box<Request> {
        SPARE.with(|s| s.take()).unwrap_or_else(|| {
            Box::new(Request {
                header: RequestHeader::stale(),
                body: Body::empty(ByteOrder::NATIVE),
            })
        })
    }

    /// The request, boxed in this thread's spare allocation if it has one, else in a new one.
    #[cfg(test)]
    pub(crate) fn boxed(header: RequestHeader, body: Body) -> Box<Request> {
        let mut request = Request::spare();
        request.header = header;
        request.body = body;
        request
    }

    /// The body (the servant's parameters). The box goes back as this thread's spare for the
    /// next request ([`spare`](Self::spare)), without what its header held of the frame.
    pub(crate) fn into_body(mut self: Box<Self>) -> Body {
        // Field by field, in place: replacing the whole request would copy it out first.
        let body = std::mem::replace(&mut self.body, Body::empty(ByteOrder::NATIVE));
        // Usually the upcall took the operation name, the key is held inline and no context
        // came: the header then holds nothing of the frame and is left to the next decode
        // to overwrite (its drop, ~40 instructions, runs there once instead of twice).
        let h = &self.header;
        let target_holds_frame = match &h.target {
            TargetAddress::Key(k) => k.holds_frame(),
            _ => true,
        };
        if target_holds_frame || !h.operation.is_empty() || !h.service_context.0.is_empty() {
            self.header = RequestHeader::stale();
        }
        SPARE.with(|s| s.set(Some(self)));
        body
    }
}

/// [`decode_request_parts`] with the body sliced out of `msg` (tests).
#[cfg(test)]
pub(crate) fn decode_request(
    version: Version,
    msg: &Bytes,
    r: &mut CdrReader<'_>,
) -> Result<Request, DecodeError> {
    let (header, body) = decode_request_parts(version, msg, r)?;
    Ok(Request {
        header,
        body: body.sliced(msg),
    })
}

/// [`decode_request_into`] into a header of its own (tests).
#[cfg(test)]
pub(crate) fn decode_request_parts(
    version: Version,
    msg: &Bytes,
    r: &mut CdrReader<'_>,
) -> Result<(RequestHeader, BodyAt), DecodeError> {
    let mut header = RequestHeader::stale();
    let body = decode_request_into(version, msg, r, &mut header)?;
    Ok((header, body))
}

/// Decodes a Request message (everything after the 12-byte GIOP header) for `version`:
/// its header, and where its body is, for a decoder that owns `msg` and lets the body take
/// it over ([`BodyAt::owned`]). `msg` is the whole message including header; the reader
/// starts at offset 12.
///
/// 1.0/1.1 `response_expected` maps to response flags 0x03 (true) or 0x00 (false); the
/// requesting principal is read and dropped. The body is everything after the header (1.2:
/// after the padding to 8, which is only skipped when bytes remain).
///
/// The header goes into `dst` (a spare box's, [`Request::spare`]), written only once the
/// request decoded: on an error it holds what it held.
pub(crate) fn decode_request_into(
    version: Version,
    msg: &Bytes,
    r: &mut CdrReader<'_>,
    dst: &mut RequestHeader,
) -> Result<BodyAt, DecodeError> {
    decode_request_inner(version, msg, r, dst).field("Request")
}

/// Decodes the common GIOP 1.2 Request (a KeyAddr target, well-formed) straight from the
/// frame's bytes ([`Direct`]), for a reader at the request header; `None` for anything else,
/// which the reader's way then decodes or reports.
fn decode_request_1_2_fast(
    msg: &Bytes,
    r: &mut CdrReader<'_>,
    dst: &mut RequestHeader,
) -> Option<BodyAt> {
    let d = Direct::at_header(msg, r)?;
    let request_id = d.u32_at(12)?;
    let response_flags = *msg.get(16)?;
    // Only KeyAddr (disposition 0, the same in both byte orders).
    if msg.get(20..22)? != [0, 0] {
        return None;
    }
    let key = d.octets_at(24)?;
    let op = d.octets_at(align(key.end, 4)?)?;
    // A string holds at least its NUL, which ends it.
    if msg.get(op.end.checked_sub(1)?) != Some(&0) || op.is_empty() {
        return None;
    }
    let name = op.start..op.end - 1;
    let operation = match super::op_name::kept(&msg[name.clone()]) {
        // A name seen before: no slice of the frame, no UTF-8 check.
        Some(kept) => ByteString::from_static(kept),
        None => ByteString::try_from(msg.slice(name)).ok()?,
    };
    let contexts = align(op.end, 4)?;
    let (service_context, deadline, at) = match d.sole_deadline_at(contexts) {
        // The ORB's own callers send this one context.
        Some((data, at)) => (RequestContexts::default(), Some(data), at),
        None => {
            // The first DEADLINE only (as `RequestHeader::hold_deadline`): it is the one that
            // counts; of another length, it stays in the list.
            let (mut deadline, mut seen) = (None, false);
            let (list, at) = d.contexts_at(contexts, |id, data| {
                if id != context_id::DEADLINE || std::mem::replace(&mut seen, true) {
                    return false;
                }
                deadline = <[u8; 24]>::try_from(data).ok();
                deadline.is_some()
            })?;
            (list, deadline, at)
        }
    };
    let body = d.body_at(at, r)?;
    let target = TargetAddress::Key(ObjectKey::of_frame(msg, key)?);
    *dst = RequestHeader {
        request_id,
        response_flags,
        target,
        operation,
        service_context,
        deadline,
    };
    Some(body)
}

fn decode_request_inner(
    version: Version,
    msg: &Bytes,
    r: &mut CdrReader<'_>,
    dst: &mut RequestHeader,
) -> Result<BodyAt, DecodeError> {
    if version.minor >= 2 {
        if let Some(body) = decode_request_1_2_fast(msg, r, dst) {
            return Ok(body);
        }
    }
    let request = decode_request_fields(version, msg, r)?;
    *dst = request.header;
    Ok(BodyAt::Made(request.body))
}

/// [`decode_request_inner`] field by field through the reader: any request, and the errors
/// with their field path.
fn decode_request_fields(
    version: Version,
    msg: &Bytes,
    r: &mut CdrReader<'_>,
) -> Result<Request, DecodeError> {
    let mut header = if version.minor >= 2 {
        let request_id = r.read_u32().field("request_id")?;
        let response_flags = r.read_octet().field("response_flags")?;
        r.skip(3).field("reserved")?;
        let target = TargetAddress::decode(msg, r).field("target")?;
        let operation = read_string_of(msg, r).field("operation")?;
        let service_context = RequestContexts::decode_in(msg, r)?;
        r.align_if_remaining(8).field("body")?;
        RequestHeader {
            request_id,
            response_flags,
            target,
            operation,
            service_context,
            deadline: None,
        }
    } else {
        let service_context = RequestContexts::decode_in(msg, r)?;
        let request_id = r.read_u32().field("request_id")?;
        let response_expected = r.read_bool().field("response_expected")?;
        if version.minor == 1 {
            r.skip(3).field("reserved")?;
        }
        let key = read_key_of(msg, r).field("object_key")?;
        let operation = read_string_of(msg, r).field("operation")?;
        r.read_octets().field("requesting_principal")?;
        RequestHeader {
            request_id,
            response_flags: if response_expected { 0x03 } else { 0x00 },
            target: TargetAddress::Key(key),
            operation,
            service_context,
            deadline: None,
        }
    };
    header.hold_deadline();
    let body = rest_as_body(msg, r);
    Ok(Request { header, body })
}

/// Writes a whole Request message (header, request header, padding, body) into `dst` in our
/// native byte order. `body` writes the parameters; it is called with a writer positioned at the
/// body start (8-aligned in 1.2). For 1.2, when `body` writes nothing, the padding before the
/// body is left out (WIRE-GIOP §2.2 sender rule). The size field is patched at the end.
///
/// The writer's alignment origin is the GIOP header's first byte, so a 1.0/1.1 body (which
/// follows the header directly) is aligned correctly too. In 1.0/1.1 the target is sent as an
/// object key ([`TargetAddress::object_key`], empty if it has none), `response_expected` is
/// bit 0 of the response flags, and the requesting principal is empty.
#[cfg(any(test, feature = "unstable-wire"))]
pub fn write_request(
    dst: &mut BytesMut,
    version: Version,
    header: &RequestHeader,
    body: impl FnOnce(&mut CdrWriter<'_>),
) {
    write_request_in(dst, version, ByteOrder::NATIVE, header, body);
}

/// `write_request` from borrowed fields, in our native byte order.
pub(crate) fn write_request_head(
    dst: &mut BytesMut,
    version: Version,
    head: &RequestHead<'_>,
    body: impl FnOnce(&mut CdrWriter<'_>),
) {
    write_head_in(dst, version, ByteOrder::NATIVE, head, body);
}

/// `write_request` in a chosen byte order (the codec re-encodes received frames in their
/// own order so that their body bytes stay valid; tests build big-endian messages).
pub(crate) fn write_request_in(
    dst: &mut BytesMut,
    version: Version,
    order: ByteOrder,
    header: &RequestHeader,
    body: impl FnOnce(&mut CdrWriter<'_>),
) {
    write_head_in(dst, version, order, &header.head(), body);
}

/// Most bytes [`fixed_head`] builds on the stack; a header with a longer key and operation
/// name goes field by field.
const FIXED_HEAD_MAX: usize = 192;

/// Builds in `b` a GIOP 1.2 Request header's bytes after the GIOP header, from the request
/// id through the service context list, when the target is a KeyAddr and the only context
/// is the DEADLINE (or none): what [`write_head_fields`] writes field by field, for one copy
/// into the frame (the send path of every call; field by field, each write was an alignment,
/// a capacity check and a copy: callgrind, PROFILE.md). Returns the length, or `None` for
/// any other header.
fn fixed_head(
    order: ByteOrder,
    head: &RequestHead<'_>,
    b: &mut [u8; FIXED_HEAD_MAX],
) -> Option<usize> {
    let key = head.target.key()?;
    let op = head.operation.as_bytes();
    // 4 request id, 4 flags, 4 disposition and padding, 4 key length, key, 3 padding, 4
    // operation length, operation, NUL, 3 padding, 4 context count, 32 DEADLINE.
    if !head.service_context.is_empty() || key.len() + op.len() + 64 > FIXED_HEAD_MAX {
        return None;
    }
    let u32_at = |b: &mut [u8; FIXED_HEAD_MAX], at: usize, v: u32| {
        b[at..at + 4].copy_from_slice(&order.u32_bytes(v));
    };
    // Index 0 is position HEADER_LEN (12) from the alignment origin: 4-aligned alike.
    u32_at(b, 0, head.request_id);
    b[4] = head.response_flags;
    b[5..8].fill(0);
    b[8..10].copy_from_slice(&match order {
        ByteOrder::Big => disposition::KEY_ADDR.to_be_bytes(),
        ByteOrder::Little => disposition::KEY_ADDR.to_le_bytes(),
    });
    b[10..12].fill(0);
    u32_at(b, 12, key.len() as u32);
    let mut i = 16 + key.len();
    b[16..i].copy_from_slice(key);
    // Padding: four zero bytes, of which the next field overwrites what is not padding (a
    // fixed-size store, where a fill of 0-3 bytes was a call to `memset`); the length check
    // above leaves room.
    let aligned = align(i, 4)?;
    b[i..i + 4].fill(0);
    i = aligned;
    u32_at(b, i, op.len() as u32 + 1);
    b[i + 4..i + 4 + op.len()].copy_from_slice(op);
    i += 4 + op.len();
    b[i] = 0;
    i += 1;
    let aligned = align(i, 4)?;
    b[i..i + 4].fill(0);
    i = aligned;
    match head.deadline {
        Some(data) => {
            u32_at(b, i, 1);
            u32_at(b, i + 4, super::service_context::context_id::DEADLINE);
            u32_at(b, i + 8, data.len() as u32);
            b[i + 12..i + 12 + data.len()].copy_from_slice(data);
            i += 12 + data.len();
        }
        None => {
            u32_at(b, i, 0);
            i += 4;
        }
    }
    Some(i)
}

/// Writes a GIOP 1.2 Request header from the request id through the service context list,
/// field by field (any header; see [`fixed_head`]).
fn write_head_fields(w: &mut CdrWriter<'_>, header: &RequestHead<'_>) {
    w.write_u32(header.request_id);
    // response_flags and 3 reserved octets.
    w.write_raw(&[header.response_flags, 0, 0, 0]);
    header.target.encode(w);
    w.write_string(header.operation);
    super::service_context::encode_contexts_after(header.deadline, header.service_context, w);
}

fn write_head_in(
    dst: &mut BytesMut,
    version: Version,
    order: ByteOrder,
    header: &RequestHead<'_>,
    body: impl FnOnce(&mut CdrWriter<'_>),
) {
    let start = begin_message(dst, version, order, MsgType::Request);
    if version.minor >= 2 {
        let mut fixed = [0u8; FIXED_HEAD_MAX];
        let fixed_len = fixed_head(order, header, &mut fixed);
        if let Some(n) = fixed_len {
            dst.extend_from_slice(&fixed[..n]);
        }
        let mut w = CdrWriter::with_origin(dst, order, start);
        if fixed_len.is_none() {
            write_head_fields(&mut w, header);
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
        let mut w = CdrWriter::with_origin(dst, order, start);
        super::service_context::encode_contexts_after(
            header.deadline,
            header.service_context,
            &mut w,
        );
        w.write_u32(header.request_id);
        w.write_bool(header.response_expected());
        if version.minor == 1 {
            w.write_raw(&[0; 3]);
        }
        header.target.encode_old_key(&mut w);
        w.write_string(header.operation);
        w.write_octets(&[]);
        body(&mut w);
    }
    end_message(dst, start, order);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::giop::{
        CallChain, Deadline, Header, ServiceContext, ServiceContextList, HEADER_LEN,
    };

    /// The header built at once on the stack is byte for byte what the field-by-field
    /// writer writes (padding included), for every key and operation length modulo 4,
    /// with and without a DEADLINE, in both byte orders; headers it does not cover (other
    /// contexts, other targets, a key too long) it leaves to that writer.
    #[test]
    fn the_fixed_head_is_what_the_fields_write() {
        let deadline = [0xA5u8; 24];
        let long_key = vec![7u8; FIXED_HEAD_MAX];
        for order in [ByteOrder::Little, ByteOrder::Big] {
            for key_len in 0..9 {
                for op_len in 0..9 {
                    for dl in [None, Some(&deadline)] {
                        let key =
                            Bytes::from((0..key_len as u8).map(|b| b + 1).collect::<Vec<_>>());
                        let op: String = "abcdefghi"[..op_len].into();
                        let target = TargetAddress::Key(key.into());
                        let head = RequestHead {
                            request_id: 0x0102_0304,
                            response_flags: 3,
                            target: HeadTarget::Address(&target),
                            operation: &op,
                            deadline: dl,
                            service_context: &[],
                        };
                        let mut slow = BytesMut::from(&[0u8; HEADER_LEN][..]);
                        write_head_fields(&mut CdrWriter::with_origin(&mut slow, order, 0), &head);
                        let mut b = [0xFFu8; FIXED_HEAD_MAX];
                        let n = fixed_head(order, &head, &mut b).expect("a KeyAddr header");
                        assert_eq!(
                            &b[..n],
                            &slow[HEADER_LEN..],
                            "{order:?}, key {key_len}, operation {op_len}, deadline {}",
                            dl.is_some()
                        );
                    }
                }
            }
        }
        let key_target = TargetAddress::Key(Bytes::from(long_key).into());
        let contexts = [ServiceContext {
            id: 1,
            data: Bytes::from_static(b"x"),
        }];
        let profile_target = TargetAddress::Profile(TaggedProfile {
            tag: 1,
            data: Bytes::new(),
        });
        let short = TargetAddress::Key(Bytes::from_static(b"k").into());
        for (target, contexts) in [
            (&key_target, &[][..]),
            (&short, &contexts[..]),
            (&profile_target, &[][..]),
        ] {
            let head = RequestHead {
                request_id: 1,
                response_flags: 3,
                target: HeadTarget::Address(target),
                operation: "op",
                deadline: None,
                service_context: contexts,
            };
            assert_eq!(
                fixed_head(ByteOrder::Little, &head, &mut [0; FIXED_HEAD_MAX]),
                None
            );
        }
    }

    /// Decodes `buf` (a whole message) as a Request.
    fn decode(buf: &[u8]) -> Result<Request, DecodeError> {
        let msg = Bytes::copy_from_slice(buf);
        let h = Header::decode(&msg).expect("header");
        assert_eq!(h.msg_type, MsgType::Request);
        assert_eq!(h.size as usize, msg.len() - HEADER_LEN, "size field");
        let mut r = CdrReader::new(&msg, h.order);
        r.skip(HEADER_LEN).unwrap();
        decode_request(h.version, &msg, &mut r)
    }

    /// The direct decoding of the common GIOP 1.2 request agrees with the reader's, field for
    /// field and in what it consumes, wherever it answers: on well-formed requests (where it
    /// must answer for a KeyAddr target), every truncation of them, and every single-byte
    /// change of their header to 0, 1, 0x80 or 0xFF. Where it does not answer, the reader's
    /// way decodes or reports the error as before.
    #[test]
    fn the_direct_request_decoding_agrees_with_the_readers() {
        let mut messages = Vec::new();
        for order in [ByteOrder::Little, ByteOrder::Big] {
            for key_len in [0usize, 1, 3, 4, 5, 8] {
                for op in ["", "a", "op", "echo", "a_longer_name"] {
                    // Also DEADLINE contexts, which the decoding holds apart when they have
                    // the ORB's 24-byte form (`RequestHeader::deadline`): one of 24 bytes,
                    // one of another length before one of 24, and two of 24.
                    for contexts in 0..6u32 {
                        for body in [&b""[..], &b"x"[..], &[7u8; 13][..]] {
                            let mut h =
                                header(TargetAddress::Key(Bytes::from(vec![9u8; key_len]).into()));
                            h.request_id = 0x0A0B_0C0D;
                            h.operation = op.into();
                            let deadline = |n: usize, v: u8| ServiceContext {
                                id: context_id::DEADLINE,
                                data: Bytes::from(vec![v; n]),
                            };
                            h.service_context = ServiceContextList(match contexts {
                                3 => smallvec::smallvec![deadline(24, 1)],
                                4 => smallvec::smallvec![deadline(16, 2), deadline(24, 3)],
                                5 => smallvec::smallvec![deadline(24, 4), deadline(24, 5)],
                                _ => (0..contexts)
                                    .map(|i| ServiceContext {
                                        id: 100 + i,
                                        data: Bytes::from(vec![i as u8; 3 + i as usize * 5]),
                                    })
                                    .collect(),
                            });
                            let mut buf = BytesMut::new();
                            write_request_in(&mut buf, Version::V1_2, order, &h, |w| {
                                w.write_raw(body)
                            });
                            messages.push((buf.freeze(), order, true));
                        }
                    }
                }
            }
            let mut buf = BytesMut::new();
            let profile = TargetAddress::Profile(TaggedProfile {
                tag: 0,
                data: Bytes::from_static(b"abc"),
            });
            write_request_in(&mut buf, Version::V1_2, order, &header(profile), |_| {});
            messages.push((buf.freeze(), order, false));
        }
        let agree = |msg: &Bytes, order: ByteOrder| -> bool {
            let mut slow_r = CdrReader::new(msg, order);
            let mut fast_r = CdrReader::new(msg, order);
            if slow_r.skip(HEADER_LEN).is_err() || fast_r.skip(HEADER_LEN).is_err() {
                return false;
            }
            let slow = decode_request_fields(Version::V1_2, msg, &mut slow_r);
            let mut header = RequestHeader::stale();
            let fast = decode_request_1_2_fast(msg, &mut fast_r, &mut header).map(|body| Request {
                header,
                body: body.sliced(msg),
            });
            let Some(fast) = fast else {
                assert_eq!(
                    fast_r.position(),
                    HEADER_LEN,
                    "a declined decoding consumed input"
                );
                return false;
            };
            assert_eq!(slow.as_ref().ok(), Some(&fast), "{msg:?}");
            assert_eq!(slow_r.position(), fast_r.position(), "{msg:?}");
            true
        };
        let mut answered = 0;
        for (msg, order, key) in &messages {
            assert_eq!(
                agree(msg, *order),
                *key,
                "common request not decoded directly: {msg:?}"
            );
            for cut in HEADER_LEN..msg.len() {
                answered += usize::from(agree(&msg.slice(..cut), *order));
            }
            for at in HEADER_LEN..msg.len().min(96) {
                for v in [0u8, 1, 0x80, 0xFF] {
                    let mut m = msg.to_vec();
                    m[at] = v;
                    answered += usize::from(agree(&Bytes::from(m), *order));
                }
            }
        }
        // Truncations and changes it answers for too (the padding, a body byte): the test
        // compares something beyond the unchanged messages.
        assert!(answered > 1000, "{answered}");
    }

    /// A DEADLINE context of the ORB's 24-byte form is held apart from the list, by the
    /// direct decoding (GIOP 1.2) and the reader's (1.0, 1.1) alike; the first DEADLINE is
    /// the one that counts, and one of another length stays in the list. Sent again, the
    /// header carries it as it came.
    #[test]
    fn a_deadline_context_is_held_apart_from_the_list() {
        let ours = CallChain(7).deadline_data(Deadline(std::time::Duration::from_micros(1500)));
        let other = ServiceContext {
            id: 100,
            data: Bytes::from_static(&[1, 2, 3]),
        };
        let dl = |data: &[u8]| ServiceContext {
            id: context_id::DEADLINE,
            data: Bytes::copy_from_slice(data),
        };
        for version in [Version::V1_0, Version::V1_1, Version::V1_2] {
            for order in [ByteOrder::Little, ByteOrder::Big] {
                let decoded = |list: Vec<ServiceContext>| {
                    let mut h = header(TargetAddress::Key(Bytes::from_static(b"key").into()));
                    h.service_context = ServiceContextList(list.into_iter().collect());
                    let mut buf = BytesMut::new();
                    write_request_in(&mut buf, version, order, &h, octets_body);
                    let req = decode(&buf).unwrap();
                    // Written again from the decoded header: the same bytes.
                    let mut again = BytesMut::new();
                    write_request_in(&mut again, version, order, &req.header, octets_body);
                    assert_eq!(again, buf, "{version} {order:?}");
                    req.header
                };
                // (Ours first, as the ORB writes it: written again, the held deadline goes
                // first.)
                let h = decoded(vec![dl(&ours), other.clone()]);
                assert_eq!(h.deadline, Some(ours), "{version} {order:?}");
                assert_eq!(h.service_context.0.as_slice(), std::slice::from_ref(&other));
                assert_eq!(h.deadline_data(), Some(&ours[..]));
                let (d, chain) = Deadline::with_chain_from(h.deadline_data().unwrap()).unwrap();
                assert_eq!((d.0.as_micros(), chain), (1500, Some(CallChain(7))));

                let short = dl(&ours[..16]);
                let h = decoded(vec![short.clone(), dl(&ours)]);
                assert_eq!(h.deadline, None, "the first DEADLINE counts");
                assert_eq!(h.deadline_data(), Some(&ours[..16]));
                assert_eq!(h.service_context.0.len(), 2);

                let h = decoded(vec![]);
                assert_eq!((h.deadline, h.deadline_data()), (None, None));
            }
        }
    }

    fn header(target: TargetAddress) -> RequestHeader {
        RequestHeader {
            deadline: None,
            request_id: 7,
            response_flags: 0x03,
            target,
            operation: "call".into(),
            service_context: ServiceContextList(smallvec::smallvec![ServiceContext {
                id: 1,
                data: Bytes::from_static(&[1, 0, 0, 0, 1, 0, 1, 0, 9, 1, 1, 0]),
            }]),
        }
    }

    fn octets_body(w: &mut CdrWriter<'_>) {
        w.write_octets(b"hello");
    }

    #[test]
    fn round_trip_every_version_and_order() {
        for version in [Version::V1_0, Version::V1_1, Version::V1_2] {
            for order in [ByteOrder::Little, ByteOrder::Big] {
                let h = header(TargetAddress::Key(Bytes::from_static(b"key").into()));
                let mut buf = BytesMut::new();
                write_request_in(&mut buf, version, order, &h, octets_body);
                let req = decode(&buf).unwrap();
                assert_eq!(req.header, h, "{version} {order:?}");
                assert_eq!(req.body.order, order);
                assert_eq!(&req.body.octets().unwrap()[..], b"hello");
                assert_eq!(
                    &buf[req.body.offset..],
                    &req.body.bytes[..],
                    "body offset is from the message start"
                );
                if version == Version::V1_2 {
                    assert_eq!(req.body.offset % 8, 0);
                }
            }
        }
    }

    #[test]
    fn old_versions_put_the_body_directly_after_the_header() {
        for version in [Version::V1_0, Version::V1_1] {
            let mut h = header(TargetAddress::Key(Bytes::from_static(b"k").into()));
            h.service_context = ServiceContextList::default();
            h.operation = "op".into();
            let mut buf = BytesMut::new();
            write_request_in(&mut buf, version, ByteOrder::Little, &h, |w| {
                w.write_octet(0xaa);
            });
            // ctx count @12, id @16, bool @20 + 3, key len @24, "k" @28 + 3 pad,
            // op len @32, "op\0" @36 + 1 pad, principal len @40, body @44.
            assert_eq!(buf.len(), 45);
            assert_eq!(&buf[40..44], &[0, 0, 0, 0], "empty principal");
            let req = decode(&buf).unwrap();
            assert_eq!(req.body.offset, 44);
            assert_eq!(&req.body.bytes[..], &[0xaa]);
        }
        // The same with a 1-byte key shifted so the body is not 8-aligned: it still follows
        // the principal directly, with only natural alignment.
        let mut h = header(TargetAddress::Key(Bytes::from_static(b"kk").into()));
        h.service_context = ServiceContextList::default();
        h.operation = "o".into();
        let mut buf = BytesMut::new();
        write_request_in(&mut buf, Version::V1_0, ByteOrder::Big, &h, |w| {
            w.write_u16(9)
        });
        let req = decode(&buf).unwrap();
        // key len @24, "kk" 28..30, pad, op len @32, "o\0" 36..38, pad, principal @40, body @44.
        assert_eq!(req.body.offset, 44);
        assert_eq!(req.body.reader().read_u16().unwrap(), 9);
    }

    #[test]
    fn response_expected_maps_to_flags() {
        for version in [Version::V1_0, Version::V1_1] {
            for (flags, expect) in [(0x03, 0x03), (0x01, 0x03), (0x00, 0x00)] {
                let mut h = header(TargetAddress::Key(Bytes::from_static(b"k").into()));
                h.response_flags = flags;
                let mut buf = BytesMut::new();
                write_request(&mut buf, version, &h, |_| {});
                let req = decode(&buf).unwrap();
                assert_eq!(req.header.response_flags, expect);
                assert_eq!(req.header.response_expected(), expect != 0);
            }
        }
    }

    #[test]
    fn empty_body_in_1_2_has_no_padding() {
        let mut h = header(TargetAddress::Key(
            Bytes::from_static(b"NameService").into(),
        ));
        h.service_context = ServiceContextList::default();
        h.operation = "_non_existent".into();
        let mut buf = BytesMut::new();
        write_request(&mut buf, Version::V1_2, &h, |_| {});
        // WIRE-GIOP §3: the message ends with the context count at offset 60..64.
        assert_eq!(buf.len(), 64);
        h.operation = "_is_a_".into();
        let mut buf = BytesMut::new();
        write_request(&mut buf, Version::V1_2, &h, |_| {});
        // op "_is_a_\0" ends at 51, count at 52..56: not 8-aligned, and no padding added.
        assert_eq!(buf.len(), 56);
        let req = decode(&buf).unwrap();
        assert!(req.body.bytes.is_empty());
        // A receiver also accepts the padded form.
        let mut padded = buf.clone();
        padded.extend_from_slice(&[0xee; 8]);
        Header::patch_size(&mut padded, 0, ByteOrder::NATIVE, 52);
        let req = decode(&padded).unwrap();
        assert_eq!(req.body.offset, 56);
        assert_eq!(req.body.bytes.len(), 8);
    }

    #[test]
    fn body_writer_origin_is_the_header() {
        let h = header(TargetAddress::Key(Bytes::from_static(b"abc").into()));
        let mut buf = BytesMut::from(&b"junk"[..]);
        write_request(&mut buf, Version::V1_2, &h, |w| {
            assert_eq!(w.position() % 8, 0);
            w.write_u64(1);
        });
        let req = decode(&buf[4..]).unwrap();
        assert_eq!(req.body.reader().read_u64().unwrap(), 1);
    }

    #[test]
    fn big_endian_request_built_by_hand() {
        // GIOP 1.2 BE, id 0x01020304, KeyAddr "ab", op "x", one context, body ulong.
        let mut buf = BytesMut::new();
        let start = begin_message(&mut buf, Version::V1_2, ByteOrder::Big, MsgType::Request);
        let mut w = CdrWriter::with_origin(&mut buf, ByteOrder::Big, start);
        w.write_u32(0x0102_0304);
        w.write_octet(0x00);
        w.write_raw(&[0xde, 0xad, 0xbe]); // reserved: garbage is fine
        w.write_i16(0);
        w.write_raw(&[0x05, 0x00]); // garbage padding, as omniORB sends
        w.write_octets(b"ab");
        w.write_string("x");
        w.write_u32(1);
        w.write_u32(0x5242_0001);
        w.write_octets(&[0, 1, 2]);
        w.write_raw(&[0x6e]); // padding to 8 with garbage (position 55 → 56)
        w.write_u32(0xcafe_babe);
        end_message(&mut buf, start, ByteOrder::Big);
        let req = decode(&buf).unwrap();
        assert_eq!(req.header.request_id, 0x0102_0304);
        assert_eq!(req.header.response_flags, 0);
        assert!(!req.header.response_expected());
        assert_eq!(
            req.header.target,
            TargetAddress::Key(Bytes::from_static(b"ab").into())
        );
        assert_eq!(req.header.operation, "x");
        assert_eq!(req.header.service_context.0.len(), 1);
        assert_eq!(
            &req.header.service_context.get(0x5242_0001).unwrap()[..],
            &[0, 1, 2]
        );
        assert_eq!(req.body.offset, 56);
        assert_eq!(req.body.order, ByteOrder::Big);
        assert_eq!(req.body.reader().read_u32().unwrap(), 0xcafe_babe);
    }

    #[test]
    fn profile_and_reference_addresses() {
        let objref = ObjectRef::new("IDL:demo/Echo:1.0", "127.0.0.1", 2809, &b"the-key"[..]);
        let profile = objref.profiles()[0].clone();
        for target in [
            TargetAddress::Profile(profile.clone()),
            TargetAddress::Reference {
                selected_profile_index: 0,
                ior: Box::new(objref.clone()),
            },
        ] {
            assert_eq!(target.object_key().as_deref(), Some(&b"the-key"[..]));
            for order in [ByteOrder::Little, ByteOrder::Big] {
                let h = header(target.clone());
                let mut buf = BytesMut::new();
                write_request_in(&mut buf, Version::V1_2, order, &h, octets_body);
                let req = decode(&buf).unwrap();
                assert_eq!(req.header, h);
                assert_eq!(
                    req.header.target.object_key().as_deref(),
                    Some(&b"the-key"[..])
                );
                assert_eq!(&req.body.octets().unwrap()[..], b"hello");
            }
            // 1.0/1.1 have no TargetAddress: the key is sent.
            let mut buf = BytesMut::new();
            write_request(&mut buf, Version::V1_1, &header(target.clone()), |_| {});
            let req = decode(&buf).unwrap();
            assert_eq!(
                req.header.target,
                TargetAddress::Key(Bytes::from_static(b"the-key").into())
            );
        }
        // No key to be found: a non-IIOP profile, an index out of range.
        let other = TargetAddress::Profile(TaggedProfile {
            tag: 1,
            data: Bytes::from_static(&[1, 0, 0, 0]),
        });
        assert_eq!(other.object_key(), None);
        let bad_index = TargetAddress::Reference {
            selected_profile_index: 5,
            ior: Box::new(objref),
        };
        assert_eq!(bad_index.object_key(), None);
    }

    /// A long key is a zero-copy slice of the frame, a short one (up to 22 bytes) a copy held
    /// inline, in every version and by both decodings (1.2 direct, the reader's for 1.0/1.1);
    /// the body is always a slice, and so is the operation name, but where the direct
    /// decoding holds it as a kept static string (`op_name.rs`; unless the process's kept
    /// names are full).
    #[test]
    fn long_keys_are_zero_copy_slices_and_short_ones_copies() {
        for (key, op) in [
            (&b"zero-copy"[..], "op"),
            (&b"a-key-of-more-than-22-bytes"[..], "op"),
        ] {
            for version in [Version::V1_0, Version::V1_1, Version::V1_2] {
                let mut h = header(TargetAddress::Key(key.into()));
                h.operation = op.into();
                let mut buf = BytesMut::new();
                write_request(&mut buf, version, &h, octets_body);
                let msg = buf.freeze();
                let mut r = CdrReader::new(&msg, ByteOrder::NATIVE);
                r.skip(HEADER_LEN).unwrap();
                let req = decode_request(version, &msg, &mut r).unwrap();
                let TargetAddress::Key(k) = &req.header.target else {
                    panic!("not a key")
                };
                assert_eq!((&k[..], &req.header.operation[..]), (key, op));
                let range = msg.as_ptr_range();
                let long = key.len() > 22;
                assert_eq!(range.contains(&k.as_ptr()), long, "{version:?} key");
                let name = req.header.operation.as_ptr();
                // Kept once means kept for good: asking again says whether it was.
                let kept = version == Version::V1_2
                    && super::super::op_name::kept(op.as_bytes()).is_some();
                assert_eq!(range.contains(&name), !kept, "{version:?} operation");
                assert!(range.contains(&req.body.bytes.as_ptr()));
            }
        }
    }

    #[test]
    fn malformed_requests_are_errors() {
        let h = header(TargetAddress::Key(Bytes::from_static(b"key").into()));
        let mut buf = BytesMut::new();
        write_request(&mut buf, Version::V1_2, &h, octets_body);
        // Unknown disposition.
        let mut bad = buf.clone();
        bad[20] = 3;
        let e = decode(&bad).unwrap_err();
        assert_eq!(e.kind(), &DecodeErrorKind::BadEnum(3));
        assert_eq!(e.path(), &["Request", "target", "disposition"]);
        // Every truncation of the header is an error, never a panic.
        let body_at = decode(&buf).unwrap().body.offset;
        for cut in HEADER_LEN..body_at - 7 {
            let mut t = BytesMut::from(&buf[..cut]);
            Header::patch_size(&mut t, 0, ByteOrder::NATIVE, (cut - HEADER_LEN) as u32);
            assert!(decode(&t).is_err(), "cut at {cut}");
        }
        // A 1.0 response_expected that is not a boolean.
        let mut buf = BytesMut::new();
        write_request(&mut buf, Version::V1_0, &h, |_| {});
        let at = 12 + 4 + 12 + 8 + 4; // ctx count + one context (8 + 12 data) + id
        assert_eq!(buf[at], 1);
        buf[at] = 2;
        assert_eq!(
            decode(&buf).unwrap_err().kind(),
            &DecodeErrorKind::BadBoolean(2)
        );
    }

    /// A request decoded on a thread whose last request was recycled goes into the same
    /// allocation (no allocation per request), holds its own fields, and the recycled one
    /// keeps no reference to the frame it came from.
    #[test]
    fn a_recycled_request_box_takes_the_next_request_on_its_thread() {
        // A key too long to be held inline: a slice of the frame.
        let frame = Bytes::from(b"a-key-of-more-than-22-bytes/callparams".to_vec());
        let first = Request::boxed(
            header(TargetAddress::Key(frame.slice(0..27).into())),
            Body {
                bytes: frame.slice(32..),
                offset: 24,
                order: ByteOrder::Big,
            },
        );
        let at = &*first as *const Request;
        assert_eq!(&first.into_body().bytes[..], b"params");
        assert!(
            frame.is_unique(),
            "the spare still holds slices of the frame"
        );
        // Nor does it keep a name or a context sliced from the frame, with a short key.
        for (name, contexts) in [(true, false), (false, true)] {
            let mut h = header(TargetAddress::Key(frame.slice(0..5).into()));
            h.operation = match name {
                true => ByteString::try_from(frame.slice(28..32)).expect("UTF-8"),
                false => ByteString::new(),
            };
            match contexts {
                true => h.service_context.0[0].data = frame.slice(32..),
                false => h.service_context.0.clear(),
            }
            assert!(!frame.is_unique());
            let r = Request::boxed(h, Body::empty(ByteOrder::Big));
            assert_eq!(&*r as *const Request, at);
            r.into_body();
            assert!(frame.is_unique(), "kept: name {name}, contexts {contexts}");
        }
        let mut h = header(TargetAddress::Key(Bytes::from_static(b"other").into()));
        h.request_id = 8;
        let second = Request::boxed(h.clone(), Body::empty(ByteOrder::Little));
        assert_eq!(&*second as *const Request, at);
        assert_eq!(second.header, h);
        assert_eq!(second.body, Body::empty(ByteOrder::Little));
        // The spare is taken: another request on this thread gets an allocation of its own.
        let third = Request::boxed(h, Body::empty(ByteOrder::Little));
        assert_ne!(&*third as *const Request, at);
    }
}
