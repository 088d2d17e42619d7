//! The hostile set: rpcs named `Drop`, `Type`, `Self`, `Clone`, `New`, `Narrow`, `Fn`...;
//! messages named `Result`, `Context`, `Exception`, `Option`, `System`, `Self`; two services
//! sharing method names; a nested package with its own `Result`; a file without a package.
//! That this file compiles (and the crate passes clippy) is most of the test.

mod support;

use bytes::Bytes;
use codegen_suite::plain::{Note, PlainSkeleton};
use codegen_suite::suite::hostile::inner::{self, Deep, DeepEchoError, DeepSkeleton};
use codegen_suite::suite::hostile::{
    Context, Exception, Hostile, HostileClient, HostileSelfError, HostileSkeleton, Option, Result,
    Self_, System, Twin, TwinClient, TwinSelfError, TwinSkeleton,
};
use prost::Message;
use protorb::Servant;
use support::{body, ctx};

type R<T, E = protorb::Exception> = core::result::Result<T, E>;

struct H;

impl Hostile for H {
    fn drop(&self, _: &protorb::Context, req: Result) -> R<Context> {
        Ok(Context {
            depth: req.value.len() as u32,
        })
    }
    fn r#type(&self, _: &protorb::Context, req: Exception) -> R<Option> {
        Ok(Option {
            set: !req.what.is_empty(),
        })
    }
    fn self_(&self, _: &protorb::Context, req: Context) -> R<Result, HostileSelfError> {
        match req.depth {
            0 => Err(Exception {
                what: "zero".into(),
            }
            .into()),
            1 => Err(System { code: 1 }.into()),
            2 => Err(protorb::SystemException::internal("two").into()),
            d => Ok(Result {
                value: d.to_string(),
            }),
        }
    }
    fn clone(&self, _: &protorb::Context, req: Option) -> R<Exception> {
        Ok(Exception {
            what: req.set.to_string(),
        })
    }
    fn new(&self, _: &protorb::Context, req: Self_) -> R<Self_> {
        Ok(req)
    }
    fn narrow(&self, _: &protorb::Context, _: ()) -> R<Result> {
        Ok(Result {
            value: "narrowed".into(),
        })
    }
    fn r#fn(&self, _: &protorb::Context, _: Result) -> R<()> {
        Ok(())
    }
    fn with_metadata(&self, _: &protorb::Context, req: Result) -> R<Result> {
        Ok(req)
    }
    fn from_parts(&self, _: &protorb::Context, req: Result) -> R<Result> {
        Ok(req)
    }
    fn into_inner(&self, _: &protorb::Context, req: Result) -> R<Result> {
        Ok(req)
    }
    fn next(&self, _: &protorb::Context, req: Result) -> R<Result> {
        Ok(req)
    }
    fn default(&self, _: &protorb::Context, req: Result) -> R<Result> {
        Ok(req)
    }
    fn as_mut(&self, _: &protorb::Context, req: Result) -> R<Result> {
        Ok(req)
    }
    fn is_empty(&self, _: &protorb::Context, req: Result) -> R<Option> {
        Ok(Option {
            set: req.value.is_empty(),
        })
    }
}

struct T2;

impl Twin for T2 {
    fn drop(&self, _: &protorb::Context, _: Result) -> R<Context> {
        Ok(Context { depth: 2 })
    }
    fn clone(&self, _: &protorb::Context, _: Option) -> R<Exception> {
        Ok(Exception::default())
    }
    fn self_(&self, _: &protorb::Context, _: Context) -> R<Result, TwinSelfError> {
        Err(TwinSelfError::Exception(Exception {
            what: "twin".into(),
        }))
    }
}

fn call<M: Message + Default>(s: &dyn Servant, op: &str, req: Bytes) -> M {
    M::decode(s.dispatch(op, req, &ctx(op)).unwrap()).unwrap()
}

#[test]
fn rust_keywords_and_std_names_dispatch_by_proto_name() {
    let s = HostileSkeleton::new(H);
    assert_eq!(s.repository_id(), "IDL:suite/hostile/Hostile:1.0");
    let c: Context = call(
        &s,
        "Drop",
        body(&Result {
            value: "abc".into(),
        }),
    );
    assert_eq!(c.depth, 3);
    let o: Option = call(&s, "Type", body(&Exception { what: "w".into() }));
    assert!(o.set);
    let e: Exception = call(&s, "Clone", body(&Option { set: true }));
    assert_eq!(e.what, "true");
    let me = Self_ { me: "me".into() };
    assert_eq!(call::<Self_>(&s, "New", body(&me)), me);
    assert_eq!(call::<Result>(&s, "Narrow", Bytes::new()).value, "narrowed");
    assert!(s
        .dispatch("Fn", body(&Result::default()), &ctx("Fn"))
        .unwrap()
        .is_empty());
    for op in ["FromParts", "IntoInner", "Next", "Default", "AsMut"] {
        let r = Result { value: op.into() };
        assert_eq!(call::<Result>(&s, op, body(&r)), r);
    }
    assert!(call::<Option>(&s, "IsEmpty", body(&Result::default())).set);
    // Rust spellings are not operation names.
    for op in ["drop", "type", "r#type", "self_", "Self_", "new"] {
        let e = s.dispatch(op, Bytes::new(), &ctx(op)).unwrap_err();
        assert_eq!(
            e.kind(),
            Some(protorb::SystemExceptionKind::BAD_OPERATION),
            "{op}"
        );
    }
}

#[test]
fn exception_named_exception_and_one_named_system() {
    let s = HostileSkeleton::new(H);
    let run = |depth| s.dispatch("Self", body(&Context { depth }), &ctx("Self"));
    let protorb::Exception::User(u) = run(0).unwrap_err() else {
        panic!()
    };
    assert_eq!(u.repository_id, "IDL:suite/hostile/Exception:1.0");
    assert_eq!(
        HostileSelfError::from(protorb::Exception::User(u)),
        HostileSelfError::Exception(Exception {
            what: "zero".into()
        })
    );
    // The message `System` does not collide with the enum's `System` variant.
    let protorb::Exception::User(u) = run(1).unwrap_err() else {
        panic!()
    };
    assert_eq!(u.repository_id, "IDL:suite/hostile/System:1.0");
    assert_eq!(
        HostileSelfError::from(protorb::Exception::User(u)),
        HostileSelfError::SuiteHostileSystem(System { code: 1 })
    );
    assert_eq!(
        run(2).unwrap_err().kind(),
        Some(protorb::SystemExceptionKind::INTERNAL)
    );
    assert_eq!(
        call::<Result>(&s, "Self", body(&Context { depth: 5 })).value,
        "5"
    );
}

#[test]
fn services_sharing_method_names_stay_apart() {
    let t = TwinSkeleton::new(T2);
    assert_eq!(t.repository_id(), "IDL:suite/hostile/Twin:1.0");
    assert_eq!(
        call::<Context>(&t, "Drop", body(&Result::default())).depth,
        2
    );
    let protorb::Exception::User(u) = t
        .dispatch("Self", body(&Context::default()), &ctx("Self"))
        .unwrap_err()
    else {
        panic!()
    };
    assert_eq!(u.repository_id, "IDL:suite/hostile/Exception:1.0");
    assert_ne!(HostileClient::REPOSITORY_ID, TwinClient::REPOSITORY_ID);
}

struct D;

impl Deep for D {
    fn echo(&self, _: &protorb::Context, req: Result) -> R<inner::Result, DeepEchoError> {
        match req.value.as_str() {
            "exception" => Err(Exception {
                what: "deep".into(),
            }
            .into()),
            "result" => Err(inner::Result { code: 7 }.into()),
            v => Ok(inner::Result {
                code: v.len() as i64,
            }),
        }
    }
    fn super_(&self, _: &protorb::Context, req: inner::Result) -> R<Result> {
        Ok(Result {
            value: req.code.to_string(),
        })
    }
}

#[test]
fn nested_package_with_its_own_result() {
    let d = DeepSkeleton::new(D);
    assert_eq!(d.repository_id(), "IDL:suite/hostile/inner/Deep:1.0");
    let r: inner::Result = call(
        &d,
        "Echo",
        body(&Result {
            value: "abcd".into(),
        }),
    );
    assert_eq!(r.code, 4);
    let r: Result = call(&d, "Super", body(&inner::Result { code: 12 }));
    assert_eq!(r.value, "12");
    let protorb::Exception::User(u) = d
        .dispatch(
            "Echo",
            body(&Result {
                value: "result".into(),
            }),
            &ctx("Echo"),
        )
        .unwrap_err()
    else {
        panic!()
    };
    assert_eq!(u.repository_id, "IDL:suite/hostile/inner/Result:1.0");
    assert_eq!(
        DeepEchoError::from(protorb::Exception::User(u)),
        DeepEchoError::Result(inner::Result { code: 7 })
    );
}

#[test]
fn file_without_package() {
    struct P;
    impl codegen_suite::plain::Plain for P {
        fn echo(&self, _: &protorb::Context, req: Note) -> R<Note> {
            Ok(req)
        }
    }
    let p = PlainSkeleton::new(P);
    assert_eq!(p.repository_id(), "IDL:Plain:1.0");
    let n = Note { text: "hi".into() };
    assert_eq!(call::<Note>(&p, "Echo", body(&n)), n);
}

#[test]
fn client_method_names_avoid_the_clients_own() {
    // Compile-time checks: the operations `New`, `Narrow`, `WithMetadata` and `Clone` get an
    // `_op` suffix on the client, so `HostileClient::new`/`narrow`/`with_metadata` and
    // `Clone::clone` keep their meaning.
    let _: fn(&HostileClient, Self_) -> R<Self_> = HostileClient::new_op;
    let _: fn(&HostileClient, Result) -> R<Result> = HostileClient::with_metadata_op;
    let _: fn(&HostileClient, protorb::Metadata) -> HostileClient = HostileClient::with_metadata;
    let _: fn(&HostileClient, ()) -> R<Result> = HostileClient::narrow_op;
    let _: fn(&HostileClient, Option) -> R<Exception> = HostileClient::clone_op;
    let _: fn(&HostileClient, Context) -> R<Result, HostileSelfError> = HostileClient::self_;
    let _: fn(&HostileClient, Exception) -> R<Option> = HostileClient::r#type;
    let _: fn(&HostileClient, Result) -> R<(), protorb::SystemException> = HostileClient::r#fn;
    let _: fn(&HostileClient) -> HostileClient = <HostileClient as core::clone::Clone>::clone;
    let _: fn(&TwinClient, Option) -> R<Exception> = TwinClient::clone_op;
}
