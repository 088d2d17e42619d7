//! Nested callbacks that do not deadlock: two processes, one ORB thread each, call each other
//! back 100 (or 1,000) levels deep.
//!
//! ```text
//! cargo run -p orb-examples --bin nested                          # depth 100, 1 thread each
//! cargo run -p orb-examples --bin nested -- --depth 1000
//! cargo run -p orb-examples --bin nested -- --no-nested-upcalls   # the classic pool: TIMEOUT
//! ```
//!
//! This process is A. It starts B, a second copy of itself (`nested --role peer`), reads B's
//! object reference from B's standard output, and calls `B.Ping(level 1)`, passing its own
//! reference. B serves level 1 by calling `A.Ping(level 2)`, A serves level 2 by calling
//! `B.Ping(level 3)`, and so on down to `--depth`. Every thread that serves a level then waits
//! for the reply of the call it made, so with one pool thread per process the next level can
//! only be served by a thread that is *waiting*. In the hybrid Leader/Followers model such a
//! thread takes its turn leading the event loop and serves the incoming request on its own
//! stack (a nested upcall). The table shows, per level (sampled for big depths), which process
//! and which OS thread served it, and whether that thread was waiting for a reply at the time.
//!
//! With `--no-nested-upcalls` both ORBs run the classic thread-pool model, in which a waiting
//! thread only waits: level 3 finds B's only thread waiting for level 2, nobody serves it, and
//! the chain deadlocks. The call's deadline (3 s in that mode) ends it with TIMEOUT instead of
//! a hang.
//!
//! The last line is the verdict, e.g. (a debug build)
//! `verdict: OK depth 1000 reached in 274.3 ms (274 µs/level), A served 500 upcalls, 499 on
//! threads waiting for their own reply` (level 2 is the one served by A's then idle pool thread).
//! Exit status 0 when the run shows what it should (OK; or TIMEOUT with `--no-nested-upcalls`),
//! 1 otherwise. B exits when its standard input closes, so it never outlives A.

use clap::Parser;
use orb_examples::errors::{describe, describe_exception};
use orb_examples::process::{Peer, Stop};
use orb_examples::proto::nested::{
    Hop, Node, NodeClient, NodeSkeleton, PingReply, PingRequest, Trace,
};
use orb_examples::{fail, parse_duration, thread_label};
use protorb::{Exception, ObjectRef, Orb, SystemException, SystemExceptionKind};
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// nested: two processes call each other back, level after level, with one ORB thread each.
///
/// This process (A) starts B, a second copy of itself, and calls it with level 1; each level is
/// served by calling the other process for the next one, down to --depth. The last line is the
/// verdict; exit status 0 when the run shows what it should (OK; or TIMEOUT with
/// --no-nested-upcalls), 1 otherwise.
#[derive(Parser, Debug)]
#[command(name = "nested")]
struct Cli {
    /// Levels of nested calls (1000 works too; a thread nests at most 1024 upcalls, so one
    /// thread each goes to about 2000).
    #[arg(long, value_name = "N", default_value_t = 100)]
    depth: u32,
    /// ORB pool threads in each process.
    #[arg(long, value_name = "T", default_value_t = 1)]
    threads: usize,
    /// Classic thread pool: waiting threads do not serve requests, so the chain deadlocks and
    /// ends in TIMEOUT (after --timeout).
    #[arg(long)]
    no_nested_upcalls: bool,
    /// Deadline of the whole chain: 500ms, 3s, 1.5s, 2m, or seconds (default: 30s; 3s with
    /// --no-nested-upcalls).
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    timeout: Option<Duration>,
    /// Print every level (default: all up to depth 20, else a sample).
    #[arg(long)]
    all: bool,
    /// `peer`: run as process B (A starts B so; not for use by hand).
    #[arg(long, hide = true, value_parser = ["peer"])]
    role: Option<String>,
}

/// Stack size of A's calling thread. Each level recurses on the stack of the thread that
/// serves it (the servant, the stub, and the ORB's wait loop running the next nested upcall):
/// about 10 KiB per level in a debug build. One thread may hold half the levels, so depth 1,000
/// puts some 5 MiB on one stack, close to the 8 MiB a main thread gets, and depth 2,000 would
/// overflow it. So A calls from a thread of its own with this much address space (reserved,
/// not committed). The ORB's pool threads get 64 MiB by default
/// (`OrbBuilder::thread_stack_size`), which is what B's thread uses.
const CALLER_STACK: usize = 256 << 20;

thread_local! {
    /// How many outgoing calls this thread is waiting on right now.
    static WAITING: Cell<u32> = const { Cell::new(0) };
}

/// Runs an outgoing call, noting meanwhile that this thread waits for a reply: an upcall the
/// thread serves before the call returns is a nested upcall.
fn waiting_for_reply<T>(call: impl FnOnce() -> T) -> T {
    WAITING.with(|w| w.set(w.get() + 1));
    let result = call();
    WAITING.with(|w| w.set(w.get() - 1));
    result
}

fn unix_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// One node: records each upcall, then calls the other node for the next level.
struct NodeServant {
    process: &'static str,
    orb: Orb,
    me: OnceLock<ObjectRef>,
    trace: Mutex<Vec<Hop>>,
}

impl Node for NodeServant {
    fn ping(&self, ctx: &protorb::Context, req: PingRequest) -> Result<PingReply, Exception> {
        if ctx.is_cancelled() || ctx.deadline().is_some_and(|d| Instant::now() >= d) {
            return Err(SystemException::timeout("the caller has given up already").into());
        }
        self.trace.lock().unwrap().push(Hop {
            level: req.level,
            process: self.process.to_string(),
            pid: std::process::id(),
            thread: thread_label(),
            while_waiting: WAITING.with(Cell::get) > 0,
            started_unix_us: unix_us(),
        });
        if req.level >= req.depth {
            return Ok(PingReply {
                depth_reached: req.level,
            });
        }
        let caller = req
            .caller
            .ok_or_else(|| SystemException::bad_param(0, "no caller reference"))?;
        let next = PingRequest {
            level: req.level + 1,
            depth: req.depth,
            caller: self.me.get().cloned(),
        };
        waiting_for_reply(|| NodeClient::new(&self.orb, caller).ping(next))
    }

    fn get_trace(&self, _ctx: &protorb::Context, _req: ()) -> Result<Trace, Exception> {
        Ok(Trace {
            hops: self.trace.lock().unwrap().clone(),
        })
    }
}

/// Builds an ORB and activates a node named `process` in it.
fn start_node(
    process: &'static str,
    threads: usize,
    nested: bool,
    timeout: Duration,
) -> (Orb, Arc<NodeServant>) {
    let orb = Orb::builder()
        .threads(threads)
        .nested_upcalls(nested)
        .call_timeout(timeout)
        .shutdown_grace(Duration::from_secs(1))
        .build()
        .unwrap_or_else(|e| fail(format!("cannot start the ORB: {}", describe(&e))));
    let servant = Arc::new(NodeServant {
        process,
        orb: orb.clone(),
        me: OnceLock::new(),
        trace: Mutex::new(Vec::new()),
    });
    let me = orb.activate(
        process.as_bytes().to_vec(),
        NodeSkeleton::new(servant.clone()),
    );
    let _ = servant.me.set(me);
    (orb, servant)
}

fn main() {
    let cli = Cli::parse();
    let nested = !cli.no_nested_upcalls;
    let timeout = cli.timeout.unwrap_or(if nested {
        Duration::from_secs(30)
    } else {
        Duration::from_secs(3)
    });
    // clap accepts no other role than `peer`.
    if cli.role.is_some() {
        run_b(cli.threads, nested, timeout);
        return;
    }
    if cli.depth == 0 {
        fail("--depth must be at least 1");
    }
    if cli.threads == 0 {
        // B's main thread only waits for its standard input to close: without a pool
        // thread nobody in B would serve level 1.
        fail("--threads must be at least 1");
    }
    std::process::exit(run_a(cli.depth, cli.threads, nested, timeout, cli.all));
}

/// B: serve until standard input closes (A closed it, or A died).
fn run_b(threads: usize, nested: bool, timeout: Duration) {
    let (orb, servant) = start_node("B", threads, nested, timeout);
    // B's trace is served by a second, separate ORB with a thread of its own, so that A can
    // fetch it even while the demo's threads are deadlocked (--no-nested-upcalls). It is
    // instrumentation, not part of the demo.
    let control = Orb::builder()
        .threads(1)
        .build()
        .unwrap_or_else(|e| fail(format!("cannot start the ORB: {}", describe(&e))));
    let trace_ref = control.activate(&b"trace"[..], NodeSkeleton::new(servant.clone()));
    // One line: the node's reference, then the trace object's.
    println!(
        "{} {}",
        orb.object_to_string(servant.me.get().expect("activated")),
        control.object_to_string(&trace_ref)
    );
    let stop = Stop::new();
    stop.on_stdin_eof();
    stop.wait(None);
    orb.shutdown();
    control.shutdown();
}

/// A: start B, run the chain, print the trace and the verdict; returns the exit status.
fn run_a(depth: u32, threads: usize, nested: bool, timeout: Duration, all: bool) -> i32 {
    let exe = std::env::current_exe()
        .unwrap_or_else(|e| fail(format!("cannot locate this program: {e}")));
    let mut b_args = vec![
        "--role".to_string(),
        "peer".to_string(),
        format!("--threads={threads}"),
        format!("--timeout={}ms", timeout.as_millis()),
    ];
    if !nested {
        b_args.push("--no-nested-upcalls".to_string());
    }
    let mut b = Peer::spawn("B", &exe, &b_args, Duration::from_secs(10))
        .unwrap_or_else(|e| fail(format!("cannot start process B: {e}")));
    let (orb, a) = start_node("A", threads, nested, timeout);
    let mut refs = b.reference().split_whitespace().map(|s| {
        orb.string_to_object(s)
            .unwrap_or_else(|e| fail(format!("B printed a bad reference: {}", describe(&e))))
    });
    let (Some(b_node), Some(b_trace)) = (refs.next(), refs.next()) else {
        fail("B printed no references");
    };

    let mode = if nested {
        "nested upcalls ON (hybrid Leader/Followers)"
    } else {
        "nested upcalls OFF (classic thread pool)"
    };
    println!(
        "nested: A = this process (pid {}), B = its child (pid {})",
        std::process::id(),
        b.pid()
    );
    println!(
        "  each ORB has {threads} pool thread{}; {mode}; deadline {timeout:?}",
        plural(threads)
    );

    // The calling thread: see CALLER_STACK for why it is not the main thread.
    let client = NodeClient::new(&orb, b_node);
    let a_ref = a.me.get().cloned();
    let caller = std::thread::Builder::new()
        .name("A-caller".into())
        .stack_size(CALLER_STACK)
        .spawn(move || {
            let label = thread_label();
            println!(
                "  A's calling thread ({label}) calls B.Ping(level 1) and waits for the reply;"
            );
            println!("  each level calls the other process for the next, down to level {depth}");
            if !nested {
                // Each process's pool threads serve one level each, then all wait.
                println!(
                    "  (nested upcalls are off: expect level {} to find all threads of its \
                     process waiting, and the call to end in TIMEOUT after {timeout:?})",
                    2 * threads + 1
                );
            }
            let started_us = unix_us();
            let started = Instant::now();
            let result = waiting_for_reply(|| {
                client.ping(PingRequest {
                    level: 1,
                    depth,
                    caller: a_ref,
                })
            });
            (result, started.elapsed(), started_us, label)
        })
        .unwrap_or_else(|e| fail(format!("cannot start the calling thread: {e}")));
    let (result, elapsed, started_us, caller_label) = caller
        .join()
        .unwrap_or_else(|_| fail("the calling thread panicked"));

    let mut hops = a.trace.lock().unwrap().clone();
    match NodeClient::new(&orb, b_trace).get_trace_with_timeout((), Duration::from_secs(5)) {
        Ok(t) => hops.extend(t.hops),
        Err(e) => eprintln!("nested: cannot fetch B's trace: {}", describe_exception(&e)),
    }
    hops.sort_by_key(|h| (h.level, h.started_unix_us));
    // Upcalls that started after the caller's deadline: requests the classic pool left queued
    // until a thread came free, served when nobody waited for them any more.
    let deadline_us = started_us + timeout.as_micros() as u64;
    let in_time: Vec<Hop> = hops
        .iter()
        .filter(|h| h.started_unix_us <= deadline_us)
        .cloned()
        .collect();
    let late = hops.len() - in_time.len();

    println!();
    print_table(&hops, &caller_label, started_us, deadline_us, depth, all);
    let _ = b.finish(Duration::from_secs(5));
    orb.shutdown();

    println!();
    println!("  A: {}", summary(&in_time, "A", Some(&caller_label)));
    println!("  B: {}", summary(&in_time, "B", None));
    if late > 0 {
        println!(
            "  ({late} upcall{} started after the deadline: once a thread came free, the ORB \
             served the request it had queued although its caller had given up, and the chain \
             went on from there)",
            plural(late)
        );
    }
    let ms = elapsed.as_secs_f64() * 1e3;
    match result {
        Ok(reply) => {
            let per_level = elapsed.as_secs_f64() * 1e6 / f64::from(depth);
            let a_served = in_time.iter().filter(|h| h.process == "A").count();
            let a_waiting = in_time
                .iter()
                .filter(|h| h.process == "A" && h.while_waiting)
                .count();
            println!(
                "verdict: OK depth {} reached in {ms:.1} ms ({per_level:.0} µs/level), A served \
                 {a_served} upcalls, {a_waiting} on threads waiting for their own reply",
                reply.depth_reached,
            );
            i32::from(reply.depth_reached != depth)
        }
        Err(e) if e.kind() == Some(SystemExceptionKind::TIMEOUT) && nested => {
            println!(
                "verdict: TIMEOUT after {:.1} s at level {}: unexpected, with nested upcalls on \
                 the chain should not deadlock",
                elapsed.as_secs_f64(),
                in_time.last().map_or(0, |h| h.level),
            );
            1
        }
        Err(e) if e.kind() == Some(SystemExceptionKind::TIMEOUT) => {
            // The first level nobody served in time. Odd levels go to B, even ones to A.
            let stuck_level = in_time.last().map_or(0, |h| h.level) + 1;
            let stuck = if stuck_level % 2 == 1 { "B" } else { "A" };
            // B's threads are its pool; A also has the calling thread.
            let n = threads + usize::from(stuck == "A");
            // The threads of that process known to be waiting: those that served a level in
            // time (each then called out), and A's calling thread.
            let mut busy: Vec<&str> = in_time
                .iter()
                .filter(|h| h.process == stuck)
                .map(|h| h.thread.as_str())
                .chain((stuck == "A").then_some(caller_label.as_str()))
                .collect();
            busy.sort_unstable();
            busy.dedup();
            let secs = elapsed.as_secs_f64();
            if busy.len() >= n {
                println!(
                    "verdict: TIMEOUT after {secs:.1} s, deadlocked at level {stuck_level}: \
                     {stuck}'s {n} thread{} {} waiting for a reply and, with nested upcalls off, \
                     may not serve it (the classic thread-pool deadlock)",
                    plural(n),
                    if n == 1 { "was" } else { "were all" },
                );
            } else {
                // Not the deadlock the classic pool must suffer: say so rather than hide it.
                println!(
                    "verdict: TIMEOUT after {secs:.1} s, stuck at level {stuck_level}: it stayed \
                     queued in {stuck} although {} of its {n} threads {} free (unexpected: an \
                     ORB bug, the classic pool should have served it)",
                    n - busy.len(),
                    if n - busy.len() == 1 { "was" } else { "were" },
                );
            }
            0
        }
        Err(e) => {
            println!(
                "verdict: FAILED after {ms:.1} ms, at level {}: {}",
                in_time.last().map_or(0, |h| h.level),
                describe_exception(&e)
            );
            1
        }
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// The levels, one line each (a sample for big depths).
fn print_table(
    hops: &[Hop],
    caller_label: &str,
    started_us: u64,
    deadline_us: u64,
    depth: u32,
    all: bool,
) {
    // Every level when there are few; else the first and last five, and a pair of levels (one
    // per process) every tenth of the way.
    let last = hops.last().map_or(0, |h| h.level);
    let step = (depth / 10).max(1);
    let shown =
        |level: u32| all || hops.len() <= 20 || level <= 5 || level + 5 > last || level % step <= 1;
    let width = hops.iter().map(|h| h.thread.len()).max().unwrap_or(6);
    // Per (process, thread): the level whose reply that thread waits for (A's calling thread
    // waits for level 1 from the start).
    let mut waits_for: HashMap<(&str, &str), u32> = HashMap::new();
    waits_for.insert(("A", caller_label), 1);
    println!(
        " level  t (ms)  process       {:<width$}  served while waiting for a reply?",
        "thread"
    );
    let mut gap = false;
    for h in hops {
        let key = (h.process.as_str(), h.thread.as_str());
        if shown(h.level) {
            if gap {
                println!("   ...");
                gap = false;
            }
            let note = match (h.while_waiting, waits_for.get(&key)) {
                (true, Some(1)) if h.process == "A" && h.thread == caller_label => {
                    "yes, for level 1: A's calling thread".to_string()
                }
                (true, Some(l)) => format!("yes, for level {l}"),
                (true, None) => "yes".to_string(),
                (false, _) => "no".to_string(),
            };
            let late = if h.started_unix_us > deadline_us {
                "  (late: after the deadline)"
            } else {
                ""
            };
            let t = h.started_unix_us.saturating_sub(started_us) as f64 / 1e3;
            println!(
                "{:>6} {t:>7.1}  {} pid {:<7}  {:<width$}  {note}{late}",
                h.level, h.process, h.pid, h.thread
            );
        } else {
            gap = true;
        }
        waits_for.insert(key, h.level + 1);
    }
    if gap {
        println!("   ...");
    }
}

/// How many upcalls `process` served, on how many threads, how many while waiting.
fn summary(hops: &[Hop], process: &str, caller_label: Option<&str>) -> String {
    let mine: Vec<&Hop> = hops.iter().filter(|h| h.process == process).collect();
    let waiting = mine.iter().filter(|h| h.while_waiting).count();
    let mut threads: Vec<&str> = mine.iter().map(|h| h.thread.as_str()).collect();
    threads.sort_unstable();
    threads.dedup();
    let mut s = format!(
        "served {} upcall{} on {} thread{}, {waiting} of them on a thread that was waiting for \
         its own reply",
        mine.len(),
        plural(mine.len()),
        threads.len(),
        plural(threads.len()),
    );
    if let Some(caller) = caller_label {
        let on_caller = mine.iter().filter(|h| h.thread == caller).count();
        s.push_str(&format!(
            "; {on_caller} on the calling thread, which waits for level 1 all along"
        ));
    }
    s
}
