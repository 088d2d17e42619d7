//! [`ObjectProxy`]: the client-side handle generated stubs call through.

use crate::client::ami::{BoolReplyFuture, CallBody, CdrReplyFuture, OnewayFuture, ReplyFuture};
use crate::exception::{Exception, SystemException};
use crate::giop::ServiceContext;
use crate::ior::ObjectRef;
use crate::metadata::Metadata;
use crate::octets::Encoded;
use crate::orb::Orb;
use bytes::Bytes;
use std::sync::Arc;
use std::time::Duration;

/// A reference bound to an ORB: invokes operations on the remote (or collocated) object.
///
/// Cheap to clone; `Send + Sync`. Generated clients (`EchoClient`) wrap one. It holds a
/// handle of its ORB: the ORB is not shut down by dropping the application's `Orb`s while a
/// proxy made with it lives (see [`Orb`]).
#[derive(Clone, Debug)]
pub struct ObjectProxy {
    orb: Orb,
    /// Shared (a reference count) with the asynchronous calls in flight, which keep it to
    /// send again after a forward.
    target: ObjectRef,
    /// The metadata every call sends, encoded once (`None`: none, and no allocation).
    metadata: Option<Arc<[ServiceContext]>>,
}

impl ObjectProxy {
    /// A proxy for `target` that invokes through `orb`.
    pub fn new(orb: &Orb, target: ObjectRef) -> Self {
        ObjectProxy {
            orb: orb.clone(),
            target,
            metadata: None,
        }
    }

    /// This proxy with `metadata` attached to every call it makes, in place of any it had
    /// (as GIOP service contexts; a servant reads them with
    /// [`Context::metadata`](crate::Context::metadata), client interceptors see and may add
    /// to them). Encoded once, here. Cheap on a clone (`proxy.clone().with_metadata(md)`),
    /// for metadata on one call only; generated clients have `with_metadata` for that.
    ///
    /// ```
    /// # use protorb::{Metadata, ObjectProxy, Orb};
    /// # let orb = Orb::builder().threads(0).no_listen().build()?;
    /// # let target = orb.string_to_object("corbaloc::127.0.0.1:1/x")?;
    /// let mut md = Metadata::new();
    /// md.insert_str("tenant", "acme");
    /// let proxy = ObjectProxy::new(&orb, target).with_metadata(md);
    /// assert_eq!(proxy.metadata().get_str("tenant"), Some("acme"));
    /// # orb.shutdown();
    /// # Ok::<(), protorb::SystemException>(())
    /// ```
    #[must_use]
    pub fn with_metadata(mut self, metadata: Metadata) -> Self {
        self.metadata = (!metadata.is_empty()).then(|| metadata.to_contexts().into());
        self
    }

    /// The metadata contexts each call sends.
    fn md(&self) -> &[ServiceContext] {
        self.metadata.as_deref().unwrap_or(&[])
    }

    /// The metadata this proxy attaches to its calls.
    pub fn metadata(&self) -> Metadata {
        Metadata::from_contexts(self.md()).unwrap_or_default()
    }

    /// The target reference.
    pub fn target(&self) -> &ObjectRef {
        &self.target
    }

    /// The ORB this proxy invokes through.
    pub fn orb(&self) -> &Orb {
        &self.orb
    }

    /// A two-way call: sends `body` (protobuf bytes) as the single octet-sequence parameter of
    /// `operation` and waits for the reply, at most `timeout` (or the ORB's default call timeout,
    /// or the deadline inherited from the upcall this thread is serving, whichever is sooner).
    pub fn invoke(
        &self,
        operation: &str,
        body: Bytes,
        timeout: Option<Duration>,
    ) -> Result<Bytes, Exception> {
        self.orb
            .invoke(&self.target, operation, body, timeout, self.md())
    }

    /// [`invoke`](Self::invoke) with the request message itself (what generated stubs call):
    /// a small message is encoded straight into the request frame, without a buffer of its
    /// own or a copy.
    pub fn invoke_message<M: prost::Message>(
        &self,
        operation: &str,
        req: &M,
        timeout: Option<Duration>,
    ) -> Result<Bytes, Exception> {
        self.orb
            .invoke_message(&self.target, operation, req, timeout, self.md())
    }

    /// The asynchronous form of [`invoke`](Self::invoke) (AMI): sends the request now and
    /// returns a future of its reply.
    ///
    /// The request is written before this returns (or, from a task a `protorb::tokio`
    /// driver's turn has just woken, queued to go out with the other woken tasks' requests
    /// in one write at the driver's next poll), so several calls can be started and then
    /// awaited together; the future only waits for the reply. Before writing, the calling
    /// thread connects if no connection to the target's endpoint is open, and waits for room
    /// in the connection's outgoing queue if a peer that does not read has filled it, as a
    /// blocking call does, bounded by the call's deadline (and taking part in the event loop
    /// meanwhile). A failure there is the future's result.
    ///
    /// The deadline is `timeout` (or the ORB's default call timeout, or the one inherited
    /// from the upcall this thread is serving, whichever is sooner): past it the future
    /// resolves with TIMEOUT even if no reply ever comes. Dropping the future before the
    /// reply cancels the call (GIOP CancelRequest; a reply that still comes is dropped).
    ///
    /// The future works under any executor (it is woken through [`std::task::Waker`]), but
    /// it is the ORB's event loop that reads the reply: the ORB's pool threads drive it. With
    /// [`threads(0)`](crate::OrbBuilder::threads) run [`Orb::run`] on a thread of your own
    /// (or the reply is read only while a blocking call of this ORB waits). Inside an upcall,
    /// prefer the blocking call: blocking the upcall's thread on a future (say with
    /// `block_on`) takes that thread out of the pool while it waits.
    ///
    /// ```
    /// # use bytes::Bytes;
    /// # use protorb::{Context, Exception, ObjectProxy, Orb, Servant};
    /// # struct Upper;
    /// # impl Servant for Upper {
    /// #     fn repository_id(&self) -> &'static str { "IDL:demo/Upper:1.0" }
    /// #     fn dispatch(&self, _op: &str, body: Bytes, _ctx: &Context) -> Result<Bytes, Exception> {
    /// #         Ok(Bytes::from(body.to_ascii_uppercase()))
    /// #     }
    /// # }
    /// let server = Orb::builder().threads(1).build()?;
    /// let target = server.activate(&b"upper"[..], Upper);
    /// let client = Orb::builder().threads(1).no_listen().build()?;
    /// let proxy = ObjectProxy::new(&client, target);
    /// // Both requests are on the wire before either reply is awaited.
    /// let a = proxy.invoke_async("upper", Bytes::from("a"), None);
    /// let b = proxy.invoke_async("upper", Bytes::from("b"), None);
    /// # fn block_on<F: std::future::Future>(f: F) -> F::Output {
    /// #     // A minimal executor for the example: park until woken.
    /// #     struct Unpark(std::thread::Thread);
    /// #     impl std::task::Wake for Unpark {
    /// #         fn wake(self: std::sync::Arc<Self>) { self.0.unpark() }
    /// #     }
    /// #     let waker = std::task::Waker::from(std::sync::Arc::new(Unpark(std::thread::current())));
    /// #     let mut cx = std::task::Context::from_waker(&waker);
    /// #     let mut f = std::pin::pin!(f);
    /// #     loop {
    /// #         if let std::task::Poll::Ready(r) = f.as_mut().poll(&mut cx) { return r; }
    /// #         std::thread::park();
    /// #     }
    /// # }
    /// assert_eq!(&block_on(b)?[..], b"B");
    /// assert_eq!(&block_on(a)?[..], b"A");
    /// # client.shutdown();
    /// # server.shutdown();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn invoke_async(
        &self,
        operation: &str,
        body: Bytes,
        timeout: Option<Duration>,
    ) -> ReplyFuture {
        ReplyFuture::start(&self.orb, &self.target, operation, body, timeout, self.md())
    }

    /// [`invoke_async`](Self::invoke_async) with the request message itself (what generated
    /// stubs' `_async` methods call): encoded now, and sent now.
    pub fn invoke_message_async<M: prost::Message>(
        &self,
        operation: &str,
        req: &M,
        timeout: Option<Duration>,
    ) -> ReplyFuture {
        match crate::octets::encode_message(req) {
            Encoded::Whole(body) => self.invoke_async(operation, body, timeout),
            // Its large `bytes` field referenced, not copied (`octets.rs`).
            Encoded::Parts(parts) => {
                let (orb, target, md) = (&self.orb, &self.target, self.md());
                ReplyFuture::start_parts(orb, target, operation, parts, timeout, md)
            }
        }
    }

    /// A oneway call: returns once the request is handed to the connection; no reply comes.
    ///
    /// It waits, at most the ORB's default call timeout (or the deadline inherited from the
    /// upcall this thread is serving, whichever is sooner), for what handing over takes:
    /// opening the connection, and room in the connection's outgoing queue if a peer that
    /// does not read has filled it. See [`invoke_oneway_with_timeout`](Self::invoke_oneway_with_timeout).
    pub fn invoke_oneway(&self, operation: &str, body: Bytes) -> Result<(), SystemException> {
        self.orb
            .invoke_oneway(&self.target, operation, body, None, self.md())
    }

    /// [`invoke_oneway`](Self::invoke_oneway) (or, with `timeout`,
    /// [`invoke_oneway_with_timeout`](Self::invoke_oneway_with_timeout)) with the request
    /// message itself (what generated oneway stubs call): a message of 8 KiB or more with a
    /// large `bytes` field held as `Bytes` goes out without that field being copied.
    pub fn invoke_oneway_message<M: prost::Message>(
        &self,
        operation: &str,
        req: &M,
        timeout: Option<Duration>,
    ) -> Result<(), SystemException> {
        self.orb
            .invoke_oneway_message(&self.target, operation, req, timeout, self.md())
    }

    /// The asynchronous form of [`invoke_oneway_message`](Self::invoke_oneway_message), as
    /// [`invoke_oneway_async`](Self::invoke_oneway_async) is of
    /// [`invoke_oneway`](Self::invoke_oneway): the future is ready at once.
    pub fn invoke_oneway_message_async<M: prost::Message>(
        &self,
        operation: &str,
        req: &M,
        timeout: Option<Duration>,
    ) -> OnewayFuture {
        OnewayFuture::ready(self.invoke_oneway_message(operation, req, timeout))
    }

    /// The asynchronous form of [`invoke_oneway`](Self::invoke_oneway), for code that awaits
    /// its calls: hands the request to the connection now and returns a future of the
    /// outcome, which is ready at once.
    ///
    /// As for [`invoke_async`](Self::invoke_async)'s request, the handing over happens on the
    /// calling thread before this returns, and may block it: to open the connection if none
    /// is open to the target's endpoint (and to resolve the host name, which no deadline
    /// bounds), and to wait for room in the connection's outgoing queue if a peer that does
    /// not read has filled it. Both waits are bounded by the ORB's default call timeout (or
    /// the deadline inherited from the upcall this thread is serving, whichever is sooner);
    /// the thread takes part in the event loop meanwhile. A collocated object's servant runs
    /// on the calling thread, as for the blocking oneway. Client interceptors run both hooks
    /// here too. The future itself waits for nothing: a oneway has no reply, and its output
    /// is the handing over's result (TIMEOUT or TRANSIENT with nothing sent, say). It says
    /// nothing about delivery. Requests on one connection are written in the order they
    /// are handed over: a call made after the future is returned follows this oneway on
    /// the wire (whether the server also runs them in that order is up to the server).
    pub fn invoke_oneway_async(&self, operation: &str, body: Bytes) -> OnewayFuture {
        OnewayFuture::ready(self.invoke_oneway(operation, body))
    }

    /// [`invoke_oneway_async`](Self::invoke_oneway_async) bounded by `timeout` instead of
    /// the ORB's default call timeout, as
    /// [`invoke_oneway_with_timeout`](Self::invoke_oneway_with_timeout) is.
    pub fn invoke_oneway_async_with_timeout(
        &self,
        operation: &str,
        body: Bytes,
        timeout: Duration,
    ) -> OnewayFuture {
        OnewayFuture::ready(self.invoke_oneway_with_timeout(operation, body, timeout))
    }

    /// [`invoke_oneway`](Self::invoke_oneway) bounded by `timeout` instead of the ORB's
    /// default call timeout (the deadline inherited from an upcall still caps it).
    ///
    /// `timeout` bounds connecting (each address also within
    /// [`OrbBuilder::connect_timeout`](crate::OrbBuilder::connect_timeout)) and waiting for
    /// room in the outgoing queue: past it the call fails with TIMEOUT (or TRANSIENT when
    /// the connection attempt itself failed or timed out) and nothing was sent. It does not
    /// bound host name resolution, which blocks the calling thread, and it says nothing
    /// about delivery: once the request is queued the call returns, and a oneway has no
    /// reply to wait for.
    pub fn invoke_oneway_with_timeout(
        &self,
        operation: &str,
        body: Bytes,
        timeout: Duration,
    ) -> Result<(), SystemException> {
        self.orb
            .invoke_oneway(&self.target, operation, body, Some(timeout), self.md())
    }

    /// A two-way call of a plain CORBA (IDL) operation, whose parameters are not one protobuf
    /// octet sequence: `body` writes the CDR-encoded `in` and `inout` parameters, in order
    /// (e.g. an `in Object` parameter with [`ObjectRef::encode`]). Returns the results or the
    /// user exception the operation raised, for the caller to decode with
    /// [`CdrBody::reader`](crate::cdr::CdrBody::reader); a system exception in the reply is the
    /// error, as is a failed call.
    ///
    /// ```no_run
    /// use protorb::cdr::CdrReply;
    /// use protorb::{ObjectProxy, Orb};
    ///
    /// let orb = Orb::builder().threads(0).build()?;
    /// let calc = orb.string_to_object("corbaloc::127.0.0.1:2809/Calculator")?;
    /// // IDL: long add(in long a, in long b) raises (Overflow);
    /// let reply = ObjectProxy::new(&orb, calc).invoke_cdr(
    ///     "add",
    ///     &|w| {
    ///         w.write_i32(2);
    ///         w.write_i32(3);
    ///     },
    ///     None,
    /// )?;
    /// match reply {
    ///     CdrReply::NoException(results) => assert_eq!(results.reader().read_i32()?, 5),
    ///     CdrReply::UserException { repository_id, .. } => {
    ///         assert_eq!(repository_id, "IDL:demo/Calculator/Overflow:1.0")
    ///     }
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn invoke_cdr(
        &self,
        operation: &str,
        body: &dyn Fn(&mut crate::cdr::CdrWriter<'_>),
        timeout: Option<Duration>,
    ) -> Result<crate::cdr::CdrReply, SystemException> {
        self.orb
            .inner
            .call(&self.target, operation, true, body, timeout, self.md())?
            .ok_or_else(|| SystemException::internal("two-way call without reply"))?
            .into_cdr_reply()
    }

    /// The asynchronous form of [`invoke_cdr`](Self::invoke_cdr) (AMI): sends the request
    /// now and returns a future of its [`CdrReply`](crate::cdr::CdrReply), a user exception
    /// included; a system exception in the reply, or a failed call, is the future's error.
    ///
    /// The request is written before this returns, with the same waits on the calling
    /// thread, deadline, cancellation on drop and need of a thread leading the ORB's event
    /// loop as [`invoke_async`](Self::invoke_async). `body` runs before this returns too:
    /// up to eight times, once for each alignment (mod 8) a request body may start at, so
    /// that the call can be written again after a LOCATION_FORWARD or a CloseConnection
    /// without it (a GIOP 1.0 or 1.1 body follows its header unaligned).
    pub fn invoke_cdr_async(
        &self,
        operation: &str,
        body: &dyn Fn(&mut crate::cdr::CdrWriter<'_>),
        timeout: Option<Duration>,
    ) -> CdrReplyFuture {
        CdrReplyFuture::start(
            &self.orb,
            &self.target,
            operation,
            CallBody::cdr(body),
            timeout,
            self.md(),
        )
    }

    /// Asks the object whether it implements `repository_id` (remote `_is_a`).
    pub fn is_a(&self, repository_id: &str) -> Result<bool, SystemException> {
        self.orb.is_a(&self.target, repository_id)
    }

    /// The asynchronous form of [`is_a`](Self::is_a): sends the same `_is_a` request now
    /// (with the ORB's default call timeout, and as [`invoke_async`](Self::invoke_async)
    /// does) and returns a future of the answer. A collocated object answers on the calling
    /// thread, without a socket; the future is then ready at once.
    pub fn is_a_async(&self, repository_id: &str) -> BoolReplyFuture {
        BoolReplyFuture::is_a(&self.orb, &self.target, repository_id)
    }

    /// Asks whether the object no longer exists (remote `_non_existent`).
    pub fn non_existent(&self) -> Result<bool, SystemException> {
        self.orb.non_existent(&self.target)
    }

    /// The asynchronous form of [`non_existent`](Self::non_existent): sends the same
    /// `_non_existent` request now (as [`is_a_async`](Self::is_a_async) does) and returns a
    /// future of the answer; OBJECT_NOT_EXIST in the reply is the answer true, as for the
    /// blocking call.
    pub fn non_existent_async(&self) -> BoolReplyFuture {
        BoolReplyFuture::non_existent(&self.orb, &self.target)
    }
}
