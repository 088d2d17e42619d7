//! Coming from omniORB: the same wire, a different way to write interfaces.
//!
//! This ORB speaks GIOP 1.0–1.2 over TCP, writes and reads IORs and `corbaloc` URLs, and is
//! tested against omniORB 4.2 both ways (the interop suite in `tests/interop`). What differs
//! is the interface language: services are written in `.proto` files, and every operation
//! takes one protobuf message and returns one.
//!
//! # Interfaces: from IDL to .proto, and back
//!
//! On the wire an operation is `Octets op(in Octets request)`, with
//! `typedef sequence<octet> Octets;` holding the protobuf bytes, and a user exception is
//! `exception E { Octets data; };`. The repository id of a service is `IDL:pkg/Service:1.0`.
//! `orb idl --proto FILE` (the `orb` command-line tool, crate `protorb-cli`) prints that IDL for
//! your services, with `#pragma ID` for the repository ids, so omniidl compiles the C++ side
//! against exactly what the Rust side serves. The interop suite builds its omniORB peers from
//! such exported IDL.
//!
//! To call an existing IDL interface with ordinary parameters (CosNaming, your own legacy
//! servers), use [`ObjectProxy::invoke_cdr`](crate::ObjectProxy::invoke_cdr): a closure writes
//! the parameters with a [`CdrWriter`](crate::cdr::CdrWriter), and the reply is read with a
//! [`CdrReader`](crate::cdr::CdrReader). The `protorb-naming` crate is built that way.
//!
//! # What maps to what
//!
//! | omniORB | this crate |
//! |---|---|
//! | `CORBA::ORB_init(argc, argv)` | `Orb::builder()…build()?` |
//! | `-ORBendPoint giop:tcp:host:port` | `.listen("host:port")`; `.host("name")` for the name written into IORs |
//! | a POA, `activate_object_with_id` | `orb.activate("key", FooSkeleton::new(servant))` (one adapter per ORB, objects by key) |
//! | `_this()`, `object_to_string` | the [`ObjectRef`](crate::ObjectRef) that `activate` returns; `orb.object_to_string(&r)` |
//! | `string_to_object("IOR:…" / "corbaloc:…")`, `_narrow` | `orb.string_to_object(..)?`, then `FooClient::new(&orb, r)` or `FooClient::narrow(&orb, r)?` (`_is_a` over the wire) |
//! | `_non_existent()` | `ObjectProxy::non_existent`; `orb ping REF` on the command line |
//! | `catior` | `orb ior REF` |
//! | `nameclt`, `resolve_initial_references("NameService")` | `orb ns --ns HOST:PORT ls/resolve/bind/unbind`; `protorb_naming::NamingContext::at(&orb, host, port)` |
//! | `-ORBclientCallTimeOutPeriod` | `.call_timeout(d)`, or per call `foo_with_timeout(req, d)` |
//! | `-ORBclientConnectTimeOutPeriod` | `.connect_timeout(d)` |
//! | `-ORBgiopMaxMsgSize` | `.max_message_size(n)` |
//! | `-ORBmaxServerThreadPoolSize` | `.threads(n)` (the pool; callers waiting for replies also serve) |
//! | `-ORBofferBiDirectionalGIOP 1` (client) | `.bidir(true)` (the default) |
//! | `-ORBacceptBiDirectionalGIOP 1` + the BiDir POA policy (server) | `.bidir_accept(true)`: callbacks go over the client's connection only for references that arrived over it, omniORB's rule |
//! | `CORBA::SystemException` and its minor codes | [`SystemException`](crate::SystemException): the same kinds, repository ids and completion status; OMG minor codes in [`minor`](crate::minor) |
//! | user exceptions | `option (orb.raises) = "NotFound";` on the rpc; the generated per-method enum |
//! | oneway operations | `option (orb.oneway) = true;` on an rpc returning `google.protobuf.Empty` |
//! | SSL transport (`giop:ssl::port`) | not yet (planned: rustls, interoperating with omniORB's `TAG_SSL_SEC_TRANS`) |
//! | AMI (asynchronous invocation) | `foo_async(req)`: a `Future` of the reply, written to the wire at once |
//! | AMH (asynchronous handling) | `ctx.defer()?` in the servant: a [`ReplyHandle`](crate::ReplyHandle) answers later from any thread |
//! | collocation (`-ORBCollocation`) | on by default: a call to an object of the same ORB runs without a socket; `.collocation(false)` turns it off |
//! | `valuetype`, `any`, DII | not available; protobuf messages take the place of complex IDL types (`orb call` on the command line does dynamic invocation from JSON) |
//!
//! # Threading: what is different
//!
//! In omniORB a thread blocked in a call does nothing else until its reply arrives: a chain of
//! nested callbacks needs a free thread per level in each process (the benchmark's `nest`
//! workload, 1,000 levels with one server thread per side, deadlocks omniORB). Here a thread
//! that waits for a reply may lead the event loop and serve incoming requests meanwhile, so
//! nested callbacks work at any depth with one thread per process (see the
//! [threading guide](crate::guide)).
