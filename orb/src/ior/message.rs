//! `ObjectRef` as a protobuf message, so `orb.ObjectRef` fields in users' .proto files map to it
//! through prost's `extern_path`:
//!
//! ```proto
//! package orb;
//! message ObjectRef { bytes ior = 1; }   // the IOR encapsulation (what `IOR:` strings hold in hex)
//! ```
//!
//! The nil reference is the empty message; an absent or empty `ior` decodes to nil. An `ior` that
//! does not parse fails the whole protobuf decode.

use super::ObjectRef;
use bytes::{Buf, BufMut, Bytes};
use prost::encoding::{self, DecodeContext, WireType};

/// Field number of `ior`.
const IOR_TAG: u32 = 1;

impl prost::Message for ObjectRef {
    fn encode_raw(&self, buf: &mut impl BufMut) {
        if !self.is_nil() {
            encoding::bytes::encode(IOR_TAG, &self.to_encapsulation(), buf);
        }
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl Buf,
        ctx: DecodeContext,
    ) -> Result<(), prost::DecodeError> {
        if tag != IOR_TAG {
            return encoding::skip_field(wire_type, tag, buf, ctx);
        }
        let mut ior = Bytes::new();
        encoding::bytes::merge(wire_type, &mut ior, buf, ctx)?;
        // Last one wins, as for any singular bytes field.
        *self = if ior.is_empty() {
            ObjectRef::nil()
        } else {
            match ObjectRef::from_encapsulation_shared(&ior) {
                Ok(mut r) => {
                    r.mark_arrival();
                    r
                }
                Err(e) => {
                    tracing::debug!(error = %e, "invalid IOR in orb.ObjectRef");
                    // prost offers no other public way to build a DecodeError with a description.
                    #[allow(deprecated)]
                    let err = prost::DecodeError::new("invalid IOR in orb.ObjectRef");
                    return Err(err);
                }
            }
        };
        Ok(())
    }

    fn encoded_len(&self) -> usize {
        if self.is_nil() {
            return 0;
        }
        let n = self.encapsulation_len();
        encoding::key_len(IOR_TAG) + encoding::encoded_len_varint(n as u64) + n
    }

    fn clear(&mut self) {
        *self = ObjectRef::nil();
    }
}
