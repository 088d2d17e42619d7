//! [`CdrReader`]: CDR data read from a byte slice, every length checked against what is left.

use super::{ByteOrder, DecodeError, DecodeErrorKind};

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
            // Padding and value checked and taken at once (every header field is one of
            // these); a short input goes the long way, for the same error.
            let start = self.pos + (self.position().wrapping_neg() & ($size - 1));
            let b = match self.data.get(start..start + $size) {
                Some(b) => {
                    self.pos = start + $size;
                    b
                }
                None => {
                    self.align($size)?;
                    self.take($size)?
                }
            };
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
