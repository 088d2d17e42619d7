//! CORBA exceptions: the one error type every caller of the ORB sees.
//!
//! A [`SystemException`] is one of the standard CORBA kinds (TRANSIENT, COMM_FAILURE, ...) with a
//! minor code and a completion status; it crosses the wire as a SYSTEM_EXCEPTION reply. A
//! [`UserException`] is an exception declared by the interface (`raises` in the .proto); it
//! crosses the wire as a USER_EXCEPTION reply carrying its repository id and protobuf payload.
//!
//! The kinds come from one table (name, repository id, description), in the manner of
//! quinn-proto's `transport_error.rs`; the order is omniORB's (`userexception.h`).

use bytes::Bytes;
use std::fmt;
use std::sync::Arc;

/// Whether the operation ran before the failure (CORBA `completion_status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CompletionStatus {
    /// The operation completed before the exception was raised (wire value 0).
    Yes,
    /// The operation never started (wire value 1); it is safe to retry.
    No,
    /// It is unknown whether the operation ran (wire value 2).
    Maybe,
}

impl CompletionStatus {
    /// The wire value (YES = 0, NO = 1, MAYBE = 2).
    pub fn to_u32(self) -> u32 {
        match self {
            CompletionStatus::Yes => 0,
            CompletionStatus::No => 1,
            CompletionStatus::Maybe => 2,
        }
    }

    /// From the wire value; `None` outside 0..=2.
    pub fn from_u32(v: u32) -> Option<Self> {
        match v {
            0 => Some(CompletionStatus::Yes),
            1 => Some(CompletionStatus::No),
            2 => Some(CompletionStatus::Maybe),
            _ => None,
        }
    }
}

impl fmt::Display for CompletionStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CompletionStatus::Yes => "YES",
            CompletionStatus::No => "NO",
            CompletionStatus::Maybe => "MAYBE",
        })
    }
}

/// A standard CORBA system exception kind, spelled as in the specification
/// (`SystemExceptionKind::COMM_FAILURE`).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct SystemExceptionKind(u8);

macro_rules! kinds {
    ($($idx:literal $name:ident $desc:literal;)*) => {
        #[allow(non_upper_case_globals)]
        impl SystemExceptionKind {
            $(
                #[doc = $desc]
                pub const $name: SystemExceptionKind = SystemExceptionKind($idx);
            )*
        }
        const TABLE: &[(&str, &str, &str)] = &[
            $((stringify!($name), concat!("IDL:omg.org/CORBA/", stringify!($name), ":1.0"), $desc),)*
        ];
    };
}

kinds! {
    0 UNKNOWN "the server raised something that is not a CORBA exception (e.g. a servant panicked)";
    1 BAD_PARAM "a parameter was invalid (e.g. a malformed object reference string)";
    2 NO_MEMORY "memory could not be allocated";
    3 IMP_LIMIT "an implementation limit was exceeded";
    4 COMM_FAILURE "the connection failed while the call was in progress";
    5 INV_OBJREF "the object reference is invalid";
    6 NO_PERMISSION "the caller lacks permission";
    7 INTERNAL "an internal ORB error";
    8 MARSHAL "a request or reply could not be encoded or decoded";
    9 INITIALIZE "ORB initialisation failed";
    10 NO_IMPLEMENT "the operation is not implemented";
    11 BAD_TYPECODE "a bad type code";
    12 BAD_OPERATION "the object does not support this operation";
    13 NO_RESOURCES "the ORB ran out of a resource (threads, buffer space, nesting depth)";
    14 NO_RESPONSE "no response is available yet";
    15 PERSIST_STORE "a persistent storage failure";
    16 BAD_INV_ORDER "a routine was called out of order (e.g. after ORB shutdown)";
    17 TRANSIENT "the object could not be reached now (connection refused); a retry may succeed";
    18 FREE_MEM "memory could not be freed";
    19 INV_IDENT "an invalid identifier";
    20 INV_FLAG "an invalid flag";
    21 INTF_REPOS "interface repository failure";
    22 BAD_CONTEXT "a bad context";
    23 OBJ_ADAPTER "object adapter failure";
    24 DATA_CONVERSION "data conversion failed";
    25 OBJECT_NOT_EXIST "no object with this key exists (it was never activated or was deactivated)";
    26 TRANSACTION_REQUIRED "a transaction is required";
    27 TRANSACTION_ROLLEDBACK "the transaction was rolled back";
    28 INVALID_TRANSACTION "an invalid transaction";
    29 INV_POLICY "an invalid policy";
    30 CODESET_INCOMPATIBLE "code sets are incompatible";
    31 REBIND "rebinding is not allowed";
    32 TIMEOUT "the call's deadline passed before a reply arrived";
    33 TRANSACTION_UNAVAILABLE "the transaction service is unavailable";
    34 TRANSACTION_MODE "a transaction mode mismatch";
    35 BAD_QOS "the quality of service cannot be supported";
}

impl SystemExceptionKind {
    fn entry(self) -> &'static (&'static str, &'static str, &'static str) {
        &TABLE[self.0 as usize]
    }

    /// The CORBA name, e.g. `"COMM_FAILURE"`.
    pub fn name(self) -> &'static str {
        self.entry().0
    }

    /// The repository id, e.g. `"IDL:omg.org/CORBA/COMM_FAILURE:1.0"`.
    pub fn repository_id(self) -> &'static str {
        self.entry().1
    }

    /// What the kind means, in words.
    pub fn description(self) -> &'static str {
        self.entry().2
    }

    /// The kind with this repository id, if it is a standard one.
    pub fn from_repository_id(id: &str) -> Option<Self> {
        TABLE
            .iter()
            .position(|(_, rid, _)| *rid == id)
            .map(|i| SystemExceptionKind(i as u8))
    }

    /// All kinds, in table order.
    pub fn all() -> impl Iterator<Item = SystemExceptionKind> {
        (0..TABLE.len() as u8).map(SystemExceptionKind)
    }
}

impl fmt::Debug for SystemExceptionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Display for SystemExceptionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Minor codes we use. OMG-standard minors are `0x4F4D0000 | n`; ours carry the vendor id
/// `0x52420000` ("RB").
pub mod minor {
    /// OMG vendor minor code base.
    pub const OMG: u32 = 0x4F4D_0000;
    /// Our own vendor minor code base.
    pub const VENDOR: u32 = 0x5242_0000;
    /// OBJECT_NOT_EXIST: no servant for the key (OMG 1).
    pub const OBJECT_NOT_EXIST_NO_SERVANT: u32 = OMG | 1;
    /// BAD_OPERATION: the servant has no such operation (OMG 2... we use our own code).
    pub const UNKNOWN_OPERATION: u32 = VENDOR | 1;
    /// MARSHAL: the request parameters could not be decoded.
    pub const BAD_PARAMETERS: u32 = VENDOR | 2;
    /// MARSHAL: the reply could not be decoded.
    pub const BAD_REPLY: u32 = VENDOR | 3;
    /// UNKNOWN: the servant panicked.
    pub const SERVANT_PANIC: u32 = VENDOR | 4;
    /// TRANSIENT: the connection could not be opened.
    pub const CONNECT_FAILED: u32 = VENDOR | 5;
    /// COMM_FAILURE: the connection was lost while the call waited.
    pub const CONNECTION_LOST: u32 = VENDOR | 6;
    /// TIMEOUT: the deadline passed.
    pub const DEADLINE: u32 = VENDOR | 7;
    /// BAD_INV_ORDER: the ORB is shut down.
    pub const SHUTDOWN: u32 = VENDOR | 8;
    /// BAD_PARAM: a malformed object reference string.
    pub const BAD_REFERENCE: u32 = VENDOR | 9;
    /// MARSHAL: a message exceeded the size limit.
    pub const MESSAGE_TOO_LARGE: u32 = VENDOR | 10;
    /// NO_RESOURCES: the nested upcall depth limit was reached.
    pub const NESTING_LIMIT: u32 = VENDOR | 11;
    /// TRANSIENT: the peer closed the connection before the request was processed.
    pub const CLOSED_BY_PEER: u32 = VENDOR | 12;
    /// UNKNOWN: the peer raised an exception id we do not know.
    pub const UNKNOWN_EXCEPTION_ID: u32 = VENDOR | 13;
    /// NO_RESOURCES: the serving thread had too little stack left to run the upcall.
    pub const STACK_LOW: u32 = VENDOR | 14;
    /// TRANSIENT: the server is shutting down and did not process the request.
    pub const SHUTTING_DOWN: u32 = VENDOR | 15;
    /// NO_RESPONSE: the servant dropped its [`ReplyHandle`](crate::ReplyHandle) unanswered.
    pub const REPLY_HANDLE_DROPPED: u32 = VENDOR | 16;
    /// BAD_PARAM: a TLS setting is unusable (a certificate or key file that does not load).
    pub const BAD_TLS_CONFIG: u32 = VENDOR | 17;
    /// TRANSIENT: the TLS handshake with the server failed (its certificate did not verify,
    /// it refused ours, or it does not speak TLS); nothing was sent.
    pub const TLS_HANDSHAKE_FAILED: u32 = VENDOR | 18;
    /// NO_PERMISSION: the reference needs TLS and this ORB has no
    /// [`TlsConfig`](crate::TlsConfig), or a rule refused the caller's identity.
    pub const TLS_REQUIRED: u32 = VENDOR | 19;
    /// NO_PERMISSION: no rule of the server's [`AccessControl`](crate::AccessControl) allows
    /// the caller this operation on this object.
    pub const ACCESS_DENIED: u32 = VENDOR | 20;
    /// NO_PERMISSION: the server's TLS refused our client certificate (missing, untrusted,
    /// expired); the request was not processed.
    pub const TLS_REFUSED: u32 = VENDOR | 21;
}

/// A CORBA system exception: kind, minor code, completion status, and (locally only) a
/// human-readable detail that never crosses the wire.
#[derive(Clone, PartialEq, Eq)]
pub struct SystemException {
    /// The standard kind.
    pub kind: SystemExceptionKind,
    /// The minor code (vendor id in the high 20 bits).
    pub minor: u32,
    /// Whether the operation ran.
    pub completed: CompletionStatus,
    detail: Option<Arc<str>>,
}

impl SystemException {
    /// A new exception with no detail text.
    pub fn new(kind: SystemExceptionKind, minor: u32, completed: CompletionStatus) -> Self {
        SystemException {
            kind,
            minor,
            completed,
            detail: None,
        }
    }

    /// Attaches a local explanation (shown by `Display`, not sent to the peer).
    #[must_use]
    pub fn with_detail(mut self, detail: impl Into<Arc<str>>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    /// The local explanation, if any.
    pub fn detail(&self) -> Option<&str> {
        self.detail.as_deref()
    }

    /// Shorthand constructors for the kinds the ORB raises itself.
    pub fn transient(minor: u32, detail: impl Into<Arc<str>>) -> Self {
        Self::new(SystemExceptionKind::TRANSIENT, minor, CompletionStatus::No).with_detail(detail)
    }

    /// COMM_FAILURE, completion MAYBE: the connection broke while the call was outstanding.
    pub fn comm_failure(detail: impl Into<Arc<str>>) -> Self {
        Self::new(
            SystemExceptionKind::COMM_FAILURE,
            minor::CONNECTION_LOST,
            CompletionStatus::Maybe,
        )
        .with_detail(detail)
    }

    /// TIMEOUT, completion MAYBE.
    pub fn timeout(detail: impl Into<Arc<str>>) -> Self {
        Self::new(
            SystemExceptionKind::TIMEOUT,
            minor::DEADLINE,
            CompletionStatus::Maybe,
        )
        .with_detail(detail)
    }

    /// MARSHAL with the given minor and completion.
    pub fn marshal(minor: u32, completed: CompletionStatus, detail: impl Into<Arc<str>>) -> Self {
        Self::new(SystemExceptionKind::MARSHAL, minor, completed).with_detail(detail)
    }

    /// BAD_PARAM, completion NO.
    pub fn bad_param(minor: u32, detail: impl Into<Arc<str>>) -> Self {
        Self::new(SystemExceptionKind::BAD_PARAM, minor, CompletionStatus::No).with_detail(detail)
    }

    /// BAD_INV_ORDER: the ORB has been shut down.
    pub fn shutdown() -> Self {
        Self::new(
            SystemExceptionKind::BAD_INV_ORDER,
            minor::SHUTDOWN,
            CompletionStatus::No,
        )
        .with_detail("the ORB is shut down")
    }

    /// OBJECT_NOT_EXIST, completion NO.
    pub fn object_not_exist(detail: impl Into<Arc<str>>) -> Self {
        Self::new(
            SystemExceptionKind::OBJECT_NOT_EXIST,
            minor::OBJECT_NOT_EXIST_NO_SERVANT,
            CompletionStatus::No,
        )
        .with_detail(detail)
    }

    /// BAD_OPERATION, completion NO.
    pub fn bad_operation(op: &str) -> Self {
        Self::new(
            SystemExceptionKind::BAD_OPERATION,
            minor::UNKNOWN_OPERATION,
            CompletionStatus::No,
        )
        .with_detail(format!("unknown operation `{op}`"))
    }

    /// INTERNAL, completion MAYBE.
    pub fn internal(detail: impl Into<Arc<str>>) -> Self {
        Self::new(SystemExceptionKind::INTERNAL, 0, CompletionStatus::Maybe).with_detail(detail)
    }
}

impl fmt::Debug for SystemException {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for SystemException {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "CORBA::{} (minor {:#010x}, completed {})",
            self.kind.name(),
            self.minor,
            self.completed
        )?;
        match &self.detail {
            Some(d) => write!(f, ": {d}"),
            None => write!(f, ": {}", self.kind.description()),
        }
    }
}

impl std::error::Error for SystemException {}

/// A user exception: a declared error type identified by its repository id, with its fields
/// encoded as a protobuf message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserException {
    /// Repository id, e.g. `IDL:bank/InsufficientFunds:1.0`.
    pub repository_id: String,
    /// The exception message, protobuf-encoded.
    pub payload: Bytes,
}

impl UserException {
    /// A user exception from a prost message and its repository id.
    pub fn new(repository_id: impl Into<String>, payload: Bytes) -> Self {
        UserException {
            repository_id: repository_id.into(),
            payload,
        }
    }
}

impl fmt::Display for UserException {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "user exception {}", self.repository_id)
    }
}

impl std::error::Error for UserException {}

/// Any exception an operation can end with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Exception {
    /// A standard CORBA system exception.
    System(SystemException),
    /// An exception declared by the interface.
    User(UserException),
}

impl Exception {
    /// The system exception, if this is one.
    pub fn as_system(&self) -> Option<&SystemException> {
        match self {
            Exception::System(s) => Some(s),
            Exception::User(_) => None,
        }
    }

    /// The system exception kind, if this is one.
    pub fn kind(&self) -> Option<SystemExceptionKind> {
        self.as_system().map(|s| s.kind)
    }
}

impl fmt::Display for Exception {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Exception::System(s) => fmt::Display::fmt(s, f),
            Exception::User(u) => fmt::Display::fmt(u, f),
        }
    }
}

impl std::error::Error for Exception {}

impl From<SystemException> for Exception {
    fn from(e: SystemException) -> Self {
        Exception::System(e)
    }
}

impl From<UserException> for Exception {
    fn from(e: UserException) -> Self {
        Exception::User(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_consistent() {
        assert_eq!(SystemExceptionKind::TIMEOUT.name(), "TIMEOUT");
        assert_eq!(
            SystemExceptionKind::COMM_FAILURE.repository_id(),
            "IDL:omg.org/CORBA/COMM_FAILURE:1.0"
        );
        for k in SystemExceptionKind::all() {
            assert_eq!(
                SystemExceptionKind::from_repository_id(k.repository_id()),
                Some(k)
            );
        }
        assert_eq!(SystemExceptionKind::all().count(), 36);
        assert_eq!(SystemExceptionKind::from_repository_id("IDL:x/Y:1.0"), None);
    }

    #[test]
    fn display_names_kind_and_detail() {
        let e = SystemException::transient(minor::CONNECT_FAILED, "connect to 127.0.0.1:1 refused");
        let s = e.to_string();
        assert!(s.starts_with("CORBA::TRANSIENT"), "{s}");
        assert!(s.contains("completed NO"), "{s}");
        assert!(s.contains("refused"), "{s}");
    }
}
