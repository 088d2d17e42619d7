//! The ORB side (`--impl orb`): generated stubs and skeletons from `proto/bench.proto`, used
//! exactly as a user would.

use crate::metrics::{
    cross_check, main_thread_ctx_switches, peak_rss_kb, proc_status_ctx_switches, CtxSwitches,
    JsonLine,
};
use crate::workload::{AsyncEchoConn, EchoConn};
use bytes::Bytes;
use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// Generated from `proto/bench.proto`.
#[allow(dead_code, missing_docs, clippy::all, clippy::pedantic)]
pub mod bench {
    protorb::include_proto!("bench");
}

use bench::{
    Echo, EchoClient, EchoSkeleton, Node, NodeClient, NodeSkeleton, Payload, PingReply, PingRequest,
};

/// How long a nested call chain may take before it counts as a deadlock (PROTOCOL.md).
pub const NEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Timed `nest` chains after the cold one; `us_per_level` is the median chain's.
const WARM_CHAINS: usize = 5;

/// The echo servant.
struct EchoServant;

impl Echo for EchoServant {
    fn echo(&self, _ctx: &protorb::Context, req: Payload) -> Result<Payload, protorb::Exception> {
        Ok(req)
    }
}

/// The reference a client builds from the port alone (GIOP 1.2, object key `echo`).
/// With `orb-tls`, the TLS-only profile a TLS server publishes (port 0, the TLS port in
/// TAG_SSL_SEC_TRANS).
fn echo_ref(orb: &protorb::Orb, port: u16) -> Result<protorb::ObjectRef, String> {
    if crate::tls::enabled() {
        let p = protorb::IiopProfile::tls("127.0.0.1", port, &b"echo"[..], true);
        return Ok(protorb::ObjectRef::from_iiop_profiles(
            "IDL:bench/Echo:1.0",
            vec![p],
        ));
    }
    orb.string_to_object(&format!("corbaloc::1.2@127.0.0.1:{port}/echo"))
        .map_err(|e| e.to_string())
}

/// An ORB builder with TLS on if this process runs `orb-tls` (`server`: our listener's
/// settings, else a client's).
fn with_tls(b: protorb::OrbBuilder, server: bool) -> Result<protorb::OrbBuilder, String> {
    if !crate::tls::enabled() {
        return Ok(b);
    }
    let tls = if server {
        crate::tls::make_certs()?;
        crate::tls::server_config()?
    } else {
        crate::tls::client_config()?
    };
    Ok(b.tls(tls))
}

/// Client pool threads for one caller at a time (`lat`, `big`): none. With `threads(0)` the
/// calling thread leads the event loop while it waits, so it reads its own reply from the
/// socket and returns, with no pool thread involved. With pool threads it does the same (a
/// pool thread that handed a caller its reply stands aside), but the pool's standby is armed
/// and disarmed around each call: about 1 us more per call here (PROFILE.md).
pub const SINGLE_CALLER_THREADS: usize = 0;

/// Client pool threads for many concurrent callers on one connection (`tput`): the ORB's
/// default, 2. A pool thread then leads while callers wait, reading the replies and handing
/// each to its caller, instead of the lead passing from caller to caller as each one's own
/// reply arrives (a wake-up and a context switch per hand-off): 0.90-0.93x raw's calls/s
/// with 0 threads against 1.0-1.06x with 2, interleaved runs (PROFILE.md).
pub const MANY_CALLER_THREADS: usize = 2;

/// The client ORB: `threads` pool threads; a listener on a free loopback port with `listen`,
/// else none.
pub fn client_orb(threads: usize, listen: bool) -> Result<protorb::Orb, String> {
    let b = protorb::Orb::builder().threads(threads);
    let b = if listen {
        b.listen("127.0.0.1:0")
    } else {
        b.no_listen()
    };
    with_tls(b, false)?.build().map_err(|e| e.to_string())
}

/// An [`EchoConn`] over a (possibly shared) generated stub.
pub struct OrbConn<'a>(pub &'a EchoClient);

impl EchoConn for OrbConn<'_> {
    type Reply = Payload;

    fn echo(&mut self, data: Bytes) -> Result<Payload, String> {
        self.0.echo(Payload { data }).map_err(|e| e.to_string())
    }
}

/// An [`AsyncEchoConn`] over a generated stub shared by every task: `echo_async`, the
/// generated asynchronous method (the request is written when it is called; the driver task
/// on the runtime's thread, or a pool thread with `--no-driver`, reads the reply and wakes
/// the task).
#[derive(Clone)]
pub struct OrbAsyncConn {
    pub stub: Arc<EchoClient>,
    /// The ORB whose event loop the workload's future drives itself
    /// (`protorb::tokio::drive_with`); `None`: a driver task, or pool threads, do.
    pub drive_inline: Option<protorb::Orb>,
}

impl AsyncEchoConn for OrbAsyncConn {
    type Reply = Payload;

    fn block_on<F: std::future::Future>(
        &self,
        rt: &tokio::runtime::Runtime,
        fut: F,
    ) -> Result<F::Output, String> {
        match &self.drive_inline {
            Some(orb) => rt
                .block_on(protorb::tokio::drive_with(orb.clone(), fut))
                .map_err(|e| format!("driver: {e}")),
            None => Ok(rt.block_on(fut)),
        }
    }

    fn echo(
        &mut self,
        data: Bytes,
    ) -> impl std::future::Future<Output = Result<Payload, String>> + Send {
        let reply = self.stub.echo_async(Payload { data });
        async move { reply.await.map_err(|e| e.to_string()) }
    }
}

/// Client pool threads for asynchronous calls (`lat-async`, `tput-async`) with `--no-driver`:
/// the ORB's default, 2. Nobody blocks in the ORB waiting for an asynchronous reply, so the
/// pool threads are the ones that lead the event loop, read the replies and wake the tasks
/// (a second thread wake-up per reply); with 0 nobody would.
pub const ASYNC_CALLER_THREADS: usize = 2;

/// Client pool threads for asynchronous calls with the driver (the default): none. The
/// runtime's thread leads the event loop through `protorb::tokio::drive` (`Orb::turn` when
/// the ORB's event fd is readable), so the thread the socket wakes is the one awaiting the
/// reply, as in a blocking call.
pub const DRIVEN_ASYNC_CALLER_THREADS: usize = 0;

impl AsRef<[u8]> for Payload {
    fn as_ref(&self) -> &[u8] {
        &self.data
    }
}

/// A stub for the echo object of the server on `port`.
pub fn echo_client(orb: &protorb::Orb, port: u16) -> Result<EchoClient, String> {
    Ok(EchoClient::new(orb, echo_ref(orb, port)?))
}

/// Client-side ORB counters, for stderr (diagnostics; the JSON line has the protocol's fields).
pub fn report_client_stats(orb: &protorb::Orb, what: &str) {
    let s = orb.stats();
    eprintln!(
        "orb client ({what}): requests_sent={} replies_received={} connections_opened={} \
         leader_promotions={} follower_wakeups={}",
        s.requests_sent,
        s.replies_received,
        s.connections_opened,
        s.leader_promotions,
        s.follower_wakeups
    );
}

/// `server --impl orb`: serves the echo object under key `echo` with `threads` pool threads
/// until SIGTERM/SIGINT, then prints its JSON line (calls served = the ORB's request counter).
pub fn server(port: u16, threads: usize, wait_for_signal: impl FnOnce()) -> Result<(), String> {
    let orb = with_tls(
        protorb::Orb::builder()
            .listen(("127.0.0.1", port))
            .threads(threads),
        true,
    )?
    .build()
    .map_err(|e| e.to_string())?;
    orb.activate(&b"echo"[..], EchoSkeleton::new(EchoServant));
    let addr = orb.listen_addrs()[0];
    let before = CtxSwitches::now();
    let (proc_before, main_before) = (proc_status_ctx_switches(), main_thread_ctx_switches());
    let stats0 = orb.stats();
    eprintln!("listening on {addr}");
    wait_for_signal();
    cross_check(before, proc_before, main_before);
    let ctx = CtxSwitches::now().since(before);
    let s = orb.stats();
    let calls = s.requests_received - stats0.requests_received;
    let per = |n: u64| {
        if calls == 0 {
            0.0
        } else {
            n as f64 / calls as f64
        }
    };
    JsonLine::new()
        .str(
            "impl",
            if crate::tls::enabled() {
                "orb-tls"
            } else {
                "orb"
            },
        )
        .str("role", "server")
        .int("threads", threads as u64)
        .int("calls", calls)
        .num("ctx_switches_per_call", ctx.per_call(calls))
        .int("voluntary_ctx_switches", ctx.voluntary)
        .int("involuntary_ctx_switches", ctx.involuntary)
        .int("peak_rss_kb", peak_rss_kb())
        .int("connections_accepted", s.connections_accepted)
        .num("leader_promotions_per_call", per(s.leader_promotions))
        .num("follower_wakeups_per_call", per(s.follower_wakeups))
        .int("standby_tick_takeovers", s.standby_tick_takeovers)
        .num("leader_reclaims_per_call", per(s.leader_reclaims))
        .print();
    orb.shutdown();
    Ok(())
}

/// A node of the nested ping-pong: calls its peer back until depth 0.
struct NodeServant {
    orb: protorb::Orb,
    me: Mutex<Option<protorb::ObjectRef>>,
    /// Where this node's upcalls found the stack: (depth, address of a local) of the first
    /// ping this node served and of the last with depth at most 2 (the bottom of a chain).
    stack: Mutex<StackMarks>,
    stack_marked: AtomicBool,
}

/// See [`NodeServant::stack`].
#[derive(Default, Clone, Copy)]
struct StackMarks {
    top: Option<(u32, usize, std::thread::ThreadId)>,
    bottom: Option<(u32, usize, std::thread::ThreadId)>,
}

impl StackMarks {
    /// Stack bytes one nested level of this node takes (the ORB's frames, the generated
    /// stub's and skeleton's, this servant's): between the top and the bottom of a chain
    /// this node served every other level.
    fn bytes_per_level(&self) -> Option<f64> {
        let ((d0, a0, t0), (d1, a1, t1)) = (self.top?, self.bottom?);
        // On two threads' stacks the difference would mean nothing.
        let levels = d0.checked_sub(d1)? / 2;
        (levels > 0 && t0 == t1).then(|| a0.abs_diff(a1) as f64 / f64::from(levels))
    }
}

impl Node for Arc<NodeServant> {
    fn ping(
        &self,
        _ctx: &protorb::Context,
        req: PingRequest,
    ) -> Result<PingReply, protorb::Exception> {
        let here = 0u8;
        let addr = std::hint::black_box(&here) as *const u8 as usize;
        if req.depth <= 2 || !self.stack_marked.load(Ordering::Relaxed) {
            let mut m = self.stack.lock().unwrap_or_else(|p| p.into_inner());
            let mark = Some((req.depth, addr, std::thread::current().id()));
            if m.top.is_none() {
                m.top = mark;
                self.stack_marked.store(true, Ordering::Relaxed);
            } else if req.depth <= 2 {
                m.bottom = mark;
            }
        }
        if req.depth == 0 {
            return Ok(PingReply { depth_reached: 0 });
        }
        let peer = req.peer.ok_or_else(|| {
            protorb::Exception::from(protorb::SystemException::bad_param(
                0,
                "ping without a peer",
            ))
        })?;
        let me = self.me.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let reply = NodeClient::new(&self.orb, peer).ping(PingRequest {
            depth: req.depth - 1,
            peer: me,
        })?;
        Ok(PingReply {
            depth_reached: reply.depth_reached + 1,
        })
    }
}

/// A node of `nest`; with `bidir`, it takes callbacks over the connection it opened
/// (`bidir_accept`; offering it is the default).
fn node_orb(
    threads: usize,
    bidir: bool,
) -> Result<(protorb::Orb, protorb::ObjectRef, Arc<NodeServant>), String> {
    let orb = protorb::Orb::builder()
        .threads(threads)
        .call_timeout(NEST_TIMEOUT)
        .bidir_accept(bidir)
        .build()
        .map_err(|e| e.to_string())?;
    let servant = Arc::new(NodeServant {
        orb: orb.clone(),
        me: Mutex::new(None),
        stack: Mutex::new(StackMarks::default()),
        stack_marked: AtomicBool::new(false),
    });
    let r = orb.activate(&b"node"[..], NodeSkeleton::new(servant.clone()));
    *servant.me.lock().unwrap_or_else(|p| p.into_inner()) = Some(r.clone());
    Ok((orb, r, servant))
}

/// The peer process of `nest` (node B): prints its reference on stdout, serves until its
/// stdin closes (the parent exited or is done).
pub fn nest_peer(threads: usize, bidir: bool) -> Result<(), String> {
    let (orb, r, _) = node_orb(threads, bidir)?;
    println!("{}", orb.object_to_string(&r));
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
    orb.shutdown();
    Ok(())
}

/// `nest --depth D --threads T` (two processes): this process is node A with `threads` pool
/// threads; node B is a child process (`nest-peer`) with `max(threads, 1)` pool threads, since
/// a process whose ORB has no thread at all cannot take the first call. A calls `B.ping(D, A)`
/// from an application thread (a bound caller; with `--threads 0` it is A's only thread).
///
/// With `bidir`, both nodes accept bidirectional GIOP: B calls A back over the connection A
/// opened, so each node has one connection, which its thread reads itself (owned reads).
pub fn nest(depth: u32, threads: usize, bidir: bool) -> Result<bool, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let peer_threads = threads.max(1);
    let mut child = Command::new(exe)
        .args(["nest-peer", "--threads", &peer_threads.to_string()])
        .args(bidir.then_some("--bidir"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("cannot start the peer process: {e}"))?;
    let ior = {
        let out = child.stdout.take().ok_or("no stdout of the peer")?;
        let mut line = String::new();
        BufReader::new(out)
            .read_line(&mut line)
            .map_err(|e| e.to_string())?;
        line.trim().to_string()
    };
    eprintln!(
        "nest: peer process {} ({peer_threads} pool threads)",
        child.id()
    );
    let (orb, me, servant) = node_orb(threads, bidir)?;
    let peer = orb.string_to_object(&ior).map_err(|e| e.to_string())?;
    let (tx, rx) = mpsc::channel();
    {
        let orb = orb.clone();
        // Nested upcalls recurse on the serving thread's stack: give the caller (which serves
        // every upcall of A when A has no pool thread) the same stack as an ORB pool thread.
        std::thread::Builder::new()
            .name("nest-caller".into())
            .stack_size(64 << 20)
            .spawn(move || {
                let client = NodeClient::new(&orb, peer);
                let chain = || {
                    let t0 = Instant::now();
                    let r = client.ping(PingRequest {
                        depth,
                        peer: Some(me.clone()),
                    });
                    (r, t0.elapsed())
                };
                // A first, untimed-for-the-result chain: it touches the deep stacks and the
                // allocator's memory for the first time (page faults); its time is reported
                // as `cold_us_per_level`.
                let cold = chain();
                let warm = if matches!(&cold.0, Ok(r) if r.depth_reached == depth) {
                    // `WARM_CHAINS` timed chains, the median reported: one chain lasts
                    // tens of milliseconds, about as long as one of the VM's slow spells.
                    let ctx0 = CtxSwitches::now();
                    let mut chains = Vec::with_capacity(WARM_CHAINS);
                    for _ in 0..WARM_CHAINS {
                        let c = chain();
                        let ok = matches!(&c.0, Ok(r) if r.depth_reached == depth);
                        chains.push(c);
                        if !ok {
                            break;
                        }
                    }
                    Some((chains, CtxSwitches::now().since(ctx0)))
                } else {
                    None
                };
                let _ = tx.send((cold, warm));
            })
            .map_err(|e| e.to_string())?;
    }
    // Each call has its own 30 s deadline; this watchdog only guards against a hang in them.
    let outcome = rx.recv_timeout((1 + WARM_CHAINS as u32) * NEST_TIMEOUT + Duration::from_secs(5));
    let line = JsonLine::new()
        .str("impl", if bidir { "orb-bidir" } else { "orb" })
        .str("workload", "nest")
        .int("depth", u64::from(depth))
        .int("threads", threads as u64);
    let per_level = |d: Duration| d.as_secs_f64() * 1e6 / f64::from(depth.max(1));
    let failed = |line: JsonLine, r: &Result<PingReply, protorb::Exception>, d: Duration| {
        let why = match r {
            Ok(reply) => format!("reached depth {} of {depth}", reply.depth_reached),
            Err(e) => e.to_string(),
        };
        line.bool("ok", false)
            .num("secs", d.as_secs_f64())
            .str("error", &why)
            .print();
    };
    let ok = match outcome {
        Ok(((_, cold_t), Some((chains, ctx))))
            if chains.len() == WARM_CHAINS
                && chains
                    .iter()
                    .all(|(r, _)| matches!(r, Ok(r) if r.depth_reached == depth)) =>
        {
            let mut times: Vec<Duration> = chains.iter().map(|(_, t)| *t).collect();
            times.sort();
            let t = times[WARM_CHAINS / 2];
            let calls = (u64::from(depth) + 1) * WARM_CHAINS as u64;
            let line = line
                .bool("ok", true)
                .num("secs", t.as_secs_f64())
                .num("us_per_level", per_level(t))
                .int("chains", WARM_CHAINS as u64)
                .num("min_us_per_level", per_level(times[0]))
                .num("max_us_per_level", per_level(times[WARM_CHAINS - 1]))
                .num("cold_us_per_level", per_level(cold_t))
                .num("ctx_switches_per_call", ctx.per_call(calls))
                .int("peak_rss_kb", peak_rss_kb());
            // Stack per nested level in this process (see `StackMarks`), if it served a chain's
            // top and bottom: what bounds the depth a thread's stack allows.
            let marks = *servant.stack.lock().unwrap_or_else(|p| p.into_inner());
            match marks.bytes_per_level() {
                Some(b) => line.num("stack_bytes_per_level", b),
                None => line,
            }
            .print();
            true
        }
        Ok((_, Some((mut chains, _)))) => {
            let (r, t) = chains.pop().expect("at least one chain ran");
            failed(line, &r, t);
            false
        }
        Ok(((r, t), None)) => {
            failed(line, &r, t);
            false
        }
        Err(_) => {
            line.bool("ok", false)
                .str("error", "no reply within the timeout (hang)")
                .print();
            let _ = child.kill();
            std::process::exit(1);
        }
    };
    drop(child.stdin.take());
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < until => std::thread::sleep(Duration::from_millis(10)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break;
            }
        }
    }
    orb.shutdown();
    Ok(ok)
}
