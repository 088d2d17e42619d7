//! GIOP's per-version rules for the two header-only messages (WIRE-GIOP §2.5): CloseConnection
//! and MessageError are written in the connection's GIOP version, and a client of a 1.0 or 1.1
//! connection never sends CloseConnection (only servers may, before 1.2).

use bytes::BytesMut;
use orb_tests::activate_echo;
use orb_tests::orbtest::{EchoClient, Payload};
use prost::Message as _;
use protorb::giop::{
    write_locate_request, write_reply, GiopCodec, Message, ReplyHeader, ReplyStatus,
    ServiceContextList, TargetAddress, Version,
};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;
use tokio_util::codec::Decoder;

/// Reads one header-only message (12 bytes): (minor version, message type).
fn read_header_only(s: &mut TcpStream) -> (u8, u8) {
    let mut h = [0u8; 12];
    s.read_exact(&mut h).expect("a 12-byte GIOP message");
    assert_eq!(&h[..4], b"GIOP", "not GIOP: {h:02x?}");
    assert_eq!(h[4], 1);
    (h[5], h[7])
}

/// Sends a LocateRequest in `version` and reads its LocateReply (skipping its body); the
/// connection then speaks `version`.
fn locate(s: &mut TcpStream, version: Version) {
    let mut buf = BytesMut::new();
    write_locate_request(
        &mut buf,
        version,
        7,
        &TargetAddress::Key(bytes::Bytes::from_static(b"echo").into()),
    );
    s.write_all(&buf).unwrap();
    let mut h = [0u8; 12];
    s.read_exact(&mut h).unwrap();
    assert_eq!(
        (h[5], h[7]),
        (version.minor, 4),
        "a LocateReply in {version}"
    );
    let size = if h[6] & 1 == 1 {
        u32::from_le_bytes([h[8], h[9], h[10], h[11]])
    } else {
        u32::from_be_bytes([h[8], h[9], h[10], h[11]])
    };
    let mut body = vec![0u8; size as usize];
    s.read_exact(&mut body).unwrap();
}

fn raw_peer(server: &protorb::Orb) -> TcpStream {
    let s = TcpStream::connect(server.listen_addrs()[0]).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

#[test]
fn server_close_connection_is_written_in_the_connections_version() {
    for version in [Version::V1_0, Version::V1_1, Version::V1_2] {
        let server = protorb::Orb::builder().threads(1).build().unwrap();
        let _echo = activate_echo(&server);
        let mut s = raw_peer(&server);
        locate(&mut s, version);
        server.shutdown();
        // A server may send CloseConnection in every version, in the connection's version.
        assert_eq!(read_header_only(&mut s), (version.minor, 5), "in {version}");
    }
}

#[test]
fn message_error_is_written_in_the_connections_version() {
    for version in [Version::V1_0, Version::V1_1, Version::V1_2] {
        let server = protorb::Orb::builder().threads(1).build().unwrap();
        let _echo = activate_echo(&server);
        let mut s = raw_peer(&server);
        locate(&mut s, version);
        s.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        assert_eq!(read_header_only(&mut s), (version.minor, 6), "in {version}");
        server.shutdown();
    }
    // A version we do not speak gets MessageError in our highest version.
    let server = protorb::Orb::builder().threads(1).build().unwrap();
    let mut s = raw_peer(&server);
    s.write_all(b"GIOP\x01\x05\x01\x00\x00\x00\x00\x00")
        .unwrap();
    assert_eq!(read_header_only(&mut s), (2, 6));
    server.shutdown();
}

/// A raw GIOP server that answers every Request with an echo of its Payload, and reports
/// every message type the client sent until it closed.
fn raw_server(listener: TcpListener) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut codec = GiopCodec::new(1 << 20);
        let mut buf = BytesMut::new();
        let mut seen = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            while let Some(frame) = codec.decode(&mut buf).expect("the client sends valid GIOP") {
                match frame.message {
                    Message::Request(r) => {
                        seen.push(0);
                        let octets = r.body.into_octets().unwrap();
                        let mut out = BytesMut::new();
                        let header = ReplyHeader {
                            request_id: r.header.request_id,
                            status: ReplyStatus::NoException,
                            service_context: ServiceContextList::default(),
                        };
                        write_reply(&mut out, frame.version, &header, |w| {
                            w.write_octets(&octets)
                        });
                        s.write_all(&out).unwrap();
                    }
                    Message::CloseConnection => seen.push(5),
                    Message::MessageError => seen.push(6),
                    other => panic!("unexpected message {other:?}"),
                }
            }
            match s.read(&mut chunk) {
                Ok(0) => return seen,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                Err(e) => panic!("read: {e}"),
            }
        }
    })
}

/// The message types a client ORB sent to a raw server over a `version` connection: one call,
/// then the client's shutdown.
fn client_messages(version: Version) -> Vec<u8> {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = raw_server(listener);
    let client = protorb::Orb::builder()
        .threads(0)
        .no_listen()
        .build()
        .unwrap();
    let target = client
        .string_to_object(&format!(
            "corbaloc:iiop:1.{}@127.0.0.1:{port}/echo",
            version.minor
        ))
        .unwrap();
    let reply = EchoClient::new(&client, target)
        .echo(Payload {
            thread: 1,
            call: 2,
            data: vec![3; 10],
        })
        .unwrap();
    assert_eq!((reply.thread, reply.call), (1, 2));
    assert_eq!(
        Payload::decode(&reply.encode_to_vec()[..]).unwrap().data,
        vec![3; 10]
    );
    client.shutdown();
    server.join().unwrap()
}

#[test]
fn a_client_sends_close_connection_only_in_giop_1_2() {
    assert_eq!(
        client_messages(Version::V1_0),
        vec![0],
        "1.0: only the request"
    );
    assert_eq!(
        client_messages(Version::V1_1),
        vec![0],
        "1.1: only the request"
    );
    // In 1.2 either side may: the client says goodbye (and the test can see it).
    assert_eq!(client_messages(Version::V1_2), vec![0, 5]);
}
