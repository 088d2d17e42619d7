//! The 12-byte GIOP message header, common to every version.

use super::error::FrameError;
use super::Version;
use crate::cdr::ByteOrder;
use bytes::{BufMut, BytesMut};

/// Length of the GIOP header.
pub const HEADER_LEN: usize = 12;

/// GIOP message types (header octet 7).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MsgType {
    /// 0
    Request,
    /// 1
    Reply,
    /// 2
    CancelRequest,
    /// 3
    LocateRequest,
    /// 4
    LocateReply,
    /// 5
    CloseConnection,
    /// 6
    MessageError,
    /// 7 (GIOP 1.1+)
    Fragment,
}

impl MsgType {
    /// From the header octet.
    pub fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            0 => MsgType::Request,
            1 => MsgType::Reply,
            2 => MsgType::CancelRequest,
            3 => MsgType::LocateRequest,
            4 => MsgType::LocateReply,
            5 => MsgType::CloseConnection,
            6 => MsgType::MessageError,
            7 => MsgType::Fragment,
            _ => return None,
        })
    }

    /// The header octet.
    pub fn to_u8(self) -> u8 {
        self as u8
    }
}

/// A decoded GIOP header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Protocol version.
    pub version: Version,
    /// Byte order of the rest of the message (flags bit 0).
    pub order: ByteOrder,
    /// More fragments follow (flags bit 1; GIOP 1.1+).
    pub more_fragments: bool,
    /// Message type.
    pub msg_type: MsgType,
    /// Bytes after the header.
    pub size: u32,
}

impl Header {
    /// A header in our native byte order with no fragment flag.
    pub fn new(version: Version, msg_type: MsgType, size: u32) -> Self {
        Header {
            version,
            order: ByteOrder::NATIVE,
            more_fragments: false,
            msg_type,
            size,
        }
    }

    /// Decodes the first 12 bytes of `buf` (which must hold at least 12).
    ///
    /// Errors: bad magic, a version other than 1.0–1.2, an unknown message type, a Fragment in
    /// GIOP 1.0.
    pub fn decode(buf: &[u8]) -> Result<Header, FrameError> {
        if buf.len() < HEADER_LEN {
            return Err(FrameError::Truncated);
        }
        if &buf[0..4] != b"GIOP" {
            let mut m = [0u8; 4];
            m.copy_from_slice(&buf[0..4]);
            return Err(FrameError::BadMagic(m));
        }
        let version = Version {
            major: buf[4],
            minor: buf[5],
        };
        if version.major != 1 || version.minor > 2 {
            return Err(FrameError::UnsupportedVersion(version));
        }
        let flags = buf[6];
        let order = ByteOrder::from_flag(flags & 1 != 0);
        // GIOP 1.0 has a plain byte-order boolean and no fragments.
        let more_fragments = version.minor >= 1 && flags & 2 != 0;
        let msg_type = MsgType::from_u8(buf[7]).ok_or(FrameError::UnknownMessageType(buf[7]))?;
        if msg_type == MsgType::Fragment && version.minor == 0 {
            return Err(FrameError::UnknownMessageType(buf[7]));
        }
        let mut s = [0u8; 4];
        s.copy_from_slice(&buf[8..12]);
        let size = match order {
            ByteOrder::Big => u32::from_be_bytes(s),
            ByteOrder::Little => u32::from_le_bytes(s),
        };
        Ok(Header {
            version,
            order,
            more_fragments,
            msg_type,
            size,
        })
    }

    /// Appends the 12 header bytes to `dst`.
    pub fn encode(&self, dst: &mut BytesMut) {
        // One append, not six (each is a capacity check and a copy).
        dst.put_slice(&self.to_bytes());
    }

    /// The header's 12 bytes.
    pub(crate) fn to_bytes(self) -> [u8; HEADER_LEN] {
        let mut flags = self.order.flag();
        if self.more_fragments {
            flags |= 2;
        }
        let size = match self.order {
            ByteOrder::Big => self.size.to_be_bytes(),
            ByteOrder::Little => self.size.to_le_bytes(),
        };
        let mut h = [0u8; HEADER_LEN];
        h[..4].copy_from_slice(b"GIOP");
        h[4] = self.version.major;
        h[5] = self.version.minor;
        h[6] = flags;
        h[7] = self.msg_type.to_u8();
        h[8..].copy_from_slice(&size);
        h
    }

    /// Rewrites the size field of a header already written at `dst[at..at + 12]`.
    pub fn patch_size(dst: &mut BytesMut, at: usize, order: ByteOrder, size: u32) {
        let b = match order {
            ByteOrder::Big => size.to_be_bytes(),
            ByteOrder::Little => size.to_le_bytes(),
        };
        dst[at + 8..at + 12].copy_from_slice(&b);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_golden_header() {
        let h = Header::decode(&[
            0x47, 0x49, 0x4f, 0x50, 0x01, 0x02, 0x01, 0x00, 0x58, 0x00, 0x00, 0x00,
        ])
        .unwrap();
        assert_eq!(h.version, Version::V1_2);
        assert_eq!(h.order, ByteOrder::Little);
        assert_eq!(h.msg_type, MsgType::Request);
        assert_eq!(h.size, 0x58);
        let mut b = BytesMut::new();
        h.encode(&mut b);
        assert_eq!(&b[..], b"GIOP\x01\x02\x01\x00\x58\x00\x00\x00");
    }

    #[test]
    fn rejects_bad_headers() {
        assert!(matches!(
            Header::decode(b"GIOX\x01\x02\x01\x00\0\0\0\0"),
            Err(FrameError::BadMagic(_))
        ));
        assert!(matches!(
            Header::decode(b"GIOP\x01\x03\x01\x00\0\0\0\0"),
            Err(FrameError::UnsupportedVersion(_))
        ));
        assert!(matches!(
            Header::decode(b"GIOP\x01\x02\x01\x08\0\0\0\0"),
            Err(FrameError::UnknownMessageType(8))
        ));
        assert!(matches!(
            Header::decode(b"GIOP\x01\x00\x01\x07\0\0\0\0"),
            Err(FrameError::UnknownMessageType(7))
        ));
    }
}
