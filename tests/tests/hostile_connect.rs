//! A connect that hangs must not freeze the ORB (issue 16, scenario 1).
//!
//! The hanging endpoint is a listener whose accept queue is full: the kernel drops the SYNs
//! sent to it, so a connect to it retries for seconds. A thread that opens a connection must
//! not block in `connect` for that long: the connect has to be non-blocking and driven by the
//! reactor, with the caller waiting as a bound Leader/Followers participant (leading the event
//! loop, and so serving other requests, meanwhile), and it has to end at the call's deadline.
//!
//! - `pool_thread_connecting_to_a_hanging_endpoint_still_serves_others`: the only pool thread
//!   of a server, in an upcall that calls out to the hanging endpoint, keeps serving an
//!   unrelated client (each call under 200 ms); the upcall fails TRANSIENT or TIMEOUT once
//!   `connect_timeout` passes.
//! - `zero_thread_orb_serves_while_a_caller_connects`: the same with an application thread of
//!   an ORB without pool threads, the only thread that can lead its event loop.
//! - `call_to_a_hanging_endpoint_ends_at_its_deadline`: a 300 ms call to the hanging endpoint
//!   fails within 2 s although `connect_timeout` is 10 s.
//! - `second_caller_to_a_hanging_endpoint_keeps_its_own_deadline`: so does a 300 ms call made
//!   while another thread of the same ORB is already connecting there with a longer deadline.

mod hostile_common;

use hostile_common::wait_until;
use orb_tests::orbtest::{EchoClient, NodeClient, Payload, PingRequest};
use orb_tests::{activate_echo, activate_node, timed_echo};
use protorb::SystemExceptionKind;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// A listener that never accepts, with its accept queue full: connects to it hang.
struct HangingEndpoint {
    addr: SocketAddr,
    _listener: TcpListener,
    /// The connections that fill the accept queue; they must stay open.
    _queued: Vec<TcpStream>,
}

impl HangingEndpoint {
    fn new() -> HangingEndpoint {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let mut queued = Vec::new();
        // Loopback completes a handshake within the connect call, so the first connect that
        // times out found the queue full (std listens with a backlog of 128).
        loop {
            match TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
                Ok(s) => queued.push(s),
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => break,
                Err(e) => panic!("filling the accept queue: {e} after {}", queued.len()),
            }
            assert!(queued.len() < 10_000, "the accept queue never fills");
        }
        HangingEndpoint {
            addr,
            _listener: listener,
            _queued: queued,
        }
    }

    /// A reference to an object (`key`) at this endpoint.
    fn reference(&self, orb: &protorb::Orb, key: &str) -> protorb::ObjectRef {
        orb.string_to_object(&format!(
            "corbaloc::1.2@127.0.0.1:{}/{key}",
            self.addr.port()
        ))
        .unwrap()
    }

    /// How many sockets on this host are trying to connect here (state SYN_SENT).
    fn connecting(&self) -> usize {
        let port = self.addr.port();
        ["/proc/net/tcp", "/proc/net/tcp6"]
            .iter()
            .filter_map(|f| std::fs::read_to_string(f).ok())
            .map(|table| {
                table
                    .lines()
                    .skip(1)
                    .filter(|l| {
                        let f: Vec<&str> = l.split_whitespace().collect();
                        f.len() > 3
                            && f[3] == "02"
                            && f[2]
                                .rsplit(':')
                                .next()
                                .and_then(|p| u16::from_str_radix(p, 16).ok())
                                == Some(port)
                    })
                    .count()
            })
            .sum()
    }
}

/// Latencies of `n` echo calls in a row; stops at the first failure and returns it.
fn echo_calls(client: &EchoClient, n: u32) -> (Vec<Duration>, Option<String>) {
    let mut latencies = Vec::new();
    for i in 0..n {
        let (took, r) = timed_echo(client, 7, i, 100, Duration::from_secs(5));
        latencies.push(took);
        if let Err(e) = r {
            return (latencies, Some(format!("call {i}: {e}")));
        }
    }
    (latencies, None)
}

fn assert_failed_to_connect<T: std::fmt::Debug>(what: &str, r: &Result<T, protorb::Exception>) {
    match r {
        Ok(v) => panic!("{what} succeeded: {v:?}"),
        Err(e) => assert!(
            matches!(
                e.kind(),
                Some(SystemExceptionKind::TRANSIENT | SystemExceptionKind::TIMEOUT)
            ),
            "{what}: expected TRANSIENT or TIMEOUT, got {e}"
        ),
    }
}

#[test]
fn pool_thread_connecting_to_a_hanging_endpoint_still_serves_others() {
    let hanging = HangingEndpoint::new();
    let server = protorb::Orb::builder()
        .threads(1)
        .connect_timeout(Duration::from_secs(3))
        .build()
        .unwrap();
    let node = activate_node(&server, "N");
    let (_servant, echo_ref) = activate_echo(&server);

    // The unrelated client connects first: what is measured is how its requests are served.
    let other = protorb::Orb::builder()
        .threads(1)
        .no_listen()
        .build()
        .unwrap();
    let echo = EchoClient::new(&other, echo_ref);
    let (_, warm_up) = echo_calls(&echo, 1);
    assert_eq!(warm_up, None, "warm-up call");

    // The ping makes the server's only pool thread call the hanging endpoint.
    let client = protorb::Orb::builder()
        .threads(1)
        .no_listen()
        .build()
        .unwrap();
    let peer = hanging.reference(&client, "N");
    let pinger = {
        let client = client.clone();
        std::thread::spawn(move || {
            let t = Instant::now();
            let r = NodeClient::new(&client, node).ping_with_timeout(
                PingRequest {
                    depth: 1,
                    peer: Some(peer),
                    sleep_micros: 0,
                },
                Duration::from_secs(8),
            );
            (r, t.elapsed())
        })
    };
    wait_until(10, "the server's pool thread connects", || {
        hanging.connecting() > 0
    });

    let (latencies, failure) = echo_calls(&echo, 20);
    let (ping, ping_took) = pinger.join().unwrap();
    other.shutdown();
    client.shutdown();
    server.shutdown();

    eprintln!(
        "unrelated calls during the connect: {latencies:?}; ping: {ping:?} after {ping_took:?}"
    );
    assert_eq!(failure, None, "an unrelated call failed");
    let max = latencies.iter().max().unwrap();
    assert!(
        *max < Duration::from_millis(200),
        "an unrelated call took {max:?} (over 200 ms) while the server's only pool thread \
         connected to a hanging endpoint"
    );
    assert_failed_to_connect("ping through the hanging endpoint", &ping);
    assert!(
        ping_took < Duration::from_secs(6),
        "the ping failed only after {ping_took:?} (connect_timeout 3 s)"
    );
}

#[test]
fn zero_thread_orb_serves_while_a_caller_connects() {
    let hanging = HangingEndpoint::new();
    let zero = protorb::Orb::builder()
        .threads(0)
        .connect_timeout(Duration::from_secs(3))
        .build()
        .unwrap();
    let (_servant, echo_ref) = activate_echo(&zero);

    // The application thread connecting is the only thread that can lead `zero`'s loop.
    let caller = {
        let zero = zero.clone();
        let target = hanging.reference(&zero, "echo");
        std::thread::spawn(move || {
            let t = Instant::now();
            let r = EchoClient::new(&zero, target).echo_with_timeout(
                Payload {
                    thread: 1,
                    call: 1,
                    data: vec![],
                },
                Duration::from_secs(8),
            );
            (r, t.elapsed())
        })
    };
    wait_until(10, "the application thread connects", || {
        hanging.connecting() > 0
    });

    let other = protorb::Orb::builder()
        .threads(1)
        .no_listen()
        .build()
        .unwrap();
    let (latencies, failure) = echo_calls(&EchoClient::new(&other, echo_ref), 20);
    let (r, took) = caller.join().unwrap();
    other.shutdown();
    zero.shutdown();

    eprintln!(
        "calls to the zero-thread ORB during the connect: {latencies:?}; {r:?} after {took:?}"
    );
    assert_eq!(
        failure, None,
        "a call to an ORB whose only thread connected to a hanging endpoint failed"
    );
    let max = latencies.iter().max().unwrap();
    assert!(
        *max < Duration::from_millis(200),
        "a call took {max:?} (over 200 ms) while the ORB's only thread connected"
    );
    assert_failed_to_connect("call to the hanging endpoint", &r);
    assert!(
        took < Duration::from_secs(6),
        "failed only after {took:?} (connect_timeout 3 s)"
    );
}

#[test]
fn call_to_a_hanging_endpoint_ends_at_its_deadline() {
    let hanging = HangingEndpoint::new();
    let client = protorb::Orb::builder()
        .threads(0)
        .no_listen()
        .connect_timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let target = hanging.reference(&client, "echo");
    let t = Instant::now();
    let r = EchoClient::new(&client, target)
        .echo_with_timeout(Payload::default(), Duration::from_millis(300));
    let took = t.elapsed();
    client.shutdown();

    assert_failed_to_connect("300 ms call to the hanging endpoint", &r);
    assert!(
        took < Duration::from_secs(2),
        "a 300 ms call to a hanging endpoint returned after {took:?}"
    );
}

#[test]
fn second_caller_to_a_hanging_endpoint_keeps_its_own_deadline() {
    let hanging = HangingEndpoint::new();
    let client = protorb::Orb::builder()
        .threads(1)
        .no_listen()
        .connect_timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let first = {
        let client = client.clone();
        let target = hanging.reference(&client, "echo");
        std::thread::spawn(move || {
            let t = Instant::now();
            let r = EchoClient::new(&client, target)
                .echo_with_timeout(Payload::default(), Duration::from_secs(4));
            (r, t.elapsed())
        })
    };
    wait_until(10, "the first caller connects", || hanging.connecting() > 0);

    let target = hanging.reference(&client, "echo");
    let t = Instant::now();
    let second = EchoClient::new(&client, target)
        .echo_with_timeout(Payload::default(), Duration::from_millis(300));
    let second_took = t.elapsed();
    let (first, first_took) = first.join().unwrap();
    client.shutdown();

    eprintln!("first: {first:?} after {first_took:?}; second: {second:?} after {second_took:?}");
    assert_failed_to_connect("300 ms call while another connects", &second);
    assert!(
        second_took < Duration::from_secs(2),
        "a 300 ms call to an endpoint another thread was connecting to returned after \
         {second_took:?}"
    );
    assert_failed_to_connect("4 s call to the hanging endpoint", &first);
    assert!(
        first_took < Duration::from_secs(6),
        "a 4 s call to a hanging endpoint returned after {first_took:?}"
    );
}
