//! The invocation half of a collocated call: a reference whose endpoint is one of this
//! ORB's listen points and whose object key is active here is called without a socket,
//! through [`Collocated`] (implemented by `server/`, which runs the servant on the calling
//! thread; its module docs give the semantics). Turned off with
//! [`OrbBuilder::collocation`](crate::OrbBuilder::collocation).

use super::invoke::Params;
use crate::cdr::{ByteOrder, CdrWriter};
use crate::exception::SystemException;
use crate::giop::{Body, Reply};
use crate::ior::IiopProfile;
use crate::lf::TaskSlot;
use crate::orb::OrbInner;
use crate::upcall::{Collocated, LocalAnswer, LocalCaller};
use bytes::BytesMut;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

impl OrbInner {
    /// Whether a call to `profile` stays in this ORB: collocation is on, the endpoint is one
    /// of our listen points (the host as we write it in references, or the listen address's
    /// IP), and the object is active here. (An inactive key goes over the socket, whose
    /// answer, OBJECT_NOT_EXIST, is the same.)
    pub(super) fn is_collocated(&self, profile: &IiopProfile) -> bool {
        // Asked on every call: a process that does not listen answers first (it has no
        // objects to reach).
        if !self.config.collocation || self.listen_addrs.is_empty() {
            return false;
        }
        // A TLS-only reference (ours, when our listener speaks TLS) has its port in the
        // TAG_SSL_SEC_TRANS component.
        let port = match profile.port {
            0 => match profile.ssl() {
                Some(ssl) => ssl.port,
                None => return false,
            },
            port => port,
        };
        self.listen_addrs.iter().any(|a| {
            a.port() == port
                && (profile.host == self.host
                    || profile.host.parse::<IpAddr>().is_ok_and(|ip| ip == a.ip()))
        }) && self.adapter.contains(&profile.object_key)
    }

    /// Calls `operation` on the collocated object of `profile`: the parameters written as
    /// they would be into a request's body, the reply read as one from a connection.
    // Kept out of the remote call's frame, which nested calls stack up.
    #[inline(never)]
    pub(super) fn call_local(
        &self,
        profile: &IiopProfile,
        operation: &str,
        twoway: bool,
        params: Params<'_>,
        deadline: Instant,
    ) -> Result<Option<Reply>, SystemException> {
        match self.call_local_with(profile, operation, twoway, params, deadline, None)? {
            LocalAnswer::Now(reply) => Ok(reply),
            LocalAnswer::Later(_) => Err(SystemException::internal(
                "a deferred collocated answer left to a task that does not exist",
            )),
        }
    }

    /// [`call_local`](Self::call_local), for an asynchronous call when `task` is given: a
    /// deferred answer then completes `task` later instead of being waited for.
    pub(super) fn call_local_with(
        &self,
        profile: &IiopProfile,
        operation: &str,
        twoway: bool,
        params: Params<'_>,
        deadline: Instant,
        task: Option<&Arc<TaskSlot>>,
    ) -> Result<LocalAnswer, SystemException> {
        let mut buf = BytesMut::new();
        (params.write)(&mut CdrWriter::new(&mut buf, ByteOrder::NATIVE));
        let body = Body {
            bytes: buf.freeze(),
            offset: 0,
            order: ByteOrder::NATIVE,
        };
        let caller = match (twoway, task) {
            (false, _) => LocalCaller::Oneway,
            (true, None) => LocalCaller::Thread,
            (true, Some(slot)) => LocalCaller::Task(slot),
        };
        self.call_collocated(
            profile.object_key.clone(),
            operation,
            caller,
            body,
            deadline,
            params.metadata,
        )
    }
}
