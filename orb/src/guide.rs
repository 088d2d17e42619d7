//! The threading model: the hybrid client/server Leader/Followers pool, explained.
//!
//! # Who runs what
//!
//! An ORB has one event loop (a `mio::Poll` holding its listeners, every connection and a
//! waker) and no dedicated I/O thread. Threads take turns driving it:
//!
//! ```text
//!                      ┌──────────────────────────── one ORB ───────────────────────────┐
//!   caller thread ──►  │  bound waiter (waits for reply #42)  ─┐                        │
//!   caller thread ──►  │  bound waiter (waits for reply #44)  ─┤   followers: a LIFO    │
//!   pool thread   ──►  │  unbound (serves only)               ─┘   stack, one condvar   │
//!                      │                                           each                 │
//!                      │  LEADER ── poll() ── reads sockets ──┬── reply #44 ──► hand to │
//!                      │                                      │      its waiter (wake)  │
//!                      │                                      └── request ──► promote a │
//!                      │                                          follower, then run    │
//!                      │                                          the upcall itself     │
//!                      └────────────────────────────────────────────────────────────────┘
//! ```
//!
//! - The **pool threads** ([`OrbBuilder::threads`](crate::OrbBuilder::threads), default 2)
//!   only serve.
//! - A thread that **calls a stub** sends its request and then joins the pool *bound* to its
//!   request id: while it waits it may become the leader, and as leader it reads every
//!   connection of the ORB, so it can serve an incoming request (a callback) itself. That is
//!   why nested callbacks never deadlock, even with zero pool threads on the calling side and
//!   one on the other: the thread waiting for the reply serves the nested request.
//! - The leader promotes a follower before it runs user code (so the sockets are always
//!   watched), preferring an idle pool thread over a waiting caller. Replies need no
//!   promotion: the leader stores the reply in the waiter's slot and wakes that one thread.
//! - That promotion is lazy when nothing else is pending: an idle pool thread waits as the
//!   *standby* in a poll set that watches the event loop, and the leader merely arms it. The
//!   standby wakes only if an event arrives while the upcall runs; otherwise the upcall
//!   thread leads again afterwards and nobody was woken. After 64 upcalls in a row that
//!   needed no standby, even arming stops (*tick mode*: the standby checks every 10 ms
//!   instead, saving two system calls per request); see
//!   [`standby_tick`](crate::OrbBuilder::standby_tick) for what that trades.
//! - A pool thread that hands a caller its reply, with no other caller waiting, stands aside
//!   the same way (the role vacant, the standby armed): a caller in a request-reply loop then
//!   leads its own next wait and reads its reply itself. With many callers waiting, a pool
//!   thread keeps leading and hands out their replies.
//! - A waiting caller that leads runs a request itself only if the request belongs to its own
//!   *call chain* (a chain id that two-way requests carry, after the deadline, in our vendor
//!   context, and that nested calls pass on, so a callback is recognised) or if no pool
//!   thread is idle. Anything else it hands to an idle pool thread, so an unrelated slow
//!   upcall never holds a caller's reply up (TAO bug 3531b). The other way round, a pool
//!   thread that reads a callback of a call a caller waits in, and has no other pool thread
//!   to promote, hands the callback with the event loop to that caller instead of running it:
//!   the chain's callbacks run on the thread that made the call, and the pool thread, left
//!   free, does not end up bound in the chain too (which cost a wake-up per level). Opening
//!   a connection is a wait of the same kind: the connect is non-blocking and the caller
//!   leads while it waits.
//! - Choosing `threads` for a client: with one calling thread at a time, `threads(0)` is
//!   the cheapest (no standby to arm and disarm around each call; about 1 µs per call on
//!   our 2-vCPU machine); with many concurrent callers on a connection, keep pool threads (the
//!   default), so that one of them leads while the callers sleep (about 10% more calls per
//!   second with 32 callers). See `examples/bench/PROFILE.md`.
//!
//! # Where to read the code
//!
//! - The Leader/Followers protocol: `orb/src/lf/` (`mod.rs`; the standby and tick mode
//!   beside it). Its `Driver` trait is all it knows of the rest.
//! - The way of a request, on the server: `server/leader.rs`. The leader's loop (`lead_holding`)
//!   reads a connection (`service`), decodes a frame and routes it (`handle_frame`); a request
//!   becomes an `Upcall` (`upcall.rs`) that runs on this thread or an idle pool thread
//!   (`upcall`, `dispatch`), and its reply leaves through `transport.rs` (`send_or_wait`).
//! - The way of a reply, on the client: `client/invoke.rs` registers the caller in the connection's
//!   `Mux` (`connection/mux.rs`, the only place a reply is routed) and sends; the leader's
//!   `handle_frame` asks the `Mux` for the waiter and hands the reply over (`lf`'s
//!   `complete`). An asynchronous call (`client/ami.rs`,
//!   [`ObjectProxy::invoke_async`](crate::ObjectProxy::invoke_async)) registers a task's slot
//!   instead of a thread (`lf/waiter.rs`): the leader stores the reply there and wakes the
//!   task's `Waker`, and fires its deadline from the timers it polls with (`timers.rs`).
//! - What both share, connecting, sending, closing: `transport.rs`; where a call goes (the
//!   connection per endpoint, BiDir routes, a thread's cached connection): `endpoints.rs`; one
//!   connection's state (read and write state machines, back-pressure, replies owed):
//!   `orb/src/connection/`.
//! - Every table has one owner type whose methods keep its invariants, written on the type:
//!   `Mux` (request ids and waiters), `Owed` (replies owed, running upcalls), `ListenPoints`,
//!   `Outbound`, `BidirRoutes`, `Upcalls` (parked and running upcalls), the reactor's slab, and
//!   the `lf` tables (followers, the leader role, the standby).
//!
//! # Limits
//!
//! - [`max_nesting_depth`](crate::OrbBuilder::max_nesting_depth) caps nested upcalls on one
//!   thread (NO_RESOURCES beyond it). Nested upcalls recurse on the serving thread's stack:
//!   pool threads get 64 MiB of address space; give your own calling threads enough stack for
//!   the depth you need. Whatever the depth, a thread with less than
//!   [`upcall_stack_reserve`](crate::OrbBuilder::upcall_stack_reserve) of stack left answers
//!   NO_RESOURCES (minor `STACK_LOW`) instead of running the upcall, so no peer can overflow
//!   a stack and abort the process.
//! - [`max_dispatches_per_connection`](crate::OrbBuilder::max_dispatches_per_connection)
//!   stops reading a connection while that many of its upcalls run (back-pressure). An upcall
//!   waiting for a nested reply does not count: it is not running.
//! - Nested upcalls can be disabled ([`nested_upcalls(false)`](crate::OrbBuilder::nested_upcalls))
//!   to show what the classic thread pool suffers: a waiting thread then never serves, and a
//!   callback chain longer than the pool deadlocks until the call timeout.
//!
//! # Deadlines
//!
//! Every two-way call has a deadline (the per-call timeout, else the ORB's
//! [`call_timeout`](crate::OrbBuilder::call_timeout)). It travels to the server in a service
//! context; calls a servant makes while serving inherit the remaining time, so a chain of
//! nested calls cannot outlive its first caller. On timeout the caller gets TIMEOUT, a
//! CancelRequest goes to the server (the servant sees [`Context::is_cancelled`](crate::Context::is_cancelled)),
//! and a late reply is dropped and counted. An asynchronous call's future resolves with
//! TIMEOUT at its deadline the same way (the leader's timer fires it, with no thread waiting),
//! and a future dropped before its reply cancels it likewise.
//!
//! # Performance
//!
//! - Build services with link-time optimisation (`lto = "fat"`, `codegen-units = 1`, as the
//!   workspace's `perf` profile does): a call's hot path crosses this crate, `bytes`, `prost`
//!   and the generated code, and LTO took 11-13% of the instructions off each call.
//! - A small call allocates little: stubs encode the request message straight into the
//!   request frame ([`ObjectProxy::invoke_message`](crate::ObjectProxy::invoke_message)),
//!   replies are encoded into a per-thread buffer, and a calling thread reuses its pool
//!   entry, as an upcall thread reuses its [`Context`](crate::Context), from one call to the
//!   next. A servant may keep a clone of its `Context`: a context still held is never reused.
//! - Received frames are slices of per-connection read chunks (8 KiB or more). With
//!   `bytes` fields generated as `Bytes`, a field you keep keeps its chunk alive; copy small
//!   ones you store for long.
//! - Many callers on one connection are served in batches: one read and one `writev` carry
//!   many requests or replies, and the server wakes about once per batch. On a small machine
//!   that pays most when the busy processes do not share CPUs (`taskset`, cpusets): on a
//!   2-vCPU VM, 32 callers over one connection made 1.8× the calls/s of raw TCP's 32
//!   connections with the server and the client on a CPU each, but 0.6× when the scheduler
//!   spread every thread over both CPUs.
//! - `examples/bench/run.sh` compares the ORB with raw TCP; `examples/bench/PROFILE.md` says
//!   where the time goes and what each change bought.

pub mod coming_from_omniorb;
pub mod coming_from_tonic;
