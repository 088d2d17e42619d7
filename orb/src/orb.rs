//! PLACEHOLDER until the core lands: the `Orb` handle.

use crate::exception::{Exception, SystemException, SystemExceptionKind, CompletionStatus};
use crate::ior::ObjectRef;
use bytes::Bytes;
use std::sync::Arc;
use std::time::Duration;

/// The ORB.
#[derive(Clone, Debug)]
pub struct Orb {
    _inner: Arc<()>,
}

fn not_yet() -> SystemException {
    SystemException::new(SystemExceptionKind::NO_IMPLEMENT, 0, CompletionStatus::No)
}

impl Orb {
    pub(crate) fn invoke(&self, _t: &ObjectRef, _op: &str, _b: Bytes, _to: Option<Duration>) -> Result<Bytes, Exception> {
        Err(not_yet().into())
    }
    pub(crate) fn invoke_oneway(&self, _t: &ObjectRef, _op: &str, _b: Bytes) -> Result<(), SystemException> {
        Err(not_yet())
    }
    pub(crate) fn is_a(&self, _t: &ObjectRef, _id: &str) -> Result<bool, SystemException> {
        Err(not_yet())
    }
    pub(crate) fn non_existent(&self, _t: &ObjectRef) -> Result<bool, SystemException> {
        Err(not_yet())
    }
}
