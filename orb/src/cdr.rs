//! CDR (Common Data Representation) encoding and decoding.
//!
//! CDR is the byte layout GIOP uses for message headers, system-exception bodies and object
//! references, and the encoding of the parameters and results of plain CORBA (IDL)
//! operations: [`ObjectProxy::invoke_cdr`](crate::ObjectProxy::invoke_cdr) hands a
//! [`CdrWriter`] to the caller for the parameters and returns a [`CdrReply`] whose
//! [`CdrBody::reader`] reads the results or the members of a user exception.
//!
//! This module is sans-I/O: a [`CdrWriter`] appends to a `BytesMut`, a [`CdrReader`]
//! walks a byte slice. Both carry an explicit *alignment origin*: primitives are aligned to their
//! size relative to that origin (the first byte of the GIOP header for message data, the
//! byte-order octet for an encapsulation), never relative to the buffer's start.
//!
//! Padding octets have undefined contents on the wire (omniORB sends garbage there), so the reader
//! skips them without looking; the writer always writes zeros.
//!
//! The reader never allocates on the strength of a length it read: every length is checked
//! against the bytes that are actually left before anything is copied.
//!
//! How a GIOP message positions a stream (a writer or reader that starts at a given offset
//! from the alignment origin, a protobuf message written in place) is public only with the
//! `unstable-wire` feature.

use bytes::{BufMut, Bytes, BytesMut};
use std::fmt;

/// Byte order of a CDR stream: bit 0 of the GIOP flags octet, the first octet of an encapsulation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ByteOrder {
    /// Big-endian (flag 0).
    Big,
    /// Little-endian (flag 1).
    Little,
}

impl ByteOrder {
    /// The order of this machine; we always send in it, as omniORB does.
    #[cfg(target_endian = "little")]
    pub const NATIVE: ByteOrder = ByteOrder::Little;
    /// The order of this machine; we always send in it, as omniORB does.
    #[cfg(target_endian = "big")]
    pub const NATIVE: ByteOrder = ByteOrder::Big;

    /// From the byte-order flag (bit 0 set = little-endian).
    pub fn from_flag(little: bool) -> Self {
        if little {
            ByteOrder::Little
        } else {
            ByteOrder::Big
        }
    }

    /// The flag bit for this order (1 = little-endian).
    pub fn flag(self) -> u8 {
        match self {
            ByteOrder::Big => 0,
            ByteOrder::Little => 1,
        }
    }
}

/// Why decoding failed. Always surfaces to a caller as MARSHAL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeErrorKind {
    /// The data ended before the value did.
    UnexpectedEof {
        /// Bytes the value needed.
        needed: usize,
        /// Bytes that were left.
        remaining: usize,
    },
    /// A CDR string had length 0 (must count its NUL) or did not end with a NUL.
    BadString,
    /// A string was not valid UTF-8 (we keep operation names, ids and hosts as `String`).
    NotUtf8,
    /// A boolean octet other than 0 or 1.
    BadBoolean(u8),
    /// A length or count that cannot fit in what is left of the data.
    BadLength(u64),
    /// An encapsulation with no byte-order octet.
    EmptyEncapsulation,
    /// A value outside its enumeration.
    BadEnum(u32),
    /// Anything else, described.
    Invalid(&'static str),
}

/// A CDR decoding failure: what went wrong, where (byte offset from the alignment origin of the
/// stream being read) and in which field, as a path from outer to inner (`Request.operation`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeError {
    kind: DecodeErrorKind,
    offset: usize,
    path: Vec<&'static str>,
}

impl DecodeError {
    /// A new error at `offset`.
    pub fn new(kind: DecodeErrorKind, offset: usize) -> Self {
        DecodeError {
            kind,
            offset,
            path: Vec::new(),
        }
    }

    /// Records that the error happened inside `field` (call from inner to outer).
    #[must_use]
    pub fn in_field(mut self, field: &'static str) -> Self {
        self.path.insert(0, field);
        self
    }

    /// What went wrong.
    pub fn kind(&self) -> &DecodeErrorKind {
        &self.kind
    }

    /// Byte offset of the failure, relative to the stream's alignment origin.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// The field path, outermost first.
    pub fn path(&self) -> &[&'static str] {
        &self.path
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            DecodeErrorKind::UnexpectedEof { needed, remaining } => {
                write!(f, "data ended: needed {needed} bytes, {remaining} left")?
            }
            DecodeErrorKind::BadString => f.write_str("malformed string")?,
            DecodeErrorKind::NotUtf8 => f.write_str("string is not UTF-8")?,
            DecodeErrorKind::BadBoolean(b) => write!(f, "invalid boolean octet {b}")?,
            DecodeErrorKind::BadLength(n) => write!(f, "length {n} exceeds the data")?,
            DecodeErrorKind::EmptyEncapsulation => f.write_str("empty encapsulation")?,
            DecodeErrorKind::BadEnum(v) => write!(f, "enum value {v} out of range")?,
            DecodeErrorKind::Invalid(what) => f.write_str(what)?,
        }
        write!(f, " at offset {}", self.offset)?;
        if !self.path.is_empty() {
            write!(f, " in {}", self.path.join("."))?;
        }
        Ok(())
    }
}

impl std::error::Error for DecodeError {}

/// Adds a field name to the error of a decoding result.
pub trait DecodeResultExt<T> {
    /// Records that the failure happened in `field`.
    fn field(self, field: &'static str) -> Result<T, DecodeError>;
}

impl<T> DecodeResultExt<T> for Result<T, DecodeError> {
    fn field(self, field: &'static str) -> Result<T, DecodeError> {
        self.map_err(|e| e.in_field(field))
    }
}

/// Appends CDR data to a `BytesMut`.
///
/// The alignment origin is the buffer length at creation (or an explicit logical offset), so a
/// writer can continue a GIOP message whose header is already in the buffer.
#[derive(Debug)]
pub struct CdrWriter<'a> {
    buf: &'a mut BytesMut,
    /// Index in `buf` of the byte at logical position `base`.
    start: usize,
    /// Logical position of `buf[start]` relative to the alignment origin.
    base: usize,
    order: ByteOrder,
}

macro_rules! put_prim {
    ($name:ident, $ty:ty, $size:expr) => {
        #[doc = concat!("Writes a `", stringify!($ty), "`, aligned to its size.")]
        pub fn $name(&mut self, v: $ty) {
            // Padding and value in one append: a request's header is mostly such small
            // writes, and each append costs a capacity check and a `memcpy` call.
            let pad = ($size - self.position() % $size) % $size;
            let bytes = match self.order {
                ByteOrder::Big => v.to_be_bytes(),
                ByteOrder::Little => v.to_le_bytes(),
            };
            let mut out = [0u8; 2 * $size];
            out[pad..pad + $size].copy_from_slice(&bytes);
            // Append the whole fixed-size array, then cut the unused tail: a copy whose
            // length is a constant compiles to a store or two, where the variable-length
            // `put_slice(&out[..pad + size])` was a call to `memcpy` (callgrind).
            let end = self.buf.len() + pad + $size;
            self.buf.extend_from_slice(&out);
            self.buf.truncate(end);
        }
    };
}

impl<'a> CdrWriter<'a> {
    /// A writer whose alignment origin is the current end of `buf`.
    pub fn new(buf: &'a mut BytesMut, order: ByteOrder) -> Self {
        let start = buf.len();
        CdrWriter {
            buf,
            start,
            base: 0,
            order,
        }
    }

    wire_pub! {
        /// A writer whose next byte sits at logical position `offset` from the alignment origin
        /// (a GIOP 1.0 body that follows its header directly).
        #[cfg(any(test, feature = "unstable-wire"))]
        fn with_offset(buf: &'a mut BytesMut, order: ByteOrder, offset: usize) -> Self {
            let start = buf.len();
            CdrWriter {
                buf,
                start,
                base: offset,
                order,
            }
        }
    }

    wire_pub! {
        /// A writer whose alignment origin is `origin`, an index into `buf` at or before its end
        /// (the `G` of a GIOP header written earlier into the same buffer).
        fn with_origin(buf: &'a mut BytesMut, order: ByteOrder, origin: usize) -> Self {
            debug_assert!(origin <= buf.len());
            CdrWriter {
                buf,
                start: origin,
                base: 0,
                order,
            }
        }
    }

    /// The byte order being written.
    pub fn order(&self) -> ByteOrder {
        self.order
    }

    /// Logical position of the next byte, relative to the alignment origin.
    pub fn position(&self) -> usize {
        self.base + (self.buf.len() - self.start)
    }

    wire_pub! {
        /// Index in the underlying buffer of the next byte.
        fn buffer_index(&self) -> usize {
            self.buf.len()
        }
    }

    /// Pads with zeros to a multiple of `n` (1, 2, 4 or 8).
    pub fn align(&mut self, n: usize) {
        let pad = (n - self.position() % n) % n;
        if pad > 0 {
            self.buf.put_bytes(0, pad);
        }
    }

    /// Writes one octet.
    pub fn write_octet(&mut self, v: u8) {
        self.buf.put_u8(v);
    }

    /// Writes a boolean (0 or 1).
    pub fn write_bool(&mut self, v: bool) {
        self.buf.put_u8(v as u8);
    }

    put_prim!(write_u16, u16, 2);
    put_prim!(write_i16, i16, 2);
    put_prim!(write_u32, u32, 4);
    put_prim!(write_i32, i32, 4);
    put_prim!(write_u64, u64, 8);
    put_prim!(write_i64, i64, 8);
    put_prim!(write_f32, f32, 4);
    put_prim!(write_f64, f64, 8);

    /// Writes raw bytes with no length and no alignment.
    pub fn write_raw(&mut self, bytes: &[u8]) {
        self.buf.put_slice(bytes);
    }

    /// Writes a `sequence<octet>`: an aligned ulong count, then the bytes.
    ///
    /// # Panics
    /// If `bytes` is longer than `u32::MAX` (callers enforce the message size limit first).
    pub fn write_octets(&mut self, bytes: &[u8]) {
        self.write_len(bytes.len());
        self.buf.put_slice(bytes);
    }

    wire_pub! {
        /// Writes the protobuf message `m` as a `sequence<octet>`, encoding it in place (the
        /// count is patched in afterwards, so it is the number of bytes written).
        ///
        /// # Panics
        /// If the encoding is longer than `u32::MAX` (callers enforce the message size limit
        /// first).
        fn write_message<M: prost::Message>(&mut self, m: &M) {
            self.align(4);
            let len_at = self.buf.len();
            self.buf.put_u32(0);
            m.encode_raw(self.buf);
            let len = u32::try_from(self.buf.len() - len_at - 4).expect("CDR length over 4 GiB");
            self.patch_u32_at(len_at, len);
        }
    }

    /// Writes a CDR string: ulong length counting the NUL, the bytes, then NUL.
    pub fn write_string(&mut self, s: &str) {
        self.write_len(s.len() + 1);
        self.buf.put_slice(s.as_bytes());
        self.buf.put_u8(0);
    }

    /// Writes a length or count as an aligned ulong.
    pub fn write_len(&mut self, len: usize) {
        let len = u32::try_from(len).expect("CDR length over 4 GiB");
        self.write_u32(len);
    }

    /// Writes an encapsulation: a ulong length, then the byte-order octet and whatever `f`
    /// writes, aligned relative to that octet.
    pub fn write_encapsulation<R>(&mut self, f: impl FnOnce(&mut CdrWriter<'_>) -> R) -> R {
        self.align(4);
        let len_at = self.buf.len();
        self.buf.put_u32(0);
        let origin = self.buf.len();
        let order = self.order;
        let r = {
            let mut inner = CdrWriter::with_origin(self.buf, order, origin);
            inner.write_octet(order.flag());
            f(&mut inner)
        };
        let len = (self.buf.len() - origin) as u32;
        self.patch_u32_at(len_at, len);
        r
    }

    /// Overwrites the ulong at buffer index `at` (used to fill in sizes after the fact).
    fn patch_u32_at(&mut self, at: usize, v: u32) {
        let bytes = match self.order {
            ByteOrder::Big => v.to_be_bytes(),
            ByteOrder::Little => v.to_le_bytes(),
        };
        self.buf[at..at + 4].copy_from_slice(&bytes);
    }
}

/// Encodes a value as a standalone encapsulation (byte-order octet first), as IORs and service
/// contexts carry them.
pub fn encapsulate(order: ByteOrder, f: impl FnOnce(&mut CdrWriter<'_>)) -> BytesMut {
    // Room for the small ones (a deadline is 16 bytes) without growing.
    let mut buf = BytesMut::with_capacity(32);
    let mut w = CdrWriter::new(&mut buf, order);
    w.write_octet(order.flag());
    f(&mut w);
    buf
}

/// Reads CDR data from a byte slice.
#[derive(Clone, Debug)]
pub struct CdrReader<'a> {
    data: &'a [u8],
    pos: usize,
    /// Logical position of `data[0]` relative to the alignment origin.
    base: usize,
    order: ByteOrder,
}

macro_rules! get_prim {
    ($name:ident, $ty:ty, $size:expr) => {
        #[doc = concat!("Reads a `", stringify!($ty), "`, aligned to its size.")]
        pub fn $name(&mut self) -> Result<$ty, DecodeError> {
            self.align($size)?;
            let b = self.take($size)?;
            let mut a = [0u8; $size];
            a.copy_from_slice(b);
            Ok(match self.order {
                ByteOrder::Big => <$ty>::from_be_bytes(a),
                ByteOrder::Little => <$ty>::from_le_bytes(a),
            })
        }
    };
}

impl<'a> CdrReader<'a> {
    /// A reader whose alignment origin is `data[0]`.
    pub fn new(data: &'a [u8], order: ByteOrder) -> Self {
        CdrReader {
            data,
            pos: 0,
            base: 0,
            order,
        }
    }

    wire_pub! {
        /// A reader for `data` that sits at logical position `offset` from the alignment origin
        /// (a message body that starts `offset` bytes after the GIOP header's first byte).
        fn with_offset(data: &'a [u8], order: ByteOrder, offset: usize) -> Self {
            CdrReader {
                data,
                pos: 0,
                base: offset,
                order,
            }
        }
    }

    /// Reads a standalone encapsulation (the byte-order octet first, as in an `IOR:` string).
    pub fn encapsulation(data: &'a [u8]) -> Result<Self, DecodeError> {
        let Some(&flag) = data.first() else {
            return Err(DecodeError::new(DecodeErrorKind::EmptyEncapsulation, 0));
        };
        let order = match flag {
            0 => ByteOrder::Big,
            1 => ByteOrder::Little,
            b => return Err(DecodeError::new(DecodeErrorKind::BadBoolean(b), 0)),
        };
        Ok(CdrReader {
            data,
            pos: 1,
            base: 0,
            order,
        })
    }

    /// The byte order being read.
    pub fn order(&self) -> ByteOrder {
        self.order
    }

    /// Logical position of the next byte, relative to the alignment origin.
    pub fn position(&self) -> usize {
        self.base + self.pos
    }

    /// Bytes left.
    pub fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    wire_pub! {
        /// The unread rest of the data.
        fn rest(&self) -> &'a [u8] {
            &self.data[self.pos..]
        }
    }

    fn eof(&self, needed: usize) -> DecodeError {
        DecodeError::new(
            DecodeErrorKind::UnexpectedEof {
                needed,
                remaining: self.remaining(),
            },
            self.position(),
        )
    }

    /// Skips padding (whatever its contents) to a multiple of `n`.
    pub fn align(&mut self, n: usize) -> Result<(), DecodeError> {
        let pad = (n - self.position() % n) % n;
        self.skip(pad)
    }

    wire_pub! {
        /// Aligns to `n` only if bytes remain after the padding would start (GIOP 1.2 body rule:
        /// senders omit the padding before an empty body).
        fn align_if_remaining(&mut self, n: usize) -> Result<(), DecodeError> {
            if self.remaining() == 0 {
                Ok(())
            } else {
                self.align(n)
            }
        }
    }

    /// Skips `n` bytes.
    pub fn skip(&mut self, n: usize) -> Result<(), DecodeError> {
        self.take(n).map(|_| ())
    }

    /// Takes `n` raw bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if n > self.remaining() {
            return Err(self.eof(n));
        }
        let s = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// Reads one octet.
    pub fn read_octet(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }

    /// Reads a boolean; anything but 0 or 1 is an error.
    pub fn read_bool(&mut self) -> Result<bool, DecodeError> {
        let at = self.position();
        match self.read_octet()? {
            0 => Ok(false),
            1 => Ok(true),
            b => Err(DecodeError::new(DecodeErrorKind::BadBoolean(b), at)),
        }
    }

    get_prim!(read_u16, u16, 2);
    get_prim!(read_i16, i16, 2);
    get_prim!(read_u32, u32, 4);
    get_prim!(read_i32, i32, 4);
    get_prim!(read_u64, u64, 8);
    get_prim!(read_i64, i64, 8);
    get_prim!(read_f32, f32, 4);
    get_prim!(read_f64, f64, 8);

    /// Reads a sequence count and checks that `count * min_elem_size` bytes can follow, so a
    /// hostile count never drives an allocation.
    pub fn read_count(&mut self, min_elem_size: usize) -> Result<usize, DecodeError> {
        let at = self.position();
        let n = self.read_u32()? as usize;
        if n.saturating_mul(min_elem_size.max(1)) > self.remaining() {
            return Err(DecodeError::new(DecodeErrorKind::BadLength(n as u64), at));
        }
        Ok(n)
    }

    /// Reads a `sequence<octet>` and returns the bytes, borrowed.
    pub fn read_octets(&mut self) -> Result<&'a [u8], DecodeError> {
        let n = self.read_count(1)?;
        self.take(n)
    }

    wire_pub! {
        /// Reads a `sequence<octet>` and returns the index range of its bytes in the slice given at
        /// creation, so a caller holding the slice as `Bytes` can slice it without copying.
        fn read_octets_range(&mut self) -> Result<std::ops::Range<usize>, DecodeError> {
            let n = self.read_count(1)?;
            let start = self.pos;
            self.take(n)?;
            Ok(start..start + n)
        }
    }

    /// Reads a CDR string (length counts the NUL, which must be there).
    pub fn read_string_bytes(&mut self) -> Result<&'a [u8], DecodeError> {
        let at = self.position();
        let n = self.read_count(1)?;
        if n == 0 {
            return Err(DecodeError::new(DecodeErrorKind::BadString, at));
        }
        let s = self.take(n)?;
        match s.split_last() {
            Some((0, body)) => Ok(body),
            _ => Err(DecodeError::new(DecodeErrorKind::BadString, at)),
        }
    }

    /// Reads a CDR string as UTF-8.
    pub fn read_string(&mut self) -> Result<String, DecodeError> {
        let at = self.position();
        let b = self.read_string_bytes()?;
        std::str::from_utf8(b)
            .map(str::to_owned)
            .map_err(|_| DecodeError::new(DecodeErrorKind::NotUtf8, at))
    }

    /// Reads an encapsulation (a `sequence<octet>` whose first octet is its byte order) and
    /// returns a reader over it, aligned relative to its byte-order octet.
    pub fn read_encapsulation(&mut self) -> Result<CdrReader<'a>, DecodeError> {
        let at = self.position();
        let data = self.read_octets()?;
        CdrReader::encapsulation(data).map_err(|e| DecodeError::new(e.kind, at))
    }
}

/// CDR data received in a reply: its bytes, with the byte order and alignment they were
/// written with. Cheap to clone: the bytes are shared with the received message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CdrBody {
    bytes: Bytes,
    /// Logical position of `bytes[0]` relative to the alignment origin.
    offset: usize,
    order: ByteOrder,
}

impl CdrBody {
    wire_pub! {
        /// The data `bytes` in `order`, whose first byte sits at logical position `offset`
        /// from the alignment origin (the first byte of the GIOP header it came in).
        fn new(bytes: Bytes, offset: usize, order: ByteOrder) -> Self {
            CdrBody {
                bytes,
                offset,
                order,
            }
        }
    }

    /// A reader over the data, from its first byte, with its byte order and alignment.
    pub fn reader(&self) -> CdrReader<'_> {
        CdrReader::with_offset(&self.bytes, self.order, self.offset)
    }

    /// The raw bytes (to show in a diagnostic; decode them with [`reader`](Self::reader)).
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }
}

/// The answer to a two-way call of a plain CORBA operation
/// ([`ObjectProxy::invoke_cdr`](crate::ObjectProxy::invoke_cdr)): its results, or the user
/// exception it raised.
///
/// Everything else is settled by the ORB before the caller sees it: a system exception in the
/// reply is the call's error (a [`SystemException`](crate::SystemException), decoded), and
/// location forwards are followed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CdrReply {
    /// The operation returned (`NO_EXCEPTION`): the body holds the return value, then the
    /// `out` and `inout` parameters, in order (empty for a `void` operation without them).
    NoException(CdrBody),
    /// The operation raised a user exception (`USER_EXCEPTION`, one of its IDL `raises`).
    UserException {
        /// The exception's repository id, e.g.
        /// `IDL:omg.org/CosNaming/NamingContext/NotFound:1.0`.
        repository_id: String,
        /// The exception's members, in order (after the repository id).
        members: CdrBody,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A message written in place reads back as the octet sequence `encode_to_vec` makes, at
    /// any alignment and in both byte orders.
    #[test]
    fn message_written_in_place_is_its_octet_sequence() {
        #[derive(Clone, PartialEq, prost::Message)]
        struct M {
            #[prost(bytes = "vec", tag = "1")]
            data: Vec<u8>,
            #[prost(uint64, tag = "2")]
            n: u64,
        }
        for size in [0usize, 1, 127, 128, 5000] {
            let m = M {
                data: (0..size).map(|i| i as u8).collect(),
                n: size as u64 * 1_000_003,
            };
            let expected = prost::Message::encode_to_vec(&m);
            for order in [ByteOrder::Little, ByteOrder::Big] {
                for offset in 0..4 {
                    let mut b = BytesMut::new();
                    let mut w = CdrWriter::with_offset(&mut b, order, offset);
                    w.write_octet(7);
                    w.write_message(&m);
                    let mut r = CdrReader::with_offset(&b, order, offset);
                    assert_eq!(r.read_octet().unwrap(), 7);
                    assert_eq!(r.read_octets().unwrap(), &expected[..], "{size} {order:?}");
                    assert_eq!(r.remaining(), 0);
                }
            }
        }
    }

    #[test]
    fn string_layout_counts_nul() {
        let mut b = BytesMut::new();
        CdrWriter::new(&mut b, ByteOrder::Little).write_string("");
        assert_eq!(&b[..], &[1, 0, 0, 0, 0]);
    }

    #[test]
    fn alignment_is_relative_to_origin() {
        let mut b = BytesMut::from(&b"xyz"[..]);
        let mut w = CdrWriter::new(&mut b, ByteOrder::Big);
        w.write_octet(7);
        w.write_u32(0x01020304);
        assert_eq!(&b[..], &[b'x', b'y', b'z', 7, 0, 0, 0, 1, 2, 3, 4]);
        let mut r = CdrReader::new(&b[3..], ByteOrder::Big);
        assert_eq!(r.read_octet().unwrap(), 7);
        assert_eq!(r.read_u32().unwrap(), 0x01020304);
    }

    #[test]
    fn padding_contents_are_ignored() {
        let data = [9u8, 0xde, 0xad, 0xbe, 4, 0, 0, 0];
        let mut r = CdrReader::new(&data, ByteOrder::Little);
        assert_eq!(r.read_octet().unwrap(), 9);
        assert_eq!(r.read_u32().unwrap(), 4);
    }

    #[test]
    fn encapsulation_restarts_alignment() {
        let mut b = BytesMut::new();
        let mut w = CdrWriter::new(&mut b, ByteOrder::Little);
        w.write_octet(1);
        w.write_encapsulation(|e| e.write_u32(5));
        // octet, pad 3, len 8, [flag, pad 3, 5 0 0 0]
        assert_eq!(
            &b[..],
            &[1, 0, 0, 0, 8, 0, 0, 0, 1, 0, 0, 0, 5, 0, 0, 0][..]
        );
        let mut r = CdrReader::new(&b, ByteOrder::Little);
        r.read_octet().unwrap();
        let mut e = r.read_encapsulation().unwrap();
        assert_eq!(e.read_u32().unwrap(), 5);
        assert_eq!(r.remaining(), 0);
    }

    #[test]
    fn big_endian_encapsulation_inside_little_stream() {
        let enc = encapsulate(ByteOrder::Big, |w| w.write_u16(0x1234));
        assert_eq!(&enc[..], &[0, 0, 0x12, 0x34]);
        let mut r = CdrReader::encapsulation(&enc).unwrap();
        assert_eq!(r.read_u16().unwrap(), 0x1234);
    }

    #[test]
    fn hostile_lengths_fail_without_allocating() {
        let data = [0xff, 0xff, 0xff, 0xff, b'a'];
        let mut r = CdrReader::new(&data, ByteOrder::Little);
        let e = r.read_string().unwrap_err();
        assert!(matches!(e.kind(), DecodeErrorKind::BadLength(_)));
        let mut r = CdrReader::new(&data, ByteOrder::Little);
        assert!(r.read_octets().is_err());
    }

    #[test]
    fn string_without_nul_or_zero_length_is_rejected() {
        let mut r = CdrReader::new(&[2, 0, 0, 0, b'a', b'b'], ByteOrder::Little);
        assert_eq!(
            r.read_string().unwrap_err().kind(),
            &DecodeErrorKind::BadString
        );
        let mut r = CdrReader::new(&[0, 0, 0, 0], ByteOrder::Little);
        assert_eq!(
            r.read_string().unwrap_err().kind(),
            &DecodeErrorKind::BadString
        );
    }

    #[test]
    fn error_carries_field_path() {
        let mut r = CdrReader::new(&[1, 0], ByteOrder::Little);
        let e = r
            .read_u32()
            .field("object_key")
            .field("Request")
            .unwrap_err();
        assert_eq!(e.path(), &["Request", "object_key"]);
        assert!(e.to_string().contains("Request.object_key"));
    }

    #[derive(Debug, Clone)]
    enum Prim {
        O(u8),
        B(bool),
        S(i16),
        L(u32),
        LL(i64),
        D(f64),
        Str(String),
        Seq(Vec<u8>),
    }

    fn prim() -> impl Strategy<Value = Prim> {
        prop_oneof![
            any::<u8>().prop_map(Prim::O),
            any::<bool>().prop_map(Prim::B),
            any::<i16>().prop_map(Prim::S),
            any::<u32>().prop_map(Prim::L),
            any::<i64>().prop_map(Prim::LL),
            any::<f64>()
                .prop_filter("nan", |f| !f.is_nan())
                .prop_map(Prim::D),
            "[a-zA-Z0-9 ]{0,20}".prop_map(Prim::Str),
            proptest::collection::vec(any::<u8>(), 0..40).prop_map(Prim::Seq),
        ]
    }

    proptest! {
        #[test]
        fn round_trip_at_every_offset(
            vals in proptest::collection::vec(prim(), 0..20),
            offset in 0usize..8,
            little in any::<bool>(),
        ) {
            let order = ByteOrder::from_flag(little);
            let mut b = BytesMut::new();
            let mut w = CdrWriter::with_offset(&mut b, order, offset);
            for v in &vals {
                match v {
                    Prim::O(x) => w.write_octet(*x),
                    Prim::B(x) => w.write_bool(*x),
                    Prim::S(x) => w.write_i16(*x),
                    Prim::L(x) => w.write_u32(*x),
                    Prim::LL(x) => w.write_i64(*x),
                    Prim::D(x) => w.write_f64(*x),
                    Prim::Str(x) => w.write_string(x),
                    Prim::Seq(x) => w.write_octets(x),
                }
            }
            let mut r = CdrReader::with_offset(&b, order, offset);
            for v in &vals {
                match v {
                    Prim::O(x) => prop_assert_eq!(r.read_octet().unwrap(), *x),
                    Prim::B(x) => prop_assert_eq!(r.read_bool().unwrap(), *x),
                    Prim::S(x) => prop_assert_eq!(r.read_i16().unwrap(), *x),
                    Prim::L(x) => prop_assert_eq!(r.read_u32().unwrap(), *x),
                    Prim::LL(x) => prop_assert_eq!(r.read_i64().unwrap(), *x),
                    Prim::D(x) => prop_assert_eq!(r.read_f64().unwrap(), *x),
                    Prim::Str(x) => prop_assert_eq!(&r.read_string().unwrap(), x),
                    Prim::Seq(x) => prop_assert_eq!(r.read_octets().unwrap(), &x[..]),
                }
            }
            prop_assert_eq!(r.remaining(), 0);
        }

        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..64)) {
            let mut r = CdrReader::new(&data, ByteOrder::Little);
            let _ = r.read_string();
            let _ = r.read_octets();
            let _ = r.read_encapsulation();
            let _ = r.read_u64();
            let _ = CdrReader::encapsulation(&data).and_then(|mut e| e.read_string());
        }
    }
}
