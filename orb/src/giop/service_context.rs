//! Service contexts: carried opaquely as (id, bytes), with helpers for the ones we use.

use crate::cdr::{encapsulate, ByteOrder, CdrReader, CdrWriter, DecodeError, DecodeResultExt};
use bytes::Bytes;
use smallvec::SmallVec;
use std::time::Duration;

/// Smallest encoding of one list entry: `ulong context_id` + `ulong` data length.
const MIN_CONTEXT_SIZE: usize = 8;

/// Smallest encoding of one listen point: string length + NUL, then the ushort port.
const MIN_LISTEN_POINT_SIZE: usize = 4 + 1 + 2;

/// Service context ids we know.
pub mod context_id {
    /// CodeSets (1): ignored on read.
    #[cfg(any(test, feature = "unstable-wire"))]
    pub const CODE_SETS: u32 = 1;
    /// BI_DIR_IIOP (5): the sender's listen points.
    pub const BI_DIR_IIOP: u32 = 5;
    /// Our deadline context: the caller's remaining time budget, then (since the call-chain
    /// rule) its [`CallChain`](super::CallChain). Vendor-tagged id ("RB" + 1).
    pub const DEADLINE: u32 = 0x5242_0001;
    /// Our error text context ("RB" + 2), on SYSTEM_EXCEPTION replies: the exception's detail
    /// text, which the CORBA reply body has no field for. See [`ErrorText`](super::ErrorText).
    pub const ERROR_TEXT: u32 = 0x5242_0002;
    /// Our string metadata context ("RB" + 3): the string key/value pairs of a request's
    /// metadata, as an encapsulated `sequence<struct { string key; string value; }>`.
    pub const METADATA: u32 = 0x5242_0003;
}

/// One service context: an id and its data (an encapsulation, kept as raw bytes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceContext {
    /// Context id.
    pub id: u32,
    /// Context data (the encapsulation bytes, byte-order octet first).
    pub data: Bytes,
}

/// `IOP::ServiceContextList`, holding up to `N` contexts inline. A request's list holds one
/// ([`RequestContexts`]: a request of ours carries one, the deadline), so decoding a request
/// allocates nothing for it (a `Vec` cost a malloc and a free per request, ~100
/// instructions, callgrind); other messages' lists hold none inline, so the replies a caller
/// receives stay as small to move as with a `Vec`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServiceContextList<const N: usize = 0>(pub SmallVec<[ServiceContext; N]>);

/// A request's service contexts: one held inline.
pub type RequestContexts = ServiceContextList<1>;

impl<const N: usize> ServiceContextList<N> {
    /// The data of the first context with `id`.
    pub fn get(&self, id: u32) -> Option<&Bytes> {
        self.0.iter().find(|c| c.id == id).map(|c| &c.data)
    }

    /// Whether the list is empty.
    #[cfg(any(test, feature = "unstable-wire"))]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Decodes a list (count, then id + octets each).
    ///
    /// The count is checked against the bytes left before anything is allocated; the data of
    /// each context is copied out (contexts are small, and this keeps the list independent of
    /// the frame buffer).
    #[cfg(any(test, feature = "unstable-wire"))]
    pub fn decode(r: &mut CdrReader<'_>) -> Result<Self, DecodeError> {
        Self::decode_with(r, |r| r.read_octets().map(Bytes::copy_from_slice))
    }

    /// `decode` from a reader over `msg`: each context's data is a slice of
    /// `msg` (no copy, no allocation).
    pub(crate) fn decode_in(msg: &Bytes, r: &mut CdrReader<'_>) -> Result<Self, DecodeError> {
        Self::decode_with(r, |r| super::read_octets_of(msg, r))
    }

    fn decode_with(
        r: &mut CdrReader<'_>,
        mut data: impl FnMut(&mut CdrReader<'_>) -> Result<Bytes, DecodeError>,
    ) -> Result<Self, DecodeError> {
        let n = r.read_count(MIN_CONTEXT_SIZE).field("service_context")?;
        let mut list = SmallVec::with_capacity(n);
        for _ in 0..n {
            let id = r.read_u32().field("context_id").field("service_context")?;
            let data = data(r).field("context_data").field("service_context")?;
            list.push(ServiceContext { id, data });
        }
        Ok(ServiceContextList(list))
    }

    /// Encodes the list.
    pub fn encode(&self, w: &mut CdrWriter<'_>) {
        encode_contexts(&self.0, w);
    }
}

/// Encodes `list` as a `ServiceContextList`.
pub(crate) fn encode_contexts(list: &[ServiceContext], w: &mut CdrWriter<'_>) {
    encode_contexts_after(None, list, w);
}

/// [`encode_contexts`] with a DEADLINE context first, given as its data
/// ([`CallChain::deadline_data`]).
pub(crate) fn encode_contexts_after(
    deadline: Option<&[u8; 24]>,
    list: &[ServiceContext],
    w: &mut CdrWriter<'_>,
) {
    w.write_len(list.len() + usize::from(deadline.is_some()));
    if let Some(data) = deadline {
        w.write_u32(context_id::DEADLINE);
        w.write_octets(data);
    }
    for c in list {
        w.write_u32(c.id);
        w.write_octets(&c.data);
    }
}

/// BiDirIIOPServiceContext: the listen points of the side that opened the connection.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BiDirListenPoints(pub Vec<(String, u16)>);

impl BiDirListenPoints {
    /// The context (id BI_DIR_IIOP) carrying these points.
    ///
    /// The data is an encapsulation (our native order) of `sequence<struct ListenPoint {
    /// string host; unsigned short port; }>`.
    pub fn to_context(&self) -> ServiceContext {
        let data = encapsulate(ByteOrder::NATIVE, |w| {
            w.write_len(self.0.len());
            for (host, port) in &self.0 {
                w.write_string(host);
                w.write_u16(*port);
            }
        });
        ServiceContext {
            id: context_id::BI_DIR_IIOP,
            data: data.freeze(),
        }
    }

    /// Decodes from context data (an encapsulation in either byte order). Bytes after the list
    /// are ignored.
    pub fn from_context_data(data: &[u8]) -> Result<Self, DecodeError> {
        let mut r = CdrReader::encapsulation(data).field("BiDirIIOPServiceContext")?;
        let n = r
            .read_count(MIN_LISTEN_POINT_SIZE)
            .field("listen_points")
            .field("BiDirIIOPServiceContext")?;
        let mut points = Vec::with_capacity(n);
        for _ in 0..n {
            let host = r
                .read_string()
                .field("host")
                .field("BiDirIIOPServiceContext")?;
            let port = r
                .read_u16()
                .field("port")
                .field("BiDirIIOPServiceContext")?;
            points.push((host, port));
        }
        Ok(BiDirListenPoints(points))
    }
}

/// Our deadline context: the remaining time budget of the call, in microseconds (relative, so
/// clocks need not agree), as an encapsulated `unsigned long long`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deadline(pub Duration);

impl Deadline {
    /// The context (id DEADLINE).
    ///
    /// Budgets longer than `u64::MAX` microseconds (about 584,000 years) are sent as that.
    #[cfg(any(test, feature = "unstable-wire"))]
    pub fn to_context(&self) -> ServiceContext {
        let micros = self.micros();
        // Sent with every two-way call: encoded in the thread's frame buffer (no allocation).
        let data = crate::outbuf::encode(16, |buf| {
            let mut w = CdrWriter::new(buf, ByteOrder::NATIVE);
            w.write_octet(ByteOrder::NATIVE.flag());
            w.write_u64(micros);
        });
        ServiceContext {
            id: context_id::DEADLINE,
            data,
        }
    }

    /// The budget in whole microseconds, saturated.
    fn micros(&self) -> u64 {
        u64::try_from(self.0.as_micros()).unwrap_or(u64::MAX)
    }

    /// Decodes from context data (an encapsulation in either byte order); what follows the
    /// budget (a [`CallChain`]) is not read.
    #[cfg(any(test, feature = "unstable-wire"))]
    pub fn from_context_data(data: &[u8]) -> Result<Self, DecodeError> {
        Self::with_chain_from(data).map(|(d, _)| d)
    }

    /// Decodes the budget and, if the context carries one, the [`CallChain`] after it: one pass
    /// over the encapsulation for the upcall, which needs both.
    pub fn with_chain_from(data: &[u8]) -> Result<(Self, Option<CallChain>), DecodeError> {
        let mut r = CdrReader::encapsulation(data).field("Deadline")?;
        let micros = r.read_u64().field("Deadline")?;
        let chain = r.read_u64().ok().map(CallChain);
        Ok((Deadline(Duration::from_micros(micros)), chain))
    }
}

/// The detail text of a system exception, carried beside the SYSTEM_EXCEPTION reply body
/// (which has only the repository id, minor code and completion status), so that a servant's
/// `bad_param(7, "field text must not be empty")` reaches the caller as more than BAD_PARAM's
/// generic sentence. An encapsulated CDR string; peers that do not know the context (omniORB)
/// ignore it.
///
/// Both ends bound it to [`ErrorText::MAX_LEN`] bytes (cut at a character boundary): a
/// server does not send a novel, and a hostile one cannot hand a caller one. Control
/// characters become spaces on receipt, so a peer's text cannot forge log lines or move a
/// terminal's cursor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorText(pub String);

impl ErrorText {
    /// The longest text sent or accepted, in bytes.
    pub const MAX_LEN: usize = 512;

    /// The context (id ERROR_TEXT) carrying `text`, cut to [`MAX_LEN`](Self::MAX_LEN).
    pub fn context(text: &str) -> ServiceContext {
        let text = cut(text, Self::MAX_LEN);
        let data = encapsulate(ByteOrder::NATIVE, |w| w.write_string(text));
        ServiceContext {
            id: context_id::ERROR_TEXT,
            data: data.freeze(),
        }
    }

    /// Decodes context data (an encapsulation in either byte order): the text, cut to
    /// [`MAX_LEN`](Self::MAX_LEN), invalid UTF-8 replaced and control characters made spaces.
    pub fn from_context_data(data: &[u8]) -> Result<Self, DecodeError> {
        let mut r = CdrReader::encapsulation(data).field("ErrorText")?;
        let bytes = r.read_string_bytes().field("ErrorText")?;
        let bytes = bytes.get(..Self::MAX_LEN).unwrap_or(bytes);
        let text = String::from_utf8_lossy(bytes);
        // A cut in the middle of a character leaves one U+FFFD at the end: drop it.
        let text = text.trim_end_matches('\u{fffd}');
        Ok(ErrorText(
            text.chars()
                .map(|c| if c.is_control() { ' ' } else { c })
                .collect(),
        ))
    }
}

/// `s` cut to at most `max` bytes, at a character boundary.
fn cut(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// The call chain a request belongs to: an id that a top-level call gets from its thread and
/// that every nested call made while serving it carries on. A thread waiting for its reply
/// runs an incoming request itself only if it carries the thread's own chain (a callback it
/// waits for), or if no pool thread is free (TAO bug 3531b).
///
/// It travels in the DEADLINE context, after the budget: one context per call instead of two
/// (a second one cost about 100 instructions and two atomics per call on each side), and a
/// reader that knows only the budget ignores it. Peers that know neither (omniORB) ignore the
/// context.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallChain(pub u64);

impl CallChain {
    /// The DEADLINE context carrying `deadline` and this chain.
    #[cfg(any(test, feature = "unstable-wire"))]
    pub fn with_deadline(self, deadline: Deadline) -> ServiceContext {
        ServiceContext {
            id: context_id::DEADLINE,
            data: Bytes::copy_from_slice(&self.deadline_data(deadline)),
        }
    }

    /// The data of the DEADLINE context carrying `deadline` and this chain, as the request
    /// writer puts it straight into the frame (no buffer of its own per call): an encapsulation in
    /// our byte order of the flag, padding to 8, the budget in microseconds and the chain.
    pub(crate) fn deadline_data(self, deadline: Deadline) -> [u8; 24] {
        let mut data = [0u8; 24];
        data[0] = ByteOrder::NATIVE.flag();
        data[8..16].copy_from_slice(&deadline.micros().to_ne_bytes());
        data[16..].copy_from_slice(&self.0.to_ne_bytes());
        data
    }

    /// The chain in DEADLINE context data, if it carries one (a budget alone does not).
    #[cfg(any(test, feature = "unstable-wire"))]
    pub fn from_deadline_data(data: &[u8]) -> Option<Self> {
        Deadline::with_chain_from(data).ok()?.1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_text_round_trips_and_is_bounded() {
        let c = ErrorText::context("field text must not be empty");
        assert_eq!(c.id, context_id::ERROR_TEXT);
        assert_eq!(
            ErrorText::from_context_data(&c.data).unwrap().0,
            "field text must not be empty"
        );
        // Sent: cut to MAX_LEN at a character boundary (é is two bytes).
        let long = "é".repeat(ErrorText::MAX_LEN);
        let sent = ErrorText::from_context_data(&ErrorText::context(&long).data).unwrap();
        assert_eq!(sent.0, "é".repeat(ErrorText::MAX_LEN / 2));
    }

    #[test]
    fn a_hostile_error_text_is_cut_and_defanged() {
        // A peer that ignores the bound, splits a character at it, and sends control
        // characters (an escape sequence, a forged log line).
        let mut text = "\u{1b}[2Jfake\nline".to_string();
        text.push_str(&"x".repeat(ErrorText::MAX_LEN - text.len() - 1));
        text.push('é');
        text.push_str(&"y".repeat(10_000));
        let data = encapsulate(ByteOrder::Big, |w| w.write_string(&text));
        let got = ErrorText::from_context_data(&data).unwrap().0;
        assert!(got.len() <= ErrorText::MAX_LEN, "{}", got.len());
        assert!(got.starts_with(" [2Jfake line"), "{got}");
        assert!(
            !got.chars().any(|c| c.is_control() || c == '\u{fffd}'),
            "{got}"
        );
        // Garbage is an error, never a panic.
        assert!(ErrorText::from_context_data(&[0, 0xff, 0xff, 0xff, 0x7f]).is_err());
        assert!(ErrorText::from_context_data(&[]).is_err());
    }
    use crate::cdr::DecodeErrorKind;
    use bytes::BytesMut;

    #[test]
    fn list_round_trip_both_orders() {
        let list: ServiceContextList = ServiceContextList(smallvec::smallvec![
            ServiceContext {
                id: context_id::CODE_SETS,
                data: Bytes::from_static(&[1, 0, 0, 0, 1, 0, 1, 0, 9, 1, 1, 0]),
            },
            ServiceContext {
                id: 77,
                data: Bytes::new(),
            },
            ServiceContext {
                id: context_id::DEADLINE,
                data: Bytes::from_static(&[0, 1]),
            },
        ]);
        for order in [ByteOrder::Little, ByteOrder::Big] {
            for offset in 0..8 {
                let mut buf = BytesMut::new();
                list.encode(&mut CdrWriter::with_offset(&mut buf, order, offset));
                let mut r = CdrReader::with_offset(&buf, order, offset);
                assert_eq!(ServiceContextList::decode(&mut r).unwrap(), list);
                assert_eq!(r.remaining(), 0);
            }
        }
        assert_eq!(list.get(77), Some(&Bytes::new()));
        assert_eq!(list.get(78), None);
        assert!(!list.is_empty());
        assert!(ServiceContextList::<0>::default().is_empty());
    }

    #[test]
    fn hostile_count_is_rejected_before_allocating() {
        let data = [0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0];
        let e = ServiceContextList::<0>::decode(&mut CdrReader::new(&data, ByteOrder::Little))
            .unwrap_err();
        assert!(matches!(e.kind(), DecodeErrorKind::BadLength(_)));
        assert_eq!(e.path(), &["service_context"]);
    }

    #[test]
    fn bidir_golden_bytes() {
        // WIRE-GIOP §5.1, omniORB's client: 127.0.0.1:28099.
        let golden: &[u8] = &[
            0x01, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x0a, 0x00, 0x00, 0x00, b'1', b'2',
            b'7', b'.', b'0', b'.', b'0', b'.', b'1', 0x00, 0xc3, 0x6d,
        ];
        let points = BiDirListenPoints::from_context_data(golden).unwrap();
        assert_eq!(points.0, vec![("127.0.0.1".to_string(), 28099)]);
        let ctx = points.to_context();
        assert_eq!(ctx.id, context_id::BI_DIR_IIOP);
        if ByteOrder::NATIVE == ByteOrder::Little {
            assert_eq!(&ctx.data[..], golden);
        }
        assert_eq!(
            BiDirListenPoints::from_context_data(&ctx.data).unwrap(),
            points
        );
    }

    #[test]
    fn bidir_big_endian_and_several_points() {
        let data = crate::cdr::encapsulate(ByteOrder::Big, |w| {
            w.write_u32(2);
            w.write_string("a.example");
            w.write_u16(1);
            w.write_string("::1");
            w.write_u16(65535);
        });
        let p = BiDirListenPoints::from_context_data(&data).unwrap();
        assert_eq!(p.0, vec![("a.example".into(), 1), ("::1".into(), 65535)]);
        let round = BiDirListenPoints::from_context_data(&p.to_context().data).unwrap();
        assert_eq!(round, p);
        for cut in 0..data.len() {
            assert!(BiDirListenPoints::from_context_data(&data[..cut]).is_err());
        }
    }

    #[test]
    fn deadline_round_trip() {
        for d in [
            Duration::ZERO,
            Duration::from_micros(1),
            Duration::from_millis(1500),
            Duration::from_secs(86_400 * 365),
        ] {
            let ctx = Deadline(d).to_context();
            assert_eq!(ctx.id, context_id::DEADLINE);
            assert_eq!(ctx.data.len(), 16, "flag, 7 pad, ulonglong");
            assert_eq!(Deadline::from_context_data(&ctx.data).unwrap(), Deadline(d));
        }
        let be = crate::cdr::encapsulate(ByteOrder::Big, |w| w.write_u64(2_000_001));
        assert_eq!(
            Deadline::from_context_data(&be).unwrap(),
            Deadline(Duration::from_micros(2_000_001))
        );
        assert!(Deadline::from_context_data(&be[..12]).is_err());
        assert!(Deadline::from_context_data(&[]).is_err());
        // Sub-microsecond precision is dropped; absurd budgets saturate.
        let huge = Deadline(Duration::MAX).to_context();
        assert_eq!(
            Deadline::from_context_data(&huge.data).unwrap(),
            Deadline(Duration::from_micros(u64::MAX))
        );
    }

    #[test]
    fn call_chain_rides_in_the_deadline_context_both_orders() {
        let ctx =
            CallChain(0x0123_4567_89ab_cdef).with_deadline(Deadline(Duration::from_millis(3)));
        assert_eq!(ctx.id, context_id::DEADLINE);
        assert_eq!(ctx.data.len(), 24, "flag, 7 pad, budget, chain");
        // Written by hand into the frame: byte for byte what the CDR writer encodes.
        let cdr = crate::cdr::encapsulate(ByteOrder::NATIVE, |w| {
            w.write_u64(3_000);
            w.write_u64(0x0123_4567_89ab_cdef);
        });
        assert_eq!(&ctx.data[..], &cdr[..]);
        // A reader of the budget alone still reads it.
        assert_eq!(
            Deadline::from_context_data(&ctx.data).unwrap(),
            Deadline(Duration::from_millis(3))
        );
        assert_eq!(
            CallChain::from_deadline_data(&ctx.data),
            Some(CallChain(0x0123_4567_89ab_cdef))
        );
        let be = crate::cdr::encapsulate(ByteOrder::Big, |w| {
            w.write_u64(5);
            w.write_u64(7);
        });
        assert_eq!(CallChain::from_deadline_data(&be), Some(CallChain(7)));
        assert_eq!(Deadline::from_context_data(&be).unwrap().0.as_micros(), 5);
        // A budget alone, a truncated chain, nothing: no chain.
        assert_eq!(CallChain::from_deadline_data(&be[..16]), None);
        assert_eq!(CallChain::from_deadline_data(&be[..20]), None);
        assert_eq!(CallChain::from_deadline_data(&[]), None);
    }
}
