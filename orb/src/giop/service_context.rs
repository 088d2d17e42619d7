//! Service contexts: carried opaquely as (id, bytes), with helpers for the ones we use.

use crate::cdr::{CdrReader, CdrWriter, DecodeError};
use bytes::Bytes;
use std::time::Duration;

/// Service context ids we know.
pub mod context_id {
    /// CodeSets (1): ignored on read.
    pub const CODE_SETS: u32 = 1;
    /// BI_DIR_IIOP (5): the sender's listen points.
    pub const BI_DIR_IIOP: u32 = 5;
    /// Our deadline context: the caller's remaining time budget. Vendor-tagged id ("RB" + 1).
    pub const DEADLINE: u32 = 0x5242_0001;
}

/// One service context: an id and its data (an encapsulation, kept as raw bytes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceContext {
    /// Context id.
    pub id: u32,
    /// Context data (the encapsulation bytes, byte-order octet first).
    pub data: Bytes,
}

/// `IOP::ServiceContextList`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServiceContextList(pub Vec<ServiceContext>);

impl ServiceContextList {
    /// The data of the first context with `id`.
    pub fn get(&self, id: u32) -> Option<&Bytes> {
        self.0.iter().find(|c| c.id == id).map(|c| &c.data)
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Decodes a list (count, then id + octets each).
    pub fn decode(r: &mut CdrReader<'_>) -> Result<Self, DecodeError> {
        let _ = r;
        todo!()
    }

    /// Encodes the list.
    pub fn encode(&self, w: &mut CdrWriter<'_>) {
        let _ = w;
        todo!()
    }
}

/// BiDirIIOPServiceContext: the listen points of the side that opened the connection.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BiDirListenPoints(pub Vec<(String, u16)>);

impl BiDirListenPoints {
    /// The context (id BI_DIR_IIOP) carrying these points.
    pub fn to_context(&self) -> ServiceContext {
        todo!()
    }

    /// Decodes from context data.
    pub fn from_context_data(data: &[u8]) -> Result<Self, DecodeError> {
        let _ = data;
        todo!()
    }
}

/// Our deadline context: the remaining time budget of the call, in microseconds (relative, so
/// clocks need not agree), as an encapsulated `unsigned long long`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deadline(pub Duration);

impl Deadline {
    /// The context (id DEADLINE).
    pub fn to_context(&self) -> ServiceContext {
        todo!()
    }

    /// Decodes from context data.
    pub fn from_context_data(data: &[u8]) -> Result<Self, DecodeError> {
        let _ = data;
        todo!()
    }
}
