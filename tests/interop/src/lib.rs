//! Helpers for the omniORB interoperability tests: locating the C++ peers and the omniORB
//! tools, running them with timeouts, an `interop::Echo` servant for our ORB, and a GIOP tap
//! (a TCP proxy that records every GIOP message header it forwards, with the request id,
//! operation and service-context ids it can decode), and [`TestCerts`]: a CA, a server and a
//! client certificate written as PEM at test time, for the SSL/TLS tests.
//!
//! When omniORB is not available the tests skip with a notice on stderr, unless the
//! environment variable `ORB_INTEROP_REQUIRED=1` is set, in which case they fail.

use bytes::Bytes;
use protorb::{
    CompletionStatus, Context, Exception, Servant, SystemException, SystemExceptionKind,
    UserException,
};
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Repository id of `interop::Echo`.
pub const ECHO_ID: &str = "IDL:interop/Echo:1.0";
/// Repository id of `interop::Oops`.
pub const OOPS_ID: &str = "IDL:interop/Oops:1.0";
/// omniORB options every peer gets: messages up to 16 MiB, and a call timeout so that nothing
/// hangs forever.
pub const OMNI_OPTS: &[&str] = &[
    "-ORBgiopMaxMsgSize",
    "16777216",
    "-ORBclientCallTimeOutPeriod",
    "30000",
];
/// How long one peer process may run.
pub const PEER_TIMEOUT: Duration = Duration::from_secs(60);

/// The payload sizes the tests exchange: 0 B, 1 B, 64 KiB, 1 MiB, 8 MiB.
pub const SIZES: &[usize] = &[0, 1, 64 << 10, 1 << 20, 8 << 20];

/// Whether a missing omniORB must fail the tests (`ORB_INTEROP_REQUIRED=1`, set by CI).
pub fn required() -> bool {
    std::env::var("ORB_INTEROP_REQUIRED").is_ok_and(|v| v == "1")
}

/// Reports that `what` is missing: panics under `ORB_INTEROP_REQUIRED=1`, else prints a notice.
fn unavailable(test: &str, what: &str) {
    if required() {
        panic!("{test}: {what} (ORB_INTEROP_REQUIRED=1, so this is a failure)");
    }
    // Straight to the stderr handle, not `eprintln!`: the test harness captures the macros,
    // and a skip must be visible in a normal `cargo test` run.
    let _ = writeln!(std::io::stderr(), "NOTICE: skipping {test}: {what}");
}

/// The C++ peers built by `build.rs`.
#[derive(Clone, Debug)]
pub struct Peers {
    /// `interop_client`.
    pub client: PathBuf,
    /// `interop_server`.
    pub server: PathBuf,
}

/// The C++ peers, or `None` (after a notice) when they could not be built.
pub fn peers(test: &str) -> Option<Peers> {
    let why = env!("ORB_INTEROP_UNAVAILABLE");
    if !why.is_empty() {
        unavailable(test, why);
        return None;
    }
    let p = Peers {
        client: PathBuf::from(env!("ORB_INTEROP_CLIENT")),
        server: PathBuf::from(env!("ORB_INTEROP_SERVER")),
    };
    if !p.client.is_file() || !p.server.is_file() {
        unavailable(
            test,
            "omniORB not installed: the C++ peers are missing from OUT_DIR",
        );
        return None;
    }
    Some(p)
}

/// The path of an omniORB tool (`catior`, `genior`, `nameclt`, `omniNames`) found in `PATH`,
/// or `None` (after a notice).
pub fn tool(test: &str, name: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        unavailable(
            test,
            &format!("omniORB not installed: `{name}` is not in PATH (packages omniorb, omniorb-nameserver)"),
        );
    }
    found
}

/// The output of a finished process.
#[derive(Debug)]
pub struct Output {
    /// Exit status (`None` if killed at the timeout).
    pub status: Option<std::process::ExitStatus>,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Output {
    /// Whether the process exited with status 0.
    pub fn success(&self) -> bool {
        self.status.is_some_and(|s| s.success())
    }
}

/// Runs `cmd` to completion, killing it after `timeout`. Stdout and stderr are captured.
pub fn run(cmd: &mut Command, timeout: Duration) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
    let out = child.stdout.take().map(drain);
    let err = child.stderr.take().map(drain);
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let join = |h: Option<std::thread::JoinHandle<String>>| {
        h.and_then(|h| h.join().ok()).unwrap_or_default()
    };
    Output {
        status,
        stdout: join(out),
        stderr: join(err),
    }
}

fn drain(mut r: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = r.read_to_end(&mut v);
        String::from_utf8_lossy(&v).into_owned()
    })
}

/// Byte `i` of an `n`-byte test payload (the C++ peers use the same formula).
pub fn pattern_byte(i: usize, n: usize) -> u8 {
    (i.wrapping_mul(31).wrapping_add(n) & 0xff) as u8
}

/// The `n`-byte test payload.
pub fn payload(n: usize) -> Bytes {
    (0..n)
        .map(|i| pattern_byte(i, n))
        .collect::<Vec<u8>>()
        .into()
}

/// 32-bit FNV-1a (the C++ client prints it for user-exception data).
pub fn fnv1a(data: &[u8]) -> u32 {
    data.iter().fold(2_166_136_261u32, |h, &b| {
        (h ^ u32::from(b)).wrapping_mul(16_777_619)
    })
}

/// One line of the C++ client's output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// `OK <detail>`.
    Ok(String),
    /// `USER <repository id> <detail>`.
    User {
        /// Repository id.
        id: String,
        /// `len=<n> fnv=<hex>`.
        detail: String,
    },
    /// `SYSTEM <NAME> <minor> <completion>`.
    System {
        /// Exception name, e.g. `OBJECT_NOT_EXIST`.
        name: String,
        /// Minor code.
        minor: u32,
        /// `YES`, `NO` or `MAYBE`.
        completed: String,
    },
    /// `OTHER <text>`.
    Other(String),
}

impl Outcome {
    /// Shorthand for a system exception outcome.
    pub fn system(name: &str, minor: u32, completed: &str) -> Outcome {
        Outcome::System {
            name: name.into(),
            minor,
            completed: completed.into(),
        }
    }
}

/// What the C++ client printed, command by command.
#[derive(Debug)]
pub struct ClientRun {
    /// `(command, outcome)` in order.
    pub results: Vec<(String, Outcome)>,
    /// The raw output (for failure messages).
    pub output: Output,
}

impl ClientRun {
    /// The outcome of the `i`-th command.
    pub fn outcome(&self, i: usize) -> &Outcome {
        match self.results.get(i) {
            Some((_, o)) => o,
            None => panic!("command #{i} has no result; output: {:#?}", self.output),
        }
    }

    /// The outcome of the first command named `cmd`.
    pub fn get(&self, cmd: &str) -> &Outcome {
        match self.results.iter().find(|(c, _)| c == cmd) {
            Some((_, o)) => o,
            None => panic!("no result for `{cmd}`; output: {:#?}", self.output),
        }
    }
}

/// Runs the C++ client against `reference` with `commands` (and extra omniORB options).
/// Panics if it does not finish every command.
pub fn run_client(
    peers: &Peers,
    extra_opts: &[&str],
    reference: &str,
    commands: &[&str],
) -> ClientRun {
    let mut cmd = Command::new(&peers.client);
    cmd.args(OMNI_OPTS)
        .args(extra_opts)
        .arg(reference)
        .args(commands);
    let output = run(&mut cmd, PEER_TIMEOUT);
    let mut results = Vec::new();
    for line in output.stdout.lines() {
        let Some(rest) = line.strip_prefix("RESULT ") else {
            continue;
        };
        let mut it = rest.splitn(3, ' ');
        let (Some(c), Some(kind)) = (it.next(), it.next()) else {
            continue;
        };
        let tail = it.next().unwrap_or("").to_string();
        let outcome = match kind {
            "OK" => Outcome::Ok(tail),
            "USER" => {
                let (id, detail) = tail.split_once(' ').unwrap_or((tail.as_str(), ""));
                Outcome::User {
                    id: id.into(),
                    detail: detail.into(),
                }
            }
            "SYSTEM" => {
                let f: Vec<&str> = tail.split(' ').collect();
                Outcome::System {
                    name: f.first().copied().unwrap_or("").into(),
                    minor: f
                        .get(1)
                        .and_then(|m| u32::from_str_radix(m.trim_start_matches("0x"), 16).ok())
                        .unwrap_or(u32::MAX),
                    completed: f.get(2).copied().unwrap_or("").into(),
                }
            }
            _ => Outcome::Other(tail),
        };
        results.push((c.to_string(), outcome));
    }
    assert!(
        output.stdout.lines().any(|l| l == "DONE"),
        "the omniORB client did not finish: {output:#?}"
    );
    assert_eq!(
        results.len(),
        commands.len(),
        "one result per command expected: {output:#?}"
    );
    ClientRun { results, output }
}

/// A process killed (and reaped) when dropped.
#[derive(Debug)]
pub struct Process {
    child: Child,
    stdin: Option<ChildStdin>,
    /// What the process printed to stderr, collected in the background.
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl Process {
    /// Kills the process and returns what it wrote to stderr.
    pub fn stop(mut self) -> String {
        self.kill();
        self.stderr
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
    }

    fn kill(&mut self) {
        // Closing stdin asks the C++ server to shut down; the kill makes sure.
        drop(self.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The C++ server, running: its IOR, and the process (killed on drop).
#[derive(Debug)]
pub struct OmniServer {
    /// The IOR it printed.
    pub ior: String,
    /// The process.
    pub process: Process,
}

/// Starts the C++ server on a free loopback port and waits for its IOR.
pub fn start_server(peers: &Peers, extra_opts: &[&str]) -> OmniServer {
    start_server_at(peers, "giop:tcp:127.0.0.1:", extra_opts)
}

/// Starts the C++ server with omniORB's SSL transport only (endpoint `giop:ssl:127.0.0.1:`, a
/// free port) and mutual TLS with `certs` (`--ssl DIR`: identity `server.pem`, CA `ca.pem`,
/// client certificates required), and waits for its IOR. The IOR's IIOP profile has port 0
/// and the TLS port in a `TAG_SSL_SEC_TRANS` component.
///
/// The host is 127.0.0.1, not `giop:ssl::` (which would publish the machine's first non-loopback
/// address): the server certificate names `localhost` and 127.0.0.1, and our client checks it
/// against the host in the IOR.
pub fn start_ssl_server(peers: &Peers, certs: &TestCerts, extra_opts: &[&str]) -> OmniServer {
    let mut opts = certs.omni_opts();
    opts.extend(extra_opts.iter().map(|s| s.to_string()));
    let opts: Vec<&str> = opts.iter().map(String::as_str).collect();
    start_server_at(peers, "giop:ssl:127.0.0.1:", &opts)
}

/// Starts the C++ server with `-ORBendPoint endpoint` and waits for its IOR.
pub fn start_server_at(peers: &Peers, endpoint: &str, extra_opts: &[&str]) -> OmniServer {
    let mut child = Command::new(&peers.server)
        .args(OMNI_OPTS)
        .args(["-ORBendPoint", endpoint])
        .args(extra_opts)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start the omniORB server: {e}"));
    let stdin = child.stdin.take();
    let stderr = child.stderr.take().map(drain);
    let mut stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = Vec::new();
        let mut b = [0u8; 1];
        while let Ok(1) = stdout.read(&mut b) {
            if b[0] == b'\n' {
                break;
            }
            line.push(b[0]);
        }
        let _ = tx.send(String::from_utf8_lossy(&line).into_owned());
        // Keep draining so the server never blocks on a full pipe.
        let _ = std::io::copy(&mut stdout, &mut std::io::sink());
    });
    let mut process = Process {
        child,
        stdin,
        stderr,
    };
    match rx.recv_timeout(Duration::from_secs(20)) {
        Ok(ior) if ior.starts_with("IOR:") => OmniServer { ior, process },
        other => {
            process.kill();
            let err = process
                .stderr
                .take()
                .and_then(|h| h.join().ok())
                .unwrap_or_default();
            panic!("the omniORB server did not print its IOR ({other:?}); stderr: {err}")
        }
    }
}

/// A free TCP port on 127.0.0.1 (free when this returns; a race with other processes is
/// possible but unlikely).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("cannot bind an ephemeral port")
}

/// A fresh, empty temporary directory, removed on drop.
#[derive(Debug)]
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// Creates `$TMPDIR/orb-interop-<tag>-<pid>-<n>`.
    pub fn new(tag: &str) -> TempDir {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("orb-interop-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("cannot create a temporary directory");
        TempDir(p)
    }

    /// The path.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Certificates for the SSL/TLS tests, generated with `rcgen` into a fresh temporary directory
/// (removed on drop), all PEM:
///
/// | file | what |
/// |---|---|
/// | `ca.pem` | the CA (CN `interop-ca`) that signed the other two; both sides trust only it |
/// | `server-cert.pem`, `server-key.pem` | server certificate (CN `localhost`, SANs DNS `localhost` and IP 127.0.0.1, serverAuth) and its key |
/// | `client-cert.pem`, `client-key.pem` | client certificate (CN `interop-client`, SAN DNS `interop-client`, clientAuth) and its key |
/// | `server.pem`, `client.pem` | certificate then key in one file, the form omniORB's `sslContext::key_file` reads |
///
/// Keys are ECDSA P-256, unencrypted. The C++ peers take the directory as `--ssl DIR`.
#[derive(Debug)]
pub struct TestCerts {
    dir: TempDir,
}

/// The client certificate's common name.
pub const CLIENT_CN: &str = "interop-client";

impl TestCerts {
    /// Generates the CA and both certificates and writes them. Panics if generation or writing
    /// fails (a test setup failure).
    pub fn generate() -> TestCerts {
        use rcgen::{
            BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
            KeyPair, KeyUsagePurpose,
        };
        let dir = TempDir::new("certs");
        let write = |name: &str, text: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, text)
                .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
        };
        let fail = |what: &str, e: rcgen::Error| -> ! { panic!("rcgen: {what}: {e}") };

        let ca_key = KeyPair::generate().unwrap_or_else(|e| fail("CA key", e));
        let mut ca =
            CertificateParams::new(Vec::<String>::new()).unwrap_or_else(|e| fail("CA params", e));
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name.push(DnType::CommonName, "interop-ca");
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = ca.self_signed(&ca_key).unwrap_or_else(|e| fail("CA", e));
        write("ca.pem", &ca_cert.pem());
        let issuer = Issuer::new(ca, ca_key);

        // "127.0.0.1" becomes an IP address SAN, "localhost" a DNS name SAN.
        for (name, cn, sans, usage) in [
            (
                "server",
                "localhost",
                vec!["localhost".to_string(), "127.0.0.1".to_string()],
                ExtendedKeyUsagePurpose::ServerAuth,
            ),
            (
                "client",
                CLIENT_CN,
                vec![CLIENT_CN.to_string()],
                ExtendedKeyUsagePurpose::ClientAuth,
            ),
        ] {
            let key = KeyPair::generate().unwrap_or_else(|e| fail(name, e));
            let mut params = CertificateParams::new(sans).unwrap_or_else(|e| fail(name, e));
            params.distinguished_name.push(DnType::CommonName, cn);
            params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
            params.extended_key_usages = vec![usage];
            let cert = params
                .signed_by(&key, &issuer)
                .unwrap_or_else(|e| fail(name, e));
            let (cert, key) = (cert.pem(), key.serialize_pem());
            write(&format!("{name}-cert.pem"), &cert);
            write(&format!("{name}-key.pem"), &key);
            write(&format!("{name}.pem"), &format!("{cert}{key}"));
        }
        TestCerts { dir }
    }

    /// The directory holding the files (what the C++ peers take as `--ssl DIR`).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// `ca.pem`.
    pub fn ca(&self) -> PathBuf {
        self.dir().join("ca.pem")
    }

    /// `server-cert.pem`.
    pub fn server_cert(&self) -> PathBuf {
        self.dir().join("server-cert.pem")
    }

    /// `server-key.pem`.
    pub fn server_key(&self) -> PathBuf {
        self.dir().join("server-key.pem")
    }

    /// `client-cert.pem`.
    pub fn client_cert(&self) -> PathBuf {
        self.dir().join("client-cert.pem")
    }

    /// `client-key.pem`.
    pub fn client_key(&self) -> PathBuf {
        self.dir().join("client-key.pem")
    }

    /// The options that turn on mutual TLS in a C++ peer: `--ssl DIR`.
    pub fn omni_opts(&self) -> Vec<String> {
        vec!["--ssl".into(), self.dir().display().to_string()]
    }
}

/// A running `omniNames` on a free loopback port with its own log directory; killed (and the
/// directory removed) on drop.
#[derive(Debug)]
pub struct OmniNames {
    /// Its port.
    pub port: u16,
    /// The process (dropped before the directory).
    process: Option<Process>,
    _logdir: TempDir,
}

impl OmniNames {
    /// Starts `omniNames` (path from [`tool`]) and waits until it accepts connections.
    pub fn start(omni_names: &Path) -> OmniNames {
        let logdir = TempDir::new("names");
        for attempt in 0..3 {
            let port = free_port();
            let mut child = Command::new(omni_names)
                .arg("-start")
                .arg(port.to_string())
                .arg("-logdir")
                .arg(logdir.path())
                .arg("-ORBendPoint")
                .arg(format!("giop:tcp:127.0.0.1:{port}"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start omniNames: {e}"));
            let stderr = child.stderr.take().map(drain);
            let mut process = Process {
                child,
                stdin: None,
                stderr,
            };
            if naming_ready(&mut process, port, Duration::from_secs(10)) {
                return OmniNames {
                    port,
                    process: Some(process),
                    _logdir: logdir,
                };
            }
            process.kill();
            let err = process
                .stderr
                .take()
                .and_then(|h| h.join().ok())
                .unwrap_or_default();
            eprintln!("omniNames did not come up on port {port} (attempt {attempt}): {err}");
            for entry in std::fs::read_dir(logdir.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                let _ = std::fs::remove_file(entry.path());
            }
        }
        panic!("omniNames did not start");
    }

    /// `corbaloc::127.0.0.1:PORT/NameService` (GIOP 1.0, as omniORB tools use it).
    pub fn corbaloc(&self) -> String {
        format!("corbaloc::127.0.0.1:{}/NameService", self.port)
    }
}

/// Waits until the omniNames `process` on `port` answers `_non_existent` on its root context
/// with FALSE. Listening is not enough: omniNames accepts connections before it has activated
/// `NameService` (calls in that window get OBJECT_NOT_EXIST), and a port picked by
/// [`free_port`] may have been taken by someone else meanwhile (then omniNames exits).
fn naming_ready(process: &mut Process, port: u16, timeout: Duration) -> bool {
    let Ok(orb) = protorb::Orb::builder()
        .no_listen()
        .threads(0)
        .call_timeout(Duration::from_secs(2))
        .connect_timeout(Duration::from_millis(500))
        .build()
    else {
        return false;
    };
    let root = protorb::ObjectProxy::new(
        &orb,
        protorb::ObjectRef::new("", "127.0.0.1", port, "NameService"),
    );
    let deadline = Instant::now() + timeout;
    let mut ready = false;
    while Instant::now() < deadline {
        if !matches!(process.child.try_wait(), Ok(None)) {
            break; // omniNames exited (e.g. the port was taken).
        }
        if matches!(root.non_existent(), Ok(false)) {
            ready = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    orb.shutdown();
    ready
}

impl Drop for OmniNames {
    fn drop(&mut self) {
        drop(self.process.take());
    }
}

/// The `interop::Echo` servant for our ORB.
///
/// - `call`: returns its argument;
/// - `fail`: raises `interop::Oops` whose payload is the argument (the wire form, `string id;
///   sequence<octet> payload`, is the CDR of `Oops { Octets data; }`);
/// - `sysex`: raises the system exception described by the argument, `NAME,minor,COMPLETION`;
/// - anything else: BAD_OPERATION (`two`, of the hand-written `EchoTwo` in `idl/interop.idl`,
///   never arrives: the runtime answers MARSHAL first).
#[derive(Debug, Default)]
pub struct EchoServant;

impl Servant for EchoServant {
    fn repository_id(&self) -> &'static str {
        ECHO_ID
    }

    fn dispatch(&self, operation: &str, body: Bytes, _ctx: &Context) -> Result<Bytes, Exception> {
        match operation {
            "call" => Ok(body),
            "fail" => Err(UserException::new(OOPS_ID, body).into()),
            "sysex" => Err(parse_sysex(&body).into()),
            op => Err(SystemException::bad_operation(op).into()),
        }
    }
}

/// Parses `NAME,minor,COMPLETION` into a system exception (BAD_PARAM if it does not parse).
pub fn parse_sysex(body: &[u8]) -> SystemException {
    let text = String::from_utf8_lossy(body);
    let f: Vec<&str> = text.split(',').collect();
    let kind = f
        .first()
        .and_then(|n| SystemExceptionKind::all().find(|k| k.name() == *n));
    let minor = f.get(1).and_then(|m| m.parse::<u32>().ok());
    let completed = match f.get(2).copied() {
        Some("YES") => Some(CompletionStatus::Yes),
        Some("NO") => Some(CompletionStatus::No),
        Some("MAYBE") => Some(CompletionStatus::Maybe),
        _ => None,
    };
    match (kind, minor, completed) {
        (Some(k), Some(m), Some(c)) => SystemException::new(k, m, c),
        _ => SystemException::bad_param(0, format!("bad sysex argument `{text}`")),
    }
}

/// Direction of a GIOP message through a [`Tap`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    /// From the connecting side (the client) to the target.
    ToServer,
    /// From the target back.
    ToClient,
}

/// One GIOP message seen by a [`Tap`]: its header, and what the tap could decode of the start
/// of its body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    /// Direction.
    pub dir: Dir,
    /// GIOP minor version.
    pub minor: u8,
    /// Flags octet (bit 1: more fragments).
    pub flags: u8,
    /// Message type (0 Request, 1 Reply, 3 LocateRequest, 4 LocateReply, 7 Fragment...).
    pub msg_type: u8,
    /// Size after the header.
    pub size: u32,
    /// The request id, for the messages whose body starts with it: Request, Reply and Fragment
    /// in GIOP 1.2; CancelRequest, LocateRequest and LocateReply in every version.
    pub request_id: Option<u32>,
    /// The operation of a GIOP 1.2 Request addressed by object key.
    pub operation: Option<String>,
    /// The service-context ids of a GIOP 1.2 Request addressed by object key (e.g. 5 for
    /// BI_DIR_IIOP), in order.
    pub contexts: Vec<u32>,
}

/// A TCP proxy in front of `target` that forwards everything and records every GIOP header.
#[derive(Debug, Clone)]
pub struct Tap {
    /// The port to connect to instead of the target's.
    pub port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
    connections: Arc<AtomicUsize>,
}

impl Tap {
    /// Starts a tap forwarding to `target` (runs until the test process ends).
    pub fn start(target: SocketAddr) -> Tap {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind tap");
        let port = l.local_addr().expect("tap address").port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(AtomicUsize::new(0));
        let s = seen.clone();
        let n = connections.clone();
        std::thread::spawn(move || {
            for c in l.incoming() {
                let Ok(client) = c else { continue };
                let Ok(server) = TcpStream::connect(target) else {
                    continue;
                };
                n.fetch_add(1, Ordering::SeqCst);
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                for (from, to, dir) in [
                    (client.try_clone(), server.try_clone(), Dir::ToServer),
                    (server.try_clone(), client.try_clone(), Dir::ToClient),
                ] {
                    let (Ok(from), Ok(to)) = (from, to) else {
                        continue;
                    };
                    let s = s.clone();
                    std::thread::spawn(move || pump(from, to, dir, &s));
                }
            }
        });
        Tap {
            port,
            seen,
            connections,
        }
    }

    /// Every header seen so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().map(|v| v.clone()).unwrap_or_default()
    }

    /// How many connections the tap has accepted (and forwarded) so far.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    /// Forgets what was seen.
    pub fn clear(&self) {
        if let Ok(mut v) = self.seen.lock() {
            v.clear();
        }
    }
}

/// Forwards GIOP messages from `from` to `to`, recording each header (the record is made
/// before the message is forwarded, so whoever receives a message finds it already recorded).
fn pump(mut from: TcpStream, mut to: TcpStream, dir: Dir, seen: &Mutex<Vec<Seen>>) {
    let mut header = [0u8; 12];
    let mut buf = vec![0u8; 64 << 10];
    loop {
        if from.read_exact(&mut header).is_err() {
            break;
        }
        let little = header[6] & 1 != 0;
        let mut s = [0u8; 4];
        s.copy_from_slice(&header[8..12]);
        let size = if little {
            u32::from_le_bytes(s)
        } else {
            u32::from_be_bytes(s)
        };
        // The first chunk of the body, decoded (as far as it goes) before anything is forwarded.
        let first = (size as usize).min(buf.len());
        if from.read_exact(&mut buf[..first]).is_err() {
            let _ = to.shutdown(Shutdown::Both);
            return;
        }
        let peek = Peek::decode(&header, &buf[..first]);
        if let Ok(mut v) = seen.lock() {
            v.push(Seen {
                dir,
                minor: header[5],
                flags: header[6],
                msg_type: header[7],
                size,
                request_id: peek.request_id,
                operation: peek.operation,
                contexts: peek.contexts,
            });
        }
        if to.write_all(&header).is_err() || to.write_all(&buf[..first]).is_err() {
            break;
        }
        let mut left = size as usize - first;
        while left > 0 {
            let n = left.min(buf.len());
            if from.read_exact(&mut buf[..n]).is_err() || to.write_all(&buf[..n]).is_err() {
                let _ = to.shutdown(Shutdown::Both);
                return;
            }
            left -= n;
        }
    }
    let _ = to.shutdown(Shutdown::Both);
}

/// What [`pump`] decodes from the start of a message body.
#[derive(Default)]
struct Peek {
    request_id: Option<u32>,
    operation: Option<String>,
    contexts: Vec<u32>,
}

impl Peek {
    /// Decodes what it can of `body` (possibly only the first part of the body). Alignment is
    /// counted from the start of the GIOP header, which precedes `body` by 12 bytes.
    fn decode(header: &[u8; 12], body: &[u8]) -> Peek {
        let (minor, msg_type) = (header[5], header[7]);
        let mut r = BodyReader {
            body,
            pos: 0,
            little: header[6] & 1 != 0,
        };
        let mut p = Peek::default();
        let id_first = matches!(msg_type, 2..=4) || (minor >= 2 && matches!(msg_type, 0 | 1 | 7));
        if !id_first {
            return p;
        }
        p.request_id = r.u32();
        if minor < 2 || msg_type != 0 {
            return p;
        }
        // GIOP 1.2 RequestHeader: response_flags, reserved[3], TargetAddress, operation,
        // service_context.
        r.pos += 4;
        if r.u16() != Some(0) {
            return p; // not KeyAddr
        }
        let Some(key_len) = r.u32() else { return p };
        r.pos += key_len as usize;
        let Some(op) = r.string() else { return p };
        p.operation = Some(op);
        let Some(n) = r.u32() else { return p };
        for _ in 0..n.min(64) {
            let (Some(id), Some(len)) = (r.u32(), r.u32()) else {
                break;
            };
            p.contexts.push(id);
            r.pos += len as usize;
        }
        p
    }
}

/// A minimal CDR reader over the start of a GIOP body (alignment from the header start).
struct BodyReader<'a> {
    body: &'a [u8],
    pos: usize,
    little: bool,
}

impl BodyReader<'_> {
    fn align(&mut self, n: usize) {
        // The body starts at offset 12 of the message, which is 4-aligned.
        let abs = self.pos + 12;
        self.pos += (n - abs % n) % n;
    }

    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.align(N);
        let b: [u8; N] = self.body.get(self.pos..self.pos + N)?.try_into().ok()?;
        self.pos += N;
        Some(b)
    }

    fn u16(&mut self) -> Option<u16> {
        let b = self.take::<2>()?;
        Some(if self.little {
            u16::from_le_bytes(b)
        } else {
            u16::from_be_bytes(b)
        })
    }

    fn u32(&mut self) -> Option<u32> {
        let b = self.take::<4>()?;
        Some(if self.little {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        })
    }

    fn string(&mut self) -> Option<String> {
        let n = self.u32()? as usize;
        let bytes = self.body.get(self.pos..self.pos + n)?;
        self.pos += n;
        let text = bytes.strip_suffix(&[0]).unwrap_or(bytes);
        Some(String::from_utf8_lossy(text).into_owned())
    }
}
