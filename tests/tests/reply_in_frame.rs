//! Replies whose result a generated skeleton encodes straight into the reply frame
//! (`ResultSlot`, issue 18): the frame on the wire is byte for byte what the general reply
//! writer writes, in GIOP 1.0, 1.1 and 1.2, for small and large results, with requests
//! pipelined so that replies also queue behind each other; and replies that cannot use the
//! frame (reply metadata, a user exception, a deferred answer) are right when they alternate
//! with ones that do on the same server threads; a result over the server's maximum message
//! size is refused as before. No assertion depends on timing.

use bytes::{Bytes, BytesMut};
use orb_tests::activate_echo;
use orb_tests::orbtest::{
    Balance, Echo, EchoClient, EchoSkeleton, EchoWithdrawError, InsufficientFunds, Payload,
    SleepReply, SleepRequest, WithdrawRequest,
};
use prost::Message as _;
use protorb::giop::{
    write_reply, write_request, GiopCodec, Message, ReplyHeader, ReplyStatus, RequestHeader,
    ServiceContextList, TargetAddress, Version,
};
use protorb::{ClientInterceptor, ClientRequest, Context, Exception, Metadata, Orb, Outcome};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::codec::Decoder;

/// A request for operation `Echo` on object `echo`, its payload's encoding as parameters.
fn request(version: Version, id: u32, payload: &Payload) -> BytesMut {
    let header = RequestHeader {
        deadline: None,
        request_id: id,
        response_flags: 3,
        target: TargetAddress::Key(Bytes::from_static(b"echo").into()),
        operation: "Echo".into(),
        service_context: Default::default(),
    };
    let params = payload.encode_to_vec();
    let mut buf = BytesMut::new();
    write_request(&mut buf, version, &header, |w| w.write_octets(&params));
    buf
}

/// Reads one whole GIOP message.
fn read_frame(s: &mut TcpStream) -> BytesMut {
    let mut frame = BytesMut::zeroed(12);
    s.read_exact(&mut frame).expect("a GIOP header");
    let size = [frame[8], frame[9], frame[10], frame[11]];
    let size = if frame[6] & 1 == 1 {
        u32::from_le_bytes(size)
    } else {
        u32::from_be_bytes(size)
    };
    let mut body = vec![0; size as usize];
    s.read_exact(&mut body).expect("the message's body");
    frame.extend_from_slice(&body);
    frame
}

/// A payload of `len` bytes that says which request it belongs to.
fn payload(call: u32, len: usize) -> Payload {
    Payload {
        thread: 7,
        call,
        data: (0..len).map(|i| (i as u32 ^ call) as u8).collect(),
    }
}

/// Every reply is the frame `write_reply` makes for a NO_EXCEPTION reply to its request
/// carrying the echoed payload, in the request's GIOP version: results under the in-frame
/// limit (8 KiB) and over it, 64 requests written before any reply is read (so the server's
/// threads also find the connection busy and queue their replies).
#[test]
fn replies_are_the_frames_the_general_writer_makes_in_every_version() {
    let server = Orb::builder().threads(4).build().unwrap();
    let _echo = activate_echo(&server);
    let lens = [0, 1, 60, 200, 4_000, 8_150, 8_300, 20_000];
    for version in [Version::V1_0, Version::V1_1, Version::V1_2] {
        let mut s = TcpStream::connect(server.listen_addrs()[0]).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut sent = HashMap::new();
        let mut out = BytesMut::new();
        for i in 0..64u32 {
            let p = payload(i, lens[i as usize % lens.len()]);
            out.extend_from_slice(&request(version, 1000 + i, &p));
            sent.insert(1000 + i, p);
        }
        s.write_all(&out).unwrap();
        let mut codec = GiopCodec::new(1 << 20);
        for _ in 0..64 {
            let raw = read_frame(&mut s);
            let frame = codec
                .decode(&mut raw.clone())
                .expect("a valid frame")
                .expect("a whole frame");
            assert_eq!(frame.version, version);
            let Message::Reply(reply) = frame.message else {
                panic!("not a reply: {:?}", frame.message);
            };
            let id = reply.header.request_id;
            let p = sent.remove(&id).expect("a reply to a request sent, once");
            let header = ReplyHeader {
                request_id: id,
                status: ReplyStatus::NoException,
                service_context: ServiceContextList::default(),
            };
            let mut want = BytesMut::new();
            let result = p.encode_to_vec();
            write_reply(&mut want, version, &header, |w| w.write_octets(&result));
            assert_eq!(
                raw,
                want,
                "reply {id} in {version}, {} bytes of data",
                p.data.len()
            );
        }
        assert!(sent.is_empty());
    }
    server.shutdown();
}

/// An `Echo` whose replies vary by call: reply metadata on every third `echo`, a deferred
/// answer on every fifth, a user exception from `withdraw` over 100.
struct Varied;

impl Echo for Varied {
    fn echo(&self, ctx: &Context, req: Payload) -> Result<Payload, Exception> {
        if req.thread == 99 {
            // A result of `call` bytes, whatever was sent.
            return Ok(Payload {
                data: vec![9; req.call as usize],
                ..req
            });
        }
        if req.call % 3 == 0 {
            ctx.reply_metadata_mut()
                .insert_str("call", format!("{}-{}", req.thread, req.call));
        }
        if req.call % 5 == 0 {
            // Answered from another thread; what `echo` returns is ignored.
            let h = ctx.defer()?.typed::<Payload, Exception>();
            std::thread::spawn(move || h.reply(Ok(req)));
            return Ok(Payload::default());
        }
        Ok(req)
    }

    fn sleep(&self, _ctx: &Context, _req: SleepRequest) -> Result<SleepReply, Exception> {
        Ok(SleepReply { cancelled: false })
    }

    fn panic(&self, _ctx: &Context, _req: ()) -> Result<(), Exception> {
        Ok(())
    }

    fn notify(&self, _ctx: &Context, _req: Payload) -> Result<(), Exception> {
        Ok(())
    }

    fn withdraw(&self, _ctx: &Context, req: WithdrawRequest) -> Result<Balance, EchoWithdrawError> {
        if req.amount > 100 {
            return Err(InsufficientFunds {
                available: 100,
                requested: req.amount,
            }
            .into());
        }
        Ok(Balance {
            amount: 100 - req.amount,
        })
    }
}

/// Records the `call` metadata of every reply that has it.
struct SeenMetadata(Arc<Mutex<Vec<String>>>);

impl ClientInterceptor for SeenMetadata {
    fn receive_reply(&self, request: &ClientRequest<'_>, _outcome: Outcome<'_>) {
        let md: &Metadata = request.reply_metadata();
        if let Some(call) = md.get_str("call") {
            self.0.lock().unwrap().push(call.to_string());
        }
    }
}

/// Eight client threads over one connection, 200 calls each, against four server threads:
/// replies in the frame and replies the general way (with metadata, deferred, exceptions)
/// interleave on the same server threads, and every caller gets its own result, and the
/// metadata its call's servant set.
#[test]
fn framed_and_general_replies_interleave_correctly() {
    let server = Orb::builder().threads(4).build().unwrap();
    let target = server.activate(&b"varied"[..], EchoSkeleton::new(Varied));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let client = Orb::builder()
        .threads(2)
        .no_listen()
        .client_interceptor(SeenMetadata(seen.clone()))
        .build()
        .unwrap();
    let stub = EchoClient::new(&client, target);
    let threads: Vec<_> = (0..8u32)
        .map(|t| {
            let stub = stub.clone();
            std::thread::Builder::new()
                .spawn(move || {
                    for call in 0..200u32 {
                        // Over 8 KiB the result goes out in parts (`octets.rs`): with
                        // metadata (every third call), deferred (every fifth) or plain.
                        let len = [3, 100, 9_000, 40_000][(call % 4) as usize];
                        let p = Payload {
                            thread: t,
                            ..payload(call, len)
                        };
                        assert_eq!(stub.echo(p.clone()).unwrap(), p, "thread {t} call {call}");
                        let amount = u64::from(call % 150);
                        match stub.withdraw(WithdrawRequest { amount }) {
                            Ok(b) => assert_eq!(b.amount, 100 - amount),
                            Err(EchoWithdrawError::InsufficientFunds(e)) => {
                                assert!(amount > 100);
                                assert_eq!((e.available, e.requested), (100, amount));
                            }
                            Err(e) => panic!("thread {t} call {call}: {e:?}"),
                        }
                    }
                })
                .unwrap()
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    // Each call whose servant set metadata got it back, once; no other call did.
    let mut seen = seen.lock().unwrap().clone();
    seen.sort();
    let mut want: Vec<String> = (0..8u32)
        .flat_map(|t| {
            (0..200u32)
                .filter(|c| c % 3 == 0)
                .map(move |c| format!("{t}-{c}"))
        })
        .collect();
    want.sort();
    assert_eq!(seen, want);
    client.shutdown();
    server.shutdown();
}

/// A result over the server's maximum message size is refused as the general way refuses
/// it: MARSHAL (MESSAGE_TOO_LARGE, completed), not sent; one just under the maximum is sent.
/// Both for a result that fits the in-frame limit (8 KiB) and for a large one (sent in parts,
/// `octets.rs`).
#[test]
fn a_result_over_the_maximum_message_size_is_marshal_not_sent() {
    for (max, over, under) in [(4_096, 5_000, 4_000), (64 * 1024, 70_000, 60_000)] {
        let server = Orb::builder()
            .threads(1)
            .max_message_size(max)
            .build()
            .unwrap();
        let target = server.activate(&b"varied"[..], EchoSkeleton::new(Varied));
        let client = Orb::builder().threads(0).no_listen().build().unwrap();
        let stub = EchoClient::new(&client, target);
        let ask = |call| {
            stub.echo(Payload {
                thread: 99,
                call,
                data: Vec::new(),
            })
        };
        match ask(over) {
            Err(Exception::System(e)) => {
                assert_eq!(e.kind, protorb::SystemExceptionKind::MARSHAL, "{e}");
                assert_eq!(e.minor, protorb::minor::MESSAGE_TOO_LARGE, "{e}");
                assert_eq!(e.completed, protorb::CompletionStatus::Yes, "{e}");
            }
            other => panic!("a {over}-byte result under a {max}-byte maximum: {other:?}"),
        }
        assert_eq!(ask(under).unwrap().data, vec![9; under as usize]);
        client.shutdown();
        server.shutdown();
    }
}
