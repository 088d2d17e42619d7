//! Asynchronous calls (AMI as futures): 10,000 `echo_async` calls in flight at once over one
//! connection, under tokio, each reply checked against its own request. On the server, one
//! call in ten is answered through a deferred reply (AMH) by a tokio task after a timer, so
//! no ORB thread waits for the timer.
//!
//! Run: `cargo run --release -p orb-examples --bin async-echo` (prints a one-line verdict;
//! `--calls N` and `--threads T` change the load and the ORBs' pool threads).
//!
//! `echo_async` writes the request before it returns, so the loop below puts every request on
//! the wire first; the tasks then only wait for replies. The client ORB has no pool thread:
//! a task on the runtime, `protorb::tokio::drive`, drives its event loop (`Orb::turn` when
//! the ORB's event fd is readable), reading the replies and waking the tasks on the runtime's
//! own threads (the `tokio` feature of `protorb`; the ORB's core uses no async runtime).

use clap::Parser;
use orb_examples::proto::echo::{Echo, EchoClient, EchoReply, EchoRequest, EchoSkeleton};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// async-echo: many asynchronous echo calls at once over one connection (tokio).
#[derive(Parser, Debug)]
#[command(name = "async-echo")]
struct Cli {
    /// Calls in flight at once.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    calls: u32,
    /// Pool threads of the server ORB, at least 1 (the client's event loop is driven by a
    /// task on the tokio runtime, so the client ORB has none).
    #[arg(long, value_name = "N", default_value_t = 2,
          value_parser = clap::value_parser!(u64).range(1..))]
    threads: u64,
}

/// Answers every call; every `DEFER_EVERY`th one through a deferred reply, after an `await`
/// on a tokio timer, so that no ORB thread waits for the timer.
struct Counter {
    served: AtomicU64,
    deferred: Arc<AtomicU64>,
    tokio: tokio::runtime::Handle,
}

/// One call in this many is answered after a tokio timer.
const DEFER_EVERY: u64 = 10;

impl Echo for Counter {
    fn echo(
        &self,
        ctx: &protorb::Context,
        req: EchoRequest,
    ) -> Result<EchoReply, protorb::Exception> {
        let served = self.served.fetch_add(1, Ordering::Relaxed) + 1;
        let reply = EchoReply {
            text: req.text,
            served,
        };
        if served % DEFER_EVERY != 0 {
            return Ok(reply);
        }
        // The ORB thread returns at once; a tokio task answers 1-5 ms later.
        let handle = ctx.defer()?.typed::<EchoReply, protorb::Exception>();
        self.deferred.fetch_add(1, Ordering::Relaxed);
        self.tokio.spawn(async move {
            tokio::time::sleep(Duration::from_millis(1 + served % 5)).await;
            handle.reply(Ok(reply));
        });
        // Ignored once deferred: the handle answers.
        Ok(EchoReply::default())
    }
}

fn main() {
    let cli = Cli::parse();
    let calls = cli.calls;
    let threads = usize::try_from(cli.threads).unwrap_or(usize::MAX);

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let server = protorb::Orb::builder()
        .threads(threads)
        .build()
        .expect("server ORB");
    let deferred = Arc::new(AtomicU64::new(0));
    let obj = server.activate(
        "echo",
        EchoSkeleton::new(Counter {
            served: AtomicU64::new(0),
            deferred: deferred.clone(),
            tokio: rt.handle().clone(),
        }),
    );
    // No pool thread: the driver task reads the replies and wakes the tasks (with pool
    // threads, they would, from threads of their own; with neither, nobody would).
    let client = protorb::Orb::builder()
        .threads(0)
        .no_listen()
        .build()
        .expect("client ORB");
    let driver = rt.spawn(protorb::tokio::drive(client.clone()));
    let echo = EchoClient::new(&client, obj);

    let started = Instant::now();
    let failures = rt.block_on(async {
        let mut set = tokio::task::JoinSet::new();
        for i in 0..calls {
            let text = format!("message {i}");
            // Sent here; the task only awaits the reply.
            let reply = echo.echo_async_with_timeout(
                EchoRequest { text: text.clone() },
                Duration::from_secs(60),
            );
            set.spawn(async move {
                match reply.await {
                    Ok(r) if r.text == text => Ok(()),
                    Ok(r) => Err(format!("call {i} got the reply {:?}", r.text)),
                    Err(e) => Err(format!("call {i}: {e}")),
                }
            });
        }
        let mut failures = Vec::new();
        while let Some(r) = set.join_next().await {
            match r {
                Ok(Ok(())) => {}
                Ok(Err(e)) => failures.push(e),
                Err(e) => failures.push(format!("task failed: {e}")),
            }
        }
        failures
    });
    let elapsed = started.elapsed();
    let stats = client.stats();
    client.shutdown();
    let driven = rt.block_on(driver);
    server.shutdown();
    if !matches!(driven, Ok(Ok(()))) {
        println!("verdict: FAILED the event-loop driver ended with {driven:?}");
        std::process::exit(1);
    }
    if let Some(first) = failures.first() {
        println!(
            "verdict: FAILED {} of {calls} calls; first: {first}",
            failures.len()
        );
        std::process::exit(1);
    }
    let deferred = deferred.load(Ordering::Relaxed);
    if calls >= DEFER_EVERY as u32 && deferred == 0 {
        println!("verdict: FAILED no call was answered through a deferred reply");
        std::process::exit(1);
    }
    println!(
        "verdict: OK {calls} concurrent calls over {} connection(s) in {} ms, {deferred} of them \
         answered after a tokio timer through a deferred reply",
        stats.connections_opened,
        elapsed.as_millis()
    );
}
