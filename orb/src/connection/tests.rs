//! Unit tests of the connection: the read state machine on byte slices and stream stand-ins,
//! the outgoing queue, the write and read paths of a [`Connection`] over the in-memory
//! transport ([`mem`](super::mem)), and one test of the write path against the real reactor
//! over a loopback socket (epoll's writable edges, which the in-memory transport only
//! imitates).

use super::mem::{self, MemStream};
use super::read::{ReadError, LARGE_UPFRONT, MAX_QUEUED_BYTES, STAGING};
use super::write::{OutQueue, PART_OVERHEAD};
use super::*;
use crate::giop::{write_close_connection, Message, Version};
use crate::reactor::Reactor;
use crate::stats::Stats;
use bytes::{Bytes, BytesMut};
use mio::Interest;
use std::io::{self, Read};
use std::time::Duration;

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

impl super::read::Source for Chunks {}

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
            deadline: None,
            request_id: i as u32,
            response_flags: 3,
            target: TargetAddress::Key(Bytes::from_static(b"key").into()),
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

/// A large frame is read into the allocation the previous large frame lay in when nothing
/// holds any of that one any more (no fresh pages per frame), and into a new one when its
/// body is still held, which stays intact.
#[test]
fn a_large_frame_reuses_the_last_ones_allocation_only_once_it_is_free() {
    let mut rs = ReadState::new(1 << 20);
    let stats = Stats::default();
    // One frame per call, as a request/reply peer sends them: the next one's bytes come only
    // after this one was read (no read-ahead into it while the previous frame is queued).
    let body = |rs: &mut ReadState, id: u32| {
        let mut src = Chunks {
            data: requests(&[(id, 200_000)]),
            pos: 0,
            sizes: vec![1 << 20],
            next: 0,
            edge: false,
        };
        loop {
            src.edge = true;
            assert!(rs.read_from(&mut src, &stats).unwrap());
            if let Some(f) = rs.poll_frame() {
                let Message::Request(r) = f.message else {
                    panic!("not a request")
                };
                return r.into_body().into_octets().unwrap();
            }
        }
    };
    let first = body(&mut rs, 1);
    let at = first.as_ptr();
    drop(first);
    let second = body(&mut rs, 2);
    assert_eq!(second.as_ptr(), at, "the free allocation was not reused");
    // Held: the next frame goes elsewhere, and this one's bytes stay as they came.
    let third = body(&mut rs, 3);
    assert_ne!(third.as_ptr(), second.as_ptr());
    // `requests`' pattern: byte j of request `id`'s body is id + j % 251.
    let intact = |b: &Bytes, id: usize| {
        b.iter()
            .enumerate()
            .all(|(j, &x)| x == (id + j % 251) as u8)
    };
    assert!(intact(&second, 2), "a held body was overwritten");
    assert!(intact(&third, 3));
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
        deadline: None,
        request_id: 7,
        response_flags: 3,
        target: TargetAddress::Key(Bytes::from_static(b"key").into()),
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

/// A peer with many small requests in flight: one visit reads on past 16 frames (they would
/// otherwise wait in the kernel's receive queue), but stops once `MAX_QUEUED_BYTES` of
/// frames wait, holding at most one more read; it reads on once they are taken, and every
/// request comes out once, in order.
#[test]
fn reading_ahead_stops_at_the_queued_bytes_bound() {
    let calls = 3000u32;
    let bodies: Vec<_> = (0..calls).map(|id| (id, 400)).collect();
    let data = requests(&bodies);
    let mut rs = ReadState::new(1 << 20);
    let stats = Stats::default();
    let mut src = Chunks {
        data,
        pos: 0,
        sizes: vec![STAGING],
        next: 0,
        edge: true,
    };
    assert!(rs.read_from(&mut src, &stats).unwrap());
    let held = rs.queued_bytes();
    assert!(
        (MAX_QUEUED_BYTES..MAX_QUEUED_BYTES + STAGING).contains(&held),
        "{held} bytes of frames queued"
    );
    assert!(rs.maybe_readable() && src.pos < src.data.len());
    let mut next = 0;
    while next < calls {
        while let Some(f) = rs.poll_frame() {
            let Message::Request(r) = f.message else {
                panic!("not a request")
            };
            assert_eq!(r.header.request_id, next);
            next += 1;
        }
        assert_eq!(rs.queued_bytes(), 0);
        src.edge = true;
        assert!(rs.read_from(&mut src, &stats).unwrap());
    }
    assert_eq!(src.pos, src.data.len());
    assert_eq!(rs.buffered(), 0);
}

/// A fragmented message counts whole against the bound on frames held, not as its last
/// fragment: its earlier fragments, held in the codec's chain meanwhile, come out in the
/// frame too (else a peer could queue 1,024 large messages that each count a few bytes).
#[test]
fn a_fragmented_message_counts_whole_among_the_frames_held() {
    let body = 60_000;
    let data = requests(&[(1, body)]);
    let mut rs = ReadState::new(1 << 20);
    for piece in crate::giop::fragment(&data, &[16_000, 32_000, 48_000]) {
        rs.handle_bytes(&piece).unwrap();
    }
    assert!(rs.has_frames());
    let held = rs.queued_bytes();
    assert!(
        (body..data.len() + 64).contains(&held),
        "{held} bytes counted"
    );
    assert!(rs.poll_frame().is_some());
    assert_eq!(rs.queued_bytes(), 0);
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
            crate::stream::Stream::Plain(stream),
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
            body.resize(
                u32::from_le_bytes([hdr[8], hdr[9], hdr[10], hdr[11]]) as usize,
                0,
            );
            s.read_exact(&mut body).unwrap();
            check_tagged_frame(&mut next, &hdr, &body);
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
                    let frame = tagged_frame(t, seq, 40_000);
                    conn.send_parts(frame, &stats, &*reactor).unwrap();
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

#[test]
fn garbage_is_a_frame_error() {
    let mut rs = ReadState::new(1024);
    assert!(rs.handle_bytes(b"HTTP/1.1 200 OK\r\n\r\n").is_err());
}

// The write path over the in-memory transport: the outgoing pipe's room decides where a
// write stops, and `mem::Interest` records what the path asks of the event loop. A test
// plays the leader by calling `flush` where a writable event would come.

/// A connection over the in-memory transport whose outgoing pipe holds `out_room` bytes and
/// incoming one `in_room`, with the peer's end.
/// Sender `t`'s frame `seq` for the many-senders tests: a head with both numbers and the body's
/// length, and a body of one repeated byte; every tenth frame is `big` bytes, the rest small.
fn tagged_frame(t: u32, seq: u32, big: usize) -> [Bytes; 2] {
    let len = if seq % 10 == 0 {
        big
    } else {
        1 + (seq as usize * 7) % 300
    };
    let mut head = BytesMut::new();
    head.extend_from_slice(&t.to_le_bytes());
    head.extend_from_slice(&seq.to_le_bytes());
    head.extend_from_slice(&(len as u32).to_le_bytes());
    [head.freeze(), Bytes::from(vec![(t * 31 + seq) as u8; len])]
}

/// Checks a [`tagged_frame`] as its reader got it: each sender's frames in order (`next`
/// holds the sequence number due from each), and the body whole, not interleaved.
fn check_tagged_frame(next: &mut [u32], hdr: &[u8], body: &[u8]) {
    let word = |i: usize| u32::from_le_bytes([hdr[i], hdr[i + 1], hdr[i + 2], hdr[i + 3]]);
    let (t, seq) = (word(0), word(4));
    assert_eq!(seq, next[t as usize], "thread {t}'s frames out of order");
    next[t as usize] += 1;
    assert!(
        body.iter().all(|&b| b == (t * 31 + seq) as u8),
        "frame {t}/{seq} corrupted (interleaved?)"
    );
}

fn mem_conn(
    out_room: usize,
    in_room: usize,
    max_message_size: usize,
) -> (Arc<Connection<MemStream>>, MemStream) {
    let (ours, peer) = mem::pair(out_room, in_room);
    let peer_addr = SocketAddr::from(([127, 0, 0, 1], 1));
    let conn = Connection::new(1, ours, peer_addr, Origin::Inbound, max_message_size);
    (Arc::new(conn), peer)
}

/// Flushes as the leader would on writable events, taking what reaches the peer, until the
/// queue is empty; returns the bytes the peer got.
fn flush_until_done(
    conn: &Connection<MemStream>,
    peer: &MemStream,
    stats: &Stats,
    interest: &mem::Interest,
) -> Vec<u8> {
    let mut got = peer.drain();
    for _ in 0..10_000 {
        assert!(
            interest.writable(),
            "bytes queued without writable interest"
        );
        let flush = conn.flush(stats, interest).unwrap();
        got.extend(peer.drain());
        if flush == Flush::Done {
            return got;
        }
        assert_eq!(flush, Flush::WantWritable);
    }
    panic!("the queue never drained");
}

#[test]
fn a_frame_that_fits_goes_out_at_once_and_leaves_the_interest_alone() {
    let (conn, peer) = mem_conn(1024, 0, 1024);
    let (stats, interest) = (Stats::default(), mem::Interest::default());
    conn.send_parts(
        [Bytes::from_static(b"head"), Bytes::from_static(b"body")],
        &stats,
        &interest,
    )
    .unwrap();
    assert_eq!(peer.drain(), b"headbody");
    assert_eq!(conn.io.writes(), 1, "head and body in one vectored write");
    assert_eq!(conn.queued_bytes(), 0);
    assert_eq!(
        interest.calls(),
        0,
        "the interest is not touched on the fast path"
    );
    assert_eq!(stats.bytes_sent.load(Ordering::Relaxed), 8);
}

/// A frame the stream takes only in part: the rest is queued and writable interest asked
/// for; a frame sent meanwhile queues behind it without a write; each writable event's flush
/// sends what fits, and the last one drops the interest.
#[test]
fn a_partial_write_queues_the_rest_until_writable_events_drain_it() {
    let (conn, peer) = mem_conn(10, 0, 1024);
    let (stats, interest) = (Stats::default(), mem::Interest::default());
    conn.send(Bytes::from(vec![1u8; 25]), &stats, &interest)
        .unwrap();
    assert_eq!(peer.available(), 10);
    assert_eq!(conn.queued_bytes(), 15 + PART_OVERHEAD);
    assert!(interest.writable());
    let writes = conn.io.writes();
    conn.send(Bytes::from(vec![2u8; 5]), &stats, &interest)
        .unwrap();
    assert_eq!(
        conn.io.writes(),
        writes,
        "queued behind a full stream, not written"
    );
    assert_eq!(conn.queued_bytes(), 20 + 2 * PART_OVERHEAD);
    // The peer reads 10; the writable event's flush fills the pipe again.
    let mut got = peer.drain();
    assert_eq!(conn.flush(&stats, &interest).unwrap(), Flush::WantWritable);
    assert!(interest.writable());
    got.extend(peer.drain());
    assert_eq!(conn.flush(&stats, &interest).unwrap(), Flush::Done);
    assert!(
        !interest.writable(),
        "the interest is dropped once the queue is empty"
    );
    got.extend(peer.drain());
    assert_eq!(got, [vec![1u8; 25], vec![2u8; 5]].concat());
    assert_eq!(conn.queued_bytes(), 0);
    assert_eq!(stats.bytes_sent.load(Ordering::Relaxed), 30);
}

/// A borrowed frame (`send_borrowed`, from the sender's own buffer) on an idle connection is
/// written at once; what the stream does not take is copied into the queue, goes out before
/// a frame sent after it, and the buffer it came from may be reused at once.
#[test]
fn a_borrowed_frame_is_written_at_once_or_its_rest_copied_into_the_queue() {
    let (conn, peer) = mem_conn(10, 0, 1024);
    let (stats, interest) = (Stats::default(), mem::Interest::default());
    let mut buf = vec![1u8; 25];
    assert!(conn.send_borrowed(&buf, &stats, &interest).unwrap());
    assert_eq!(peer.available(), 10);
    assert_eq!(conn.queued_bytes(), 15 + PART_OVERHEAD);
    assert!(interest.writable());
    buf.fill(7); // the sender's buffer, reused: the queued rest is a copy
    assert!(
        !conn.send_borrowed(&[2u8; 5], &stats, &interest).unwrap(),
        "busy behind the queue: the caller queues an owned frame"
    );
    conn.send(Bytes::from(vec![2u8; 5]), &stats, &interest)
        .unwrap();
    let got = flush_until_done(&conn, &peer, &stats, &interest);
    assert_eq!(got, [vec![1u8; 25], vec![2u8; 5]].concat());
    assert_eq!(stats.bytes_sent.load(Ordering::Relaxed), 30);
    let (conn, peer) = mem_conn(1024, 0, 1024);
    assert!(conn.send_borrowed(b"whole", &stats, &interest).unwrap());
    assert_eq!(peer.drain(), b"whole");
    assert_eq!(conn.queued_bytes(), 0);
}

/// While another thread writes (or holds the writer role), a borrowed frame is refused
/// untouched, and the frames queued meanwhile keep their order.
#[test]
fn a_borrowed_frame_is_refused_while_another_thread_writes() {
    let (conn, peer) = mem_conn(1 << 16, 0, 1024);
    let stats = Arc::new(Stats::default());
    let interest = Arc::new(mem::Interest::default());
    let (c, st, i) = (conn.clone(), stats.clone(), interest.clone());
    conn.io.during_next_write(move || {
        assert!(!c.send_borrowed(b"bbbb", &st, &*i).unwrap());
        c.send(Bytes::from_static(b"bbbb"), &st, &*i).unwrap();
    });
    assert!(conn.send_borrowed(b"aaaa", &stats, &*interest).unwrap());
    assert!(conn.io.hook_ran());
    assert_eq!(peer.drain(), b"aaaabbbb");
    assert!(conn.hold_writes());
    assert!(!conn.send_borrowed(b"cccc", &stats, &*interest).unwrap());
    assert_eq!(peer.available(), 0, "nothing is written while held");
    assert_eq!(
        conn.release_writes(&stats, &*interest).unwrap(),
        Flush::Done
    );
    assert_eq!(peer.drain(), b"", "the refused frame was not queued");
}

/// Frames sent while another thread writes are only queued, and the writer sends them all in
/// one more write (combining).
#[test]
fn frames_sent_during_a_write_leave_together_in_one_more_write() {
    let (conn, peer) = mem_conn(1 << 16, 0, 1024);
    let stats = Arc::new(Stats::default());
    let interest = Arc::new(mem::Interest::default());
    let (c, st, i) = (conn.clone(), stats.clone(), interest.clone());
    conn.io.during_next_write(move || {
        assert_eq!(
            c.flush(&st, &*i).unwrap(),
            Flush::Busy,
            "the writer flushes"
        );
        assert!(!c.hold_writes(), "the writer role is taken");
        for k in 0..3u8 {
            c.send(Bytes::from(vec![b'b' + k; 4]), &st, &*i).unwrap();
        }
    });
    conn.send(Bytes::from_static(b"aaaa"), &stats, &*interest)
        .unwrap();
    assert!(conn.io.hook_ran());
    assert_eq!(peer.drain(), b"aaaabbbbccccdddd");
    assert_eq!(
        conn.io.writes(),
        2,
        "the three frames did not leave together"
    );
    assert_eq!(interest.calls(), 0);
}

/// A frame written straight from its buffers (nothing queued) that the stream takes only in
/// part, while another frame is sent during that write: the first frame's rest goes out
/// before the other frame, and nothing is lost.
#[test]
fn a_frame_written_around_the_queue_keeps_its_place() {
    let (conn, peer) = mem_conn(1100, 0, 1024);
    let stats = Arc::new(Stats::default());
    let interest = Arc::new(mem::Interest::default());
    let head = Bytes::from(vec![1u8; 100]);
    let body = Bytes::from((0..5000u32).map(|i| (i % 251) as u8).collect::<Vec<_>>());
    let after = Bytes::from(vec![9u8; 300]);
    let (c, st, i, a) = (conn.clone(), stats.clone(), interest.clone(), after.clone());
    conn.io
        .during_next_write(move || c.send(a, &st, &*i).unwrap());
    conn.send_parts([head.clone(), body.clone()], &stats, &*interest)
        .unwrap();
    assert!(conn.io.hook_ran());
    assert!(interest.writable(), "the frame was written in full");
    let got = flush_until_done(&conn, &peer, &stats, &interest);
    assert!(
        got == [&head[..], &body[..], &after[..]].concat(),
        "bytes out of order or lost"
    );
}

/// While the leader holds the writer role, frames other threads send are queued, not
/// written; releasing sends them all, in order, with one write.
#[test]
fn held_writes_go_out_together_on_release() {
    let (conn, peer) = mem_conn(1 << 16, 0, 1024);
    let (stats, interest) = (Stats::default(), mem::Interest::default());
    assert!(conn.hold_writes());
    assert!(!conn.hold_writes(), "the role is held once");
    std::thread::scope(|s| {
        for i in 0..4u8 {
            let (conn, stats, interest) = (&*conn, &stats, &interest);
            s.spawn(move || {
                conn.send(Bytes::from(vec![i; 10]), stats, interest)
                    .unwrap()
            });
        }
    });
    assert_eq!(peer.available(), 0, "nothing is written while held");
    assert_eq!(conn.io.writes(), 0);
    assert_eq!(lock(&conn.write).queue.len(), 40);
    assert_eq!(conn.release_writes(&stats, &interest).unwrap(), Flush::Done);
    assert_eq!(conn.io.writes(), 1, "one write for the four frames");
    assert_eq!(conn.queued_bytes(), 0);
    let got = peer.drain();
    for frame in got.chunks(10) {
        assert!(frame.iter().all(|&b| b == frame[0]), "frames interleaved");
    }
    let mut firsts: Vec<u8> = got.chunks(10).map(|f| f[0]).collect();
    firsts.sort_unstable();
    assert_eq!(firsts, vec![0, 1, 2, 3]);
    assert_eq!(stats.bytes_sent.load(Ordering::Relaxed), 40);
    // Released: the next sender writes at once.
    conn.send(Bytes::from_static(b"after"), &stats, &interest)
        .unwrap();
    assert_eq!(peer.drain(), b"after");
}

/// Frames left waiting behind a full stream (a peer that does not read) are copied out of
/// the per-thread frame buffer, so that each holds only its own bytes.
#[test]
fn frames_queued_behind_a_full_stream_are_detached() {
    let (conn, _peer) = mem_conn(1000, 0, 1024); // the peer never reads
    let (stats, interest) = (Stats::default(), mem::Interest::default());
    let mut sent = Vec::new();
    for i in 0..100u32 {
        let frame = crate::outbuf::encode(200, |b| b.extend_from_slice(&[i as u8; 200]));
        sent.push(frame.clone());
        conn.send(frame, &stats, &interest).unwrap();
        if interest.writable() {
            break;
        }
    }
    assert!(interest.writable(), "the stream never filled");
    // One more, sent while the stream is known to be full.
    let last = crate::outbuf::encode(200, |b| b.extend_from_slice(&[7; 200]));
    sent.push(last.clone());
    conn.send(last, &stats, &interest).unwrap();
    let w = lock(&conn.write);
    assert_eq!(w.queue.parts.len(), 2);
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

/// The queue's charge counts a fixed overhead per buffer; a drain watched over the bound makes
/// the writer that empties the queue ask for one more writable event (whose flush tells the
/// waiters, in `after_write`), and that flush drops the interest.
#[test]
fn a_watched_drain_raises_a_writable_event_once_the_queue_empties() {
    let (conn, peer) = mem_conn(0, 0, 1024); // full from the start
    let (stats, interest) = (Stats::default(), mem::Interest::default());
    conn.send_parts(
        [Bytes::from(vec![7u8; 60]), Bytes::from(vec![8u8; 40])],
        &stats,
        &interest,
    )
    .unwrap();
    assert!(interest.writable());
    let charge = 100 + 2 * PART_OVERHEAD;
    assert_eq!(conn.queued_bytes(), charge);
    assert!(!conn.watch_drain(charge), "not over the bound");
    assert!(conn.watch_drain(charge - 1));
    conn.io.set_capacity(1000);
    assert!(conn.io.has_room());
    assert_eq!(conn.flush(&stats, &interest).unwrap(), Flush::Done);
    assert!(interest.writable(), "the drain was not announced");
    assert_eq!(conn.flush(&stats, &interest).unwrap(), Flush::Done);
    assert!(!interest.writable());
    assert_eq!(peer.drain().len(), 100);
}

#[test]
fn a_closed_connection_drops_its_queue_and_refuses_sends() {
    let (conn, _peer) = mem_conn(0, 0, 1024);
    let (stats, interest) = (Stats::default(), mem::Interest::default());
    conn.send(Bytes::from(vec![1u8; 10]), &stats, &interest)
        .unwrap();
    assert!(conn.queued_bytes() > 0);
    assert!(conn.mark_closed());
    assert!(!conn.mark_closed(), "closed once");
    assert_eq!(conn.queued_bytes(), 0);
    let e = conn
        .send(Bytes::from_static(b"x"), &stats, &interest)
        .unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::NotConnected);
    assert_eq!(conn.flush(&stats, &interest).unwrap(), Flush::Done);
    assert!(!conn.watch_drain(0));
    assert!(!conn.hold_writes());
}

/// A stream that fails a write: the error reaches the sender, and the writer role is free
/// again (the caller closes the connection).
#[test]
fn a_write_error_reaches_the_sender_and_frees_the_writer_role() {
    let (conn, _peer) = mem_conn(1024, 0, 1024);
    let (stats, interest) = (Stats::default(), mem::Interest::default());
    conn.io.shutdown_write();
    let e = conn
        .send(Bytes::from_static(b"frame"), &stats, &interest)
        .unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::BrokenPipe);
    assert!(conn.hold_writes());
}

/// The loopback test above without a socket: many senders on a pipe far smaller than what
/// they send, a peer that reads in its own time, and a leader that flushes whenever writable
/// interest is on (level-triggered, so no event can be missed here: this checks the queue,
/// combining and the writer role, the loopback test the edges).
#[test]
fn concurrent_senders_over_a_small_pipe_never_interleave_or_lose_frames() {
    const THREADS: u32 = 4;
    const FRAMES: u32 = 200;
    let (conn, peer) = mem_conn(3000, 0, 1024);
    let (stats, interest) = (Stats::default(), mem::Interest::default());
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let reader = s.spawn(|| {
            let mut next = vec![0u32; THREADS as usize];
            for _ in 0..THREADS * FRAMES {
                let hdr = peer.read_exact_within(12, Duration::from_secs(20));
                let len = u32::from_le_bytes([hdr[8], hdr[9], hdr[10], hdr[11]]) as usize;
                let body = peer.read_exact_within(len, Duration::from_secs(20));
                check_tagged_frame(&mut next, &hdr, &body);
            }
            next
        });
        s.spawn(|| {
            while !done.load(Ordering::Acquire) {
                if interest.writable() {
                    let _ = conn.flush(&stats, &interest).unwrap();
                }
                std::thread::yield_now();
            }
        });
        let senders: Vec<_> = (0..THREADS)
            .map(|t| {
                let (conn, stats, interest) = (&conn, &stats, &interest);
                s.spawn(move || {
                    for seq in 0..FRAMES {
                        let frame = tagged_frame(t, seq, 5000);
                        conn.send_parts(frame, stats, interest).unwrap();
                    }
                })
            })
            .collect();
        for sender in senders {
            sender.join().unwrap();
        }
        let next = reader.join().unwrap();
        done.store(true, Ordering::Release);
        assert_eq!(next, vec![FRAMES; THREADS as usize]);
    });
    assert_eq!(conn.queued_bytes(), 0);
}

// The read path over the in-memory transport, as the leader drives it: `read_available` with
// the read lock held.

/// Requests with the given ids and body sizes, back to back.
fn requests(bodies: &[(u32, usize)]) -> Vec<u8> {
    use crate::giop::{RequestHeader, ServiceContextList, TargetAddress};
    let mut data = BytesMut::new();
    for &(id, len) in bodies {
        let header = RequestHeader {
            deadline: None,
            request_id: id,
            response_flags: 3,
            target: TargetAddress::Key(Bytes::from_static(b"key").into()),
            operation: "op".into(),
            service_context: ServiceContextList::default(),
        };
        let body: Vec<u8> = (0..len).map(|j| (id as usize + j % 251) as u8).collect();
        crate::giop::write_request(&mut data, Version::V1_2, &header, |w| w.write_octets(&body));
    }
    data.to_vec()
}

/// The request ids of the decoded frames waiting in `rs`, checking each body.
fn take_requests(rs: &mut ReadState) -> Vec<u32> {
    let mut ids = Vec::new();
    while let Some(f) = rs.poll_frame() {
        let Message::Request(r) = f.message else {
            panic!("not a request")
        };
        let id = r.header.request_id;
        let body = r.body.reader().read_octets().unwrap().to_vec();
        assert!(
            body.iter()
                .enumerate()
                .all(|(j, &b)| b == (id as usize + j % 251) as u8),
            "body of {id} differs"
        );
        ids.push(id);
    }
    ids
}

/// Frames whose bytes arrive a few at a time come out whole, once each is complete; each
/// short read leaves the stream drained (no read only to hear `WouldBlock`).
#[test]
fn frames_split_across_reads_come_out_whole() {
    let (conn, peer) = mem_conn(0, 1 << 16, 1 << 20);
    let stats = Stats::default();
    let data = requests(&[(0, 10), (1, 0), (2, 3000)]);
    let mut rs = lock(&conn.read);
    let mut got = Vec::new();
    for chunk in data.chunks(7) {
        io::Write::write_all(&mut &peer, chunk).unwrap();
        assert!(conn.read_available(&mut rs, &stats, false).unwrap());
        assert!(!rs.maybe_readable());
        got.extend(take_requests(&mut rs));
    }
    assert_eq!(got, [0, 1, 2]);
    assert_eq!(rs.buffered(), 0);
    assert_eq!(rs.bytes_in(), data.len() as u64);
    assert_eq!(
        stats.bytes_received.load(Ordering::Relaxed),
        data.len() as u64
    );
}

/// A frame larger than the staging buffer through a pipe much smaller than it: received in
/// place over many reads that end in `WouldBlock`, between small frames.
#[test]
fn a_large_frame_arrives_whole_through_a_small_pipe() {
    let (conn, peer) = mem_conn(0, 4096, 1 << 20);
    let stats = Stats::default();
    let data = requests(&[(0, 5), (1, 300_000), (2, 5)]);
    let mut rs = lock(&conn.read);
    let (mut sent, mut got) = (0, Vec::new());
    while sent < data.len() {
        sent += match io::Write::write(&mut &peer, &data[sent..]) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
            Err(e) => panic!("{e}"),
        };
        // Again while it may have more, as the leader does (from the ready list): the large
        // frame alone is over the bound on frames held, which ends a visit.
        loop {
            assert!(conn.read_available(&mut rs, &stats, false).unwrap());
            got.extend(take_requests(&mut rs));
            if !rs.maybe_readable() {
                break;
            }
        }
    }
    assert_eq!(got, [0, 1, 2]);
    assert_eq!(rs.buffered(), 0);
}

/// A header that announces more than the size limit is a frame error at once: nothing is
/// reserved for the frame, and its body is not waited for.
#[test]
fn a_frame_over_the_size_limit_is_a_frame_error() {
    let (conn, peer) = mem_conn(0, 1 << 16, 1024);
    let mut hdr = b"GIOP\x01\x02\x01\x00".to_vec();
    hdr.extend_from_slice(&2000u32.to_le_bytes());
    hdr.extend_from_slice(&[0; 100]);
    io::Write::write_all(&mut &peer, &hdr).unwrap();
    let mut rs = lock(&conn.read);
    let r = conn.read_available(&mut rs, &Stats::default(), false);
    assert!(matches!(r, Err(ReadError::Frame(_))), "{r:?}");
    assert!(rs.large.is_none());
    assert_eq!(
        rs.version_seen(),
        Some(2),
        "MessageError is answered in 1.2"
    );
}

/// The peer's end of the stream in the middle of a frame: reading reports the end, and the
/// read state calls the partial frame an error. At a frame boundary it is no error, and the
/// frames before it are served.
#[test]
fn the_end_of_the_stream_is_an_error_only_inside_a_frame() {
    let data = requests(&[(5, 100)]);
    for cut in [data.len() / 2, data.len()] {
        let (conn, peer) = mem_conn(0, 1 << 16, 1 << 20);
        let stats = Stats::default();
        io::Write::write_all(&mut &peer, &data[..cut]).unwrap();
        peer.shutdown_write();
        // The reactor reports the peer's FIN with the data: read on until the end.
        conn.mark_readable(true);
        let mut rs = conn.read_state();
        assert!(conn.read_available(&mut rs, &stats, false).unwrap());
        assert!(rs.maybe_readable(), "stopped before the end of the stream");
        assert!(
            !conn.read_available(&mut rs, &stats, false).unwrap(),
            "no end seen"
        );
        if cut < data.len() {
            assert!(rs.handle_eof().is_err());
            assert!(rs.poll_frame().is_none());
        } else {
            rs.handle_eof().unwrap();
            assert_eq!(take_requests(&mut rs), [5]);
        }
    }
}

/// The read-buffer gauge follows what a connection holds undecoded (a partial frame), and
/// forgetting the connection takes its share back.
#[test]
fn the_read_buffer_gauge_follows_a_partial_frame() {
    let data = requests(&[(1, 10), (2, 20)]);
    let first = requests(&[(1, 10)]).len();
    let (conn, peer) = mem_conn(0, 1 << 16, 1 << 20);
    let stats = Stats::default();
    io::Write::write_all(&mut &peer, &data[..data.len() - 5]).unwrap();
    conn.mark_readable(false);
    let mut rs = conn.read_state();
    assert!(rs.maybe_readable());
    assert!(conn.read_available(&mut rs, &stats, false).unwrap());
    assert_eq!(take_requests(&mut rs), [1]);
    conn.account_buffered(rs.buffered(), &stats);
    drop(rs);
    let held = data.len() - 5 - first;
    assert_eq!(stats.read_buffer_bytes.load(Ordering::Relaxed), held);
    conn.account_buffered(held, &stats);
    assert_eq!(
        stats.read_buffer_bytes.load(Ordering::Relaxed),
        held,
        "counted once"
    );
    conn.forget_buffered(&stats);
    assert_eq!(stats.read_buffer_bytes.load(Ordering::Relaxed), 0);
    assert_eq!(stats.read_buffer_peak.load(Ordering::Relaxed), held);
}
