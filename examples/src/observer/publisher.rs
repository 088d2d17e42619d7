//! Observer, the publisher: subscribers register callback objects with it (`orb.ObjectRef`
//! inside the `Subscribe` message); for each event it calls every subscriber back, and each
//! subscriber calls the publisher again (`Ack`) from inside that callback. A subscriber that
//! dies is dropped on COMM_FAILURE or TRANSIENT; the others keep receiving.
//!
//! Interactively, in three terminals:
//!
//! ```text
//! cargo run -p orb-examples --bin observer-publisher                      # an event a second
//! cargo run -p orb-examples --bin observer-subscriber -- --name alice
//! cargo run -p orb-examples --bin observer-subscriber -- --name bob      # Ctrl-C it: dropped
//! ```
//!
//! Self-contained (what CI runs): the publisher starts three `observer-subscriber` processes,
//! publishes five events, kills one subscriber half-way, and checks that the others received
//! and acknowledged every event and that the dead one was dropped; exit status 0 if so.
//!
//! ```text
//! cargo run -p orb-examples --bin observer-publisher -- --events 5 --subscribers 3 --kill-one
//! ```

use clap::Parser;
use orb_examples::errors::{describe, describe_exception};
use orb_examples::process::{sibling_exe, Peer};
use orb_examples::proto::observer::{
    AckRequest, Event, Publisher, PublisherSkeleton, StreamEnd, SubscribeReply, SubscribeRequest,
    SubscriberClient,
};
use orb_examples::{fail, parse_duration, thread_label};
use protorb::{Exception, Orb, SystemExceptionKind};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// observer-publisher: publishes events to subscribers' callback objects.
///
/// With --subscribers it checks at the end that every subscriber received and acknowledged
/// every event (but the one --kill-one killed, which must have been dropped) and prints the
/// verdict; exit status 0 if so.
#[derive(Parser, Debug)]
#[command(name = "observer-publisher")]
struct Cli {
    /// Publish N events, then end the stream (default: until Ctrl-C).
    #[arg(long, value_name = "N")]
    events: Option<u64>,
    /// Time between events: 500ms, 3s, 1.5s, 2m, or seconds (default: 1s; 100ms with
    /// --subscribers).
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    interval: Option<Duration>,
    /// Start K observer-subscriber processes first (sub-1 ... sub-K) and check at the end that
    /// each received every event.
    #[arg(long, value_name = "K", default_value_t = 0)]
    subscribers: usize,
    /// With --subscribers: kill sub-2 half-way through, to show it being dropped.
    #[arg(long)]
    kill_one: bool,
    /// Port on 127.0.0.1 (default: 12810; with --subscribers, a free one).
    #[arg(long, value_name = "N")]
    port: Option<u16>,
    /// ORB pool threads.
    #[arg(long, value_name = "N", default_value_t = 2)]
    threads: usize,
}

/// A registered subscriber.
struct Subscription {
    name: String,
    client: SubscriberClient,
}

/// The publisher object: the subscriber list and the acknowledgements received.
struct PublisherServant {
    orb: Orb,
    subscribers: Mutex<Vec<Subscription>>,
    acks: Mutex<HashMap<String, Vec<u64>>>,
    next_seq: AtomicU64,
    anonymous: AtomicU64,
    /// The thread that publishes (and waits in each callback), and how many acks it served.
    main_thread: std::thread::ThreadId,
    acks_on_main: AtomicU64,
}

impl Publisher for PublisherServant {
    fn subscribe(
        &self,
        ctx: &protorb::Context,
        req: SubscribeRequest,
    ) -> Result<SubscribeReply, Exception> {
        let name = if req.name.is_empty() {
            format!(
                "anonymous-{}",
                self.anonymous.fetch_add(1, Ordering::Relaxed) + 1
            )
        } else {
            req.name
        };
        let reference = req.subscriber.unwrap_or_default();
        // The reference carries its type id, so this checks the type without a remote call.
        let client = SubscriberClient::narrow(&self.orb, reference)?;
        let next_seq = self.next_seq.load(Ordering::SeqCst);
        println!(
            "subscribed: {name} (from {}); its first event will be #{next_seq}",
            ctx.peer().map_or("?".to_string(), |p| p.to_string())
        );
        self.subscribers
            .lock()
            .unwrap()
            .push(Subscription { name, client });
        Ok(SubscribeReply { next_seq })
    }

    fn ack(&self, _ctx: &protorb::Context, req: AckRequest) -> Result<(), Exception> {
        // Runs while the publisher's main thread is inside the OnEvent call to this very
        // subscriber: served by a pool thread, or by that waiting thread itself.
        if std::thread::current().id() == self.main_thread {
            self.acks_on_main.fetch_add(1, Ordering::Relaxed);
        }
        self.acks
            .lock()
            .unwrap()
            .entry(req.name)
            .or_default()
            .push(req.seq);
        Ok(())
    }
}

impl PublisherServant {
    /// Calls every subscriber back with `event`, in turn; drops those that are gone. Returns
    /// (delivered, dropped: name and exception kind).
    fn publish(&self, event: &Event) -> (usize, Vec<(String, SystemExceptionKind)>) {
        // Snapshot the clients: no lock is held during the callbacks, since a subscriber may
        // call Subscribe or Ack meanwhile.
        let subs: Vec<(String, SubscriberClient)> = self
            .subscribers
            .lock()
            .unwrap()
            .iter()
            .map(|s| (s.name.clone(), s.client.clone()))
            .collect();
        let mut delivered = 0;
        let mut dropped = Vec::new();
        for (name, client) in subs {
            match client.on_event(event.clone()) {
                Ok(()) => delivered += 1,
                Err(Exception::System(e))
                    if matches!(
                        e.kind,
                        SystemExceptionKind::COMM_FAILURE
                            | SystemExceptionKind::TRANSIENT
                            | SystemExceptionKind::OBJECT_NOT_EXIST
                    ) =>
                {
                    println!("dropping {name}: {}", describe(&e));
                    self.subscribers.lock().unwrap().retain(|s| s.name != name);
                    dropped.push((name, e.kind));
                }
                Err(e) => println!(
                    "event #{} not delivered to {name}: {} (keeping it)",
                    event.seq,
                    describe_exception(&e)
                ),
            }
        }
        (delivered, dropped)
    }
}

fn main() {
    let Cli {
        events,
        interval,
        subscribers: spawn,
        kill_one,
        port,
        threads,
    } = Cli::parse();
    let interval = interval.unwrap_or(if spawn > 0 {
        Duration::from_millis(100)
    } else {
        Duration::from_secs(1)
    });
    let port = port.unwrap_or(if spawn > 0 { 0 } else { 12810 });
    if threads == 0 {
        // The main thread serves only while it waits in a callback; Subscribe needs a thread
        // at any time.
        fail("--threads must be at least 1");
    }
    if kill_one && (spawn < 2 || events.is_none_or(|n| n < 2)) {
        fail("--kill-one needs --subscribers 2 or more and --events 2 or more");
    }

    let orb = Orb::builder()
        .listen(("127.0.0.1", port))
        .threads(threads)
        .call_timeout(Duration::from_secs(5))
        .build()
        .unwrap_or_else(|e| fail(format!("cannot start the ORB: {}", describe(&e))));
    let publisher = Arc::new(PublisherServant {
        orb: orb.clone(),
        subscribers: Mutex::new(Vec::new()),
        acks: Mutex::new(HashMap::new()),
        next_seq: AtomicU64::new(1),
        anonymous: AtomicU64::new(0),
        main_thread: std::thread::current().id(),
        acks_on_main: AtomicU64::new(0),
    });
    let reference = orb.activate(&b"publisher"[..], PublisherSkeleton::new(publisher.clone()));
    let ior = orb.object_to_string(&reference);
    println!("{ior}");
    if let Some(url) = reference.to_corbaloc() {
        println!("{url}");
    }
    println!(
        "observer-publisher: main thread {}; {}",
        thread_label(),
        match events {
            Some(n) => format!("{n} events, one every {interval:?}"),
            None => format!("an event every {interval:?} until Ctrl-C"),
        }
    );

    // --subscribers: start them; each prints its callback reference once it has subscribed.
    let mut peers = Vec::new();
    if spawn > 0 {
        let exe = sibling_exe("observer-subscriber").unwrap_or_else(|e| fail(e));
        for i in 1..=spawn {
            let name = format!("sub-{i}");
            let args = [
                ior.clone(),
                format!("--name={name}"),
                "--exit-on-eof".into(),
            ];
            let peer = Peer::spawn(&name, &exe, &args, Duration::from_secs(10))
                .unwrap_or_else(|e| fail(e));
            peers.push(peer);
        }
    }
    let victim = kill_one.then(|| "sub-2".to_string());
    let kill_after = events.map_or(0, |n| n.div_ceil(2));

    let mut drops: Vec<(String, u64, SystemExceptionKind)> = Vec::new();
    let mut seq = 0;
    while events.is_none_or(|n| seq < n) {
        std::thread::sleep(interval);
        seq = publisher.next_seq.fetch_add(1, Ordering::SeqCst);
        let event = Event {
            seq,
            text: format!("tick {seq}"),
        };
        let (delivered, dropped) = publisher.publish(&event);
        println!(
            "event #{seq}: delivered to {delivered} subscriber{}{}",
            if delivered == 1 { "" } else { "s" },
            if dropped.is_empty() {
                String::new()
            } else {
                format!(", dropped {}", dropped.len())
            }
        );
        drops.extend(dropped.into_iter().map(|(n, k)| (n, seq, k)));
        if seq == kill_after {
            if let Some(p) = peers
                .iter_mut()
                .find(|p| Some(p.label()) == victim.as_deref())
            {
                let pid = p.pid();
                let _ = p.kill();
                println!(
                    "killed {} (pid {pid}) after event #{seq}, as if it crashed",
                    p.label()
                );
            }
        }
    }

    // The end of the stream: subscribers started by us exit when they get it.
    let last_seq = seq;
    let remaining: Vec<(String, SubscriberClient)> = publisher
        .subscribers
        .lock()
        .unwrap()
        .iter()
        .map(|s| (s.name.clone(), s.client.clone()))
        .collect();
    for (name, client) in remaining {
        if let Err(e) = client.on_end(StreamEnd { last_seq }) {
            println!(
                "{name} did not take the end of the stream: {}",
                describe_exception(&e)
            );
        }
    }
    let mut statuses = Vec::new();
    for mut p in peers {
        let status = p.finish(Duration::from_secs(5));
        statuses.push((p.label().to_string(), status));
    }
    let acks = publisher.acks.lock().unwrap().clone();
    orb.shutdown();
    let total: usize = acks.values().map(Vec::len).sum();
    println!(
        "acks: {total} received, {} of them served by the main thread while it was waiting in \
         the callback to that subscriber (the others by pool threads)",
        publisher.acks_on_main.load(Ordering::Relaxed)
    );
    if spawn == 0 {
        println!("observer-publisher: published {last_seq} events");
        return;
    }
    std::process::exit(verdict(
        last_seq,
        victim.as_deref(),
        &drops,
        &acks,
        &statuses,
    ));
}

/// Checks the self-contained run and prints the verdict; returns the exit status.
fn verdict(
    last_seq: u64,
    victim: Option<&str>,
    drops: &[(String, u64, SystemExceptionKind)],
    acks: &HashMap<String, Vec<u64>>,
    statuses: &[(String, Result<std::process::ExitStatus, String>)],
) -> i32 {
    let mut problems = Vec::new();
    let mut complete = Vec::new();
    for (name, status) in statuses {
        if Some(name.as_str()) == victim {
            continue;
        }
        let got = acks.get(name).cloned().unwrap_or_default();
        let expected: Vec<u64> = (1..=last_seq).collect();
        if got != expected {
            problems.push(format!(
                "{name} acknowledged {got:?}, expected {expected:?}"
            ));
        } else {
            complete.push(name.as_str());
        }
        match status {
            Ok(s) if s.success() => {}
            Ok(s) => problems.push(format!("{name} exited with {s}")),
            Err(e) => problems.push(e.clone()),
        }
        if drops.iter().any(|(n, _, _)| n == name) {
            problems.push(format!("{name} was dropped although it was alive"));
        }
    }
    let mut dropped_note = String::new();
    if let Some(v) = victim {
        match drops.iter().find(|(n, _, _)| n == v) {
            Some((_, seq, kind)) => {
                let acked = acks.get(v).map_or(0, Vec::len);
                dropped_note = format!(
                    "; {v} acknowledged {acked}, was killed, and was dropped at event #{seq} ({kind})"
                );
            }
            None => problems.push(format!("{v} was killed but never dropped")),
        }
    }
    if problems.is_empty() {
        println!(
            "verdict: OK {last_seq} events; {} received and acknowledged all {last_seq} from \
             inside the callback{dropped_note}",
            complete.join(", ")
        );
        0
    } else {
        println!("verdict: FAILED: {}", problems.join("; "));
        1
    }
}
