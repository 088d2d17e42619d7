//! [`Metadata`]: the service contexts of a request that belong to the application, not to
//! the ORB: what a caller attaches to a call ([`ObjectProxy::with_metadata`], a generated
//! client's `with_metadata`, a client interceptor) and a servant reads
//! ([`Context::metadata`]); and those of a reply, which the servant and server interceptors
//! add ([`Context::reply_metadata_mut`]) and client interceptors read
//! ([`ClientRequest::reply_metadata`]).
//!
//! On the wire each binary entry is one GIOP service context (its id, its bytes as they
//! are); the string pairs travel together in one vendor context,
//! [`Metadata::STRINGS_CONTEXT_ID`], an encapsulated `sequence<struct { string key; string
//! value; }>`. Peers that know neither (omniORB) ignore them.
//!
//! The ORB's own contexts (the deadline and call chain, BiDir listen points, error text)
//! are never metadata: they are not shown to servants, and a caller cannot send them.
//!
//! Bounds: a request's metadata holds at most [`Metadata::MAX_ENTRIES`] binary entries and
//! as many string pairs; a request over either is refused with BAD_PARAM (completed NO)
//! before any servant or interceptor runs. Bytes are bounded by the maximum message size
//! (the entries are slices of the received frame: nothing is copied). A reply's metadata has
//! the same bounds; over them it is dropped (logged), not the call failed.
//!
//! [`ObjectProxy::with_metadata`]: crate::ObjectProxy::with_metadata
//! [`Context::metadata`]: crate::Context::metadata
//! [`Context::reply_metadata_mut`]: crate::Context::reply_metadata_mut
//! [`ClientRequest::reply_metadata`]: crate::ClientRequest::reply_metadata

use crate::cdr::{encapsulate, ByteOrder, CdrReader};
use crate::exception::{minor, SystemException};
use crate::giop::{context_id, ServiceContext};
use bytes::Bytes;

/// Smallest encoding of one string pair: two empty strings (length + NUL each).
const MIN_PAIR_SIZE: usize = 10;

/// Service contexts a caller attaches to a request and a servant reads.
///
/// Binary entries are keyed by a `u32` service context id; string pairs are a convenience
/// carried in one context. Cheap when empty: an empty `Metadata` holds no allocation.
///
/// ```
/// let mut md = protorb::Metadata::new();
/// md.insert_str("tenant", "acme");
/// md.insert(0x4142_0001, &b"\x01\x02"[..]);
/// assert_eq!(md.get_str("tenant"), Some("acme"));
/// assert_eq!(&md.get(0x4142_0001).unwrap()[..], b"\x01\x02");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Metadata {
    binary: Vec<ServiceContext>,
    strings: Vec<(String, String)>,
}

impl Metadata {
    /// The service context id of the string pairs (vendor-tagged, "RB" + 3).
    pub const STRINGS_CONTEXT_ID: u32 = context_id::METADATA;

    /// Most binary entries, and most string pairs, a request may carry.
    pub const MAX_ENTRIES: usize = 64;

    /// Empty metadata, as a constant.
    pub(crate) const EMPTY: Metadata = Metadata {
        binary: Vec::new(),
        strings: Vec::new(),
    };

    /// Empty metadata.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether there is nothing in it.
    pub fn is_empty(&self) -> bool {
        self.binary.is_empty() && self.strings.is_empty()
    }

    /// Sets the binary entry `id` (a GIOP service context id) to `data`, replacing one
    /// already there. The ORB's own ids (the deadline, BiDir, error text, string metadata)
    /// are not sent: inserting one is ignored (and logged).
    pub fn insert(&mut self, id: u32, data: impl Into<Bytes>) {
        if is_reserved(id) {
            tracing::warn!(id, "metadata entry with a reserved context id ignored");
            return;
        }
        let data = data.into();
        match self.binary.iter_mut().find(|c| c.id == id) {
            Some(c) => c.data = data,
            None => self.binary.push(ServiceContext { id, data }),
        }
    }

    /// The data of binary entry `id`.
    pub fn get(&self, id: u32) -> Option<&Bytes> {
        self.binary.iter().find(|c| c.id == id).map(|c| &c.data)
    }

    /// The binary entries, as (context id, data), in insertion (or arrival) order.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &Bytes)> {
        self.binary.iter().map(|c| (c.id, &c.data))
    }

    /// Sets the string pair `key` to `value`, replacing one already there.
    pub fn insert_str(&mut self, key: impl Into<String>, value: impl Into<String>) {
        let (key, value) = (key.into(), value.into());
        match self.strings.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => *v = value,
            None => self.strings.push((key, value)),
        }
    }

    /// The value of string pair `key`.
    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.strings
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The string pairs, in insertion (or arrival) order.
    pub fn iter_str(&self) -> impl Iterator<Item = (&str, &str)> {
        self.strings.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Adds `other`'s entries and pairs, replacing those with the same id or key.
    pub fn extend(&mut self, other: &Metadata) {
        for c in &other.binary {
            self.insert(c.id, c.data.clone());
        }
        for (k, v) in &other.strings {
            self.insert_str(k.clone(), v.clone());
        }
    }

    /// The service contexts that carry this metadata on the wire.
    pub(crate) fn to_contexts(&self) -> Vec<ServiceContext> {
        let mut list = self.binary.clone();
        if !self.strings.is_empty() {
            let data = encapsulate(ByteOrder::NATIVE, |w| {
                w.write_len(self.strings.len());
                for (k, v) in &self.strings {
                    w.write_string(k);
                    w.write_string(v);
                }
            });
            list.push(ServiceContext {
                id: context_id::METADATA,
                data: data.freeze(),
            });
        }
        list
    }

    /// [`from_contexts`](Self::from_contexts) for an upcall's context: boxed, and `None`
    /// without building anything when the list holds none of the application's contexts
    /// (the usual request: a `Metadata` by value cost ~35 instructions to build and more to
    /// move and drop, callgrind).
    pub(crate) fn boxed_from_contexts(
        list: &[ServiceContext],
    ) -> Result<Option<Box<Self>>, SystemException> {
        // The ORB's own contexts, except the application's string pairs (METADATA).
        if list
            .iter()
            .all(|c| is_reserved(c.id) && c.id != context_id::METADATA)
        {
            return Ok(None);
        }
        let md = Self::from_contexts(list)?;
        Ok((!md.is_empty()).then(|| Box::new(md)))
    }

    /// The metadata among a request's service contexts: every context but the ORB's own,
    /// the string pairs decoded. No allocation when there is none. BAD_PARAM (completed NO)
    /// if there are more than [`MAX_ENTRIES`](Self::MAX_ENTRIES) entries or pairs, or the
    /// string context does not decode.
    pub(crate) fn from_contexts(list: &[ServiceContext]) -> Result<Self, SystemException> {
        let mut md = Metadata::default();
        for c in list {
            if c.id == context_id::METADATA {
                md.strings = decode_strings(&c.data)?;
            } else if !is_reserved(c.id) {
                if md.binary.len() == Self::MAX_ENTRIES {
                    return Err(too_many("service contexts"));
                }
                md.binary.push(c.clone());
            }
        }
        Ok(md)
    }
}

/// Whether `id` is one of the ORB's own contexts.
fn is_reserved(id: u32) -> bool {
    matches!(
        id,
        context_id::DEADLINE
            | context_id::BI_DIR_IIOP
            | context_id::ERROR_TEXT
            | context_id::METADATA
    )
}

fn too_many(what: &str) -> SystemException {
    SystemException::bad_param(
        minor::BAD_PARAMETERS,
        format!("more than {} metadata {what}", Metadata::MAX_ENTRIES),
    )
}

/// Decodes the string pairs' context data (an encapsulation in either byte order).
fn decode_strings(data: &[u8]) -> Result<Vec<(String, String)>, SystemException> {
    let bad = |e: crate::cdr::DecodeError| {
        SystemException::bad_param(
            minor::BAD_PARAMETERS,
            format!("metadata context does not decode: {e}"),
        )
    };
    let mut r = CdrReader::encapsulation(data).map_err(bad)?;
    let n = r.read_count(MIN_PAIR_SIZE).map_err(bad)?;
    if n > Metadata::MAX_ENTRIES {
        return Err(too_many("string pairs"));
    }
    let mut pairs = Vec::with_capacity(n);
    for _ in 0..n {
        let k = r.read_string().map_err(bad)?;
        let v = r.read_string().map_err(bad)?;
        pairs.push((k, v));
    }
    Ok(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_through_contexts() {
        let mut md = Metadata::new();
        md.insert(7, Bytes::from_static(b"seven"));
        md.insert_str("k", "v");
        md.insert_str("k", "w");
        md.insert(context_id::DEADLINE, Bytes::new());
        let list = md.to_contexts();
        assert_eq!(list.len(), 2);
        let mut with_ours = list.clone();
        with_ours.push(ServiceContext {
            id: context_id::DEADLINE,
            data: Bytes::from_static(&[1, 2]),
        });
        let back = Metadata::from_contexts(&with_ours).unwrap();
        assert_eq!(back, md);
        assert_eq!(back.get_str("k"), Some("w"));
        // An upcall's: the same, boxed; nothing for a list of the ORB's own contexts only,
        // and the string pairs alone are the application's too.
        let boxed = Metadata::boxed_from_contexts(&with_ours).unwrap();
        assert_eq!(boxed.as_deref(), Some(&md));
        assert_eq!(
            Metadata::boxed_from_contexts(&with_ours[2..]).unwrap(),
            None
        );
        assert_eq!(Metadata::boxed_from_contexts(&[]).unwrap(), None);
        let strings: Vec<ServiceContext> = list
            .iter()
            .filter(|c| c.id == context_id::METADATA)
            .cloned()
            .collect();
        let boxed = Metadata::boxed_from_contexts(&strings).unwrap().unwrap();
        assert_eq!(boxed.get_str("k"), Some("w"));
    }

    #[test]
    fn hostile_metadata_is_refused_not_panicked_on() {
        let many: Vec<ServiceContext> = (0..=Metadata::MAX_ENTRIES as u32)
            .map(|id| ServiceContext {
                id: 100 + id,
                data: Bytes::new(),
            })
            .collect();
        assert!(Metadata::from_contexts(&many).is_err());
        let garbage = ServiceContext {
            id: context_id::METADATA,
            data: Bytes::from_static(&[0, 0xff, 0xff, 0xff, 0x7f]),
        };
        assert!(Metadata::from_contexts(std::slice::from_ref(&garbage)).is_err());
        assert!(Metadata::boxed_from_contexts(&[garbage]).is_err());
        for n in [0usize, 10, 1000] {
            let data = encapsulate(ByteOrder::Big, |w| {
                w.write_len(n);
                for _ in 0..n {
                    w.write_string("");
                    w.write_string("");
                }
            });
            let c = ServiceContext {
                id: context_id::METADATA,
                data: data.freeze(),
            };
            assert_eq!(
                Metadata::from_contexts(&[c]).is_ok(),
                n <= Metadata::MAX_ENTRIES
            );
        }
        assert!(Metadata::from_contexts(&[]).unwrap().is_empty());
    }
}
