//! `orb-bench report FILE...`: reads the records `run.sh` collected (one JSON object per line:
//! `{"run":R,"impl":..,"workload":..,"client":{client line},"server":{server line}|null}`) and
//! prints the markdown tables: medians over the runs, and the ORB's ratio to the raw baseline.
//!
//! A ratio is the median of the per-run ratios (orb and raw measured in the same run), so it
//! can differ slightly from the ratio of the two medians shown beside it.

use serde_json::Value;

struct Record {
    run: u64,
    imp: String,
    workload: String,
    client: Value,
    server: Value,
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

fn fmt(v: Option<f64>) -> String {
    match v {
        None => "n/a".into(),
        Some(x) if x.abs() >= 1000.0 => format!("{x:.0}"),
        Some(x) if x.abs() >= 100.0 => format!("{x:.1}"),
        Some(x) => format!("{x:.2}"),
    }
}

struct Data(Vec<Record>);

impl Data {
    fn runs(&self) -> Vec<u64> {
        let mut r: Vec<u64> = self.0.iter().map(|r| r.run).collect();
        r.sort_unstable();
        r.dedup();
        r
    }

    fn get(&self, run: u64, imp: &str, workload: &str) -> Option<&Record> {
        self.0
            .iter()
            .find(|r| r.run == run && r.imp == imp && r.workload == workload)
    }

    /// One client (`side` = "client") or server field over the runs.
    fn series(&self, imp: &str, workload: &str, side: &str, field: &str) -> Vec<f64> {
        self.runs()
            .into_iter()
            .filter_map(|run| {
                let r = self.get(run, imp, workload)?;
                let obj = if side == "client" {
                    &r.client
                } else {
                    &r.server
                };
                obj.get(field)?.as_f64()
            })
            .collect()
    }

    fn med(&self, imp: &str, workload: &str, side: &str, field: &str) -> Option<f64> {
        median(self.series(imp, workload, side, field))
    }

    /// `a(run) / b(run)` for each run that has both, in run order (the table's ratio is their
    /// median).
    fn ratios(
        &self,
        a: (&str, &str, &str),
        b: (&str, &str, &str),
        side_a: &str,
        side_b: &str,
    ) -> Vec<f64> {
        self.runs()
            .into_iter()
            .filter_map(|run| {
                let x = self.field(run, a, side_a)?;
                let y = self.field(run, b, side_b)?;
                (y != 0.0).then(|| x / y)
            })
            .collect()
    }

    /// `imp`'s `nest` µs per level ÷ the orb's `lat` p50, per run.
    fn nest_per_lat(&self, imp: &str) -> Vec<f64> {
        self.ratios(
            (imp, "nest", "us_per_level"),
            ("orb", "lat", "p50_us"),
            "client",
            "client",
        )
    }

    /// Per run: orb's p50 of `wl`, a variant of `lat` (`lat_pool`: 2 client pool threads;
    /// `lat_listen`: a client ORB that listens) over raw's `lat` p50.
    fn lat_variant_ratios(&self, wl: &str) -> Vec<f64> {
        self.ratios(
            ("orb", wl, "p50_us"),
            ("raw", "lat", "p50_us"),
            "client",
            "client",
        )
    }

    fn field(&self, run: u64, (imp, wl, f): (&str, &str, &str), side: &str) -> Option<f64> {
        let r = self.get(run, imp, wl)?;
        let obj = if side == "client" {
            &r.client
        } else {
            &r.server
        };
        obj.get(f)?.as_f64()
    }
}

/// The client metrics compared per run: (name, unit, workload, JSON field).
const METRICS: [(&str, &str, &str, &str); 5] = [
    ("lat p50", "µs", "lat", "p50_us"),
    ("lat p99", "µs", "lat", "p99_us"),
    ("tput", "calls/s", "tput", "rps"),
    ("tput split", "calls/s", "tput_split", "rps"),
    ("big", "MB/s", "big", "mb_per_s"),
];

/// Variants of orb's `lat` without a target, reported beside raw's `lat`: the workload's
/// name in the records and its label.
const LAT_VARIANTS: [(&str, &str); 2] = [
    ("lat_pool", "client ORB with 2 pool threads (its default)"),
    (
        "lat_listen",
        "client ORB that listens (a server calling out: callers wait through the poll)",
    ),
];

/// Implementations the ORB is compared with but has no target against: raw-epoll (what an
/// event loop's system calls cost), omniORB (the C++ ORB) and tonic (gRPC).
const COMPARED: [(&str, &str); 4] = [
    ("raw-epoll", "raw-epoll"),
    ("orb-tls", "orb over mutual TLS"),
    ("omniorb", "omniORB"),
    ("tonic", "tonic"),
];

fn verdict(v: Option<f64>, limit: f64, goal: f64, at_most: bool) -> &'static str {
    match v {
        None => "n/a",
        Some(x) => {
            let meets = |l: f64| if at_most { x <= l } else { x >= l };
            if meets(goal) {
                "pass (goal met)"
            } else if meets(limit) {
                "pass"
            } else {
                "FAIL"
            }
        }
    }
}

/// Prints the tables for the records of one or more `run.sh` files (runs of several files
/// are pooled: file `k`'s run `r` counts as run `1000 k + r`).
pub fn print(files: &[String]) -> Result<(), String> {
    let mut records = Vec::new();
    for (k, file) in files.iter().enumerate() {
        read_records(file, 1000 * k as u64, &mut records)?;
    }
    print_records(records)
}

fn read_records(file: &str, run_offset: u64, records: &mut Vec<Record>) -> Result<(), String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("{file}: {e}"))?;
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(line).map_err(|e| format!("{file}:{}: {e}", i + 1))?;
        records.push(Record {
            run: run_offset + v["run"].as_u64().unwrap_or(0),
            imp: v["impl"].as_str().unwrap_or("").to_string(),
            workload: v["workload"].as_str().unwrap_or("").to_string(),
            client: v["client"].clone(),
            server: v["server"].clone(),
        });
    }
    Ok(())
}

fn print_records(records: Vec<Record>) -> Result<(), String> {
    let d = Data(records);
    let runs = d.runs().len();
    let tput_threads = d
        .med("orb", "tput", "client", "threads")
        .map_or("N".into(), |n| format!("{n:.0}"));
    let nest_depth = d
        .med("orb", "nest", "client", "depth")
        .map_or("D".into(), |n| format!("{n:.0}"));
    let nest_threads = d
        .med("orb", "nest", "client", "threads")
        .map_or("T".into(), |n| format!("{n:.0}"));
    let nest_ok: Vec<bool> = d
        .runs()
        .into_iter()
        .filter_map(|run| d.get(run, "orb", "nest"))
        .map(|r| r.client["ok"].as_bool().unwrap_or(false))
        .collect();

    println!("Medians of {runs} run(s); ratio = median of the per-run orb/raw ratios.\n");
    println!("| metric | orb | raw | ratio | target (goal) | result |");
    println!("|---|---:|---:|---:|---|---|");
    let row = |name: &str, wl: &str, f: &str, target: &str, limit: f64, goal: f64, le: bool| {
        let r = median(d.ratios(("orb", wl, f), ("raw", wl, f), "client", "client"));
        println!(
            "| {name} | {} | {} | {} | {target} | {} |",
            fmt(d.med("orb", wl, "client", f)),
            fmt(d.med("raw", wl, "client", f)),
            fmt(r),
            verdict(r, limit, goal, le)
        );
    };
    row(
        "lat p50 (µs)",
        "lat",
        "p50_us",
        "≤ 1.3 × raw (≤ 1.1 ×)",
        1.3,
        1.1,
        true,
    );
    row("lat p99 (µs)", "lat", "p99_us", "≤ 2 × raw", 2.0, 2.0, true);
    // lat with the client ORB's default 2 pool threads (`lat_pool`), and with a client ORB
    // that listens (`lat_listen`): no targets of their own.
    for (wl, label) in LAT_VARIANTS {
        if !d.series("orb", wl, "client", "p50_us").is_empty() {
            println!(
                "| lat p50, {label} (µs) | {} | {} | {} | (no target) | |",
                fmt(d.med("orb", wl, "client", "p50_us")),
                fmt(d.med("raw", "lat", "client", "p50_us")),
                fmt(median(d.lat_variant_ratios(wl))),
            );
        }
    }
    row(
        &format!("tput {tput_threads} (calls/s; orb: 1 connection, 2 server threads)"),
        "tput",
        "rps",
        "≥ 1.0 × raw (≥ 1.5 ×)",
        1.0,
        1.5,
        false,
    );
    row(
        &format!("tput {tput_threads}, split: server on CPU 0, client on CPU 1"),
        "tput_split",
        "rps",
        "≥ 1.0 × raw (≥ 1.5 ×)",
        1.0,
        1.5,
        false,
    );
    row(
        "big (MB/s)",
        "big",
        "mb_per_s",
        "≥ 0.6 × raw (≥ 0.8 ×)",
        0.6,
        0.8,
        false,
    );
    {
        let r = median(d.nest_per_lat("orb"));
        let all_ok = !nest_ok.is_empty() && nest_ok.iter().all(|&ok| ok);
        let v = if all_ok {
            verdict(r, 2.0, 1.5, true)
        } else {
            "FAIL (not ok)"
        };
        println!(
            "| nest depth {nest_depth}, threads {nest_threads} (µs/level; \"raw\" column: orb lat p50) | {} | {} | {} | ok, ≤ 2 × lat p50 (≤ 1.5 ×) | {v} ({}/{} ok) |",
            fmt(d.med("orb", "nest", "client", "us_per_level")),
            fmt(d.med("orb", "lat", "client", "p50_us")),
            fmt(r),
            nest_ok.iter().filter(|&&ok| ok).count(),
            nest_ok.len(),
        );
        // The same chain with bidirectional GIOP (`nest --bidir`): no target of its own.
        if !d
            .series("orb-bidir", "nest", "client", "us_per_level")
            .is_empty()
        {
            let r = median(d.nest_per_lat("orb-bidir"));
            println!(
                "| nest as above, bidirectional GIOP (`--bidir`; µs/level; \"raw\" column: orb lat p50) | {} | {} | {} | (no target) | |",
                fmt(d.med("orb-bidir", "nest", "client", "us_per_level")),
                fmt(d.med("orb", "lat", "client", "p50_us")),
                fmt(r),
            );
        }
    }
    for (wl, limit) in [("lat", 2.0), ("tput", 1.0), ("tput_split", 1.0)] {
        let orb = d.med("orb", wl, "server", "ctx_switches_per_call");
        if orb.is_none() {
            continue;
        }
        println!(
            "| server context switches per call, {wl} | {} | {} | | ≤ {limit} | {} |",
            fmt(orb),
            fmt(d.med("raw", wl, "server", "ctx_switches_per_call")),
            verdict(orb, limit, limit, true)
        );
    }

    // Comparisons without a target, each where the run has it.
    let rows: Vec<String> = COMPARED
        .iter()
        .flat_map(|&(other, label)| METRICS.iter().map(move |&m| (other, label, m)))
        .filter(|&(other, _, (_, _, wl, f))| !d.series(other, wl, "client", f).is_empty())
        .map(|(other, label, (name, unit, wl, f))| {
            let r = median(d.ratios(("orb", wl, f), (other, wl, f), "client", "client"));
            format!(
                "| {name} ({unit}) | {} | {} | {label} | {} |",
                fmt(d.med("orb", wl, "client", f)),
                fmt(d.med(other, wl, "client", f)),
                fmt(r),
            )
        })
        .collect();
    if !rows.is_empty() {
        println!(
            "\nComparisons without a target (ratio: median of the per-run orb/other ratios; \
             raw-epoll is raw with an epoll wait before each read):\n"
        );
        println!("| metric | orb | other | other is | ratio |");
        println!("|---|---:|---:|---|---:|");
        for row in rows {
            println!("{row}");
        }
    }

    print_async(&d);

    // The spread says how far one run's verdict can be trusted on a noisy machine.
    let list = |v: Vec<f64>| {
        v.iter()
            .map(|x| format!("{x:.2}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!("\nPer-run ratios, in run order:");
    for (name, _, wl, f) in METRICS {
        let v = d.ratios(("orb", wl, f), ("raw", wl, f), "client", "client");
        println!("- {name}: {}", list(v));
    }
    for (wl, label) in LAT_VARIANTS {
        let v = d.lat_variant_ratios(wl);
        if !v.is_empty() {
            println!("- lat p50, {label}: {}", list(v));
        }
    }
    println!("- nest ÷ lat p50: {}", list(d.nest_per_lat("orb")));
    let v = d.nest_per_lat("orb-bidir");
    if !v.is_empty() {
        println!("- nest, bidir ÷ lat p50: {}", list(v));
    }
    for (other, label) in COMPARED {
        for (name, _, wl, f) in METRICS {
            let v = d.ratios(("orb", wl, f), (other, wl, f), "client", "client");
            if !v.is_empty() {
                println!("- {name} ÷ {label}: {}", list(v));
            }
        }
    }

    println!("\nPer workload (medians): context switches per call and peak RSS of both processes; ORB server Leader/Followers counters per call.\n");
    println!("| workload | impl | server ctx sw/call | server peak RSS (KiB) | client ctx sw/call | client peak RSS (KiB) | server promotions/call | server follower wake-ups/call | p50 (µs) | p99 (µs) |");
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for wl in [
        "lat",
        "lat_pool",
        "lat_listen",
        "lat-async",
        "tput",
        "tput_split",
        "tput-async",
        "big",
        "nest",
    ] {
        for imp in ["orb", "raw", "orb-bidir"]
            .into_iter()
            .chain(COMPARED.map(|(imp, _)| imp))
        {
            if !d.0.iter().any(|r| r.imp == imp && r.workload == wl) {
                continue;
            }
            let m = |side: &str, f: &str| fmt(d.med(imp, wl, side, f));
            println!(
                "| {wl} | {imp} | {} | {} | {} | {} | {} | {} | {} | {} |",
                m("server", "ctx_switches_per_call"),
                m("server", "peak_rss_kb"),
                m("client", "ctx_switches_per_call"),
                m("client", "peak_rss_kb"),
                m("server", "leader_promotions_per_call"),
                m("server", "follower_wakeups_per_call"),
                m("client", "p50_us"),
                m("client", "p99_us"),
            );
        }
    }
    Ok(())
}

/// The asynchronous workloads (issue 19), where the run has them: the ORB's awaited call
/// against its blocking one (target: lat-async p50 ≤ 1.1 × lat p50), and `tput-async` of the
/// ORB against tonic (no target).
fn print_async(d: &Data) {
    if d.series("orb", "lat-async", "client", "p50_us").is_empty()
        && d.series("orb", "tput-async", "client", "rps").is_empty()
    {
        return;
    }
    let inflight = d
        .med("orb", "tput-async", "client", "inflight")
        .map_or("N".into(), |n| format!("{n:.0}"));
    println!(
        "\nAsynchronous calls (one client thread on a tokio current-thread runtime; ratio: median \
         of the per-run ratios):\n"
    );
    println!("| metric | orb | other | other is | ratio | target |");
    println!("|---|---:|---:|---|---:|---|");
    let r = median(d.ratios(
        ("orb", "lat-async", "p50_us"),
        ("orb", "lat", "p50_us"),
        "client",
        "client",
    ));
    println!(
        "| lat-async p50 (µs) | {} | {} | orb lat (blocking) | {} | ≤ 1.1 × ({}) |",
        fmt(d.med("orb", "lat-async", "client", "p50_us")),
        fmt(d.med("orb", "lat", "client", "p50_us")),
        fmt(r),
        verdict(r, 1.1, 1.1, true)
    );
    for (name, wl, f) in [
        ("lat-async p50 (µs)", "lat-async", "p50_us"),
        ("tput-async (calls/s)", "tput-async", "rps"),
        ("tput-async p50 (µs)", "tput-async", "p50_us"),
        ("tput-async p99 (µs)", "tput-async", "p99_us"),
    ] {
        if d.series("tonic", wl, "client", f).is_empty() {
            continue;
        }
        let name = name.replace("tput-async", &format!("tput-async {inflight}"));
        println!(
            "| {name} | {} | {} | tonic | {} | |",
            fmt(d.med("orb", wl, "client", f)),
            fmt(d.med("tonic", wl, "client", f)),
            fmt(median(d.ratios(
                ("orb", wl, f),
                ("tonic", wl, f),
                "client",
                "client"
            ))),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn medians() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(vec![]), None);
    }
}
