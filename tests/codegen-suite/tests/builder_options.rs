//! The Builder's options, as `build.rs` sets them for `proto/extras`: prost-build's settings
//! passed through, default NO_IMPLEMENT servant methods answered over a real ORB, deprecation,
//! shared exception enums, server-only and client-only builds talking to each other, and
//! `compile_well_known_types`.

use codegen_suite::extras::attrs::{shape, Color, Point, Shape};
use codegen_suite::extras::library::{
    Book, BookId, Library, LibraryClient, LibraryLendError, LibraryRenewError, LibraryReturnError,
    LibrarySkeleton, NotFound,
};
use codegen_suite::extras::{split_client, split_server};
use codegen_suite::generated;
use prost::Message;
use protorb::{CompletionStatus, Context, Exception, Orb, SystemException, SystemExceptionKind};
use std::collections::{BTreeMap, HashSet};

struct Pair {
    server: Orb,
    client: Orb,
}

impl Pair {
    fn new() -> Pair {
        let build = || Orb::builder().threads(2).build().expect("orb builds");
        Pair {
            server: build(),
            client: build(),
        }
    }

    /// Activates `servant` in the server and returns the reference as the client ORB reads it.
    fn serve(&self, key: &'static str, servant: impl protorb::Servant) -> protorb::ObjectRef {
        let obj = self.server.activate(key, servant);
        let ior = self.server.object_to_string(&obj);
        self.client.string_to_object(&ior).expect("the IOR parses")
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        self.client.shutdown();
        self.server.shutdown();
    }
}

fn shape(name: &str) -> Shape {
    Shape {
        name: name.into(),
        tags: [("b".to_string(), 2), ("a".to_string(), 1)].into(),
        origin: Some(Box::new(Point { x: 1, y: 2 })),
        kind: Some(shape::Kind::Radius(3)),
        color: Color::Green as i32,
        inner: Some(Box::new(Shape::default())),
    }
}

#[test]
fn attributes_btree_map_and_boxed_reach_prost() {
    // message_attribute: Shape derives Eq and Hash (possible because its map is a BTreeMap).
    let set: HashSet<Shape> = [shape("s"), shape("s"), shape("t")].into_iter().collect();
    assert_eq!(set.len(), 2);

    // btree_map: ordered by key.
    let s = shape("s");
    let tags: &BTreeMap<String, i32> = &s.tags;
    assert_eq!(tags.keys().collect::<Vec<_>>(), ["a", "b"]);

    // boxed: a plain message field, boxed on request; it still round-trips.
    let origin: &Option<Box<Point>> = &s.origin;
    assert_eq!(origin.as_deref(), Some(&Point { x: 1, y: 2 }));
    assert_eq!(Shape::decode(s.encode_to_vec().as_slice()).unwrap(), s);

    // type_attribute: Point orders; enum_attribute: the oneof compares.
    let mut points = vec![
        Point { x: 2, y: 0 },
        Point { x: 1, y: 5 },
        Point { x: 1, y: 1 },
    ];
    points.sort();
    assert_eq!(
        points,
        [
            Point { x: 1, y: 1 },
            Point { x: 1, y: 5 },
            Point { x: 2, y: 0 }
        ]
    );
    assert!(shape::Kind::Radius(1) < shape::Kind::Radius(2));

    // field_attribute: on that field only.
    let name_at = generated::ATTRS
        .find("pub name:")
        .expect("Shape has a name field");
    assert!(
        generated::ATTRS[..name_at].ends_with("///Set by field_attribute.\n    "),
        "{}",
        generated::ATTRS
    );
    assert_eq!(
        generated::ATTRS.matches("Set by field_attribute.").count(),
        1
    );
}

/// A library that serves only `Lend` and `Return`; the other operations keep the default
/// bodies `generate_default_stubs(true)` gave them.
struct Shelf;

/// One helper for two operations: they share the error enum.
fn not_found(id: &str) -> LibraryLendError {
    NotFound { id: id.into() }.into()
}

fn book(id: &str) -> Book {
    Book {
        id: id.into(),
        title: format!("title {id}"),
        ..Book::default()
    }
}

impl Library for Shelf {
    fn lend(&self, _ctx: &Context, req: BookId) -> Result<Book, LibraryLendError> {
        match req.id.as_str() {
            "dune" => Ok(book("dune")),
            other => Err(not_found(other)),
        }
    }

    fn r#return(&self, _ctx: &Context, req: BookId) -> Result<Book, LibraryReturnError> {
        Err(not_found(&req.id))
    }
}

/// NO_IMPLEMENT as a client receives it (the detail text stays on the server).
fn assert_no_implement(e: &SystemException) {
    assert_eq!(e.kind, SystemExceptionKind::NO_IMPLEMENT, "{e}");
    assert_eq!(e.completed, CompletionStatus::No, "{e}");
    assert_eq!(e.minor, 0, "{e}");
}

#[test]
fn default_methods_answer_no_implement_over_the_orb() {
    let p = Pair::new();
    let lib = LibraryClient::narrow(&p.client, p.serve("lib", LibrarySkeleton::new(Shelf)))
        .expect("narrow");

    // Implemented operations work as usual.
    assert_eq!(
        lib.lend(BookId { id: "dune".into() }).unwrap(),
        book("dune")
    );

    // Not implemented, with user exceptions declared: the enum's System variant.
    match lib.renew(BookId { id: "dune".into() }) {
        Err(LibraryRenewError::System(e)) => assert_no_implement(&e),
        other => panic!("expected NO_IMPLEMENT, got {other:?}"),
    }
    // Not implemented, no user exceptions (and deprecated).
    #[allow(deprecated)]
    let count = lib.count(());
    match count {
        Err(Exception::System(e)) => assert_no_implement(&e),
        other => panic!("expected NO_IMPLEMENT, got {other:?}"),
    }

    // The default body, called directly, says which operation.
    match Shelf.renew(&Context::for_test("Renew"), BookId::default()) {
        Err(LibraryRenewError::System(e)) => {
            assert_eq!(e.kind, SystemExceptionKind::NO_IMPLEMENT);
            assert_eq!(
                e.detail(),
                Some("operation `Renew` of `extras.library.Library` is not implemented")
            );
        }
        other => panic!("expected NO_IMPLEMENT, got {other:?}"),
    }
}

/// The one place that turns either operation's error into text: it takes the shared enum.
fn explain(e: &LibraryLendError) -> String {
    match e {
        LibraryLendError::NotFound(nf) => format!("no book {}", nf.id),
        LibraryLendError::System(s) => format!("system: {s}"),
    }
}

#[test]
fn methods_raising_the_same_exceptions_share_one_enum() {
    let p = Pair::new();
    let lib = LibraryClient::narrow(&p.client, p.serve("lib", LibrarySkeleton::new(Shelf)))
        .expect("narrow");

    let lend = lib.lend(BookId { id: "x".into() }).unwrap_err();
    let give_back: LibraryReturnError = lib.r#return(BookId { id: "y".into() }).unwrap_err();
    assert_eq!(explain(&lend), "no book x");
    assert_eq!(explain(&give_back), "no book y");
    // One type: the results can be collected together.
    let all: Vec<LibraryLendError> = vec![lend, give_back];
    assert_eq!(
        all,
        [
            LibraryReturnError::NotFound(NotFound { id: "x".into() }),
            LibraryLendError::NotFound(NotFound { id: "y".into() }),
        ]
    );
    // `Renew` raises more, so it keeps its own enum; `Lose` shares.
    assert!(generated::LIBRARY.contains("pub enum LibraryLendError {"));
    assert!(generated::LIBRARY.contains("pub enum LibraryRenewError {"));
    assert!(generated::LIBRARY.contains("pub type LibraryReturnError = LibraryLendError;"));
    assert!(generated::LIBRARY.contains("pub type LibraryLoseError = LibraryLendError;"));
    assert!(!generated::LIBRARY.contains("pub enum LibraryReturnError"));
}

/// A deprecated service: naming it warns (so this module allows it), and this crate builds
/// under `-D warnings`, so the generated code's own uses of it must not warn.
#[allow(deprecated)]
mod archive {
    use super::{book, generated, Pair};
    use codegen_suite::extras::library::{Archive, ArchiveClient, ArchiveSkeleton, Book, BookId};
    use protorb::{Context, Exception};

    struct Old;

    impl Archive for Old {
        fn find(&self, _ctx: &Context, req: BookId) -> Result<Book, Exception> {
            Ok(book(&req.id))
        }
    }

    #[test]
    fn deprecated_services_and_methods_still_work() {
        let p = Pair::new();
        let archive = ArchiveClient::narrow(&p.client, p.serve("old", ArchiveSkeleton::new(Old)))
            .expect("narrow");
        assert_eq!(archive.find(BookId { id: "a".into() }).unwrap(), book("a"));

        let code = generated::LIBRARY;
        // The deprecated service: trait, skeleton and client.
        for item in [
            "pub trait Archive",
            "pub struct ArchiveSkeleton",
            "pub struct ArchiveClient",
        ] {
            assert!(
                attributes_of(code, item).contains(&"#[deprecated]"),
                "{item}"
            );
        }
        // The deprecated methods, on the trait and on the client (both calls).
        for method in [
            "fn count(",
            "pub fn count(",
            "pub fn count_with_timeout(",
            "fn lose(",
            "pub fn lose(",
            "pub fn lose_with_timeout(",
        ] {
            assert!(
                attributes_of(code, method).contains(&"#[deprecated]"),
                "{method}"
            );
        }
        // Others are not marked.
        for method in ["fn lend(", "pub fn lend(", "pub trait Library"] {
            assert!(
                !attributes_of(code, method).contains(&"#[deprecated]"),
                "{method}"
            );
        }
    }

    /// The attribute lines right above the first line containing `item` in `code`.
    fn attributes_of<'a>(code: &'a str, item: &str) -> Vec<&'a str> {
        let at = code.find(item).unwrap_or_else(|| panic!("{item} missing"));
        let start = code[..at].rfind('\n').map_or(0, |i| i + 1);
        code[..start]
            .lines()
            .rev()
            .map(str::trim)
            .take_while(|l| l.starts_with("#["))
            .collect()
    }
}

struct Pythia;

impl split_server::Oracle for Pythia {
    fn ask(
        &self,
        _ctx: &Context,
        req: split_server::Question,
    ) -> Result<split_server::Answer, split_server::OracleAskError> {
        if req.text.ends_with('?') {
            Ok(split_server::Answer { text: "42".into() })
        } else {
            Err(split_server::Unknown { question: req.text }.into())
        }
    }
}

#[test]
fn a_server_only_build_answers_a_client_only_build() {
    let p = Pair::new();
    let obj = p.serve("oracle", split_server::OracleSkeleton::new(Pythia));
    let oracle = split_client::OracleClient::narrow(&p.client, obj).expect("same repository id");
    assert_eq!(
        oracle
            .ask(split_client::Question {
                text: "why?".into()
            })
            .unwrap(),
        split_client::Answer { text: "42".into() }
    );
    assert_eq!(
        oracle.ask(split_client::Question { text: "why".into() }),
        Err(split_client::OracleAskError::Unknown(
            split_client::Unknown {
                question: "why".into()
            }
        ))
    );

    // Each side has what it needs and nothing else.
    assert!(generated::SPLIT_SERVER.contains("pub trait Oracle"));
    assert!(generated::SPLIT_SERVER.contains("pub struct OracleSkeleton"));
    assert!(!generated::SPLIT_SERVER.contains("OracleClient"));
    assert!(generated::SPLIT_CLIENT.contains("pub struct OracleClient"));
    assert!(!generated::SPLIT_CLIENT.contains("trait Oracle"));
    assert!(!generated::SPLIT_CLIENT.contains("OracleSkeleton"));
}

mod clock {
    use codegen_suite::extras::wkt::extras::clock::{Clock, ClockClient, ClockSkeleton};
    use codegen_suite::extras::wkt::google::protobuf::{Empty, Timestamp};
    use protorb::{Context, Exception};

    struct Fixed;

    impl Clock for Fixed {
        fn now(&self, _ctx: &Context, _req: Empty) -> Result<Timestamp, Exception> {
            Ok(Timestamp {
                seconds: 1_700_000_000,
                nanos: 7,
            })
        }

        fn reset(&self, _ctx: &Context, req: Timestamp) -> Result<Empty, Exception> {
            assert_eq!(req.seconds, 5);
            Ok(Empty {})
        }
    }

    #[test]
    fn compiled_well_known_types_are_the_generated_ones() {
        let p = super::Pair::new();
        let clock = ClockClient::narrow(&p.client, p.serve("clock", ClockSkeleton::new(Fixed)))
            .expect("narrow");
        let now: Timestamp = clock.now(Empty {}).unwrap();
        assert_eq!((now.seconds, now.nanos), (1_700_000_000, 7));
        let empty: Empty = clock
            .reset(Timestamp {
                seconds: 5,
                nanos: 0,
            })
            .unwrap();
        assert_eq!(empty, Empty {});
    }
}
