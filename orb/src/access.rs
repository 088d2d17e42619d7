//! [`AccessControl`]: the server interceptor the ORB ships for the usual authorisation need,
//! "who may call what": rules over the caller's certificate identity
//! ([`Context::peer_identity`]), the object key and the operation, checked before the
//! servant runs, deny by default. Its own module because it is policy built on the
//! interceptor and identity mechanisms (`interceptor.rs`, `identity.rs`), which know nothing
//! of it.

use crate::exception::{minor, CompletionStatus, SystemException, SystemExceptionKind};
use crate::identity::PeerIdentity;
use crate::interceptor::ServerInterceptor;
use crate::servant::Context;
use std::fmt::Write as _;

/// A [`ServerInterceptor`] that refuses every request no [`AccessRule`] allows, with NO_PERMISSION
/// (completed NO, minor [`ACCESS_DENIED`](crate::minor::ACCESS_DENIED)) before the servant
/// runs.
///
/// A rule names callers (by certificate name, subject, any verified certificate, none, or a
/// collocated call), and optionally the objects (by object key) and operations it opens to
/// them; a request is allowed if any rule matches it. A caller without a peer identity
/// (plain TCP, or TLS without a client certificate) is *anonymous*: only a
/// [`AccessRule::anonymous`] or [`AccessRule::anyone`] rule lets it in. Collocated calls (this ORB
/// calling its own objects) come over no connection: only [`AccessRule::collocated`] and
/// [`AccessRule::anyone`] match them.
///
/// A rule that matches the caller and the object also allows the standard operations
/// `_is_a` and `_non_existent` on it, whatever its operation list: a stub's `narrow` asks
/// them of an object it may call.
///
/// The refusal's detail (sent to the caller as error text, and logged) says who was refused
/// what: the peer's subject (or "an anonymous caller"), the operation and the object key
/// (cut to 64 characters, escaped). It names no rule.
///
/// ```
/// use protorb::{AccessControl, AccessRule, Orb};
///
/// let acl = AccessControl::new()
///     // Anyone whose certificate names `ops.example.com` (CN or SAN): everything.
///     .allow(AccessRule::name("ops.example.com"))
///     // `alice` may read balances, on the `accounts` object only.
///     .allow(AccessRule::name("alice").objects(["accounts"]).operations(["Balance"]))
///     // A certificate with this exact subject: any operation of `accounts`.
///     .allow(AccessRule::subject("CN=teller,O=Example Bank").objects(["accounts"]))
///     // Callers without a certificate may only ping.
///     .allow(AccessRule::anonymous().operations(["Ping"]))
///     // Calls this ORB makes to its own objects.
///     .allow(AccessRule::collocated());
/// let orb = Orb::builder().server_interceptor(acl).threads(0).build()?;
/// # orb.shutdown();
/// # Ok::<(), protorb::SystemException>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct AccessControl {
    rules: Vec<AccessRule>,
}

impl AccessControl {
    /// No rules: every request is refused until [`allow`](Self::allow) adds some.
    pub fn new() -> Self {
        Self::default()
    }

    /// These rules plus `rule`.
    #[must_use]
    pub fn allow(mut self, rule: AccessRule) -> Self {
        self.rules.push(rule);
        self
    }

    /// Whether a rule allows the request of `ctx`: `Ok`, or the NO_PERMISSION the
    /// interceptor refuses it with. What [`receive_request`](ServerInterceptor::receive_request)
    /// does; a servant may call it too, on its own rules.
    pub fn check(&self, ctx: &Context) -> Result<(), SystemException> {
        let caller = Caller::of(ctx);
        let (key, op) = (ctx.object_key(), ctx.operation());
        if self.rules.iter().any(|r| r.allows(&caller, key, op)) {
            return Ok(());
        }
        Err(SystemException::new(
            SystemExceptionKind::NO_PERMISSION,
            minor::ACCESS_DENIED,
            CompletionStatus::No,
        )
        .with_detail(refusal(&caller, key, op)))
    }
}

impl ServerInterceptor for AccessControl {
    fn receive_request(&self, ctx: &Context) -> Result<(), SystemException> {
        self.check(ctx)
    }
}

/// Who made a request, as rules tell callers apart.
enum Caller<'a> {
    /// Over a connection, with a verified certificate.
    Identified(&'a PeerIdentity),
    /// Over a connection, without one.
    Anonymous,
    /// From this ORB itself (no connection).
    Collocated,
}

impl<'a> Caller<'a> {
    fn of(ctx: &'a Context) -> Self {
        match (ctx.peer_identity(), ctx.peer()) {
            (Some(id), _) => Caller::Identified(id),
            (None, Some(_)) => Caller::Anonymous,
            (None, None) => Caller::Collocated,
        }
    }
}

/// One permission of an [`AccessControl`]: which callers, and (unless every object and
/// every operation) which objects and operations.
///
/// Built from the callers ([`name`](Self::name), [`subject`](Self::subject),
/// [`authenticated`](Self::authenticated), [`anonymous`](Self::anonymous),
/// [`collocated`](Self::collocated), [`anyone`](Self::anyone)), then narrowed with
/// [`objects`](Self::objects) and [`operations`](Self::operations).
#[derive(Clone, Debug)]
pub struct AccessRule {
    who: Who,
    /// `None`: every object.
    objects: Option<Vec<Vec<u8>>>,
    /// `None`: every operation.
    operations: Option<Vec<String>>,
}

#[derive(Clone, Debug)]
enum Who {
    Name(String),
    Subject(String),
    Authenticated,
    Anonymous,
    Collocated,
    Anyone,
}

impl AccessRule {
    fn of(who: Who) -> Self {
        AccessRule {
            who,
            objects: None,
            operations: None,
        }
    }

    /// Callers whose certificate has `name` as its common name, or among its DNS, URI or
    /// e-mail subject alternative names ([`PeerIdentity::has_name`]).
    pub fn name(name: impl Into<String>) -> Self {
        Self::of(Who::Name(name.into()))
    }

    /// Callers whose certificate's subject is `subject`, RFC 4514 style (`CN=client,
    /// O=Example`; spaces around the commas and equal signs do not matter, case does).
    pub fn subject(subject: impl Into<String>) -> Self {
        Self::of(Who::Subject(normalize_dn(&subject.into())))
    }

    /// Every caller with a verified certificate.
    pub fn authenticated() -> Self {
        Self::of(Who::Authenticated)
    }

    /// Callers over a connection without a certificate (plain TCP, TLS without a client
    /// certificate).
    pub fn anonymous() -> Self {
        Self::of(Who::Anonymous)
    }

    /// Collocated calls: this ORB calling its own objects, over no connection (and test
    /// contexts, [`Context::for_test`], which have no peer either).
    pub fn collocated() -> Self {
        Self::of(Who::Collocated)
    }

    /// Every caller, with a certificate or without, collocated or not.
    pub fn anyone() -> Self {
        Self::of(Who::Anyone)
    }

    /// This rule for the objects with these keys only (added to those a previous call
    /// named).
    #[must_use]
    pub fn objects<K: AsRef<[u8]>>(mut self, keys: impl IntoIterator<Item = K>) -> Self {
        let list = self.objects.get_or_insert_with(Vec::new);
        list.extend(keys.into_iter().map(|k| k.as_ref().to_vec()));
        self
    }

    /// This rule for these operations only (added to those a previous call named). The
    /// names are those on the wire: a protobuf service's method names as written in the
    /// `.proto` (`Balance`), an IDL interface's operation names.
    #[must_use]
    pub fn operations<S: Into<String>>(mut self, operations: impl IntoIterator<Item = S>) -> Self {
        let list = self.operations.get_or_insert_with(Vec::new);
        list.extend(operations.into_iter().map(Into::into));
        self
    }

    fn allows(&self, caller: &Caller<'_>, key: &[u8], op: &str) -> bool {
        let who = match (&self.who, caller) {
            (Who::Anyone, _) => true,
            (Who::Name(n), Caller::Identified(id)) => id.has_name(n),
            (Who::Subject(s), Caller::Identified(id)) => normalize_dn(id.subject()) == *s,
            (Who::Authenticated, Caller::Identified(_)) => true,
            (Who::Anonymous, Caller::Anonymous) => true,
            (Who::Collocated, Caller::Collocated) => true,
            _ => false,
        };
        who && self
            .objects
            .as_ref()
            .is_none_or(|list| list.iter().any(|k| k == key))
            && (STANDARD_OPERATIONS.contains(&op)
                || self
                    .operations
                    .as_ref()
                    .is_none_or(|list| list.iter().any(|o| o == op)))
    }
}

/// The operations every object answers, allowed by any rule that allows the object.
const STANDARD_OPERATIONS: &[&str] = &["_is_a", "_non_existent", "_not_existent"];

/// A distinguished name without the spaces around its separators, for comparison.
fn normalize_dn(dn: &str) -> String {
    let mut out = String::with_capacity(dn.len());
    for (i, rdn) in dn.split(',').enumerate() {
        if i > 0 {
            out.push(',');
        }
        match rdn.split_once('=') {
            Some((k, v)) => {
                out.push_str(k.trim());
                out.push('=');
                out.push_str(v.trim());
            }
            None => out.push_str(rdn.trim()),
        }
    }
    out
}

/// The refusal's detail: who, what, on which object (the key cut and escaped: it is the
/// caller's own bytes, which a log must not take raw).
fn refusal(caller: &Caller<'_>, key: &[u8], op: &str) -> String {
    const MAX: usize = 64;
    let mut text = match caller {
        Caller::Identified(id) if !id.subject().is_empty() => format!("peer `{}`", id.subject()),
        Caller::Identified(id) => format!("peer `{}`", id.common_name().unwrap_or("?")),
        Caller::Anonymous => "an anonymous caller (no verified client certificate)".to_string(),
        Caller::Collocated => "a collocated caller".to_string(),
    };
    let key = String::from_utf8_lossy(key);
    let cut: String = key.chars().take(MAX).collect();
    let op_cut: String = op.chars().take(MAX).collect();
    let _ = write!(
        text,
        " may not call {op_cut:?} on object {cut:?}{}",
        if key.chars().count() > MAX { "…" } else { "" }
    );
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alice() -> PeerIdentity {
        PeerIdentity::new(
            "CN=alice, O=Example",
            Some("alice".into()),
            vec!["alice.example.com".into()],
        )
    }

    fn denied(r: Result<(), SystemException>) -> SystemException {
        let e = r.expect_err("the request was allowed");
        assert_eq!(e.kind, SystemExceptionKind::NO_PERMISSION);
        assert_eq!(e.completed, CompletionStatus::No);
        assert_eq!(e.minor, minor::ACCESS_DENIED);
        e
    }

    #[test]
    fn default_deny() {
        let acl = AccessControl::new();
        let e = denied(acl.check(&Context::for_test("op").with_peer_identity(alice())));
        let detail = e.detail().unwrap_or_default();
        assert!(detail.contains("CN=alice, O=Example"), "{detail}");
        assert!(detail.contains("\"op\""), "{detail}");
        // A test context is collocated: also refused.
        denied(acl.check(&Context::for_test("op")));
    }

    #[test]
    fn names_subjects_objects_and_operations() {
        let acl = AccessControl::new()
            .allow(AccessRule::name("alice.example.com").operations(["Read"]))
            .allow(AccessRule::subject("CN=bob,O=Example").objects(["k"]));
        let ctx = |op: &str, id: PeerIdentity| Context::for_test(op).with_peer_identity(id);
        assert!(acl.check(&ctx("Read", alice())).is_ok());
        denied(acl.check(&ctx("Write", alice())));
        // The standard operations follow the object, not the operation list.
        assert!(acl.check(&ctx("_is_a", alice())).is_ok());
        let bob = PeerIdentity::new("CN=bob, O=Example", Some("bob".into()), vec![]);
        // `for_test` has an empty object key: bob's rule names object `k` only.
        denied(acl.check(&ctx("Read", bob.clone())));
        denied(acl.check(&ctx("_is_a", bob)));
        let carol = PeerIdentity::new("CN=carol", Some("carol".into()), vec![]);
        denied(acl.check(&ctx("Read", carol.clone())));
        let everyone = acl
            .clone()
            .allow(AccessRule::authenticated().operations(["Ping"]));
        assert!(everyone.check(&ctx("Ping", carol)).is_ok());
        // Authenticated is not anonymous nor collocated.
        denied(everyone.check(&Context::for_test("Ping")));
    }

    #[test]
    fn collocated_and_anyone() {
        let ctx = Context::for_test("op");
        denied(
            AccessControl::new()
                .allow(AccessRule::anonymous())
                .allow(AccessRule::authenticated())
                .check(&ctx),
        );
        assert!(AccessControl::new()
            .allow(AccessRule::collocated())
            .check(&ctx)
            .is_ok());
        assert!(AccessControl::new()
            .allow(AccessRule::anyone())
            .check(&ctx)
            .is_ok());
        let with_id = Context::for_test("op").with_peer_identity(alice());
        denied(
            AccessControl::new()
                .allow(AccessRule::collocated())
                .check(&with_id),
        );
    }

    #[test]
    fn refusal_detail_is_cut_and_escaped() {
        let key = vec![b'\n'; 200];
        let text = refusal(&Caller::Anonymous, &key, "op\u{1b}[31m");
        assert!(!text.contains('\n') && !text.contains('\u{1b}'), "{text}");
        assert!(text.len() < 600, "{text}");
        assert!(text.starts_with("an anonymous caller"));
    }

    #[test]
    fn dn_normalization() {
        assert_eq!(normalize_dn(" CN = a , O=b "), "CN=a,O=b");
        assert_ne!(normalize_dn("CN=a"), normalize_dn("cn=A"));
    }
}
