//! Support for the hostile-peer tests: the `hostile_server` child process, raw GIOP frames,
//! and an unrelated client whose call latency is measured.

#![allow(dead_code)]

use bytes::{Bytes, BytesMut};
use orb_tests::orbtest::{EchoClient, Payload};
use orb_tests::{timed_echo, EchoFailure};
use protorb::giop::{
    write_locate_request, write_reply, write_request, ReplyHeader, ReplyStatus, RequestHeader,
    ServiceContextList, TargetAddress, Version,
};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The `hostile_server` child process.
pub struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    pub addr: SocketAddr,
}

impl Server {
    /// Starts the server with these options; `fd_limit` runs it under `ulimit -n`.
    pub fn start(args: &[&str], fd_limit: Option<u32>) -> Server {
        let bin = env!("CARGO_BIN_EXE_hostile_server");
        let mut cmd = match fd_limit {
            Some(n) => {
                let mut c = Command::new("sh");
                c.arg("-c")
                    .arg(format!("ulimit -n {n} && exec \"$0\" \"$@\""))
                    .arg(bin);
                c
            }
            None => Command::new(bin),
        };
        let mut child = cmd
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("hostile_server starts");
        let stdin = child.stdin.take();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let port: u16 = line
            .strip_prefix("READY ")
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
        Server {
            child,
            stdin,
            stdout,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
        }
    }

    /// The server's `OrbStats`, as its Debug text.
    pub fn stats(&mut self) -> String {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "stats").unwrap();
        stdin.flush().unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        line
    }

    /// One counter of the server's stats (`None` if the ORB has no such counter).
    pub fn stat(&mut self, name: &str) -> Option<u64> {
        stat_in(&self.stats(), name)
    }

    /// The server's resident set size, in bytes.
    pub fn rss(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let kib: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS");
        kib * 1024
    }

    /// A reference to the echo object.
    pub fn echo_ref(&self, orb: &protorb::Orb) -> protorb::ObjectRef {
        orb.string_to_object(&format!("corbaloc::127.0.0.1:{}/echo", self.addr.port()))
            .unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `name: N` in a Debug-printed `OrbStats`.
pub fn stat_in(stats: &str, name: &str) -> Option<u64> {
    let at = stats.find(&format!(" {name}: "))? + name.len() + 3;
    stats[at..]
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// Polls `f` until it is true, failing with `what` after `secs` seconds.
pub fn wait_until(secs: u64, what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A GIOP 1.2 LocateRequest for key `echo`.
pub fn locate_request(id: u32) -> Bytes {
    let mut buf = BytesMut::new();
    write_locate_request(
        &mut buf,
        Version::V1_2,
        id,
        &TargetAddress::Key(Bytes::from_static(b"echo").into()),
    );
    buf.freeze()
}

/// A GIOP 1.2 two-way Request of `Echo` on key `echo` carrying `len` payload bytes.
pub fn echo_request(id: u32, len: usize) -> Bytes {
    use prost::Message;
    let body = Payload {
        thread: 0,
        call: id,
        data: vec![7; len],
    }
    .encode_to_vec();
    let header = RequestHeader {
        deadline: None,
        request_id: id,
        response_flags: 3,
        target: TargetAddress::Key(Bytes::from_static(b"echo").into()),
        operation: "Echo".into(),
        service_context: ServiceContextList::default(),
    };
    let mut buf = BytesMut::new();
    write_request(&mut buf, Version::V1_2, &header, |w| w.write_octets(&body));
    buf.freeze()
}

/// A GIOP 1.2 Reply (no exception) to request `id` whose body is `payload` as an octet
/// sequence: what a scripted server answers.
pub fn octets_reply(id: u32, payload: &[u8]) -> BytesMut {
    let mut out = BytesMut::new();
    let header = ReplyHeader {
        request_id: id,
        status: ReplyStatus::NoException,
        service_context: Default::default(),
    };
    write_reply(&mut out, Version::V1_2, &header, |w| {
        w.write_octets(payload)
    });
    out
}

/// Reads one GIOP message: (message type, whole message); `None` on EOF or timeout.
pub fn read_frame(s: &mut TcpStream, timeout: Duration) -> Option<(u8, Vec<u8>)> {
    s.set_read_timeout(Some(timeout)).unwrap();
    let mut hdr = [0u8; 12];
    s.read_exact(&mut hdr).ok()?;
    assert_eq!(&hdr[..4], b"GIOP");
    let little = hdr[6] & 1 == 1;
    let size = if little {
        u32::from_le_bytes(hdr[8..12].try_into().unwrap())
    } else {
        u32::from_be_bytes(hdr[8..12].try_into().unwrap())
    } as usize;
    let mut msg = hdr.to_vec();
    msg.resize(12 + size, 0);
    s.read_exact(&mut msg[12..]).ok()?;
    Some((hdr[7], msg))
}

/// Whether the peer closed `s` (EOF or reset) within `timeout`, skipping what it sends first.
pub fn closed_within(s: &mut TcpStream, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    let mut buf = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        s.set_read_timeout(Some(left)).unwrap();
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return false
            }
            Err(_) => return true,
        }
    }
}

/// Writes `frame` over and over on a socket whose peer may stop reading it: stops after
/// `max_bytes`, or once a write has made no progress for `stall`. Returns the bytes written.
pub fn flood(s: &mut TcpStream, frame: &[u8], max_bytes: usize, stall: Duration) -> usize {
    s.set_write_timeout(Some(stall)).unwrap();
    let batch: Vec<u8> = frame.repeat((64 * 1024 / frame.len()).max(1));
    let mut sent = 0;
    while sent < max_bytes {
        match s.write(&batch) {
            Ok(n) => sent += n,
            Err(_) => break, // no progress within `stall` (or the server closed)
        }
    }
    sent
}

/// Each call's latency and outcome.
pub type Results = Arc<Mutex<Vec<(Duration, Result<(), String>)>>>;

/// An unrelated client calling `Echo` in a loop until stopped; records each call's latency
/// and failure.
pub struct Probe {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    pub results: Results,
}

impl Probe {
    /// Starts calling `target` (`expect_ok`: a call must succeed; otherwise any system
    /// exception other than TIMEOUT counts as completed, e.g. NO_RESOURCES).
    pub fn start(target: protorb::ObjectRef, orb: protorb::Orb, expect_ok: bool) -> Probe {
        let stop = Arc::new(AtomicBool::new(false));
        let results: Results = Arc::new(Mutex::new(Vec::new()));
        let (st, res) = (stop.clone(), results.clone());
        let thread = std::thread::spawn(move || {
            let client = EchoClient::new(&orb, target);
            let mut i = 0;
            while !st.load(Ordering::Relaxed) {
                i += 1;
                let (took, r) = timed_echo(&client, 1, i, 100, Duration::from_secs(5));
                // Without `expect_ok`, an exception other than TIMEOUT is allowed (the
                // server may be shedding this client); a wrong reply never is.
                let r = match r {
                    Ok(()) => Ok(()),
                    Err(EchoFailure::Exception(e))
                        if !expect_ok
                            && e.kind() != Some(protorb::SystemExceptionKind::TIMEOUT) =>
                    {
                        Ok(())
                    }
                    Err(e) => Err(e.to_string()),
                };
                res.lock().unwrap().push((took, r));
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        Probe {
            stop,
            thread: Some(thread),
            results,
        }
    }

    /// Calls completed so far.
    pub fn calls(&self) -> usize {
        self.results.lock().unwrap().len()
    }

    /// Stops the probe and asserts every call completed, with p99 under 200 ms.
    pub fn finish(mut self, at_least: usize) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap();
        let r = self.results.lock().unwrap();
        let failed: Vec<_> = r.iter().filter(|(_, r)| r.is_err()).collect();
        assert!(
            failed.is_empty(),
            "{} of {} calls failed, first: {:?}",
            failed.len(),
            r.len(),
            failed[0]
        );
        assert!(r.len() >= at_least, "only {} calls", r.len());
        let mut lat: Vec<Duration> = r.iter().map(|(d, _)| *d).collect();
        lat.sort();
        let p99 = lat[(lat.len() * 99 / 100).min(lat.len() - 1)];
        eprintln!(
            "probe: {} calls, p50 {:?}, p99 {:?}",
            lat.len(),
            lat[lat.len() / 2],
            p99
        );
        assert!(p99 < Duration::from_millis(200), "p99 {p99:?} over 200 ms");
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
