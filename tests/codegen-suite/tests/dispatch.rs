//! The generated skeletons, driven through `Servant::dispatch` directly (no ORB, no network).

mod support;

use bytes::Bytes;
use codegen_suite::suite::api::{
    GetRequest, ListenerSkeleton, PutReply, PutRequest, QuotaExceeded, StoreClient, StoreGetError,
    StorePutError, StoreSkeleton, Subscription,
};
use codegen_suite::suite::common::{Denied, Item, NotFound};
use prost::Message;
use protorb::codegen::decode_reply;
use protorb::{
    CompletionStatus, Exception, ObjectRef, Servant, SystemException, SystemExceptionKind,
    UserException, OBJECT_REPOSITORY_ID,
};
use std::sync::Arc;
use support::{body, ctx, sample_item, ListenerImpl, StoreImpl, LIMIT};

fn store() -> StoreSkeleton<StoreImpl> {
    StoreSkeleton::new(StoreImpl::default())
}

fn put(s: &dyn Servant, item: Item) -> Result<Bytes, Exception> {
    s.dispatch("Put", body(&PutRequest { item: Some(item) }), &ctx("Put"))
}

fn system(r: Result<Bytes, Exception>) -> SystemException {
    match r {
        Err(Exception::System(s)) => s,
        other => panic!("expected a system exception, got {other:?}"),
    }
}

fn user(r: Result<Bytes, Exception>) -> UserException {
    match r {
        Err(Exception::User(u)) => u,
        other => panic!("expected a user exception, got {other:?}"),
    }
}

#[test]
fn repository_ids_and_is_a() {
    let s = store();
    assert_eq!(s.repository_id(), "IDL:suite/api/Store:1.0");
    assert_eq!(
        StoreSkeleton::<StoreImpl>::REPOSITORY_ID,
        "IDL:suite/api/Store:1.0"
    );
    assert_eq!(StoreClient::REPOSITORY_ID, "IDL:suite/api/Store:1.0");
    assert!(s.is_a("IDL:suite/api/Store:1.0"));
    assert!(s.is_a(OBJECT_REPOSITORY_ID));
    assert!(!s.is_a("IDL:suite/api/Listener:1.0"));
    let l = ListenerSkeleton::new(ListenerImpl::default());
    assert_eq!(l.repository_id(), "IDL:suite/api/Listener:1.0");
}

#[test]
fn two_way_calls_return_encoded_results() {
    let s = store();
    let item = sample_item("a");
    let reply = put(&s, item.clone()).unwrap();
    assert_eq!(PutReply::decode(reply).unwrap(), PutReply { version: 1 });

    let reply = s
        .dispatch("Get", body(&GetRequest { id: "a".into() }), &ctx("Get"))
        .unwrap();
    assert_eq!(Item::decode(reply).unwrap(), item);

    // google.protobuf.Empty in, google.protobuf.UInt64Value (Rust u64) out.
    let reply = s.dispatch("Count", Bytes::new(), &ctx("Count")).unwrap();
    assert_eq!(decode_reply::<u64>(reply).unwrap(), 1);

    // Well-known types both ways.
    let ts = prost_types::Timestamp {
        seconds: 400,
        nanos: 7,
    };
    let reply = s.dispatch("Age", body(&ts), &ctx("Age")).unwrap();
    assert_eq!(
        prost_types::Duration::decode(reply).unwrap(),
        prost_types::Duration {
            seconds: 600,
            nanos: 7
        }
    );

    // Empty to Empty: an empty reply body.
    let reply = s.dispatch("Clear", Bytes::new(), &ctx("Clear")).unwrap();
    assert!(reply.is_empty());
    assert!(s.inner().items.lock().unwrap().is_empty());
}

#[test]
fn oneway_returns_an_empty_body_and_runs_the_servant() {
    let s = store();
    let reply = s
        .dispatch("Notify", body(&sample_item("n")), &ctx("Notify"))
        .unwrap();
    assert!(reply.is_empty());
    assert_eq!(s.inner().notified.lock().unwrap()[0].id, "n");
}

#[test]
fn undecodable_request_is_marshal_completed_no() {
    let s = store();
    // Field 1 (string) with a length running past the end.
    let e = system(s.dispatch("Get", Bytes::from_static(&[0x0a, 0x05, b'a']), &ctx("Get")));
    assert_eq!(e.kind, SystemExceptionKind::MARSHAL);
    assert_eq!(e.completed, CompletionStatus::No);
    let e = system(s.dispatch("Age", Bytes::from_static(&[0xff]), &ctx("Age")));
    assert_eq!(e.kind, SystemExceptionKind::MARSHAL);
}

#[test]
fn unknown_operation_is_bad_operation() {
    let s = store();
    for op in ["get", "Nope", "", "_is_a", "Store.Get"] {
        let e = system(s.dispatch(op, Bytes::new(), &ctx(op)));
        assert_eq!(e.kind, SystemExceptionKind::BAD_OPERATION, "{op}");
        assert_eq!(e.completed, CompletionStatus::No);
        assert!(e.to_string().contains(&format!("`{op}`")), "{e}");
    }
}

#[test]
fn user_exception_goes_out_with_its_repository_id_and_payload() {
    let s = store();
    let u = user(s.dispatch("Get", body(&GetRequest { id: "x".into() }), &ctx("Get")));
    assert_eq!(u.repository_id, "IDL:suite/common/NotFound:1.0");
    assert_eq!(
        NotFound::decode(u.payload).unwrap(),
        NotFound { id: "x".into() }
    );

    // Two exceptions declared on one operation, from two packages.
    let u = user(put(&s, Item::default()));
    assert_eq!(u.repository_id, "IDL:suite/common/Denied:1.0");
    let denied = Denied::decode(u.payload).unwrap();
    assert_eq!(denied.reason, "empty id");
    assert!(denied.detail.unwrap().fields.contains_key("field"));

    for i in 0..LIMIT {
        put(&s, sample_item(&i.to_string())).unwrap();
    }
    let u = user(put(&s, sample_item("over")));
    assert_eq!(u.repository_id, "IDL:suite/api/QuotaExceeded:1.0");
    assert_eq!(
        QuotaExceeded::decode(u.payload).unwrap(),
        QuotaExceeded { limit: LIMIT }
    );
}

#[test]
fn exception_enum_conversions() {
    // Servant side: typed error → wire exception.
    let e: Exception = StoreGetError::NotFound(NotFound { id: "k".into() }).into();
    let Exception::User(u) = &e else {
        panic!("{e:?}")
    };
    assert_eq!(u.repository_id, "IDL:suite/common/NotFound:1.0");

    // Client side: wire exception → typed error, by repository id.
    assert_eq!(
        StoreGetError::from(e),
        StoreGetError::NotFound(NotFound { id: "k".into() })
    );
    let quota = UserException::new(
        "IDL:suite/api/QuotaExceeded:1.0",
        body(&QuotaExceeded { limit: 9 }),
    );
    assert_eq!(
        StorePutError::from(Exception::User(quota)),
        StorePutError::QuotaExceeded(QuotaExceeded { limit: 9 })
    );

    // Undeclared user exception → UNKNOWN; undecodable payload → MARSHAL.
    let other = UserException::new("IDL:elsewhere/Boom:1.0", Bytes::new());
    let StoreGetError::System(s) = StoreGetError::from(Exception::User(other)) else {
        panic!()
    };
    assert_eq!(s.kind, SystemExceptionKind::UNKNOWN);
    assert!(s.to_string().contains("IDL:elsewhere/Boom:1.0"), "{s}");
    let bad = UserException::new("IDL:suite/common/NotFound:1.0", Bytes::from_static(&[0xff]));
    let StoreGetError::System(s) = StoreGetError::from(Exception::User(bad)) else {
        panic!()
    };
    assert_eq!(s.kind, SystemExceptionKind::MARSHAL);

    // System exceptions pass through both ways.
    let t = SystemException::timeout("late");
    assert_eq!(
        StoreGetError::from(Exception::System(t.clone())),
        StoreGetError::System(t.clone())
    );
    assert_eq!(
        Exception::from(StoreGetError::from(t.clone())),
        Exception::System(t)
    );

    // Display and Error.
    let e = StorePutError::QuotaExceeded(QuotaExceeded { limit: 1 });
    assert!(
        e.to_string()
            .starts_with("user exception IDL:suite/api/QuotaExceeded:1.0"),
        "{e}"
    );
    let e: Box<dyn std::error::Error> =
        Box::new(StorePutError::System(SystemException::shutdown()));
    assert!(e.source().is_some());
}

#[test]
fn a_system_exception_from_a_typed_servant_stays_a_system_exception() {
    struct Failing;
    impl codegen_suite::suite::api::Store for Failing {
        fn get(&self, _: &protorb::Context, _: GetRequest) -> Result<Item, StoreGetError> {
            Err(SystemException::object_not_exist("gone").into())
        }
        fn put(&self, _: &protorb::Context, _: PutRequest) -> Result<PutReply, StorePutError> {
            unimplemented!()
        }
        fn subscribe(
            &self,
            _: &protorb::Context,
            r: Subscription,
        ) -> Result<Subscription, Exception> {
            Ok(r)
        }
        fn notify(&self, _: &protorb::Context, _: Item) -> Result<(), Exception> {
            Err(SystemException::internal("dropped").into())
        }
        fn clear(&self, _: &protorb::Context, _: ()) -> Result<(), Exception> {
            Ok(())
        }
        fn count(&self, _: &protorb::Context, _: ()) -> Result<u64, Exception> {
            Ok(0)
        }
        fn age(
            &self,
            _: &protorb::Context,
            _: prost_types::Timestamp,
        ) -> Result<prost_types::Duration, Exception> {
            Ok(Default::default())
        }
    }
    let s = StoreSkeleton::new(Failing);
    let e = system(s.dispatch("Get", body(&GetRequest::default()), &ctx("Get")));
    assert_eq!(e.kind, SystemExceptionKind::OBJECT_NOT_EXIST);
    let e = system(s.dispatch("Notify", Bytes::new(), &ctx("Notify")));
    assert_eq!(e.kind, SystemExceptionKind::INTERNAL);
}

#[test]
fn object_refs_pass_through_dispatch() {
    let s = store();
    let listener = ObjectRef::new(
        "IDL:suite/api/Listener:1.0",
        "127.0.0.1",
        4242,
        &b"key-1"[..],
    );
    let sub = Subscription {
        listener: Some(listener.clone()),
        others: vec![ObjectRef::nil(), listener.clone()],
        topic: "t".into(),
    };
    let reply = s
        .dispatch("Subscribe", body(&sub), &ctx("Subscribe"))
        .unwrap();
    assert_eq!(Subscription::decode(reply).unwrap(), sub);
    assert_eq!(s.inner().subscribers.lock().unwrap()[0], listener);
}

#[test]
fn one_servant_shared_through_arc_and_dyn() {
    let shared = Arc::new(StoreImpl::default());
    let a = StoreSkeleton::new(shared.clone());
    let b: Arc<dyn Servant> = StoreSkeleton::new(shared.clone()).into_servant();
    put(&a, sample_item("s")).unwrap();
    let reply = b.dispatch("Count", Bytes::new(), &ctx("Count")).unwrap();
    assert_eq!(decode_reply::<u64>(reply).unwrap(), 1);
    // A trait object works as the servant too.
    let dynamic: Arc<dyn codegen_suite::suite::api::Store> = shared;
    let c = StoreSkeleton::new(dynamic);
    assert_eq!(
        decode_reply::<u64>(c.dispatch("Count", Bytes::new(), &ctx("Count")).unwrap()).unwrap(),
        1
    );
}

#[test]
fn generated_types_are_send_and_sync() {
    fn check<T: Send + Sync + 'static>() {}
    check::<StoreSkeleton<StoreImpl>>();
    check::<StoreClient>();
    check::<codegen_suite::suite::api::ListenerClient>();
    check::<StoreGetError>();
    check::<StorePutError>();
}
