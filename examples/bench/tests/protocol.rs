//! The benchmark binary speaks PROTOCOL.md: each command prints one JSON line with the
//! protocol's fields (smoke-sized workloads, both implementations).

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_orb-bench");

struct Server {
    child: Child,
    port: u16,
}

impl Server {
    fn start(imp: &str) -> Server {
        Server::start_program(BIN, imp)
    }

    fn start_program(program: &str, imp: &str) -> Server {
        let mut child = Command::new(program)
            .args(["server", "--port", "0", "--threads", "2", "--impl", imp])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("server starts");
        let err = child.stderr.take().expect("stderr");
        let mut lines = BufReader::new(err).lines();
        let port = loop {
            let line = lines
                .next()
                .expect("server printed its address")
                .expect("readable");
            if let Some(p) = line.strip_prefix("listening on 127.0.0.1:") {
                break p.parse().expect("a port");
            }
        };
        // Keep draining stderr so the server never blocks on it.
        std::thread::spawn(move || for _ in lines {});
        Server { child, port }
    }

    /// SIGTERM (via `kill`, no unsafe code here), then the server's JSON line.
    fn stop(mut self) -> Value {
        let ok = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill runs")
            .success();
        assert!(ok);
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.child.try_wait().expect("wait").is_none() {
            assert!(Instant::now() < deadline, "server did not stop on SIGTERM");
            std::thread::sleep(Duration::from_millis(10));
        }
        let out = self.child.wait_with_output().expect("output");
        assert!(out.status.success(), "server exit status {}", out.status);
        json_line(&out.stdout)
    }
}

fn json_line(stdout: &[u8]) -> Value {
    let text = String::from_utf8_lossy(stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "exactly one line on stdout: {text:?}");
    serde_json::from_str(lines[0]).expect("valid JSON")
}

fn run(args: &[&str]) -> Value {
    run_program(BIN, args)
}

fn run_program(program: &str, args: &[&str]) -> Value {
    let out = Command::new(program).args(args).output().expect("runs");
    assert!(
        out.status.success(),
        "{args:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    json_line(&out.stdout)
}

fn client(imp: &str, port: u16, workload: &[&str]) -> Value {
    let port = port.to_string();
    let mut args = vec!["client", "--impl", imp, "--port", &port];
    args.extend_from_slice(workload);
    args.push("--quick");
    run(&args)
}

fn has(v: &Value, fields: &[&str]) {
    for f in fields {
        assert!(v.get(f).is_some(), "field `{f}` missing in {v}");
    }
}

/// Runs lat, tput 4 and big through `client` (smoke-sized) and checks each line's fields.
fn client_lines_follow_the_protocol(imp: &str, client: impl Fn(&[&str]) -> Value) {
    let lat = client(&["lat"]);
    has(
        &lat,
        &[
            "impl",
            "workload",
            "calls",
            "p50_us",
            "p99_us",
            "p999_us",
            "mean_us",
            "rps",
            "ctx_switches_per_call",
            "peak_rss_kb",
        ],
    );
    assert_eq!(lat["impl"], imp);
    assert_eq!(lat["calls"], 2000);
    let tput = client(&["tput", "4"]);
    has(
        &tput,
        &["threads", "calls", "rps", "p50_us", "p99_us", "peak_rss_kb"],
    );
    assert_eq!(tput["threads"], 4);
    assert!(tput["calls"].as_u64().unwrap() > 0);
    let big = client(&["big"]);
    has(&big, &["calls", "mb_per_s", "p50_us"]);
}

/// Checks the line a server prints when it stops.
fn server_line_follows_the_protocol(s: &Value, imp: &str) {
    has(
        s,
        &[
            "impl",
            "role",
            "calls",
            "ctx_switches_per_call",
            "peak_rss_kb",
        ],
    );
    assert_eq!(s["impl"], imp);
}

#[test]
fn every_implementation_speaks_the_protocol() {
    // raw-epoll's big calls also cover its waits for a writable socket (1 MiB messages).
    for imp in ["orb", "raw", "raw-epoll"] {
        let server = Server::start(imp);
        client_lines_follow_the_protocol(imp, |w| client(imp, server.port, w));
        let s = server.stop();
        server_line_follows_the_protocol(&s, imp);
        // Warm-up calls included; tput counts only its window.
        assert!(s["calls"].as_u64().unwrap() >= 2_200 + 22);
    }
}

/// The asynchronous workloads: `lat-async` and `tput-async N` (one current-thread runtime, N
/// calls in flight over one connection) print the protocol's fields, for the ORB (its
/// generated `echo_async`) and tonic.
fn async_lines_follow_the_protocol(imp: &str, port: u16) {
    let lat = client(imp, port, &["lat-async"]);
    has(
        &lat,
        &[
            "impl",
            "workload",
            "calls",
            "p50_us",
            "p99_us",
            "rps",
            "peak_rss_kb",
        ],
    );
    assert_eq!(lat["impl"], imp);
    assert_eq!(lat["workload"], "lat-async");
    assert_eq!(lat["calls"], 2000);
    let tput = client(imp, port, &["tput-async", "50"]);
    has(
        &tput,
        &[
            "impl", "workload", "inflight", "calls", "rps", "p50_us", "p99_us",
        ],
    );
    assert_eq!(tput["impl"], imp);
    assert_eq!(tput["workload"], "tput-async");
    assert_eq!(tput["inflight"], 50);
    assert!(tput["calls"].as_u64().unwrap() > 0, "{tput}");
    // The default: 1,000 in flight.
    let tput = client(imp, port, &["tput-async"]);
    assert_eq!(tput["inflight"], 1000);
    assert!(tput["calls"].as_u64().unwrap() > 0, "{tput}");
}

#[test]
fn async_workloads_speak_the_protocol() {
    for imp in ["orb", "tonic"] {
        let server = Server::start(imp);
        async_lines_follow_the_protocol(imp, server.port);
        let s = server.stop();
        server_line_follows_the_protocol(&s, imp);
    }
}

#[test]
fn tonic_speaks_the_protocol() {
    let server = Server::start("tonic");
    client_lines_follow_the_protocol("tonic", |w| client("tonic", server.port, w));
    let s = server.stop();
    server_line_follows_the_protocol(&s, "tonic");
    // Warm-up calls included; tput counts only its window.
    assert!(s["calls"].as_u64().unwrap() >= 2_200 + 22);
    let nest = run(&["nest", "--impl", "tonic", "--depth", "10"]);
    assert_eq!(nest["ok"], false);
}

#[test]
fn raw_has_no_async_workloads() {
    let out = Command::new(BIN)
        .args([
            "client",
            "--impl",
            "raw",
            "--port",
            "1",
            "tput-async",
            "--quick",
        ])
        .output()
        .expect("runs");
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
}

#[test]
fn nest_runs_with_a_threadless_caller_and_raw_says_not_applicable() {
    for threads in ["1", "0"] {
        let v = run(&["nest", "--depth", "200", "--threads", threads]);
        assert_eq!(v["ok"], true, "{v}");
        has(&v, &["depth", "threads", "secs", "us_per_level"]);
        // The median of five timed chains lies between their fastest and slowest.
        assert_eq!(v["chains"], 5, "{v}");
        let (min, med, max) = (
            v["min_us_per_level"].as_f64().unwrap(),
            v["us_per_level"].as_f64().unwrap(),
            v["max_us_per_level"].as_f64().unwrap(),
        );
        assert!(min <= med && med <= max, "{v}");
        // Node A's stack per nested level (the ORB's frames, the stub's, the skeleton's,
        // the servant's): measured between the top and the bottom of a chain on one thread.
        let stack = v["stack_bytes_per_level"].as_f64().unwrap();
        assert!(stack > 100.0 && stack < 64.0 * 1024.0, "{v}");
    }
    let raw = run(&["nest", "--impl", "raw", "--depth", "10"]);
    assert_eq!(raw["ok"], false);
    assert!(raw["error"].as_str().unwrap().contains("not applicable"));
}

/// omniORB's side of the comparison in `run.sh`, where omniORB is installed (`.ci/run` installs
/// it and sets `ORB_INTEROP_REQUIRED=1`, which turns a missing omniORB into a failure here, as in
/// the interop tests). Also checks that our ORB's client and omniORB's server understand each
/// other: the comparison is of two ORBs speaking the same GIOP.
#[test]
fn omniorb_speaks_the_protocol_and_serves_our_client() {
    let dir = std::env::temp_dir().join(format!("orb-omniorb-bench-{}", std::process::id()));
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/omniorb/build.sh");
    let out = Command::new(script)
        .arg(&dir)
        .output()
        .expect("build.sh runs");
    if !out.status.success() {
        let why = String::from_utf8_lossy(&out.stderr);
        assert!(
            std::env::var("ORB_INTEROP_REQUIRED").as_deref() != Ok("1"),
            "omniORB is required (ORB_INTEROP_REQUIRED=1) but omniorb-bench did not build: {why}"
        );
        eprintln!("skipped: omniorb-bench not built: {why}");
        return;
    }
    let bin = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let server = Server::start_program(&bin, "omniorb");
    let port = server.port.to_string();
    let omni = |workload: &[&str]| {
        let mut args = vec!["client", "--port", &port];
        args.extend_from_slice(workload);
        args.push("--quick");
        run_program(&bin, &args)
    };
    client_lines_follow_the_protocol("omniorb", omni);
    // Our generated stub against omniORB's servant: replies are checked by the client.
    let ours = client("orb", server.port, &["lat"]);
    assert_eq!(ours["impl"], "orb");
    assert_eq!(ours["calls"], 2000);
    let s = server.stop();
    server_line_follows_the_protocol(&s, "omniorb");
    // Both lat runs and big, warm-up included (tput counts only its window).
    assert!(s["calls"].as_u64().unwrap() >= 2 * 2_200 + 22);
    let _ = std::fs::remove_dir_all(&dir);
}
