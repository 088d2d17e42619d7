//! Failures a caller must see as the right CORBA exception, quickly, with nothing hanging.

use orb_tests::activate_echo;
use orb_tests::orbtest::{EchoClient, EchoWithdrawError, Payload, SleepRequest, WithdrawRequest};
use protorb::SystemExceptionKind as K;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[test]
fn servant_panic_is_unknown_and_the_next_call_works() {
    let server = protorb::Orb::builder().threads(1).build().unwrap();
    let (_s, r) = activate_echo(&server);
    let client_orb = protorb::Orb::builder().threads(0).build().unwrap();
    let c = EchoClient::new(&client_orb, r);
    let err = c.panic(()).unwrap_err();
    assert_eq!(err.kind(), Some(K::UNKNOWN), "{err}");
    let reply = c
        .echo(Payload {
            thread: 1,
            call: 2,
            data: vec![3],
        })
        .unwrap();
    assert_eq!(reply.data, vec![3]);
    client_orb.shutdown();
    server.shutdown();
}

#[test]
fn user_exception_arrives_typed() {
    let server = protorb::Orb::builder().threads(1).build().unwrap();
    let (s, r) = activate_echo(&server);
    *s.balance.lock().unwrap() = 100;
    let client_orb = protorb::Orb::builder().threads(0).build().unwrap();
    let c = EchoClient::new(&client_orb, r);
    assert_eq!(
        c.withdraw(WithdrawRequest { amount: 30 }).unwrap().amount,
        70
    );
    match c.withdraw(WithdrawRequest { amount: 500 }) {
        Err(EchoWithdrawError::InsufficientFunds(e)) => {
            assert_eq!((e.available, e.requested), (70, 500));
        }
        other => panic!("expected InsufficientFunds, got {other:?}"),
    }
    client_orb.shutdown();
    server.shutdown();
}

#[test]
fn unknown_object_and_operation_and_bad_parameters() {
    let server = protorb::Orb::builder().threads(1).build().unwrap();
    let (_s, r) = activate_echo(&server);
    let client_orb = protorb::Orb::builder().threads(0).build().unwrap();
    let ghost = server.reference("IDL:orbtest/Echo:1.0", bytes::Bytes::from_static(b"ghost"));
    let err = EchoClient::new(&client_orb, ghost.clone())
        .echo(Payload::default())
        .unwrap_err();
    assert_eq!(err.kind(), Some(K::OBJECT_NOT_EXIST), "{err}");
    let proxy = protorb::ObjectProxy::new(&client_orb, r.clone());
    let err = proxy
        .invoke("NoSuchOp", bytes::Bytes::new(), None)
        .unwrap_err();
    assert_eq!(err.kind(), Some(K::BAD_OPERATION), "{err}");
    let err = proxy
        .invoke("Echo", bytes::Bytes::from_static(&[0xff, 0xff, 0xff]), None)
        .unwrap_err();
    assert_eq!(err.kind(), Some(K::MARSHAL), "{err}");
    assert!(proxy.is_a("IDL:orbtest/Echo:1.0").unwrap());
    assert!(!proxy.is_a("IDL:orbtest/Node:1.0").unwrap());
    assert!(!proxy.non_existent().unwrap());
    assert!(protorb::ObjectProxy::new(&client_orb, ghost)
        .non_existent()
        .unwrap());
    client_orb.shutdown();
    server.shutdown();
}

#[test]
fn connect_failure_is_transient() {
    // A port nobody listens on, held so while the test runs.
    let (_held, port) = orb_tests::refusing_port();
    let client_orb = protorb::Orb::builder().threads(0).build().unwrap();
    let r = protorb::ObjectRef::new("IDL:orbtest/Echo:1.0", "127.0.0.1", port, &b"echo"[..]);
    let err = EchoClient::new(&client_orb, r)
        .echo(Payload::default())
        .unwrap_err();
    assert_eq!(err.kind(), Some(K::TRANSIENT), "{err}");
    assert!(err.to_string().contains("connect"), "{err}");
    client_orb.shutdown();
}

#[test]
fn timeout_cancels_and_the_connection_keeps_working() {
    let server = protorb::Orb::builder().threads(2).build().unwrap();
    let (s, r) = activate_echo(&server);
    let client_orb = protorb::Orb::builder().threads(0).build().unwrap();
    let c = EchoClient::new(&client_orb, r);
    let started = Instant::now();
    let err = c
        .sleep_with_timeout(SleepRequest { millis: 2000 }, Duration::from_millis(100))
        .unwrap_err();
    let took = started.elapsed();
    assert_eq!(err.kind(), Some(K::TIMEOUT), "{err}");
    assert!(took < Duration::from_millis(300), "timeout took {took:?}");
    let reply = c
        .echo(Payload {
            thread: 9,
            call: 9,
            data: vec![1, 2],
        })
        .unwrap();
    assert_eq!(reply.data, vec![1, 2]);
    // The server saw the CancelRequest.
    let deadline = Instant::now() + Duration::from_secs(3);
    while s
        .cancellations_seen
        .load(std::sync::atomic::Ordering::SeqCst)
        == 0
    {
        assert!(
            Instant::now() < deadline,
            "server never saw the cancellation"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // Its late reply, if any, is dropped and counted, never delivered.
    assert_eq!(client_orb.stats().connections_opened, 1);
    client_orb.shutdown();
    server.shutdown();
}

/// A caller that leads waits in the poll without a timeout, its deadline covered by the
/// ORB's alarm (`OrbInner::poll_timeout`). After a call with a long timeout has armed the
/// alarm far ahead, a call with a short one must move it earlier: it times out at its own
/// deadline, not when the slow reply (30 s) or the long deadline (60 s) comes (the bound
/// leaves a loaded machine 15 s of slack). The client
/// listens, so its caller leads the general loop (no owned read of its reply).
#[test]
fn a_short_deadline_after_a_long_one_still_ends_the_wait() {
    let server = protorb::Orb::builder().threads(2).build().unwrap();
    let (_s, r) = activate_echo(&server);
    let client_orb = protorb::Orb::builder().threads(0).build().unwrap();
    let c = EchoClient::new(&client_orb, r);
    let payload = Payload {
        thread: 1,
        call: 1,
        data: vec![7],
    };
    let reply = c
        .echo_with_timeout(payload.clone(), Duration::from_secs(60))
        .unwrap();
    assert_eq!(reply.data, vec![7]);
    let started = Instant::now();
    let err = c
        .sleep_with_timeout(SleepRequest { millis: 30_000 }, Duration::from_millis(100))
        .unwrap_err();
    let took = started.elapsed();
    assert_eq!(err.kind(), Some(K::TIMEOUT), "{err}");
    assert!(
        took < Duration::from_secs(15),
        "a 100 ms call returned after {took:?}"
    );
    // And the long deadline's alarm, still armed, does not disturb the next calls.
    for i in 0..100 {
        let reply = c
            .echo_with_timeout(
                Payload {
                    call: i,
                    ..payload.clone()
                },
                Duration::from_secs(60),
            )
            .unwrap();
        assert_eq!((reply.call, reply.data.as_slice()), (i, &[7][..]));
    }
    client_orb.shutdown();
    server.shutdown();
}

/// Callers waiting as followers wait without a timed wait, their deadlines kept by the
/// ORB's alarm (`Lf::wake_timed`). On a client with no pool threads, a first caller with a
/// 10 s timeout leads (its request is at the server, which sleeps 30 s); six more callers,
/// with timeouts of 100 to 600 ms, wait as its followers. Each ends in TIMEOUT, not before
/// its own deadline and well before the leader's (which would wake them otherwise); the
/// leader at its own; then the connection still answers. The bounds leave a loaded machine
/// seconds of slack. The server has a thread per sleep and one more to read their
/// cancellations.
#[test]
fn waiting_callers_each_time_out_at_their_own_deadline() {
    let server = protorb::Orb::builder().threads(10).build().unwrap();
    let (_s, r) = activate_echo(&server);
    let client_orb = protorb::Orb::builder().threads(0).build().unwrap();
    let c = Arc::new(EchoClient::new(&client_orb, r));
    let call = |timeout: Duration| {
        let c = c.clone();
        std::thread::spawn(move || {
            let started = Instant::now();
            let r = c.sleep_with_timeout(SleepRequest { millis: 30_000 }, timeout);
            (timeout, r, started.elapsed())
        })
    };
    let leader = call(Duration::from_secs(10));
    let give_up = Instant::now() + Duration::from_secs(10);
    while server.stats().requests_received == 0 {
        assert!(Instant::now() < give_up, "the first request never arrived");
        std::thread::sleep(Duration::from_millis(5));
    }
    let followers: Vec<_> = (1..=6u64)
        .map(|i| call(Duration::from_millis(100 * i)))
        .collect();
    for t in followers.into_iter().chain([leader]) {
        let (timeout, r, took) = t.join().unwrap();
        let err = r.expect_err("a 30 s sleep answered within its timeout");
        assert_eq!(err.kind(), Some(K::TIMEOUT), "{err}");
        assert!(
            took >= timeout,
            "{timeout:?} call timed out early, after {took:?}"
        );
        let bound = if timeout < Duration::from_secs(1) {
            Duration::from_secs(7)
        } else {
            timeout + Duration::from_secs(15)
        };
        assert!(took < bound, "{timeout:?} call returned after {took:?}");
    }
    let reply = c
        .echo(Payload {
            thread: 1,
            call: 1,
            data: vec![3],
        })
        .unwrap();
    assert_eq!(reply.data, vec![3]);
    client_orb.shutdown();
    server.shutdown();
}

fn spawn_server(port: u16) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_orb-test-server"))
        .args(["--port", &port.to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let ior = line
        .trim()
        .strip_prefix("READY ")
        .expect("server ready")
        .to_string();
    (child, ior)
}

#[test]
fn server_killed_mid_call_fails_every_waiter_fast_then_recovers() {
    let (mut child, ior) = spawn_server(0);
    let client_orb = protorb::Orb::builder().threads(0).build().unwrap();
    let r = client_orb.string_to_object(&ior).unwrap();
    let port = r.primary().unwrap().port;
    let c = Arc::new(EchoClient::new(&client_orb, r.clone()));
    c.echo(Payload::default()).unwrap();
    let waiters: Vec<_> = (0..32)
        .map(|_| {
            let c = c.clone();
            std::thread::spawn(move || {
                let r = c.sleep(SleepRequest { millis: 20_000 });
                (r, Instant::now())
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let killed = Instant::now();
    child.kill().unwrap();
    child.wait().unwrap();
    for w in waiters {
        let (r, at) = w.join().unwrap();
        let err = r.unwrap_err();
        assert_eq!(err.kind(), Some(K::COMM_FAILURE), "{err}");
        assert!(
            at.duration_since(killed) < Duration::from_secs(1),
            "waiter woke late"
        );
    }
    let (mut child, _) = spawn_server(port);
    let reply = c
        .echo(Payload {
            thread: 1,
            call: 1,
            data: vec![7],
        })
        .unwrap();
    assert_eq!(reply.data, vec![7]);
    child.kill().unwrap();
    child.wait().unwrap();
    client_orb.shutdown();
}

/// Raises the system exception named by the operation, with or without a detail text.
struct Raiser;

impl protorb::Servant for Raiser {
    fn repository_id(&self) -> &'static str {
        "IDL:orbtest/Raiser:1.0"
    }
    fn dispatch(
        &self,
        operation: &str,
        _body: bytes::Bytes,
        _ctx: &protorb::Context,
    ) -> Result<bytes::Bytes, protorb::Exception> {
        Err(match operation {
            "detail" => protorb::SystemException::bad_param(7, "field text must not be empty"),
            "long" => protorb::SystemException::bad_param(8, "é".repeat(10_000)),
            "bare" => {
                protorb::SystemException::new(K::NO_PERMISSION, 3, protorb::CompletionStatus::No)
            }
            _ => return Err(protorb::SystemException::bad_operation(operation).into()),
        }
        .into())
    }
}

#[test]
fn a_system_exceptions_text_reaches_the_caller() {
    let server = protorb::Orb::builder().threads(1).build().unwrap();
    let raiser = server.activate("raiser", Raiser);
    let (_s, echo) = activate_echo(&server);
    let client_orb = protorb::Orb::builder().threads(0).build().unwrap();
    let proxy = protorb::ObjectProxy::new(&client_orb, raiser);
    let call = |op: &str| {
        let e = proxy.invoke(op, bytes::Bytes::new(), None).unwrap_err();
        e.as_system().cloned().unwrap_or_else(|| panic!("{e}"))
    };

    let e = call("detail");
    assert_eq!((e.kind, e.minor), (K::BAD_PARAM, 7), "{e}");
    assert_eq!(e.detail(), Some("field text must not be empty"));
    assert!(
        e.to_string().ends_with(": field text must not be empty"),
        "{e}"
    );

    // Bounded: at most ErrorText::MAX_LEN (512) bytes, cut at a character boundary.
    let e = call("long");
    assert_eq!(e.detail(), Some("é".repeat(256).as_str()), "{e}");

    // Without a detail the caller sees the kind's generic sentence, as before.
    let e = call("bare");
    assert_eq!((e.kind, e.minor), (K::NO_PERMISSION, 3));
    assert_eq!(e.detail(), None, "{e}");

    // The ORB's own exceptions carry their text too.
    let e = call("nosuch");
    assert_eq!(e.kind, K::BAD_OPERATION);
    assert!(e.detail().is_some_and(|d| d.contains("nosuch")), "{e}");

    // A panic's message stays in the server's log.
    let err = EchoClient::new(&client_orb, echo).panic(()).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("servant panicked"), "{text}");
    assert!(!text.contains("on purpose"), "{text}");
    client_orb.shutdown();
    server.shutdown();
}
