//! Asynchronous calls (AMI): `_async` stubs and `ObjectProxy::invoke_async` return futures
//! whose request is sent at once and whose reply is routed by request id to the right
//! future, under tokio (both runtimes) and `futures::executor::block_on`, mixed with blocking
//! callers; dropped futures cancel; deadlines fire without a reply; nested callbacks with one
//! ORB thread per side do not deadlock.
//!
//! No assertion depends on timing: the timeouts below are hang guards, far above what any
//! step needs on a loaded machine (except the deadlines under test, against servers that
//! never answer in time).

mod hostile_common;

use bytes::{Bytes, BytesMut};
use futures::future::join_all;
use hostile_common::octets_reply;
use orb_tests::orbtest::*;
use orb_tests::{activate_echo, activate_node, payload, within};
use protorb::giop::{write_reply, Frame, GiopCodec, Message, ReplyHeader, ReplyStatus, Version};
use protorb::{Orb, SystemExceptionKind};
use std::future::Future;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::{Duration, Instant};
use tokio_util::codec::Decoder;

fn pair(client_threads: usize) -> (Orb, Orb, EchoClient, std::sync::Arc<orb_tests::EchoServant>) {
    let server = Orb::builder().threads(2).build().unwrap();
    let (servant, r) = activate_echo(&server);
    let client = Orb::builder()
        .threads(client_threads)
        .no_listen()
        .build()
        .unwrap();
    let stub = EchoClient::new(&client, r);
    (server, client, stub, servant)
}

/// Every tenth message is large (sent in parts, `octets.rs`, both ways).
fn msg(thread: u32, call: u32) -> Payload {
    let len = if call % 10 == 9 {
        20_000 + call as usize
    } else {
        (call as usize * 37) % 3000
    };
    Payload {
        thread,
        call,
        data: payload(thread, call, len),
    }
}

/// Starts `n` echo calls tagged `thread` and checks every reply is its own.
async fn echo_many(stub: EchoClient, thread: u32, n: u32) {
    let calls: Vec<_> = (0..n).map(|i| stub.echo_async(msg(thread, i))).collect();
    for (i, r) in join_all(calls).await.into_iter().enumerate() {
        let got = r.unwrap_or_else(|e| panic!("call {thread}/{i}: {e}"));
        assert_eq!(got, msg(thread, i as u32), "reply of {thread}/{i} mixed up");
    }
}

fn assert_send_static<F: Future + Send + 'static>(f: F) -> F {
    f
}

#[test]
fn futures_are_send_static_and_unpin() {
    fn unpin<T: Unpin + Send + 'static>() {}
    unpin::<protorb::ReplyFuture>();
    let (server, client, stub, _) = pair(1);
    let f = assert_send_static(stub.echo_async(msg(0, 0)));
    let g = assert_send_static(stub.echo_async_with_timeout(msg(0, 1), Duration::from_secs(30)));
    let (a, b) = within(60, move || {
        futures::executor::block_on(async { (f.await, g.await) })
    });
    assert_eq!(a.unwrap(), msg(0, 0));
    assert_eq!(b.unwrap(), msg(0, 1));
    client.shutdown();
    server.shutdown();
}

/// Futures in flight on one connection from tasks on several tokio workers, from plain
/// threads blocking on futures, and blocking callers on the same ORB: each reply reaches its
/// own caller.
#[test]
fn many_futures_on_one_connection_from_tasks_threads_and_blocking_callers() {
    let (server, client, stub, _) = pair(2);
    let s = stub.clone();
    within(120, move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(4)
            .build()
            .unwrap();
        let tasks: Vec<_> = (0..8)
            .map(|t| rt.spawn(echo_many(s.clone(), t, 100)))
            .collect();
        let threads: Vec<_> = (100..104)
            .map(|t| {
                let s = s.clone();
                std::thread::spawn(move || futures::executor::block_on(echo_many(s, t, 100)))
            })
            .collect();
        let blocking: Vec<_> = (200..202)
            .map(|t| {
                let s = s.clone();
                std::thread::spawn(move || {
                    for i in 0..100 {
                        assert_eq!(s.echo(msg(t, i)).unwrap(), msg(t, i));
                    }
                })
            })
            .collect();
        for t in tasks {
            rt.block_on(t).unwrap();
        }
        threads.into_iter().for_each(|t| t.join().unwrap());
        blocking.into_iter().for_each(|t| t.join().unwrap());
    });
    let stats = client.stats();
    assert_eq!(stats.connections_opened, 1, "{stats:?}");
    assert_eq!(
        stats.replies_received,
        8 * 100 + 4 * 100 + 2 * 100,
        "{stats:?}"
    );
    assert_eq!(stats.late_replies_dropped, 0, "{stats:?}");
    client.shutdown();
    server.shutdown();
}

#[test]
fn works_under_tokio_current_thread() {
    let (server, client, stub, _) = pair(1);
    within(60, move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let a = tokio::spawn(echo_many(stub.clone(), 1, 200));
            let b = tokio::spawn(echo_many(stub.clone(), 2, 200));
            echo_many(stub.clone(), 3, 50).await;
            a.await.unwrap();
            b.await.unwrap();
        });
    });
    client.shutdown();
    server.shutdown();
}

#[test]
fn works_under_tokio_multi_thread_macro() {
    let (server, client, stub, _) = pair(2);
    #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
    async fn run(stub: EchoClient) {
        let tasks: Vec<_> = (0..4)
            .map(|t| tokio::spawn(echo_many(stub.clone(), t, 50)))
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
    }
    within(60, move || run(stub));
    client.shutdown();
    server.shutdown();
}

#[test]
fn works_under_futures_block_on_and_raises_user_exceptions() {
    let (server, client, stub, servant) = pair(1);
    *servant.balance.lock().unwrap() = 10;
    within(60, move || {
        futures::executor::block_on(async {
            echo_many(stub.clone(), 7, 100).await;
            let ok = stub.withdraw_async(WithdrawRequest { amount: 4 }).await;
            assert_eq!(ok.unwrap().amount, 6);
            match stub.withdraw_async(WithdrawRequest { amount: 7 }).await {
                Err(EchoWithdrawError::InsufficientFunds(e)) => {
                    assert_eq!((e.available, e.requested), (6, 7))
                }
                other => panic!("expected InsufficientFunds, got {other:?}"),
            }
        })
    });
    client.shutdown();
    server.shutdown();
}

/// The request goes out when the method is called: the servant runs it although the future
/// is never polled (here: until the servant has seen it).
#[test]
fn the_request_is_sent_before_the_first_poll() {
    let (server, client, stub, servant) = pair(1);
    let before = servant.notified.lock().unwrap().len();
    let fut = stub.echo_async(msg(1, 1));
    // A oneway on the same connection after it: once the servant has it, the two-way
    // request, sent first on the same connection, has been read too.
    stub.notify(msg(1, 2)).unwrap();
    within(60, {
        let servant = servant.clone();
        move || {
            while servant.notified.lock().unwrap().len() == before {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    });
    assert!(server.stats().requests_received >= 2);
    let got = within(60, move || futures::executor::block_on(fut));
    assert_eq!(got.unwrap(), msg(1, 1));
    client.shutdown();
    server.shutdown();
}

/// A deadline passes with no reply: the future resolves with TIMEOUT (woken by the ORB's
/// timer; nothing else polls it), and the server sees the call cancelled.
#[test]
fn deadline_resolves_with_timeout_and_cancels() {
    let (server, client, stub, _) = pair(2);
    // A blocking call first: its reply leaves the client's pool idle (role vacant, standby
    // armed), the state where a timer with no event to wake anyone could be stranded.
    assert_eq!(stub.echo(msg(0, 0)).unwrap(), msg(0, 0));
    let fut =
        stub.sleep_async_with_timeout(SleepRequest { millis: 60_000 }, Duration::from_millis(200));
    let t = Instant::now();
    let err = within(60, move || futures::executor::block_on(fut)).unwrap_err();
    assert_eq!(err.kind(), Some(SystemExceptionKind::TIMEOUT), "{err}");
    assert!(t.elapsed() >= Duration::from_millis(200));
    wait_for_cancel(&server);
    // The connection carries on.
    let stub2 = stub.clone();
    let r = within(60, move || {
        futures::executor::block_on(stub2.echo_async(msg(1, 1)))
    });
    assert_eq!(r.unwrap(), msg(1, 1));
    client.shutdown();
    server.shutdown();
}

/// A future dropped before its reply cancels the call at the server.
#[test]
fn dropped_future_cancels_the_call() {
    let (server, client, stub, _) = pair(1);
    let fut = stub.sleep_async(SleepRequest { millis: 60_000 });
    drop(fut);
    wait_for_cancel(&server);
    let r = within(60, move || {
        futures::executor::block_on(stub.echo_async(msg(2, 2)))
    });
    assert_eq!(r.unwrap(), msg(2, 2));
    client.shutdown();
    server.shutdown();
}

/// Waits until the server has taken a CancelRequest for a call it was running (or about to
/// run: one cancelled before it started is not dispatched at all, so the servant may never
/// see it).
fn wait_for_cancel(server: &Orb) {
    let server = server.clone();
    within(60, move || {
        while server.stats().upcalls_cancelled == 0 {
            std::thread::sleep(Duration::from_millis(5));
        }
    });
}

/// A future dropped before its reply: the peer gets CancelRequest for its id, and the reply
/// that still comes is dropped and counted, never given to the next call. The server is
/// scripted on a raw socket with the ORB's own codec.
#[test]
fn dropped_future_sends_cancel_and_its_late_reply_is_dropped() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut codec = GiopCodec::default();
        let mut buf = BytesMut::new();
        let (mut ids, mut cancelled) = (Vec::new(), Vec::new());
        let mut chunk = [0u8; 4096];
        // The first request, its CancelRequest, then the second request.
        while ids.len() < 2 || cancelled.is_empty() {
            let n = s.read(&mut chunk).unwrap();
            assert!(n > 0, "client closed early");
            buf.extend_from_slice(&chunk[..n]);
            while let Some(Frame { message, .. }) = codec.decode(&mut buf).unwrap() {
                match message {
                    Message::Request(r) => ids.push(r.header.request_id),
                    Message::CancelRequest { request_id } => cancelled.push(request_id),
                    other => panic!("unexpected {other:?}"),
                }
            }
        }
        assert_eq!(
            cancelled,
            vec![ids[0]],
            "the dropped call is the one cancelled"
        );
        s.write_all(&octets_reply(ids[0], b"late")).unwrap();
        s.write_all(&octets_reply(ids[1], b"fresh")).unwrap();
        // Until the client is done.
        let _ = s.read(&mut chunk);
    });
    let client = Orb::builder().threads(1).no_listen().build().unwrap();
    let target = protorb::ObjectRef::new("IDL:orbtest/Echo:1.0", "127.0.0.1", port, &b"k"[..]);
    let proxy = protorb::ObjectProxy::new(&client, target);
    drop(proxy.invoke_async("Echo", Bytes::from_static(b"first"), None));
    let second = proxy.invoke_async("Echo", Bytes::from_static(b"second"), None);
    let out = within(60, move || futures::executor::block_on(second)).unwrap();
    assert_eq!(&out[..], b"fresh");
    let stats = client.stats();
    assert_eq!(stats.late_replies_dropped, 1, "{stats:?}");
    assert_eq!(stats.replies_received, 1, "{stats:?}");
    client.shutdown();
    server.join().unwrap();
}

/// Nested callbacks, one ORB thread on each side: a task awaits an asynchronous call to
/// node B, whose servant calls node A back, which calls B again, and so on. A's only pool
/// thread serves the callbacks while the task's future waits; nothing deadlocks.
#[test]
fn nested_callbacks_under_an_async_call_with_one_thread_per_side() {
    let a = Orb::builder().threads(1).build().unwrap();
    let b = Orb::builder().threads(1).build().unwrap();
    let a_ref = activate_node(&a, "a");
    let b_ref = activate_node(&b, "b");
    let stub = NodeClient::new(&a, b_ref);
    let reply = within(60, move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let calls: Vec<_> = (0..4)
                .map(|_| {
                    stub.ping_async(PingRequest {
                        depth: 6,
                        peer: Some(a_ref.clone()),
                        sleep_micros: 0,
                    })
                })
                .collect();
            join_all(calls).await
        })
    });
    for r in reply {
        let r = r.unwrap();
        assert_eq!(r.depth_reached, 6);
        assert_eq!(r.trail.len(), 7);
    }
    a.shutdown();
    b.shutdown();
}

/// With no pool threads, the application drives the event loop: `Orb::run` on a thread of
/// its own reads the replies of the futures.
#[test]
fn threads_zero_with_run_on_a_thread() {
    let (server, client, stub, _) = pair(0);
    let runner = {
        let client = client.clone();
        std::thread::spawn(move || client.run())
    };
    within(60, move || {
        futures::executor::block_on(echo_many(stub, 9, 100))
    });
    client.shutdown();
    runner.join().unwrap();
    server.shutdown();
}

/// Shutting the client ORB down resolves the futures still waiting, with an error.
#[test]
fn shutdown_resolves_pending_futures() {
    let (server, client, stub, _) = pair(1);
    let fut = stub.sleep_async(SleepRequest { millis: 60_000 });
    let c = client.clone();
    let err = within(60, move || {
        c.shutdown();
        futures::executor::block_on(fut)
    })
    .unwrap_err();
    assert!(
        matches!(
            err.kind(),
            Some(SystemExceptionKind::BAD_INV_ORDER) | Some(SystemExceptionKind::COMM_FAILURE)
        ),
        "{err}"
    );
    // A call after shutdown fails at once.
    let err = futures::executor::block_on(stub.echo_async(msg(1, 1))).unwrap_err();
    assert_eq!(
        err.kind(),
        Some(SystemExceptionKind::BAD_INV_ORDER),
        "{err}"
    );
    server.shutdown();
}

/// A LOCATION_FORWARD reply is followed as in a blocking call: the future's next poll sends
/// the request again to the forwarded reference and resolves with that object's reply. The
/// forwarder is scripted on a raw socket.
#[test]
fn location_forward_is_followed() {
    let (server, client, stub, _) = pair(1);
    let real = stub.object_ref().clone();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let forwarder = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut codec = GiopCodec::default();
        let mut buf = BytesMut::new();
        let mut chunk = [0u8; 4096];
        let id = loop {
            let n = s.read(&mut chunk).unwrap();
            assert!(n > 0, "client closed early");
            buf.extend_from_slice(&chunk[..n]);
            if let Some(Frame {
                message: Message::Request(r),
                ..
            }) = codec.decode(&mut buf).unwrap()
            {
                break r.header.request_id;
            }
        };
        let mut out = BytesMut::new();
        let header = ReplyHeader {
            request_id: id,
            status: ReplyStatus::LocationForward,
            service_context: Default::default(),
        };
        write_reply(&mut out, Version::V1_2, &header, |w| real.encode(w));
        s.write_all(&out).unwrap();
        let _ = s.read(&mut chunk);
    });
    let target = protorb::ObjectRef::new(EchoClient::REPOSITORY_ID, "127.0.0.1", port, &b"k"[..]);
    let forwarded = EchoClient::new(&client, target);
    let fut = forwarded.echo_async(msg(5, 5));
    let r = within(60, move || futures::executor::block_on(fut));
    assert_eq!(r.unwrap(), msg(5, 5));
    client.shutdown();
    forwarder.join().unwrap();
    server.shutdown();
}

/// A node that answers through a deferred reply: its ORB thread returns at once, and a tokio
/// task awaits the nested call (made with the async stub) and then answers.
struct DeferringNode {
    orb: Orb,
    me: std::sync::Arc<std::sync::Mutex<Option<protorb::ObjectRef>>>,
    tokio: tokio::runtime::Handle,
}

impl Node for DeferringNode {
    fn ping(
        &self,
        ctx: &protorb::Context,
        req: PingRequest,
    ) -> Result<PingReply, protorb::Exception> {
        if req.depth == 0 {
            return Ok(PingReply {
                depth_reached: 0,
                trail: vec!["deferring".into()],
            });
        }
        let handle = ctx.defer()?.typed::<PingReply, protorb::Exception>();
        let me = self.me.lock().unwrap().clone();
        // Sent now, from the ORB thread; awaited by the task.
        let call = NodeClient::new(&self.orb, req.peer.clone().unwrap_or_default()).ping_async(
            PingRequest {
                depth: req.depth - 1,
                peer: me,
                sleep_micros: 0,
            },
        );
        self.tokio.spawn(async move {
            let reply = call.await.map(|mut r| {
                r.depth_reached += 1;
                r.trail.push("deferring".into());
                r
            });
            handle.reply(reply);
        });
        Ok(PingReply::default()) // ignored: the handle answers
    }
}

/// Nested callbacks where one side (A) answers through deferred replies and makes its nested
/// calls with async stubs, and the other (B) is a blocking node; one ORB thread per side, and
/// several chains at once: none deadlocks, every chain reaches its depth.
#[test]
fn nested_callbacks_with_async_stubs_and_deferred_replies_one_thread_per_side() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let a = Orb::builder().threads(1).build().unwrap();
    let b = Orb::builder().threads(1).build().unwrap();
    let me = std::sync::Arc::new(std::sync::Mutex::new(None));
    let node = DeferringNode {
        orb: a.clone(),
        me: me.clone(),
        tokio: rt.handle().clone(),
    };
    let a_ref = a.activate("a", NodeSkeleton::new(node));
    *me.lock().unwrap() = Some(a_ref.clone());
    let b_ref = activate_node(&b, "b");
    let stub = NodeClient::new(&a, b_ref);
    let handle = rt.handle().clone();
    let replies = within(60, move || {
        handle.block_on(async {
            let chains: Vec<_> = (0..4)
                .map(|_| {
                    stub.ping_async(PingRequest {
                        depth: 10,
                        peer: Some(a_ref.clone()),
                        sleep_micros: 0,
                    })
                })
                .collect();
            join_all(chains).await
        })
    });
    for r in replies {
        let r = r.unwrap();
        assert_eq!(r.depth_reached, 10);
        assert_eq!(r.trail.len(), 11);
        // Levels alternate: B's blocking node, then A's deferring one.
        let deferring = r.trail.iter().filter(|t| *t == "deferring").count();
        assert_eq!(deferring, 5, "{:?}", r.trail);
    }
    a.shutdown();
    b.shutdown();
    drop(rt);
}

/// Oneway stubs hand large messages over in parts (`octets.rs`), blocking and `_async`, with
/// and without a timeout: every one arrives whole.
#[test]
fn large_oneways_arrive_whole() {
    let (server, client, stub, servant) = pair(1);
    let before = servant.notified.lock().unwrap().len();
    // Calls 9, 19, ...: 20 KB each (see `msg`).
    let sent: Vec<Payload> = (0..8).map(|i| msg(7, 9 + 10 * i)).collect();
    let t = Duration::from_secs(30);
    for (i, p) in sent.iter().enumerate() {
        let p = p.clone();
        match i % 4 {
            0 => stub.notify(p).unwrap(),
            1 => stub.notify_with_timeout(p, t).unwrap(),
            2 => futures::executor::block_on(stub.notify_async(p)).unwrap(),
            _ => futures::executor::block_on(stub.notify_async_with_timeout(p, t)).unwrap(),
        }
    }
    let got = within(60, {
        let servant = servant.clone();
        move || loop {
            let seen = servant.notified.lock().unwrap();
            if seen.len() >= before + sent.len() {
                break seen[before..].to_vec();
            }
            drop(seen);
            std::thread::sleep(Duration::from_millis(5));
        }
    });
    // Two server threads may run them in either order.
    let mut got = got;
    got.sort_by_key(|p| p.call);
    let want: Vec<Payload> = (0..8).map(|i| msg(7, 9 + 10 * i)).collect();
    assert_eq!(got, want);
    client.shutdown();
    server.shutdown();
}
