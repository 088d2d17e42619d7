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

mod read;
mod reply;
mod write;

pub use read::CdrReader;
pub use reply::{CdrBody, CdrReply};
pub use write::{encapsulate, CdrWriter};

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

    /// `v`'s four bytes in this order.
    pub(crate) fn u32_bytes(self, v: u32) -> [u8; 4] {
        match self {
            ByteOrder::Big => v.to_be_bytes(),
            ByteOrder::Little => v.to_le_bytes(),
        }
    }

    /// The ulong that four bytes in this order make.
    pub(crate) fn u32_from(self, b: [u8; 4]) -> u32 {
        match self {
            ByteOrder::Big => u32::from_be_bytes(b),
            ByteOrder::Little => u32::from_le_bytes(b),
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

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
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
