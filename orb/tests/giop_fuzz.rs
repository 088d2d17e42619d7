//! Fuzzing the GIOP codec with a seeded generator: random bytes, mutated golden captures and
//! generated messages, random fragment sequences. Properties:
//!
//! - `GiopCodec::decode` / `decode_eof` never panic;
//! - the codec never grows the input buffer (its capacity never exceeds the input length: the
//!   test sizes the buffer for the whole input up front, so any reservation would show);
//! - bytes held for fragment reassembly stay within the input length and the configured limit;
//! - every frame that decodes re-encodes and decodes again to the same fields.
//!
//! The generator is a small splitmix64 PRNG with a fixed seed, so failures are reproducible;
//! the failing case number and input are in the panic message. Set `GIOP_FUZZ_CASES` to run more
//! cases (and `GIOP_FUZZ_SEED` for another seed).

use bytes::{Bytes, BytesMut};
use protorb::cdr::{ByteOrder, CdrWriter};
use protorb::giop::{
    write_cancel_request, write_close_connection, write_locate_reply, write_locate_request,
    write_message_error, write_reply, write_request, BiDirListenPoints, Body, Deadline, Frame,
    FrameError, GiopCodec, Header, LocateStatus, Message, MsgType, ReplyHeader, ReplyStatus,
    Request, RequestHeader, ServiceContextList, TargetAddress, Version,
};
use protorb::ObjectRef;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;
use tokio_util::codec::{Decoder, Encoder};

/// The fuzz codec's maximum message size.
const MAX: usize = 64 * 1024;

/// The default fragment-chain bound of the codec.
const MAX_CHAINS: usize = 32;

// --- PRNG --------------------------------------------------------------------------------------

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }

    fn byte(&mut self) -> u8 {
        self.next() as u8
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.byte()).collect()
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

// --- Corpus ------------------------------------------------------------------------------------

fn hex(s: &str) -> Vec<u8> {
    let d: Vec<u8> = s
        .bytes()
        .filter(|b| !b.is_ascii_whitespace() && *b != b'|')
        .collect();
    hex::decode(d).expect("hex digits")
}

/// WIRE-GIOP's captures (see giop_golden.rs for what each one is).
fn golden() -> Vec<Vec<u8>> {
    let is_a_body = "28 00 00 00 49 44 4c 3a 6f 6d 67 2e 6f 72 67 2f 43 6f 73 4e 61 6d 69 6e
                     67 2f 4e 61 6d 69 6e 67 43 6f 6e 74 65 78 74 3a 31 2e 30 00";
    vec![
        hex(&format!(
            "47 49 4f 50 01 02 01 00 58 00 00 00 02 00 00 00 03 00 00 00 00 00 05 00
             0b 00 00 00 4e 61 6d 65 53 65 72 76 69 63 65 00 06 00 00 00 5f 69 73 5f
             61 00 00 00 00 00 00 00 {is_a_body}"
        )),
        hex("47 49 4f 50 01 02 01 01 0d 00 00 00 02 00 00 00 00 00 00 00 00 00 00 00 01"),
        hex(
            "47 49 4f 50 01 02 01 01 3c 00 00 00 0c 00 00 00 02 00 00 00 00 00 00 00
             24 00 00 00 49 44 4c 3a 6f 6d 67 2e 6f 72 67 2f 43 4f 52 42 41 2f 42 41
             44 5f 4f 50 45 52 41 54 49 4f 4e 3a 31 2e 30 00 26 00 54 41 01 00 00 00",
        ),
        hex(
            "47 49 4f 50 01 02 01 03 17 00 00 00 02 00 00 00 00 00 00 00 0b 00 00 00
             4e 61 6d 65 53 65 72 76 69 63 65",
        ),
        hex("47 49 4f 50 01 02 01 04 08 00 00 00 02 00 00 00 01 00 00 00"),
        hex(
            "47 49 4f 50 01 02 01 00 44 00 00 00 08 00 00 00 03 00 00 00 00 00 00 00
             0b 00 00 00 4e 61 6d 65 53 65 72 76 69 63 65 00 08 00 00 00 72 65 73 6f
             6c 76 65 00 00 00 00 00 01 00 00 00 07 00 00 00 65 63 68 6f 4c 45 00 00
             04 00 00 00 73 76 63 00",
        ),
        hex(&format!(
            "47 49 4f 50 01 00 01 00 58 00 00 00 00 00 00 00 02 00 00 00 01 00 00 00
             0b 00 00 00 4e 61 6d 65 53 65 72 76 69 63 65 00 06 00 00 00 5f 69 73 5f
             61 00 00 00 00 00 00 00 {is_a_body}"
        )),
        hex("47 49 4f 50 01 00 01 01 0d 00 00 00 00 00 00 00 02 00 00 00 00 00 00 00 01"),
        hex("47 49 4f 50 01 02 01 07 08 00 00 00 04 00 00 00 9c 9d 9e 9f"),
    ]
}

fn request_header(id: u32, target: TargetAddress, op: &str, ctx: bool) -> RequestHeader {
    let mut service_context = ServiceContextList::default();
    if ctx {
        service_context
            .0
            .push(BiDirListenPoints(vec![("127.0.0.1".into(), 28099)]).to_context());
        service_context
            .0
            .push(Deadline(Duration::from_millis(250)).to_context());
    }
    RequestHeader {
        deadline: None,
        request_id: id,
        response_flags: 3,
        target,
        operation: op.into(),
        service_context,
    }
}

/// A message in a chosen byte order, through the codec's encoder (which writes in the body's
/// order).
fn encode_in(order: ByteOrder, version: Version, header: RequestHeader, body: &[u8]) -> Vec<u8> {
    let mut out = BytesMut::new();
    let frame = Frame {
        version,
        message: Message::Request(Box::new(Request {
            header,
            body: Body {
                bytes: Bytes::copy_from_slice(body),
                offset: 0,
                order,
            },
        })),
    };
    GiopCodec::new(MAX).encode(&frame, &mut out).unwrap();
    out.to_vec()
}

/// Messages built with our encoder: every type, version and TargetAddress variant.
fn generated() -> Vec<Vec<u8>> {
    let objref = ObjectRef::new("IDL:demo/Echo:1.0", "127.0.0.1", 2809, &b"echo-key"[..]);
    let targets = [
        TargetAddress::Key(Bytes::from_static(b"NameService").into()),
        TargetAddress::Profile(objref.profiles()[0].clone()),
        TargetAddress::Reference {
            selected_profile_index: 0,
            ior: Box::new(objref.clone()),
        },
    ];
    let mut out = Vec::new();
    for version in [Version::V1_0, Version::V1_1, Version::V1_2] {
        for (i, t) in targets.iter().enumerate() {
            let mut b = BytesMut::new();
            write_request(
                &mut b,
                version,
                &request_header(2 + 2 * i as u32, t.clone(), "call", i == 0),
                |w| w.write_octets(b"\x0a\x03abc"),
            );
            out.push(b.to_vec());
        }
        let mut b = BytesMut::new();
        write_request(
            &mut b,
            version,
            &request_header(10, targets[0].clone(), "_non_existent", false),
            |_| {},
        );
        out.push(b.to_vec());
        for status in [
            ReplyStatus::NoException,
            ReplyStatus::UserException,
            ReplyStatus::SystemException,
            ReplyStatus::LocationForward,
        ] {
            let mut b = BytesMut::new();
            write_reply(
                &mut b,
                version,
                &ReplyHeader {
                    request_id: 12,
                    status,
                    service_context: ServiceContextList::default(),
                },
                |w| match status {
                    ReplyStatus::LocationForward => objref.encode(w),
                    _ => w.write_octets(b"result"),
                },
            );
            out.push(b.to_vec());
        }
        let mut b = BytesMut::new();
        write_locate_request(&mut b, version, 14, &targets[version.minor as usize % 3]);
        write_locate_reply(&mut b, version, 14, LocateStatus::ObjectForward, |w| {
            objref.encode(w)
        });
        write_cancel_request(&mut b, version, 16);
        write_close_connection(&mut b, version);
        write_message_error(&mut b, version);
        out.push(b.to_vec());
    }
    // Big-endian twins.
    for version in [Version::V1_0, Version::V1_2] {
        out.push(encode_in(
            ByteOrder::Big,
            version,
            request_header(20, targets[2].clone(), "op", true),
            &[0, 0, 0, 2, 0xab, 0xcd],
        ));
    }
    out
}

/// A 1.2 (or 1.1) message split into a first piece and Fragments at random 8-aligned cuts.
fn fragment(rng: &mut Rng, msg: &[u8]) -> Vec<Vec<u8>> {
    let Ok(h) = Header::decode(msg) else {
        return vec![msg.to_vec()];
    };
    if h.version.minor == 0 || msg.len() < 24 {
        return vec![msg.to_vec()];
    }
    let v12 = h.version.minor >= 2;
    let id = msg[12..16].to_vec();
    let mut cuts: Vec<usize> = (0..rng.below(4) + 1)
        .map(|_| 16 + 8 * rng.below((msg.len() - 16) / 8 + 1))
        .filter(|c| *c < msg.len())
        .collect();
    cuts.sort_unstable();
    cuts.dedup();
    let mut bounds = vec![0];
    bounds.extend(cuts);
    bounds.push(msg.len());
    let mut pieces = Vec::new();
    for (i, w) in bounds.windows(2).enumerate() {
        let last = i + 2 == bounds.len();
        let mut p = Vec::new();
        if i == 0 {
            p.extend_from_slice(&msg[..w[1]]);
        } else {
            p.extend_from_slice(&msg[..12]);
            p[7] = MsgType::Fragment.to_u8();
            if v12 {
                p.extend_from_slice(&id);
            }
            p.extend_from_slice(&msg[w[0]..w[1]]);
        }
        if last {
            p[6] &= !2;
        } else {
            p[6] |= 2;
        }
        let size = (p.len() - 12) as u32;
        set_size(&mut p, size);
        pieces.push(p);
    }
    pieces
}

fn set_size(msg: &mut [u8], size: u32) {
    if msg.len() < 12 {
        return;
    }
    let b = if msg[6] & 1 != 0 {
        size.to_le_bytes()
    } else {
        size.to_be_bytes()
    };
    msg[8..12].copy_from_slice(&b);
}

// --- Mutations ---------------------------------------------------------------------------------

fn mutate(rng: &mut Rng, data: &mut Vec<u8>) {
    match rng.below(9) {
        0 | 1 => {
            // Flip a few bits.
            for _ in 0..rng.below(4) + 1 {
                if !data.is_empty() {
                    let i = rng.below(data.len());
                    data[i] ^= 1 << rng.below(8);
                }
            }
        }
        2 => {
            // Interesting values.
            if !data.is_empty() {
                let i = rng.below(data.len());
                data[i] = *rng.pick(&[0, 1, 2, 3, 5, 7, 8, 0x7f, 0x80, 0xfe, 0xff]);
            }
        }
        3 => {
            // Truncate.
            let n = rng.below(data.len() + 1);
            data.truncate(n);
        }
        4 => {
            // Extend with junk.
            let n = rng.below(32);
            data.extend(rng.bytes(n));
        }
        5 => {
            // Rewrite the size field of the first header: near the truth, or anything.
            let len = data.len().saturating_sub(12) as i64;
            let size = match rng.below(4) {
                0 => (len + rng.below(17) as i64 - 8).max(0) as u32,
                1 => rng.next() as u32,
                2 => (MAX + rng.below(3)) as u32 - 1,
                _ => rng.below(64) as u32,
            };
            set_size(data, size);
        }
        6 => {
            // Header fields: version, flags, type.
            if data.len() >= 8 {
                let i = 4 + rng.below(4);
                data[i] = match i {
                    4 => *rng.pick(&[1, 0, 2]),
                    5 => *rng.pick(&[0, 1, 2, 3]),
                    6 => rng.byte() & 3,
                    _ => rng.below(9) as u8,
                };
            }
        }
        7 => {
            // Insert or delete a run of bytes.
            if !data.is_empty() {
                let at = rng.below(data.len());
                if rng.chance(2) {
                    let n = rng.below(8) + 1;
                    let junk = rng.bytes(n);
                    data.splice(at..at, junk);
                } else {
                    let end = (at + rng.below(8) + 1).min(data.len());
                    data.drain(at..end);
                }
            }
        }
        _ => {
            // Overwrite a ulong-sized window with a random count/length.
            if data.len() >= 4 {
                let at = rng.below(data.len() - 3);
                let v: u32 = match rng.below(3) {
                    0 => rng.below(300) as u32,
                    1 => u32::MAX - rng.below(4) as u32,
                    _ => rng.next() as u32,
                };
                data[at..at + 4].copy_from_slice(&v.to_le_bytes());
            }
        }
    }
}

/// One fuzz input.
fn make_case(rng: &mut Rng, corpus: &[Vec<u8>]) -> Vec<u8> {
    match rng.below(16) {
        0 => {
            let n = rng.below(64);
            rng.bytes(n)
        }
        1 => {
            // A plausible header with a random body.
            let mut v = b"GIOP".to_vec();
            v.push(1);
            v.push(rng.below(4) as u8);
            v.push(rng.byte() & 3);
            v.push(rng.below(8) as u8);
            let n = rng.below(96);
            v.extend_from_slice(&(n as u32).to_le_bytes());
            if v[6] & 1 == 0 {
                v[8..12].copy_from_slice(&(n as u32).to_be_bytes());
            }
            v.extend(rng.bytes(n));
            v
        }
        2..=6 => {
            // Several corpus messages back to back, mutated.
            let mut v = Vec::new();
            for _ in 0..rng.below(3) + 1 {
                let msg: &Vec<u8> = rng.pick(corpus);
                v.extend_from_slice(msg);
            }
            for _ in 0..rng.below(4) + 1 {
                mutate(rng, &mut v);
            }
            v
        }
        7..=11 => {
            // Fragment sequences: split, then interleave, reorder, drop, duplicate, mutate.
            let mut pieces = Vec::new();
            for _ in 0..rng.below(3) + 1 {
                let msg = rng.pick(corpus).clone();
                pieces.push(fragment(rng, &msg));
            }
            let mut seq = Vec::new();
            while pieces.iter().any(|p| !p.is_empty()) {
                let i = rng.below(pieces.len());
                if !pieces[i].is_empty() {
                    let p = pieces[i].remove(0);
                    seq.push(p);
                }
            }
            if rng.chance(4) && seq.len() > 1 {
                let a = rng.below(seq.len());
                let b = rng.below(seq.len());
                seq.swap(a, b);
            }
            if rng.chance(6) && !seq.is_empty() {
                let i = rng.below(seq.len());
                seq.remove(i);
            }
            if rng.chance(6) && !seq.is_empty() {
                let i = rng.below(seq.len());
                let p = seq[i].clone();
                seq.insert(i, p);
            }
            if rng.chance(5) {
                // A CancelRequest for one of the ids in flight.
                let mut c = BytesMut::new();
                write_cancel_request(&mut c, Version::V1_2, *rng.pick(&[2, 4, 8, 12]));
                let at = rng.below(seq.len() + 1);
                seq.insert(at, c.to_vec());
            }
            let mut v: Vec<u8> = seq.concat();
            if rng.chance(2) {
                mutate(rng, &mut v);
            }
            v
        }
        12 | 13 => {
            // A corpus message, lightly mutated.
            let mut v = rng.pick(corpus).clone();
            mutate(rng, &mut v);
            v
        }
        14 => {
            // Many chains at once (up to and past the chain limit).
            let mut v = Vec::new();
            for id in 0..rng.below(40) + 1 {
                let mut p = hex("47 49 4f 50 01 02 03 00 04 00 00 00");
                p.extend_from_slice(&(id as u32 * 2).to_le_bytes());
                if rng.chance(8) {
                    mutate(rng, &mut p);
                }
                v.extend(p);
            }
            v
        }
        _ => rng.pick(corpus).clone(),
    }
}

/// A long chain that crosses the size limit (or nearly): first piece + many 8 KiB fragments.
fn make_big_case(rng: &mut Rng) -> Vec<u8> {
    let chunk = 8 * 1024;
    let pieces = MAX / chunk + rng.below(3);
    let mut v = hex("47 49 4f 50 01 02 03 01 08 00 00 00 02 00 00 00 00 00 00 00");
    for i in 0..pieces {
        let last = i + 1 == pieces;
        let mut p = hex("47 49 4f 50 01 02 03 07 00 00 00 00 02 00 00 00");
        if last {
            p[6] = 1;
        }
        p.extend(std::iter::repeat_n(0u8, chunk - 4));
        let size = (p.len() - 12) as u32;
        p[8..12].copy_from_slice(&size.to_le_bytes());
        v.extend(p);
    }
    if rng.chance(2) {
        mutate(rng, &mut v);
    }
    v
}

// --- The harness -------------------------------------------------------------------------------

/// What the cases reached, to show the generator is not vacuous.
#[derive(Debug, Default)]
struct Stats {
    frames: u64,
    fragmented_frames: u64,
    chains_seen: u64,
    too_large: u64,
    bad_fragment: u64,
    decode_errors: u64,
    truncated: u64,
    header_errors: u64,
}

/// Feeds `input` to a fresh codec in random chunks; checks the properties after every call.
fn run_case(rng: &mut Rng, input: &[u8], stats: &mut Stats) {
    let mut codec = GiopCodec::new(MAX);
    // Room for the whole input up front: extending never reallocates, so any growth of the
    // capacity would be the codec's doing.
    let mut src = BytesMut::with_capacity(input.len());
    let all_at_once = rng.chance(2);
    let mut fed = 0;
    let check = |codec: &GiopCodec, src: &BytesMut| {
        assert!(
            src.capacity() <= input.len(),
            "codec grew the buffer: {} > {}",
            src.capacity(),
            input.len()
        );
        let held = codec.buffered_fragment_bytes();
        assert!(
            held <= input.len(),
            "holds {held} of {} input bytes",
            input.len()
        );
        assert!(held <= MAX, "holds {held} > max {MAX}");
        assert!(codec.pending_fragment_chains() <= MAX_CHAINS);
    };
    loop {
        let n = if all_at_once {
            input.len() - fed
        } else {
            (rng.below(32) + 1).min(input.len() - fed)
        };
        src.extend_from_slice(&input[fed..fed + n]);
        fed += n;
        let at_end = fed == input.len();
        loop {
            let pending = codec.pending_fragment_chains();
            let r = if at_end {
                codec.decode_eof(&mut src)
            } else {
                codec.decode(&mut src)
            };
            check(&codec, &src);
            if codec.pending_fragment_chains() > 0 {
                stats.chains_seen += 1;
            }
            match r {
                Ok(Some(frame)) => {
                    stats.frames += 1;
                    let cancel = matches!(frame.message, Message::CancelRequest { .. });
                    if codec.pending_fragment_chains() < pending && !cancel {
                        stats.fragmented_frames += 1;
                    }
                    check_reencode(&frame);
                }
                Ok(None) => break,
                Err(e) => {
                    check_error(&e);
                    match e {
                        FrameError::TooLarge { .. } => stats.too_large += 1,
                        FrameError::BadFragment(_) => stats.bad_fragment += 1,
                        FrameError::Decode(_) => stats.decode_errors += 1,
                        FrameError::Truncated => stats.truncated += 1,
                        _ => stats.header_errors += 1,
                    }
                    return;
                }
            }
        }
        if at_end {
            return;
        }
    }
}

fn check_error(e: &FrameError) {
    // Errors render without panicking.
    let s = e.to_string();
    assert!(!s.is_empty());
    if let FrameError::TooLarge { max, .. } = e {
        assert_eq!(*max, MAX);
    }
}

/// A decoded frame re-encodes, and decodes again to the same fields and body bytes.
fn check_reencode(frame: &Frame) {
    let mut out = BytesMut::new();
    let mut codec = GiopCodec::new(MAX);
    codec.encode(frame, &mut out).expect("re-encodes");
    let again = codec
        .decode_eof(&mut out)
        .expect("re-decodes")
        .expect("a frame");
    assert!(out.is_empty());
    assert_eq!(normalize(&again), normalize(frame));
}

/// The frame with body offsets cleared (an empty 1.2 body loses the padding before it, and a
/// 1.0/1.1 header loses a non-empty requesting principal, when re-encoded).
fn normalize(f: &Frame) -> Frame {
    let mut f = f.clone();
    let v12 = f.version.minor >= 2;
    let body = match &mut f.message {
        Message::Request(r) => Some(&mut r.body),
        Message::Reply(r) => Some(&mut r.body),
        Message::LocateReply(r) => {
            assert_eq!(r.body.offset, 20, "a LocateReply body is at 20, unaligned");
            None
        }
        _ => None,
    };
    if let Some(body) = body {
        {
            if v12 && !body.bytes.is_empty() {
                assert_eq!(
                    body.offset % 8,
                    0,
                    "1.2 request and reply bodies are 8-aligned"
                );
            }
            body.offset = 0;
        }
    }
    f
}

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn codec_survives_random_and_mutated_frames() {
    let cases = env_or("GIOP_FUZZ_CASES", 100_000);
    let seed = env_or("GIOP_FUZZ_SEED", 0x6749_4f50_2024);
    let mut corpus = golden();
    corpus.extend(generated());
    // Every corpus entry decodes cleanly (sanity check of the generator).
    for c in &corpus {
        let mut src = BytesMut::from(&c[..]);
        let mut codec = GiopCodec::new(MAX);
        let r = catch_unwind(AssertUnwindSafe(|| {
            while codec.decode_eof(&mut src)?.is_some() {}
            Ok::<_, FrameError>(())
        }));
        // The captured fragment tail alone is an orphan; everything else decodes.
        let ok = matches!(r, Ok(Ok(()))) || c[7] == MsgType::Fragment.to_u8();
        assert!(ok, "corpus entry does not decode: {c:02x?}");
    }
    let mut rng = Rng(seed);
    let mut stats = Stats::default();
    for case in 0..cases {
        let input = if case % 5000 == 4999 {
            make_big_case(&mut rng)
        } else {
            make_case(&mut rng, &corpus)
        };
        let mut case_rng = Rng(rng.next());
        let r = catch_unwind(AssertUnwindSafe(|| {
            run_case(&mut case_rng, &input, &mut stats)
        }));
        if let Err(p) = r {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            panic!("case {case} (seed {seed:#x}) failed: {msg}\ninput: {input:02x?}");
        }
    }
    // Every path is reached in a fair share of the cases.
    let floor = cases / 200;
    for (what, n) in [
        ("frames", stats.frames),
        ("chains", stats.chains_seen),
        ("reassembled frames", stats.fragmented_frames),
        ("TooLarge", stats.too_large),
        ("BadFragment", stats.bad_fragment),
        ("Decode", stats.decode_errors),
        ("Truncated", stats.truncated),
        ("header errors", stats.header_errors),
    ] {
        assert!(n >= floor, "only {n} {what} in {cases} cases: {stats:?}");
    }
}

#[test]
fn chains_past_the_limit_are_refused() {
    // Deterministic: the long chain of make_big_case with 9 × 8 KiB > 64 KiB.
    let mut rng = Rng(3);
    for _ in 0..20 {
        let input = make_big_case(&mut rng);
        run_case(&mut rng, &input, &mut Stats::default());
    }
    let mut v = hex("47 49 4f 50 01 02 03 01 08 00 00 00 02 00 00 00 00 00 00 00");
    for _ in 0..9 {
        let mut p = hex("47 49 4f 50 01 02 03 07 00 00 00 00 02 00 00 00");
        p.extend(std::iter::repeat_n(0u8, 8 * 1024 - 4));
        let size = (p.len() - 12) as u32;
        p[8..12].copy_from_slice(&size.to_le_bytes());
        v.extend(p);
    }
    let mut codec = GiopCodec::new(MAX);
    let mut src = BytesMut::from(&v[..]);
    let r = codec.decode(&mut src);
    assert!(matches!(r, Err(FrameError::TooLarge { .. })), "{r:?}");
    assert!(codec.buffered_fragment_bytes() <= MAX);
}

#[test]
fn writer_never_produces_undecodable_frames() {
    // Random but valid requests and replies (random ids, keys, operations, bodies, versions,
    // orders) always decode to what was written.
    let mut rng = Rng(11);
    for _ in 0..2_000 {
        let version = *rng.pick(&[Version::V1_0, Version::V1_1, Version::V1_2]);
        let order = *rng.pick(&[ByteOrder::Little, ByteOrder::Big]);
        // Keys on both sides of the 22 bytes held inline (`giop::ObjectKey`).
        let key_len = rng.below(40);
        let key = Bytes::from(rng.bytes(key_len));
        let op: String = (0..rng.below(12) + 1)
            .map(|_| (b'a' + rng.below(26) as u8) as char)
            .collect();
        let mut header = request_header(
            rng.next() as u32,
            TargetAddress::Key(key.into()),
            &op,
            rng.chance(2),
        );
        header.response_flags = *rng.pick(&[0, 3]);
        let body_len = rng.below(40);
        let body = rng.bytes(body_len);
        let mut b = BytesMut::new();
        let mut w = CdrWriter::new(&mut b, order);
        w.write_octets(&body);
        // Encode through the codec so the chosen byte order is used.
        let bytes = encode_in(order, version, header.clone(), &b[..]);
        let mut codec = GiopCodec::new(MAX);
        let mut src = BytesMut::from(&bytes[..]);
        let frame = codec.decode(&mut src).unwrap().unwrap();
        let Message::Request(req) = frame.message else {
            panic!("not a request")
        };
        assert_eq!(req.header, header);
        assert_eq!(req.body.order, order);
        // The body (a sequence, so never empty) was copied verbatim: 8-aligned in 1.2, and
        // after the empty principal's 4-aligned count in 1.0/1.1.
        assert_eq!(req.body.offset % 4, 0);
        if version.minor >= 2 {
            assert_eq!(req.body.offset % 8, 0);
        }
        assert_eq!(&req.body.octets().unwrap()[..], &body[..]);
    }
}
