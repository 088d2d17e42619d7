//! The interface model: what the code generator consumes. Build it from .proto files
//! ([`crate::compile`]) or by hand (tests, tools that have no .proto at all).

use std::fmt;

/// A service: a CORBA interface.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Service {
    /// The Rust type name (`UpperCamel`, sanitised), e.g. `Echo`.
    pub name: String,
    /// The name as written in the .proto, e.g. `Echo`.
    pub proto_name: String,
    /// The protobuf package, e.g. `demo` (`""` for none).
    pub package: String,
    /// The .proto file that declares it, as named to the compiler (`demo/echo.proto`).
    pub file: String,
    /// `IDL:<package path>/<Service>:1.0`, e.g. `IDL:demo/Echo:1.0`.
    pub repository_id: String,
    /// Documentation lines (the proto comments), without the comment markers.
    pub docs: Vec<String>,
    /// `option deprecated = true;` on the service.
    pub deprecated: bool,
    /// The operations, in declaration order.
    pub methods: Vec<Method>,
}

impl Service {
    /// The fully qualified proto name, e.g. `demo.Echo`.
    pub fn full_name(&self) -> String {
        if self.package.is_empty() {
            self.proto_name.clone()
        } else {
            format!("{}.{}", self.package, self.proto_name)
        }
    }
}

/// An operation of a [`Service`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Method {
    /// The Rust method name (`snake_case`, sanitised), e.g. `echo`, `r#type`, `self_`.
    pub name: String,
    /// The name as written in the .proto; it is the operation name on the wire.
    pub proto_name: String,
    /// The request message.
    pub input: MessageType,
    /// The reply message (`google.protobuf.Empty` for oneway operations).
    pub output: MessageType,
    /// Documentation lines (the proto comments).
    pub docs: Vec<String>,
    /// `option (orb.oneway) = true`: the client does not wait and the ORB sends no reply.
    pub oneway: bool,
    /// `option (orb.raises) = "..."`: the user exceptions the operation declares.
    pub raises: Vec<UserExceptionType>,
    /// `option deprecated = true;` on the method.
    pub deprecated: bool,
}

/// A message type as the generated code names it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MessageType {
    /// Fully qualified proto name without the leading dot, e.g. `demo.Msg`.
    pub full_name: String,
    /// The Rust path prost generates, relative to the service's package module, e.g. `Msg`,
    /// `super::common::Item`, `::prost_types::Timestamp`, or `()` for `google.protobuf.Empty`.
    pub rust_path: String,
}

impl MessageType {
    /// A message type from its proto name and Rust path.
    pub fn new(full_name: impl Into<String>, rust_path: impl Into<String>) -> Self {
        MessageType {
            full_name: full_name.into(),
            rust_path: rust_path.into(),
        }
    }

    /// Whether this is `google.protobuf.Empty` (Rust `()`).
    pub fn is_empty_message(&self) -> bool {
        self.full_name == EMPTY_PROTO_NAME
    }
}

/// The fully qualified name of `google.protobuf.Empty`.
pub const EMPTY_PROTO_NAME: &str = "google.protobuf.Empty";

/// A user exception an operation declares: a message type and its repository id.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UserExceptionType {
    /// Fully qualified proto name without the leading dot, e.g. `bank.InsufficientFunds`.
    pub full_name: String,
    /// The Rust path prost generates, relative to the service's package module.
    pub rust_path: String,
    /// `IDL:<package path>/<Message>:1.0`, e.g. `IDL:bank/InsufficientFunds:1.0`.
    pub repository_id: String,
}

impl UserExceptionType {
    /// The message's own name (the last segment of `full_name`).
    pub fn simple_name(&self) -> &str {
        self.full_name.rsplit('.').next().unwrap_or(&self.full_name)
    }
}

/// A streaming method left out because `skip_streaming` was on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkippedMethod {
    /// The .proto file.
    pub file: String,
    /// The service's name as written.
    pub service: String,
    /// The method's name as written.
    pub method: String,
}

impl fmt::Display for SkippedMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "skipped streaming method `{}.{}` in `{}` (orb supports request/reply operations only)",
            self.service, self.method, self.file
        )
    }
}

/// Everything the .proto files declare that the code generator needs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Model {
    /// All services of all files (in dependency order, then declaration order).
    pub services: Vec<Service>,
    /// Streaming methods that were left out (only with `skip_streaming`).
    pub skipped: Vec<SkippedMethod>,
}

impl Model {
    /// The service with this package and proto name.
    pub fn service(&self, package: &str, proto_name: &str) -> Option<&Service> {
        self.services
            .iter()
            .find(|s| s.package == package && s.proto_name == proto_name)
    }
}
