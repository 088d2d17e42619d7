//! `orb call` against an in-process server (a hand-written servant over bytes for
//! `tests/proto/calltest.proto`), and `orb idl` on the same .proto, compiled with omniidl when
//! omniORB is installed (skipped otherwise, unless `ORB_INTEROP_REQUIRED=1`).
//!
//! No assertion depends on timing; the one wait (for a oneway request to arrive) is bounded
//! only to fail instead of hanging.

use bytes::Bytes;
use orb_interop::{run, tool, TempDir};
use protorb::{Context, Exception, ObjectRef, Orb, Servant, SystemException, UserException};
use std::io::Write as _;
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::sync::Mutex;
use std::time::Duration;

const PROTO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/proto/calltest.proto");
const OOPS_ID: &str = "IDL:calltest/Oops:1.0";

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {:?}\n--- stdout\n{}--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// Runs `orb` with `stdin` as its standard input.
fn orb_with_stdin(args: &[&str], stdin: &str) -> Run {
    let mut child = Command::new(env!("CARGO_BIN_EXE_orb"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run orb");
    let mut input = child.stdin.take().expect("stdin");
    input.write_all(stdin.as_bytes()).expect("write stdin");
    drop(input);
    let out = child.wait_with_output().expect("orb");
    let r = Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    assert!(!r.stderr.contains("panicked"), "{r:?}");
    r
}

fn orb(args: &[&str]) -> Run {
    orb_with_stdin(args, "")
}

/// `calltest.Echo` over bytes: see the .proto's comment.
struct EchoBytes {
    notes: Mutex<mpsc::Sender<Bytes>>,
    /// `Hang` waits for a message here (at most a minute, so that nothing hangs forever).
    release: Mutex<mpsc::Receiver<()>>,
}

impl Servant for EchoBytes {
    fn repository_id(&self) -> &'static str {
        "IDL:calltest/Echo:1.0"
    }
    fn dispatch(&self, op: &str, body: Bytes, _ctx: &Context) -> Result<Bytes, Exception> {
        match op {
            "Echo" | "Ping" => Ok(body),
            "Fail" => Err(UserException::new(OOPS_ID, body).into()),
            "Surprise" => Err(UserException::new("IDL:calltest/Other:1.0", body).into()),
            "Hang" => {
                if let Ok(rx) = self.release.lock() {
                    let _ = rx.recv_timeout(Duration::from_secs(60));
                }
                Ok(body)
            }
            "Note" => {
                if let Ok(tx) = self.notes.lock() {
                    let _ = tx.send(body);
                }
                Ok(Bytes::new())
            }
            _ => Err(SystemException::bad_operation(op).into()),
        }
    }
}

/// A server ORB with `EchoBytes` activated; its IOR string; the oneway requests it receives.
fn server() -> (Orb, String, mpsc::Receiver<Bytes>) {
    let (orb, ior, notes, _) = server_with_release();
    (orb, ior, notes)
}

/// [`server`], and the sender that lets `Hang` answer.
fn server_with_release() -> (Orb, String, mpsc::Receiver<Bytes>, mpsc::Sender<()>) {
    let orb = Orb::builder().threads(2).build().expect("server orb");
    let (tx, rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel();
    let r: ObjectRef = orb.activate(
        &b"echo"[..],
        EchoBytes {
            notes: Mutex::new(tx),
            release: Mutex::new(release_rx),
        },
    );
    let ior = orb.object_to_string(&r);
    (orb, ior, rx, release_tx)
}

fn call(ior: &str, method: &str, json: &str) -> Run {
    orb(&[
        "call",
        ior,
        method,
        "--proto",
        PROTO,
        "--timeout",
        "20000",
        "--json",
        json,
    ])
}

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

#[test]
fn json_round_trip() {
    let (server, ior, _) = server();
    let out = call(
        &ior,
        "calltest.Echo.Echo",
        r#"{"text": "hello", "n": -7, "tags": ["a", "b"]}"#,
    );
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(
        json(&out.stdout),
        json(r#"{"text": "hello", "n": -7, "tags": ["a", "b"]}"#),
        "{out:?}"
    );

    // The service by its short name; a `/` separator; defaults left out unless asked for.
    let out = call(&ior, "Echo/Echo", r#"{"text": ""}"#);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(json(&out.stdout), json("{}"), "{out:?}");
    let out = orb(&[
        "call",
        &ior,
        "Echo.Echo",
        "--proto",
        PROTO,
        "--emit-defaults",
    ]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(
        json(&out.stdout),
        json(r#"{"text": "", "n": 0, "tags": []}"#),
        "{out:?}"
    );

    // google.protobuf.Empty both ways, with the default request `{}`.
    let out = orb(&["call", &ior, "Echo.Ping", "--proto", PROTO]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(json(&out.stdout), json("{}"), "{out:?}");
    server.shutdown();
}

#[test]
fn json_from_stdin_and_from_a_file() {
    let (server, ior, _) = server();
    let args = ["call", &ior, "Echo.Echo", "--proto", PROTO, "--json", "-"];
    let out = orb_with_stdin(&args, r#"{"text": "from stdin"}"#);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(json(&out.stdout), json(r#"{"text": "from stdin"}"#));

    let dir = TempDir::new("cli-call");
    let file = dir.path().join("req.json");
    std::fs::write(&file, r#"{"n": 42}"#).expect("write");
    let at = format!("@{}", file.display());
    let out = call(&ior, "Echo.Echo", &at);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(json(&out.stdout), json(r#"{"n": 42}"#));
    server.shutdown();
}

#[test]
fn user_exception_is_printed_as_json() {
    let (server, ior, _) = server();
    let out = call(&ior, "Echo.Fail", r#"{"text": "no funds"}"#);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert_eq!(
        json(&out.stdout),
        json(
            r#"{"exception": "calltest.Oops", "repository_id": "IDL:calltest/Oops:1.0",
                "data": {"text": "no funds"}}"#
        ),
        "{out:?}"
    );
    server.shutdown();
}

#[test]
fn undeclared_user_exception_is_printed_with_its_payload() {
    let (server, ior, _) = server();
    let out = call(&ior, "Echo.Surprise", r#"{"text": "x"}"#);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert_eq!(
        json(&out.stdout),
        json(
            r#"{"exception": null, "repository_id": "IDL:calltest/Other:1.0",
                "payload_hex": "0a0178"}"#
        ),
        "{out:?}"
    );
    server.shutdown();
}

#[test]
fn timeout_is_a_system_exception() {
    let (server, ior, _, release) = server_with_release();
    // `Hang` does not answer before the CLI gives up, whatever the machine's load: it waits
    // for `release`, sent only once the CLI has exited.
    let out = orb(&[
        "call",
        &ior,
        "Echo.Hang",
        "--proto",
        PROTO,
        "--timeout",
        // Long enough for connecting on a loaded machine (a connect timeout is TRANSIENT).
        "2000",
    ]);
    let _ = release.send(());
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("orb: TIMEOUT (minor 0x"), "{out:?}");
    server.shutdown();
}

#[test]
fn system_exceptions_are_printed_by_kind() {
    let (server, ior, _) = server();
    // Declared in the .proto, not implemented by the servant.
    let out = call(&ior, "Echo.Missing", "{}");
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
    assert!(
        out.stderr.contains("orb: BAD_OPERATION (minor 0x"),
        "{out:?}"
    );
    assert!(out.stderr.contains("completed NO"), "{out:?}");
    server.shutdown();

    // Nobody listening.
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let url = format!("corbaloc:iiop:1.2@127.0.0.1:{port}/echo");
    let out = call(&url, "Echo.Echo", "{}");
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("orb: TRANSIENT (minor 0x"), "{out:?}");
}

#[test]
fn oneway_prints_nothing_and_arrives() {
    let (server, ior, notes) = server();
    let out = call(&ior, "Echo.Note", r#"{"text": "n"}"#);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
    // The request arrives (bounded only so that a lost request fails the test).
    let got = notes
        .recv_timeout(Duration::from_secs(60))
        .expect("the oneway request");
    assert_eq!(&got[..], b"\x0a\x01n");
    server.shutdown();
}

#[test]
fn bad_arguments_exit_2_without_calling() {
    // Nothing listens at this reference: argument errors are reported before connecting.
    let url = "corbaloc:iiop:1.2@127.0.0.1:1/echo";
    for (method, body, expect) in [
        ("Echo.Echo", "{", "bad JSON"),
        ("Echo.Echo", r#"{"nope": 1}"#, "bad JSON"),
        ("Echo.Echo", r#"{"n": "x"}"#, "bad JSON"),
        ("Echo.Echo", "{} {}", "bad JSON"),
        ("Echo.Nope", "{}", "has no method `Nope`"),
        ("Nope.Echo", "{}", "no service `Nope`"),
        ("Echo", "{}", "not `Service.Method`"),
        ("Echo.Echo", "@/no/such/file.json", "cannot read"),
    ] {
        let out = call(url, method, body);
        assert_eq!(out.code, Some(2), "{method} {body}: {out:?}");
        assert!(out.stderr.contains(expect), "{method} {body}: {out:?}");
    }
    let out = call("IOR:zz", "Echo.Echo", "{}");
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(
        out.stderr.contains("cannot decode the reference"),
        "{out:?}"
    );
    let out = orb(&["call", url, "Echo.Echo", "--proto", "/no/such.proto"]);
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(out.stderr.contains("cannot compile the .proto"), "{out:?}");
    let out = call("-", "Echo.Echo", "-");
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(
        out.stderr.contains("both come from standard input"),
        "{out:?}"
    );
    // `--proto` is required: clap's usage error.
    let out = orb(&["call", url, "Echo.Echo"]);
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(out.stderr.contains("--proto"), "{out:?}");
}

#[test]
fn idl_has_our_repository_ids_and_compiles_with_omniidl() {
    let out = orb(&["idl", "--proto", PROTO]);
    assert_eq!(out.code, Some(0), "{out:?}");
    // `Echo` has an operation `Echo`: the interface is renamed, its repository id is not.
    for expected in [
        "module calltest {",
        "typedef sequence<octet> Octets;",
        "interface Echo_ {",
        "#pragma ID Echo_ \"IDL:calltest/Echo:1.0\"",
        "exception Oops { ::calltest::Octets data; };",
        "#pragma ID Oops \"IDL:calltest/Oops:1.0\"",
        "::calltest::Octets Echo(in ::calltest::Octets p);",
        "raises (::calltest::Oops);",
        "oneway void Note(in ::calltest::Octets p);",
    ] {
        assert!(
            out.stdout.contains(expected),
            "missing `{expected}`: {out:?}"
        );
    }
    let Some(omniidl) = tool("idl_compiles_with_omniidl", "omniidl") else {
        return;
    };
    let dir = TempDir::new("cli-idl");
    let file = dir.path().join("calltest.idl");
    std::fs::write(&file, &out.stdout).expect("write");
    let compiled = run(
        Command::new(omniidl)
            .arg("-bcxx")
            .arg("-C")
            .arg(dir.path())
            .arg(&file),
        Duration::from_secs(120),
    );
    assert!(compiled.success(), "omniidl: {compiled:?}\n{}", out.stdout);
    let skeleton = std::fs::read_to_string(dir.path().join("calltestSK.cc")).expect("skeleton");
    assert!(skeleton.contains("\"IDL:calltest/Echo:1.0\""));
}
