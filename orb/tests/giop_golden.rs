//! WIRE-GIOP's golden captures (omniORB 4.2.5 on the wire) as fixtures: each one decodes to the
//! documented fields, decodes the same when fed to the codec split at every byte boundary, and
//! our encoder reproduces it byte for byte (with garbage padding zeroed).

use bytes::{Bytes, BytesMut};
use protorb::cdr::{ByteOrder, CdrReader, CdrWriter};
use protorb::giop::{
    decode_system_exception, encode_system_exception, write_locate_reply, write_locate_request,
    write_reply, write_request, BiDirListenPoints, Frame, FrameError, GiopCodec, Header,
    LocateStatus, Message, MsgType, ReplyHeader, ReplyStatus, Request, RequestHeader,
    ServiceContext, ServiceContextList, TargetAddress, Version,
};
use protorb::{CompletionStatus, ObjectRef, SystemException, SystemExceptionKind};
use tokio_util::codec::{Decoder, Encoder};

/// Parses a hex dump: pairs of hex digits; whitespace and `|` separate and are ignored.
fn hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s
        .bytes()
        .filter(|b| !b.is_ascii_whitespace() && *b != b'|')
        .collect();
    assert!(digits.len() % 2 == 0, "odd number of hex digits");
    hex::decode(digits).expect("hex digits")
}

/// Appends `s` as ASCII to a byte vector (for the quoted strings in the captures).
fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

/// Decodes `bytes` (one message, or a first piece and its fragments) with a fresh codec, then
/// again split at every byte boundary into two `decode` calls, and checks that every split gives
/// the same frame. Returns that frame.
fn decode_everywhere(bytes: &[u8]) -> Frame {
    let whole = decode_one(bytes);
    for cut in 0..=bytes.len() {
        assert_eq!(decode_split(bytes, cut), whole, "split at {cut}");
    }
    whole
}

fn decode_one(bytes: &[u8]) -> Frame {
    let mut codec = GiopCodec::default();
    let mut src = BytesMut::from(bytes);
    let frame = codec
        .decode_eof(&mut src)
        .expect("decodes")
        .expect("a frame");
    assert!(src.is_empty(), "whole capture consumed");
    assert_eq!(codec.buffered_fragment_bytes(), 0);
    assert!(codec.decode_eof(&mut src).unwrap().is_none());
    frame
}

fn decode_split(bytes: &[u8], cut: usize) -> Frame {
    let mut codec = GiopCodec::default();
    let mut src = BytesMut::from(&bytes[..cut]);
    let frame = match codec.decode(&mut src).expect("first part") {
        Some(f) => {
            assert_eq!(cut, bytes.len(), "frame before all bytes arrived");
            f
        }
        None => {
            src.extend_from_slice(&bytes[cut..]);
            codec
                .decode(&mut src)
                .expect("second part")
                .expect("a frame once everything arrived")
        }
    };
    assert!(src.is_empty());
    assert_eq!(codec.buffered_fragment_bytes(), 0);
    frame
}

/// Re-encodes a decoded frame through the codec.
fn reencode(frame: &Frame) -> Vec<u8> {
    let mut out = BytesMut::new();
    GiopCodec::default().encode(frame, &mut out).unwrap();
    out.to_vec()
}

/// `bytes` with `range` (garbage padding in a capture) set to zero.
fn zero_padding(bytes: &[u8], range: std::ops::Range<usize>) -> Vec<u8> {
    let mut v = bytes.to_vec();
    v[range].fill(0);
    v
}

/// Whether our native order is the captures' (little-endian, as omniORB on x86 sends).
fn native_is_le() -> bool {
    ByteOrder::NATIVE == ByteOrder::Little
}

fn request(frame: &Frame) -> &Request {
    match &frame.message {
        Message::Request(r) => r,
        other => panic!("not a request: {other:?}"),
    }
}

fn key_name_service() -> TargetAddress {
    TargetAddress::Key(Bytes::from_static(b"NameService").into())
}

const NAMING_CONTEXT_ID: &str = "IDL:omg.org/CosNaming/NamingContext:1.0";

// --- §2.2: `_is_a` Request, GIOP 1.2, with omniORB's garbage padding ---------------------------

fn is_a_1_2() -> Vec<u8> {
    hex("47 49 4f 50 01 02 01 00 58 00 00 00 02 00 00 00
         03 00 00 00 00 00 05 00 0b 00 00 00 4e 61 6d 65
         53 65 72 76 69 63 65 00 06 00 00 00 5f 69 73 5f
         61 00 00 00 00 00 00 00 28 00 00 00 49 44 4c 3a
         6f 6d 67 2e 6f 72 67 2f 43 6f 73 4e 61 6d 69 6e
         67 2f 4e 61 6d 69 6e 67 43 6f 6e 74 65 78 74 3a
         31 2e 30 00")
}

#[test]
fn is_a_request_1_2() {
    let bytes = is_a_1_2();
    let frame = decode_everywhere(&bytes);
    assert_eq!(frame.version, Version::V1_2);
    let req = request(&frame);
    assert_eq!(req.header.request_id, 2);
    assert_eq!(req.header.response_flags, 0x03);
    assert!(req.header.response_expected());
    assert_eq!(req.header.target, key_name_service());
    assert_eq!(req.header.operation, "_is_a");
    assert!(req.header.service_context.is_empty());
    assert_eq!(req.body.offset, 56);
    assert_eq!(req.body.order, ByteOrder::Little);
    let mut r = req.body.reader();
    assert_eq!(r.read_string().unwrap(), NAMING_CONTEXT_ID);
    assert_eq!(r.remaining(), 0);

    // The garbage padding after the discriminator (`05 00` at 22) is zero when we encode.
    let expected = zero_padding(&bytes, 22..24);
    assert_eq!(reencode(&frame), expected);
    if native_is_le() {
        let mut out = BytesMut::new();
        write_request(&mut out, Version::V1_2, &req.header, |w| {
            w.write_string(NAMING_CONTEXT_ID)
        });
        assert_eq!(&out[..], &expected[..]);
    }
}

// --- §2.3: `_is_a` TRUE reply ----------------------------------------------------------------

#[test]
fn is_a_true_reply() {
    let bytes =
        hex("47 49 4f 50 01 02 01 01 0d 00 00 00 02 00 00 00 | 00 00 00 00 00 00 00 00 | 01");
    let frame = decode_everywhere(&bytes);
    let Message::Reply(rep) = &frame.message else {
        panic!("not a reply")
    };
    assert_eq!(frame.version, Version::V1_2);
    assert_eq!(rep.header.request_id, 2);
    assert_eq!(rep.header.status, ReplyStatus::NoException);
    assert!(rep.header.service_context.is_empty());
    assert_eq!(rep.body.offset, 24);
    assert!(rep.body.reader().read_bool().unwrap());
    assert_eq!(reencode(&frame), bytes);
    if native_is_le() {
        let mut out = BytesMut::new();
        write_reply(&mut out, Version::V1_2, &rep.header, |w| w.write_bool(true));
        assert_eq!(&out[..], &bytes[..]);
    }
}

// --- §2.3: BAD_OPERATION system exception reply ------------------------------------------------

#[test]
fn bad_operation_system_exception_reply() {
    let bytes = hex("47 49 4f 50 01 02 01 01 3c 00 00 00 0c 00 00 00
                     02 00 00 00 00 00 00 00 24 00 00 00 49 44 4c 3a
                     6f 6d 67 2e 6f 72 67 2f 43 4f 52 42 41 2f 42 41
                     44 5f 4f 50 45 52 41 54 49 4f 4e 3a 31 2e 30 00
                     26 00 54 41 01 00 00 00");
    let frame = decode_everywhere(&bytes);
    let Message::Reply(rep) = &frame.message else {
        panic!("not a reply")
    };
    assert_eq!(rep.header.request_id, 12);
    assert_eq!(rep.header.status, ReplyStatus::SystemException);
    assert_eq!(rep.body.offset, 24);
    let mut r = rep.body.reader();
    let e = decode_system_exception(&mut r).unwrap();
    assert_eq!(r.remaining(), 0);
    assert_eq!(
        e,
        SystemException::new(
            SystemExceptionKind::BAD_OPERATION,
            0x4154_0026,
            CompletionStatus::No
        )
    );
    assert_eq!(reencode(&frame), bytes);
    if native_is_le() {
        let mut out = BytesMut::new();
        write_reply(&mut out, Version::V1_2, &rep.header, |w| {
            encode_system_exception(&e, w)
        });
        assert_eq!(&out[..], &bytes[..]);
    }
}

// --- §2.3: user exception body (`exception Oops { string why; long code; }`) -------------------

#[test]
fn user_exception_reply() {
    // The capture gives the reply from the status on; the header and request id are ours.
    let bytes = cat(&[
        &hex("47 49 4f 50 01 02 01 01 38 00 00 00 06 00 00 00"),
        &hex("01 00 00 00 00 00 00 00 | 12 00 00 00"),
        b"IDL:demo/Oops:1.0\0",
        &hex("00 00 | 0a 00 00 00"),
        b"bad input\0",
        &hex("00 00 | 2a 00 00 00"),
    ]);
    assert_eq!(bytes.len(), 12 + 0x38);
    let frame = decode_everywhere(&bytes);
    let Message::Reply(rep) = &frame.message else {
        panic!("not a reply")
    };
    assert_eq!(rep.header.request_id, 6);
    assert_eq!(rep.header.status, ReplyStatus::UserException);
    let mut r = rep.body.reader();
    assert_eq!(r.read_string().unwrap(), "IDL:demo/Oops:1.0");
    assert_eq!(r.read_string().unwrap(), "bad input");
    assert_eq!(r.read_i32().unwrap(), 42);
    assert_eq!(r.remaining(), 0);
    assert_eq!(reencode(&frame), bytes);
    if native_is_le() {
        let mut out = BytesMut::new();
        write_reply(&mut out, Version::V1_2, &rep.header, |w| {
            w.write_string("IDL:demo/Oops:1.0");
            w.write_string("bad input");
            w.write_i32(42);
        });
        assert_eq!(&out[..], &bytes[..]);
    }
}

// --- §2.4: LocateRequest and OBJECT_HERE LocateReply -------------------------------------------

#[test]
fn locate_request_1_2() {
    let bytes = hex("47 49 4f 50 01 02 01 03 17 00 00 00 02 00 00 00 |
                     00 00 00 00 0b 00 00 00 4e 61 6d 65 53 65 72 76 69 63 65");
    let frame = decode_everywhere(&bytes);
    let Message::LocateRequest(lr) = &frame.message else {
        panic!("not a LocateRequest")
    };
    assert_eq!(frame.version, Version::V1_2);
    assert_eq!(lr.request_id, 2);
    assert_eq!(lr.target, key_name_service());
    assert_eq!(lr.target.object_key().as_deref(), Some(&b"NameService"[..]));
    if native_is_le() {
        assert_eq!(reencode(&frame), bytes);
        let mut out = BytesMut::new();
        write_locate_request(&mut out, Version::V1_2, 2, &key_name_service());
        assert_eq!(&out[..], &bytes[..]);
    }
}

#[test]
fn object_here_locate_reply() {
    let bytes = hex("47 49 4f 50 01 02 01 04 08 00 00 00 02 00 00 00 01 00 00 00");
    let frame = decode_everywhere(&bytes);
    let Message::LocateReply(lr) = &frame.message else {
        panic!("not a LocateReply")
    };
    assert_eq!(lr.request_id, 2);
    assert_eq!(lr.status, LocateStatus::ObjectHere);
    assert!(lr.body.bytes.is_empty());
    assert_eq!(reencode(&frame), bytes);
    if native_is_le() {
        let mut out = BytesMut::new();
        write_locate_reply(&mut out, Version::V1_2, 2, LocateStatus::ObjectHere, |_| {});
        assert_eq!(&out[..], &bytes[..]);
    }
}

// --- §2.6: omniORB's fragmented 100 000-byte request ------------------------------------------

/// The 100 000-byte argument: byte `i` is `i mod 256`, so the tail is `9c 9d 9e 9f`.
fn big_argument() -> Vec<u8> {
    (0..100_000u32).map(|i| i as u8).collect()
}

/// A request header whose body starts at 88, so that the whole message is 100 092 bytes and
/// the first piece (size 100 076) ends 8-aligned 4 bytes before the end, as in the capture.
fn big_request_header() -> RequestHeader {
    RequestHeader {
        deadline: None,
        request_id: 4,
        response_flags: 0x03,
        // 40-byte key: key @28..68, op "call" @68..77, context count @80, body @88.
        target: TargetAddress::Key(Bytes::from(vec![0x42; 40]).into()),
        operation: "call".into(),
        service_context: ServiceContextList::default(),
    }
}

const FRAGMENT_TAIL: &str = "47 49 4f 50 01 02 01 07 08 00 00 00 04 00 00 00 9c 9d 9e 9f";

/// The first piece (built by us, flags 0x03, size 100 076) followed by the captured Fragment.
fn fragmented_request() -> (Vec<u8>, Vec<u8>) {
    let mut whole = BytesMut::new();
    // Little-endian, as captured: build through a decoded frame so it works on any host.
    let frame = Frame {
        version: Version::V1_2,
        message: Message::Request(Box::new(Request {
            header: big_request_header(),
            body: {
                let mut b = BytesMut::new();
                let mut w = CdrWriter::with_offset(&mut b, ByteOrder::Little, 88);
                w.write_octets(&big_argument());
                protorb::giop::Body {
                    bytes: b.freeze(),
                    offset: 88,
                    order: ByteOrder::Little,
                }
            },
        })),
    };
    let mut codec = GiopCodec::new(1 << 20);
    codec.encode(&frame, &mut whole).unwrap();
    assert_eq!(whole.len(), 100_092);
    let mut first = whole[..100_088].to_vec();
    first[6] = 0x03;
    first[8..12].copy_from_slice(&100_076u32.to_le_bytes());
    let mut stream = first.clone();
    stream.extend_from_slice(&hex(FRAGMENT_TAIL));
    (stream, whole.to_vec())
}

#[test]
fn fragmented_100k_request() {
    let (stream, whole) = fragmented_request();
    let h = Header::decode(&stream).unwrap();
    assert!(h.more_fragments);
    assert_eq!(h.size, 100_076);
    assert_eq!(&stream[100_088..], &hex(FRAGMENT_TAIL)[..]);

    let frame = decode_one(&stream);
    let req = request(&frame);
    assert_eq!(req.header, big_request_header());
    assert_eq!(req.body.offset, 88);
    assert_eq!(req.body.octets().unwrap(), big_argument());
    // Reassembled = unfragmented.
    assert_eq!(decode_one(&whole), frame);
    // Re-encoding gives the unfragmented message.
    assert_eq!(reencode(&frame), whole);

    // Split points: every boundary in the headers and around the piece boundary, and a stride
    // through the body (every boundary would copy 100 KB 100 000 times).
    let cuts = (0..200)
        .chain((100_088 - 100)..=stream.len())
        .chain((200..100_000).step_by(997));
    for cut in cuts {
        assert_eq!(decode_split(&stream, cut), frame, "split at {cut}");
    }

    // The limit applies to the reassembled size: 100 080 bytes.
    let mut codec = GiopCodec::new(100_079).with_fragment_limits(32, 1 << 20);
    let mut src = BytesMut::from(&stream[..]);
    assert!(matches!(
        codec.decode(&mut src),
        Err(FrameError::TooLarge { size: 100_080, .. })
    ));
}

// --- §7.3: CosNaming `resolve` request and NotFound reply -------------------------------------

#[test]
fn cosnaming_resolve_request() {
    let bytes = hex("47 49 4f 50 01 02 01 00 44 00 00 00 08 00 00 00
                     03 00 00 00 00 00 00 00 0b 00 00 00 4e 61 6d 65
                     53 65 72 76 69 63 65 00 08 00 00 00 72 65 73 6f
                     6c 76 65 00 00 00 00 00 01 00 00 00 07 00 00 00
                     65 63 68 6f 4c 45 00 00 04 00 00 00 73 76 63 00");
    let frame = decode_everywhere(&bytes);
    let req = request(&frame);
    assert_eq!(req.header.request_id, 8);
    assert_eq!(req.header.response_flags, 0x03);
    assert_eq!(req.header.target, key_name_service());
    assert_eq!(req.header.operation, "resolve");
    assert!(req.header.service_context.is_empty());
    assert_eq!(req.body.offset, 56);
    let mut r = req.body.reader();
    assert_eq!(r.read_u32().unwrap(), 1);
    assert_eq!(r.read_string().unwrap(), "echoLE");
    assert_eq!(r.read_string().unwrap(), "svc");
    assert_eq!(r.remaining(), 0);
    assert_eq!(reencode(&frame), bytes);
    if native_is_le() {
        let mut out = BytesMut::new();
        write_request(&mut out, Version::V1_2, &req.header, |w| {
            w.write_u32(1);
            w.write_string("echoLE");
            w.write_string("svc");
        });
        assert_eq!(&out[..], &bytes[..]);
    }
}

#[test]
fn cosnaming_not_found_reply() {
    let bytes = cat(&[
        &hex("47 49 4f 50 01 02 01 01 5d 00 00 00 08 00 00 00 01 00 00 00 00 00 00 00"),
        &hex("31 00 00 00"),
        b"IDL:omg.org/CosNaming/NamingContext/NotFound:1.0\0",
        &hex("00 00 00 | 00 00 00 00 | 01 00 00 00 | 08 00 00 00"),
        b"missing\0",
        &hex("01 00 00 00 00"),
    ]);
    assert_eq!(bytes.len(), 12 + 0x5d);
    let frame = decode_everywhere(&bytes);
    let Message::Reply(rep) = &frame.message else {
        panic!("not a reply")
    };
    assert_eq!(rep.header.status, ReplyStatus::UserException);
    let mut r = rep.body.reader();
    assert_eq!(
        r.read_string().unwrap(),
        "IDL:omg.org/CosNaming/NamingContext/NotFound:1.0"
    );
    assert_eq!(r.read_u32().unwrap(), 0, "why = missing_node");
    assert_eq!(r.read_u32().unwrap(), 1, "one name component");
    assert_eq!(r.read_string().unwrap(), "missing");
    assert_eq!(r.read_string().unwrap(), "");
    assert_eq!(r.remaining(), 0);
    assert_eq!(reencode(&frame), bytes);
}

#[test]
fn cosnaming_resolve_reply_carries_an_inline_ior() {
    // The capture's IOR profile is abbreviated in WIRE-GIOP; build the same shape with ours.
    let ior = ObjectRef::new("IDL:demo/Echo:1.0", "127.0.0.1", 2809, &b"echo"[..]);
    let header = ReplyHeader {
        request_id: 8,
        status: ReplyStatus::NoException,
        service_context: ServiceContextList::default(),
    };
    let mut bytes = BytesMut::new();
    write_reply(&mut bytes, Version::V1_2, &header, |w| ior.encode(w));
    // 24-byte header, then `12 00 00 00 "IDL:demo/Echo:1.0\0"` (native order).
    assert_eq!(&bytes[28..46], b"IDL:demo/Echo:1.0\0");
    let frame = decode_everywhere(&bytes);
    let Message::Reply(rep) = &frame.message else {
        panic!("not a reply")
    };
    let mut r = rep.body.reader();
    assert_eq!(ObjectRef::decode(&mut r).unwrap(), ior);
    assert_eq!(r.remaining(), 0);
}

// --- §3: `_non_existent` (no body, no padding) -------------------------------------------------

#[test]
fn non_existent_request_has_no_trailing_padding() {
    let header = RequestHeader {
        deadline: None,
        request_id: 4,
        response_flags: 0x03,
        target: key_name_service(),
        operation: "_non_existent".into(),
        service_context: ServiceContextList::default(),
    };
    let mut bytes = BytesMut::new();
    write_request(&mut bytes, Version::V1_2, &header, |_| {});
    assert_eq!(bytes.len(), 64);
    assert_eq!(&bytes[40..44], &14u32.to_ne_bytes());
    assert_eq!(&bytes[44..58], b"_non_existent\0");
    assert_eq!(&bytes[60..64], &[0, 0, 0, 0]);
    let frame = decode_everywhere(&bytes);
    assert_eq!(request(&frame).header, header);
    assert!(request(&frame).body.bytes.is_empty());
}

// --- §2.7: GIOP 1.0 `_is_a` and its reply ------------------------------------------------------

#[test]
fn is_a_request_1_0() {
    // The capture stops at "IDL:"; the body is the same string as in the 1.2 capture (the
    // sizes agree: 0x58).
    let bytes = hex("47 49 4f 50 01 00 01 00 58 00 00 00 00 00 00 00
                     02 00 00 00 01 00 00 00 0b 00 00 00 4e 61 6d 65
                     53 65 72 76 69 63 65 00 06 00 00 00 5f 69 73 5f
                     61 00 00 00 00 00 00 00 28 00 00 00 49 44 4c 3a
                     6f 6d 67 2e 6f 72 67 2f 43 6f 73 4e 61 6d 69 6e
                     67 2f 4e 61 6d 69 6e 67 43 6f 6e 74 65 78 74 3a
                     31 2e 30 00");
    let frame = decode_everywhere(&bytes);
    assert_eq!(frame.version, Version::V1_0);
    let req = request(&frame);
    assert_eq!(req.header.request_id, 2);
    assert_eq!(req.header.response_flags, 0x03);
    assert_eq!(req.header.target, key_name_service());
    assert_eq!(req.header.operation, "_is_a");
    assert!(req.header.service_context.is_empty());
    // Directly after the empty principal (52..56).
    assert_eq!(req.body.offset, 56);
    assert_eq!(req.body.reader().read_string().unwrap(), NAMING_CONTEXT_ID);
    assert_eq!(reencode(&frame), bytes);
    if native_is_le() {
        let mut out = BytesMut::new();
        write_request(&mut out, Version::V1_0, &req.header, |w| {
            w.write_string(NAMING_CONTEXT_ID)
        });
        assert_eq!(&out[..], &bytes[..]);
    }
}

#[test]
fn is_a_reply_1_0() {
    let bytes =
        hex("47 49 4f 50 01 00 01 01 0d 00 00 00 | 00 00 00 00 | 02 00 00 00 | 00 00 00 00 | 01");
    let frame = decode_everywhere(&bytes);
    assert_eq!(frame.version, Version::V1_0);
    let Message::Reply(rep) = &frame.message else {
        panic!("not a reply")
    };
    assert_eq!(rep.header.request_id, 2);
    assert_eq!(rep.header.status, ReplyStatus::NoException);
    assert_eq!(rep.body.offset, 24);
    assert!(rep.body.reader().read_bool().unwrap());
    assert_eq!(reencode(&frame), bytes);
    if native_is_le() {
        let mut out = BytesMut::new();
        write_reply(&mut out, Version::V1_0, &rep.header, |w| w.write_bool(true));
        assert_eq!(&out[..], &bytes[..]);
    }
}

// --- §5.1: omniORB's BI_DIR_IIOP context ------------------------------------------------------

fn bidir_golden() -> Vec<u8> {
    cat(&[
        &hex("01 00 00 00 | 01 00 00 00 | 0a 00 00 00"),
        b"127.0.0.1\0",
        &hex("c3 6d"),
    ])
}

#[test]
fn bidir_context() {
    let data = bidir_golden();
    let points = BiDirListenPoints::from_context_data(&data).unwrap();
    assert_eq!(points.0, vec![("127.0.0.1".to_string(), 28099)]);
    let ctx = points.to_context();
    assert_eq!(ctx.id, 5);
    if native_is_le() {
        assert_eq!(&ctx.data[..], &data[..]);
    }

    // Carried in a Request, as omniORB sends it on the first bidir call.
    let header = RequestHeader {
        deadline: None,
        request_id: 2,
        response_flags: 0x03,
        target: key_name_service(),
        operation: "registerCb".into(),
        service_context: ServiceContextList(smallvec::smallvec![ServiceContext {
            id: 5,
            data: Bytes::from(data.clone()),
        }]),
    };
    let mut bytes = BytesMut::new();
    write_request(&mut bytes, Version::V1_2, &header, |w| w.write_u32(0));
    let frame = decode_everywhere(&bytes);
    let got = request(&frame).header.service_context.get(5).unwrap();
    assert_eq!(&got[..], &data[..]);
    assert_eq!(BiDirListenPoints::from_context_data(got).unwrap(), points);
}

// --- Big-endian inputs (omniORB accepts them; §1.1) --------------------------------------------

#[test]
fn big_endian_is_a_request() {
    // The 1.2 `_is_a` rebuilt big-endian by hand.
    let mut bytes = BytesMut::new();
    bytes.extend_from_slice(b"GIOP\x01\x02\x00\x00\0\0\0\0");
    let mut w = CdrWriter::with_origin(&mut bytes, ByteOrder::Big, 0);
    w.write_u32(2);
    w.write_octet(3);
    w.write_raw(&[0, 0, 0]);
    w.write_i16(0);
    w.write_octets(b"NameService");
    w.write_string("_is_a");
    w.write_u32(0);
    w.align(8);
    w.write_string(NAMING_CONTEXT_ID);
    let size = (bytes.len() - 12) as u32;
    bytes[8..12].copy_from_slice(&size.to_be_bytes());
    let frame = decode_everywhere(&bytes);
    let req = request(&frame);
    assert_eq!(req.header.request_id, 2);
    assert_eq!(req.header.operation, "_is_a");
    assert_eq!(req.body.order, ByteOrder::Big);
    assert_eq!(req.body.reader().read_string().unwrap(), NAMING_CONTEXT_ID);
    // Re-encoding keeps the byte order, so the body stays valid.
    assert_eq!(reencode(&frame), &bytes[..]);
    let le = is_a_1_2();
    assert_eq!(
        request(&decode_one(&le)).header,
        req.header,
        "same fields in either order"
    );
}

#[test]
fn header_fields_of_every_capture() {
    for (bytes, msg_type) in [
        (is_a_1_2(), MsgType::Request),
        (hex(FRAGMENT_TAIL), MsgType::Fragment),
    ] {
        assert_eq!(Header::decode(&bytes).unwrap().msg_type, msg_type);
    }
    let h = Header::decode(&hex(FRAGMENT_TAIL)).unwrap();
    assert!(!h.more_fragments);
    assert_eq!(h.size, 8);
    // The captured tail alone is an orphan fragment.
    let mut src = BytesMut::from(&hex(FRAGMENT_TAIL)[..]);
    assert!(matches!(
        GiopCodec::default().decode(&mut src),
        Err(FrameError::BadFragment(_))
    ));
    // The reader API works on the captures directly as well.
    let bytes = is_a_1_2();
    let mut r = CdrReader::with_offset(&bytes[12..], ByteOrder::Little, 12);
    assert_eq!(r.read_u32().unwrap(), 2);
}
