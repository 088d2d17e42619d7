//! Coming from tonic: what maps to what, and what you gain.
//!
//! The build flow is the one you know: services in `.proto` files, a `build.rs` that generates
//! code, prost messages. What differs is the transport (GIOP over TCP instead of HTTP/2) and
//! the threading: methods are blocking calls served by the ORB's Leader/Followers pool, and a
//! thread that waits for a reply can serve incoming calls meanwhile.
//!
//! # What maps to what
//!
//! | tonic | this crate |
//! |---|---|
//! | `tonic_build::configure().compile_protos(..)` | `protorb_codegen::configure().compile_protos(..)` (same shape; prost-build settings such as `type_attribute`, `bytes`, `extern_path` pass through) |
//! | `tonic::include_proto!("demo")` | `protorb::include_proto!("demo")` |
//! | `#[tonic::async_trait] impl Echo for MyEcho` | `impl Echo for MyEcho`: plain methods taking `&self`, a [`Context`](crate::Context) and the request message; to answer from async code, `ctx.defer()?` gives a [`ReplyHandle`](crate::ReplyHandle) |
//! | `client.echo(req).await` | `client.echo_async(req).await` (any executor; the request is on the wire before the first poll), or the blocking `client.echo(req)` |
//! | `Request<T>` / `Response<T>` | the message itself; what the request carries beside it is in the `Context` (peer address, deadline, metadata, the ORB) |
//! | `request.metadata_mut().insert("k", v)` / `request.metadata().get("k")` | [`ObjectProxy::with_metadata`](crate::ObjectProxy::with_metadata) (per proxy; generated clients: `EchoClient::from_proxy(client.proxy().clone().with_metadata(md))`) / [`Context::metadata`](crate::Context::metadata); string pairs and binary entries keyed by a `u32` context id ([`Metadata`](crate::Metadata)) |
//! | `EchoClient::with_interceptor(channel, f)`, a tower layer on the server | [`OrbBuilder::client_interceptor`](crate::OrbBuilder::client_interceptor) / [`OrbBuilder::server_interceptor`](crate::OrbBuilder::server_interceptor), per ORB: every call and every upcall, before and after; a server hook refusing with `NO_PERMISSION` is tonic's `Err(Status::permission_denied(..))` |
//! | `Server::builder().add_service(EchoServer::new(svc)).serve(addr)` | `let orb = Orb::builder().listen(addr).build()?; let obj = orb.activate("echo", EchoSkeleton::new(svc));` |
//! | one service per path, routed by `/pkg.Service/Method` | any number of *objects* per ORB, each under its own key; a call names the object and the operation |
//! | `EchoClient::connect("http://host:50051").await?` | `EchoClient::new(&orb, orb.string_to_object("corbaloc::host:2809/echo")?)` (or an IOR string, or a reference received in a message) |
//! | `Channel` | the ORB's connection to that endpoint, opened on first use and shared by every thread and every object there; replies are routed by request id |
//! | `Status` with a `Code` | [`Exception`](crate::Exception): a CORBA system exception ([`SystemExceptionKind`](crate::SystemExceptionKind), a minor code, whether the call completed) or a *typed* user exception you declare |
//! | `Code::Unavailable` | `TRANSIENT` (could not connect; a retry may succeed) or `COMM_FAILURE` (the connection broke mid-call) |
//! | `Code::DeadlineExceeded` | `TIMEOUT` |
//! | `Code::InvalidArgument` | `BAD_PARAM` |
//! | `Code::NotFound` (no such object) | `OBJECT_NOT_EXIST` |
//! | `Code::Unimplemented` | `BAD_OPERATION` (unknown operation) or `NO_IMPLEMENT` |
//! | `Code::PermissionDenied` | `NO_PERMISSION` |
//! | `Code::ResourceExhausted` | `NO_RESOURCES` or `IMP_LIMIT` |
//! | `Code::Internal` / a panic in a handler | `INTERNAL` / `UNKNOWN` (a panicking servant answers UNKNOWN; the ORB keeps running) |
//! | `Code::Unknown` with a message | a user exception: `option (orb.raises) = "NotFound";` on the rpc, then `Err(EchoLookupError::NotFound(msg))` on both sides |
//! | a timeout layer or `Request::set_timeout` | `echo_with_timeout(req, Duration)`, or the ORB's `call_timeout`; the deadline travels to the server, which sees it in `Context` |
//! | client-streaming, server-streaming, bidi streams | not supported: the generator refuses streaming methods, or leaves them out with `skip_streaming(true)` |
//! | `Endpoint::tls_config` | not yet (planned: TLS with rustls) |
//! | response metadata (headers, trailers) | not yet: metadata travels from caller to servant only |
//!
//! # What you gain
//!
//! - **Calls back over your own connection.** An `orb.ObjectRef` field in a message carries an
//!   object reference. A server that receives one from a client can call that client's object
//!   (a listener, a callback), over the connection the client opened (bidirectional GIOP), so
//!   it works through NAT and firewalls. With tonic you would open a second server and a
//!   second channel the other way, or model callbacks as a stream.
//! - **Nested calls that never deadlock.** A servant can call another object, which calls back
//!   into the first process, to any depth, even with one thread per process: the thread waiting
//!   for its reply serves the nested request (the [threading guide](crate::guide)). The
//!   `nested` example bounces a call 1,000 levels deep between two processes with one ORB
//!   thread each.
//! - **Typed exceptions.** Declared user exceptions are generated as an enum per method, so
//!   the client matches on `EchoLookupError::NotFound(..)` instead of parsing a status
//!   message; system exceptions say what happened and whether the call completed.
//! - **CORBA interop.** omniORB (C++) and other CORBA ORBs call your services and are called
//!   by them, through IORs, `corbaloc` URLs and a CosNaming service (the `protorb-naming` crate).
//! - **Throughput over one connection.** Many threads share one multiplexed connection; the
//!   benchmark in `examples/bench` measures calls/s against tonic on one channel.
//!
//! # What you give up
//!
//! - No HTTP/2: browsers, gRPC-Web and gRPC load balancers do not speak GIOP.
//! - No streaming RPCs. Model a stream as a callback object: the client passes a reference to
//!   its listener, and the server calls it once per item.
//! - An async servant trait. Servant methods are plain functions run by the ORB's threads; a
//!   servant that must await something takes a [`ReplyHandle`](crate::ReplyHandle) with
//!   `ctx.defer()?`, returns, and answers later from a task.
