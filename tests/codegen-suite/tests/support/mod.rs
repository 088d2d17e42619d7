//! Servants shared by the suite's tests.
#![allow(dead_code)] // each test file uses part of it

use bytes::Bytes;
use codegen_suite::suite::api::{
    GetRequest, Listener, ListenerClient, PutReply, PutRequest, QuotaExceeded, Store,
    StoreGetError, StorePutError, Subscription,
};
use codegen_suite::suite::common::{Denied, Item, NotFound};
use prost::Message;
use protorb::{Context, Exception, Orb};
use std::collections::BTreeMap;
use std::sync::Mutex;

/// Items the store accepts before QuotaExceeded.
pub const LIMIT: u32 = 3;

/// An in-memory `suite.api.Store`.
#[derive(Default)]
pub struct StoreImpl {
    pub items: Mutex<BTreeMap<String, Item>>,
    pub notified: Mutex<Vec<Item>>,
    pub subscribers: Mutex<Vec<protorb::ObjectRef>>,
    /// When set, `Subscribe` calls the listener back (`Ping`) before it returns: a nested
    /// callback into the caller's ORB.
    pub orb: Option<Orb>,
}

impl Store for StoreImpl {
    fn get(&self, _ctx: &Context, req: GetRequest) -> Result<Item, StoreGetError> {
        self.items
            .lock()
            .unwrap()
            .get(&req.id)
            .cloned()
            .ok_or_else(|| NotFound { id: req.id }.into())
    }

    fn put(&self, _ctx: &Context, req: PutRequest) -> Result<PutReply, StorePutError> {
        let item = req.item.unwrap_or_default();
        if item.id.is_empty() {
            let detail = prost_types::Struct {
                fields: [(
                    "field".to_string(),
                    prost_types::Value {
                        kind: Some(prost_types::value::Kind::StringValue("id".into())),
                    },
                )]
                .into(),
            };
            return Err(StorePutError::Denied(Denied {
                reason: "empty id".into(),
                detail: Some(detail),
            }));
        }
        let mut items = self.items.lock().unwrap();
        if items.len() as u32 >= LIMIT && !items.contains_key(&item.id) {
            return Err(QuotaExceeded { limit: LIMIT }.into());
        }
        items.insert(item.id.clone(), item);
        Ok(PutReply {
            version: items.len() as u64,
        })
    }

    fn subscribe(&self, _ctx: &Context, req: Subscription) -> Result<Subscription, Exception> {
        let listener = req.listener.clone().ok_or_else(|| {
            Exception::System(protorb::SystemException::bad_param(0, "no listener"))
        })?;
        if let Some(orb) = &self.orb {
            ListenerClient::narrow(orb, listener.clone())?.ping(())?;
        }
        self.subscribers.lock().unwrap().push(listener);
        Ok(req)
    }

    fn notify(&self, _ctx: &Context, req: Item) -> Result<(), Exception> {
        self.notified.lock().unwrap().push(req);
        Ok(())
    }

    fn clear(&self, _ctx: &Context, _req: ()) -> Result<(), Exception> {
        self.items.lock().unwrap().clear();
        Ok(())
    }

    fn count(&self, _ctx: &Context, _req: ()) -> Result<u64, Exception> {
        Ok(self.items.lock().unwrap().len() as u64)
    }

    fn age(
        &self,
        _ctx: &Context,
        req: prost_types::Timestamp,
    ) -> Result<prost_types::Duration, Exception> {
        Ok(prost_types::Duration {
            seconds: 1_000 - req.seconds,
            nanos: req.nanos,
        })
    }
}

/// A `suite.api.Listener` that records what it gets.
#[derive(Default)]
pub struct ListenerImpl {
    pub events: Mutex<Vec<Item>>,
    pub pings: Mutex<u32>,
}

impl Listener for ListenerImpl {
    fn on_event(&self, _ctx: &Context, req: Item) -> Result<(), Exception> {
        self.events.lock().unwrap().push(req);
        Ok(())
    }

    fn ping(&self, _ctx: &Context, _req: ()) -> Result<(), Exception> {
        *self.pings.lock().unwrap() += 1;
        Ok(())
    }
}

/// Encodes a message for `dispatch`.
pub fn body<M: Message>(m: &M) -> Bytes {
    Bytes::from(m.encode_to_vec())
}

/// A context for a direct `dispatch` call.
pub fn ctx(op: &str) -> Context {
    Context::for_test(op)
}

/// An item with most kinds of field set.
pub fn sample_item(id: &str) -> Item {
    use codegen_suite::suite::common::{item, Kind};
    Item {
        id: id.into(),
        name: format!("item {id}"),
        kind: Kind::Tool as i32,
        counts: [("a".to_string(), 1i64), ("b".to_string(), -2)].into(),
        tags: vec!["x".into(), "y".into()],
        created: Some(prost_types::Timestamp {
            seconds: 1_700_000_000,
            nanos: 5,
        }),
        ttl: Some(prost_types::Duration {
            seconds: 60,
            nanos: 0,
        }),
        dims: Some(item::Dims { w: 3, h: 4 }),
        payload: Some(item::Payload::Size(item::Dims { w: 1, h: 2 })),
        extra: Some(prost_types::Any {
            type_url: "type.googleapis.com/suite.common.NotFound".into(),
            value: NotFound { id: "z".into() }.encode_to_vec(),
        }),
        parts: [(7u32, item::Dims { w: 9, h: 9 })].into(),
    }
}
