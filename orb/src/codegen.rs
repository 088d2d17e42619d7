//! What generated code names, in one place (as `tonic::codegen`). Not a public API.

pub use crate::client::proxy::ObjectProxy;
pub use crate::exception::{
    CompletionStatus, Exception, SystemException, SystemExceptionKind, UserException,
};
pub use crate::ior::ObjectRef;
pub use crate::metadata::Metadata;
pub use crate::orb::Orb;
pub use crate::result_slot::ResultSlot;
pub use crate::servant::{Context, Servant};
pub use bytes::Bytes;
pub use prost;
pub use std::time::Duration;

use crate::exception::minor;

/// Decodes a request message; failure is MARSHAL, COMPLETED_NO (the operation never ran).
///
/// Object references in it are marked as arrived over the request's connection (if another
/// ORB opened it), which bidirectional GIOP may then use to call them.
pub fn decode_request<M: prost::Message + Default>(body: Bytes) -> Result<M, SystemException> {
    let from = crate::upcall::upcall_connection_id();
    crate::ior::decoding_from(from, || M::decode(body)).map_err(|e| {
        SystemException::marshal(
            minor::BAD_PARAMETERS,
            CompletionStatus::No,
            format!("request does not decode: {e}"),
        )
    })
}

/// Decodes a reply message; failure is MARSHAL, COMPLETED_YES (the operation ran).
pub fn decode_reply<M: prost::Message + Default>(body: Bytes) -> Result<M, SystemException> {
    M::decode(body).map_err(|e| {
        SystemException::marshal(
            minor::BAD_REPLY,
            CompletionStatus::Yes,
            format!("reply does not decode: {e}"),
        )
    })
}

/// Encodes a message into `Bytes`: in the thread's frame buffer (one allocation per many
/// small messages, where `encode_to_vec` made one per message), or, when large, into a buffer
/// of its own.
pub fn encode<M: prost::Message>(m: &M) -> Bytes {
    crate::outbuf::encode(m.encoded_len(), |buf| m.encode_raw(buf))
}

/// A user exception from a typed exception message.
pub fn user_exception<M: prost::Message>(repository_id: &str, m: &M) -> Exception {
    Exception::User(UserException::new(repository_id, encode(m)))
}

/// An exception the client stub did not expect (an undeclared user exception): UNKNOWN.
pub fn unexpected_user_exception(e: UserException) -> SystemException {
    SystemException::new(
        SystemExceptionKind::UNKNOWN,
        minor::UNKNOWN_EXCEPTION_ID,
        CompletionStatus::Yes,
    )
    .with_detail(format!("undeclared user exception {}", e.repository_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, PartialEq, prost::Message)]
    struct M {
        #[prost(bytes = "vec", tag = "1")]
        data: Vec<u8>,
    }

    /// Messages encoded one after another in the thread's buffer stay whole and apart, small
    /// and large alike.
    #[test]
    fn encoded_messages_are_independent() {
        let ms: Vec<M> = [0usize, 10, 3000, 40_000, 7]
            .iter()
            .map(|&n| M {
                data: (0..n).map(|i| (i * 7 + n) as u8).collect(),
            })
            .collect();
        let encoded: Vec<Bytes> = ms.iter().map(encode).collect();
        for (m, b) in ms.iter().zip(&encoded) {
            assert_eq!(&b[..], &prost::Message::encode_to_vec(m)[..]);
            assert_eq!(&decode_request::<M>(b.clone()).unwrap(), m);
        }
    }
}
