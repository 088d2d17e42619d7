//! `orb call` and `orb idl`: dynamic invocation from a .proto, JSON in and out (as grpcurl),
//! and the CORBA IDL export.
//!
//! The .proto is compiled in process with `protorb_idl` (protox: no protoc), which gives the
//! descriptor pool for prost-reflect's dynamic messages and the interface model: the wire
//! operation name, oneway, and the user exceptions with their repository ids. The request goes
//! out as the runtime's generated stubs send it: the protobuf bytes as the one octet-sequence
//! parameter ([`ObjectProxy::invoke`]).

use crate::Error;
use prost::Message as _;
use prost_reflect::{DynamicMessage, MessageDescriptor, SerializeOptions};
use protorb::{Exception, ObjectProxy, SystemException, UserException};
use protorb_idl::{Compiled, Method, Options, Service};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// Exit code for bad arguments (as clap's own).
pub const USAGE: u8 = 2;

/// What went wrong, and so the exit code.
#[derive(Debug)]
pub enum Failure {
    /// The arguments are wrong (the .proto, the method's name, the JSON, the reference): 2.
    Usage(String),
    /// The call failed: 1.
    Call(Error),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::Call(e)
    }
}

fn usage(msg: impl Into<String>) -> Failure {
    Failure::Usage(msg.into())
}

/// Compiles `protos` with `includes`; with no include directory, each file's own directory is
/// one (so `--proto dir/x.proto` works alone). Streaming methods are left out (with a note on
/// standard error): there is nothing to call or declare for them.
pub fn compile(protos: &[PathBuf], includes: &[PathBuf]) -> Result<Compiled, Failure> {
    let mut dirs: Vec<PathBuf> = includes.to_vec();
    if dirs.is_empty() {
        for p in protos {
            let parent = p
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            if !dirs.iter().any(|d| d == parent) {
                dirs.push(parent.to_path_buf());
            }
        }
    }
    let compiled = protorb_idl::compile(protos, &dirs, &Options::new().skip_streaming(true))
        .map_err(|e| usage(format!("cannot compile the .proto: {e}")))?;
    for s in &compiled.model.skipped {
        eprintln!("orb: note: {s}");
    }
    Ok(compiled)
}

/// Finds `Service.Method` (the service fully qualified, `pkg.Service`, or by its name alone if
/// that is unique; `Service/Method` also works, as in gRPC paths).
pub fn find<'m>(compiled: &'m Compiled, path: &str) -> Result<(&'m Service, &'m Method), Failure> {
    let path = path.trim_start_matches('/');
    let split = path.rfind(['/', '.']).ok_or_else(|| {
        usage(format!(
            "`{path}` is not `Service.Method` (or `package.Service.Method`)"
        ))
    })?;
    let (service_name, method_name) = (&path[..split], &path[split + 1..]);
    let services = &compiled.model.services;
    let mut matches: Vec<&Service> = services
        .iter()
        .filter(|s| s.full_name() == service_name)
        .collect();
    if matches.is_empty() {
        matches = services
            .iter()
            .filter(|s| s.proto_name == service_name)
            .collect();
    }
    let service = match matches.as_slice() {
        [one] => *one,
        [] => {
            let known: Vec<String> = services.iter().map(Service::full_name).collect();
            return Err(usage(format!(
                "no service `{service_name}` in the .proto (services: {})",
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            )));
        }
        more => {
            let names: Vec<String> = more.iter().map(|s| s.full_name()).collect();
            return Err(usage(format!(
                "`{service_name}` is ambiguous: {}",
                names.join(", ")
            )));
        }
    };
    let method = service
        .methods
        .iter()
        .find(|m| m.proto_name == method_name)
        .ok_or_else(|| {
            let known: Vec<&str> = service
                .methods
                .iter()
                .map(|m| m.proto_name.as_str())
                .collect();
            usage(format!(
                "service `{}` has no method `{method_name}` (methods: {})",
                service.full_name(),
                known.join(", ")
            ))
        })?;
    Ok((service, method))
}

fn message(compiled: &Compiled, full_name: &str) -> Result<MessageDescriptor, Failure> {
    compiled.pool.get_message_by_name(full_name).ok_or_else(|| {
        usage(format!(
            "message `{full_name}` is not in the descriptor pool"
        ))
    })
}

/// Reads the `--json` argument: the text itself, `-` for standard input, `@FILE` for a file.
pub fn read_json(arg: &str) -> Result<String, Failure> {
    if arg == "-" {
        std::io::read_to_string(std::io::stdin())
            .map_err(|e| usage(format!("cannot read the JSON from standard input: {e}")))
    } else if let Some(file) = arg.strip_prefix('@') {
        std::fs::read_to_string(file).map_err(|e| usage(format!("cannot read `{file}`: {e}")))
    } else {
        Ok(arg.to_owned())
    }
}

/// The request message from its JSON (protobuf's JSON mapping; unknown fields are an error).
pub fn request_from_json(desc: MessageDescriptor, json: &str) -> Result<DynamicMessage, Failure> {
    let mut de = serde_json::Deserializer::from_str(json);
    let msg = DynamicMessage::deserialize(desc.clone(), &mut de)
        .map_err(|e| usage(format!("bad JSON for `{}`: {e}", desc.full_name())))?;
    de.end()
        .map_err(|e| usage(format!("bad JSON for `{}`: {e}", desc.full_name())))?;
    Ok(msg)
}

/// A message as pretty JSON.
fn to_json(msg: &DynamicMessage, emit_defaults: bool) -> Result<String, Error> {
    let options = SerializeOptions::new().skip_default_fields(!emit_defaults);
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::pretty(&mut out);
    msg.serialize_with_options(&mut ser, &options)?;
    Ok(String::from_utf8(out)?)
}

/// What `orb call` needs besides the ORB.
pub struct CallRequest<'a> {
    /// The compiled .proto.
    pub compiled: &'a Compiled,
    /// `Service.Method`.
    pub method: &'a str,
    /// The request as JSON text.
    pub json: &'a str,
    /// Print fields that have their default value too.
    pub emit_defaults: bool,
    /// The call's timeout.
    pub timeout: Duration,
}

/// Runs one call through `proxy` and prints the reply (or the user exception) as JSON on
/// standard output.
pub fn call(proxy: &ObjectProxy, req: &CallRequest<'_>) -> Result<ExitCode, Failure> {
    let (_, method) = find(req.compiled, req.method)?;
    let input = message(req.compiled, &method.input.full_name)?;
    let request = request_from_json(input, req.json)?;
    let body = request.encode_to_vec().into();
    let op = method.proto_name.as_str();
    if method.oneway {
        proxy
            .invoke_oneway_with_timeout(op, body, req.timeout)
            .map_err(system)?;
        return Ok(ExitCode::SUCCESS);
    }
    match proxy.invoke(op, body, Some(req.timeout)) {
        Ok(reply) => {
            let output = message(req.compiled, &method.output.full_name)?;
            let msg = DynamicMessage::decode(output, reply).map_err(|e| {
                Failure::Call(
                    format!(
                        "the reply does not decode as `{}`: {e}",
                        method.output.full_name
                    )
                    .into(),
                )
            })?;
            println!("{}", to_json(&msg, req.emit_defaults)?);
            Ok(ExitCode::SUCCESS)
        }
        Err(Exception::User(u)) => {
            println!(
                "{}",
                user_exception_json(req.compiled, method, &u, req.emit_defaults)?
            );
            Ok(ExitCode::FAILURE)
        }
        Err(Exception::System(e)) => Err(system(e)),
    }
}

/// A system exception as the failure text: `TRANSIENT (minor 0x..., completed NO): ...`.
fn system(e: SystemException) -> Failure {
    let text = e.to_string();
    let text = text.strip_prefix("CORBA::").unwrap_or(&text).to_owned();
    Failure::Call(text.into())
}

/// `{"exception": "bank.InsufficientFunds", "repository_id": "IDL:...", "data": {...}}`, or
/// for an exception the method does not declare (or that does not decode), the payload in
/// hex as `"payload_hex"`.
fn user_exception_json(
    compiled: &Compiled,
    method: &Method,
    u: &UserException,
    emit_defaults: bool,
) -> Result<String, Error> {
    let declared = method
        .raises
        .iter()
        .find(|e| e.repository_id == u.repository_id);
    let decoded = declared.and_then(|e| {
        let desc = compiled.pool.get_message_by_name(&e.full_name)?;
        let msg = DynamicMessage::decode(desc, u.payload.clone()).ok()?;
        Some((e, msg))
    });
    let mut obj = serde_json::Map::new();
    match decoded {
        Some((e, msg)) => {
            obj.insert("exception".into(), e.full_name.clone().into());
            obj.insert("repository_id".into(), u.repository_id.clone().into());
            let data: serde_json::Value = serde_json::from_str(&to_json(&msg, emit_defaults)?)?;
            obj.insert("data".into(), data);
        }
        None => {
            obj.insert("exception".into(), serde_json::Value::Null);
            obj.insert("repository_id".into(), u.repository_id.clone().into());
            obj.insert("payload_hex".into(), hex::encode(&u.payload).into());
        }
    }
    Ok(serde_json::to_string_pretty(&serde_json::Value::Object(
        obj,
    ))?)
}
