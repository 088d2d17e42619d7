//! CORBA exceptions in words, for one-line error messages:
//! `server not reachable (TRANSIENT): cannot connect to 127.0.0.1:12809: Connection refused`.

use protorb::{Exception, SystemException, SystemExceptionKind as K};

/// What a system exception kind means to someone running a client, in a few words.
pub fn in_words(kind: K) -> &'static str {
    match kind {
        K::TRANSIENT => "server not reachable",
        K::COMM_FAILURE => "connection lost during the call",
        K::TIMEOUT => "no reply in time",
        K::OBJECT_NOT_EXIST => "no such object on the server",
        K::BAD_PARAM => "invalid argument",
        K::BAD_OPERATION => "operation not supported by the object",
        K::MARSHAL => "message could not be encoded or decoded",
        K::NO_RESOURCES => "out of resources",
        K::UNKNOWN => "the server failed with a non-CORBA error",
        K::BAD_INV_ORDER => "the ORB is shut down",
        K::INV_OBJREF => "invalid object reference",
        K::INITIALIZE => "the ORB could not start",
        K::NO_IMPLEMENT => "not implemented",
        other => other.description(),
    }
}

/// `<words> (<KIND>): <detail>`.
pub fn describe(e: &SystemException) -> String {
    format!(
        "{} ({}): {}",
        in_words(e.kind),
        e.kind.name(),
        e.detail().unwrap_or_else(|| e.kind.description())
    )
}

/// [`describe`] for any exception; a user exception shows its repository id (typed error enums
/// of generated code print themselves better).
pub fn describe_exception(e: &Exception) -> String {
    match e {
        Exception::System(s) => describe(s),
        Exception::User(u) => format!("user exception {}", u.repository_id),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transient_in_words() {
        let e = SystemException::transient(protorb::minor::CONNECT_FAILED, "connection refused");
        assert_eq!(
            describe(&e),
            "server not reachable (TRANSIENT): connection refused"
        );
    }
}
