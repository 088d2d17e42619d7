//! Client interceptors around a call (the order and guarantees are in `interceptor.rs`):
//! the branch [`call_with`](OrbInner::call_with) takes only when some are registered.

use super::invoke::Params;
use crate::exception::SystemException;
use crate::giop::{Reply, ReplyStatus};
use crate::interceptor::{ClientRequest, Outcome};
use crate::ior::ObjectRef;
use crate::metadata::Metadata;
use crate::orb::OrbInner;
use std::time::Duration;

impl OrbInner {
    /// Runs the client interceptors' before hooks, the call (with the metadata they left),
    /// then the after hooks of those whose before hook succeeded, in reverse order.
    // Kept out of `call_with`: its frame would be on every nested call's stack.
    #[inline(never)]
    pub(super) fn call_intercepted(
        &self,
        target: &ObjectRef,
        operation: &str,
        twoway: bool,
        params: Params<'_>,
        timeout: Option<Duration>,
    ) -> Result<Option<Reply>, SystemException> {
        let chain = &self.config.interceptors.client;
        // The proxy's metadata is ours already: it decodes.
        let metadata = Metadata::from_contexts(params.metadata).unwrap_or_default();
        let mut request = ClientRequest {
            operation,
            target,
            twoway,
            metadata,
            reply_metadata: Metadata::new(),
        };
        let mut ran = 0;
        let mut result = Ok(None);
        for i in chain {
            if let Err(e) = i.send_request(&mut request) {
                tracing::debug!(error = %e, "call failed by a client interceptor; not sent");
                result = Err(e);
                break;
            }
            ran += 1;
        }
        if ran == chain.len() {
            let contexts = request.metadata.to_contexts();
            let params = Params {
                metadata: &contexts,
                ..params
            };
            result = self.call_hops(target, operation, twoway, params, timeout);
        }
        if let Ok(Some(reply)) = &result {
            request.reply_metadata = reply_metadata(reply);
        }
        let reply_exception;
        let outcome = match &result {
            Err(e) => Outcome::SystemException(e),
            Ok(None) => Outcome::Ok,
            Ok(Some(reply)) => match reply.header.status {
                ReplyStatus::UserException => Outcome::UserException,
                ReplyStatus::SystemException => {
                    reply_exception = reply.system_exception();
                    Outcome::SystemException(&reply_exception)
                }
                _ => Outcome::Ok,
            },
        };
        for i in chain[..ran].iter().rev() {
            i.receive_reply(&request, outcome);
        }
        result
    }
}

/// The metadata among a reply's service contexts; dropped (with a warning) if the server
/// sent more than the bound or string pairs that do not decode: the call itself succeeded or
/// failed on its own, and a hostile server gains nothing by failing it through its metadata.
/// (`ami.rs` too, for asynchronous calls.)
pub(super) fn reply_metadata(reply: &Reply) -> Metadata {
    match Metadata::from_contexts(&reply.header.service_context.0) {
        Ok(md) => md,
        Err(e) => {
            tracing::warn!(error = %e, "reply metadata dropped");
            Metadata::new()
        }
    }
}
