//! Plumbing shared by the example programs: durations on the command line
//! ([`parse_duration`]; the programs parse their arguments with clap), CORBA exceptions in
//! words ([`errors`]), and the child processes some examples start ([`process`]).
//!
//! None of this is ORB API: each example's own file shows the ORB part in full. Start with
//! `src/echo/server.rs`, then `src/nested.rs` (see `README.md`).
#![warn(missing_docs)]

pub mod errors;
pub mod process;

/// The code generated from `proto/*.proto` by `build.rs`: one module per protobuf package, with
/// the messages (prost), and per service the servant trait, the skeleton and the client stub.
#[allow(missing_docs)] // proto fields without comments
pub mod proto {
    /// `proto/echo.proto`.
    pub mod echo {
        protorb::include_proto!("echo");
    }
    /// `proto/nested.proto`.
    pub mod nested {
        protorb::include_proto!("nested");
    }
    /// `proto/observer.proto`.
    pub mod observer {
        protorb::include_proto!("observer");
    }
    /// `proto/bank.proto`.
    pub mod bank {
        protorb::include_proto!("bank");
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

/// Parses a duration given on the command line: `500ms`, `3s`, `1.5s`, `2m`, or a bare number
/// of seconds. A clap value parser: `#[arg(long, value_parser = parse_duration)]`.
pub fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let s = s.trim();
    let (number, scale) = if let Some(n) = s.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60.0)
    } else {
        (s, 1.0)
    };
    let n: f64 = number
        .trim()
        .parse()
        .map_err(|_| "expected a duration such as 500ms, 3s or 2m".to_string())?;
    std::time::Duration::try_from_secs_f64(n * scale).map_err(|e| e.to_string())
}

/// Prints `<program>: <message>` to stderr and exits with status 1.
pub fn fail(message: impl std::fmt::Display) -> ! {
    eprintln!("{}: {message}", program_name());
    std::process::exit(1)
}

#[cfg(test)]
mod tests {
    use super::parse_duration;
    use std::time::Duration;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("3s"), Ok(Duration::from_secs(3)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("4"), Ok(Duration::from_secs(4)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("").is_err());
    }
}
