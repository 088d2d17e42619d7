//! What generated code names, in one place (as `tonic::codegen`). Not a public API.

pub use crate::exception::{
    CompletionStatus, Exception, SystemException, SystemExceptionKind, UserException,
};
pub use crate::ior::ObjectRef;
pub use crate::orb::Orb;
pub use crate::proxy::ObjectProxy;
pub use crate::servant::{Context, Servant};
pub use bytes::Bytes;
pub use prost;
pub use std::time::Duration;

use crate::exception::minor;

/// Decodes a request message; failure is MARSHAL, COMPLETED_NO (the operation never ran).
pub fn decode_request<M: prost::Message + Default>(body: Bytes) -> Result<M, SystemException> {
    M::decode(body).map_err(|e| {
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

/// Encodes a message into `Bytes`.
pub fn encode<M: prost::Message>(m: &M) -> Bytes {
    Bytes::from(m.encode_to_vec())
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
