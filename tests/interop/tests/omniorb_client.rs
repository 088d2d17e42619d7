//! An omniORB C++ client calls our server: by IOR, by `corbaloc:iiop:1.2@`, by
//! `corbaloc:iiop:1.1@` and by plain `corbaloc::` (GIOP 1.0); payloads up to 8 MiB (omniORB fragments them); the user exception
//! `interop::Oops`; system exceptions with their completion status; LocateRequest, `_is_a` and
//! `_non_existent`.
//!
//! Every connection goes through a [`Tap`] so the tests can check what actually crossed the
//! wire (GIOP version, fragments, LocateRequests).

use orb_interop::{
    fnv1a, payload, peers, run_client, Dir, EchoServant, Outcome, Peers, Tap, ECHO_ID, OOPS_ID,
    SIZES,
};
use protorb::{minor, ObjectRef, Orb};

const KEY: &str = "echo";

/// Our ORB serving an `EchoServant` under [`KEY`], and a tap in front of it.
fn serve() -> (Orb, Tap) {
    let orb = Orb::builder().threads(4).build().expect("orb");
    orb.activate(KEY, EchoServant);
    let tap = Tap::start(orb.listen_addrs()[0]);
    (orb, tap)
}

fn echo_commands() -> Vec<String> {
    SIZES.iter().map(|n| format!("echo:{n}")).collect()
}

fn check_echoes(run: &orb_interop::ClientRun) {
    for n in SIZES {
        assert_eq!(
            run.get(&format!("echo:{n}")),
            &Outcome::Ok(format!("len={n} match")),
            "{n}-byte echo"
        );
    }
}

fn oops(n: usize) -> Outcome {
    Outcome::User {
        id: OOPS_ID.into(),
        detail: format!("len={n} fnv={:08x}", fnv1a(&payload(n))),
    }
}

/// The scripted session every reference form goes through.
fn full_session(peers: &Peers, reference: &str) -> orb_interop::ClientRun {
    let mut cmds: Vec<String> = vec![
        "narrow".into(),
        "nonexist".into(),
        format!("is_a:{ECHO_ID}"),
        "is_a:IDL:omg.org/CORBA/Object:1.0".into(),
        "is_a:IDL:other/Thing:1.0".into(),
    ];
    cmds.extend(echo_commands());
    cmds.extend([
        "fail:0".to_string(),
        "fail:100".into(),
        "fail:1048576".into(),
        "sysex:NO_PERMISSION,7,NO".into(),
        "sysex:TRANSIENT,3,MAYBE".into(),
        "sysex:IMP_LIMIT,1,YES".into(),
        "two".into(),
        "nosuch".into(),
        "echo:3".into(),
    ]);
    let cmds: Vec<&str> = cmds.iter().map(String::as_str).collect();
    let run = run_client(peers, &[], reference, &cmds);
    assert_eq!(run.get("narrow"), &Outcome::Ok("narrowed".into()));
    assert_eq!(run.get("nonexist"), &Outcome::Ok("false".into()));
    assert_eq!(
        run.get(&format!("is_a:{ECHO_ID}")),
        &Outcome::Ok("true".into())
    );
    assert_eq!(
        run.get("is_a:IDL:omg.org/CORBA/Object:1.0"),
        &Outcome::Ok("true".into())
    );
    assert_eq!(
        run.get("is_a:IDL:other/Thing:1.0"),
        &Outcome::Ok("false".into())
    );
    check_echoes(&run);
    assert_eq!(run.get("fail:0"), &oops(0));
    assert_eq!(run.get("fail:100"), &oops(100));
    assert_eq!(run.get("fail:1048576"), &oops(1 << 20));
    assert_eq!(
        run.get("sysex:NO_PERMISSION,7,NO"),
        &Outcome::system("NO_PERMISSION", 7, "NO")
    );
    assert_eq!(
        run.get("sysex:TRANSIENT,3,MAYBE"),
        &Outcome::system("TRANSIENT", 3, "MAYBE")
    );
    assert_eq!(
        run.get("sysex:IMP_LIMIT,1,YES"),
        &Outcome::system("IMP_LIMIT", 1, "YES")
    );
    // Two octet sequences where the runtime expects one: trailing bytes, MARSHAL, not run.
    assert_eq!(
        run.get("two"),
        &Outcome::system("MARSHAL", minor::BAD_PARAMETERS, "NO")
    );
    assert_eq!(
        run.get("nosuch"),
        &Outcome::system("BAD_OPERATION", minor::UNKNOWN_OPERATION, "NO")
    );
    // The connection survived all of that.
    assert_eq!(run.get("echo:3"), &Outcome::Ok("len=3 match".into()));
    run
}

#[test]
fn omniorb_client_calls_us_through_our_ior() {
    let Some(peers) = peers("omniorb_client_calls_us_through_our_ior") else {
        return;
    };
    let (orb, tap) = serve();
    // Our IOR, pointing at the tap.
    let r = ObjectRef::new(ECHO_ID, "127.0.0.1", tap.port, KEY);
    full_session(&peers, &r.to_ior_string());
    let seen = tap.seen();
    // omniORB knows the type from the IOR: a LocateRequest (1.2) before the first call,
    // answered OBJECT_HERE by a LocateReply.
    assert!(
        seen.iter()
            .any(|s| s.dir == Dir::ToServer && s.msg_type == 3 && s.minor == 2),
        "no LocateRequest: {seen:?}"
    );
    assert!(
        seen.iter()
            .any(|s| s.dir == Dir::ToClient && s.msg_type == 4),
        "no LocateReply: {seen:?}"
    );
    // The 8 MiB argument came in fragments that we reassembled.
    assert!(
        seen.iter()
            .any(|s| s.dir == Dir::ToServer && s.msg_type == 7),
        "omniORB sent no Fragment: {seen:?}"
    );
    assert!(seen.iter().all(|s| s.minor == 2), "{seen:?}");
    orb.shutdown();
}

#[test]
fn omniorb_client_calls_us_through_corbaloc_iiop_1_2() {
    let Some(peers) = peers("omniorb_client_calls_us_through_corbaloc_iiop_1_2") else {
        return;
    };
    let (orb, tap) = serve();
    let url = format!("corbaloc:iiop:1.2@127.0.0.1:{}/{KEY}", tap.port);
    full_session(&peers, &url);
    let seen = tap.seen();
    // A corbaloc reference has no type: omniORB checks it with a remote `_is_a` (a Request),
    // so it has no reason to send a LocateRequest.
    assert!(seen.iter().all(|s| s.minor == 2), "{seen:?}");
    assert!(
        seen.iter()
            .any(|s| s.dir == Dir::ToServer && s.msg_type == 7),
        "omniORB sent no Fragment: {seen:?}"
    );
    orb.shutdown();
}

#[test]
fn omniorb_client_calls_us_through_plain_corbaloc_with_giop_1_0() {
    let Some(peers) = peers("omniorb_client_calls_us_through_plain_corbaloc_with_giop_1_0") else {
        return;
    };
    let (orb, tap) = serve();
    let url = format!("corbaloc::127.0.0.1:{}/{KEY}", tap.port);
    full_session(&peers, &url);
    let seen = tap.seen();
    // Everything, both ways, was GIOP 1.0: we answered in the request's version, and 1.0 has
    // no fragments.
    assert!(!seen.is_empty());
    assert!(
        seen.iter().all(|s| s.minor == 0 && s.msg_type != 7),
        "{seen:?}"
    );
    assert!(
        seen.iter()
            .any(|s| s.dir == Dir::ToClient && s.msg_type == 1 && s.size > 8 << 20),
        "no 8 MiB 1.0 reply: {seen:?}"
    );
    orb.shutdown();
}

#[test]
fn omniorb_client_gets_object_not_exist_for_an_unknown_key() {
    let Some(peers) = peers("omniorb_client_gets_object_not_exist_for_an_unknown_key") else {
        return;
    };
    let (orb, tap) = serve();
    let ior = ObjectRef::new(ECHO_ID, "127.0.0.1", tap.port, "nokey").to_ior_string();
    // Default omniORB: LocateRequest first; we answer UNKNOWN_OBJECT, omniORB raises
    // OBJECT_NOT_EXIST without sending the call. `_non_existent` maps it to TRUE.
    let run = run_client(&peers, &[], &ior, &["echo:1", "nonexist"]);
    assert!(
        matches!(run.get("echo:1"), Outcome::System { name, completed, .. }
            if name == "OBJECT_NOT_EXIST" && completed == "NO"),
        "{run:#?}"
    );
    assert_eq!(run.get("nonexist"), &Outcome::Ok("true".into()));
    let seen = tap.seen();
    assert!(
        seen.iter()
            .any(|s| s.dir == Dir::ToClient && s.msg_type == 4),
        "{seen:?}"
    );
    tap.clear();
    // Without the existence check the Request reaches us and our Reply carries the exception.
    let run = run_client(
        &peers,
        &["-ORBverifyObjectExistsAndType", "0"],
        &ior,
        &["echo:1", "fail:1", "nonexist"],
    );
    let one = Outcome::system("OBJECT_NOT_EXIST", minor::OBJECT_NOT_EXIST_NO_SERVANT, "NO");
    assert_eq!(run.get("echo:1"), &one);
    assert_eq!(run.get("fail:1"), &one);
    assert_eq!(run.get("nonexist"), &Outcome::Ok("true".into()));
    assert!(
        tap.seen().iter().all(|s| s.msg_type != 3),
        "a LocateRequest despite verifyObjectExistsAndType 0"
    );
    // The same through corbaloc (GIOP 1.0 and 1.2): `_is_a` on narrow gets OBJECT_NOT_EXIST.
    for url in [
        format!("corbaloc::127.0.0.1:{}/nokey", tap.port),
        format!("corbaloc:iiop:1.2@127.0.0.1:{}/nokey", tap.port),
    ] {
        let run = run_client(&peers, &[], &url, &["narrow", "nonexist"]);
        assert_eq!(run.get("narrow"), &one, "{url}");
        assert_eq!(run.get("nonexist"), &Outcome::Ok("true".into()), "{url}");
    }
    orb.shutdown();
}

#[test]
fn omniorb_client_sees_a_deactivated_object_disappear() {
    let Some(peers) = peers("omniorb_client_sees_a_deactivated_object_disappear") else {
        return;
    };
    let (orb, tap) = serve();
    orb.activate("short-lived", EchoServant);
    let ior = ObjectRef::new(ECHO_ID, "127.0.0.1", tap.port, "short-lived").to_ior_string();
    let run = run_client(&peers, &[], &ior, &["echo:10", "nonexist"]);
    assert_eq!(run.get("echo:10"), &Outcome::Ok("len=10 match".into()));
    assert_eq!(run.get("nonexist"), &Outcome::Ok("false".into()));
    assert!(orb.deactivate(b"short-lived"));
    let run = run_client(&peers, &[], &ior, &["nonexist", "echo:10"]);
    assert_eq!(run.get("nonexist"), &Outcome::Ok("true".into()));
    assert!(
        matches!(run.get("echo:10"), Outcome::System { name, .. } if name == "OBJECT_NOT_EXIST"),
        "{run:#?}"
    );
    orb.shutdown();
}

#[test]
fn omniorb_client_calls_us_through_corbaloc_iiop_1_1() {
    let Some(peers) = peers("omniorb_client_calls_us_through_corbaloc_iiop_1_1") else {
        return;
    };
    let (orb, tap) = serve();
    let url = format!("corbaloc:iiop:1.1@127.0.0.1:{}/{KEY}", tap.port);
    full_session(&peers, &url);
    let seen = tap.seen();
    // Everything in 1.1, and omniORB's 1.1 Fragments (no request id; here an empty last
    // piece after a large first one) were reassembled.
    assert!(seen.iter().all(|s| s.minor == 1), "{seen:?}");
    assert!(
        seen.iter()
            .any(|s| s.dir == Dir::ToServer && s.msg_type == 7),
        "omniORB sent no 1.1 Fragment: {seen:?}"
    );
    orb.shutdown();
}
