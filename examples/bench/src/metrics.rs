//! Measurements of the process itself (context switches, peak RSS) and of call latencies
//! (nearest-rank percentiles), and the JSON line every command prints.
//!
//! Context switches: the issue asks for the `voluntary_ctxt_switches` and
//! `nonvoluntary_ctxt_switches` of `/proc/self/status`. Those two lines, however, are the
//! counters of *one task*, the main thread (fs/proc/array.c prints `task->nvcsw`/`nivcsw` of the
//! thread group leader), so for a multi-threaded server they miss every pool thread. We read the
//! same two kernel counters, summed over all threads of the process, through
//! `getrusage(RUSAGE_SELF)` (`ru_nvcsw` + `ru_nivcsw`), which also keeps the counts of threads
//! that have exited (the raw server's per-connection threads, the client's `tput` threads).
//! [`proc_status_ctx_switches`] reads the `/proc/self/task/*/status` sum for cross-checking.
//! Peak RSS is `VmHWM` of `/proc/self/status` (that one is process-wide).

use std::fmt::Write as _;
use std::time::Duration;

/// Voluntary and involuntary context switches of the whole process so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CtxSwitches {
    pub voluntary: u64,
    pub involuntary: u64,
}

impl CtxSwitches {
    /// Now, for every thread of the process (live and exited).
    pub fn now() -> Self {
        match nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF) {
            Ok(u) => CtxSwitches {
                voluntary: u64::try_from(u.voluntary_context_switches()).unwrap_or(0),
                involuntary: u64::try_from(u.involuntary_context_switches()).unwrap_or(0),
            },
            Err(e) => {
                eprintln!("getrusage failed: {e}");
                CtxSwitches::default()
            }
        }
    }

    /// Switches since `before`.
    pub fn since(self, before: CtxSwitches) -> CtxSwitches {
        CtxSwitches {
            voluntary: self.voluntary.saturating_sub(before.voluntary),
            involuntary: self.involuntary.saturating_sub(before.involuntary),
        }
    }

    pub fn total(self) -> u64 {
        self.voluntary + self.involuntary
    }

    /// Total switches per call (0 when there were no calls).
    pub fn per_call(self, calls: u64) -> f64 {
        if calls == 0 {
            0.0
        } else {
            self.total() as f64 / calls as f64
        }
    }
}

/// The `/proc/self/status` counters summed over the live threads (`/proc/self/task/*/status`).
/// Exited threads are missing here; see the module docs.
pub fn proc_status_ctx_switches() -> CtxSwitches {
    let mut sum = CtxSwitches::default();
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return sum;
    };
    for task in dir.flatten() {
        let Ok(s) = std::fs::read_to_string(task.path().join("status")) else {
            continue;
        };
        sum.voluntary += status_field(&s, "voluntary_ctxt_switches:").unwrap_or(0);
        sum.involuntary += status_field(&s, "nonvoluntary_ctxt_switches:").unwrap_or(0);
    }
    sum
}

/// Says on stderr what `/proc` shows beside `getrusage` (the module docs say why they differ).
pub fn cross_check(before_rusage: CtxSwitches, before_proc: CtxSwitches, main_before: CtxSwitches) {
    let r = CtxSwitches::now().since(before_rusage);
    let p = proc_status_ctx_switches().since(before_proc);
    let m = main_thread_ctx_switches().since(main_before);
    eprintln!(
        "context switches: getrusage (all threads, exited included) {} = {}+{}; \
         /proc/self/task/*/status (live threads) {} ; /proc/self/status (main thread) {}",
        r.total(),
        r.voluntary,
        r.involuntary,
        p.total(),
        m.total()
    );
}

/// The two counters of `/proc/self/status` itself (the main thread's).
pub fn main_thread_ctx_switches() -> CtxSwitches {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    CtxSwitches {
        voluntary: status_field(&s, "voluntary_ctxt_switches:").unwrap_or(0),
        involuntary: status_field(&s, "nonvoluntary_ctxt_switches:").unwrap_or(0),
    }
}

/// Peak resident set size in KiB (`VmHWM` of `/proc/self/status`).
pub fn peak_rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| status_field(&s, "VmHWM:"))
        .unwrap_or(0)
}

fn status_field(status: &str, name: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// Latencies of the timed calls, in nanoseconds.
#[derive(Debug, Default)]
pub struct Latencies(Vec<u64>);

impl Latencies {
    pub fn with_capacity(n: usize) -> Self {
        Latencies(Vec::with_capacity(n))
    }

    pub fn push(&mut self, d: Duration) {
        self.0.push(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    }

    pub fn extend(&mut self, other: Latencies) {
        self.0.extend(other.0);
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Sorts once; then percentiles can be read.
    pub fn sorted(mut self) -> SortedLatencies {
        self.0.sort_unstable();
        SortedLatencies(self.0)
    }
}

pub struct SortedLatencies(Vec<u64>);

impl SortedLatencies {
    /// Nearest-rank percentile in microseconds: the value at rank ceil(p/100 * N).
    pub fn percentile_us(&self, p: f64) -> f64 {
        if self.0.is_empty() {
            return 0.0;
        }
        let n = self.0.len();
        let rank = ((p / 100.0) * n as f64).ceil() as usize;
        let idx = rank.clamp(1, n) - 1;
        self.0[idx] as f64 / 1e3
    }

    pub fn mean_us(&self) -> f64 {
        if self.0.is_empty() {
            return 0.0;
        }
        self.0.iter().map(|&v| v as f64).sum::<f64>() / self.0.len() as f64 / 1e3
    }

    /// Sum of all latencies in seconds.
    pub fn total_secs(&self) -> f64 {
        self.0.iter().map(|&v| v as f64).sum::<f64>() / 1e9
    }
}

/// A JSON object written field by field, in order, on one line.
#[derive(Debug, Default)]
pub struct JsonLine(String);

impl JsonLine {
    pub fn new() -> Self {
        JsonLine(String::from("{"))
    }

    fn key(&mut self, k: &str) {
        if self.0.len() > 1 {
            self.0.push(',');
        }
        let _ = write!(self.0, "\"{k}\":");
    }

    #[must_use]
    pub fn str(mut self, k: &str, v: &str) -> Self {
        self.key(k);
        self.0.push_str(&serde_json::Value::from(v).to_string());
        self
    }

    #[must_use]
    pub fn int(mut self, k: &str, v: u64) -> Self {
        self.key(k);
        let _ = write!(self.0, "{v}");
        self
    }

    #[must_use]
    pub fn bool(mut self, k: &str, v: bool) -> Self {
        self.key(k);
        let _ = write!(self.0, "{v}");
        self
    }

    /// A float with up to 3 decimals (finite values only; others become null).
    #[must_use]
    pub fn num(mut self, k: &str, v: f64) -> Self {
        self.key(k);
        if v.is_finite() {
            let s = format!("{v:.3}");
            let s = s.trim_end_matches('0').trim_end_matches('.');
            self.0
                .push_str(if s.is_empty() || s == "-" { "0" } else { s });
        } else {
            self.0.push_str("null");
        }
        self
    }

    /// Prints the line on stdout (the only thing any command prints there).
    pub fn print(mut self) {
        self.0.push('}');
        println!("{}", self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank() {
        let mut l = Latencies::default();
        for us in 1..=100u64 {
            l.push(Duration::from_micros(us));
        }
        let s = l.sorted();
        assert_eq!(s.percentile_us(50.0), 50.0);
        assert_eq!(s.percentile_us(99.0), 99.0);
        assert_eq!(s.percentile_us(99.9), 100.0);
        assert_eq!(s.percentile_us(100.0), 100.0);
        assert_eq!(s.mean_us(), 50.5);
    }

    #[test]
    fn json_line_is_valid_json() {
        let mut l = JsonLine::new()
            .str("impl", "orb\"x")
            .int("calls", 3)
            .num("p50_us", 12.5)
            .num("zero", 0.0)
            .num("nan", f64::NAN)
            .bool("ok", true);
        l.0.push('}');
        let v: serde_json::Value = serde_json::from_str(&l.0).unwrap();
        assert_eq!(v["impl"], "orb\"x");
        assert_eq!(v["p50_us"], 12.5);
        assert_eq!(v["zero"], 0);
        assert!(v["nan"].is_null());
    }

    #[test]
    fn counters_move() {
        let before = CtxSwitches::now();
        std::thread::sleep(Duration::from_millis(2));
        let d = CtxSwitches::now().since(before);
        assert!(d.voluntary >= 1, "{d:?}");
        assert!(peak_rss_kb() > 0);
        assert!(proc_status_ctx_switches().voluntary > 0);
    }
}
