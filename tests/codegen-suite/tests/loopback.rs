//! Generated clients against generated skeletons through two real ORBs on loopback: typed
//! results and exceptions, oneway, `narrow`, timeouts, and a callback object passed in a
//! message and called back during the upcall.

mod support;

use codegen_suite::suite::api::{
    GetRequest, ListenerClient, ListenerSkeleton, PutRequest, QuotaExceeded, StoreClient,
    StoreGetError, StorePutError, StoreSkeleton, Subscription,
};
use codegen_suite::suite::common::NotFound;
use protorb::{Orb, SystemExceptionKind};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{sample_item, ListenerImpl, StoreImpl, LIMIT};

use codegen_suite::plain::{Note, Plain, PlainClient, PlainSkeleton};
use protorb::{Context, Exception, SystemException};

struct Pair {
    server: Orb,
    client: Orb,
}

impl Pair {
    fn new() -> Pair {
        let build = || Orb::builder().threads(2).build().expect("orb builds");
        Pair {
            server: build(),
            client: build(),
        }
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        self.client.shutdown();
        self.server.shutdown();
    }
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn typed_calls_and_exceptions_over_the_wire() {
    let p = Pair::new();
    let store = Arc::new(StoreImpl::default());
    let obj = p
        .server
        .activate("store", StoreSkeleton::new(store.clone()));
    let ior = p.server.object_to_string(&obj);

    let client = StoreClient::narrow(&p.client, p.client.string_to_object(&ior).unwrap()).unwrap();
    assert_eq!(client.object_ref().type_id(), StoreClient::REPOSITORY_ID);

    let item = sample_item("a");
    let reply = client
        .put(PutRequest {
            item: Some(item.clone()),
        })
        .unwrap();
    assert_eq!(reply.version, 1);
    assert_eq!(client.get(GetRequest { id: "a".into() }).unwrap(), item);
    assert_eq!(
        client
            .get_with_timeout(GetRequest { id: "a".into() }, Duration::from_secs(5))
            .unwrap(),
        item
    );
    assert_eq!(client.count(()).unwrap(), 1);

    assert_eq!(
        client.get(GetRequest { id: "zz".into() }),
        Err(StoreGetError::NotFound(NotFound { id: "zz".into() }))
    );
    for i in 1..LIMIT {
        client
            .put(PutRequest {
                item: Some(sample_item(&i.to_string())),
            })
            .unwrap();
    }
    assert_eq!(
        client.put(PutRequest {
            item: Some(sample_item("over")),
        }),
        Err(StorePutError::QuotaExceeded(QuotaExceeded { limit: LIMIT }))
    );
    assert!(matches!(
        client.put(PutRequest { item: None }),
        Err(StorePutError::Denied(d)) if d.reason == "empty id"
    ));

    client.notify(sample_item("n")).unwrap();
    wait_until("the oneway call", || {
        store.notified.lock().unwrap().len() == 1
    });

    client.clear(()).unwrap();
    assert_eq!(client.count(()).unwrap(), 0);
}

#[test]
fn narrow_checks_the_type() {
    let p = Pair::new();
    let obj = p
        .server
        .activate("listener", ListenerSkeleton::new(ListenerImpl::default()));
    // A Listener is not a Store: the type id differs, and the object says no to `_is_a`.
    let e = StoreClient::narrow(&p.client, obj.clone()).unwrap_err();
    assert_eq!(e.kind, SystemExceptionKind::BAD_PARAM);
    assert!(e.to_string().contains("IDL:suite/api/Store:1.0"), "{e}");
    // Without a type id in the reference, `narrow` asks the object.
    let untyped = obj.clone().with_type_id("");
    ListenerClient::narrow(&p.client, untyped.clone()).unwrap();
    assert!(StoreClient::narrow(&p.client, untyped).is_err());
    let e = StoreClient::narrow(&p.client, protorb::ObjectRef::nil()).unwrap_err();
    assert_eq!(e.kind, SystemExceptionKind::BAD_PARAM);
    // `new` does not check; calling the wrong interface is BAD_OPERATION from the skeleton.
    let wrong = StoreClient::new(&p.client, obj);
    let Err(StoreGetError::System(e)) = wrong.get(GetRequest::default()) else {
        panic!()
    };
    assert_eq!(e.kind, SystemExceptionKind::BAD_OPERATION);
}

#[test]
fn callback_object_passed_in_a_message() {
    let p = Pair::new();
    let store = StoreImpl {
        orb: Some(p.server.clone()),
        ..StoreImpl::default()
    };
    let store_ref = p.server.activate("store", StoreSkeleton::new(store));
    let listener = Arc::new(ListenerImpl::default());
    let listener_ref = p
        .client
        .activate("me", ListenerSkeleton::new(listener.clone()));

    let client = StoreClient::narrow(&p.client, store_ref).unwrap();
    let sub = Subscription {
        listener: Some(listener_ref.clone()),
        others: vec![],
        topic: "t".into(),
    };
    // The store calls `Ping` on our listener before it replies (a nested callback).
    let back = client.subscribe(sub.clone()).unwrap();
    assert_eq!(back, sub);
    assert_eq!(*listener.pings.lock().unwrap(), 1);

    // The reference that came back works as a client too.
    let again = ListenerClient::narrow(&p.client, back.listener.unwrap()).unwrap();
    again.ping(()).unwrap();
    again.on_event(sample_item("e")).unwrap();
    wait_until("the oneway event", || {
        listener.events.lock().unwrap().len() == 1
    });
    assert_eq!(*listener.pings.lock().unwrap(), 2);
}

/// A request over the client's maximum message size fails before it is sent, with MARSHAL
/// (COMPLETED_NO), whether the stub encodes it into the frame (small) or into a buffer of its
/// own (from 8 KiB on); the server never sees it, and the connection still works.
#[test]
fn an_oversized_request_is_refused_before_it_is_sent() {
    let server = Orb::builder().threads(2).build().expect("orb builds");
    let client = Orb::builder()
        .threads(2)
        .max_message_size(1024)
        .build()
        .expect("orb builds");
    let store = Arc::new(StoreImpl::default());
    let obj = server.activate("store", StoreSkeleton::new(store.clone()));
    let ior = server.object_to_string(&obj);
    let stub = StoreClient::new(&client, client.string_to_object(&ior).unwrap());
    for name_len in [2_000, 20_000] {
        let mut item = sample_item("big");
        item.name = "n".repeat(name_len);
        match stub.put(PutRequest { item: Some(item) }) {
            Err(StorePutError::System(e)) => {
                assert_eq!(e.kind, SystemExceptionKind::MARSHAL, "{e}");
                assert_eq!(e.minor, protorb::minor::MESSAGE_TOO_LARGE, "{e}");
                assert_eq!(e.completed, protorb::CompletionStatus::No, "{e}");
            }
            other => panic!("{name_len}-byte name: {other:?}"),
        }
    }
    assert_eq!(
        stub.count(()).unwrap(),
        0,
        "an oversized put reached the server"
    );
    stub.put(PutRequest {
        item: Some(sample_item("small")),
    })
    .unwrap();
    assert_eq!(stub.count(()).unwrap(), 1);
    client.shutdown();
    server.shutdown();
}

/// A oneway's `_with_timeout` variant is delivered like the plain call, once a connection is
/// open and when a new one must be opened.
#[test]
fn oneway_with_timeout_is_delivered() {
    let p = Pair::new();
    let store = Arc::new(StoreImpl::default());
    let obj = p
        .server
        .activate("store", StoreSkeleton::new(store.clone()));
    let client = StoreClient::new(&p.client, obj);
    client
        .notify_with_timeout(sample_item("first"), Duration::from_secs(5))
        .unwrap();
    client.notify(sample_item("second")).unwrap();
    client
        .notify_with_timeout(sample_item("third"), Duration::from_secs(5))
        .unwrap();
    wait_until("the oneway calls", || {
        store.notified.lock().unwrap().len() == 3
    });
    // Pool threads serve oneways concurrently: the order they ran in is not the order sent.
    let mut ids: Vec<String> = store
        .notified
        .lock()
        .unwrap()
        .iter()
        .map(|i| i.id.clone())
        .collect();
    ids.sort();
    assert_eq!(ids, ["first", "second", "third"]);
}

/// A oneway's timeout bounds connecting: to an endpoint whose accept queue is full (the
/// handshake never completes), `notify_with_timeout` gives up within its timeout, though
/// the ORB's own connect and call timeouts are a minute, and says TIMEOUT or TRANSIENT
/// (completed NO: nothing was sent).
#[test]
fn oneway_with_timeout_to_a_hanging_endpoint_gives_up() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let mut queued = Vec::new();
    // Loopback completes a handshake within the connect call, so the first connect that
    // times out found the accept queue full.
    loop {
        match std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
            Ok(s) => queued.push(s),
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => break,
            Err(e) => panic!("filling the accept queue: {e} after {}", queued.len()),
        }
        assert!(queued.len() < 10_000, "the accept queue never fills");
    }
    let client = Orb::builder()
        .threads(1)
        .connect_timeout(Duration::from_secs(60))
        .call_timeout(Duration::from_secs(60))
        .build()
        .expect("orb builds");
    let target = client
        .string_to_object(&format!("corbaloc::127.0.0.1:{}/store", addr.port()))
        .unwrap();
    let stub = StoreClient::new(&client, target);
    let start = Instant::now();
    let e = stub
        .notify_with_timeout(sample_item("lost"), Duration::from_millis(300))
        .unwrap_err();
    let took = start.elapsed();
    assert!(
        matches!(
            e.kind,
            SystemExceptionKind::TIMEOUT | SystemExceptionKind::TRANSIENT
        ),
        "{e}"
    );
    assert_eq!(e.completed, protorb::CompletionStatus::No, "{e}");
    assert!(took < Duration::from_secs(10), "took {took:?}");
    client.shutdown();
    drop(queued);
}

/// A `Plain` servant built without an ORB: it reaches the ORB serving it through
/// [`Context::orb`]. `"activate"` activates `listener` in that ORB and answers its IOR;
/// any other text is the IOR of a `Listener` it pings (a nested call) before it answers.
struct OrbFromContext {
    listener: Arc<ListenerImpl>,
}

impl Plain for OrbFromContext {
    fn echo(&self, ctx: &Context, req: Note) -> Result<Note, Exception> {
        let orb = ctx
            .orb()
            .ok_or_else(|| SystemException::internal("no ORB in the upcall's context"))?;
        if req.text == "activate" {
            let r = orb.activate_with_generated_key(ListenerSkeleton::new(self.listener.clone()));
            return Ok(Note {
                text: orb.object_to_string(&r),
            });
        }
        let target = orb.string_to_object(&req.text)?;
        ListenerClient::narrow(&orb, target)?.ping(())?;
        Ok(Note {
            text: "pinged".into(),
        })
    }
}

/// A servant uses `ctx.orb()` inside an upcall to create a reference in its ORB (the client
/// then calls the object it names) and to make a nested call back to the client's ORB.
#[test]
fn a_servant_reaches_its_orb_from_the_context() {
    let p = Pair::new();
    let theirs = Arc::new(ListenerImpl::default());
    let obj = p.server.activate(
        "plain",
        PlainSkeleton::new(OrbFromContext {
            listener: theirs.clone(),
        }),
    );
    let client = PlainClient::narrow(&p.client, obj).unwrap();

    let ior = client.echo(Note {
        text: "activate".into(),
    });
    let ior = ior.unwrap().text;
    let activated = p.client.string_to_object(&ior).unwrap();
    assert_eq!(
        activated.primary().map(|pr| pr.port),
        Some(p.server.listen_addrs()[0].port()),
        "the reference does not name the serving ORB"
    );
    ListenerClient::narrow(&p.client, activated)
        .unwrap()
        .ping(())
        .unwrap();
    assert_eq!(*theirs.pings.lock().unwrap(), 1);

    let mine = Arc::new(ListenerImpl::default());
    let mine_ref = p
        .client
        .activate("mine", ListenerSkeleton::new(mine.clone()));
    let reply = client
        .echo(Note {
            text: p.client.object_to_string(&mine_ref),
        })
        .unwrap();
    assert_eq!(reply.text, "pinged");
    assert_eq!(*mine.pings.lock().unwrap(), 1);
}

/// A `Plain` servant that holds `ctx.orb()` until told to let go.
struct HoldsItsOrb {
    go: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
    entered: std::sync::Mutex<std::sync::mpsc::Sender<()>>,
}

impl Plain for HoldsItsOrb {
    fn echo(&self, ctx: &Context, req: Note) -> Result<Note, Exception> {
        let orb = ctx.orb();
        let _ = self.entered.lock().unwrap().send(());
        let _ = self
            .go
            .lock()
            .unwrap()
            .recv_timeout(Duration::from_secs(20));
        // The last handle of the ORB: dropping it shuts the ORB down from inside this upcall.
        drop(orb);
        Ok(req)
    }
}

/// The handle `ctx.orb()` hands out counts: the ORB keeps serving after the application
/// drops its own, and when the servant drops that last handle inside its upcall, on a pool
/// thread, the ORB shuts down without deadlocking.
#[test]
fn the_last_handle_dropped_inside_an_upcall_shuts_the_orb_down() {
    let server = Orb::builder().threads(2).build().expect("orb builds");
    let client_orb = Orb::builder().threads(0).build().expect("orb builds");
    let (go, go_rx) = std::sync::mpsc::channel();
    let (entered_tx, entered) = std::sync::mpsc::channel();
    let obj = server.activate(
        "hold",
        PlainSkeleton::new(HoldsItsOrb {
            go: std::sync::Mutex::new(go_rx),
            entered: std::sync::Mutex::new(entered_tx),
        }),
    );
    let addr = server.listen_addrs()[0];
    let client = PlainClient::new(&client_orb, obj);
    let call = std::thread::spawn(move || client.echo(Note { text: "x".into() }));
    entered
        .recv_timeout(Duration::from_secs(10))
        .expect("the upcall started");
    let started = Instant::now();
    drop(server);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "dropping a handle while the servant holds another one waited"
    );
    assert!(
        std::net::TcpStream::connect(addr).is_ok(),
        "the ORB stopped while its servant held a handle"
    );
    go.send(()).unwrap();
    // The reply may or may not have gone out before the connection closed.
    let _ = call.join().expect("the caller returned");
    wait_until("the ORB to stop accepting", || {
        std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err()
    });
    client_orb.shutdown();
}
