//! Echo server: activates one `Echo` object, prints its reference (as an `IOR:` string and as a
//! `corbaloc:` URL), and serves until Ctrl-C.
//!
//! ```text
//! cargo run -p orb-examples --bin echo-server                 # terminal 1
//! cargo run -p orb-examples --bin echo-client -- hello        # terminal 2
//! ```
//!
//! The client's default target is this server's default URL,
//! `corbaloc:iiop:1.2@127.0.0.1:12809/echo`. Non-interactively (how the smoke test runs it):
//! `echo-server --port 0 --once` picks a free port, prints the IOR on the first line of its
//! output, serves one request and exits 0; `--serve-for 5s` serves for five seconds.

use clap::Parser;
use orb_examples::errors::describe;
use orb_examples::process::Stop;
use orb_examples::{fail, parse_duration, thread_label};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

// The code generated from `proto/echo.proto` (by `build.rs`, included in `src/lib.rs`).
use orb_examples::proto::echo::{Echo, EchoReply, EchoRequest, EchoSkeleton};

/// echo-server: serves an Echo object and prints its reference.
///
/// It prints the IOR on the first line of its output, then the corbaloc URL.
#[derive(Parser, Debug)]
#[command(name = "echo-server")]
struct Cli {
    /// Port to listen on, on 127.0.0.1 (0 picks a free one).
    #[arg(long, value_name = "N", default_value_t = 12809)]
    port: u16,
    /// Listen address instead, e.g. 0.0.0.0:12809.
    #[arg(long, value_name = "ADDR")]
    listen: Option<String>,
    /// ORB pool threads.
    #[arg(long, value_name = "N", default_value_t = 2)]
    threads: usize,
    /// Exit after serving one request.
    #[arg(long)]
    once: bool,
    /// Exit after DUR (e.g. 30s; 500ms, 1.5s, 2m, or seconds); default: serve until Ctrl-C.
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    serve_for: Option<Duration>,
    /// Exit when standard input closes (for a parent process).
    #[arg(long)]
    exit_on_eof: bool,
    /// Do not log each request.
    #[arg(long)]
    quiet: bool,
}

/// The servant: the object's implementation. The ORB calls it on its own threads, possibly
/// several at once, hence `&self` and an atomic counter.
struct EchoServant {
    served: AtomicU64,
    quiet: bool,
    once: Option<Stop>,
}

impl Echo for EchoServant {
    fn echo(
        &self,
        ctx: &protorb::Context,
        req: EchoRequest,
    ) -> Result<EchoReply, protorb::Exception> {
        let served = self.served.fetch_add(1, Ordering::SeqCst) + 1;
        if !self.quiet {
            let peer = ctx.peer().map_or("?".to_string(), |p| p.to_string());
            println!(
                "request #{served} from {peer} on thread {}: {:?}",
                thread_label(),
                req.text
            );
        }
        if let Some(stop) = &self.once {
            // The reply is still sent: shutdown lets running upcalls finish.
            stop.stop("served one request (--once)");
        }
        Ok(EchoReply {
            text: req.text,
            served,
        })
    }
}

fn main() {
    let Cli {
        port,
        listen,
        threads,
        once,
        serve_for,
        exit_on_eof,
        quiet,
    } = Cli::parse();
    let listen = listen.unwrap_or_else(|| format!("127.0.0.1:{port}"));

    let orb = protorb::Orb::builder()
        .listen(listen.as_str())
        .threads(threads)
        .build()
        .unwrap_or_else(|e| fail(format!("cannot start the ORB: {}", describe(&e))));

    let stop = Stop::new();
    let servant = EchoServant {
        served: AtomicU64::new(0),
        quiet,
        once: once.then(|| stop.clone()),
    };
    // A fixed, readable object key makes a short corbaloc URL: corbaloc:iiop:1.2@host:port/echo.
    let reference = orb.activate(&b"echo"[..], EchoSkeleton::new(servant));

    // The IOR first, alone on its line: programs that start this server read it from there.
    println!("{}", orb.object_to_string(&reference));
    if let Some(url) = reference.to_corbaloc() {
        println!("{url}");
    }
    println!(
        "echo-server: listening on {}; {}",
        orb.listen_addrs()[0],
        match (once, serve_for) {
            (true, _) => "exits after one request".to_string(),
            (false, Some(d)) => format!("serving for {d:?}"),
            (false, None) => "Ctrl-C to stop".to_string(),
        }
    );

    if exit_on_eof {
        stop.on_stdin_eof();
    }
    let reason = stop.wait(serve_for);
    orb.shutdown();
    println!("echo-server: stopped ({reason})");
}
