//! `protorb-naming`: a small CosNaming client (the OMG Naming Service, as served by omniORB's
//! `omniNames`), spoken in plain CDR over GIOP (WIRE-GIOP §7.3).
//!
//! It is a crate of its own because it is an *application* of the ORB, not part of it: it is
//! built only on the `protorb` crate's stable public API ([`ObjectProxy::invoke_cdr`] to send a
//! request with CDR parameters and get the results or a user exception back, [`protorb::cdr`] to
//! encode names and decode results and exceptions), without the `unstable-wire` feature. The
//! core crate neither knows about it nor gives it anything other users could not have; a
//! program that does not use a naming service does not build it.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use protorb_naming::{Name, NamingContext};
//! let orb = protorb::Orb::builder().build()?;
//! // The root context of omniNames on 127.0.0.1:2809 (object key `NameService`, GIOP 1.2).
//! let root = NamingContext::at(&orb, "127.0.0.1", 2809);
//! let me = orb.reference("IDL:demo/Echo:1.0", "echo".into());
//! root.rebind(&Name::parse("echo.svc")?, &me)?;
//! let found = root.resolve(&Name::parse("echo.svc")?)?;
//! assert_eq!(found, me);
//! # orb.shutdown();
//! # Ok(())
//! # }
//! ```
//!
//! # Reaching the root context
//!
//! omniNames' root context has the object key `NameService`. [`NamingContext::at`] builds an
//! IIOP 1.2 reference to it (the same as `corbaloc:iiop:1.2@host:port/NameService`). A plain
//! `corbaloc::host:port/NameService` URL also works with [`NamingContext::new`], but such a
//! reference is IIOP 1.0 (the corbaloc default), so every naming call then travels as GIOP 1.0;
//! prefer the `1.2@` form.
//!
//! # Strings
//!
//! Name components are sent as their UTF-8 bytes, with no code-set negotiation (what omniORB
//! calls ISO-8859-1 for ASCII is the same bytes). Received components that are not valid UTF-8
//! are read as ISO-8859-1. A component containing a NUL character cannot be sent
//! ([`NamingError::InvalidName`]).
//!
//! # Errors
//!
//! The naming exceptions (`NotFound`, `CannotProceed`, `InvalidName`, `AlreadyBound`,
//! `NotEmpty`) arrive as USER_EXCEPTION replies and are decoded by repository id into
//! [`NamingError`]; everything else (no connection, a malformed reply, an exception id this
//! crate does not know) is [`NamingError::System`].
#![warn(missing_docs)]
#![deny(rustdoc::broken_intra_doc_links)]

use bytes::Bytes;
use protorb::cdr::{
    CdrBody, CdrReader, CdrReply, CdrWriter, DecodeError, DecodeErrorKind, DecodeResultExt,
};
use protorb::{
    minor, CompletionStatus, ObjectProxy, ObjectRef, Orb, SystemException, SystemExceptionKind,
};
use std::fmt;
use std::time::Duration;

/// Repository id of `CosNaming::NamingContext`.
pub const NAMING_CONTEXT_ID: &str = "IDL:omg.org/CosNaming/NamingContext:1.0";
/// Repository id of `CosNaming::NamingContextExt` (what omniNames' root context is).
pub const NAMING_CONTEXT_EXT_ID: &str = "IDL:omg.org/CosNaming/NamingContextExt:1.0";
/// Repository id of `CosNaming::BindingIterator`.
pub const BINDING_ITERATOR_ID: &str = "IDL:omg.org/CosNaming/BindingIterator:1.0";
/// [`NamingContext::list_all`] gives up (IMP_LIMIT) beyond this many bindings.
pub const MAX_LIST_ALL: usize = 1 << 20;
/// The object key of omniNames' root context.
pub const ROOT_KEY: &str = "NameService";

/// Repository ids of the naming exceptions.
pub mod exception_id {
    /// `CosNaming::NamingContext::NotFound`.
    pub const NOT_FOUND: &str = "IDL:omg.org/CosNaming/NamingContext/NotFound:1.0";
    /// `CosNaming::NamingContext::CannotProceed`.
    pub const CANNOT_PROCEED: &str = "IDL:omg.org/CosNaming/NamingContext/CannotProceed:1.0";
    /// `CosNaming::NamingContext::InvalidName`.
    pub const INVALID_NAME: &str = "IDL:omg.org/CosNaming/NamingContext/InvalidName:1.0";
    /// `CosNaming::NamingContext::AlreadyBound`.
    pub const ALREADY_BOUND: &str = "IDL:omg.org/CosNaming/NamingContext/AlreadyBound:1.0";
    /// `CosNaming::NamingContext::NotEmpty`.
    pub const NOT_EMPTY: &str = "IDL:omg.org/CosNaming/NamingContext/NotEmpty:1.0";
}

/// `CosNaming::NameComponent`: an identifier and a kind (both may be empty).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NameComponent {
    /// The identifier.
    pub id: String,
    /// The kind (often empty; by convention a type, as in `echo.svc`).
    pub kind: String,
}

impl NameComponent {
    /// A component from an id and a kind.
    pub fn new(id: impl Into<String>, kind: impl Into<String>) -> Self {
        NameComponent {
            id: id.into(),
            kind: kind.into(),
        }
    }
}

/// `CosNaming::Name`: a sequence of components, a path through naming contexts.
///
/// Its string form is the `NamingContextExt` syntax: components separated by `/`, id and kind
/// separated by `.`, and `\` escaping `/`, `.` and `\` ([`Name::parse`], `Display`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Name(pub Vec<NameComponent>);

impl Name {
    /// A name from its components.
    pub fn new(components: Vec<NameComponent>) -> Self {
        Name(components)
    }

    /// A one-component name.
    pub fn simple(id: impl Into<String>, kind: impl Into<String>) -> Self {
        Name(vec![NameComponent::new(id, kind)])
    }

    /// The components.
    pub fn components(&self) -> &[NameComponent] {
        &self.0
    }

    /// Number of components.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the name has no component (servers reject it with InvalidName).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Parses the `NamingContextExt` string form: `a.b/c` is `[("a", "b"), ("c", "")]`.
    ///
    /// Rules (as omniORB's `to_name`, but applied to every component): `/` separates
    /// components; the one unescaped `.` of a component separates id and kind; `\` escapes the
    /// next `/`, `.` or `\`. `.` alone is the component with empty id and kind, `.k` has an empty
    /// id. Errors ([`NamingError::InvalidName`]): an empty string, an empty component (`a//b`,
    /// `/a`, `a/`), a component with two unescaped dots, an id followed by an empty kind (`a.`),
    /// a `\` before anything else or at the end, a NUL character.
    pub fn parse(s: &str) -> Result<Name, NamingError> {
        if s.is_empty() || s.contains('\0') {
            return Err(NamingError::InvalidName);
        }
        let mut components = Vec::new();
        let mut id = String::new();
        let mut kind = String::new();
        let mut dot = false;
        let mut chars = s.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some(e @ ('\\' | '/' | '.')) => {
                        if dot {
                            kind.push(e);
                        } else {
                            id.push(e);
                        }
                    }
                    _ => return Err(NamingError::InvalidName),
                },
                '.' => {
                    if dot {
                        return Err(NamingError::InvalidName);
                    }
                    dot = true;
                }
                '/' => {
                    components.push(finish_component(&mut id, &mut kind, dot)?);
                    dot = false;
                }
                c => {
                    if dot {
                        kind.push(c);
                    } else {
                        id.push(c);
                    }
                }
            }
        }
        components.push(finish_component(&mut id, &mut kind, dot)?);
        Ok(Name(components))
    }
}

/// Ends the component being parsed; `dot` says whether it had an unescaped `.`.
fn finish_component(
    id: &mut String,
    kind: &mut String,
    dot: bool,
) -> Result<NameComponent, NamingError> {
    let valid = if dot {
        // "." (both empty), ".k" and "i.k" are fine; "i." is not.
        !kind.is_empty() || id.is_empty()
    } else {
        // An empty component ("a//b", a leading or trailing "/").
        !id.is_empty()
    };
    if !valid {
        return Err(NamingError::InvalidName);
    }
    Ok(NameComponent {
        id: std::mem::take(id),
        kind: std::mem::take(kind),
    })
}

fn write_escaped(f: &mut fmt::Formatter<'_>, s: &str) -> fmt::Result {
    for c in s.chars() {
        if matches!(c, '/' | '.' | '\\') {
            f.write_str("\\")?;
        }
        fmt::Write::write_char(f, c)?;
    }
    Ok(())
}

impl fmt::Display for NameComponent {
    /// `id`, `id.kind`, `.kind`, or `.` when both are empty; `/`, `.` and `\` escaped.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.id.is_empty() && self.kind.is_empty() {
            return f.write_str(".");
        }
        write_escaped(f, &self.id)?;
        if !self.kind.is_empty() {
            f.write_str(".")?;
            write_escaped(f, &self.kind)?;
        }
        Ok(())
    }
}

impl fmt::Display for Name {
    /// The `NamingContextExt` string form (the inverse of [`Name::parse`]); the empty name
    /// displays as the empty string.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, c) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("/")?;
            }
            fmt::Display::fmt(c, f)?;
        }
        Ok(())
    }
}

impl std::str::FromStr for Name {
    type Err = NamingError;
    fn from_str(s: &str) -> Result<Name, NamingError> {
        Name::parse(s)
    }
}

/// `CosNaming::BindingType`: what a name is bound to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BindingType {
    /// `nobject` (0): an object.
    Object,
    /// `ncontext` (1): a naming context.
    Context,
}

/// `CosNaming::Binding`: one entry of a context, as `list` returns it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Binding {
    /// The bound name (one component, relative to the listed context).
    pub name: Name,
    /// Object or context.
    pub binding_type: BindingType,
}

/// `NotFoundReason`: why `NotFound` was raised.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NotFoundReason {
    /// `missing_node` (0): the first component of `rest_of_name` is not bound.
    MissingNode,
    /// `not_context` (1): it is bound, but to an object where a context was needed.
    NotContext,
    /// `not_object` (2): it is bound, but to a context where an object was needed.
    NotObject,
}

/// Errors of naming operations: the `CosNaming::NamingContext` exceptions, or a system
/// exception.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NamingError {
    /// `NotFound`: the name (from the first component of `rest_of_name` on) is not bound.
    NotFound {
        /// Why.
        why: NotFoundReason,
        /// The part of the name that could not be resolved.
        rest_of_name: Name,
    },
    /// `CannotProceed`: the server gave up; the client may continue at `context`.
    CannotProceed {
        /// Where resolution stopped.
        context: ObjectRef,
        /// What is left to resolve there.
        rest_of_name: Name,
    },
    /// `InvalidName`: the name is empty or has an invalid component (also raised locally by
    /// [`Name::parse`], and for components holding NUL characters).
    InvalidName,
    /// `AlreadyBound`: `bind` of a name that is bound already (use `rebind`).
    AlreadyBound,
    /// `NotEmpty`: `destroy` of a context that still has bindings.
    NotEmpty,
    /// A system exception: the call failed, the reply did not decode (MARSHAL), or the server
    /// raised an exception this client does not know (UNKNOWN).
    System(SystemException),
}

impl fmt::Display for NamingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NamingError::NotFound { why, rest_of_name } => {
                write!(f, "name not found ({why:?}); unresolved: `{rest_of_name}`")
            }
            NamingError::CannotProceed { rest_of_name, .. } => {
                write!(
                    f,
                    "naming service cannot proceed; unresolved: `{rest_of_name}`"
                )
            }
            NamingError::InvalidName => f.write_str("invalid name"),
            NamingError::AlreadyBound => f.write_str("name already bound"),
            NamingError::NotEmpty => f.write_str("naming context not empty"),
            NamingError::System(e) => fmt::Display::fmt(e, f),
        }
    }
}

impl std::error::Error for NamingError {}

impl From<SystemException> for NamingError {
    fn from(e: SystemException) -> Self {
        NamingError::System(e)
    }
}

/// A `CosNaming::NamingContext` (or `NamingContextExt`) reached through an ORB.
///
/// Cheap to clone; `Send + Sync`. Every method is one two-way call.
#[derive(Clone, Debug)]
pub struct NamingContext {
    /// The context's reference, bound to the ORB the calls go through.
    proxy: ObjectProxy,
    timeout: Option<Duration>,
}

impl NamingContext {
    /// A context for `reference` (e.g. parsed from `corbaloc:iiop:1.2@host:port/NameService`,
    /// or an `IOR:` string of omniNames' root context). Nothing is sent until the first call.
    pub fn new(orb: &Orb, reference: ObjectRef) -> Self {
        NamingContext {
            proxy: ObjectProxy::new(orb, reference),
            timeout: None,
        }
    }

    /// The root context of the naming service at `host:port` (object key `NameService`,
    /// IIOP 1.2): what `corbaloc:iiop:1.2@host:port/NameService` names, with the type id
    /// [`NAMING_CONTEXT_EXT_ID`] filled in.
    pub fn at(orb: &Orb, host: &str, port: u16) -> Self {
        let r = ObjectRef::new(
            NAMING_CONTEXT_EXT_ID,
            host,
            port,
            Bytes::from_static(ROOT_KEY.as_bytes()),
        );
        NamingContext::new(orb, r)
    }

    /// The same context with a per-call timeout (default: the ORB's call timeout).
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// The context's object reference.
    pub fn reference(&self) -> &ObjectRef {
        self.proxy.target()
    }

    /// Binds `name` to `obj`; [`NamingError::AlreadyBound`] if it is bound already.
    pub fn bind(&self, name: &Name, obj: &ObjectRef) -> Result<(), NamingError> {
        check_name(name)?;
        self.call("bind", &|w| {
            write_name(w, name);
            obj.encode(w);
        })
        .map(drop)
    }

    /// Binds `name` to `obj`, replacing an existing object binding.
    pub fn rebind(&self, name: &Name, obj: &ObjectRef) -> Result<(), NamingError> {
        check_name(name)?;
        self.call("rebind", &|w| {
            write_name(w, name);
            obj.encode(w);
        })
        .map(drop)
    }

    /// Binds `name` to the naming context `ctx` (so names can be resolved through it).
    pub fn bind_context(&self, name: &Name, ctx: &NamingContext) -> Result<(), NamingError> {
        check_name(name)?;
        self.call("bind_context", &|w| {
            write_name(w, name);
            ctx.reference().encode(w);
        })
        .map(drop)
    }

    /// Binds `name` to the naming context `ctx`, replacing an existing context binding.
    pub fn rebind_context(&self, name: &Name, ctx: &NamingContext) -> Result<(), NamingError> {
        check_name(name)?;
        self.call("rebind_context", &|w| {
            write_name(w, name);
            ctx.reference().encode(w);
        })
        .map(drop)
    }

    /// Resolves `name` to the object (or context) reference bound to it.
    pub fn resolve(&self, name: &Name) -> Result<ObjectRef, NamingError> {
        check_name(name)?;
        let results = self.call("resolve", &|w| write_name(w, name))?;
        read_body(&results, ObjectRef::decode)
    }

    /// Resolves `name` to a naming context.
    pub fn resolve_context(&self, name: &Name) -> Result<NamingContext, NamingError> {
        let r = self.resolve(name)?;
        Ok(self.context(r))
    }

    /// `NamingContextExt::resolve_str`: resolves a name given in its string form by the
    /// server's own parser. Only contexts that are `NamingContextExt` (omniNames' are) support
    /// it.
    pub fn resolve_str(&self, name: &str) -> Result<ObjectRef, NamingError> {
        if name.contains('\0') {
            return Err(NamingError::InvalidName);
        }
        let results = self.call("resolve_str", &|w| w.write_string(name))?;
        read_body(&results, ObjectRef::decode)
    }

    /// Removes the binding of `name`.
    pub fn unbind(&self, name: &Name) -> Result<(), NamingError> {
        check_name(name)?;
        self.call("unbind", &|w| write_name(w, name)).map(drop)
    }

    /// Creates a new context (on the same server), bound to no name.
    pub fn new_context(&self) -> Result<NamingContext, NamingError> {
        let results = self.call("new_context", &|_| {})?;
        let r = read_body(&results, ObjectRef::decode)?;
        Ok(self.context(r))
    }

    /// Creates a new context and binds it to `name`.
    pub fn bind_new_context(&self, name: &Name) -> Result<NamingContext, NamingError> {
        check_name(name)?;
        let results = self.call("bind_new_context", &|w| write_name(w, name))?;
        let r = read_body(&results, ObjectRef::decode)?;
        Ok(self.context(r))
    }

    /// Destroys this context; [`NamingError::NotEmpty`] if it still has bindings. (Unbind it
    /// from its parent separately.)
    pub fn destroy(&self) -> Result<(), NamingError> {
        self.call("destroy", &|_| {}).map(drop)
    }

    /// Lists at most `how_many` bindings of this context.
    ///
    /// If the context holds more, the server also returns a `BindingIterator` for the rest;
    /// this method destroys it (best effort) and returns only the first `how_many`. Use
    /// [`NamingContext::list_all`] to get every binding.
    pub fn list(&self, how_many: u32) -> Result<Vec<Binding>, NamingError> {
        let (bindings, iterator) = self.list_raw(how_many)?;
        if let Some(it) = iterator {
            // Best effort: the server reaps forgotten iterators eventually anyway.
            let _ = self.call_on(&self.iterator(it), "destroy", &|_| {});
        }
        Ok(bindings)
    }

    /// Lists every binding of this context, fetching `batch` at a time (`list`, then
    /// `BindingIterator::next_n` until it is exhausted, then `destroy` on the iterator).
    /// More than [`MAX_LIST_ALL`] bindings is an IMP_LIMIT error.
    pub fn list_all(&self, batch: u32) -> Result<Vec<Binding>, NamingError> {
        let batch = batch.max(1);
        let (mut bindings, iterator) = self.list_raw(batch)?;
        let Some(it) = iterator else {
            return Ok(bindings);
        };
        let it = self.iterator(it);
        let result = loop {
            let results = match self.call_on(&it, "next_n", &|w| w.write_u32(batch)) {
                Ok(r) => r,
                Err(e) => break Err(e),
            };
            let next = read_body(&results, |r| {
                let more = r.read_bool().field("return")?;
                let list = read_binding_list(r).field("bl")?;
                Ok((more, list))
            });
            match next {
                Ok((more, list)) => {
                    let empty = list.is_empty();
                    bindings.extend(list);
                    if !more || empty {
                        break Ok(bindings);
                    }
                    if bindings.len() > MAX_LIST_ALL {
                        // A server that never says "no more" must not keep us here forever.
                        break Err(NamingError::System(
                            SystemException::new(
                                SystemExceptionKind::IMP_LIMIT,
                                0,
                                CompletionStatus::Yes,
                            )
                            .with_detail(format!("list_all: more than {MAX_LIST_ALL} bindings")),
                        ));
                    }
                }
                Err(e) => break Err(e),
            }
        };
        let _ = self.call_on(&it, "destroy", &|_| {});
        result
    }

    /// `list(how_many)`: the bindings and the iterator (`None` when nil).
    fn list_raw(&self, how_many: u32) -> Result<(Vec<Binding>, Option<ObjectRef>), NamingError> {
        let results = self.call("list", &|w| w.write_u32(how_many))?;
        read_body(&results, |r| {
            let list = read_binding_list(r).field("bl")?;
            let it = ObjectRef::decode(r).field("bi")?;
            Ok((list, (!it.is_nil()).then_some(it)))
        })
    }

    /// A context for `r`, through the same ORB and with the same timeout as this one.
    fn context(&self, r: ObjectRef) -> NamingContext {
        NamingContext {
            proxy: ObjectProxy::new(self.proxy.orb(), r),
            timeout: self.timeout,
        }
    }

    /// A proxy for the `BindingIterator` `it`, through the same ORB as this context.
    fn iterator(&self, it: ObjectRef) -> ObjectProxy {
        ObjectProxy::new(self.proxy.orb(), it)
    }

    /// Calls `op` on this context and returns its results.
    fn call(&self, op: &str, body: &dyn Fn(&mut CdrWriter<'_>)) -> Result<CdrBody, NamingError> {
        self.call_on(&self.proxy, op, body)
    }

    /// Calls `op` on `target` (a two-way call with CDR parameters, through the ORB's public
    /// [`ObjectProxy::invoke_cdr`]) and returns its results; a user exception is decoded into
    /// the error it stands for (a system exception already is one).
    fn call_on(
        &self,
        target: &ObjectProxy,
        op: &str,
        body: &dyn Fn(&mut CdrWriter<'_>),
    ) -> Result<CdrBody, NamingError> {
        let reply = target.invoke_cdr(op, body, self.timeout)?;
        check_reply(reply)
    }
}

/// Refuses names that cannot be encoded (NUL characters in a CDR string).
fn check_name(name: &Name) -> Result<(), NamingError> {
    if name
        .0
        .iter()
        .any(|c| c.id.contains('\0') || c.kind.contains('\0'))
    {
        return Err(NamingError::InvalidName);
    }
    Ok(())
}

/// Writes a `CosNaming::Name`: count, then `string id; string kind` per component.
fn write_name(w: &mut CdrWriter<'_>, name: &Name) {
    w.write_len(name.0.len());
    for c in &name.0 {
        w.write_string(&c.id);
        w.write_string(&c.kind);
    }
}

/// Reads a naming string: UTF-8 if it is valid UTF-8, else ISO-8859-1.
fn read_name_string(r: &mut CdrReader<'_>) -> Result<String, DecodeError> {
    let b = r.read_string_bytes()?;
    Ok(match std::str::from_utf8(b) {
        Ok(s) => s.to_owned(),
        Err(_) => b.iter().map(|&c| char::from(c)).collect(),
    })
}

/// Reads a `CosNaming::Name`.
fn read_name(r: &mut CdrReader<'_>) -> Result<Name, DecodeError> {
    // A component is at least two empty strings: 4 + 1, pad 3, 4 + 1 bytes.
    let n = r.read_count(13).field("Name")?;
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        let id = read_name_string(r).field("id")?;
        let kind = read_name_string(r).field("kind")?;
        v.push(NameComponent { id, kind });
    }
    Ok(Name(v))
}

/// Reads a `CosNaming::BindingList`.
fn read_binding_list(r: &mut CdrReader<'_>) -> Result<Vec<Binding>, DecodeError> {
    // A binding is at least an empty Name (4) and an enum (4).
    let n = r.read_count(8)?;
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        let name = read_name(r).field("binding_name")?;
        let at = r.position();
        let binding_type = match r.read_u32().field("binding_type")? {
            0 => BindingType::Object,
            1 => BindingType::Context,
            t => {
                return Err(
                    DecodeError::new(DecodeErrorKind::BadEnum(t), at).in_field("binding_type")
                )
            }
        };
        v.push(Binding { name, binding_type });
    }
    Ok(v)
}

/// MARSHAL for a reply that does not decode.
fn bad_reply(what: &str, e: &DecodeError) -> NamingError {
    NamingError::System(SystemException::marshal(
        minor::BAD_REPLY,
        CompletionStatus::Yes,
        format!("{what}: {e}"),
    ))
}

/// Decodes the results of a call with `f`.
fn read_body<T>(
    body: &CdrBody,
    f: impl FnOnce(&mut CdrReader<'_>) -> Result<T, DecodeError>,
) -> Result<T, NamingError> {
    let mut r = body.reader();
    f(&mut r).map_err(|e| bad_reply("naming reply does not decode", &e))
}

/// The results of a call, or the naming exception it raised.
fn check_reply(reply: CdrReply) -> Result<CdrBody, NamingError> {
    match reply {
        CdrReply::NoException(results) => Ok(results),
        CdrReply::UserException {
            repository_id,
            members,
        } => Err(decode_user_exception(&repository_id, &members)),
    }
}

/// The members of `NotFound`: `NotFoundReason why; Name rest_of_name`.
fn decode_not_found(r: &mut CdrReader<'_>) -> Result<NamingError, DecodeError> {
    let at = r.position();
    let why = match r.read_u32().field("why")? {
        0 => NotFoundReason::MissingNode,
        1 => NotFoundReason::NotContext,
        2 => NotFoundReason::NotObject,
        v => return Err(DecodeError::new(DecodeErrorKind::BadEnum(v), at).in_field("why")),
    };
    let rest_of_name = read_name(r).field("rest_of_name")?;
    Ok(NamingError::NotFound { why, rest_of_name })
}

/// The members of `CannotProceed`: `NamingContext cxt; Name rest_of_name`.
fn decode_cannot_proceed(r: &mut CdrReader<'_>) -> Result<NamingError, DecodeError> {
    let context = ObjectRef::decode(r).field("cxt")?;
    let rest_of_name = read_name(r).field("rest_of_name")?;
    Ok(NamingError::CannotProceed {
        context,
        rest_of_name,
    })
}

/// Decodes a user exception (its repository id, and its members) into a [`NamingError`].
fn decode_user_exception(id: &str, members: &CdrBody) -> NamingError {
    let mut r = members.reader();
    let decoded = match id {
        exception_id::NOT_FOUND => decode_not_found(&mut r),
        exception_id::CANNOT_PROCEED => decode_cannot_proceed(&mut r),
        exception_id::INVALID_NAME => Ok(NamingError::InvalidName),
        exception_id::ALREADY_BOUND => Ok(NamingError::AlreadyBound),
        exception_id::NOT_EMPTY => Ok(NamingError::NotEmpty),
        other => Ok(NamingError::System(
            SystemException::new(
                SystemExceptionKind::UNKNOWN,
                minor::UNKNOWN_EXCEPTION_ID,
                CompletionStatus::Yes,
            )
            .with_detail(format!(
                "naming service raised unexpected user exception `{other}`"
            )),
        )),
    };
    decoded.unwrap_or_else(|e| bad_reply(&format!("user exception `{id}` does not decode"), &e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use protorb::cdr::ByteOrder;
    // Forging and decoding raw GIOP messages takes the wire layer: these tests (only) build
    // against the protorb crate with its `unstable-wire` feature (see Cargo.toml).
    use protorb::giop::{
        write_request, GiopCodec, Message, RequestHeader, ServiceContextList, TargetAddress,
        Version,
    };
    use tokio_util::codec::Decoder;

    /// What a naming call makes of the reply frame `bytes`: the ORB's side (as
    /// `ObjectProxy::invoke_cdr` decodes it), then this crate's.
    fn outcome(bytes: &[u8]) -> Result<CdrBody, NamingError> {
        let mut codec = GiopCodec::new(1 << 20);
        let mut buf = BytesMut::from(bytes);
        let frame = codec
            .decode(&mut buf)
            .expect("frame decodes")
            .expect("whole frame");
        let reply = match frame.message {
            Message::Reply(r) => *r,
            m => panic!("not a reply: {m:?}"),
        };
        check_reply(reply.into_cdr_reply()?)
    }

    /// WIRE-GIOP §7.3: the golden `resolve` request for `[("echoLE","svc")]`, request id 8.
    #[test]
    fn resolve_request_matches_golden_bytes() {
        let golden: &[u8] = &[
            0x47, 0x49, 0x4f, 0x50, 0x01, 0x02, 0x01, 0x00, 0x44, 0x00, 0x00, 0x00, 0x08, 0x00,
            0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0b, 0x00, 0x00, 0x00,
            0x4e, 0x61, 0x6d, 0x65, 0x53, 0x65, 0x72, 0x76, 0x69, 0x63, 0x65, 0x00, 0x08, 0x00,
            0x00, 0x00, 0x72, 0x65, 0x73, 0x6f, 0x6c, 0x76, 0x65, 0x00, 0x00, 0x00, 0x00, 0x00,
            0x01, 0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00, 0x65, 0x63, 0x68, 0x6f, 0x4c, 0x45,
            0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x73, 0x76, 0x63, 0x00,
        ];
        if ByteOrder::NATIVE != ByteOrder::Little {
            return; // The capture is little-endian; we write in native order.
        }
        let header = RequestHeader {
            deadline: None,
            request_id: 8,
            response_flags: 0x03,
            target: TargetAddress::Key(Bytes::from_static(ROOT_KEY.as_bytes()).into()),
            operation: "resolve".into(),
            service_context: ServiceContextList::default(),
        };
        let name = Name::simple("echoLE", "svc");
        let mut buf = BytesMut::new();
        write_request(&mut buf, Version::V1_2, &header, |w| write_name(w, &name));
        assert_eq!(&buf[..], golden);
    }

    /// A 1.2 reply header (24 bytes, no contexts) with `status`, followed by `body`.
    fn le_reply(request_id: u32, status: u32, body: &[u8]) -> Vec<u8> {
        let mut v = b"GIOP\x01\x02\x01\x01".to_vec();
        v.extend_from_slice(&u32::try_from(12 + body.len()).unwrap().to_le_bytes());
        v.extend_from_slice(&request_id.to_le_bytes());
        v.extend_from_slice(&status.to_le_bytes());
        v.extend_from_slice(&[0, 0, 0, 0]); // no service contexts; the body starts at 24
        v.extend_from_slice(body);
        v
    }

    /// WIRE-GIOP §7.3: the NotFound body omniNames sent for `[("missing","")]`.
    fn golden_not_found_body() -> Vec<u8> {
        let mut b = vec![0x31, 0, 0, 0];
        b.extend_from_slice(b"IDL:omg.org/CosNaming/NamingContext/NotFound:1.0\0");
        b.extend_from_slice(&[0xaa, 0xbb, 0xcc]); // padding (garbage is allowed)
        b.extend_from_slice(&[0, 0, 0, 0, 1, 0, 0, 0, 8, 0, 0, 0]);
        b.extend_from_slice(b"missing\0");
        b.extend_from_slice(&[1, 0, 0, 0, 0]);
        b
    }

    #[test]
    fn not_found_reply_decodes() {
        assert_eq!(
            outcome(&le_reply(8, 1, &golden_not_found_body())).unwrap_err(),
            NamingError::NotFound {
                why: NotFoundReason::MissingNode,
                rest_of_name: Name::simple("missing", ""),
            }
        );
    }

    #[test]
    fn resolve_reply_decodes_the_inline_ior() {
        // The IOR inline: type id "IDL:demo/Echo:1.0", one IIOP 1.2 profile, no components.
        let profile = protorb::IiopProfile {
            version: Version::V1_2,
            host: "127.0.0.1".into(),
            port: 28090,
            object_key: Bytes::from_static(b"echo"),
            components: Vec::new(),
        };
        let data = profile.encode();
        let mut body = vec![0x12, 0, 0, 0];
        body.extend_from_slice(b"IDL:demo/Echo:1.0\0");
        body.extend_from_slice(&[0, 0]); // pad to 4
        body.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0]);
        body.extend_from_slice(&u32::try_from(data.len()).unwrap().to_le_bytes());
        body.extend_from_slice(&data);
        let results = outcome(&le_reply(8, 0, &body)).unwrap();
        let r = read_body(&results, ObjectRef::decode).unwrap();
        assert_eq!(r.type_id(), "IDL:demo/Echo:1.0");
        let p = r.primary().unwrap();
        assert_eq!((p.host.as_str(), p.port), ("127.0.0.1", 28090));
        assert_eq!(&p.object_key[..], b"echo");
    }

    #[test]
    fn member_less_exceptions_and_unknown_ids() {
        for (id, want) in [
            (exception_id::INVALID_NAME, NamingError::InvalidName),
            (exception_id::ALREADY_BOUND, NamingError::AlreadyBound),
            (exception_id::NOT_EMPTY, NamingError::NotEmpty),
        ] {
            let mut body = u32::try_from(id.len() + 1).unwrap().to_le_bytes().to_vec();
            body.extend_from_slice(id.as_bytes());
            body.push(0);
            assert_eq!(outcome(&le_reply(2, 1, &body)).unwrap_err(), want);
        }
        let mut body = 12u32.to_le_bytes().to_vec();
        body.extend_from_slice(b"IDL:x/Y:1.0\0");
        match outcome(&le_reply(2, 1, &body)).unwrap_err() {
            NamingError::System(e) => assert_eq!(e.kind, SystemExceptionKind::UNKNOWN),
            e => panic!("{e:?}"),
        }
    }

    #[test]
    fn system_exception_reply_decodes() {
        let mut body = 36u32.to_le_bytes().to_vec();
        body.extend_from_slice(b"IDL:omg.org/CORBA/BAD_OPERATION:1.0\0");
        body.extend_from_slice(&0x4154_0026u32.to_le_bytes());
        body.extend_from_slice(&1u32.to_le_bytes());
        match outcome(&le_reply(12, 2, &body)).unwrap_err() {
            NamingError::System(e) => {
                assert_eq!(e.kind, SystemExceptionKind::BAD_OPERATION);
                assert_eq!(e.minor, 0x4154_0026);
                assert_eq!(e.completed, CompletionStatus::No);
            }
            e => panic!("{e:?}"),
        }
    }

    #[test]
    fn malformed_replies_are_marshal_errors_not_panics() {
        let full = golden_not_found_body();
        for cut in 0..full.len() {
            match outcome(&le_reply(8, 1, &full[..cut])).unwrap_err() {
                NamingError::System(e) => assert_eq!(e.kind, SystemExceptionKind::MARSHAL),
                e => panic!("cut {cut}: {e:?}"),
            }
        }
        // A bad NotFoundReason.
        let mut bad = full.clone();
        bad[56] = 7;
        assert!(matches!(
            outcome(&le_reply(8, 1, &bad)).unwrap_err(),
            NamingError::System(_)
        ));
        // A huge component count.
        let mut bad = full;
        bad[60..64].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            outcome(&le_reply(8, 1, &bad)).unwrap_err(),
            NamingError::System(_)
        ));
        // Truncated list bodies.
        let results = outcome(&le_reply(3, 0, &[2, 0, 0, 0, 1])).unwrap();
        assert!(read_body(&results, read_binding_list).is_err());
    }

    #[test]
    fn names_round_trip_in_both_byte_orders() {
        let name = Name(vec![
            NameComponent::new("a", ""),
            NameComponent::new("", "k"),
            NameComponent::new("ünï", "cödé"),
        ]);
        for order in [ByteOrder::Little, ByteOrder::Big] {
            let mut buf = BytesMut::new();
            let mut w = CdrWriter::new(&mut buf, order);
            w.write_octet(0);
            write_name(&mut w, &name);
            let mut r = CdrReader::new(&buf, order);
            r.skip(1).unwrap();
            assert_eq!(read_name(&mut r).unwrap(), name);
            assert_eq!(r.remaining(), 0);
        }
        // ISO-8859-1 bytes that are not UTF-8.
        let data = [1, 0, 0, 0, 2, 0, 0, 0, 0xe9, 0, 0, 0, 1, 0, 0, 0, 0];
        let n = read_name(&mut CdrReader::new(&data, ByteOrder::Little)).unwrap();
        assert_eq!(n, Name::simple("é", ""));
    }

    #[test]
    fn binding_list_decodes() {
        // [("a","") object, ("b","k") context]
        let mut b = vec![2, 0, 0, 0];
        b.extend_from_slice(&[
            1, 0, 0, 0, 2, 0, 0, 0, b'a', 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0,
        ]);
        b.extend_from_slice(&[0, 0, 0, 0]);
        b.extend_from_slice(&[1, 0, 0, 0, 2, 0, 0, 0, b'b', 0, 0, 0, 2, 0, 0, 0, b'k', 0]);
        b.extend_from_slice(&[0, 0, 1, 0, 0, 0]);
        let l = read_binding_list(&mut CdrReader::new(&b, ByteOrder::Little)).unwrap();
        assert_eq!(
            l,
            vec![
                Binding {
                    name: Name::simple("a", ""),
                    binding_type: BindingType::Object
                },
                Binding {
                    name: Name::simple("b", "k"),
                    binding_type: BindingType::Context
                },
            ]
        );
    }

    #[test]
    fn parse_and_display() {
        let n = Name::parse("a.b/c").unwrap();
        assert_eq!(
            n,
            Name(vec![
                NameComponent::new("a", "b"),
                NameComponent::new("c", "")
            ])
        );
        assert_eq!(n.to_string(), "a.b/c");
        // omniNames' to_name("x.y/z\.w.k") = [("x","y"),("z.w","k")] (WIRE-GIOP §4.5).
        let n = Name::parse(r"x.y/z\.w.k").unwrap();
        assert_eq!(
            n,
            Name(vec![
                NameComponent::new("x", "y"),
                NameComponent::new("z.w", "k")
            ])
        );
        assert_eq!(n.to_string(), r"x.y/z\.w.k");
        assert_eq!(Name::parse(".").unwrap(), Name::simple("", ""));
        assert_eq!(Name::parse(".k").unwrap(), Name::simple("", "k"));
        assert_eq!(Name::parse(r"a\/b\\c").unwrap(), Name::simple(r"a/b\c", ""));
        assert_eq!(Name::parse("./x").unwrap().len(), 2);
        for s in [".", ".k", "a", "a.b/c.d/e", r"a\/b\\c.\.", "é.ü"] {
            assert_eq!(Name::parse(s).unwrap().to_string(), s, "{s}");
        }
        for bad in [
            "", "/", "a/", "/a", "a//b", "a.b.c", "a.", "a./b", r"a\", r"a\x", "a\0b",
        ] {
            assert_eq!(Name::parse(bad), Err(NamingError::InvalidName), "{bad:?}");
        }
        assert_eq!("a/b".parse::<Name>().unwrap().len(), 2);
        assert_eq!(Name::default().to_string(), "");
    }

    #[test]
    fn nul_in_a_component_is_refused_before_sending() {
        let orb = Orb::builder().threads(0).no_listen().build().unwrap();
        let ctx = NamingContext::at(&orb, "127.0.0.1", 1);
        let bad = Name::simple("a\0b", "");
        assert_eq!(ctx.resolve(&bad), Err(NamingError::InvalidName));
        assert_eq!(
            ctx.bind(&bad, &ObjectRef::nil()),
            Err(NamingError::InvalidName)
        );
        orb.shutdown();
    }
}
