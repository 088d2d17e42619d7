//! Peers that flood, never read, trickle or hoard connections (issue 16, scenarios 2 and 3):
//! the event loop never waits for a drain, memory stays within the README's bound, and the
//! connection limit and the idle and header timeouts hold. Servers run as child processes
//! (`hostile_server`) so their RSS can be measured.

mod hostile_common;

use hostile_common::*;
use orb_tests::orbtest::{EchoClient, SleepRequest};
use std::net::TcpStream;
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;

fn client_orb() -> protorb::Orb {
    protorb::Orb::builder()
        .threads(0)
        .no_listen()
        .build()
        .unwrap()
}

/// Floods `frame` from a socket that never reads, while an unrelated client keeps calling;
/// returns the server's RSS growth (peak during the flood against before it).
fn flood_and_probe(server: &Server, frame: &[u8], probe_ok: bool) -> u64 {
    let client = client_orb();
    let probe = Probe::start(server.echo_ref(&client), client.clone(), probe_ok);
    wait_until(10, "probe warm-up", || probe.calls() >= 5);
    let before = server.rss();
    let addr = server.addr;
    let frame = frame.to_vec();
    let flooder = std::thread::spawn(move || {
        let mut s = TcpStream::connect(addr).unwrap();
        let sent = flood(&mut s, &frame, 48 << 20, Duration::from_secs(1));
        (s, sent) // the socket stays open (and unread) until the test is done
    });
    let mut peak = before;
    while !flooder.is_finished() {
        peak = peak.max(server.rss());
        std::thread::sleep(Duration::from_millis(10));
    }
    let (_socket, sent) = flooder.join().unwrap();
    // The peer still does not read: calls must keep completing for a while yet.
    let calls = probe.calls();
    let until = Instant::now() + Duration::from_secs(1);
    while Instant::now() < until || probe.calls() < calls + 10 {
        peak = peak.max(server.rss());
        std::thread::sleep(Duration::from_millis(10));
        assert!(
            Instant::now() < until + Duration::from_secs(20),
            "the unrelated client's calls stopped completing"
        );
    }
    let growth = peak.saturating_sub(before);
    eprintln!(
        "flood: {} MiB sent, RSS {} -> peak {} MiB (+{:.1} MiB)",
        sent >> 20,
        before >> 20,
        peak >> 20,
        growth as f64 / MIB as f64
    );
    probe.finish(20);
    client.shutdown();
    growth
}

/// Scenario 2: requests the leader answers itself (here: past the nesting limit, which 0
/// makes every request) from a peer that never reads. The leader must not wait for the
/// queue to drain: an unrelated client's calls (answered NO_RESOURCES by the leader too)
/// keep completing quickly.
#[test]
fn leader_never_waits_for_a_drain() {
    let server = Server::start(&["--max-nesting", "0", "--max-queued", "65536"], None);
    flood_and_probe(&server, &echo_request(1, 100), false);
}

/// Scenario 3: a LocateRequest flood from a peer that never reads (each answered by the
/// leader) costs a bounded amount of memory, not memory in proportion to the flood.
#[test]
fn locate_flood_from_a_non_reader_is_bounded() {
    let server = Server::start(&[], None);
    let growth = flood_and_probe(&server, &locate_request(1), true);
    assert!(growth < 32 * MIB, "RSS grew {} MiB", growth >> 20);
}

/// Scenario 3: the same with Requests whose replies the peer never reads (1 KiB each).
#[test]
fn request_flood_from_a_non_reader_is_bounded() {
    let server = Server::start(&[], None);
    let growth = flood_and_probe(&server, &echo_request(1, 1000), true);
    assert!(growth < 32 * MIB, "RSS grew {} MiB", growth >> 20);
}

/// Scenario 3: N peers each holding a partial message cost at most N times what each sent
/// plus the per-connection read bound, and the header timeout drops them all.
#[test]
fn partial_messages_are_bounded_and_dropped_when_they_stall() {
    const PEERS: usize = 8;
    const SENT: usize = 8 << 20;
    let mut server = Server::start(&["--idle-ms", "1500"], None);
    let before = server.rss();
    let mut peers = Vec::new();
    let mut peak = before;
    for _ in 0..PEERS {
        let mut s = TcpStream::connect(server.addr).unwrap();
        // A Request header announcing 16 MiB, then half of it.
        let mut msg = b"GIOP\x01\x02\x01\x00".to_vec();
        msg.extend_from_slice(&(16u32 << 20).to_le_bytes());
        msg.resize(12 + SENT, 0);
        std::io::Write::write_all(&mut s, &msg).unwrap();
        peers.push(s);
        peak = peak.max(server.rss());
    }
    for s in &mut peers {
        assert!(
            closed_within(s, Duration::from_secs(20)),
            "a stalled partial message was not dropped"
        );
        peak = peak.max(server.rss());
    }
    let growth = peak.saturating_sub(before);
    eprintln!("partial messages: RSS +{} MiB", growth >> 20);
    let bound = PEERS as u64 * (SENT as u64 + 2 * MIB);
    assert!(growth <= bound, "RSS grew {growth} > {bound}");
    wait_until(10, "connections counted closed", || {
        server.stat("connections_open") == Some(0)
    });
    assert!(server.stat("connections_timed_out").unwrap_or(0) >= PEERS as u64);
}

/// Scenario 3: past `max_connections`, new connections are accepted and closed at once.
#[test]
fn max_connections_is_enforced() {
    let mut server = Server::start(&["--max-conns", "4"], None);
    let mut socks = Vec::new();
    for i in 0..8 {
        let mut s = TcpStream::connect(server.addr).unwrap();
        std::io::Write::write_all(&mut s, &locate_request(i)).unwrap();
        socks.push(s);
    }
    let mut answered = 0;
    let mut closed = 0;
    for s in &mut socks {
        match read_frame(s, Duration::from_secs(5)) {
            Some((4, _)) => answered += 1, // LocateReply
            Some((t, _)) => panic!("unexpected message type {t}"),
            None => {
                assert!(
                    closed_within(s, Duration::from_secs(5)),
                    "neither answered nor closed"
                );
                closed += 1;
            }
        }
    }
    assert_eq!((answered, closed), (4, 4));
    assert_eq!(server.stat("connections_refused"), Some(4));
}

/// Scenario 3: an idle connection is closed with CloseConnection, a slowloris header is
/// dropped, and a connection with a call under way is left alone.
#[test]
fn idle_and_stalled_connections_are_closed() {
    let mut server = Server::start(&["--idle-ms", "300"], None);
    // Idle after one exchange.
    let mut idle = TcpStream::connect(server.addr).unwrap();
    std::io::Write::write_all(&mut idle, &locate_request(1)).unwrap();
    assert_eq!(
        read_frame(&mut idle, Duration::from_secs(5)).map(|f| f.0),
        Some(4)
    );
    let next = read_frame(&mut idle, Duration::from_secs(10));
    assert_eq!(next.map(|f| f.0), Some(5), "expected CloseConnection");
    assert!(closed_within(&mut idle, Duration::from_secs(5)));
    // Slowloris: part of a header, then nothing.
    let mut slow: Vec<_> = (0..20)
        .map(|_| {
            let mut s = TcpStream::connect(server.addr).unwrap();
            std::io::Write::write_all(&mut s, b"GIOP\x01\x02").unwrap();
            s
        })
        .collect();
    for s in &mut slow {
        assert!(closed_within(s, Duration::from_secs(10)), "slowloris kept");
    }
    // A call that runs longer than the timeout: its connection is not idle.
    let client = client_orb();
    let echo = EchoClient::new(&client, server.echo_ref(&client));
    let r = echo.sleep_with_timeout(SleepRequest { millis: 1000 }, Duration::from_secs(10));
    assert!(r.is_ok(), "a busy connection was closed: {r:?}");
    client.shutdown();
    assert!(server.stat("connections_timed_out").unwrap_or(0) >= 21);
}
