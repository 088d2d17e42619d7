//! Observer, a subscriber: activates a `Subscriber` callback object in its own ORB, hands its
//! reference to the publisher (`Subscribe`), prints every event the publisher calls it back
//! with, and acknowledges each one by calling the publisher again from inside the callback.
//!
//! ```text
//! cargo run -p orb-examples --bin observer-publisher                      # terminal 1
//! cargo run -p orb-examples --bin observer-subscriber -- --name alice     # terminal 2
//! ```
//!
//! The default publisher is `corbaloc:iiop:1.2@127.0.0.1:12810/publisher`; pass another
//! reference (an `IOR:` string or `corbaloc:` URL) as the first argument. The subscriber runs
//! until the publisher ends its stream (then it exits 0 if it missed no event, else 1) or
//! Ctrl-C. `observer-publisher --subscribers K` starts subscribers itself.

use clap::Parser;
use orb_examples::errors::{describe, describe_exception};
use orb_examples::process::Stop;
use orb_examples::proto::observer::{
    AckRequest, Event, PublisherClient, StreamEnd, SubscribeRequest, Subscriber, SubscriberSkeleton,
};
use orb_examples::{fail, thread_label};
use protorb::{Exception, Orb};
use std::sync::{Arc, Mutex};

const DEFAULT_PUBLISHER: &str = "corbaloc:iiop:1.2@127.0.0.1:12810/publisher";

/// observer-subscriber: subscribes to a publisher and prints its events.
///
/// It runs until the publisher ends its stream (then it exits 0 if it missed no event, else 1)
/// or Ctrl-C.
#[derive(Parser, Debug)]
#[command(name = "observer-subscriber")]
struct Cli {
    /// The publisher, IOR:... or corbaloc:...
    /// (default: corbaloc:iiop:1.2@127.0.0.1:12810/publisher)
    reference: Option<String>,
    /// How the publisher calls us (default: sub-PID, with our process id).
    #[arg(long, value_name = "NAME")]
    name: Option<String>,
    /// ORB pool threads.
    #[arg(long, value_name = "N", default_value_t = 1)]
    threads: usize,
    /// Exit when standard input closes (for a parent process).
    #[arg(long)]
    exit_on_eof: bool,
}

/// The callback object.
struct SubscriberServant {
    name: String,
    publisher: PublisherClient,
    received: Mutex<Vec<u64>>,
    end: Mutex<Option<u64>>,
    stop: Stop,
}

impl Subscriber for SubscriberServant {
    fn on_event(&self, _ctx: &protorb::Context, event: Event) -> Result<(), Exception> {
        println!(
            "{}: event #{} {:?} (on thread {})",
            self.name,
            event.seq,
            event.text,
            thread_label()
        );
        self.received.lock().unwrap().push(event.seq);
        // A call back into the publisher while it waits for this callback to return. It works
        // because a waiting thread of the publisher serves it (or a free pool thread does).
        self.publisher.ack(AckRequest {
            name: self.name.clone(),
            seq: event.seq,
        })?;
        Ok(())
    }

    fn on_end(&self, _ctx: &protorb::Context, end: StreamEnd) -> Result<(), Exception> {
        *self.end.lock().unwrap() = Some(end.last_seq);
        self.stop.stop("the publisher ended the stream");
        Ok(())
    }
}

fn main() {
    let Cli {
        reference,
        name,
        threads,
        exit_on_eof,
    } = Cli::parse();
    let name = name.unwrap_or_else(|| format!("sub-{}", std::process::id()));
    let target = reference.unwrap_or_else(|| DEFAULT_PUBLISHER.to_string());

    // This ORB listens: the publisher calls our object back. (We offer bidirectional GIOP,
    // the default; a publisher built with `bidir_accept(true)` calls back over the connection
    // we open to it instead.)
    let orb = Orb::builder()
        .threads(threads)
        .build()
        .unwrap_or_else(|e| fail(format!("cannot start the ORB: {}", describe(&e))));
    let publisher_ref = orb
        .string_to_object(&target)
        .unwrap_or_else(|e| fail(format!("bad reference {target:?}: {}", describe(&e))));
    let publisher = PublisherClient::narrow(&orb, publisher_ref).unwrap_or_else(|e| {
        fail(format!(
            "{}{}",
            describe(&e),
            if e.kind == protorb::SystemExceptionKind::TRANSIENT {
                "\n  is observer-publisher running? cargo run -p orb-examples --bin observer-publisher"
            } else {
                ""
            }
        ))
    });

    let stop = Stop::new();
    let servant = Arc::new(SubscriberServant {
        name: name.clone(),
        publisher: publisher.clone(),
        received: Mutex::new(Vec::new()),
        end: Mutex::new(None),
        stop: stop.clone(),
    });
    let me = orb.activate_with_generated_key(SubscriberSkeleton::new(servant.clone()));
    let reply = publisher
        .subscribe(SubscribeRequest {
            name: name.clone(),
            subscriber: Some(me.clone()),
        })
        .unwrap_or_else(|e| fail(format!("cannot subscribe: {}", describe_exception(&e))));
    // Our callback object's reference, alone on its line: a parent process waits for it.
    println!("{}", orb.object_to_string(&me));
    println!(
        "{name}: subscribed; the first event will be #{}",
        reply.next_seq
    );

    if exit_on_eof {
        stop.on_stdin_eof();
    }
    let reason = stop.wait(None);
    orb.shutdown();

    let received = servant.received.lock().unwrap().clone();
    let Some(last) = *servant.end.lock().unwrap() else {
        println!("{name}: stopped ({reason}) after {} events", received.len());
        return;
    };
    let expected: Vec<u64> = (reply.next_seq..=last).collect();
    if received == expected {
        println!(
            "{name}: stream ended; received all {} events, #{}..#{last}",
            received.len(),
            reply.next_seq
        );
    } else {
        println!("{name}: stream ended; received {received:?}, expected {expected:?}");
        std::process::exit(1);
    }
}
