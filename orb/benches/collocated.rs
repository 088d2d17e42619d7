//! A collocated call against the same call over loopback: one ORB (one pool thread) calls
//! an object it serves itself, 64 B each way, with collocation on (the calling thread runs
//! the servant, no socket) and off (a GIOP round trip over 127.0.0.1, the calling thread
//! leading the event loop for its reply). `cargo test --benches -p protorb` runs each once.
//!
//! Run: `cargo bench -p protorb --bench collocated`.

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion};
use protorb::{Context, Exception, ObjectProxy, Orb, Servant};
use std::hint::black_box;
use std::time::Duration;

struct Echo;

impl Servant for Echo {
    fn repository_id(&self) -> &'static str {
        "IDL:bench/Echo:1.0"
    }
    fn dispatch(&self, _op: &str, body: Bytes, _ctx: &Context) -> Result<Bytes, Exception> {
        Ok(body)
    }
}

fn lat(c: &mut Criterion) {
    let mut g = c.benchmark_group("lat_64B");
    for (name, collocation) in [("collocated", true), ("loopback", false)] {
        let orb = Orb::builder()
            .threads(1)
            .collocation(collocation)
            .build()
            .expect("orb builds");
        let target = orb.activate(&b"echo"[..], Echo);
        let proxy = ObjectProxy::new(&orb, target);
        let body = Bytes::from(vec![7u8; 64]);
        let reply = proxy.invoke("echo", body.clone(), None).expect("echo");
        assert_eq!(reply, body);
        assert_eq!(
            orb.stats().collocated_calls > 0,
            collocation,
            "collocation {collocation} not honoured"
        );
        g.bench_function(name, |b| {
            b.iter(|| black_box(proxy.invoke("echo", body.clone(), None).expect("echo")))
        });
        orb.shutdown();
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(3));
    targets = lat
}
criterion_main!(benches);
