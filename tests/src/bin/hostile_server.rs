//! A server process for the hostile-peer tests (tests/tests/hostile_*.rs), which measure its
//! memory (VmRSS) and run it under a low file-descriptor limit.
//!
//! Serves the Echo service under key `echo`. Options: `--threads N`, `--max-queued N`,
//! `--max-conns N`, `--idle-ms N`, `--max-nesting N`. Prints `READY <port>` once listening.
//! Each `stats` line on stdin is answered with `STATS <OrbStats as Debug>`; end of stdin
//! shuts the ORB down and exits.

use std::io::{BufRead, Write};
use std::time::Duration;

fn main() {
    let mut b = protorb::Orb::builder().threads(2);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let n: usize = args.next().and_then(|v| v.parse().ok()).unwrap_or(0);
        b = match a.as_str() {
            "--threads" => b.threads(n),
            "--max-queued" => b.max_queued_bytes(n),
            "--max-conns" => b.max_connections(n),
            "--idle-ms" => b.idle_timeout(Duration::from_millis(n as u64)),
            "--max-nesting" => b.max_nesting_depth(n),
            other => panic!("unknown option {other}"),
        };
    }
    let orb = b.build().expect("orb starts");
    let (_servant, _r) = orb_tests::activate_echo(&orb);
    let mut out = std::io::stdout().lock();
    writeln!(out, "READY {}", orb.listen_addrs()[0].port()).unwrap();
    out.flush().unwrap();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        if line.trim() == "stats" {
            writeln!(out, "STATS {:?}", orb.stats()).unwrap();
            out.flush().unwrap();
        }
    }
    orb.shutdown();
}
