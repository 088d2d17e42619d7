//! `orb-bench`: the benchmark protocol of `shared/bench/PROTOCOL.md` for the ORB (`--impl orb`,
//! the default), for a raw-TCP baseline (`--impl raw`) and for gRPC (`--impl tonic`) in one
//! binary.
//!
//! ```text
//! orb-bench server --port PORT --threads T [--impl orb|raw|raw-epoll|tonic]   # until SIGTERM/SIGINT
//! orb-bench client --port PORT lat|lat-async|tput [N]|tput-async [N]|big [--impl IMPL] [--quick] [--client-threads T] [--no-driver] [--driver-task] [--in-task] [--listen]
//! orb-bench nest --depth D [--threads T] [--impl orb|raw|raw-epoll|tonic] [--bidir]
//! orb-bench report FILE...                                    # markdown tables of run.sh files
//! ```
//!
//! Every command prints one JSON line on stdout (the server when it stops); everything else
//! goes to stderr. A wrong reply exits non-zero. `--port 0` picks a free port; the server says
//! which in its `listening on 127.0.0.1:PORT` line. `--quick` shrinks the workloads for smoke
//! runs (not the protocol's numbers). `--client-threads T` gives the client ORB T pool threads
//! (default: 0 for `lat` and `big`, one caller at a time; 2, the ORB's default, for `tput`;
//! see `orb_impl::client_orb`; 0 for `lat-async` and `tput-async`, whose replies the runtime's
//! thread reads itself, the workload's future driving the event loop with
//! `protorb::tokio::drive_with` (`--driver-task`: a `protorb::tokio::drive` task instead), or 2
//! with `--no-driver`, when only pool threads read them). The client's JSON line says which it used. For `--impl tonic` it is the
//! client runtime's worker threads (see `tonic_impl`). `examples/bench/run.sh` runs everything
//! side by side.
//!
//! `--listen` gives the client ORB a listener (on a free loopback port), as a server process
//! that calls out has: its callers then wait for replies through the pool's poll, which must
//! watch the listener too, instead of reading their connection (PROFILE.md, "2026-12-07,
//! 19:40-22:40 UTC"). The JSON line then has `"listen":true`.
//!
//! `--impl orb-tls` is the ORB over mutual TLS (rustls; see `tls`), for the cost of TLS beside
//! `orb`: the same workloads, the same JSON lines with `"impl":"orb-tls"`.
//!
//! `lat-async` and `tput-async N` (default 1,000) are the asynchronous workloads: one client
//! thread running a tokio current-thread runtime, one call awaited at a time (`lat-async`) or
//! N calls kept in flight over one connection (`tput-async`); raw has neither.
//!
//! The raw baseline and tonic have no `nest` (no object references to call back): `--impl raw nest`
//! prints `"ok":false,"error":"not applicable ..."` and exits 0.

mod metrics;
mod orb_impl;
mod raw;
mod report;
mod tls;
mod tonic_impl;
mod workload;

use metrics::{peak_rss_kb, JsonLine};
use std::process::ExitCode;
use workload::{EchoConn, Params};

const USAGE: &str = "usage:
  orb-bench server --port PORT --threads T [--impl orb|raw|raw-epoll|tonic]
  orb-bench client --port PORT lat|lat-async|tput [N]|tput-async [N]|big
                   [--impl orb|raw|raw-epoll|tonic] [--quick] [--client-threads T] [--no-driver] [--driver-task] [--in-task] [--listen]
  orb-bench nest --depth D [--threads T] [--impl orb|raw|raw-epoll|tonic] [--bidir]
  orb-bench report FILE...";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Impl {
    Orb,
    Raw,
    /// The baseline with an epoll wait before each read (a diagnostic, see `raw`).
    RawEpoll,
    /// gRPC (tonic over tokio), a comparison.
    Tonic,
}

impl Impl {
    fn name(self) -> &'static str {
        match self {
            Impl::Orb if tls::enabled() => "orb-tls",
            Impl::Orb => "orb",
            Impl::Raw => "raw",
            Impl::RawEpoll => "raw-epoll",
            Impl::Tonic => "tonic",
        }
    }
}

#[derive(Debug)]
struct Args {
    command: String,
    positional: Vec<String>,
    imp: Impl,
    port: Option<u16>,
    threads: Option<usize>,
    depth: Option<u32>,
    quick: bool,
    client_threads: Option<usize>,
    /// `--no-driver`: asynchronous workloads without `protorb::tokio::drive`.
    no_driver: bool,
    /// `--in-task`: `lat-async` runs its calls in a spawned task (see `Params`).
    in_task: bool,
    /// `--driver-task`: the ORB's driver is a task of its own (`protorb::tokio::drive`)
    /// instead of running inside the workload's future (`drive_with`).
    driver_task: bool,
    /// `--bidir`: `nest` with bidirectional GIOP (each node accepts the other's callbacks
    /// over the connection it opened), reported as `"impl":"orb-bidir"`.
    bidir: bool,
    /// `--listen`: the client ORB listens (see the module's doc).
    listen: bool,
}

fn parse_args(mut it: impl Iterator<Item = String>) -> Result<Args, String> {
    let command = it.next().ok_or("missing command")?;
    let mut a = Args {
        command,
        positional: Vec::new(),
        imp: Impl::Orb,
        port: None,
        threads: None,
        depth: None,
        quick: false,
        client_threads: None,
        no_driver: false,
        in_task: false,
        driver_task: false,
        bidir: false,
        listen: false,
    };
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--impl" => {
                a.imp = match value("--impl")?.as_str() {
                    "orb" => Impl::Orb,
                    "orb-tls" => {
                        tls::enable();
                        Impl::Orb
                    }
                    "raw" => Impl::Raw,
                    "raw-epoll" => Impl::RawEpoll,
                    "tonic" => Impl::Tonic,
                    other => return Err(format!("unknown implementation `{other}`")),
                }
            }
            "--port" => a.port = Some(parse(&value("--port")?, "--port")?),
            "--threads" => a.threads = Some(parse(&value("--threads")?, "--threads")?),
            "--depth" => a.depth = Some(parse(&value("--depth")?, "--depth")?),
            "--quick" => a.quick = true,
            "--no-driver" => a.no_driver = true,
            "--in-task" => a.in_task = true,
            "--driver-task" => a.driver_task = true,
            "--bidir" => a.bidir = true,
            "--listen" => a.listen = true,
            "--client-threads" => {
                a.client_threads = Some(parse(&value("--client-threads")?, "--client-threads")?);
            }
            "-h" | "--help" => return Err(String::new()),
            s if s.starts_with("--") => return Err(format!("unknown option `{s}`")),
            _ => a.positional.push(arg),
        }
    }
    Ok(a)
}

fn parse<T: std::str::FromStr>(s: &str, what: &str) -> Result<T, String> {
    s.parse().map_err(|_| format!("bad value `{s}` for {what}"))
}

fn main() -> ExitCode {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("orb-bench: {e}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("orb-bench {}: {e}", args.command);
            ExitCode::FAILURE
        }
    }
}

/// Runs a command; `Ok(false)` is a completed run that failed (a `nest` that did not finish).
fn run(a: &Args) -> Result<bool, String> {
    match a.command.as_str() {
        "server" => {
            let port = a.port.ok_or("server needs --port")?;
            let threads = a.threads.ok_or("server needs --threads")?;
            // Registered before "listening" is printed, so a signal sent right after it is
            // seen. signal-hook's iterator is a self-pipe: safe code, and no polling.
            let mut signals = signal_hook::iterator::Signals::new([
                signal_hook::consts::SIGTERM,
                signal_hook::consts::SIGINT,
            ])
            .map_err(|e| format!("cannot handle signals: {e}"))?;
            let wait = move || {
                let _ = signals.forever().next();
            };
            match a.imp {
                Impl::Orb => orb_impl::server(port, threads, wait)?,
                Impl::Raw => raw::server(port, false, wait)?,
                Impl::RawEpoll => raw::server(port, true, wait)?,
                Impl::Tonic => tonic_impl::server(port, threads, wait)?,
            }
            Ok(true)
        }
        "client" => client(a).map(|()| true),
        "nest" => {
            let depth = a.depth.ok_or("nest needs --depth")?;
            let threads = a.threads.unwrap_or(1);
            match a.imp {
                Impl::Orb => orb_impl::nest(depth, threads, a.bidir),
                Impl::Raw | Impl::RawEpoll | Impl::Tonic => {
                    JsonLine::new()
                        .str("impl", a.imp.name())
                        .str("workload", "nest")
                        .int("depth", u64::from(depth))
                        .int("threads", threads as u64)
                        .bool("ok", false)
                        .str("error", "not applicable: no object references to call back")
                        .print();
                    Ok(true)
                }
            }
        }
        "nest-peer" => orb_impl::nest_peer(a.threads.unwrap_or(1), a.bidir).map(|()| true),
        "report" => {
            if a.positional.is_empty() {
                return Err("report needs a file".into());
            }
            report::print(&a.positional).map(|()| true)
        }
        other => Err(format!("unknown command `{other}`\n{USAGE}")),
    }
}

fn client(a: &Args) -> Result<(), String> {
    let port = a.port.ok_or("client needs --port")?;
    if a.listen && a.imp != Impl::Orb {
        return Err("--listen is for the ORB's client (--impl orb or orb-tls)".into());
    }
    let params = if a.quick {
        Params {
            lat_warmup: 200,
            lat_calls: 2_000,
            tput_warmup: std::time::Duration::from_millis(200),
            tput_measure: std::time::Duration::from_secs(1),
            big_warmup: 2,
            big_calls: 20,
            lat_async_in_task: false,
        }
    } else {
        Params::default()
    };
    let params = Params {
        lat_async_in_task: a.in_task,
        ..params
    };
    let workload = a.positional.first().ok_or("client needs a workload")?;
    let imp = a.imp.name();
    let outcome = match (a.imp, workload.as_str()) {
        (Impl::Orb, "lat" | "big") => {
            let threads = a.client_threads.unwrap_or(orb_impl::SINGLE_CALLER_THREADS);
            let orb = orb_impl::client_orb(threads, a.listen)?;
            let client = orb_impl::echo_client(&orb, port)?;
            let mut conn = orb_impl::OrbConn(&client);
            let r = single(&mut conn, workload, &params, imp);
            orb_impl::report_client_stats(&orb, workload);
            orb.shutdown();
            let mut r = r?;
            r.line = r.line.int("client_threads", threads as u64);
            r
        }
        (Impl::Raw | Impl::RawEpoll, "lat" | "big") => {
            let mut conn = raw::RawConn::connect(port, a.imp == Impl::RawEpoll)?;
            single(&mut conn, workload, &params, imp)?
        }
        (Impl::Tonic, "lat" | "big") => {
            let threads = a.client_threads.unwrap_or(0);
            let rt = tonic_impl::client_runtime(threads)?;
            let client = tonic_impl::channel(&rt, port, 1)?;
            let mut conn = tonic_impl::TonicConn { rt: &rt, client };
            let mut r = single(&mut conn, workload, &params, imp)?;
            r.line = r.line.int("client_threads", threads as u64);
            r
        }
        (Impl::Orb, "lat-async" | "tput-async") => {
            let driven = !a.no_driver;
            let threads = a.client_threads.unwrap_or(if driven {
                orb_impl::DRIVEN_ASYNC_CALLER_THREADS
            } else {
                orb_impl::ASYNC_CALLER_THREADS
            });
            let orb = orb_impl::client_orb(threads, a.listen)?;
            let conn = orb_impl::OrbAsyncConn {
                stub: std::sync::Arc::new(orb_impl::echo_client(&orb, port)?),
                drive_inline: (driven && !a.driver_task).then(|| orb.clone()),
            };
            let rt = workload::current_thread_runtime()?;
            // `--driver-task`: the driver is a task of its own on the runtime's one thread,
            // beside the workload's; otherwise the workload's future drives the loop itself.
            let driver =
                (driven && a.driver_task).then(|| rt.spawn(protorb::tokio::drive(orb.clone())));
            let r = if workload == "lat-async" {
                workload::lat_async(&rt, conn, &params, imp)
            } else {
                workload::tput_async(&rt, conn, inflight(a)?, &params, imp)
            };
            orb_impl::report_client_stats(&orb, workload);
            let opened = orb.stats().connections_opened;
            orb.shutdown();
            if let Some(d) = driver {
                rt.block_on(d)
                    .map_err(|e| format!("driver task: {e}"))?
                    .map_err(|e| format!("driver: {e}"))?;
            }
            let mut r = r?;
            assert_eq!(opened, 1, "{workload} must use one connection");
            r.line = r.line.int("client_threads", threads as u64).str(
                "driver",
                match (driven, a.driver_task) {
                    (false, _) => "none",
                    (true, false) => "drive_with",
                    (true, true) => "task",
                },
            );
            r
        }
        (Impl::Tonic, "lat-async" | "tput-async") => {
            let rt = workload::current_thread_runtime()?;
            let n = if workload == "lat-async" {
                1
            } else {
                inflight(a)?
            };
            let conn = tonic_impl::TonicAsyncConn(tonic_impl::channel(&rt, port, n)?);
            let mut r = if workload == "lat-async" {
                workload::lat_async(&rt, conn, &params, imp)?
            } else {
                workload::tput_async(&rt, conn, n, &params, imp)?
            };
            r.line = r.line.int("client_threads", 0);
            r
        }
        (_, "tput") => {
            let n: usize = match a.positional.get(1) {
                Some(s) => parse(s, "tput N")?,
                None => 32,
            };
            if n == 0 {
                return Err("tput needs at least one thread".into());
            }
            match a.imp {
                Impl::Orb => {
                    let threads = a.client_threads.unwrap_or(orb_impl::MANY_CALLER_THREADS);
                    let orb = orb_impl::client_orb(threads, a.listen)?;
                    // ONE stub, hence one connection, shared by all N threads.
                    let client = orb_impl::echo_client(&orb, port)?;
                    let make = |_| Ok(orb_impl::OrbConn(&client));
                    let r = workload::tput(n, &make, &params, imp);
                    orb_impl::report_client_stats(&orb, "tput");
                    let opened = orb.stats().connections_opened;
                    orb.shutdown();
                    let mut r = r?;
                    assert_eq!(opened, 1, "tput must multiplex one connection");
                    r.line = r.line.int("client_threads", threads as u64);
                    r
                }
                Impl::Raw | Impl::RawEpoll => {
                    let make = |_| raw::RawConn::connect(port, a.imp == Impl::RawEpoll);
                    workload::tput(n, &make, &params, imp)?
                }
                Impl::Tonic => {
                    let threads = a
                        .client_threads
                        .unwrap_or(tonic_impl::TPUT_CLIENT_THREADS)
                        .max(1);
                    let rt = tonic_impl::client_runtime(threads)?;
                    // ONE channel, hence one HTTP/2 connection; each thread a clone of it.
                    let client = tonic_impl::channel(&rt, port, n)?;
                    let make = |_| {
                        Ok(tonic_impl::TonicConn {
                            rt: &rt,
                            client: client.clone(),
                        })
                    };
                    let mut r = workload::tput(n, &make, &params, imp)?;
                    r.line = r.line.int("client_threads", threads as u64);
                    r
                }
            }
        }
        (Impl::Raw | Impl::RawEpoll, "lat-async" | "tput-async") => {
            return Err(format!(
                "{workload}: not implemented for {imp} (orb, tonic)"
            ));
        }
        (_, other) => {
            return Err(format!(
                "unknown workload `{other}` (lat, lat-async, tput [N], tput-async [N], big)"
            ))
        }
    };
    let mut line = outcome.line;
    if a.listen {
        line = line.bool("listen", true);
    }
    line.int("peak_rss_kb", peak_rss_kb()).print();
    Ok(())
}

/// The N of `tput-async [N]`: calls in flight, default 1,000.
fn inflight(a: &Args) -> Result<usize, String> {
    let n: usize = match a.positional.get(1) {
        Some(s) => parse(s, "tput-async N")?,
        None => 1_000,
    };
    if n == 0 {
        return Err("tput-async needs at least one call in flight".into());
    }
    Ok(n)
}

fn single(
    conn: &mut impl EchoConn,
    workload: &str,
    p: &Params,
    imp: &str,
) -> Result<workload::Outcome, String> {
    if workload == "lat" {
        workload::lat(conn, p, imp)
    } else {
        workload::big(conn, p, imp)
    }
}
