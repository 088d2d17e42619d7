//! End-to-end smoke test of the runtime with a hand-written servant (no code generation).

use bytes::Bytes;
use protorb::{Context, Exception, ObjectProxy, Orb, Servant};

struct Upper;

impl Servant for Upper {
    fn repository_id(&self) -> &'static str {
        "IDL:smoke/Upper:1.0"
    }
    fn dispatch(&self, op: &str, body: Bytes, _ctx: &Context) -> Result<Bytes, Exception> {
        match op {
            "upper" => Ok(Bytes::from(body.to_ascii_uppercase())),
            _ => Err(protorb::SystemException::bad_operation(op).into()),
        }
    }
}

#[test]
fn call_through_a_proxy() {
    let server = Orb::builder().threads(1).build().unwrap();
    let r = server.activate(&b"up"[..], Upper);
    let client = Orb::builder().threads(0).build().unwrap();
    let ior = server.object_to_string(&r);
    let r2 = client.string_to_object(&ior).unwrap();
    let p = ObjectProxy::new(&client, r2);
    for i in 0..100 {
        let out = p
            .invoke("upper", Bytes::from(format!("hello {i}")), None)
            .unwrap();
        assert_eq!(&out[..], format!("HELLO {i}").as_bytes());
    }
    assert!(p.is_a("IDL:smoke/Upper:1.0").unwrap());
    client.shutdown();
    server.shutdown();
}
