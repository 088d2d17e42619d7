//! Our client calls an omniORB C++ server: by its IOR, by `corbaloc:iiop:1.2@` (and `1.1@`)
//! and by plain `corbaloc::` (GIOP 1.0); payloads up to 8 MiB (omniORB fragments its replies); the
//! `interop::Oops` user exception; system exceptions raised by the omniORB servant; `_is_a`,
//! `_non_existent`, and OBJECT_NOT_EXIST for an unknown key.

use bytes::Bytes;
use orb_interop::{payload, peers, start_server, Dir, Tap, ECHO_ID, OOPS_ID, SIZES};
use protorb::{CompletionStatus, Exception, ObjectProxy, ObjectRef, Orb, SystemExceptionKind};
use std::net::SocketAddr;
use std::time::Duration;

const TIMEOUT: Option<Duration> = Some(Duration::from_secs(30));

fn client() -> Orb {
    Orb::builder().no_listen().threads(1).build().expect("orb")
}

/// Runs the scripted session against `target`.
fn session(orb: &Orb, target: ObjectRef, check_is_a: bool) {
    let p = ObjectProxy::new(orb, target);
    if check_is_a {
        assert!(p.is_a(ECHO_ID).expect("_is_a"));
        assert!(p.is_a("IDL:omg.org/CORBA/Object:1.0").expect("_is_a"));
        assert!(!p.is_a("IDL:other/Thing:1.0").expect("_is_a"));
    }
    assert!(!p.non_existent().expect("_non_existent"));
    for &n in SIZES {
        let sent = payload(n);
        let got = p
            .invoke("call", sent.clone(), TIMEOUT)
            .unwrap_or_else(|e| panic!("{n}-byte call: {e}"));
        assert_eq!(got.len(), n);
        assert!(got == sent, "{n}-byte echo differs");
    }
    for n in [0, 7, 1 << 20] {
        match p.invoke("fail", payload(n), TIMEOUT) {
            Err(Exception::User(u)) => {
                assert_eq!(u.repository_id, OOPS_ID);
                assert!(u.payload == payload(n), "{n}-byte Oops data differs");
            }
            other => panic!("fail({n}) gave {other:?}"),
        }
    }
    for (text, kind, minor, completed) in [
        (
            "NO_PERMISSION,7,YES",
            SystemExceptionKind::NO_PERMISSION,
            7,
            CompletionStatus::Yes,
        ),
        (
            "TRANSIENT,2,NO",
            SystemExceptionKind::TRANSIENT,
            2,
            CompletionStatus::No,
        ),
        (
            "BAD_PARAM,1330446337,MAYBE",
            SystemExceptionKind::BAD_PARAM,
            0x4F4D_0001,
            CompletionStatus::Maybe,
        ),
    ] {
        match p.invoke("sysex", Bytes::from(text), TIMEOUT) {
            Err(Exception::System(e)) => {
                assert_eq!(
                    (e.kind, e.minor, e.completed),
                    (kind, minor, completed),
                    "{text}"
                );
            }
            other => panic!("sysex({text}) gave {other:?}"),
        }
    }
    // An operation the omniORB servant does not have: BAD_OPERATION, COMPLETED_NO.
    match p.invoke("nothing_like_this", Bytes::new(), TIMEOUT) {
        Err(Exception::System(e)) => {
            assert_eq!(e.kind, SystemExceptionKind::BAD_OPERATION);
            assert_eq!(e.completed, CompletionStatus::No);
        }
        other => panic!("unknown operation gave {other:?}"),
    }
    // Still usable afterwards.
    assert_eq!(
        p.invoke("call", payload(5), TIMEOUT).expect("call"),
        payload(5)
    );
}

fn port_of(r: &ObjectRef) -> u16 {
    r.primary().expect("IIOP profile").port
}

#[test]
fn we_call_omniorb_through_its_ior() {
    let Some(peers) = peers("we_call_omniorb_through_its_ior") else {
        return;
    };
    let server = start_server(&peers, &[]);
    let r = ObjectRef::parse(&server.ior).expect("omniORB IOR parses");
    assert_eq!(r.type_id(), ECHO_ID);
    let orb = client();
    session(&orb, r, true);
    orb.shutdown();
}

#[test]
fn we_call_omniorb_through_a_tap_and_reassemble_its_fragments() {
    let Some(peers) = peers("we_call_omniorb_through_a_tap_and_reassemble_its_fragments") else {
        return;
    };
    let server = start_server(&peers, &[]);
    let r = ObjectRef::parse(&server.ior).expect("omniORB IOR parses");
    let tap = Tap::start(SocketAddr::from(([127, 0, 0, 1], port_of(&r))));
    let via_tap = ObjectRef::new(ECHO_ID, "127.0.0.1", tap.port, "Echo");
    let orb = client();
    session(&orb, via_tap, false);
    let seen = tap.seen();
    assert!(
        seen.iter()
            .any(|s| s.dir == Dir::ToClient && s.msg_type == 7),
        "omniORB sent no Fragment: {seen:?}"
    );
    assert!(
        seen.iter()
            .any(|s| s.dir == Dir::ToClient && s.msg_type == 1 && s.flags & 2 != 0),
        "no fragmented Reply: {seen:?}"
    );
    assert!(seen.iter().all(|s| s.minor == 2), "{seen:?}");
    orb.shutdown();
}

#[test]
fn we_call_omniorb_through_corbaloc_iiop_1_2_and_1_1() {
    let Some(peers) = peers("we_call_omniorb_through_corbaloc_iiop_1_2_and_1_1") else {
        return;
    };
    let server = start_server(&peers, &[]);
    let port = port_of(&ObjectRef::parse(&server.ior).expect("IOR"));
    for minor in [2u8, 1] {
        let tap = Tap::start(SocketAddr::from(([127, 0, 0, 1], port)));
        let orb = client();
        let r = orb
            .string_to_object(&format!(
                "corbaloc:iiop:1.{minor}@127.0.0.1:{}/Echo",
                tap.port
            ))
            .expect("corbaloc parses");
        session(&orb, r, true);
        let seen = tap.seen();
        assert!(!seen.is_empty());
        assert!(seen.iter().all(|s| s.minor == minor), "{seen:?}");
        // omniORB fragments its 8 MiB reply in 1.1 as in 1.2.
        assert!(
            seen.iter()
                .any(|s| s.dir == Dir::ToClient && s.msg_type == 7),
            "1.{minor}: omniORB sent no Fragment: {seen:?}"
        );
        orb.shutdown();
    }
}

#[test]
fn we_call_omniorb_through_plain_corbaloc_with_giop_1_0() {
    let Some(peers) = peers("we_call_omniorb_through_plain_corbaloc_with_giop_1_0") else {
        return;
    };
    let server = start_server(&peers, &[]);
    let port = port_of(&ObjectRef::parse(&server.ior).expect("IOR"));
    let tap = Tap::start(SocketAddr::from(([127, 0, 0, 1], port)));
    let orb = client();
    let r = orb
        .string_to_object(&format!("corbaloc::127.0.0.1:{}/Echo", tap.port))
        .expect("corbaloc parses");
    session(&orb, r, true);
    let seen = tap.seen();
    assert!(!seen.is_empty());
    assert!(seen.iter().all(|s| s.minor == 0), "{seen:?}");
    orb.shutdown();
}

#[test]
fn we_get_object_not_exist_from_omniorb_for_an_unknown_key() {
    let Some(peers) = peers("we_get_object_not_exist_from_omniorb_for_an_unknown_key") else {
        return;
    };
    let server = start_server(&peers, &[]);
    let port = port_of(&ObjectRef::parse(&server.ior).expect("IOR"));
    let orb = client();
    for url in [
        format!("corbaloc:iiop:1.2@127.0.0.1:{port}/Nope"),
        format!("corbaloc::127.0.0.1:{port}/Nope"),
    ] {
        let p = ObjectProxy::new(&orb, orb.string_to_object(&url).expect("corbaloc"));
        match p.invoke("call", payload(1), TIMEOUT) {
            Err(Exception::System(e)) => {
                assert_eq!(e.kind, SystemExceptionKind::OBJECT_NOT_EXIST, "{url}");
                assert_eq!(e.completed, CompletionStatus::No, "{url}");
            }
            other => panic!("{url}: {other:?}"),
        }
        assert!(p.non_existent().expect("_non_existent"), "{url}");
    }
    orb.shutdown();
}

#[test]
fn omniorb_refuses_messages_over_its_limit() {
    let Some(peers) = peers("omniorb_refuses_messages_over_its_limit") else {
        return;
    };
    // The default giopMaxMsgSize (2 MiB) instead of the 16 MiB the other tests configure.
    let server = start_server(&peers, &["-ORBgiopMaxMsgSize", "2097152"]);
    let r = ObjectRef::parse(&server.ior).expect("IOR");
    let orb = client();
    let p = ObjectProxy::new(&orb, r);
    assert_eq!(
        p.invoke("call", payload(1000), TIMEOUT)
            .expect("call")
            .len(),
        1000
    );
    match p.invoke("call", payload(3 << 20), TIMEOUT) {
        Err(Exception::System(e)) => {
            // omniORB 4.2.5 answers an over-size request with MessageError and closes the
            // connection (we report COMM_FAILURE); a MARSHAL reply would be fine too.
            assert!(
                matches!(
                    e.kind,
                    SystemExceptionKind::MARSHAL | SystemExceptionKind::COMM_FAILURE
                ),
                "{e}"
            );
        }
        other => panic!("3 MiB call gave {:?}", other.map(|b| b.len())),
    }
    // A new connection works again.
    assert_eq!(
        p.invoke("call", payload(10), TIMEOUT).expect("call").len(),
        10
    );
    orb.shutdown();
}
