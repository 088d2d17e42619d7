//! Server interceptors around an upcall (the order and guarantees are in `interceptor.rs`):
//! the branch [`run_servant`](OrbInner::run_servant) takes only when some are registered.

use crate::giop::Body;
use crate::interceptor::{hook_panicked, Outcome};
use crate::orb::OrbInner;
use crate::result_slot::ResultSlot;
use crate::servant::Context;
use crate::server::dispatch::{Answer, ReplyBody};
use std::panic::{catch_unwind, AssertUnwindSafe};

impl OrbInner {
    /// Runs the server interceptors' before hooks, the servant (unless one refused), then the
    /// after hooks of those whose before hook succeeded, in reverse order. A panicking hook
    /// is the request's UNKNOWN; the other hooks still run (a before hook's panic counts as a
    /// refusal), so that hooks pairing state (a thread-local pushed before, popped after)
    /// stay paired.
    // Kept out of `run_servant`'s frame, which nested upcalls stack up.
    #[inline(never)]
    pub(super) fn run_intercepted(
        &self,
        body: Body,
        ctx: &Context,
        depth: usize,
        result: &mut ResultSlot,
    ) -> Answer {
        let chain = &self.config.interceptors.server;
        let mut ran = 0;
        let mut refused = None;
        for i in chain {
            match catch_unwind(AssertUnwindSafe(|| i.receive_request(ctx))) {
                Ok(Ok(())) => ran += 1,
                Ok(Err(e)) => {
                    tracing::debug!(error = %e, "request refused by a server interceptor");
                    refused = Some(e);
                    break;
                }
                Err(_) => {
                    // As a refusal: the hooks that ran still get their after hook.
                    tracing::error!(operation = ctx.operation(), "server interceptor panicked");
                    refused = Some(hook_panicked());
                    break;
                }
            }
        }
        let reply = match refused {
            Some(e) => Answer::Body(ReplyBody::System(e)),
            None => self.run_guarded(body, ctx, depth, result),
        };
        let outcome = match &reply {
            _ if ctx.is_deferred() => Outcome::Deferred,
            Answer::InSlot
            | Answer::Body(ReplyBody::Octets(_) | ReplyBody::Parts(_) | ReplyBody::Bool(_)) => {
                Outcome::Ok
            }
            Answer::Body(ReplyBody::User(_)) => Outcome::UserException,
            Answer::Body(ReplyBody::System(e)) => Outcome::SystemException(e),
        };
        let mut panicked = false;
        for i in chain[..ran].iter().rev() {
            if catch_unwind(AssertUnwindSafe(|| i.send_reply(ctx, outcome))).is_err() {
                tracing::error!(operation = ctx.operation(), "server interceptor panicked");
                panicked = true;
            }
        }
        if panicked {
            return Answer::Body(ReplyBody::System(hook_panicked()));
        }
        reply
    }
}
