//! What a plain CORBA operation's reply hands its caller: [`CdrReply`] and its [`CdrBody`].

use super::{ByteOrder, CdrReader};
use bytes::Bytes;

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
