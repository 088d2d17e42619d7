//! The ORB's configuration as [`OrbBuilder`](crate::OrbBuilder) sets it, with its defaults:
//! plain data, read by every layer, changed by none after the build.

use crate::giop::DEFAULT_MAX_MESSAGE_SIZE;
use crate::identity::PeerIdentity;
use crate::interceptor::Interceptors;
use crate::tls::TlsSetup;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// Configuration, fixed at build time.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    pub(crate) listen: Vec<SocketAddr>,
    pub(crate) host: Option<String>,
    pub(crate) threads: usize,
    pub(crate) call_timeout: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) max_message_size: usize,
    pub(crate) max_dispatches_per_connection: usize,
    pub(crate) max_nesting_depth: usize,
    pub(crate) upcall_stack_reserve: usize,
    pub(crate) nested_upcalls: bool,
    pub(crate) shutdown_grace: Duration,
    pub(crate) thread_stack_size: usize,
    pub(crate) max_queued_bytes: usize,
    pub(crate) bidir: bool,
    pub(crate) bidir_accept: bool,
    pub(crate) standby_tick: Option<Duration>,
    pub(crate) reply_batch_hold: Duration,
    pub(crate) owned_reads: bool,
    pub(crate) max_connections: usize,
    pub(crate) idle_timeout: Option<Duration>,
    pub(crate) collocation: bool,
    pub(crate) interceptors: Interceptors,
    /// TLS, if configured: the rustls configurations.
    pub(crate) tls: Option<TlsSetup>,
    /// Which authenticated TLS peers may announce BiDir listen points (`None`: any).
    pub(crate) bidir_allow: Option<IdentityRule>,
}

/// A rule on a peer's identity (the application's closure).
#[derive(Clone)]
pub(crate) struct IdentityRule(pub(crate) Arc<dyn Fn(&PeerIdentity) -> bool + Send + Sync>);

impl std::fmt::Debug for IdentityRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("IdentityRule(..)")
    }
}

impl Config {
    /// The period base of the leader's connection sweep: the idle timeout, or the TLS
    /// handshake timeout if shorter; `None` when neither applies (no sweep).
    pub(crate) fn sweep_timeout(&self) -> Option<Duration> {
        let handshake = self.tls.as_ref().map(|t| t.handshake_timeout);
        match (self.idle_timeout, handshake) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: vec![SocketAddr::from(([127, 0, 0, 1], 0))],
            host: None,
            threads: 2,
            call_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(5),
            max_message_size: DEFAULT_MAX_MESSAGE_SIZE,
            max_dispatches_per_connection: 64,
            max_nesting_depth: 1024,
            upcall_stack_reserve: 256 << 10,
            nested_upcalls: true,
            shutdown_grace: Duration::from_secs(5),
            thread_stack_size: 64 << 20,
            max_queued_bytes: 4 << 20,
            bidir: true,
            bidir_accept: false,
            standby_tick: Some(Duration::from_millis(10)),
            reply_batch_hold: Duration::from_micros(50),
            owned_reads: true,
            max_connections: 1024,
            idle_timeout: Some(Duration::from_secs(60)),
            collocation: true,
            interceptors: Interceptors::default(),
            tls: None,
            bidir_allow: None,
        }
    }
}
