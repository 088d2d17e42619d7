//! Plumbing shared by the example programs: argument parsing ([`args`]), CORBA exceptions in
//! words ([`errors`]), and the child processes some examples start ([`process`]).
//!
//! None of this is ORB API: each example's own file shows the ORB part in full. Start with
//! `src/echo/server.rs`, then `src/nested.rs` (see `README.md`).
#![warn(missing_docs)]

pub mod args;
pub mod errors;
pub mod process;

/// The code generated from `proto/*.proto` by `build.rs`: one module per protobuf package, with
/// the messages (prost), and per service the servant trait, the skeleton and the client stub.
#[allow(missing_docs)] // proto fields without comments
pub mod proto {
    /// `proto/echo.proto`.
    pub mod echo {
        orb::include_proto!("echo");
    }
    /// `proto/nested.proto`.
    pub mod nested {
        orb::include_proto!("nested");
    }
    /// `proto/observer.proto`.
    pub mod observer {
        orb::include_proto!("observer");
    }
    /// `proto/bank.proto`.
    pub mod bank {
        orb::include_proto!("bank");
    }
}

/// The calling thread, as the examples print it: the OS thread id (Linux's `gettid`, as `top -H`
/// shows it, read from `/proc/thread-self`) or else Rust's `ThreadId`, and the thread's name:
/// `tid 4242 "orb-pool-0"`.
pub fn thread_label() -> String {
    let t = std::thread::current();
    let name = t.name().unwrap_or("unnamed");
    let tid = std::fs::read_link("/proc/thread-self")
        .ok()
        .and_then(|p| p.file_name()?.to_str()?.parse::<u32>().ok());
    match tid {
        Some(tid) => format!("tid {tid} {name:?}"),
        None => format!("{:?} {name:?}", t.id()),
    }
}

/// This program's name (the file name of `argv[0]`), for messages.
pub fn program_name() -> String {
    std::env::args_os()
        .next()
        .as_deref()
        .map(std::path::Path::new)
        .and_then(|p| p.file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "example".to_string())
}

/// Prints `<program>: <message>` to stderr and exits with status 1.
pub fn fail(message: impl std::fmt::Display) -> ! {
    eprintln!("{}: {message}", program_name());
    std::process::exit(1)
}
