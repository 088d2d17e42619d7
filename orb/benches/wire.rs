//! Micro-benchmarks of the wire layer (no sockets, no threads):
//!
//! - encoding a GIOP 1.2 Request (`protorb::giop::write_request`) with a 64 B and a 1 MiB body,
//!   shaped as the ORB sends it (object key, operation, a deadline service context, the body as
//!   one `sequence<octet>`);
//! - decoding it with `GiopCodec` (`tokio_util::codec::Decoder`) down to the parameter octets
//!   (`Body::octets`), and both in a row;
//! - parsing omniNames' stringified IOR.
//!
//! The setup asserts that decoding does not copy the body: the decoded `Body.bytes` and the
//! parameter octets point into the frame buffer that was handed to the codec. `cargo test
//! --benches -p protorb` runs each benchmark once, checks included.
//!
//! Run: `cargo bench -p protorb --bench wire`.

use bytes::{Bytes, BytesMut};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use protorb::giop::{
    write_request, Deadline, GiopCodec, Message, RequestHeader, ServiceContextList, TargetAddress,
    Version, DEFAULT_MAX_MESSAGE_SIZE,
};
use protorb::ObjectRef;
use std::hint::black_box;
use std::time::Duration;
use tokio_util::codec::Decoder;

/// omniNames' root context (WIRE-GIOP §4.4; the same fixture as `tests/ior.rs`).
const OMNI_NAMES_IOR: &str = concat!(
    "IOR:",
    "01000000",
    "2b000000",
    "49444c3a6f6d672e6f72672f436f734e616d696e672f4e616d696e67436f6e746578744578743a312e3000",
    "00",
    "01000000",
    "00000000",
    "6c000000",
    "01",
    "0102",
    "00",
    "0a000000",
    "3132372e302e302e3100",
    "ba6d",
    "0b000000",
    "4e616d6553657276696365",
    "00",
    "03000000",
    "00000000",
    "08000000",
    "0100000000545441",
    "01000000",
    "1c000000",
    "01000000010001000100000001000105090101000100000009010100",
    "03545441",
    "08000000",
    "1b54026b01002201",
);

/// The request header the ORB's client sends for a two-way call.
fn header() -> RequestHeader {
    RequestHeader {
        deadline: None,
        request_id: 2,
        response_flags: 0x03,
        target: TargetAddress::Key(Bytes::from_static(b"echo").into()),
        operation: "Echo".into(),
        service_context: ServiceContextList(smallvec::smallvec![
            Deadline(Duration::from_secs(30)).to_context()
        ]),
    }
}

fn encode(h: &RequestHeader, params: &[u8]) -> BytesMut {
    let mut buf = BytesMut::with_capacity(128 + params.len());
    write_request(&mut buf, Version::V1_2, h, |w| w.write_octets(params));
    buf
}

/// Decodes one whole Request and returns its parameter octets.
fn decode(codec: &mut GiopCodec, buf: &mut BytesMut) -> Bytes {
    let frame = codec.decode(buf).expect("decodes").expect("a whole frame");
    match frame.message {
        Message::Request(r) => r.body.octets().expect("one octet sequence"),
        other => panic!("not a request: {other:?}"),
    }
}

/// The zero-copy check: decoding `frame` yields a body, and parameter octets, that lie inside
/// the buffer the codec was given.
fn assert_body_not_copied(frame: &BytesMut, params: &[u8]) {
    let mut buf = frame.clone();
    let range = buf.as_ptr() as usize..buf.as_ptr() as usize + buf.len();
    let f = GiopCodec::new(DEFAULT_MAX_MESSAGE_SIZE)
        .decode(&mut buf)
        .expect("decodes")
        .expect("a whole frame");
    let Message::Request(r) = f.message else {
        panic!("not a request")
    };
    let inside = |b: &Bytes| {
        let p = b.as_ptr() as usize;
        range.contains(&p) && p + b.len() <= range.end
    };
    assert!(
        inside(&r.body.bytes),
        "Body.bytes was copied out of the frame buffer"
    );
    let octets = r.body.octets().expect("one octet sequence");
    assert!(inside(&octets), "the parameter octets were copied");
    assert_eq!(&octets[..], params);
}

fn requests(c: &mut Criterion) {
    let h = header();
    for (name, len) in [("64B", 64usize), ("1MiB", 1 << 20)] {
        let params: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
        let frame = encode(&h, &params);
        assert_body_not_copied(&frame, &params);

        let mut g = c.benchmark_group(format!("request_{name}"));
        g.throughput(Throughput::Bytes(len as u64));
        if len > 4096 {
            g.sample_size(30);
        }
        g.bench_function("encode", |b| {
            b.iter(|| encode(black_box(&h), black_box(&params)))
        });
        let mut codec = GiopCodec::new(DEFAULT_MAX_MESSAGE_SIZE);
        let batch = if len > 4096 {
            BatchSize::LargeInput
        } else {
            BatchSize::SmallInput
        };
        g.bench_function("decode", |b| {
            b.iter_batched_ref(|| frame.clone(), |buf| decode(&mut codec, buf), batch)
        });
        g.bench_function("encode_decode", |b| {
            b.iter(|| {
                let mut buf = encode(black_box(&h), black_box(&params));
                decode(&mut codec, &mut buf)
            })
        });
        g.finish();
    }
}

fn ior(c: &mut Criterion) {
    let parsed = ObjectRef::parse(OMNI_NAMES_IOR).expect("the omniNames IOR parses");
    assert_eq!(
        parsed.type_id(),
        "IDL:omg.org/CosNaming/NamingContextExt:1.0"
    );
    c.bench_function("ior_parse_omninames", |b| {
        b.iter(|| ObjectRef::parse(black_box(OMNI_NAMES_IOR)).expect("parses"))
    });
}

criterion_group!(wire, requests, ior);
criterion_main!(wire);
