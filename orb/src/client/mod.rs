//! The client side: the way of a call, and of its reply back to the caller.
//!
//! - [`invoke`]: a call from stub to wire and back: the connection to the target's endpoint,
//!   the request's framing, waiting for the reply as a bound Leader/Followers participant
//!   (leading the event loop meanwhile), deadlines, cancellation, LOCATION_FORWARD, and the
//!   reply turned into a result or an exception. The leader that reads the reply hands it over
//!   through the connection's `Mux` (`connection/mux.rs`).
//! - [`collocated`]: the early branch of a call to an object of this same ORB, handed to the
//!   server side without a socket (collocation).
//! - [`intercept`]: client interceptors around a call, when any are registered.
//! - [`proxy`]: [`ObjectProxy`](proxy::ObjectProxy), the handle generated stubs call through.
//! - [`ami`]: asynchronous calls, [`ReplyFuture`](ami::ReplyFuture): the request is sent at
//!   once by the calling thread, its reply completes a task's slot and wakes its `Waker`.

pub(crate) mod ami;
mod collocated;
mod intercept;
pub(crate) mod invoke;
pub(crate) mod proxy;
