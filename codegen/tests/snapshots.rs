//! Snapshot tests: code generated from hand-built models (no .proto) compared with
//! `tests/fixtures/*.rs`. On a mismatch the fixture is rewritten and the test fails, so the
//! change shows up in `git diff` for review (prost-build's approach); run again to pass.

use protorb_codegen::idl::{MessageType, Method, Service, UserExceptionType};
use protorb_codegen::{generate_service, generate_service_with, GenOptions};
use std::path::Path;

fn assert_snapshot(name: &str, service: &Service) {
    assert_snapshot_text(name, generate_service(service));
}

fn assert_snapshot_text(name: &str, actual: String) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(format!("{name}.rs"));
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    if expected != actual {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &actual).unwrap();
        panic!(
            "generated code for `{name}` changed; {} was rewritten: review the diff and run again",
            path.display()
        );
    }
}

fn msg(full: &str, rust: &str) -> MessageType {
    MessageType::new(full, rust)
}

fn method(proto_name: &str, input: MessageType, output: MessageType) -> Method {
    Method {
        name: protorb_codegen::idl::ident::to_snake(proto_name),
        proto_name: proto_name.into(),
        input,
        output,
        ..Method::default()
    }
}

fn service(package: &str, proto_name: &str, methods: Vec<Method>) -> Service {
    Service {
        name: protorb_codegen::idl::ident::to_upper_camel(proto_name),
        proto_name: proto_name.into(),
        package: package.into(),
        file: format!("{package}.proto"),
        repository_id: protorb_codegen::idl::repository_id(&format!("{package}.{proto_name}")),
        docs: Vec::new(),
        deprecated: false,
        methods,
    }
}

fn exception(full_name: &str, rust_path: &str) -> UserExceptionType {
    UserExceptionType {
        full_name: full_name.into(),
        rust_path: rust_path.into(),
        repository_id: protorb_codegen::idl::repository_id(full_name),
    }
}

#[test]
fn echo() {
    let mut echo = method("Echo", msg("demo.Msg", "Msg"), msg("demo.Msg", "Msg"));
    echo.docs = vec![" Returns the message it is given.".into()];
    let mut svc = service("demo", "Echo", vec![echo]);
    svc.docs = vec![" The echo service: see https://example.com/echo [v1].".into()];
    assert_snapshot("echo", &svc);
}

fn empty() -> MessageType {
    msg("google.protobuf.Empty", "()")
}

#[test]
fn callback_publisher() {
    let subscribe = method(
        "Subscribe",
        msg("demo.cb.Subscription", "Subscription"),
        msg("google.protobuf.Timestamp", "::prost_types::Timestamp"),
    );
    let unsubscribe = method(
        "Unsubscribe",
        msg("orb.ObjectRef", "::protorb::ObjectRef"),
        empty(),
    );
    let publisher = service("demo.cb", "Publisher", vec![subscribe, unsubscribe]);
    assert_snapshot("callback_publisher", &publisher);
}

#[test]
fn callback_listener() {
    let mut on_event = method(
        "OnEvent",
        msg("demo.common.Event", "super::common::Event"),
        empty(),
    );
    on_event.oneway = true;
    let ping = method("Ping", empty(), empty());
    let listener = service("demo.cb", "Listener", vec![on_event, ping]);
    assert_snapshot("callback_listener", &listener);
}

#[test]
fn oneway_and_raises() {
    let mut pay = method(
        "Pay",
        msg("bank.Transfer", "Transfer"),
        msg("bank.Receipt", "Receipt"),
    );
    pay.raises = vec![
        exception("bank.InsufficientFunds", "InsufficientFunds"),
        exception("bank.common.Denied", "common::Denied"),
        exception("bank.other.Denied", "other::Denied"),
    ];
    let mut audit = method(
        "Audit",
        msg("bank.Transfer", "Transfer"),
        msg("google.protobuf.Empty", "()"),
    );
    audit.oneway = true;
    let mut kind = method(
        "Type",
        msg("bank.Transfer", "Transfer"),
        msg("bank.Receipt", "Receipt"),
    );
    kind.raises = vec![exception("bank.System", "System")];
    let new = method(
        "New",
        msg("bank.Transfer", "Transfer"),
        msg("bank.Receipt", "Receipt"),
    );
    assert_snapshot(
        "account",
        &service("bank", "Account", vec![pay, audit, kind, new]),
    );
}

#[test]
fn no_methods() {
    assert_snapshot("empty", &service("", "Nothing", Vec::new()));
}

/// A library whose servant needs to implement only what it serves (default stubs raising
/// NO_IMPLEMENT), with a deprecated method, and three methods raising `NotFound` that share one
/// error enum (`Renew`, raising more, gets its own).
fn library() -> Service {
    let book = || msg("lib.BookId", "BookId");
    let reply = || msg("lib.Book", "Book");
    let not_found = || exception("lib.NotFound", "NotFound");
    let mut lend = method("Lend", book(), reply());
    lend.raises = vec![not_found()];
    let mut give_back = method("Return", book(), reply());
    give_back.raises = vec![not_found()];
    let mut renew = method("Renew", book(), reply());
    renew.raises = vec![exception("lib.Overdue", "Overdue"), not_found()];
    let mut lose = method("Lose", book(), reply());
    lose.raises = vec![not_found()];
    lose.deprecated = true;
    let mut tell = method("Tell", book(), empty());
    tell.oneway = true;
    service("lib", "Library", vec![lend, give_back, renew, lose, tell])
}

#[test]
fn default_stubs_deprecated_and_shared_exceptions() {
    let options = GenOptions::new().default_stubs(true);
    assert_snapshot_text("library", generate_service_with(&library(), options));
}

#[test]
fn deprecated_service() {
    let mut svc = service("old", "Legacy", vec![method("Ping", empty(), empty())]);
    svc.deprecated = true;
    assert_snapshot("legacy", &svc);
}

#[test]
fn server_only_and_client_only() {
    let server = generate_service_with(&library(), GenOptions::new().client(false));
    assert!(server.contains("pub trait Library"), "{server}");
    assert!(server.contains("pub struct LibrarySkeleton"), "{server}");
    assert!(server.contains("pub enum LibraryLendError"), "{server}");
    assert!(!server.contains("LibraryClient"), "{server}");

    let client = generate_service_with(&library(), GenOptions::new().server(false));
    assert!(client.contains("pub struct LibraryClient"), "{client}");
    assert!(client.contains("pub enum LibraryLendError"), "{client}");
    assert!(!client.contains("trait Library"), "{client}");
    assert!(!client.contains("LibrarySkeleton"), "{client}");

    let neither = generate_service_with(&library(), GenOptions::new().server(false).client(false));
    assert_eq!(neither.trim(), "");
}
