//! Child processes: examples that orchestrate themselves (the nested demo's peer, the observer's
//! subscribers, the bank's servers) start other example programs, read the object reference
//! each prints, and stop them by closing their standard input. Also [`Stop`], how a server's
//! main thread waits for the reason to shut down.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The example program `name` built next to this one (`target/debug/<name>`).
pub fn sibling_exe(name: &str) -> Result<PathBuf, String> {
    let me = std::env::current_exe().map_err(|e| format!("cannot locate this program: {e}"))?;
    let path = me.with_file_name(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    if path.exists() {
        Ok(path)
    } else {
        Err(format!(
            "cannot find `{name}` next to this program (at {}); build all examples first: \
             cargo build -p orb-examples",
            path.display()
        ))
    }
}

/// A child process that printed an object reference (a line starting with `IOR:`) on its
/// standard output. Its other output lines are copied to ours, prefixed with `[label]`.
///
/// Dropping it closes the child's standard input and waits a moment for it to exit, then kills
/// it: a child never outlives its parent's interest in it.
#[derive(Debug)]
pub struct Peer {
    label: String,
    child: Child,
    stdin: Option<ChildStdin>,
    reference: String,
    output: Option<JoinHandle<()>>,
    status: Option<ExitStatus>,
}

impl Peer {
    /// Starts `exe args` and waits up to `wait` for its reference line.
    pub fn spawn(label: &str, exe: &Path, args: &[String], wait: Duration) -> Result<Peer, String> {
        let mut child = Command::new(exe)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout is piped");
        let (tx, rx) = mpsc::channel();
        let prefix = format!("[{label}]");
        let output = std::thread::Builder::new()
            .name(format!("{label}-output"))
            .spawn(move || {
                let mut tx = Some(tx);
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if line.starts_with("IOR:") {
                        if let Some(tx) = tx.take() {
                            let _ = tx.send(line);
                            continue;
                        }
                    }
                    println!("{prefix} {line}");
                }
            })
            .map_err(|e| format!("cannot start a thread: {e}"))?;
        let mut peer = Peer {
            label: label.to_string(),
            child,
            stdin,
            reference: String::new(),
            output: Some(output),
            status: None,
        };
        match rx.recv_timeout(wait) {
            Ok(r) => {
                peer.reference = r;
                Ok(peer)
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let status = peer.finish(Duration::from_secs(1));
                Err(format!(
                    "{label} exited before printing its object reference ({})",
                    status.map_or_else(|e| e, |s| s.to_string())
                ))
            }
            Err(mpsc::RecvTimeoutError::Timeout) => Err(format!(
                "{label} printed no object reference within {wait:?}"
            )),
        }
    }

    /// The reference the child printed (`IOR:...`).
    pub fn reference(&self) -> &str {
        &self.reference
    }

    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The label its output is prefixed with.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// Kills the child at once (SIGKILL on Unix), as if it crashed, and reaps it.
    pub fn kill(&mut self) -> Result<ExitStatus, String> {
        let _ = self.child.kill();
        self.reap()
    }

    /// Closes the child's standard input (our servers take that as the signal to shut down),
    /// waits up to `grace` for it to exit, then kills it. Returns how it exited.
    pub fn finish(&mut self, grace: Duration) -> Result<ExitStatus, String> {
        if let Some(s) = self.status {
            return Ok(s);
        }
        drop(self.stdin.take());
        let deadline = Instant::now() + grace;
        loop {
            match self.child.try_wait() {
                Ok(Some(_)) => return self.reap(),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                Ok(None) => {
                    eprintln!(
                        "{}: {} did not exit within {grace:?}; killing it",
                        crate::program_name(),
                        self.label
                    );
                    return self.kill();
                }
                Err(e) => return Err(format!("waiting for {}: {e}", self.label)),
            }
        }
    }

    /// Waits for the exit and for the last of its output.
    fn reap(&mut self) -> Result<ExitStatus, String> {
        let status = self
            .child
            .wait()
            .map_err(|e| format!("waiting for {}: {e}", self.label))?;
        self.status = Some(status);
        drop(self.stdin.take());
        if let Some(h) = self.output.take() {
            let _ = h.join();
        }
        Ok(status)
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.finish(Duration::from_secs(2));
    }
}

/// Why a server stops: set once (by a servant, a timer, or standard input closing), awaited
/// by the main thread.
#[derive(Clone, Debug, Default)]
pub struct Stop {
    inner: Arc<(Mutex<Option<String>>, Condvar)>,
}

impl Stop {
    /// A stop not yet requested.
    pub fn new() -> Stop {
        Stop::default()
    }

    /// Requests the stop (the first reason wins).
    pub fn stop(&self, reason: impl Into<String>) {
        let (m, cv) = &*self.inner;
        let mut g = m.lock().unwrap_or_else(|e| e.into_inner());
        if g.is_none() {
            *g = Some(reason.into());
        }
        cv.notify_all();
    }

    /// Whether a stop was requested.
    pub fn is_stopped(&self) -> bool {
        let (m, _) = &*self.inner;
        m.lock().unwrap_or_else(|e| e.into_inner()).is_some()
    }

    /// Waits for a stop, at most `limit` (then the reason is "`<limit>` elapsed"); returns the
    /// reason.
    pub fn wait(&self, limit: Option<Duration>) -> String {
        let (m, cv) = &*self.inner;
        let deadline = limit.map(|l| Instant::now() + l);
        let mut g = m.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(r) = g.as_ref() {
                return r.clone();
            }
            match deadline {
                None => g = cv.wait(g).unwrap_or_else(|e| e.into_inner()),
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        let reason = format!("{:?} elapsed", limit.unwrap_or_default());
                        *g = Some(reason.clone());
                        return reason;
                    }
                    g = cv
                        .wait_timeout(g, left)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
            }
        }
    }

    /// Stops when standard input reaches end of file: the way a parent process that started
    /// us (through [`Peer`]) tells us to go, and the way we notice that it died.
    pub fn on_stdin_eof(&self) {
        let stop = self.clone();
        let _ = std::thread::Builder::new()
            .name("stdin-watch".into())
            .spawn(move || {
                let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
                stop.stop("standard input closed");
            });
    }
}
