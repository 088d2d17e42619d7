//! Shared support for the integration tests: the generated test services and servants.

#![allow(missing_docs)]

pub mod certs;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// Generated from `proto/orbtest.proto`.
pub mod orbtest {
    include!(concat!(env!("OUT_DIR"), "/orbtest.rs"));
}

use orbtest::*;

/// The echo servant: echoes, sleeps (watching for cancellation), panics, records oneways.
#[derive(Default)]
pub struct EchoServant {
    pub notified: Mutex<Vec<Payload>>,
    pub cancellations_seen: AtomicUsize,
    pub balance: Mutex<u64>,
}

impl Echo for Arc<EchoServant> {
    fn echo(&self, _ctx: &protorb::Context, req: Payload) -> Result<Payload, protorb::Exception> {
        Ok(req)
    }

    fn sleep(
        &self,
        ctx: &protorb::Context,
        req: SleepRequest,
    ) -> Result<SleepReply, protorb::Exception> {
        let until = Instant::now() + Duration::from_millis(req.millis.into());
        while Instant::now() < until {
            if ctx.is_cancelled() {
                self.cancellations_seen.fetch_add(1, Ordering::SeqCst);
                return Ok(SleepReply { cancelled: true });
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(SleepReply { cancelled: false })
    }

    fn panic(&self, _ctx: &protorb::Context, _req: ()) -> Result<(), protorb::Exception> {
        panic!("servant panics on purpose");
    }

    fn notify(&self, _ctx: &protorb::Context, req: Payload) -> Result<(), protorb::Exception> {
        self.notified.lock().unwrap().push(req);
        Ok(())
    }

    fn withdraw(
        &self,
        _ctx: &protorb::Context,
        req: WithdrawRequest,
    ) -> Result<Balance, EchoWithdrawError> {
        let mut b = self.balance.lock().unwrap();
        if req.amount > *b {
            return Err(InsufficientFunds {
                available: *b,
                requested: req.amount,
            }
            .into());
        }
        *b -= req.amount;
        Ok(Balance { amount: *b })
    }
}

/// A node of the nested ping-pong: calls the peer back until depth 0.
pub struct NodeServant {
    pub name: &'static str,
    pub orb: protorb::Orb,
    pub me: Mutex<Option<protorb::ObjectRef>>,
}

impl Node for Arc<NodeServant> {
    fn ping(
        &self,
        _ctx: &protorb::Context,
        req: PingRequest,
    ) -> Result<PingReply, protorb::Exception> {
        let here = format!("{}@{:?}", self.name, std::thread::current().id());
        if req.depth == 0 {
            std::thread::sleep(std::time::Duration::from_micros(req.sleep_micros.into()));
            return Ok(PingReply {
                depth_reached: 0,
                trail: vec![here],
            });
        }
        let peer = req.peer.clone().unwrap_or_default();
        let me = self.me.lock().unwrap().clone();
        let client = NodeClient::new(&self.orb, peer);
        let mut reply = client.ping(PingRequest {
            depth: req.depth - 1,
            peer: me,
            sleep_micros: req.sleep_micros,
        })?;
        reply.depth_reached += 1;
        reply.trail.push(here);
        Ok(reply)
    }
}

/// Activates a node servant in `orb` and returns its reference.
pub fn activate_node(orb: &protorb::Orb, name: &'static str) -> protorb::ObjectRef {
    let servant = Arc::new(NodeServant {
        name,
        orb: orb.clone(),
        me: Mutex::new(None),
    });
    let r = orb.activate(name.as_bytes().to_vec(), NodeSkeleton::new(servant.clone()));
    *servant.me.lock().unwrap() = Some(r.clone());
    r
}

/// Activates an echo servant under key `echo`.
pub fn activate_echo(orb: &protorb::Orb) -> (Arc<EchoServant>, protorb::ObjectRef) {
    let s = Arc::new(EchoServant::default());
    let r = orb.activate(&b"echo"[..], EchoSkeleton::new(s.clone()));
    (s, r)
}

/// A gate that a servant's call waits at until the test opens it: a reply that comes only
/// when the test says so, with no clock involved. Once open it stays open. It counts the
/// calls that entered it and those that went through it open, and the test can wait until
/// calls have entered. Poison-tolerant, so it can be opened while a failed test unwinds.
#[derive(Default)]
pub struct Gate {
    state: Mutex<GateState>,
    changed: Condvar,
}

#[derive(Default)]
struct GateState {
    open: bool,
    entered: usize,
    passed: usize,
}

impl Gate {
    /// How often [`Gate::wait_unless`] checks whether its call was cancelled.
    const CANCEL_POLL: Duration = Duration::from_millis(20);

    /// A closed gate.
    pub fn closed() -> Arc<Gate> {
        Arc::new(Gate::default())
    }

    /// A gate already open: calls go through it at once (and are counted).
    pub fn opened() -> Arc<Gate> {
        let g = Gate::closed();
        g.open();
        g
    }

    /// Opens the gate and lets every waiting call through.
    pub fn open(&self) {
        self.lock().open = true;
        self.changed.notify_all();
    }

    /// Enters the gate and waits until it is open, deaf to cancellation (user code that does
    /// not return until released).
    pub fn wait(&self) {
        self.pass(None);
    }

    /// Enters the gate and waits until it is open or `cancelled()` holds (checked every
    /// 20 ms): true if it went through the open gate, false if cancelled first.
    pub fn wait_unless(&self, cancelled: impl Fn() -> bool) -> bool {
        self.pass(Some(&cancelled))
    }

    /// How many calls have entered the gate ([`Gate::wait`], [`Gate::wait_unless`]).
    pub fn entered(&self) -> usize {
        self.lock().entered
    }

    /// How many calls have gone through the open gate (not counting cancelled ones).
    pub fn passed(&self) -> usize {
        self.lock().passed
    }

    /// Waits until at least `n` calls have entered the gate; fails the test if they have not
    /// after `patience` (a hang guard, not a timing assumption).
    pub fn wait_entered(&self, n: usize, patience: Duration) {
        let s = self.lock();
        let entered = self
            .changed
            .wait_timeout_while(s, patience, |s| s.entered < n)
            .unwrap_or_else(PoisonError::into_inner)
            .0
            .entered;
        assert!(
            entered >= n,
            "{entered} of {n} calls reached the gate in {patience:?}"
        );
    }

    fn lock(&self) -> MutexGuard<'_, GateState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn pass(&self, cancelled: Option<&dyn Fn() -> bool>) -> bool {
        let mut s = self.lock();
        s.entered += 1;
        self.changed.notify_all();
        while !s.open {
            s = match cancelled {
                None => self.changed.wait(s).unwrap_or_else(PoisonError::into_inner),
                Some(c) if c() => return false,
                Some(_) => {
                    self.changed
                        .wait_timeout(s, Self::CANCEL_POLL)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0
                }
            };
        }
        s.passed += 1;
        true
    }
}

/// Payload bytes derived from (thread, call): any mix-up of replies shows.
pub fn payload(thread: u32, call: u32, len: usize) -> Vec<u8> {
    let mut x = (thread as u64) << 32 | call as u64 | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Why a [`timed_echo`] call failed.
#[derive(Debug)]
pub enum EchoFailure {
    /// The reply was for another call.
    WrongReply(u32),
    /// The call raised this.
    Exception(protorb::Exception),
}

impl std::fmt::Display for EchoFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EchoFailure::WrongReply(call) => write!(f, "wrong reply {call}"),
            EchoFailure::Exception(e) => write!(f, "{e}"),
        }
    }
}

/// One echo call of `len` bytes tagged `(thread, call)`, timed: its latency, and whether the
/// reply came back for this call. The unrelated clients of the hostile-peer and LF tests use
/// it.
pub fn timed_echo(
    client: &EchoClient,
    thread: u32,
    call: u32,
    len: usize,
    timeout: Duration,
) -> (Duration, Result<(), EchoFailure>) {
    let t = Instant::now();
    let r = client.echo_with_timeout(
        Payload {
            thread,
            call,
            data: vec![3; len],
        },
        timeout,
    );
    let r = match r {
        Ok(p) if p.call == call => Ok(()),
        Ok(p) => Err(EchoFailure::WrongReply(p.call)),
        Err(e) => Err(EchoFailure::Exception(e)),
    };
    (t.elapsed(), r)
}

/// A local port on which connections are refused, and the socket that keeps it so: bound but
/// not listening, so no listener (another test's ORB, bound to port 0 in parallel) can be
/// given it while the socket lives. A port bound, noted and closed could be, and a call
/// meant to fail would then reach that listener.
pub fn refusing_port() -> (socket2::Socket, u16) {
    use socket2::{Domain, Socket, Type};
    let s = Socket::new(Domain::IPV4, Type::STREAM, None).expect("socket");
    s.bind(&std::net::SocketAddr::from(([127, 0, 0, 1], 0)).into())
        .expect("bind");
    let port = s
        .local_addr()
        .expect("local address")
        .as_socket()
        .expect("an IP address")
        .port();
    (s, port)
}

/// Runs `f` on a thread of its own and fails the test if it does not finish in `secs`
/// seconds: a hang guard, so a deadlock fails instead of stalling the suite.
pub fn within<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    let t = std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(v) => {
            t.join().unwrap();
            v
        }
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            // The closure panicked: report its panic.
            std::panic::resume_unwind(t.join().unwrap_err())
        }
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => panic!("hung for {secs} s"),
    }
}
