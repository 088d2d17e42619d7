//! With `OrbBuilder::reply_batch_hold` set, replies to requests that arrive in one read go
//! out together (the server's hold for a batch, `OrbInner::hold_for_batch`), and no reply is
//! held behind an upcall that blocks while another pool thread can dispatch the rest of the
//! batch; with the hold off (`Duration::ZERO`; by default a hold lasts up to 8 replies or
//! 50 µs) each reply is written as it is made.
//!
//! A raw TCP client writes several GIOP 1.2 requests in one `write`, so the server reads
//! them at once, then reads the replies. Nothing here depends on timing: a reply that was
//! wrongly held shows as a read that times out (30 s) while the blocking upcall still waits
//! for the test to release it.

use bytes::{Bytes, BytesMut};
use orb_tests::orbtest::{Node, NodeSkeleton, PingReply, PingRequest};
use orb_tests::Gate;
use protorb::giop::{
    write_locate_request, write_request, RequestHeader, ServiceContextList, TargetAddress, Version,
};
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

/// `sleep_micros` that makes the gate's upcall block until the test opens the gate.
const BLOCK: u32 = u32::MAX;
/// How long a read waits for a reply before the test fails (not a timing assumption: a
/// correct server answers at once; this only turns a hang into a failure).
const PATIENCE: Duration = Duration::from_secs(30);

/// A Node servant whose `Ping` answers at once, or blocks at its gate until the test opens
/// it (`sleep_micros == BLOCK`); `depth_reached` echoes the request's `depth`, which the test
/// sets to the id.
struct GateServant(Arc<Gate>);

impl Node for GateServant {
    fn ping(
        &self,
        _ctx: &protorb::Context,
        req: PingRequest,
    ) -> Result<PingReply, protorb::Exception> {
        if req.sleep_micros == BLOCK {
            self.0.wait();
        }
        Ok(PingReply {
            depth_reached: req.depth,
            trail: Vec::new(),
        })
    }
}

/// A server ORB with `threads` pool threads serving a [`GateServant`] under key `gate`. Its
/// replies to one read's requests may be held for a minute (`Hold::Minute`: a loaded machine
/// can deschedule a pool thread between two dispatches for longer than the default hold, and
/// the counts below must not depend on that), for the default hold (`Hold::Default`), or not
/// at all (`Hold::Off`).
fn server_with(threads: usize, hold: Hold) -> (protorb::Orb, Arc<Gate>) {
    let b = protorb::Orb::builder()
        .listen(("127.0.0.1", 0))
        .threads(threads);
    let b = match hold {
        Hold::Minute => b.reply_batch_hold(Duration::from_secs(60)),
        Hold::Off => b.reply_batch_hold(Duration::ZERO),
        Hold::Default => b,
    };
    let orb = b.build().unwrap();
    let gate = Gate::closed();
    orb.activate(&b"gate"[..], NodeSkeleton::new(GateServant(gate.clone())));
    (orb, gate)
}

/// How long [`server_with`]'s replies may be held.
#[derive(Clone, Copy)]
enum Hold {
    Minute,
    Default,
    Off,
}

/// [`server_with`] holding replies.
fn server(threads: usize) -> (protorb::Orb, Arc<Gate>) {
    server_with(threads, Hold::Minute)
}

/// A GIOP 1.2 two-way `Ping` request to `gate` with request id and depth `id`.
fn ping(id: u32, block: bool) -> Bytes {
    use prost::Message;
    let body = PingRequest {
        depth: id,
        peer: None,
        sleep_micros: if block { BLOCK } else { 0 },
    }
    .encode_to_vec();
    let header = RequestHeader {
        deadline: None,
        request_id: id,
        response_flags: 3,
        target: TargetAddress::Key(Bytes::from_static(b"gate").into()),
        operation: "Ping".into(),
        service_context: ServiceContextList::default(),
    };
    let mut buf = BytesMut::new();
    write_request(&mut buf, Version::V1_2, &header, |w| w.write_octets(&body));
    buf.freeze()
}

/// Writes these requests in one `write`, so that the server reads them at once.
fn send_together(s: &mut TcpStream, requests: &[Bytes]) {
    let all: Vec<u8> = requests.iter().flat_map(|r| r.iter().copied()).collect();
    s.write_all(&all).unwrap();
}

/// Reads one Reply; returns its request id after checking that it is a successful reply
/// whose body is the `PingReply` for that id.
fn read_reply(s: &mut TcpStream) -> u32 {
    use prost::Message;
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut hdr = [0u8; 12];
    s.read_exact(&mut hdr)
        .expect("a reply (none came: held behind the blocked upcall?)");
    assert_eq!(&hdr[..4], b"GIOP");
    assert_eq!(hdr[7], 1, "a Reply");
    let little = hdr[6] & 1 == 1;
    let u32_at = |b: &[u8]| {
        let a: [u8; 4] = b.try_into().unwrap();
        if little {
            u32::from_le_bytes(a)
        } else {
            u32::from_be_bytes(a)
        }
    };
    let mut msg = vec![0u8; u32_at(&hdr[8..12]) as usize];
    s.read_exact(&mut msg).unwrap();
    // GIOP 1.2 reply header: request id, reply status, service contexts (count), then the
    // body 8-aligned from the message's start: an octet sequence (length, protobuf bytes).
    let id = u32_at(&msg[0..4]);
    assert_eq!(u32_at(&msg[4..8]), 0, "NO_EXCEPTION for request {id}");
    assert_eq!(u32_at(&msg[8..12]), 0, "no service contexts");
    let body_at = (12 + 12usize).next_multiple_of(8) - 12;
    let len = u32_at(&msg[body_at..body_at + 4]) as usize;
    let reply = PingReply::decode(&msg[body_at + 4..body_at + 4 + len]).unwrap();
    assert_eq!(
        reply.depth_reached, id,
        "the reply to {id} carries another's body"
    );
    id
}

/// Sixteen requests read at once by a one-thread server: every reply reaches the client,
/// each with its own body, in far fewer writes than replies (the hold for the batch).
#[test]
fn replies_to_one_read_go_out_together() {
    let (orb, _gate) = server(1);
    let mut s = TcpStream::connect(orb.listen_addrs()[0]).unwrap();
    // One call first, so that the connection is accepted and set up before the batch.
    send_together(&mut s, &[ping(100, false)]);
    assert_eq!(read_reply(&mut s), 100);
    let before = writes_at_least(&orb, 1);
    let ids: Vec<u32> = (1..=16).collect();
    let batch: Vec<Bytes> = ids.iter().map(|&i| ping(i, false)).collect();
    send_together(&mut s, &batch);
    let got: Vec<u32> = ids.iter().map(|_| read_reply(&mut s)).collect();
    assert_eq!(got, ids, "one thread answers in order");
    let writes = writes_at_least(&orb, before + 2) - before;
    // One write for the fifteen held replies and one for the last (written by its own
    // upcall) when the sixteen are read at once; a few more if the server's reads split
    // them. Without the hold: sixteen.
    assert!(
        writes <= 8,
        "{writes} writes for 16 replies read together: not batched"
    );
    orb.shutdown();
}

/// With the hold off nothing is held: a one-thread server writes each of the sixteen replies
/// as its upcall ends.
#[test]
fn with_the_hold_off_each_reply_is_written_as_it_is_made() {
    let (orb, _gate) = server_with(1, Hold::Off);
    let mut s = TcpStream::connect(orb.listen_addrs()[0]).unwrap();
    send_together(&mut s, &[ping(100, false)]);
    assert_eq!(read_reply(&mut s), 100);
    let before = writes_at_least(&orb, 1);
    let ids: Vec<u32> = (1..=16).collect();
    let batch: Vec<Bytes> = ids.iter().map(|&i| ping(i, false)).collect();
    send_together(&mut s, &batch);
    let got: Vec<u32> = ids.iter().map(|_| read_reply(&mut s)).collect();
    assert_eq!(got, ids);
    assert_eq!(writes_at_least(&orb, before + 16) - before, 16);
    orb.shutdown();
}

/// The server's socket writes once they number at least `at_least` (the server counts a
/// write after its system call returns, so the client can read a reply before it is
/// counted); the patience is only a hang guard.
fn writes_at_least(orb: &protorb::Orb, at_least: u64) -> u64 {
    let start = std::time::Instant::now();
    loop {
        let n = orb.stats().socket_writes;
        if n >= at_least || start.elapsed() > PATIENCE {
            return n;
        }
        std::thread::yield_now();
    }
}

/// Reads one GIOP message whatever it is: its type.
fn read_any(s: &mut TcpStream) -> u8 {
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut hdr = [0u8; 12];
    s.read_exact(&mut hdr)
        .expect("a message (none came: held with no read to end the hold?)");
    let a: [u8; 4] = hdr[8..12].try_into().unwrap();
    let size = if hdr[6] & 1 == 1 {
        u32::from_le_bytes(a)
    } else {
        u32::from_be_bytes(a)
    };
    let mut rest = vec![0u8; size as usize];
    s.read_exact(&mut rest).unwrap();
    hdr[7]
}

/// A read whose last frame is not a Request (here a LocateRequest, which the leader answers
/// itself) still ends the hold: the reply to the request before it is not left waiting for
/// a read of the connection that never comes.
#[test]
fn a_read_ending_in_another_message_ends_the_hold() {
    let (orb, _gate) = server(1);
    let mut s = TcpStream::connect(orb.listen_addrs()[0]).unwrap();
    send_together(&mut s, &[ping(100, false)]);
    assert_eq!(read_reply(&mut s), 100);
    let mut locate = BytesMut::new();
    write_locate_request(
        &mut locate,
        Version::V1_2,
        2,
        &TargetAddress::Key(Bytes::from_static(b"gate").into()),
    );
    send_together(&mut s, &[ping(1, false), locate.freeze()]);
    let mut types = [read_any(&mut s), read_any(&mut s)];
    types.sort_unstable();
    assert_eq!(types, [1, 4], "a Reply and a LocateReply");
    orb.shutdown();
}

/// A fast request, one that blocks in its upcall, and another fast one, read at once by a
/// two-thread server: both fast replies arrive while the blocked upcall still waits (the
/// other thread dispatches the last request and ends the hold), and the blocked one after
/// the gate opens.
#[test]
fn no_reply_waits_behind_a_blocked_upcall_of_its_batch() {
    fast_replies_pass_a_blocked_upcall(Hold::Minute);
}

/// The same with the default hold (8 replies or 50 µs): what a server that sets nothing does.
#[test]
fn by_default_no_reply_waits_behind_a_blocked_upcall_of_its_batch() {
    fast_replies_pass_a_blocked_upcall(Hold::Default);
}

fn fast_replies_pass_a_blocked_upcall(hold: Hold) {
    let (orb, gate) = server_with(2, hold);
    let mut s = TcpStream::connect(orb.listen_addrs()[0]).unwrap();
    send_together(&mut s, &[ping(100, false)]);
    assert_eq!(read_reply(&mut s), 100);
    send_together(&mut s, &[ping(1, false), ping(2, true), ping(3, false)]);
    gate.wait_entered(1, PATIENCE);
    let fast: BTreeSet<u32> = [read_reply(&mut s), read_reply(&mut s)].into();
    assert_eq!(fast, BTreeSet::from([1, 3]));
    gate.open();
    assert_eq!(read_reply(&mut s), 2);
    orb.shutdown();
}

/// Many batches from several raw clients at once, with blocking upcalls among them: every
/// reply reaches its own connection with its own body (nothing lost or crossed by holds).
#[test]
fn held_replies_reach_their_own_connection() {
    let (orb, gate) = server(4);
    let addr = orb.listen_addrs()[0];
    gate.open(); // blocking requests pass the gate at once: just slower upcalls
    let clients: Vec<_> = (0..4u32)
        .map(|c| {
            std::thread::spawn(move || {
                let mut s = TcpStream::connect(addr).unwrap();
                for round in 0..50u32 {
                    let base = c * 100_000 + round * 100;
                    let ids: Vec<u32> = (base..base + 10).collect();
                    let batch: Vec<Bytes> = ids.iter().map(|&i| ping(i, i % 7 == 3)).collect();
                    send_together(&mut s, &batch);
                    let mut got: Vec<u32> = ids.iter().map(|_| read_reply(&mut s)).collect();
                    got.sort_unstable();
                    assert_eq!(got, ids, "client {c} round {round}");
                }
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
    orb.shutdown();
}
