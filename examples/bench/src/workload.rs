//! The client workloads of PROTOCOL.md, written once over [`EchoConn`] so that the ORB and the
//! raw baseline run exactly the same loop.

use crate::metrics::{CtxSwitches, JsonLine, Latencies};
use bytes::Bytes;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Barrier, OnceLock};
use std::time::{Duration, Instant};

/// One way of calling `echo(bytes) -> bytes`.
pub trait EchoConn {
    /// The reply, as the implementation hands it over (no conversion to measure).
    type Reply: AsRef<[u8]>;
    /// Sends `data`, returns the reply's payload. `data` is a handle on the workload's one
    /// payload (a reference count, no copy per call), as a C++ client passes its sequence by
    /// reference.
    fn echo(&mut self, data: Bytes) -> Result<Self::Reply, String>;
}

/// Workload parameters (the protocol's by default; smaller in `--quick` smoke runs).
#[derive(Clone, Debug)]
pub struct Params {
    pub lat_warmup: usize,
    pub lat_calls: usize,
    pub tput_warmup: Duration,
    pub tput_measure: Duration,
    pub big_warmup: usize,
    pub big_calls: usize,
    /// `lat-async --in-task`: the call loop runs in a spawned task rather than as the
    /// `block_on` future (tokio polls its I/O driver once more, without waiting, before it
    /// polls a woken `block_on` future; a woken task runs without that).
    pub lat_async_in_task: bool,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            lat_warmup: 2_000,
            lat_calls: 20_000,
            tput_warmup: Duration::from_secs(1),
            tput_measure: Duration::from_secs(5),
            big_warmup: 20,
            big_calls: 200,
            lat_async_in_task: false,
        }
    }
}

pub const SMALL: usize = 64;
pub const BIG: usize = 1 << 20;

/// Payload bytes derived from a seed, so a reply routed to the wrong caller shows. Made once
/// per caller and sent as clones of one `Bytes` (until 2026-12-07 the workloads cloned a
/// `Vec` per call: a `malloc`, a copy and a `free` in every implementation's client, 1 MiB
/// copied per `big` call; omniORB's client passes its sequence by reference).
pub fn payload(seed: u64, len: usize) -> Bytes {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect::<Vec<u8>>()
        .into()
}

fn check(reply: &impl AsRef<[u8]>, sent: &[u8]) -> Result<(), String> {
    let reply = reply.as_ref();
    if reply == sent {
        Ok(())
    } else {
        Err(format!(
            "wrong reply: {} bytes, expected the {} bytes sent",
            reply.len(),
            sent.len()
        ))
    }
}

/// What a workload run measured, before the implementation adds its name.
pub struct Outcome {
    pub line: JsonLine,
}

/// `lat`: one thread, sequential 64 B calls, each timed (the request is built and the reply
/// checked outside the timed part).
pub fn lat(conn: &mut impl EchoConn, p: &Params, imp: &str) -> Result<Outcome, String> {
    let data = payload(1, SMALL);
    for _ in 0..p.lat_warmup {
        check(&conn.echo(data.clone())?, &data)?;
    }
    let ctx0 = CtxSwitches::now();
    let mut lats = Latencies::with_capacity(p.lat_calls);
    let start = Instant::now();
    for _ in 0..p.lat_calls {
        let req = data.clone();
        let t0 = Instant::now();
        let reply = conn.echo(req)?;
        lats.push(t0.elapsed());
        check(&reply, &data)?;
    }
    let wall = start.elapsed().as_secs_f64();
    let ctx = CtxSwitches::now().since(ctx0);
    let calls = lats.len() as u64;
    let s = lats.sorted();
    let line = JsonLine::new()
        .str("impl", imp)
        .str("workload", "lat")
        .int("calls", calls)
        .num("p50_us", s.percentile_us(50.0))
        .num("p99_us", s.percentile_us(99.0))
        .num("p999_us", s.percentile_us(99.9))
        .num("mean_us", s.mean_us())
        .num("rps", calls as f64 / wall)
        .num("ctx_switches_per_call", ctx.per_call(calls));
    Ok(Outcome { line })
}

/// `tput N`: N threads calling concurrently; a call counts if it completes inside the
/// measured window (after the warm-up). `make(i)` gives thread `i` its connection: a shared
/// stub for the ORB, its own socket for the raw baseline. The context switches are those of the
/// measured window (sampled by the main thread at its start and end).
pub fn tput<C: EchoConn>(
    threads: usize,
    make: &(dyn Fn(usize) -> Result<C, String> + Sync),
    p: &Params,
    imp: &str,
) -> Result<Outcome, String> {
    let barrier = Barrier::new(threads + 1);
    let failed = AtomicBool::new(false);
    let begin = OnceLock::new();
    let (results, ctx) = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let (barrier, failed, begin) = (&barrier, &failed, &begin);
                s.spawn(move || -> Result<Latencies, String> {
                    let conn = make(i);
                    // Everyone meets at the barriers, even after a failed connect: the first
                    // when connected, the second once the main thread has set the start time.
                    barrier.wait();
                    barrier.wait();
                    let mut conn = conn?;
                    let begin: Instant = *begin.get().ok_or("no start time")?;
                    let data = payload(i as u64 + 2, SMALL);
                    let warm_end = begin + p.tput_warmup;
                    let end = warm_end + p.tput_measure;
                    let mut lats = Latencies::with_capacity(1 << 16);
                    loop {
                        if failed.load(Ordering::Relaxed) {
                            return Err("another thread failed".into());
                        }
                        let req = data.clone();
                        let t0 = Instant::now();
                        let outcome = conn.echo(req).and_then(|r| check(&r, &data));
                        let t1 = Instant::now();
                        if let Err(e) = outcome {
                            failed.store(true, Ordering::Relaxed);
                            return Err(e);
                        }
                        if t1 > end {
                            return Ok(lats);
                        }
                        if t1 >= warm_end {
                            lats.push(t1 - t0);
                        }
                    }
                })
            })
            .collect();
        barrier.wait();
        let t = Instant::now();
        let _ = begin.set(t);
        barrier.wait();
        std::thread::sleep((t + p.tput_warmup).saturating_duration_since(Instant::now()));
        let ctx0 = CtxSwitches::now();
        let end = t + p.tput_warmup + p.tput_measure;
        std::thread::sleep(end.saturating_duration_since(Instant::now()));
        let ctx = CtxSwitches::now().since(ctx0);
        let results: Vec<_> = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("thread panicked".into())))
            .collect();
        (results, ctx)
    });
    let mut all = Latencies::default();
    for r in results {
        all.extend(r?);
    }
    let calls = all.len() as u64;
    let s = all.sorted();
    let secs = p.tput_measure.as_secs_f64();
    let line = JsonLine::new()
        .str("impl", imp)
        .str("workload", "tput")
        .int("threads", threads as u64)
        .int("calls", calls)
        .num("rps", calls as f64 / secs)
        .num("p50_us", s.percentile_us(50.0))
        .num("p99_us", s.percentile_us(99.0))
        .num("ctx_switches_per_call", ctx.per_call(calls));
    Ok(Outcome { line })
}

/// `big`: one thread, 1 MiB payloads. `mb_per_s` is the payload bytes of one direction times
/// the timed calls over the sum of their times (request building and reply checks excluded).
pub fn big(conn: &mut impl EchoConn, p: &Params, imp: &str) -> Result<Outcome, String> {
    let data = payload(3, BIG);
    for _ in 0..p.big_warmup {
        check(&conn.echo(data.clone())?, &data)?;
    }
    let ctx0 = CtxSwitches::now();
    let mut lats = Latencies::with_capacity(p.big_calls);
    for _ in 0..p.big_calls {
        let req = data.clone();
        let t0 = Instant::now();
        let reply = conn.echo(req)?;
        lats.push(t0.elapsed());
        check(&reply, &data)?;
    }
    let ctx = CtxSwitches::now().since(ctx0);
    let calls = lats.len() as u64;
    let s = lats.sorted();
    let line = JsonLine::new()
        .str("impl", imp)
        .str("workload", "big")
        .int("calls", calls)
        .num("mb_per_s", BIG as f64 * calls as f64 / s.total_secs() / 1e6)
        .num("p50_us", s.percentile_us(50.0))
        .num("ctx_switches_per_call", ctx.per_call(calls));
    Ok(Outcome { line })
}

/// One way of calling `echo(bytes) -> bytes` asynchronously. Each task of an asynchronous
/// workload has its own clone (a shared stub behind an `Arc`, a tonic channel's handle): all
/// clones share one connection.
pub trait AsyncEchoConn: Clone + Send + 'static {
    type Reply: AsRef<[u8]>;
    /// Starts a call with `data`; the future resolves with the reply's payload.
    fn echo(
        &mut self,
        data: Bytes,
    ) -> impl std::future::Future<Output = Result<Self::Reply, String>> + Send;

    /// Runs the workload's future on `rt` (the ORB drives its event loop inside it with
    /// `protorb::tokio::drive_with`, unless its driver is a task of its own).
    fn block_on<F: std::future::Future>(
        &self,
        rt: &tokio::runtime::Runtime,
        fut: F,
    ) -> Result<F::Output, String> {
        Ok(rt.block_on(fut))
    }
}

/// The runtime of the asynchronous workloads: tokio's current-thread runtime, so the one client
/// thread runs every task (I/O and timers enabled: tonic's channel needs them, the ORB not).
pub fn current_thread_runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("tokio runtime: {e}"))
}

/// `lat-async`: `lat` with each call awaited in turn on a current-thread runtime (one task, one
/// call at a time): what an asynchronous call costs over a blocking one, alone.
pub fn lat_async<C: AsyncEchoConn>(
    rt: &tokio::runtime::Runtime,
    mut conn: C,
    p: &Params,
    imp: &str,
) -> Result<Outcome, String> {
    let data = payload(1, SMALL);
    let p = p.clone();
    let in_task = p.lat_async_in_task;
    let runner = conn.clone();
    let run = async move {
        for _ in 0..p.lat_warmup {
            check(&conn.echo(data.clone()).await?, &data)?;
        }
        let ctx0 = CtxSwitches::now();
        let mut lats = Latencies::with_capacity(p.lat_calls);
        let start = Instant::now();
        for _ in 0..p.lat_calls {
            let req = data.clone();
            let t0 = Instant::now();
            let reply = conn.echo(req).await?;
            lats.push(t0.elapsed());
            check(&reply, &data)?;
        }
        let wall = start.elapsed().as_secs_f64();
        Ok::<_, String>((lats, wall, CtxSwitches::now().since(ctx0)))
    };
    let (lats, wall, ctx) = if in_task {
        runner.block_on(rt, async move {
            tokio::spawn(run)
                .await
                .map_err(|e| format!("lat-async task: {e}"))?
        })??
    } else {
        runner.block_on(rt, run)??
    };
    let calls = lats.len() as u64;
    let s = lats.sorted();
    let line = JsonLine::new()
        .str("impl", imp)
        .str("workload", "lat-async")
        .int("calls", calls)
        .num("p50_us", s.percentile_us(50.0))
        .num("p99_us", s.percentile_us(99.0))
        .num("p999_us", s.percentile_us(99.9))
        .num("mean_us", s.mean_us())
        .num("rps", calls as f64 / wall)
        .num("ctx_switches_per_call", ctx.per_call(calls));
    Ok(Outcome { line })
}

const FOLLOWER_ERROR: &str = "another task failed";

/// `tput-async N`: ONE client thread (a current-thread runtime) keeps `inflight` calls in
/// flight over one connection: `inflight` tasks, each starting its next call as soon as its
/// last one completes. Windows and counting as in `tput`: a call counts if it completes inside
/// the measured window; its latency runs from the call being made (the request is written
/// then, for the ORB) to the task seeing the reply. Context switches are the whole process's
/// in the measured window (sampled by a timer task).
pub fn tput_async<C: AsyncEchoConn>(
    rt: &tokio::runtime::Runtime,
    conn: C,
    inflight: usize,
    p: &Params,
    imp: &str,
) -> Result<Outcome, String> {
    let (warmup, measure) = (p.tput_warmup, p.tput_measure);
    let runner = conn.clone();
    let (all, ctx) = runner.block_on(rt, async move {
        let begin = Instant::now();
        let warm_end = begin + warmup;
        let end = warm_end + measure;
        let failed = std::sync::Arc::new(AtomicBool::new(false));
        let sampler = tokio::spawn(async move {
            tokio::time::sleep_until(warm_end.into()).await;
            let ctx0 = CtxSwitches::now();
            tokio::time::sleep_until(end.into()).await;
            CtxSwitches::now().since(ctx0)
        });
        let tasks: Vec<_> = (0..inflight)
            .map(|i| {
                let mut conn = conn.clone();
                let failed = failed.clone();
                tokio::spawn(async move {
                    let data = payload(i as u64 + 2, SMALL);
                    let mut lats = Latencies::with_capacity(1 << 10);
                    loop {
                        if failed.load(Ordering::Relaxed) {
                            return Err(FOLLOWER_ERROR.to_string());
                        }
                        let req = data.clone();
                        let t0 = Instant::now();
                        let outcome = conn.echo(req).await.and_then(|r| check(&r, &data));
                        let t1 = Instant::now();
                        if let Err(e) = outcome {
                            failed.store(true, Ordering::Relaxed);
                            return Err(e);
                        }
                        if t1 > end {
                            return Ok(lats);
                        }
                        if t1 >= warm_end {
                            lats.push(t1 - t0);
                        }
                    }
                })
            })
            .collect();
        drop(conn);
        let mut all = Latencies::default();
        let mut errors = Vec::new();
        for t in tasks {
            match t.await {
                Ok(Ok(l)) => all.extend(l),
                Ok(Err(e)) => errors.push(e),
                Err(e) => errors.push(format!("task failed: {e}")),
            }
        }
        let ctx = sampler.await.map_err(|e| format!("sampler: {e}"))?;
        // The failure itself, not the "another task failed" of the tasks it stopped.
        match errors
            .iter()
            .find(|e| *e != FOLLOWER_ERROR)
            .or(errors.first())
        {
            Some(e) => Err(e.clone()),
            None => Ok((all, ctx)),
        }
    })??;
    let calls = all.len() as u64;
    let s = all.sorted();
    let secs = measure.as_secs_f64();
    let line = JsonLine::new()
        .str("impl", imp)
        .str("workload", "tput-async")
        .int("inflight", inflight as u64)
        .int("calls", calls)
        .num("rps", calls as f64 / secs)
        .num("p50_us", s.percentile_us(50.0))
        .num("p99_us", s.percentile_us(99.0))
        .num("ctx_switches_per_call", ctx.per_call(calls));
    Ok(Outcome { line })
}
