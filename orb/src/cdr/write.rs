//! [`CdrWriter`]: CDR data appended to a buffer, and standalone encapsulations.

use super::ByteOrder;
use bytes::{BufMut, BytesMut};

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
