//! [`Orb`] and [`OrbBuilder`]: configuration, listen endpoints, the pool threads, object
//! activation, reference strings, and shutdown.

use crate::adapter::Adapter;
use crate::config::Config;
use crate::connection::Connection;
use crate::endpoints::{BidirRoutes, Outbound};
use crate::exception::{minor, CompletionStatus, SystemException, SystemExceptionKind};
use crate::interceptor::{ClientInterceptor, ServerInterceptor};
use crate::ior::ObjectRef;
use crate::lf::{Lf, Participant};
use crate::reactor::Reactor;
use crate::servant::{Context, Servant};
use crate::stats::{OrbStats, Stats};
use crate::sync::plain::Mutex;
use crate::sync::plain_lock as lock;
use crate::upcall::Upcalls;
use bytes::Bytes;
use std::any::Any;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

/// Builds an [`Orb`].
///
/// ```
/// let orb = protorb::Orb::builder().threads(1).build().unwrap();
/// assert!(orb.listen_addrs()[0].ip().is_loopback());
/// orb.shutdown();
/// ```
#[derive(Clone, Debug, Default)]
pub struct OrbBuilder {
    config: Config,
    listen_set: bool,
    errors: Vec<String>,
}

impl OrbBuilder {
    /// Adds a listen endpoint (`"127.0.0.1:0"` picks a free port). The first call replaces the
    /// default, which is `127.0.0.1:0`: listening on other interfaces is an explicit choice.
    #[must_use]
    pub fn listen(mut self, addr: impl ToSocketAddrs) -> Self {
        if !self.listen_set {
            self.config.listen.clear();
            self.listen_set = true;
        }
        match addr.to_socket_addrs() {
            Ok(a) => self.config.listen.extend(a.take(1)),
            Err(e) => self.errors.push(format!("bad listen address: {e}")),
        }
        self
    }

    /// Listens nowhere (a pure client; callbacks to it are impossible).
    #[must_use]
    pub fn no_listen(mut self) -> Self {
        self.config.listen.clear();
        self.listen_set = true;
        self
    }

    /// The host name written into object references (default: the listen address's IP).
    #[must_use]
    pub fn host(mut self, host: impl Into<String>) -> Self {
        self.config.host = Some(host.into());
        self
    }

    /// Number of pool threads serving requests (default 2). 0 is valid: then only threads
    /// waiting for replies, and threads in [`Orb::run`], drive the event loop.
    #[must_use]
    pub fn threads(mut self, n: usize) -> Self {
        self.config.threads = n;
        self
    }

    /// Default timeout of a two-way call (default 30 s).
    #[must_use]
    pub fn call_timeout(mut self, t: Duration) -> Self {
        self.config.call_timeout = t;
        self
    }

    /// Timeout for opening a connection (default 5 s; a call's deadline also bounds it).
    #[must_use]
    pub fn connect_timeout(mut self, t: Duration) -> Self {
        self.config.connect_timeout = t;
        self
    }

    /// Maximum GIOP message size in bytes, after fragment reassembly (default 64 MiB; at most
    /// just under 4 GiB, the most a 32-bit GIOP size can say).
    #[must_use]
    pub fn max_message_size(mut self, n: usize) -> Self {
        // GIOP sizes and CDR lengths are 32-bit; a larger limit could not be honoured (and
        // a body over 4 GiB would fail to encode).
        self.config.max_message_size = n.min(u32::MAX as usize - 64);
        self
    }

    /// Maximum upcalls running at once for one connection (default 64). At the limit the ORB
    /// stops reading that connection until one finishes (back-pressure, as Ice 3.8's
    /// `MaxDispatches`).
    #[must_use]
    pub fn max_dispatches_per_connection(mut self, n: usize) -> Self {
        self.config.max_dispatches_per_connection = n.max(1);
        self
    }

    /// Maximum nested upcalls on one thread (default 1024). A request that would go deeper is
    /// answered with NO_RESOURCES.
    #[must_use]
    pub fn max_nesting_depth(mut self, n: usize) -> Self {
        self.config.max_nesting_depth = n;
        self
    }

    /// Stack that must remain on a thread before it runs an upcall (default 256 KiB).
    ///
    /// Nested upcalls recurse on the serving thread's stack (about 3 KiB per level in release
    /// builds, 10 KiB in debug), so a thread with a small stack can run out long before
    /// [`max_nesting_depth`](Self::max_nesting_depth). Before each upcall the ORB checks the
    /// stack left on the current thread, whichever thread it is; below this reserve the
    /// request is answered with NO_RESOURCES (completed NO) instead of overflowing the stack,
    /// which would abort the process. Raise it if your servants need much stack themselves.
    #[must_use]
    pub fn upcall_stack_reserve(mut self, bytes: usize) -> Self {
        self.config.upcall_stack_reserve = bytes;
        self
    }

    /// Whether a thread waiting for a reply may serve incoming requests (default true).
    ///
    /// Turning this off gives the classic thread-pool model, in which nested callbacks
    /// deadlock (and end in TIMEOUT) once every pool thread waits. It exists to demonstrate
    /// what the hybrid Leader/Followers model buys; there is no other reason to turn it off.
    #[must_use]
    pub fn nested_upcalls(mut self, enabled: bool) -> Self {
        self.config.nested_upcalls = enabled;
        self
    }

    /// How long [`Orb::shutdown`] lets running upcalls finish (default 5 s).
    #[must_use]
    pub fn shutdown_grace(mut self, t: Duration) -> Self {
        self.config.shutdown_grace = t;
        self
    }

    /// Stack size of pool threads (default 64 MiB of address space; deep nested callbacks
    /// recurse on the serving thread's stack).
    #[must_use]
    pub fn thread_stack_size(mut self, bytes: usize) -> Self {
        self.config.thread_stack_size = bytes;
        self
    }

    /// Offer bidirectional GIOP (default on): announce our listen points on connections we
    /// open, so that a peer that accepts them calls our objects back over the same connection
    /// (no connection from it to us, which also works through NAT and firewalls).
    #[must_use]
    pub fn bidir(mut self, enabled: bool) -> Self {
        self.config.bidir = enabled;
        self
    }

    /// Accept bidirectional GIOP (default off): take note of the listen points a peer
    /// announces on a connection it opened, and call an object over that connection instead
    /// of connecting to it, when the object's reference arrived over that same connection (in
    /// a request's parameters) and names one of the announced endpoints. Any other reference,
    /// even to an announced endpoint, gets a connection of its own (omniORB's rule).
    ///
    /// Listen points are not authenticated (CORBA 3.0 §15.8). With this rule a peer can only
    /// receive calls to references it sent itself; without it, a peer announcing another
    /// server's address would receive the calls meant for that server.
    ///
    /// Over TLS (a listener with [`tls`](Self::tls)), listen points are accepted only from
    /// authenticated peers: connections whose client presented a certificate that verified,
    /// and, if [`bidir_allow`](Self::bidir_allow) is set, whose identity it allows.
    ///
    /// Callbacks then need no second connection, and a chain of nested callbacks between two
    /// processes runs over one connection, which each side's waiting thread reads itself
    /// ([`owned_reads`](Self::owned_reads), once the peer has called back over it): about a
    /// fifth less time per level than over two connections (`orb-bench nest --bidir`,
    /// examples/bench/PROFILE.md).
    #[must_use]
    pub fn bidir_accept(mut self, enabled: bool) -> Self {
        self.config.bidir_accept = enabled;
        self
    }

    /// Which authenticated TLS peers may announce BiDir listen points (with
    /// [`bidir_accept`](Self::bidir_accept)): `allow` sees the identity in the client's
    /// certificate. A peer it refuses is still served; its listen points are ignored (and
    /// logged), so our calls to its objects open connections of their own.
    #[must_use]
    pub fn bidir_allow(
        mut self,
        allow: impl Fn(&crate::identity::PeerIdentity) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.config.bidir_allow = Some(crate::config::IdentityRule(Arc::new(allow)));
        self
    }

    /// The standby's tick in tick mode (default 10 ms; `None` or zero: no tick mode).
    ///
    /// While a pool thread runs an upcall, an idle pool thread (the standby) watches the event
    /// loop, so that a request that arrives meanwhile is served even if the upcall runs long
    /// or blocks. The leader *arms* the standby before each upcall and disarms it after: two
    /// `epoll_ctl` system calls per request, about 0.8 µs of a 19 µs round trip on the
    /// benchmarks' 2-vCPU VM, spent for nothing when requests come one at a time (tick mode
    /// saves about 0.6 µs of it).
    ///
    /// After 64 upcalls in a row during which nothing arrived, the pool switches to *tick
    /// mode*: upcalls leave the standby unarmed, and the standby wakes every `tick` instead.
    /// If it finds an upcall that has held the event loop for half a tick or more, it takes
    /// the loop over and the pool goes back to arming before every upcall. So does a request
    /// that arrived while user code ran (each upcall checks with one non-blocking poll before
    /// it replies), so that concurrent requests are still served in parallel.
    ///
    /// The price: a request that arrives during a long upcall in tick mode waits up to about
    /// one tick before it is served (once: the pool then arms again), and a busy ORB's standby
    /// wakes once per tick (an idle ORB's does not). Each such wake-up cost the call under way
    /// about 20 µs on that VM, which is why the default is not shorter.
    /// [`OrbStats::standby_tick_takeovers`](crate::OrbStats::standby_tick_takeovers) counts
    /// the takeovers. Use `None` where no request may ever wait behind a long upcall.
    #[must_use]
    pub fn standby_tick(mut self, tick: Option<Duration>) -> Self {
        self.config.standby_tick = tick;
        self
    }

    /// How long replies to requests that arrived together may be held back so that they
    /// go out together (default 50 µs; `Duration::ZERO`: never held).
    ///
    /// With a hold, when one read from a connection brings several requests, each is still
    /// dispatched to the pool as usual, but their replies queue and are written in one
    /// system call (`writev`) rather than one each. They go out when the last request of the
    /// read is dispatched (before its upcall runs), before the connection is read again,
    /// when a thread sending on the connection must wait (a nested call through it, a full
    /// queue), or at the next dispatch once 8 replies are queued or `hold` has passed since
    /// the first of them was dispatched. A request that comes alone, as from a call-at-a-time
    /// client, is never held.
    ///
    /// Why on, and why these limits (examples/bench/PROFILE.md, 2026-12-07 22:40 and
    /// 2026-12-08 00:20; the benchmarks' 2-vCPU VM, medians of five interleaved rounds):
    /// with no hold, `tput 32` (32 callers over one connection, nothing pinned) made 108k
    /// calls/s, `tput-async 1000` (1,000 calls in flight over one connection) 320k, and
    /// `tput 32` with server and client on CPUs of their own 136k; holding up to 8 replies
    /// (with a 200 µs limit) made 131k, 538k and 146k in the same rounds. In later rounds,
    /// 8 replies or 50 µs made 147k, 584k and 148k against 143k, 542k and 142k for 10 µs
    /// alone. A time limit alone either cut batches short where the client
    /// needs them (`tput-async` fell below no hold at 6 µs, as the hold ended at nearly every
    /// dispatch) or delivered replies in late bursts where the client's CPU is the limit
    /// (split placement −9% at 10 µs, −20% at 30 µs); the count does not depend on how fast
    /// the machine dispatches.
    ///
    /// The price in latency: a reply can also wait behind one more upcall of its read, if
    /// that upcall runs long right after short ones and no other pool thread is free to
    /// dispatch the rest of the read (with one pool thread, or all of them in upcalls).
    #[must_use]
    pub fn reply_batch_hold(mut self, hold: Duration) -> Self {
        self.config.reply_batch_hold = hold;
        self
    }

    /// Owned reads (default on): while a plain TCP connection is the ORB's only one, the
    /// leader waits for its next message in the socket's `recv` instead of in the event
    /// loop's poll and then `recv`, one system call fewer per message, as a thread per
    /// connection would (omniORB's model). For the run of owned reads the socket also leaves
    /// the poll set, whose kernel callback then no longer runs for every message (unless the
    /// standby is armed, which needs the set to report it). Measured on the benchmarks'
    /// 2-vCPU VM: `lat` p50 about 0.6 µs lower with both sides owning, and 0.25 µs more with
    /// the socket out of the poll set (examples/bench/PROFILE.md).
    ///
    /// An ORB that listens owns only a connection it accepted: one that calls out while it
    /// listens expects callbacks, and a peer calling back over a new connection would wait
    /// for the owned read to time out before it is accepted. So a client gets owned reads
    /// with [`no_listen`](Self::no_listen) (a client that takes no callbacks needs no
    /// listener anyway), a server while one client is connected.
    ///
    /// The bound it keeps: what the owning leader does not hear while it waits (a new
    /// connection to accept, a connection opened meanwhile by another thread, timers, a
    /// wake-up such as shutdown's) waits at most 1 ms (a run of owned reads ends with a look
    /// after that) plus one receive timeout (200 µs, which the kernel rounds up to its tick:
    /// 4 ms at 250 Hz). An owned read that brings no complete message (the peer stalls, or
    /// sends a part) makes the leader poll until a message comes by the poll again, so a
    /// stalling peer costs that bound once, not per turn. A connection with bytes queued to
    /// send, a TLS connection, and a leader within 20 ms of its deadline are never owned.
    /// While the owning thread runs an upcall with the leader role left vacant in tick mode
    /// ([`standby_tick`](Self::standby_tick)), a request on its connection waits for it or
    /// for the standby's tick, as every event does in tick mode.
    /// Off: the leader always polls.
    #[must_use]
    pub fn owned_reads(mut self, on: bool) -> Self {
        self.config.owned_reads = on;
        self
    }

    /// Soft bound of one connection's outgoing queue, in bytes (default 4 MiB; each queued
    /// buffer is charged 64 bytes more for the memory it holds).
    ///
    /// The queue fills only while the peer does not read. A frame is accepted while the queue
    /// is under the bound, so one frame of any size up to `max_message_size` always goes
    /// out. Over it, the ORB stops reading that connection (the peer's next requests wait in
    /// its socket), and a thread sending on it waits, until its deadline, for the queue to
    /// drain; the event loop itself never waits. 4 MiB is more than a loopback socket buffers
    /// and keeps a peer that never reads from pinning more than that of our memory.
    #[must_use]
    pub fn max_queued_bytes(mut self, n: usize) -> Self {
        self.config.max_queued_bytes = n;
        self
    }

    /// Most connections accepted and open at once (default 1024). Past it a new connection is
    /// accepted and closed at once, and counted in
    /// [`OrbStats::connections_refused`](crate::OrbStats::connections_refused). Connections
    /// this ORB opens do not count. Together with the per-connection bounds (README, "Limits
    /// and hostile peers") this bounds the memory peers can make the ORB hold.
    #[must_use]
    pub fn max_connections(mut self, n: usize) -> Self {
        self.config.max_connections = n;
        self
    }

    /// How long a connection may sit idle, or a partial message stall, before the ORB closes
    /// it (default 60 s; `None` never closes idle connections).
    ///
    /// Idle means nothing pending either way: no reply owed or awaited, no upcall running,
    /// nothing queued to send, no partial message. An idle accepted connection is closed
    /// with CloseConnection (a server may always send it); the peer reconnects when it next
    /// calls. Connections this ORB opened are not closed for idling (closing one could race
    /// a caller that has just picked it; the server closes them).
    /// A partial message (or fragment chain) that receives no byte for this long is dropped
    /// by closing the connection: this is the header timeout against slowloris peers.
    /// Connections are checked every quarter of the timeout, by the leader of the event loop
    /// (an ORB whose every thread is busy checks once one is free; an ORB with no pool thread
    /// and no waiting caller does not check at all). 60 s: long enough that a client pausing
    /// between calls rarely pays for a new connection, short enough that abandoned and
    /// slowloris connections give back their file descriptor and buffers within a minute or
    /// two.
    #[must_use]
    pub fn idle_timeout(mut self, d: impl Into<Option<Duration>>) -> Self {
        self.config.idle_timeout = d.into().filter(|d| !d.is_zero());
        self
    }

    /// Whether calls to objects active in this same ORB skip the socket (default on, as in
    /// TAO): a reference whose endpoint is one of this ORB's listen points and whose key is
    /// active here is dispatched on the calling thread, without marshalling a GIOP frame or
    /// waking another thread. Exceptions, deadlines (TIMEOUT), panics (UNKNOWN), oneways
    /// (run inline) and deferred replies behave as over a connection; the servant's
    /// [`Context::peer`](crate::Context::peer) is `None`. Off: such calls go over loopback
    /// like any other, which tests and benchmarks of the network path want.
    #[must_use]
    pub fn collocation(mut self, enabled: bool) -> Self {
        self.config.collocation = enabled;
        self
    }

    /// Adds a client interceptor: its hooks run around every call this ORB makes, in
    /// registration order before the request is sent and in reverse order after the reply
    /// (see [`ClientInterceptor`] for what they may do, and the order in detail).
    #[must_use]
    pub fn client_interceptor(mut self, i: impl ClientInterceptor) -> Self {
        self.config.interceptors.client.push(Arc::new(i));
        self
    }

    /// Adds a server interceptor: its hooks run around every request this ORB serves, in
    /// registration order before the servant runs and in reverse order after it (see
    /// [`ServerInterceptor`]).
    #[must_use]
    pub fn server_interceptor(mut self, i: impl ServerInterceptor) -> Self {
        self.config.interceptors.server.push(Arc::new(i));
        self
    }

    /// Speaks TLS (rustls): the listener speaks TLS only if `tls` has an identity, and calls
    /// to references with a TLS endpoint go over TLS. See [`TlsConfig`](crate::tls::TlsConfig).
    /// An unusable configuration (say, `require_client_cert` without roots) fails the build
    /// with INITIALIZE.
    #[must_use]
    pub fn tls(mut self, tls: crate::tls::TlsConfig) -> Self {
        match tls.setup() {
            Ok(setup) => self.config.tls = Some(setup),
            Err(e) => self.errors.push(format!("TLS: {e}")),
        }
        self
    }

    /// Builds the ORB: binds the listeners and starts the pool threads.
    pub fn build(self) -> Result<Orb, SystemException> {
        let init = |d: String| {
            SystemException::new(SystemExceptionKind::INITIALIZE, 0, CompletionStatus::No)
                .with_detail(d)
        };
        if let Some(e) = self.errors.first() {
            return Err(init(e.clone()));
        }
        let config = self.config;
        let reactor = Reactor::new().map_err(|e| init(format!("cannot create poller: {e}")))?;
        let mut listen_addrs = Vec::new();
        for addr in &config.listen {
            let l = mio::net::TcpListener::bind(*addr)
                .map_err(|e| init(format!("cannot listen on {addr}: {e}")))?;
            let local = l
                .local_addr()
                .map_err(|e| init(format!("listener address: {e}")))?;
            reactor
                .add_listener(l)
                .map_err(|e| init(format!("cannot register listener: {e}")))?;
            listen_addrs.push(local);
        }
        let host = config
            .host
            .clone()
            .unwrap_or_else(|| match listen_addrs.first() {
                Some(a) if !a.ip().is_unspecified() => a.ip().to_string(),
                _ => "127.0.0.1".to_string(),
            });
        let nonce = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        let standby_tick = config.standby_tick;
        let sweep_timeout = config.sweep_timeout();
        let inner = Arc::new_cyclic(|me: &Weak<OrbInner>| OrbInner {
            me_any: me.clone(),
            user: std::sync::OnceLock::new(),
            config,
            host,
            listen_addrs,
            reactor,
            lf: Lf::with_tick(standby_tick),
            adapter: Adapter::default(),
            stats: Stats::default(),
            outbound: Outbound::default(),
            bidir_routes: BidirRoutes::default(),
            upcalls: Upcalls::default(),
            shutting_down: AtomicBool::new(false),
            key_counter: AtomicU64::new(0),
            key_nonce: nonce,
            threads: Mutex::new(Vec::new()),
            id: NEXT_ORB_ID.fetch_add(1, Ordering::Relaxed),
            housekeeping: crate::timers::Housekeeping::new(sweep_timeout),
            call_deadlines: crate::timers::Deadlines::new(),
        });
        // The idle sweep's first timer, for whoever waits on the event fd.
        inner.rearm_alarm();
        let mut handles = Vec::new();
        for i in 0..inner.config.threads {
            let o = inner.clone();
            let h = std::thread::Builder::new()
                .name(format!("orb-pool-{i}"))
                .stack_size(inner.config.thread_stack_size)
                .spawn(move || o.serve_until_shutdown())
                .map_err(|e| init(format!("cannot start pool thread: {e}")))?;
            handles.push(h);
        }
        *lock(&inner.threads) = handles;
        let user = Arc::new(UserHandle {
            inner: Arc::downgrade(&inner),
        });
        let _ = inner.user.set(Arc::downgrade(&user));
        tracing::debug!(listen = ?inner.listen_addrs, threads = inner.config.threads, "orb started");
        Ok(Orb { _user: user, inner })
    }
}

/// Shared state of one ORB.
#[derive(Debug)]
pub(crate) struct OrbInner {
    /// This ORB, weakly and type-erased (`servant.rs` sits below this module): what upcall
    /// contexts hold and hand out as [`Context::orb`](crate::Context::orb).
    pub(crate) me_any: Weak<dyn std::any::Any + Send + Sync>,
    /// The application's handles, weakly (set once, by `build`): [`Context::orb`](crate::Context::orb)
    /// hands out one more of them while any is left.
    pub(crate) user: std::sync::OnceLock<Weak<UserHandle>>,
    pub(crate) config: Config,
    pub(crate) host: String,
    pub(crate) listen_addrs: Vec<SocketAddr>,
    pub(crate) reactor: Reactor<Arc<Connection>>,
    pub(crate) lf: Lf,
    pub(crate) adapter: Adapter,
    pub(crate) stats: Stats,
    /// The connections we opened, one per remote endpoint.
    pub(crate) outbound: Outbound,
    /// Inbound connections whose peer announced BiDir listen points (`bidir_accept`).
    pub(crate) bidir_routes: BidirRoutes,
    /// Upcalls parked for a pool thread, and how many run.
    pub(crate) upcalls: Upcalls,
    pub(crate) shutting_down: AtomicBool,
    key_counter: AtomicU64,
    key_nonce: u64,
    pub(crate) threads: Mutex<Vec<JoinHandle<()>>>,
    /// Unique among the process's ORBs (a thread's cached connection names its ORB by it).
    pub(crate) id: u64,
    /// The leader's timers (idle sweep, accept retry) and the inbound connection count.
    pub(crate) housekeeping: crate::timers::Housekeeping,
    /// Deadlines of asynchronous calls in flight: the connection and request id (and the
    /// request's GIOP version, for its CancelRequest) of each, or a collocated call's
    /// deferred answer, which the leader fails with TIMEOUT when due
    /// (`OrbInner::expire_calls`).
    pub(crate) call_deadlines: crate::timers::Deadlines<CallDeadline>,
}

/// What an asynchronous call's deadline entry holds (see [`OrbInner::call_deadlines`]).
#[derive(Debug)]
pub(crate) enum CallDeadline {
    /// A request on a connection: its request id and GIOP version (for its CancelRequest).
    Remote(Arc<Connection>, u32, crate::giop::Version),
    /// A collocated call whose servant deferred its answer: the future's slot and the claim
    /// on the outcome.
    Local(
        Arc<crate::lf::TaskSlot>,
        Arc<crate::upcall::LocalDeferred>,
        Box<str>,
    ),
}

/// The next [`OrbInner::id`].
static NEXT_ORB_ID: AtomicU64 = AtomicU64::new(1);

impl OrbInner {
    /// The ORB behind a context's or a reply handle's type-erased weak reference (which
    /// `servant.rs` holds so that it need not import this module), if it is still alive.
    pub(crate) fn upgrade(weak: &Weak<dyn Any + Send + Sync>) -> Option<Arc<OrbInner>> {
        weak.upgrade()?.downcast::<OrbInner>().ok()
    }

    /// A pool thread's (or `run`'s) life: serve unbound until shutdown.
    fn serve_until_shutdown(self: Arc<Self>) {
        let p = Participant::unbound();
        let _ = self.lf.run(&p, None, &*self);
    }

    pub(crate) fn check_running(&self) -> Result<(), SystemException> {
        if self.shutting_down.load(Ordering::Acquire) {
            Err(SystemException::shutdown())
        } else {
            Ok(())
        }
    }
}

impl Context {
    /// The ORB serving this request: `None` for a [`for_test`](Self::for_test) context, or
    /// once the application has let go of every handle of the ORB (it is then shutting down;
    /// a context kept past its upcall does not keep its ORB alive either).
    ///
    /// With it a servant makes nested calls, activates objects and writes references
    /// ([`Orb::object_to_string`]) without having to be built with an ORB in hand:
    ///
    /// ```
    /// fn whoami(ctx: &protorb::Context) -> Option<String> {
    ///     let orb = ctx.orb()?;
    ///     let me = orb.reference("IDL:demo/Echo:1.0", ctx.object_key().to_vec().into());
    ///     Some(orb.object_to_string(&me))
    /// }
    /// assert_eq!(whoami(&protorb::Context::for_test("op")), None);
    /// ```
    ///
    /// The handle returned is an ordinary [`Orb`], a strong one: resolving it costs two
    /// reference count increments, paid only here, never per request. While it lives the ORB
    /// is not shut down by dropping the application's handles (see [`Orb`]). Use it within
    /// the upcall and let it go; a servant that stores it keeps its own ORB alive (the ORB
    /// holds its active servants) until the servant is deactivated or [`Orb::shutdown`] is
    /// called.
    pub fn orb(&self) -> Option<Orb> {
        let inner = OrbInner::upgrade(self.orb_weak())?;
        let user = inner.user.get()?.upgrade()?;
        Some(Orb { _user: user, inner })
    }
}

/// An object request broker: serves activated objects and invokes remote ones.
///
/// Cheap to clone (`Arc` inside), `Send + Sync`. Call [`Orb::shutdown`] when done, or let
/// the last handle go: dropping the last `Orb` of an ORB (counting its clones, the
/// [`ObjectProxy`](crate::ObjectProxy)s and generated clients made with it, and those
/// [`Context::orb`](crate::Context::orb) handed out) shuts it down as `shutdown` does, on the
/// dropping thread, which may therefore wait up to the shutdown grace for running upcalls.
/// Pool threads do not keep an ORB alive. A handle stored where the ORB itself holds it
/// (in an active servant) does, until the servant is deactivated: shut such an ORB down
/// explicitly.
#[derive(Clone, Debug)]
pub struct Orb {
    /// Declared first, so dropped first: the last one shuts the ORB down while `inner` is
    /// still there.
    pub(crate) _user: Arc<UserHandle>,
    pub(crate) inner: Arc<OrbInner>,
}

/// What the application's handles of one ORB share: dropping the last one shuts it down.
/// It holds the ORB weakly (pool threads hold it strongly until shutdown).
#[derive(Debug)]
pub(crate) struct UserHandle {
    inner: Weak<OrbInner>,
}

impl Drop for UserHandle {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.upgrade() {
            if !inner.shutting_down.load(Ordering::Acquire) {
                tracing::debug!("last handle of the ORB dropped; shutting it down");
            }
            inner.shutdown();
        }
    }
}

impl Orb {
    /// A builder with the defaults (listen on `127.0.0.1:0`, 2 pool threads).
    pub fn builder() -> OrbBuilder {
        OrbBuilder::default()
    }

    /// The addresses the ORB listens on (with the real ports).
    pub fn listen_addrs(&self) -> &[SocketAddr] {
        &self.inner.listen_addrs
    }

    /// Activates `servant` under `key` and returns its reference. A servant already under that
    /// key is replaced.
    pub fn activate(&self, key: impl Into<Bytes>, servant: impl Servant) -> ObjectRef {
        self.activate_arc(key, Arc::new(servant))
    }

    /// [`Orb::activate`] for a shared servant.
    pub fn activate_arc(&self, key: impl Into<Bytes>, servant: Arc<dyn Servant>) -> ObjectRef {
        let key = key.into();
        let type_id = servant.repository_id();
        self.inner.adapter.insert(key.clone(), servant);
        self.reference(type_id, key)
    }

    /// Activates `servant` under a fresh key, unique in this ORB's life.
    pub fn activate_with_generated_key(&self, servant: impl Servant) -> ObjectRef {
        let n = self.inner.key_counter.fetch_add(1, Ordering::Relaxed);
        let key = format!("obj-{:x}-{n}", self.inner.key_nonce);
        self.activate(Bytes::from(key), servant)
    }

    /// Deactivates the object under `key`; later requests get OBJECT_NOT_EXIST. Returns whether
    /// an object was there.
    pub fn deactivate(&self, key: &[u8]) -> bool {
        self.inner.adapter.remove(key)
    }

    /// A reference to `key` in this ORB (one IIOP 1.2 profile per listen endpoint).
    pub fn reference(&self, type_id: &str, key: Bytes) -> ObjectRef {
        let profiles = self
            .inner
            .listen_addrs
            .iter()
            .map(|a| match &self.inner.config.tls {
                // TLS only, as omniORB's SSL transport publishes it: plain port 0, the TLS
                // port in TAG_SSL_SEC_TRANS.
                Some(tls) if tls.server.is_some() => crate::ior::IiopProfile::tls(
                    self.inner.host.clone(),
                    a.port(),
                    key.clone(),
                    tls.require_client_cert,
                ),
                _ => crate::ior::IiopProfile {
                    version: crate::giop::Version::V1_2,
                    host: self.inner.host.clone(),
                    port: a.port(),
                    object_key: key.clone(),
                    components: Vec::new(),
                },
            })
            .collect();
        ObjectRef::from_iiop_profiles(type_id, profiles)
    }

    /// Parses an `IOR:` string or a `corbaloc:` URL. Errors are BAD_PARAM.
    pub fn string_to_object(&self, s: &str) -> Result<ObjectRef, SystemException> {
        ObjectRef::parse(s.trim()).map_err(SystemException::from)
    }

    /// The `IOR:` string of a reference.
    pub fn object_to_string(&self, r: &ObjectRef) -> String {
        r.to_ior_string()
    }

    /// Counters: connections, requests, late replies, promotions, buffered bytes.
    pub fn stats(&self) -> OrbStats {
        let mut s = self.inner.stats.snapshot();
        s.bidir_listen_points = self.inner.bidir_routes.listen_points();
        s
    }

    /// Joins the pool on the calling thread until [`Orb::shutdown`].
    pub fn run(&self) {
        if self.inner.lf.is_shutdown() {
            return;
        }
        self.inner.clone().serve_until_shutdown();
    }

    /// Whether [`Orb::shutdown`] has been called.
    pub fn is_shut_down(&self) -> bool {
        self.inner.shutting_down.load(Ordering::Acquire)
    }

    /// Shuts the ORB down, keeping every request processed at most once:
    ///
    /// 1. Stops accepting connections and starts no new upcall: a request that arrives from
    ///    now on is answered TRANSIENT (minor `SHUTTING_DOWN`) completed NO.
    /// 2. Lets the running upcalls finish, for up to the grace period
    ///    ([`OrbBuilder::shutdown_grace`]); it returns as soon as they have. A deferred
    ///    request ([`Context::defer`]) counts as running until its
    ///    [`ReplyHandle`](crate::ReplyHandle) answers: a handle that user code holds past the
    ///    grace period delays shutdown by no more than it, and its answer is then dropped.
    /// 3. Closes every connection. One that owes no reply gets CloseConnection first (its peer
    ///    may resend what was not answered); one whose upcalls still run (or whose replies
    ///    are not sent yet) is closed without it, so that their callers see COMM_FAILURE
    ///    completed MAYBE and do not run them twice.
    ///    Threads waiting for replies wake with an error (BAD_INV_ORDER, or COMM_FAILURE for
    ///    calls on closed connections).
    /// 4. Joins the pool threads.
    ///
    /// It returns within about the grace period plus 100 ms even if an upcall never returns:
    /// a pool thread still in an upcall then is detached. It finishes its upcall on its own
    /// (its reply is discarded, the connection being closed) and exits; the servant and the
    /// ORB's internals it holds are freed when it does, among them the socket of its
    /// connection, which is shut down already but whose descriptor stays open until then.
    /// Idempotent. When it returns, no socket is open and no ORB thread is left except for
    /// such detached ones (and the calling thread, if it was called from an upcall, which
    /// then finishes its upcall and exits).
    pub fn shutdown(&self) {
        self.inner.shutdown();
    }

    pub(crate) fn nesting_error() -> SystemException {
        SystemException::new(
            SystemExceptionKind::NO_RESOURCES,
            minor::NESTING_LIMIT,
            CompletionStatus::No,
        )
        .with_detail("nested upcall depth limit reached")
    }

    pub(crate) fn stack_error(remaining: usize) -> SystemException {
        SystemException::new(
            SystemExceptionKind::NO_RESOURCES,
            minor::STACK_LOW,
            CompletionStatus::No,
        )
        .with_detail(format!(
            "only {remaining} bytes of stack left on the serving thread; upcall not run"
        ))
    }
}
