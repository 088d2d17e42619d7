//! A reply that arrives after its caller timed out is dropped and counted, never delivered to
//! another call. The server is scripted on a raw socket with the ORB's own codec (h2-style).

mod hostile_common;

use bytes::{Bytes, BytesMut};
use hostile_common::octets_reply;
use protorb::giop::{Frame, GiopCodec, Message};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::Duration;
use tokio_util::codec::Decoder;

#[test]
fn late_reply_is_dropped_and_counted() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // The scripted server: holds the first request until after the caller's deadline, then
    // answers it, then answers the second request at once (with a different payload).
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut codec = GiopCodec::default();
        let mut buf = BytesMut::new();
        let mut ids = Vec::new();
        let mut chunk = [0u8; 4096];
        while ids.len() < 2 {
            let n = s.read(&mut chunk).unwrap();
            assert!(n > 0, "client closed early");
            buf.extend_from_slice(&chunk[..n]);
            while let Some(Frame { message, .. }) = codec.decode(&mut buf).unwrap() {
                match message {
                    Message::Request(r) => ids.push(r.header.request_id),
                    Message::CancelRequest { .. } => {}
                    other => panic!("unexpected {other:?}"),
                }
            }
            if ids.len() == 1 {
                std::thread::sleep(Duration::from_millis(300));
            }
        }
        s.write_all(&octets_reply(ids[0], b"late")).unwrap();
        s.write_all(&octets_reply(ids[1], b"fresh")).unwrap();
        std::thread::sleep(Duration::from_millis(200));
    });

    let client = protorb::Orb::builder().threads(0).build().unwrap();
    let target = protorb::ObjectRef::new("IDL:orbtest/Echo:1.0", "127.0.0.1", port, &b"k"[..]);
    let proxy = protorb::ObjectProxy::new(&client, target);
    let err = proxy
        .invoke(
            "Echo",
            Bytes::from_static(b"first"),
            Some(Duration::from_millis(100)),
        )
        .unwrap_err();
    assert_eq!(
        err.kind(),
        Some(protorb::SystemExceptionKind::TIMEOUT),
        "{err}"
    );
    // The second call must get its own reply, not the late one for the first call.
    let out = proxy
        .invoke(
            "Echo",
            Bytes::from_static(b"second"),
            Some(Duration::from_secs(5)),
        )
        .unwrap();
    assert_eq!(&out[..], b"fresh");
    let stats = client.stats();
    assert_eq!(stats.late_replies_dropped, 1, "{stats:?}");
    assert_eq!(stats.replies_received, 1, "{stats:?}");
    server.join().unwrap();
    client.shutdown();
}
