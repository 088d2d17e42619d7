//! Hostile and broken peers on raw sockets: the server answers MessageError or closes, stays
//! up, keeps serving a well-behaved client, and its buffers stay bounded.

use orb_tests::activate_echo;
use orb_tests::orbtest::{EchoClient, Payload};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

fn read_all(s: &mut TcpStream) -> Vec<u8> {
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    out
}

#[test]
fn server_survives_bad_peers() {
    let server = protorb::Orb::builder()
        .threads(2)
        .max_message_size(1 << 20)
        .build()
        .unwrap();
    let (_s, r) = activate_echo(&server);
    let addr = server.listen_addrs()[0];
    let client_orb = protorb::Orb::builder().threads(0).build().unwrap();
    let good = EchoClient::new(&client_orb, r);
    let check = |i: u32| {
        let reply = good
            .echo(Payload {
                thread: 0,
                call: i,
                data: vec![i as u8; 100],
            })
            .unwrap();
        assert_eq!(reply.call, i);
    };
    check(0);

    // Garbage: MessageError, then close.
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let got = read_all(&mut s);
    assert_eq!(&got[..4], b"GIOP");
    assert_eq!(got[7], 6, "expected MessageError");
    check(1);

    // A header announcing 4 GiB: refused without allocating it.
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(b"GIOP\x01\x02\x01\x00\xff\xff\xff\xff")
        .unwrap();
    let got = read_all(&mut s);
    assert_eq!(got.get(7), Some(&6), "expected MessageError");
    check(2);

    // A Fragment that continues nothing.
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(b"GIOP\x01\x02\x01\x07\x04\x00\x00\x00\x05\x00\x00\x00")
        .unwrap();
    let got = read_all(&mut s);
    assert_eq!(got.get(7), Some(&6), "expected MessageError");
    check(3);

    // A truncated header, then silence: the server keeps it open and keeps serving others.
    let mut silent = TcpStream::connect(addr).unwrap();
    silent.write_all(b"GIOP\x01\x02").unwrap();
    std::thread::sleep(Duration::from_millis(50));
    check(4);

    // 10,000 connections opened and closed.
    for i in 0..10_000 {
        let mut s = TcpStream::connect(addr).unwrap();
        if i % 3 == 0 {
            let _ = s.write_all(b"GIOP\x01\x02\x01\x00\x40\x00");
        }
        drop(s);
        if i % 2000 == 0 {
            check(5 + i);
        }
    }
    check(99_999);
    drop(silent);
    // Connections are reaped: only the good client's remains.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while server.stats().connections_open > 1 {
        assert!(std::time::Instant::now() < deadline, "{:?}", server.stats());
        std::thread::sleep(Duration::from_millis(20));
    }
    let st = server.stats();
    assert!(st.protocol_errors >= 3, "{st:?}");
    // Buffer accounting: never more than a couple of messages' worth held at once.
    assert!(
        st.read_buffer_peak <= 4 << 20,
        "read buffers peaked at {}",
        st.read_buffer_peak
    );
    assert_eq!(st.read_buffer_bytes, 0, "{st:?}");
    client_orb.shutdown();
    server.shutdown();
}
