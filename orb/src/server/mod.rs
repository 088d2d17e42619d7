//! The server side: the way of a request, in two files.
//!
//! - [`leader`]: what the Leader/Followers leader does with the reactor's events: accept,
//!   read, route each frame (a Reply to its waiting caller through the connection's
//!   [`Mux`](crate::connection), a Request to an upcall, a CancelRequest to the running upcall),
//!   flush, close; and which thread runs a request.
//! - [`dispatch`]: running the request: the upcall into the servant (stack check, panic
//!   catching, cancellation, deadline) and the reply it sends back.
//!
//! - [`intercept`]: server interceptors around the servant, when any are registered.
//! - [`collocated`]: the upcall half of a call from this ORB to one of its own objects, run
//!   on the calling thread without a socket (the client hands it over through
//!   [`Collocated`](crate::upcall::Collocated)).
//!
//! - [`turn`]: one non-blocking turn of the leader's work, for an application that drives the
//!   event loop from its own runtime (`Orb::turn`).
//!
//! Beside them, [`housekeeping`]: what the leader does apart from messages (accepting, the idle
//! sweep, the accept retry).
//!
//! Both are methods of [`OrbInner`](crate::orb::OrbInner), the ORB's shared state; the tables
//! they change each have an owner type of their own below (`connection/`, `lf/`,
//! `upcall.rs`, `adapter.rs`). The client side is `client/`.

mod collocated;
pub(crate) mod dispatch;
mod housekeeping;
mod intercept;
pub(crate) mod leader;
pub(crate) mod turn;
