//! Echo client: calls the `Echo` object of `echo-server` and prints the reply.
//!
//! ```text
//! cargo run -p orb-examples --bin echo-server                 # terminal 1
//! cargo run -p orb-examples --bin echo-client -- hello        # terminal 2
//! cargo run -p orb-examples --bin echo-client -- IOR:0000... hello --count 1000
//! ```
//!
//! The reference may be an `IOR:` string or a `corbaloc:` URL, as the server prints them; by
//! default the client calls `corbaloc:iiop:1.2@127.0.0.1:12809/echo`. Without a server it fails
//! with exit status 1 and one line naming the CORBA exception:
//! `echo-client: server not reachable (TRANSIENT): cannot connect to 127.0.0.1:12809: ...`.

use clap::Parser;
use orb_examples::errors::{describe, describe_exception};
use orb_examples::{fail, parse_duration};
use std::time::{Duration, Instant};

// The code generated from `proto/echo.proto` (by `build.rs`, included in `src/lib.rs`).
use orb_examples::proto::echo::{EchoClient, EchoRequest};

const DEFAULT_TARGET: &str = "corbaloc:iiop:1.2@127.0.0.1:12809/echo";

/// echo-client: calls an Echo object.
///
/// Without a server it fails with exit status 1 and one line naming the CORBA exception.
#[derive(Parser, Debug)]
#[command(name = "echo-client")]
struct Cli {
    /// IOR:... or corbaloc:... as echo-server prints it (default:
    /// corbaloc:iiop:1.2@127.0.0.1:12809/echo). A first argument that starts otherwise is
    /// TEXT.
    reference: Option<String>,
    /// What to send, the words joined by spaces (default: "hello").
    text: Vec<String>,
    /// Call N times and print the mean round trip.
    #[arg(long, value_name = "N", default_value_t = 1)]
    count: u64,
    /// Give up on a call after DUR (500ms, 3s, 1.5s, 2m, or seconds), with TIMEOUT.
    #[arg(long, value_name = "DUR", value_parser = parse_duration, default_value = "5s")]
    timeout: Duration,
}

fn main() {
    let Cli {
        reference,
        text: mut words,
        count,
        timeout,
    } = Cli::parse();
    // The first positional argument is the reference only if it looks like one.
    let target = match reference {
        Some(w) if w.starts_with("IOR:") || w.starts_with("corbaloc:") => w,
        Some(w) => {
            words.insert(0, w);
            DEFAULT_TARGET.to_string()
        }
        None => DEFAULT_TARGET.to_string(),
    };
    let text = if words.is_empty() {
        "hello".to_string()
    } else {
        words.join(" ")
    };

    // A client ORB: it does not need to listen, as nobody calls it back.
    let orb = protorb::Orb::builder()
        .no_listen()
        .threads(0)
        .call_timeout(timeout)
        .build()
        .unwrap_or_else(|e| fail(format!("cannot start the ORB: {}", describe(&e))));
    let reference = orb
        .string_to_object(&target)
        .unwrap_or_else(|e| fail(format!("bad reference {target:?}: {}", describe(&e))));
    // `narrow` checks the type: from the IOR's type id, or (a corbaloc URL has none) by asking
    // the object `_is_a`, which is the first call over the network.
    let echo = EchoClient::narrow(&orb, reference)
        .unwrap_or_else(|e| fail(format!("{}{}", describe(&e), hint(e.kind, &target))));

    let started = Instant::now();
    let mut last = None;
    for _ in 0..count {
        match echo.echo(EchoRequest { text: text.clone() }) {
            Ok(reply) => last = Some(reply),
            Err(e) => fail(format!(
                "{}{}",
                describe_exception(&e),
                e.kind().map_or(String::new(), |k| hint(k, &target))
            )),
        }
    }
    let elapsed = started.elapsed();
    if let Some(reply) = last {
        println!(
            "reply: {:?} (request #{} at the server)",
            reply.text, reply.served
        );
    }
    if count > 1 {
        println!(
            "{count} calls in {:.1} ms: {:.1} µs per round trip",
            elapsed.as_secs_f64() * 1e3,
            elapsed.as_secs_f64() * 1e6 / count as f64
        );
    }
    orb.shutdown();
}

/// What to try next, for the exceptions a newcomer meets first.
fn hint(kind: protorb::SystemExceptionKind, target: &str) -> String {
    match kind {
        protorb::SystemExceptionKind::TRANSIENT if target == DEFAULT_TARGET => {
            "\n  is echo-server running? start it with: cargo run -p orb-examples --bin echo-server"
                .to_string()
        }
        protorb::SystemExceptionKind::TRANSIENT => {
            "\n  is the server at that address running?".into()
        }
        protorb::SystemExceptionKind::OBJECT_NOT_EXIST => {
            "\n  the server runs, but has no object with that key (was it restarted?)".into()
        }
        _ => String::new(),
    }
}
