//! Object references: IORs (`IOR:` strings, inline CDR) and `corbaloc:` URLs.
//!
//! An [`ObjectRef`] is a repository (type) id plus profiles. IIOP profiles are parsed into
//! [`IiopProfile`] (version, host, port, object key, tagged components); other profiles are kept
//! as raw [`TaggedProfile`]s so a reference re-encodes to the bytes it came from. Components stay
//! raw too; the one the ORB acts on, `TAG_SSL_SEC_TRANS` (an object reached over TLS), is decoded
//! by [`IiopProfile::ssl`] into an [`SslComponent`].
//!
//! `ObjectRef` also implements `prost::Message` (as `message ObjectRef { bytes ior = 1; }`, the
//! IOR encapsulation), so `orb.ObjectRef` fields in users' .proto messages map to it through
//! prost's `extern_path`.
//!
//! Decoding is lenient where omniORB is (garbage padding, bytes after an IIOP profile's
//! components, bytes after the IOR in an `IOR:` string) and never trusts a length: every count is
//! checked against the bytes that are left before anything is allocated. Nothing a peer or a user
//! hands us can make this module panic.
//!
//! Invariant: `ObjectRef::iiop` holds exactly the parsed tag-0 entries of `ObjectRef::profiles`, in
//! the same order, so encoding (which writes only `profiles`) reproduces the bytes decoded.

mod corbaloc;
mod message;
mod ssl;

pub use ssl::{SslComponent, TAG_SSL_SEC_TRANS};

use crate::cdr::{
    encapsulate, ByteOrder, CdrReader, CdrWriter, DecodeError, DecodeErrorKind, DecodeResultExt,
};
use crate::exception::SystemException;
use crate::version::Version;
use bytes::Bytes;
use std::fmt;
use std::sync::{Arc, OnceLock};

/// Profile tag of an IIOP profile.
pub const TAG_INTERNET_IOP: u32 = 0;
/// Profile tag of a multiple-components profile.
#[allow(dead_code)] // For the ORB core, which reads and writes components.
pub const TAG_MULTIPLE_COMPONENTS: u32 = 1;
/// Component tag TAG_ORB_TYPE.
#[allow(dead_code)] // For the ORB core, which reads and writes components.
pub const TAG_ORB_TYPE: u32 = 0;
/// Component tag TAG_CODE_SETS.
#[allow(dead_code)] // For the ORB core, which reads and writes components.
pub const TAG_CODE_SETS: u32 = 1;
/// Component tag TAG_ALTERNATE_IIOP_ADDRESS.
#[allow(dead_code)] // For the ORB core, which reads and writes components.
pub const TAG_ALTERNATE_IIOP_ADDRESS: u32 = 3;

/// `IOP::TaggedProfile`: a tag and its (encapsulated) data, kept raw.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TaggedProfile {
    /// Profile tag.
    pub tag: u32,
    /// `profile_data` (for IIOP, an encapsulation of ProfileBody).
    pub data: Bytes,
}

/// `IOP::TaggedComponent`, kept raw.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TaggedComponent {
    /// Component tag.
    pub tag: u32,
    /// Component data (usually an encapsulation).
    pub data: Bytes,
}

/// A parsed IIOP profile (`IIOP::ProfileBody_1_1`; 1.0 has no components).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct IiopProfile {
    /// IIOP version: the highest GIOP minor the server accepts.
    pub version: Version,
    /// Host name or IP literal, as written by the server.
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// Object key.
    pub object_key: Bytes,
    /// Tagged components, in order.
    pub components: Vec<TaggedComponent>,
}

impl IiopProfile {
    /// Parses IIOP profile data (an encapsulation).
    ///
    /// Components are read only when the version is 1.1 or later (1.0 has none). Bytes after the
    /// components are ignored, as omniORB does outside `strictIIOP`. An IIOP major version other
    /// than 1 is an error.
    pub fn decode(data: &[u8]) -> Result<IiopProfile, DecodeError> {
        IiopProfile::decode_bytes(&Bytes::copy_from_slice(data))
    }

    /// Like [`IiopProfile::decode`], but the key and components share `data`'s storage.
    pub(crate) fn decode_bytes(data: &Bytes) -> Result<IiopProfile, DecodeError> {
        let mut r = CdrReader::encapsulation(data)?;
        let at = r.position();
        let major = r.read_octet().field("iiop_version")?;
        let minor = r.read_octet().field("iiop_version")?;
        if major != 1 {
            return Err(DecodeError::new(
                DecodeErrorKind::Invalid("unsupported IIOP major version"),
                at,
            )
            .in_field("iiop_version"));
        }
        let version = Version { major, minor };
        let host = r.read_string().field("host")?;
        let port = r.read_u16().field("port")?;
        let key = r.read_octets_range().field("object_key")?;
        let object_key = data.slice(key);
        let mut components = Vec::new();
        if minor > 0 {
            // Each component is at least a tag and a length.
            let n = r.read_count(8).field("components")?;
            components.reserve(n);
            for _ in 0..n {
                let tag = r.read_u32().field("components")?;
                let range = r.read_octets_range().field("components")?;
                components.push(TaggedComponent {
                    tag,
                    data: data.slice(range),
                });
            }
        }
        // Trailing bytes (r.remaining() > 0) are tolerated, as omniORB does by default.
        Ok(IiopProfile {
            version,
            host,
            port,
            object_key,
            components,
        })
    }

    /// Encodes as profile data (an encapsulation in our native order).
    ///
    /// An IIOP 1.0 profile has no components field, so `components` is not written for 1.0.
    pub fn encode(&self) -> Bytes {
        encapsulate(ByteOrder::NATIVE, |w| {
            w.write_octet(self.version.major);
            w.write_octet(self.version.minor);
            w.write_string(&self.host);
            w.write_u16(self.port);
            w.write_octets(&self.object_key);
            if self.version.minor > 0 {
                w.write_len(self.components.len());
                for c in &self.components {
                    w.write_u32(c.tag);
                    w.write_octets(&c.data);
                }
            }
        })
        .freeze()
    }

    /// This profile as an `IOP::TaggedProfile` (tag 0, data encoded in our native order).
    pub fn to_tagged_profile(&self) -> TaggedProfile {
        TaggedProfile {
            tag: TAG_INTERNET_IOP,
            data: self.encode(),
        }
    }
}

/// An object reference.
///
/// Cheap to clone and to pass on: the type id and profiles are shared (one reference count), and
/// the encapsulation a reference travels as is kept once made (or as received, when that is in
/// our byte order), so a reference handed from call to call, as callbacks do, is neither copied
/// nor re-encoded.
#[derive(Clone, Default)]
pub struct ObjectRef {
    /// `None`: the nil reference (empty type id, no profiles), which allocates nothing.
    body: Option<Arc<RefBody>>,
    /// The connection this reference arrived over, in a request's parameters.
    arrival: Arrival,
}

/// What an [`ObjectRef`] shares between its clones.
struct RefBody {
    type_id: String,
    /// All profiles as received/built, in order (re-encoding uses these, so unknown profiles and
    /// components survive a round trip).
    profiles: Vec<TaggedProfile>,
    /// Parsed IIOP profiles (same order as they appear in `profiles`).
    iiop: Vec<IiopProfile>,
    /// [`ObjectRef::to_encapsulation`], once made or received in our byte order.
    encapsulation: OnceLock<Bytes>,
}

impl PartialEq for ObjectRef {
    fn eq(&self, other: &Self) -> bool {
        match (&self.body, &other.body) {
            (Some(a), Some(b)) if Arc::ptr_eq(a, b) => true,
            // `iiop` is parsed from `profiles`, so it need not be compared.
            _ => self.type_id() == other.type_id() && self.profiles() == other.profiles(),
        }
    }
}

impl Eq for ObjectRef {}

impl std::hash::Hash for ObjectRef {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.type_id().hash(state);
        self.profiles().hash(state);
    }
}

/// The inbound connection a reference arrived over, as an opaque process-wide connection id
/// (0: none): bidirectional GIOP may route calls to the reference over that connection, and
/// over no other (omniORB's rule). Not part of the reference's value: equality and hashing
/// ignore it, and it never leaves the process.
#[derive(Clone, Copy, Default, Debug)]
struct Arrival(u64);

thread_local! {
    /// The connection whose request parameters this thread is decoding (0: none).
    static DECODING_FROM: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Runs `decode` (a request's parameters, nothing else) with the references it decodes from
/// protobuf marked as arrived over connection `conn_id` (0: none).
pub(crate) fn decoding_from<T>(conn_id: u64, decode: impl FnOnce() -> T) -> T {
    struct Restore(u64);
    impl Drop for Restore {
        fn drop(&mut self) {
            DECODING_FROM.with(|d| d.set(self.0));
        }
    }
    let _restore = Restore(DECODING_FROM.with(|d| d.replace(conn_id)));
    decode()
}

/// Why a reference string or encoding could not be parsed. Converts to BAD_PARAM (strings) or
/// MARSHAL (inline CDR).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IorError {
    /// Not `IOR:`/`corbaloc:` (or unknown corbaloc protocol).
    UnknownScheme,
    /// Odd number of hex digits, or a non-hex character.
    BadHex,
    /// The encapsulation did not decode.
    Decode(DecodeError),
    /// A malformed corbaloc URL (what is wrong).
    BadCorbaloc(&'static str),
}

impl fmt::Display for IorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IorError::UnknownScheme => {
                f.write_str("not an IOR: or corbaloc: reference (or unknown corbaloc protocol)")
            }
            IorError::BadHex => f.write_str("IOR string has invalid hex"),
            IorError::Decode(e) => write!(f, "IOR does not decode: {e}"),
            IorError::BadCorbaloc(why) => write!(f, "bad corbaloc URL: {why}"),
        }
    }
}

impl std::error::Error for IorError {}

impl From<IorError> for SystemException {
    fn from(e: IorError) -> Self {
        SystemException::bad_param(crate::exception::minor::BAD_REFERENCE, e.to_string())
    }
}

impl ObjectRef {
    /// A reference with one IIOP 1.2 profile for `host:port` and `key`, no components.
    pub fn new(
        type_id: impl Into<String>,
        host: impl Into<String>,
        port: u16,
        key: impl Into<Bytes>,
    ) -> Self {
        let profile = IiopProfile {
            version: Version::V1_2,
            host: host.into(),
            port,
            object_key: key.into(),
            components: Vec::new(),
        };
        ObjectRef::from_iiop_profiles(type_id, vec![profile])
    }

    /// Builds a reference from a type id and IIOP profiles (encoded in our native order; the
    /// components of a 1.0 profile are dropped, since 1.0 cannot carry them).
    pub fn from_iiop_profiles(type_id: impl Into<String>, profiles: Vec<IiopProfile>) -> Self {
        let raw: Vec<TaggedProfile> = profiles
            .iter()
            .map(IiopProfile::to_tagged_profile)
            .collect();
        let iiop = profiles
            .into_iter()
            .map(|mut p| {
                if p.version.minor == 0 {
                    p.components.clear();
                }
                p
            })
            .collect();
        ObjectRef::from_parts(type_id.into(), raw, iiop, None)
    }

    /// Builds a reference from a type id and raw profiles, parsing the IIOP (tag 0) ones.
    ///
    /// Fails if a tag-0 profile does not parse.
    pub fn from_profiles(
        type_id: impl Into<String>,
        profiles: Vec<TaggedProfile>,
    ) -> Result<Self, DecodeError> {
        let iiop = profiles
            .iter()
            .filter(|p| p.tag == TAG_INTERNET_IOP)
            .map(|p| IiopProfile::decode_bytes(&p.data))
            .collect::<Result<Vec<_>, _>>()
            .field("profiles")?;
        Ok(ObjectRef::from_parts(type_id.into(), profiles, iiop, None))
    }

    /// A reference of these parts; `encapsulation`, if given, is the reference's encapsulation
    /// in our byte order.
    fn from_parts(
        type_id: String,
        profiles: Vec<TaggedProfile>,
        iiop: Vec<IiopProfile>,
        encapsulation: Option<Bytes>,
    ) -> Self {
        let body = (!type_id.is_empty() || !profiles.is_empty()).then(|| {
            Arc::new(RefBody {
                type_id,
                profiles,
                iiop,
                encapsulation: encapsulation.map(OnceLock::from).unwrap_or_default(),
            })
        });
        ObjectRef {
            body,
            arrival: Arrival::default(),
        }
    }

    /// The inbound connection this reference arrived over in a request's parameters (a
    /// process-wide connection id), if it did.
    pub(crate) fn arrived_over(&self) -> Option<u64> {
        (self.arrival.0 != 0).then_some(self.arrival.0)
    }

    /// Marks the reference as arrived over the connection whose request this thread is
    /// decoding, if any (see [`decoding_from`]).
    pub(crate) fn mark_arrival(&mut self) {
        self.arrival = Arrival(DECODING_FROM.with(|d| d.get()));
    }

    /// The nil reference (empty type id, no profiles).
    pub fn nil() -> Self {
        ObjectRef::default()
    }

    /// Whether this is the nil reference.
    pub fn is_nil(&self) -> bool {
        self.profiles().is_empty()
    }

    /// Repository id (may be empty, e.g. from corbaloc).
    pub fn type_id(&self) -> &str {
        self.body.as_ref().map_or("", |b| &b.type_id)
    }

    /// A copy with another type id.
    #[must_use]
    pub fn with_type_id(self, type_id: impl Into<String>) -> Self {
        let (profiles, iiop) = match self.body {
            Some(b) => match Arc::try_unwrap(b) {
                Ok(b) => (b.profiles, b.iiop),
                Err(b) => (b.profiles.clone(), b.iiop.clone()),
            },
            None => (Vec::new(), Vec::new()),
        };
        ObjectRef {
            arrival: self.arrival,
            ..ObjectRef::from_parts(type_id.into(), profiles, iiop, None)
        }
    }

    /// All profiles, raw.
    pub fn profiles(&self) -> &[TaggedProfile] {
        self.body.as_ref().map_or(&[], |b| &b.profiles)
    }

    /// The parsed IIOP profiles.
    pub fn iiop_profiles(&self) -> &[IiopProfile] {
        self.body.as_ref().map_or(&[], |b| &b.iiop)
    }

    /// The first IIOP profile: where calls go.
    pub fn primary(&self) -> Option<&IiopProfile> {
        self.iiop_profiles().first()
    }

    /// Parses `IOR:<hex>` (prefix in any case, hex in either case) or a `corbaloc:` URL.
    ///
    /// Leading and trailing ASCII whitespace is ignored (IOR files usually end in a newline).
    /// The hex may be in either byte order; bytes after the IOR inside it are ignored.
    pub fn parse(s: &str) -> Result<ObjectRef, IorError> {
        let s = s.trim_ascii();
        if let Some(digits) = strip_prefix_ignore_case(s, "IOR:") {
            let bytes = hex::decode(digits).map_err(|_| IorError::BadHex)?;
            ObjectRef::from_encapsulation(&bytes).map_err(IorError::Decode)
        } else if let Some(url) = strip_prefix_ignore_case(s, "corbaloc:") {
            corbaloc::parse(url)
        } else {
            Err(IorError::UnknownScheme)
        }
    }

    /// The stringified IOR (`IOR:` + lower-case hex of the encapsulation, our byte order).
    pub fn to_ior_string(&self) -> String {
        format!("IOR:{}", hex::encode(self.to_encapsulation()))
    }

    /// A `corbaloc:iiop:1.2@host:port/key` URL for the primary profile (several addresses if
    /// there are several IIOP profiles with the same key); `None` for nil.
    ///
    /// Each address carries its profile's own IIOP version; IPv6 hosts are bracketed. The URL
    /// loses the type id and the components. Also `None` when the primary profile's host cannot
    /// be written in a URL (empty, or characters a host may not contain); other profiles whose
    /// host cannot be written are left out.
    pub fn to_corbaloc(&self) -> Option<String> {
        corbaloc::format(self.iiop_profiles())
    }

    /// The IOR as a standalone encapsulation in our byte order: what an `IOR:` string holds in
    /// hex and what the protobuf `orb.ObjectRef.ior` field carries.
    ///
    /// Made once per reference (clones share it); a reference decoded from an encapsulation in
    /// our byte order keeps the bytes it came from.
    pub fn to_encapsulation(&self) -> Bytes {
        let encode = || encapsulate(ByteOrder::NATIVE, |w| self.encode(w)).freeze();
        match &self.body {
            Some(b) => b.encapsulation.get_or_init(encode).clone(),
            None => encode(),
        }
    }

    /// Parses an IOR encapsulation (byte-order octet, then `IOP::IOR`; either order). Bytes after
    /// the IOR are ignored.
    ///
    /// The reference holds one copy of the encapsulation's bytes, up to the end of the IOR,
    /// which its profiles share.
    pub fn from_encapsulation(data: &[u8]) -> Result<ObjectRef, DecodeError> {
        // A first pass finds where the IOR ends, so only its bytes are copied.
        let mut r = CdrReader::encapsulation(data).field("IOR")?;
        r.read_string_bytes().field("type_id").field("IOR")?;
        // Each profile is at least a tag and a length.
        let n = r.read_count(8).field("profiles").field("IOR")?;
        for _ in 0..n {
            r.read_u32().field("profiles").field("IOR")?;
            r.read_octets().field("profiles").field("IOR")?;
        }
        // An encapsulation's positions count from its first byte.
        let own = Bytes::copy_from_slice(&data[..r.position()]);

        let mut r = CdrReader::encapsulation(&own).field("IOR")?;
        let (type_id, profiles, iiop) =
            read_ior(&mut r, |r| Ok(own.slice(r.read_octets_range()?)))?;
        let native = (r.order() == ByteOrder::NATIVE).then_some(own);
        Ok(ObjectRef::from_parts(type_id, profiles, iiop, native))
    }

    /// [`from_encapsulation`](Self::from_encapsulation), but a reference equal to the one this
    /// thread decoded last (byte for byte) is that one, shared, not decoded again: callbacks
    /// pass the same reference call after call. Only a small reference in our byte order and
    /// with nothing after the IOR is kept, one per thread.
    pub(crate) fn from_encapsulation_shared(data: &[u8]) -> Result<ObjectRef, DecodeError> {
        /// The largest encapsulation kept (a reference with a few profiles and components).
        const KEEP_AT_MOST: usize = 1024;
        thread_local! {
            static LAST: std::cell::RefCell<ObjectRef> = const {
                std::cell::RefCell::new(ObjectRef { body: None, arrival: Arrival(0) })
            };
        }
        let last = LAST.with(|last| {
            let last = last.borrow();
            let body = last.body.as_ref()?;
            (body.encapsulation.get()?[..] == *data).then(|| last.clone())
        });
        if let Some(r) = last {
            return Ok(r);
        }
        let r = ObjectRef::from_encapsulation(data)?;
        let keep = data.len() <= KEEP_AT_MOST
            && r.body
                .as_ref()
                .and_then(|b| b.encapsulation.get())
                .map(Bytes::len)
                == Some(data.len());
        if keep {
            LAST.with(|last| *last.borrow_mut() = r.clone());
        }
        Ok(r)
    }

    /// Length of [`ObjectRef::to_encapsulation`], computed without encoding.
    pub(crate) fn encapsulation_len(&self) -> usize {
        fn align4(n: usize) -> usize {
            n.next_multiple_of(4)
        }
        if let Some(e) = self.body.as_ref().and_then(|b| b.encapsulation.get()) {
            return e.len();
        }
        // Byte-order octet, then the type id string (ulong length + bytes + NUL).
        let mut n = align4(1) + 4 + self.type_id().len() + 1;
        // Profile count.
        n = align4(n) + 4;
        for p in self.profiles() {
            // Tag, length, data.
            n = align4(n) + 8 + p.data.len();
        }
        n
    }

    /// Encodes inline (`IOP::IOR` as a struct, not an encapsulation), as in a message body.
    ///
    /// Profiles are written as held, so a decoded reference re-encodes to the same bytes (given
    /// the same byte order and alignment).
    pub fn encode(&self, w: &mut CdrWriter<'_>) {
        w.write_string(self.type_id());
        w.write_len(self.profiles().len());
        for p in self.profiles() {
            w.write_u32(p.tag);
            w.write_octets(&p.data);
        }
    }

    /// Decodes an inline `IOP::IOR`.
    ///
    /// Every profile is kept raw; tag-0 (IIOP) profiles are also parsed, and one that does not
    /// parse fails the whole reference.
    pub fn decode(r: &mut CdrReader<'_>) -> Result<ObjectRef, DecodeError> {
        let (type_id, profiles, iiop) =
            read_ior(r, |r| Ok(Bytes::copy_from_slice(r.read_octets()?)))?;
        Ok(ObjectRef::from_parts(type_id, profiles, iiop, None))
    }
}

/// Reads an `IOP::IOR` (type id, then profiles, the IIOP ones parsed too); `octets` reads a
/// profile's data (a slice of bytes the caller holds, or a copy).
fn read_ior<'a>(
    r: &mut CdrReader<'a>,
    mut octets: impl FnMut(&mut CdrReader<'a>) -> Result<Bytes, DecodeError>,
) -> Result<(String, Vec<TaggedProfile>, Vec<IiopProfile>), DecodeError> {
    let type_id = r.read_string().field("type_id").field("IOR")?;
    // Each profile is at least a tag and a length.
    let n = r.read_count(8).field("profiles").field("IOR")?;
    let mut profiles = Vec::with_capacity(n);
    let mut iiop = Vec::new();
    for _ in 0..n {
        let tag = r.read_u32().field("profiles").field("IOR")?;
        let data = octets(r).field("profiles").field("IOR")?;
        if tag == TAG_INTERNET_IOP {
            iiop.push(
                IiopProfile::decode_bytes(&data)
                    .field("profiles")
                    .field("IOR")?,
            );
        }
        profiles.push(TaggedProfile { tag, data });
    }
    Ok((type_id, profiles, iiop))
}

impl fmt::Debug for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("ObjectRef");
        d.field("type_id", &self.type_id());
        for p in self.iiop_profiles() {
            d.field(
                "iiop",
                &format_args!(
                    "{}@{}:{}/{}",
                    p.version,
                    p.host,
                    p.port,
                    corbaloc::escape_key(&p.object_key)
                ),
            );
        }
        d.finish()
    }
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_ior_string())
    }
}

/// `s` without `prefix`, compared ignoring ASCII case; `None` if `s` does not start with it.
fn strip_prefix_ignore_case<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.as_bytes().get(..prefix.len())?;
    if head.eq_ignore_ascii_case(prefix.as_bytes()) {
        // `prefix` is ASCII, so `s` has a char boundary right after it.
        s.get(prefix.len()..)
    } else {
        None
    }
}

impl std::str::FromStr for ObjectRef {
    type Err = IorError;
    fn from_str(s: &str) -> Result<Self, IorError> {
        ObjectRef::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strip_prefix_ignores_ascii_case_only() {
        assert_eq!(strip_prefix_ignore_case("iOr:ab", "IOR:"), Some("ab"));
        assert_eq!(strip_prefix_ignore_case("IOR:", "IOR:"), Some(""));
        assert_eq!(strip_prefix_ignore_case("IOR", "IOR:"), None);
        assert_eq!(strip_prefix_ignore_case("éIOR:", "IOR:"), None);
        assert_eq!(strip_prefix_ignore_case("IOé", "IOR:"), None);
    }

    #[test]
    fn encapsulation_len_is_exact() {
        let mut r = ObjectRef::new("IDL:A:1.0", "h", 1, Bytes::from_static(b"key"));
        assert_eq!(r.encapsulation_len(), r.to_encapsulation().len());
        for type_id in ["", "x", "xy", "xyz", "wxyz"] {
            r = r.with_type_id(type_id);
            assert_eq!(
                r.encapsulation_len(),
                r.to_encapsulation().len(),
                "{type_id:?}"
            );
            let mut profiles = r.profiles().to_vec();
            profiles.push(TaggedProfile {
                tag: 7,
                data: Bytes::from(vec![0; type_id.len()]),
            });
            r = ObjectRef::from_profiles(type_id, profiles).unwrap();
            assert_eq!(
                r.encapsulation_len(),
                r.to_encapsulation().len(),
                "{type_id:?}"
            );
        }
        assert_eq!(ObjectRef::nil().encapsulation_len(), 16);
    }

    #[test]
    fn clones_share_one_body_and_one_encapsulation() {
        let r = ObjectRef::new("IDL:A:1.0", "h", 1, Bytes::from_static(b"key"));
        let c = r.clone();
        assert!(Arc::ptr_eq(
            r.body.as_ref().unwrap(),
            c.body.as_ref().unwrap()
        ));
        let (a, b) = (r.to_encapsulation(), c.to_encapsulation());
        assert_eq!(a, b);
        assert_eq!(a.as_ptr(), b.as_ptr(), "encoded once, shared by the clones");
        assert_eq!(r.encapsulation_len(), a.len());
        // Nil allocates nothing and still encodes.
        assert!(ObjectRef::nil().body.is_none());
        assert_eq!(ObjectRef::nil().to_encapsulation().len(), 16);
        assert_eq!(
            ObjectRef::nil().with_type_id("IDL:B:1.0").type_id(),
            "IDL:B:1.0"
        );
        assert!(ObjectRef::nil().with_type_id("IDL:B:1.0").is_nil());
    }

    #[test]
    fn a_decoded_reference_keeps_only_the_iors_bytes_and_reencodes_alike() {
        let r = ObjectRef::new("IDL:A:1.0", "h", 1, Bytes::from_static(b"key"));
        let enc = r.to_encapsulation();
        let mut padded = enc.to_vec();
        padded.extend_from_slice(b"trailing bytes after the IOR");
        let back = ObjectRef::from_encapsulation(&padded).unwrap();
        assert_eq!(back, r);
        // Native order: the bytes received, up to the IOR's end, are the encapsulation.
        assert_eq!(back.to_encapsulation(), enc);
        let held = back.to_encapsulation();
        let range = held.as_ptr_range();
        assert!(range.contains(&back.profiles()[0].data.as_ptr()));
        assert!(range.contains(&back.primary().unwrap().object_key.as_ptr()));

        // The other byte order: decoded alike, re-encoded in ours.
        let other = if ByteOrder::NATIVE == ByteOrder::Little {
            ByteOrder::Big
        } else {
            ByteOrder::Little
        };
        let swapped = encapsulate(other, |w| r.encode(w)).freeze();
        assert_ne!(swapped, enc);
        let back = ObjectRef::from_encapsulation(&swapped).unwrap();
        assert_eq!(back, r);
        assert_eq!(back.to_encapsulation(), enc);
    }

    #[test]
    fn a_thread_shares_the_reference_it_decoded_last_only_for_the_same_bytes() {
        // Whether decoding `data` (again) gives `r`'s very body.
        let shared = |r: &ObjectRef, data: &[u8]| {
            let back = ObjectRef::from_encapsulation_shared(data).unwrap();
            assert_eq!(
                back.to_encapsulation()[..],
                data[..back.encapsulation_len()]
            );
            Arc::ptr_eq(r.body.as_ref().unwrap(), back.body.as_ref().unwrap())
        };
        let a = ObjectRef::new("IDL:A:1.0", "h", 1, Bytes::from_static(b"a"));
        let b = ObjectRef::new("IDL:A:1.0", "h", 1, Bytes::from_static(b"b"));
        let (ea, eb) = (a.to_encapsulation(), b.to_encapsulation());
        let first = ObjectRef::from_encapsulation_shared(&ea).unwrap();
        assert_eq!(first, a);
        assert!(
            shared(&first, &ea),
            "the same bytes again: the same reference"
        );
        assert!(!shared(&first, &eb), "other bytes: decoded");
        let last_b = ObjectRef::from_encapsulation_shared(&eb).unwrap();
        assert_eq!(last_b, b);
        assert!(shared(&last_b, &eb));
        assert!(!shared(&first, &ea), "only the last one is kept");
        // Bytes after the IOR: decoded each time, and not kept.
        let mut padded = ea.to_vec();
        padded.push(0);
        let p = ObjectRef::from_encapsulation_shared(&padded).unwrap();
        assert_eq!(p, a);
        assert!(!shared(&p, &padded));
        // Too big to keep: decoded each time.
        let big = ObjectRef::new("IDL:A:1.0", "h", 1, Bytes::from(vec![7; 2000]));
        let eg = big.to_encapsulation();
        let once = ObjectRef::from_encapsulation_shared(&eg).unwrap();
        assert_eq!(once, big);
        assert!(!shared(&once, &eg));
        // Another thread has its own.
        let last_a = ObjectRef::from_encapsulation_shared(&ea).unwrap();
        assert!(shared(&last_a, &ea));
        std::thread::spawn(move || {
            let theirs = ObjectRef::from_encapsulation_shared(&ea).unwrap();
            assert!(!Arc::ptr_eq(
                last_a.body.as_ref().unwrap(),
                theirs.body.as_ref().unwrap()
            ));
        })
        .join()
        .unwrap();
    }

    #[test]
    fn equal_references_hash_alike_whatever_they_cached() {
        use std::hash::{BuildHasher, RandomState};
        let built = ObjectRef::new("IDL:A:1.0", "h", 1, Bytes::from_static(b"key"));
        let decoded = ObjectRef::from_encapsulation(&built.to_encapsulation()).unwrap();
        let fresh = ObjectRef::new("IDL:A:1.0", "h", 1, Bytes::from_static(b"key"));
        let s = RandomState::new();
        for other in [&decoded, &fresh] {
            assert_eq!(&built, other);
            assert_eq!(s.hash_one(&built), s.hash_one(other));
        }
        assert_ne!(built, fresh.clone().with_type_id("IDL:B:1.0"));
    }

    #[test]
    fn decoded_profile_shares_the_profile_bytes() {
        let p = IiopProfile {
            version: Version::V1_2,
            host: "h".into(),
            port: 9,
            object_key: Bytes::from_static(b"object key"),
            components: vec![TaggedComponent {
                tag: TAG_CODE_SETS,
                data: Bytes::from_static(b"data"),
            }],
        };
        let data = p.encode();
        let back = IiopProfile::decode_bytes(&data).unwrap();
        assert_eq!(back, p);
        let range = data.as_ptr_range();
        assert!(range.contains(&back.object_key.as_ptr()));
        assert!(range.contains(&back.components[0].data.as_ptr()));
    }

    #[test]
    fn decode_error_paths_name_the_field() {
        // Host length 0xFFFFFFFF.
        let e = IiopProfile::decode(&[1, 1, 2, 0, 0xff, 0xff, 0xff, 0xff]).unwrap_err();
        assert_eq!(e.path(), &["host"]);
        // Unsupported major version.
        let e = IiopProfile::decode(&[1, 2, 0, 0]).unwrap_err();
        assert_eq!(e.path(), &["iiop_version"]);
        assert_eq!(e.offset(), 1);
    }
}
