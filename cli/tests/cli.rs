//! The `orb` binary, run as a process: `ior` on our own IORs, corbaloc URLs and garbage;
//! `ping` against an in-process server, a key nobody activated and a closed port; `ns`
//! against a real omniNames (skipped when omniORB is not installed, unless
//! `ORB_INTEROP_REQUIRED=1`); `--help` of every subcommand.
//!
//! No assertion depends on timing: round-trip times are printed, never compared.

use bytes::Bytes;
use orb_interop::{tool, OmniNames};
use protorb::{Context, Exception, ObjectRef, Orb, Servant, SystemException};
use std::io::Write as _;
use std::net::TcpListener;
use std::process::{Command, Stdio};

/// The result of one `orb` run.
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

fn orb(args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_orb"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run orb");
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Not a panic: Rust's panic message, or the exit code 101 it brings.
fn assert_no_panic(r: &Run) {
    assert!(!r.stderr.contains("panicked"), "{r:?}");
    assert_ne!(r.code, Some(101), "{r:?}");
}

/// A servant with no operations of its own: the ORB answers `_non_existent` for it.
struct Nothing;

impl Servant for Nothing {
    fn repository_id(&self) -> &'static str {
        "IDL:test/Nothing:1.0"
    }
    fn dispatch(&self, op: &str, _body: Bytes, _ctx: &Context) -> Result<Bytes, Exception> {
        Err(SystemException::bad_operation(op).into())
    }
}

/// A server ORB on a free loopback port with `Nothing` under `obj key`.
fn server() -> (Orb, ObjectRef) {
    let orb = Orb::builder().threads(1).build().expect("server orb");
    let r = orb.activate(&b"obj key\x01"[..], Nothing);
    (orb, r)
}

#[test]
fn ior_of_our_own_reference() {
    let (server, r) = server();
    let ior = server.object_to_string(&r);
    let p = r.primary().expect("an IIOP profile");
    let out = orb(&["ior", &ior]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.contains("IDL:test/Nothing:1.0"), "{out:?}");
    assert!(
        out.stdout
            .contains(&format!("IIOP 1.2 {} {}", p.host, p.port)),
        "{out:?}"
    );
    // The key as escaped text and as hex.
    assert!(out.stdout.contains("\"obj key%01\""), "{out:?}");
    assert!(out.stdout.contains("6f626a206b657901"), "{out:?}");

    let json = orb(&["ior", "--json", &ior]);
    assert_eq!(json.code, Some(0), "{json:?}");
    assert!(
        json.stdout.contains(&format!("\"host\":\"{}\"", p.host)),
        "{json:?}"
    );
    assert!(
        json.stdout.contains(&format!("\"port\":{}", p.port)),
        "{json:?}"
    );
    assert!(
        json.stdout
            .contains("\"object_key_hex\":\"6f626a206b657901\""),
        "{json:?}"
    );
    server.shutdown();
}

#[test]
fn ior_of_a_corbaloc_url_and_from_stdin() {
    let out = orb(&["ior", "corbaloc:iiop:1.2@example.org:2810/Name%00Service"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.contains("IIOP 1.2 example.org 2810"), "{out:?}");
    assert!(out.stdout.contains("\"Name%00Service\""), "{out:?}");
    assert!(out.stdout.contains("4e616d650053657276696365"), "{out:?}");

    // `-` reads the reference from standard input (an IOR file ends in a newline).
    let (server, r) = server();
    let mut child = Command::new(env!("CARGO_BIN_EXE_orb"))
        .args(["ior", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run orb");
    let mut stdin = child.stdin.take().expect("stdin");
    writeln!(stdin, "{}", r.to_ior_string()).expect("write the IOR");
    drop(stdin);
    let out = child.wait_with_output().expect("orb ior -");
    assert!(out.status.success(), "{out:?}");
    let port = r.primary().expect("profile").port;
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&format!(" {port}\n")),
        "{out:?}"
    );
    server.shutdown();
}

#[test]
fn ior_of_garbage_fails_cleanly() {
    for bad in [
        "garbage",
        "IOR:zz",
        "IOR:0",
        "IOR:0000",
        "IOR:00000000ffffffff",
        "corbaloc:iiop:1.2@/key",
        "corbaloc:iiop:1.2@host:99999/key",
        "",
    ] {
        let out = orb(&["ior", bad]);
        assert_eq!(out.code, Some(1), "`{bad}`: {out:?}");
        assert!(
            out.stderr.contains("cannot decode the reference"),
            "`{bad}`: {out:?}"
        );
        assert_no_panic(&out);
    }
}

#[test]
fn ping_an_activated_object() {
    let (server, r) = server();
    let ior = server.object_to_string(&r);
    let out = orb(&["ping", "--count", "3", "--timeout", "10000", &ior]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(
        out.stdout.matches("non_existent=false").count(),
        3,
        "{out:?}"
    );
    assert!(out.stdout.contains("min "), "{out:?}");
    assert!(out.stdout.contains("median "), "{out:?}");
    assert!(out.stdout.contains("the object exists"), "{out:?}");
    server.shutdown();
}

#[test]
fn ping_a_key_nobody_activated() {
    let (server, r) = server();
    let p = r.primary().expect("profile");
    let url = format!("corbaloc:iiop:1.2@{}:{}/no-such-key", p.host, p.port);
    let out = orb(&["ping", "-c", "2", "-t", "10000", &url]);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stdout.contains("does not exist"), "{out:?}");
    assert!(
        out.stdout.contains("OBJECT_NOT_EXIST") || out.stdout.contains("non_existent=true"),
        "{out:?}"
    );
    assert_no_panic(&out);
    server.shutdown();
}

#[test]
fn ping_a_closed_port() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let url = format!("corbaloc:iiop:1.2@127.0.0.1:{port}/x");
    let out = orb(&["ping", "-c", "1", "-t", "5000", &url]);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("CORBA::TRANSIENT"), "{out:?}");
    assert!(out.stderr.contains("completed NO"), "{out:?}");
    assert_no_panic(&out);
}

#[test]
fn help_of_every_subcommand() {
    for args in [
        &["--help"][..],
        &["ior", "--help"],
        &["ping", "--help"],
        &["call", "--help"],
        &["idl", "--help"],
        &["ns", "--help"],
        &["ns", "ls", "--help"],
        &["ns", "resolve", "--help"],
        &["ns", "bind", "--help"],
        &["ns", "unbind", "--help"],
        &["help", "ping"],
    ] {
        let out = orb(args);
        assert_eq!(out.code, Some(0), "{args:?}: {out:?}");
        assert!(out.stdout.contains("Usage: orb"), "{args:?}: {out:?}");
    }
    // A missing argument: clap's usage error (exit 2), not a panic.
    let out = orb(&["ping"]);
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(out.stderr.contains("Usage: orb ping"), "{out:?}");
}

#[test]
fn ns_bind_resolve_ls_unbind_against_omninames() {
    let Some(path) = tool("ns_bind_resolve_ls_unbind_against_omninames", "omniNames") else {
        return;
    };
    let names = OmniNames::start(&path);
    let ns = format!("127.0.0.1:{}", names.port);
    let (server, r) = server();
    let ior = server.object_to_string(&r);
    let p = r.primary().expect("profile");

    let bind = orb(&["ns", "--ns", &ns, "bind", "dev/echo.svc", &ior]);
    // `dev` is not a context yet: NotFound.
    assert_eq!(bind.code, Some(1), "{bind:?}");
    assert!(bind.stderr.contains("not found"), "{bind:?}");

    let bind = orb(&["ns", "--ns", &ns, "bind", "echo.svc", &ior]);
    assert_eq!(bind.code, Some(0), "{bind:?}");
    let again = orb(&["ns", "--ns", &ns, "bind", "echo.svc", &ior]);
    assert_eq!(again.code, Some(1), "{again:?}");
    assert!(again.stderr.contains("already bound"), "{again:?}");

    // resolve gives back the same reference.
    let resolved = orb(&["ns", "--ns", &ns, "resolve", "echo.svc"]);
    assert_eq!(resolved.code, Some(0), "{resolved:?}");
    let back = ObjectRef::parse(resolved.stdout.trim()).expect("an IOR");
    assert_eq!(back, r);
    let shown = orb(&["ior", resolved.stdout.trim()]);
    assert!(
        shown
            .stdout
            .contains(&format!("IIOP 1.2 {} {}", p.host, p.port)),
        "{shown:?}"
    );
    // ...and it works: ping it through the name.
    let ping = orb(&["ping", "-c", "1", "-t", "10000", resolved.stdout.trim()]);
    assert_eq!(ping.code, Some(0), "{ping:?}");

    // ls shows it (the --ns option may also come after the subcommand).
    let ls = orb(&["ns", "ls", "--ns", &ns]);
    assert_eq!(ls.code, Some(0), "{ls:?}");
    assert!(ls.stdout.lines().any(|l| l == "echo.svc"), "{ls:?}");

    let unbind = orb(&["ns", "--ns", &ns, "unbind", "echo.svc"]);
    assert_eq!(unbind.code, Some(0), "{unbind:?}");
    let gone = orb(&["ns", "--ns", &ns, "resolve", "echo.svc"]);
    assert_eq!(gone.code, Some(1), "{gone:?}");
    assert!(gone.stderr.contains("not found"), "{gone:?}");
    assert!(gone.stderr.contains("MissingNode"), "{gone:?}");
    let ls = orb(&["ns", "--ns", &ns, "ls"]);
    assert_eq!(ls.code, Some(0), "{ls:?}");
    assert!(!ls.stdout.contains("echo.svc"), "{ls:?}");

    // A context (made through protorb-naming): `ls` marks it with a slash, `ls NAME` lists it.
    let client = Orb::builder().no_listen().threads(0).build().expect("orb");
    let root = protorb_naming::NamingContext::at(&client, "127.0.0.1", names.port);
    root.bind_new_context(&protorb_naming::Name::simple("dev", ""))
        .expect("bind_new_context");
    let bind = orb(&["ns", "--ns", &ns, "bind", "dev/echo.svc", &ior]);
    assert_eq!(bind.code, Some(0), "{bind:?}");
    let ls = orb(&["ns", "--ns", &ns, "ls"]);
    assert!(ls.stdout.lines().any(|l| l == "dev/"), "{ls:?}");
    let ls = orb(&["ns", "--ns", &ns, "ls", "dev"]);
    assert_eq!(ls.code, Some(0), "{ls:?}");
    assert_eq!(ls.stdout, "echo.svc\n", "{ls:?}");
    let ls = orb(&["ns", "--ns", &ns, "ls", "dev/echo.svc"]);
    assert_eq!(ls.code, Some(1), "{ls:?}");
    client.shutdown();

    // A bad name and a bad address: clear messages.
    let bad = orb(&["ns", "--ns", &ns, "resolve", "a/"]);
    assert_eq!(bad.code, Some(1), "{bad:?}");
    assert!(bad.stderr.contains("bad name"), "{bad:?}");
    let bad = orb(&["ns", "--ns", "nohostport", "ls"]);
    assert_eq!(bad.code, Some(1), "{bad:?}");
    assert!(bad.stderr.contains("HOST:PORT"), "{bad:?}");
    server.shutdown();
}
