//! Unit tests of the connection: the read state machine on byte slices and socket stand-ins,
//! the outgoing queue, and the write path over loopback sockets.

use super::read::{LARGE_UPFRONT, STAGING};
use super::write::OutQueue;
use super::*;
use crate::giop::{write_close_connection, Message, Version};
use crate::reactor::Reactor;
use crate::stats::Stats;
use bytes::{Bytes, BytesMut};
use mio::Interest;
use std::io::{self, Read};

#[test]
fn frames_split_anywhere_come_out_whole() {
    let mut bytes = BytesMut::new();
    write_close_connection(&mut bytes, Version::V1_2);
    write_close_connection(&mut bytes, Version::V1_2);
    for split in 0..bytes.len() {
        let mut rs = ReadState::new(1024);
        rs.handle_bytes(&bytes[..split]).unwrap();
        rs.handle_bytes(&bytes[split..]).unwrap();
        for _ in 0..2 {
            let f = rs.poll_frame().expect("a frame");
            assert_eq!(f.message, Message::CloseConnection);
        }
        assert!(rs.poll_frame().is_none());
        assert_eq!(rs.buffered(), 0);
    }
}

/// A socket stand-in: hands out `data` in chunks of the given sizes (cycled), one chunk
/// per readable edge, then `WouldBlock`.
struct Chunks {
    data: Vec<u8>,
    pos: usize,
    sizes: Vec<usize>,
    next: usize,
    edge: bool,
}

impl Read for Chunks {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if !std::mem::take(&mut self.edge) || self.pos == self.data.len() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let size = self.sizes[self.next % self.sizes.len()];
        self.next += 1;
        let n = size.min(buf.len()).min(self.data.len() - self.pos);
        buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
        self.pos += n;
        // A short read ends the edge; a full one leaves more for the same edge.
        self.edge = n == buf.len();
        Ok(n)
    }
}

/// Small, large (received in place) and small frames again, arriving in chunks of
/// awkward sizes: each comes out whole, with its body intact.
#[test]
fn large_frames_arrive_whole_between_small_ones() {
    use crate::giop::{RequestHeader, ServiceContextList, TargetAddress};
    let mut data = BytesMut::new();
    let bodies: Vec<Vec<u8>> = [10, 300_000, 20, 70_000, STAGING + 1, 5]
        .iter()
        .enumerate()
        .map(|(i, &n)| (0..n).map(|j| (i * 7 + j % 251) as u8).collect())
        .collect();
    for (i, body) in bodies.iter().enumerate() {
        let header = RequestHeader {
            request_id: i as u32,
            response_flags: 3,
            target: TargetAddress::Key(Bytes::from_static(b"key")),
            operation: "op".into(),
            service_context: ServiceContextList::default(),
        };
        crate::giop::write_request(&mut data, Version::V1_2, &header, |w| w.write_octets(body));
    }
    for sizes in [
        vec![1000],
        vec![65_536, 7, 100_000],
        vec![1 << 20],
        vec![13],
    ] {
        let mut src = Chunks {
            data: data.to_vec(),
            pos: 0,
            sizes,
            next: 0,
            edge: false,
        };
        let mut rs = ReadState::new(1 << 20);
        let stats = Stats::default();
        let mut got = Vec::new();
        while src.pos < src.data.len() || rs.has_frames() {
            src.edge = true;
            assert!(rs.read_from(&mut src, &stats).unwrap());
            while let Some(f) = rs.poll_frame() {
                let Message::Request(r) = f.message else {
                    panic!("not a request")
                };
                let mut rd = r.body.reader();
                got.push((r.header.request_id, rd.read_octets().unwrap().to_vec()));
            }
        }
        assert_eq!(got.len(), bodies.len());
        for (i, (id, body)) in got.iter().enumerate() {
            assert_eq!(*id, i as u32);
            assert!(body == &bodies[i], "body {i} differs");
        }
        assert_eq!(rs.buffered(), 0);
    }
}

/// Small frames arriving one read at a time are split from one chunk (each frame's bytes
/// follow the previous one's in memory), not from an allocation per read.
#[test]
fn small_frames_from_separate_reads_share_a_chunk() {
    let mut one = BytesMut::new();
    write_close_connection(&mut one, Version::V1_2);
    let n = 20;
    let mut src = Chunks {
        data: one.repeat(n),
        pos: 0,
        sizes: vec![one.len()],
        next: 0,
        edge: false,
    };
    let mut rs = ReadState::new(1024);
    let stats = Stats::default();
    let mut starts = Vec::new();
    for _ in 0..n {
        src.edge = true;
        assert!(rs.read_from(&mut src, &stats).unwrap());
        // The frame's message bytes are not exposed for CloseConnection: the read
        // buffer's next free byte is where the following frame will land.
        starts.push(rs.buf.as_ptr() as usize);
        assert_eq!(
            rs.poll_frame().map(|f| f.message),
            Some(Message::CloseConnection)
        );
    }
    let adjacent = starts
        .windows(2)
        .filter(|w| w[1] == w[0] + one.len())
        .count();
    assert_eq!(adjacent, n - 1, "each read landed in a new allocation");
}

/// A header claiming a frame larger than `LARGE_UPFRONT` reserves no more than that
/// before the bytes arrive, and the frame still arrives whole.
#[test]
fn a_large_header_alone_reserves_a_bounded_buffer() {
    use crate::giop::{RequestHeader, ServiceContextList, TargetAddress};
    let body: Vec<u8> = (0..6 << 20).map(|i: usize| (i % 253) as u8).collect();
    let header = RequestHeader {
        request_id: 7,
        response_flags: 3,
        target: TargetAddress::Key(Bytes::from_static(b"key")),
        operation: "op".into(),
        service_context: ServiceContextList::default(),
    };
    let mut data = BytesMut::new();
    crate::giop::write_request(&mut data, Version::V1_2, &header, |w| w.write_octets(&body));
    let mut rs = ReadState::new(8 << 20);
    let stats = Stats::default();
    let mut src = Chunks {
        data: data.to_vec(),
        pos: 0,
        sizes: vec![100, 1 << 20],
        next: 0,
        edge: true,
    };
    rs.read_from(&mut src, &stats).unwrap();
    src.edge = true;
    rs.read_from(&mut src, &stats).unwrap();
    let reserved = rs.large.as_ref().map(|(b, _)| b.capacity());
    assert!(
        reserved.is_some_and(|c| c <= LARGE_UPFRONT && c < body.len()),
        "reserved {reserved:?} for a frame that has not arrived"
    );
    while src.pos < src.data.len() {
        src.edge = true;
        rs.read_from(&mut src, &stats).unwrap();
    }
    let f = rs.poll_frame().expect("the frame");
    let Message::Request(r) = f.message else {
        panic!("not a request")
    };
    assert_eq!(r.header.request_id, 7);
    assert!(r.body.reader().read_octets().unwrap() == &body[..]);
    assert_eq!(rs.buffered(), 0);
}

#[test]
fn eof_inside_a_large_frame_is_an_error() {
    let mut rs = ReadState::new(1 << 20);
    let mut hdr = b"GIOP\x01\x02\x01\x00".to_vec();
    hdr.extend_from_slice(&100_000u32.to_le_bytes());
    hdr.extend_from_slice(&[0; 5000]);
    let mut src = Chunks {
        data: hdr,
        pos: 0,
        sizes: vec![2000],
        next: 0,
        edge: true,
    };
    while src.pos < src.data.len() {
        src.edge = true;
        rs.read_from(&mut src, &Stats::default()).unwrap();
    }
    assert_eq!(rs.buffered(), 5012);
    assert!(rs.handle_eof().is_err());
}

#[test]
fn eof_inside_a_frame_is_an_error() {
    let mut rs = ReadState::new(1024);
    rs.handle_bytes(b"GIOP\x01\x02\x01").unwrap();
    assert!(rs.handle_eof().is_err());
}

/// Writes `n` bytes of the queue as a writer would; returns what was written.
fn write_n(q: &mut OutQueue, max: usize, n: usize) -> Vec<u8> {
    let mut batch = Vec::new();
    q.take_front(&mut batch, max);
    let out = batch
        .iter()
        .flat_map(|b| b.iter().copied())
        .take(n)
        .collect();
    q.written(&mut batch, n);
    assert!(batch.is_empty());
    out
}

#[test]
fn out_queue_partial_writes_resume_where_they_stopped() {
    let mut q = OutQueue::default();
    q.push(Bytes::from_static(b"abc"));
    q.push(Bytes::new());
    q.push(Bytes::from_static(b"defgh"));
    q.push(Bytes::from_static(b"i"));
    assert_eq!(q.len(), 9);
    assert_eq!(write_n(&mut q, 8, 2), b"ab");
    assert_eq!(q.len(), 7);
    // A sender appends while the writer holds a batch.
    let mut batch = Vec::new();
    q.take_front(&mut batch, 2);
    q.push(Bytes::from_static(b"jk"));
    q.written(&mut batch, 3);
    assert_eq!(q.len(), 6);
    assert_eq!(write_n(&mut q, 8, 100), b"fghijk");
    assert!(q.is_empty());
}

/// A frame written around the queue (head and an empty body, as a small frame is sent)
/// of which only part went out: its rest lands in front of what was queued meanwhile.
#[test]
fn out_queue_put_back_puts_the_rest_in_front() {
    let mut q = OutQueue::default();
    q.push(Bytes::from_static(b"xy")); // sent by another thread during the write
    let mut batch = vec![Bytes::from_static(b"abcde"), Bytes::new()];
    q.put_back(&mut batch, 2);
    assert!(batch.is_empty());
    assert_eq!(q.len(), 5);
    assert_eq!(write_n(&mut q, 8, 100), b"cdexy");
    assert!(q.is_empty());
}

#[test]
fn out_queue_batch_is_bounded_and_in_order() {
    let mut q = OutQueue::default();
    for i in 0..20u8 {
        q.push(Bytes::from(vec![i; 2]));
    }
    let mut batch = Vec::new();
    q.take_front(&mut batch, 8);
    assert_eq!(batch.len(), 8);
    assert_eq!(batch[7][..], [7, 7]);
    q.written(&mut batch, 15);
    q.take_front(&mut batch, 8);
    assert_eq!(batch[0][..], [7]);
    assert_eq!(batch[1][..], [8, 8]);
    q.written(&mut batch, 0);
    assert_eq!(q.len(), 40 - 15);
}

/// A connection registered with `reactor`, over a loopback socket, and its peer's end
/// (blocking).
fn connected(reactor: &Reactor<Arc<Connection>>) -> (Arc<Connection>, std::net::TcpStream) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let stream = std::net::TcpStream::connect(addr).unwrap();
    stream.set_nonblocking(true).unwrap();
    let (peer, _) = listener.accept().unwrap();
    let conn = reactor.insert(|token| {
        let c = Arc::new(Connection::new(
            token,
            stream,
            addr,
            Origin::Inbound,
            1 << 20,
        ));
        (crate::reactor::Entry::Conn(c.clone()), c)
    });
    reactor
        .register(conn.socket(), conn.token, Interest::READABLE)
        .unwrap();
    (conn, peer)
}

/// Many threads send frames of mixed sizes at once on one connection whose peer reads
/// slowly (so the socket fills and writes are combined, queued and flushed on writable
/// events): the peer gets every frame whole, each sender's frames in its order.
#[test]
fn concurrent_senders_never_interleave_or_lose_frames() {
    use std::io::Read;
    const THREADS: u32 = 8;
    const FRAMES: u32 = 300;
    let reactor = Arc::new(Reactor::new().unwrap());
    let stats = Arc::new(Stats::default());
    let (conn, mut s) = connected(&reactor);
    let reader = std::thread::spawn(move || {
        // A stranded frame fails the test instead of hanging it.
        s.set_read_timeout(Some(std::time::Duration::from_secs(20)))
            .unwrap();
        // Let the socket fill before reading.
        std::thread::sleep(std::time::Duration::from_millis(50));
        let mut next = vec![0u32; THREADS as usize];
        let mut hdr = [0u8; 12];
        let mut body = Vec::new();
        for _ in 0..THREADS * FRAMES {
            s.read_exact(&mut hdr).unwrap();
            let t = u32::from_le_bytes(hdr[0..4].try_into().unwrap());
            let seq = u32::from_le_bytes(hdr[4..8].try_into().unwrap());
            let len = u32::from_le_bytes(hdr[8..12].try_into().unwrap()) as usize;
            body.resize(len, 0);
            s.read_exact(&mut body).unwrap();
            assert_eq!(seq, next[t as usize], "thread {t}'s frames out of order");
            next[t as usize] += 1;
            assert!(
                body.iter().all(|&b| b == (t * 31 + seq) as u8),
                "frame {t}/{seq} corrupted (interleaved?)"
            );
        }
        next
    });
    // The leader's part: flush on writable events.
    let done = Arc::new(AtomicBool::new(false));
    let leader = {
        let (reactor, stats, done) = (reactor.clone(), stats.clone(), done.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Acquire) {
                reactor
                    .poll(Some(std::time::Duration::from_millis(5)), |ev| {
                        if let (crate::reactor::Entry::Conn(c), true) = (ev.entry, ev.writable) {
                            let _ = c.flush(&stats, &*reactor).unwrap();
                        }
                    })
                    .unwrap();
            }
        })
    };
    let senders: Vec<_> = (0..THREADS)
        .map(|t| {
            let (conn, reactor, stats) = (conn.clone(), reactor.clone(), stats.clone());
            std::thread::spawn(move || {
                for seq in 0..FRAMES {
                    let len = if seq % 10 == 0 {
                        40_000
                    } else {
                        1 + (seq as usize * 7) % 300
                    };
                    let mut head = BytesMut::new();
                    head.extend_from_slice(&t.to_le_bytes());
                    head.extend_from_slice(&seq.to_le_bytes());
                    head.extend_from_slice(&(len as u32).to_le_bytes());
                    let body = Bytes::from(vec![(t * 31 + seq) as u8; len]);
                    conn.send_parts([head.freeze(), body], &stats, &*reactor)
                        .unwrap();
                }
            })
        })
        .collect();
    for s in senders {
        s.join().unwrap();
    }
    let next = reader.join().unwrap();
    done.store(true, Ordering::Release);
    leader.join().unwrap();
    assert_eq!(next, vec![FRAMES; THREADS as usize]);
    assert_eq!(conn.queued_bytes(), 0);
}

/// While the leader holds the writer role, frames other threads send are queued, not
/// written; releasing sends them all, in order, with one write.
#[test]
fn held_writes_go_out_together_on_release() {
    use std::io::Read;
    let reactor = Reactor::new().unwrap();
    let stats = Stats::default();
    let (conn, mut peer) = connected(&reactor);
    peer.set_nonblocking(true).unwrap();
    assert!(conn.hold_writes());
    assert!(!conn.hold_writes(), "the role is held once");
    let senders: Vec<_> = (0..4u8)
        .map(|i| {
            let conn = &*conn;
            let (reactor, stats) = (&reactor, &stats);
            move || conn.send(Bytes::from(vec![i; 10]), stats, reactor).unwrap()
        })
        .collect();
    std::thread::scope(|s| {
        for f in senders {
            s.spawn(f);
        }
    });
    std::thread::sleep(std::time::Duration::from_millis(20));
    let mut buf = [0u8; 64];
    let r = peer.read(&mut buf);
    assert!(
        matches!(&r, Err(e) if e.kind() == io::ErrorKind::WouldBlock),
        "nothing is written while held: {r:?}"
    );
    assert_eq!(lock(&conn.write).queue.len(), 40);
    assert_eq!(conn.release_writes(&stats, &reactor).unwrap(), Flush::Done);
    assert_eq!(conn.queued_bytes(), 0);
    peer.set_nonblocking(false).unwrap();
    let mut got = [0u8; 40];
    peer.read_exact(&mut got).unwrap();
    for frame in got.chunks(10) {
        assert!(frame.iter().all(|&b| b == frame[0]), "frames interleaved");
    }
    let mut firsts: Vec<u8> = got.chunks(10).map(|f| f[0]).collect();
    firsts.sort_unstable();
    assert_eq!(firsts, vec![0, 1, 2, 3]);
    assert_eq!(stats.bytes_sent.load(Ordering::Relaxed), 40);
    // Released: the next sender writes at once.
    conn.send(Bytes::from_static(b"after"), &stats, &reactor)
        .unwrap();
    let mut after = [0u8; 5];
    peer.read_exact(&mut after).unwrap();
    assert_eq!(&after, b"after");
}

/// Frames left waiting behind a full socket (a peer that does not read) are copied out of
/// the per-thread frame buffer, so that each holds only its own bytes.
#[test]
fn frames_queued_behind_a_full_socket_are_detached() {
    let reactor = Reactor::new().unwrap();
    let stats = Stats::default();
    let (conn, _peer) = connected(&reactor); // the peer never reads
    let mut sent = Vec::new();
    for i in 0..1_000_000u32 {
        let frame = crate::outbuf::encode(200, |b| b.extend_from_slice(&[i as u8; 200]));
        sent.push(frame.clone());
        conn.send(frame, &stats, &reactor).unwrap();
        if lock(&conn.write).writable_interest {
            break;
        }
    }
    assert!(
        lock(&conn.write).writable_interest,
        "the socket never filled"
    );
    // One more, sent while the socket is known to be full.
    let last = crate::outbuf::encode(200, |b| b.extend_from_slice(&[7; 200]));
    sent.push(last.clone());
    conn.send(last, &stats, &reactor).unwrap();
    let w = lock(&conn.write);
    assert!(!w.queue.parts.is_empty());
    for part in &w.queue.parts {
        let at = part.as_ptr() as usize;
        assert!(
            sent.iter().all(|f| {
                let start = f.as_ptr() as usize;
                !(start..start + f.len()).contains(&at)
            }),
            "a queued frame still points into the frame buffer"
        );
    }
}

thread_local! {
    /// Run once by `send_parts` right after a direct write, before it retakes the lock.
    static AFTER_DIRECT_WRITE: std::cell::RefCell<Option<Box<dyn FnOnce()>>> =
        const { std::cell::RefCell::new(None) };
}

pub(super) fn after_direct_write() {
    if let Some(f) = AFTER_DIRECT_WRITE.with(|h| h.borrow_mut().take()) {
        f();
    }
}

/// A frame written straight from its buffers (nothing queued) that the socket takes only
/// in part, while another frame is sent during that write: the first frame's rest goes
/// out before the other frame, and nothing is lost.
#[test]
fn a_frame_written_around_the_queue_keeps_its_place() {
    use std::io::Read;
    let reactor = Arc::new(Reactor::new().unwrap());
    let stats = Arc::new(Stats::default());
    let (conn, mut peer) = connected(&reactor); // the peer reads only later
    let head = Bytes::from(vec![1u8; 100]);
    let body = Bytes::from(
        (0..32u32 << 20)
            .map(|i| (i % 251) as u8)
            .collect::<Vec<_>>(),
    );
    let after = Bytes::from(vec![9u8; 300]);
    {
        // Sent while the direct write is in progress (the lock is free, `writing` set).
        let (conn, stats, reactor, after) =
            (conn.clone(), stats.clone(), reactor.clone(), after.clone());
        AFTER_DIRECT_WRITE.with(|h| {
            *h.borrow_mut() = Some(Box::new(move || {
                conn.send(after, &stats, &*reactor).unwrap();
            }));
        });
    }
    conn.send_parts([head.clone(), body.clone()], &stats, &*reactor)
        .unwrap();
    assert!(
        lock(&conn.write).writable_interest,
        "32 MiB fit in the socket: the test needs a partial write"
    );
    assert!(
        AFTER_DIRECT_WRITE.with(|h| h.borrow().is_none()),
        "hook not run"
    );
    let expected: Vec<u8> = [&head[..], &body[..], &after[..]].concat();
    let reader = std::thread::spawn(move || {
        let mut got = vec![0u8; expected.len()];
        peer.read_exact(&mut got).unwrap();
        assert!(got == expected, "bytes out of order or lost");
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while conn.queued_bytes() > 0 {
        assert!(std::time::Instant::now() < deadline, "queue never drained");
        let _ = conn.flush(&stats, &*reactor).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    reader.join().unwrap();
}

#[test]
fn garbage_is_a_frame_error() {
    let mut rs = ReadState::new(1024);
    assert!(rs.handle_bytes(b"HTTP/1.1 200 OK\r\n\r\n").is_err());
}
