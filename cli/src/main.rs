//! `orb`: a command-line tool for the protorb ORB and any CORBA peer (omniORB, ...).
//!
//! - `orb ior REF`: decode an `IOR:` string or a `corbaloc:` URL (like omniORB's `catior`);
//! - `orb ping REF`: call `_non_existent` and time the round trips;
//! - `orb call REF Service.Method --proto FILE [-I DIR]... --json '{...}'`: call an operation
//!   of an orb object described by a .proto, with the request given as JSON and the reply (or
//!   the user exception) printed as JSON, like grpcurl. `--json -` reads standard input,
//!   `--json @FILE` a file; without `--json` the request is `{}`. A oneway method prints
//!   nothing. A system exception is printed on standard error by kind,
//!   `orb: TRANSIENT (minor 0x52420005, completed NO): ...`;
//! - `orb idl --proto FILE [-I DIR]...`: print the CORBA IDL of the services, for omniORB or
//!   any other ORB to call or serve them (one `Octets` parameter and result per operation, the
//!   runtime's repository ids in `#pragma ID`; see `protorb_idl::corba`);
//! - `orb ns --ns HOST:PORT ls|resolve|bind|unbind`: use a CosNaming service (omniNames).
//!
//! Exit codes: 0 success; 1 the command failed (bad input, a call failed or raised an
//! exception, the object does not exist, a name is not bound); 2 bad command-line arguments
//! (clap's own, and for `orb call` and `orb idl` a .proto that does not compile, an unknown
//! service or method, JSON that does not fit the request message, a reference that does not
//! parse).
//!
//! ```text
//! $ orb call corbaloc:iiop:1.2@127.0.0.1:12809/echo echo.Echo.Echo \
//!       --proto examples/proto/echo.proto --json '{"text": "hi"}'
//! {
//!   "text": "hi",
//!   "served": "1"
//! }
//! $ orb idl --proto examples/proto/echo.proto > echo.idl && omniidl -bcxx echo.idl
//! ```

mod call;
mod ior;

use clap::{Args, Parser, Subcommand};
use protorb::{ObjectProxy, ObjectRef, Orb, SystemException, SystemExceptionKind};
use protorb_naming::{BindingType, Name, NamingContext, NamingError};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Command-line tool for CORBA object references, objects and naming services.
#[derive(Parser, Debug)]
#[command(name = "orb", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Decode an IOR string or a corbaloc URL (type id, profiles, components), like catior.
    Ior(IorArgs),
    /// Call `_non_existent` on an object and print the round-trip times.
    Ping(PingArgs),
    /// Call an operation described by a .proto: the request as JSON, the reply printed as JSON.
    Call(CallArgs),
    /// Print the CORBA IDL of the services in .proto files (for omniORB and other ORBs).
    Idl(IdlArgs),
    /// Use a CosNaming service (such as omniORB's omniNames).
    Ns(NsArgs),
}

#[derive(Args, Debug)]
struct ProtoArgs {
    /// A .proto file with the service (repeat for more; imports are found on the include path).
    #[arg(long = "proto", value_name = "FILE", required = true)]
    protos: Vec<PathBuf>,
    /// An include directory for imports (repeatable; default: the directory of each .proto).
    /// `orb/options.proto` and the Google well-known types are built in.
    #[arg(short = 'I', long = "include", value_name = "DIR")]
    includes: Vec<PathBuf>,
}

#[derive(Args, Debug)]
struct CallArgs {
    /// The object: `IOR:<hex>` or a corbaloc URL (`-` reads it from standard input).
    reference: String,
    /// The method: `Service.Method`, or `package.Service.Method` (`/` also separates).
    method: String,
    #[command(flatten)]
    proto: ProtoArgs,
    /// The request message as JSON (protobuf's JSON mapping); `-` reads standard input,
    /// `@FILE` a file.
    #[arg(long, value_name = "JSON", default_value = "{}")]
    json: String,
    /// Print fields that have their default value (zero, empty) too.
    #[arg(long)]
    emit_defaults: bool,
    /// Timeout of the call (and of connecting), in milliseconds.
    #[arg(short = 't', long, default_value_t = 5000, value_parser = clap::value_parser!(u64).range(1..))]
    timeout: u64,
}

#[derive(Args, Debug)]
struct IdlArgs {
    #[command(flatten)]
    proto: ProtoArgs,
}

#[derive(Args, Debug)]
struct IorArgs {
    /// The reference: `IOR:<hex>` or `corbaloc:iiop:1.2@host:port/key` (`-` reads it from
    /// standard input).
    reference: String,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct PingArgs {
    /// The object: `IOR:<hex>` or a corbaloc URL.
    reference: String,
    /// Number of calls.
    #[arg(short = 'c', long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..))]
    count: u32,
    /// Timeout of each call (and of connecting), in milliseconds.
    #[arg(short = 't', long, default_value_t = 5000, value_parser = clap::value_parser!(u64).range(1..))]
    timeout: u64,
}

#[derive(Args, Debug)]
struct NsArgs {
    /// The naming service's address (its root context, object key `NameService`).
    #[arg(
        long,
        global = true,
        value_name = "HOST:PORT",
        default_value = "127.0.0.1:2809"
    )]
    ns: String,
    /// Timeout of each naming call, in milliseconds.
    #[arg(short = 't', long, global = true, default_value_t = 5000, value_parser = clap::value_parser!(u64).range(1..))]
    timeout: u64,
    #[command(subcommand)]
    command: NsCommand,
}

#[derive(Subcommand, Debug)]
enum NsCommand {
    /// List the bindings of the root context, or of the context NAME.
    Ls {
        /// A context's name (`a/b.kind`, the CosNaming string form); the root if left out.
        name: Option<String>,
    },
    /// Resolve NAME and print its IOR string.
    Resolve {
        /// The name (`a/b.kind`).
        name: String,
    },
    /// Bind NAME to the object REF (fails if NAME is bound already; see --force).
    Bind {
        /// The name (`a/b.kind`).
        name: String,
        /// The object: `IOR:<hex>` or a corbaloc URL.
        reference: String,
        /// Replace an existing binding (`rebind`).
        #[arg(short, long)]
        force: bool,
    },
    /// Remove the binding of NAME.
    Unbind {
        /// The name (`a/b.kind`).
        name: String,
    },
}

/// An error the tool reports and exits 1 on.
type Error = Box<dyn std::error::Error>;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Ior(a) => cmd_ior(&a),
        Command::Ping(a) => cmd_ping(&a),
        Command::Call(a) => return run_failure(cmd_call(&a)),
        Command::Idl(a) => return run_failure(cmd_idl(&a)),
        Command::Ns(a) => cmd_ns(&a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("orb: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Exit code and message of the commands that tell bad arguments (2) from failures (1).
fn run_failure(result: Result<ExitCode, call::Failure>) -> ExitCode {
    match result {
        Ok(code) => code,
        Err(call::Failure::Usage(e)) => {
            eprintln!("orb: {e}");
            ExitCode::from(call::USAGE)
        }
        Err(call::Failure::Call(e)) => {
            eprintln!("orb: {e}");
            ExitCode::FAILURE
        }
    }
}

fn cmd_call(a: &CallArgs) -> Result<ExitCode, call::Failure> {
    if a.reference == "-" && a.json == "-" {
        return Err(call::Failure::Usage(
            "the reference and the JSON cannot both come from standard input".into(),
        ));
    }
    let compiled = call::compile(&a.proto.protos, &a.proto.includes)?;
    // Everything the user gave is checked before connecting.
    let (_, method) = call::find(&compiled, &a.method)?;
    let json = call::read_json(&a.json)?;
    let input = compiled
        .pool
        .get_message_by_name(&method.input.full_name)
        .ok_or_else(|| call::Failure::Usage(format!("no message `{}`", method.input.full_name)))?;
    call::request_from_json(input, &json)?;
    let target = parse_ref(&a.reference).map_err(|e| call::Failure::Usage(e.to_string()))?;
    let timeout = Duration::from_millis(a.timeout);
    let orb = client_orb(timeout).map_err(|e| call::Failure::Call(e.into()))?;
    let proxy = ObjectProxy::new(&orb, target);
    let result = call::call(
        &proxy,
        &call::CallRequest {
            compiled: &compiled,
            method: &a.method,
            json: &json,
            emit_defaults: a.emit_defaults,
            timeout,
        },
    );
    orb.shutdown();
    result
}

fn cmd_idl(a: &IdlArgs) -> Result<ExitCode, call::Failure> {
    let compiled = call::compile(&a.proto.protos, &a.proto.includes)?;
    print!("{}", protorb_idl::corba::to_corba_idl(&compiled.model));
    Ok(ExitCode::SUCCESS)
}

/// Reads a reference argument (`-`: standard input) and parses it.
fn parse_ref(arg: &str) -> Result<ObjectRef, Error> {
    let text = if arg == "-" {
        std::io::read_to_string(std::io::stdin())?
    } else {
        arg.to_owned()
    };
    ObjectRef::parse(&text).map_err(|e| format!("cannot decode the reference: {e}").into())
}

fn cmd_ior(a: &IorArgs) -> Result<ExitCode, Error> {
    let r = parse_ref(&a.reference)?;
    if a.json {
        println!("{}", ior::describe_json(&r));
    } else {
        print!("{}", ior::describe_text(&r));
    }
    Ok(ExitCode::SUCCESS)
}

/// A client-only ORB: no listening socket, the calling thread drives the calls.
fn client_orb(timeout: Duration) -> Result<Orb, SystemException> {
    Orb::builder()
        .no_listen()
        .threads(0)
        .call_timeout(timeout)
        .connect_timeout(timeout)
        .build()
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn cmd_ping(a: &PingArgs) -> Result<ExitCode, Error> {
    let target = parse_ref(&a.reference)?;
    let Some(p) = target.primary() else {
        return Err("the reference has no IIOP profile (nil or another protocol)".into());
    };
    println!(
        "PING {}:{} key \"{}\" (IIOP {}.{})",
        p.host,
        p.port,
        ior::escape(&p.object_key),
        p.version.major,
        p.version.minor
    );
    let orb = client_orb(Duration::from_millis(a.timeout))?;
    let proxy = ObjectProxy::new(&orb, target);
    let mut times = Vec::new();
    let mut outcome = Ok(false);
    for seq in 1..=a.count {
        let start = Instant::now();
        let r = proxy.non_existent();
        let rtt = start.elapsed();
        match r {
            Ok(non_existent) => {
                println!(
                    "seq={seq} time={:.3} ms non_existent={non_existent}",
                    millis(rtt)
                );
                times.push(rtt);
                outcome = Ok(non_existent);
                if non_existent {
                    break;
                }
            }
            Err(e) => {
                println!("seq={seq} time={:.3} ms {}", millis(rtt), e.kind);
                outcome = Err(e);
                break;
            }
        }
    }
    orb.shutdown();
    if !times.is_empty() {
        times.sort();
        let median = if times.len() % 2 == 1 {
            times[times.len() / 2]
        } else {
            (times[times.len() / 2 - 1] + times[times.len() / 2]) / 2
        };
        println!(
            "{} call(s): min {:.3} ms, median {:.3} ms, max {:.3} ms",
            times.len(),
            millis(times[0]),
            millis(median),
            millis(times[times.len() - 1])
        );
    }
    match outcome {
        Ok(false) => {
            println!("the object exists");
            Ok(ExitCode::SUCCESS)
        }
        Ok(true) => {
            println!("the object does not exist (non_existent = true)");
            Ok(ExitCode::FAILURE)
        }
        Err(e) if e.kind == SystemExceptionKind::OBJECT_NOT_EXIST => {
            println!("the object does not exist (OBJECT_NOT_EXIST)");
            Ok(ExitCode::FAILURE)
        }
        Err(e) => Err(format!("ping failed: {e}").into()),
    }
}

/// `HOST:PORT` (the host may be a bracketed IPv6 literal).
fn parse_host_port(s: &str) -> Result<(String, u16), Error> {
    let bad = || format!("--ns must be HOST:PORT, not `{s}`");
    let (host, port) = s.rsplit_once(':').ok_or_else(bad)?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if host.is_empty() {
        return Err(bad().into());
    }
    let port = port.parse::<u16>().map_err(|_| bad())?;
    Ok((host.to_owned(), port))
}

fn parse_name(s: &str) -> Result<Name, Error> {
    Name::parse(s).map_err(|e| format!("bad name `{s}`: {e}").into())
}

fn naming(what: &str, name: &str, e: NamingError) -> Error {
    format!("{what} `{name}`: {e}").into()
}

fn cmd_ns(a: &NsArgs) -> Result<ExitCode, Error> {
    let (host, port) = parse_host_port(&a.ns)?;
    let timeout = Duration::from_millis(a.timeout);
    let orb = client_orb(timeout)?;
    let root = NamingContext::at(&orb, &host, port).with_timeout(timeout);
    let result = ns_command(&root, &a.command);
    orb.shutdown();
    result.map(|()| ExitCode::SUCCESS)
}

fn ns_command(root: &NamingContext, cmd: &NsCommand) -> Result<(), Error> {
    match cmd {
        NsCommand::Ls { name } => {
            let ctx = match name {
                None => root.clone(),
                Some(n) => root
                    .resolve_context(&parse_name(n)?)
                    .map_err(|e| naming("cannot resolve the context", n, e))?,
            };
            let mut list = ctx
                .list_all(100)
                .map_err(|e| naming("cannot list", name.as_deref().unwrap_or("/"), e))?;
            list.sort_by_key(|b| b.name.to_string());
            for b in list {
                match b.binding_type {
                    BindingType::Context => println!("{}/", b.name),
                    BindingType::Object => println!("{}", b.name),
                }
            }
        }
        NsCommand::Resolve { name } => {
            let r = root
                .resolve(&parse_name(name)?)
                .map_err(|e| naming("cannot resolve", name, e))?;
            println!("{}", r.to_ior_string());
        }
        NsCommand::Bind {
            name,
            reference,
            force,
        } => {
            let n = parse_name(name)?;
            let r = parse_ref(reference)?;
            if *force {
                root.rebind(&n, &r)
            } else {
                root.bind(&n, &r)
            }
            .map_err(|e| naming("cannot bind", name, e))?;
        }
        NsCommand::Unbind { name } => {
            root.unbind(&parse_name(name)?)
                .map_err(|e| naming("cannot unbind", name, e))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn host_port() {
        assert_eq!(parse_host_port("h:2809").ok(), Some(("h".to_owned(), 2809)));
        assert_eq!(parse_host_port("[::1]:9").ok(), Some(("::1".to_owned(), 9)));
        assert!(parse_host_port("h").is_err());
        assert!(parse_host_port(":1").is_err());
        assert!(parse_host_port("h:x").is_err());
    }
}
