//! Why a byte stream could not be framed: the error of the framing layer, shared by the header
//! decoder and the codec (its own module, so that neither imports the other for it).

use super::Version;
use std::io;

/// Why a byte stream could not be framed. Every variant is a connection-level error: the
/// connection answers MessageError where WIRE-GIOP §2.5 says so and closes.
#[derive(Debug)]
pub enum FrameError {
    /// The first four bytes were not `GIOP`.
    BadMagic([u8; 4]),
    /// A GIOP version we do not speak.
    UnsupportedVersion(Version),
    /// A message type octet outside 0..=7 (or Fragment in 1.0).
    UnknownMessageType(u8),
    /// The announced (or reassembled) size is over the limit.
    TooLarge {
        /// Announced or accumulated size.
        size: u64,
        /// The limit.
        max: usize,
    },
    /// The stream ended inside a frame.
    Truncated,
    /// A Fragment for a message that was never started, or other fragment-chain breakage
    /// (version/byte-order mismatch, a fragmented CancelRequest, too many pending chains).
    BadFragment(&'static str),
    /// A message header (request header, reply header...) could not be decoded.
    Decode(crate::cdr::DecodeError),
    /// I/O error (required by `tokio_util::codec`).
    Io(io::Error),
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::BadMagic(m) => write!(f, "bad GIOP magic {m:02x?}"),
            FrameError::UnsupportedVersion(v) => write!(f, "unsupported GIOP version {v}"),
            FrameError::UnknownMessageType(t) => write!(f, "unknown GIOP message type {t}"),
            FrameError::TooLarge { size, max } => {
                write!(f, "message of {size} bytes exceeds the limit of {max}")
            }
            FrameError::Truncated => f.write_str("stream ended inside a message"),
            FrameError::BadFragment(why) => write!(f, "bad fragment: {why}"),
            FrameError::Decode(e) => write!(f, "malformed message header: {e}"),
            FrameError::Io(e) => write!(f, "i/o error: {e}"),
        }
    }
}

impl std::error::Error for FrameError {}

impl From<io::Error> for FrameError {
    fn from(e: io::Error) -> Self {
        FrameError::Io(e)
    }
}

impl From<crate::cdr::DecodeError> for FrameError {
    fn from(e: crate::cdr::DecodeError) -> Self {
        FrameError::Decode(e)
    }
}
