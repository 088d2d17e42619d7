//! Model tests: real .proto text through protox, in a temporary include directory.

use super::*;
use std::fs;
use std::path::Path;

/// Writes `files` (name, text) under a fresh include dir and compiles the first one.
fn compile_files(files: &[(&str, &str)], options: &Options) -> Result<Compiled, Error> {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        let path = dir.path().join(name);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, text).unwrap();
    }
    let protos: Vec<&str> = files.iter().map(|(n, _)| *n).collect();
    compile(&protos, &[dir.path()], options)
}

fn model(files: &[(&str, &str)]) -> Model {
    compile_files(files, &Options::new()).unwrap().model
}

fn err(files: &[(&str, &str)]) -> String {
    compile_files(files, &Options::new())
        .expect_err("should not compile")
        .to_string()
}

const ECHO: &str = r#"
syntax = "proto3";
package demo;
import "google/protobuf/empty.proto";
import "google/protobuf/timestamp.proto";
import "orb/options.proto";

message Msg { string text = 1; }
message Outer { message Inner { int32 x = 1; } }
message Oops { string why = 1; }
enum Color { RED = 0; }

// The echo service.
// Second line.
service Echo {
  // Echoes the message.
  rpc Echo(Msg) returns (Msg);
  rpc Notify(Msg) returns (google.protobuf.Empty) { option (orb.oneway) = true; }
  rpc Fail(Outer.Inner) returns (google.protobuf.Timestamp) {
    option (orb.raises) = "Oops";
    option (orb.raises) = ".demo.Outer.Inner";
  }
  rpc Type(Msg) returns (Msg); // trailing
  rpc Self(Msg) returns (Msg);
}
"#;

#[test]
fn services_methods_and_repository_ids() {
    let m = model(&[("demo/echo.proto", ECHO)]);
    assert_eq!(m.services.len(), 1);
    let s = &m.services[0];
    assert_eq!(s.name, "Echo");
    assert_eq!(s.proto_name, "Echo");
    assert_eq!(s.package, "demo");
    assert_eq!(s.full_name(), "demo.Echo");
    assert_eq!(s.file, "demo/echo.proto");
    assert_eq!(s.repository_id, "IDL:demo/Echo:1.0");
    assert_eq!(s.docs, vec![" The echo service.", " Second line."]);
    let names: Vec<_> = s.methods.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["echo", "notify", "fail", "r#type", "self_"]);
    let echo = &s.methods[0];
    assert_eq!(echo.proto_name, "Echo");
    assert_eq!(echo.input, MessageType::new("demo.Msg", "Msg"));
    assert_eq!(echo.docs, vec![" Echoes the message."]);
    assert!(!echo.oneway && echo.raises.is_empty());
    assert_eq!(s.methods[3].docs, vec![" trailing"]);
}

#[test]
fn no_package_repository_id() {
    let m = model(&[(
        "plain.proto",
        "syntax = \"proto3\"; message M {} service Plain { rpc Go(M) returns (M); }",
    )]);
    assert_eq!(m.services[0].repository_id, "IDL:Plain:1.0");
    assert_eq!(m.services[0].package, "");
    assert_eq!(m.services[0].methods[0].input.rust_path, "M");
}

#[test]
fn reads_oneway_and_raises_options() {
    let m = model(&[("demo/echo.proto", ECHO)]);
    let s = &m.services[0];
    let notify = &s.methods[1];
    assert!(notify.oneway);
    assert!(notify.output.is_empty_message());
    assert_eq!(notify.output.rust_path, "()");
    let fail = &s.methods[2];
    assert!(!fail.oneway);
    assert_eq!(fail.input.rust_path, "outer::Inner");
    assert_eq!(fail.output.rust_path, "::prost_types::Timestamp");
    assert_eq!(
        fail.raises,
        vec![
            UserExceptionType {
                full_name: "demo.Oops".into(),
                rust_path: "Oops".into(),
                repository_id: "IDL:demo/Oops:1.0".into(),
            },
            UserExceptionType {
                full_name: "demo.Outer.Inner".into(),
                rust_path: "outer::Inner".into(),
                repository_id: "IDL:demo/Outer/Inner:1.0".into(),
            },
        ]
    );
    assert_eq!(fail.raises[1].simple_name(), "Inner");
}

#[test]
fn types_and_exceptions_from_other_packages() {
    let common = r#"
        syntax = "proto3";
        package suite.common;
        message Item { string id = 1; }
        message NotFound { string id = 1; }
    "#;
    let api = r#"
        syntax = "proto3";
        package suite.api;
        import "suite/common.proto";
        import "orb/options.proto";
        service Store {
          rpc Get(suite.common.Item) returns (suite.common.Item) {
            option (orb.raises) = "common.NotFound";
          }
          rpc Obj(orb.ObjectRef) returns (orb.ObjectRef);
        }
    "#;
    let m = model(&[("suite/common.proto", common), ("suite/api.proto", api)]);
    let get = &m.services[0].methods[0];
    assert_eq!(get.input.rust_path, "super::common::Item");
    assert_eq!(get.raises[0].full_name, "suite.common.NotFound");
    assert_eq!(get.raises[0].rust_path, "super::common::NotFound");
    assert_eq!(get.raises[0].repository_id, "IDL:suite/common/NotFound:1.0");
    let obj = &m.services[0].methods[1];
    assert_eq!(obj.input.rust_path, "::protorb::ObjectRef");
}

#[test]
fn extern_paths_apply_to_exceptions() {
    let files = [
        (
            "ext.proto",
            "syntax = \"proto3\"; package ext; message Err {}",
        ),
        (
            "svc.proto",
            r#"syntax = "proto3"; package svc; import "ext.proto"; import "orb/options.proto";
               message M {}
               service S { rpc Go(M) returns (M) { option (orb.raises) = "ext.Err"; } }"#,
        ),
    ];
    let opts = Options::new().extern_path(".ext", "::ext_crate");
    let m = compile_files(&files, &opts).unwrap().model;
    assert_eq!(
        m.services[0].methods[0].raises[0].rust_path,
        "::ext_crate::Err"
    );
}

#[test]
fn options_file_is_built_in_and_listed() {
    let c = compile_files(&[("demo/echo.proto", ECHO)], &Options::new()).unwrap();
    let names: Vec<_> = c.files.iter().map(|f| f.name.as_str()).collect();
    assert!(names.contains(&OPTIONS_PROTO_NAME), "{names:?}");
    let options = c
        .files
        .iter()
        .find(|f| f.name == OPTIONS_PROTO_NAME)
        .unwrap();
    assert!(options.path.is_none() && options.is_import);
    let echo = c
        .files
        .iter()
        .find(|f| f.name == "demo/echo.proto")
        .unwrap();
    assert!(echo.path.is_some() && !echo.is_import);
    // The encoded set keeps the options: the model rebuilt from it is the same.
    let again =
        Model::from_encoded_file_descriptor_set(&c.encoded_file_descriptor_set, &Options::new())
            .unwrap();
    assert_eq!(again, c.model);
    assert!(c
        .file_descriptor_set
        .file
        .iter()
        .any(|f| f.name() == "demo/echo.proto" && f.source_code_info.is_some()));
}

#[test]
fn oneway_must_return_empty() {
    let e = err(&[(
        "ow.proto",
        r#"syntax = "proto3"; package ow; import "orb/options.proto";
           message M {}
           service Svc { rpc Fire(M) returns (M) { option (orb.oneway) = true; } }"#,
    )]);
    assert!(e.contains("`Svc.Fire`"), "{e}");
    assert!(e.contains("/ow.proto`"), "{e}");
    assert!(e.contains("google.protobuf.Empty"), "{e}");
}

#[test]
fn oneway_must_not_raise() {
    let e = err(&[(
        "ow.proto",
        r#"syntax = "proto3"; package ow; import "orb/options.proto";
           import "google/protobuf/empty.proto";
           message M {}
           service Svc { rpc Fire(M) returns (google.protobuf.Empty) {
             option (orb.oneway) = true; option (orb.raises) = "M"; } }"#,
    )]);
    assert!(e.contains("`Svc.Fire`") && e.contains("/ow.proto`"), "{e}");
    assert!(e.contains("raises"), "{e}");
}

#[test]
fn raises_must_name_a_message() {
    for name in ["Nope", "Color", "ow.Missing"] {
        let text = format!(
            r#"syntax = "proto3"; package ow; import "orb/options.proto";
               message M {{}} enum Color {{ RED = 0; }}
               service Svc {{ rpc Get(M) returns (M) {{ option (orb.raises) = "{name}"; }} }}"#
        );
        let e = err(&[("ow.proto", &text)]);
        assert!(e.contains(&format!("`{name}`")), "{e}");
        assert!(e.contains("`Svc.Get`") && e.contains("/ow.proto`"), "{e}");
        assert!(e.contains("does not name a message type"), "{e}");
    }
}

#[test]
fn duplicate_raises_is_an_error() {
    let e = err(&[(
        "ow.proto",
        r#"syntax = "proto3"; package ow; import "orb/options.proto";
           message M {}
           service Svc { rpc Get(M) returns (M) {
             option (orb.raises) = "M"; option (orb.raises) = ".ow.M"; } }"#,
    )]);
    assert!(e.contains("twice"), "{e}");
}

const STREAMING: &str = r#"syntax = "proto3"; package st;
    message M {}
    service Feed { rpc Get(M) returns (M); rpc Watch(M) returns (stream M); }"#;

#[test]
fn streaming_is_an_error_naming_file_service_and_method() {
    let e = err(&[("st/feed.proto", STREAMING)]);
    let (head, tail) = e
        .split_once("/st/feed.proto`")
        .expect("names the file's path");
    assert!(
        head.starts_with("streaming method `Feed.Watch` in `/"),
        "{e}"
    );
    assert_eq!(
        tail,
        " is not supported by orb (CORBA operations are request/reply); remove it or call \
         `skip_streaming(true)`"
    );
}

#[test]
fn skip_streaming_reports_skipped_methods() {
    let c = compile_files(
        &[("st/feed.proto", STREAMING)],
        &Options::new().skip_streaming(true),
    )
    .unwrap();
    let methods: Vec<_> = c.model.services[0]
        .methods
        .iter()
        .map(|m| m.proto_name.as_str())
        .collect();
    assert_eq!(methods, ["Get"]);
    assert_eq!(
        c.model.skipped,
        vec![SkippedMethod {
            file: "st/feed.proto".into(),
            service: "Feed".into(),
            method: "Watch".into(),
        }]
    );
    assert!(c.model.skipped[0].to_string().contains("`Feed.Watch`"));
}

#[test]
fn methods_mapping_to_one_rust_name_clash() {
    let e = err(&[(
        "c.proto",
        r#"syntax = "proto3"; message M {}
           service Svc { rpc GetItem(M) returns (M); rpc get_item(M) returns (M); }"#,
    )]);
    assert!(
        e.contains("`Svc.GetItem`") && e.contains("`Svc.get_item`"),
        "{e}"
    );
    let e = err(&[(
        "c.proto",
        r#"syntax = "proto3"; message M {}
           service Svc { rpc Get(M) returns (M); rpc GetWithTimeout(M) returns (M); }"#,
    )]);
    assert!(e.contains("get_with_timeout"), "{e}");
}

#[test]
fn parse_errors_name_the_file() {
    let e = err(&[("bad.proto", "syntax = \"proto3\";\nmessage {")]);
    // The include dir is a temporary directory, outside the current one: an absolute path.
    assert!(e.starts_with('/') && e.contains("/bad.proto:2:9: "), "{e}");
    let e = err(&[(
        "imp.proto",
        "syntax = \"proto3\"; import \"missing/dep.proto\";",
    )]);
    assert!(e.contains("missing/dep.proto"), "{e}");
    assert!(e.starts_with('/') && e.contains("/imp.proto:1:20: "), "{e}");
}

#[test]
fn options_proto_text_is_the_canonical_file() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("proto/orb/options.proto");
    assert_eq!(fs::read_to_string(path).unwrap(), OPTIONS_PROTO);
    assert!(OPTIONS_PROTO.contains("message ObjectRef"));
}

#[test]
fn deprecated_services_and_methods() {
    let m = model(&[(
        "old.proto",
        r#"syntax = "proto3";
           package old;
           message M { int32 x = 1; }
           service Legacy {
             option deprecated = true;
             rpc Ping(M) returns (M);
           }
           service Current {
             option deprecated = false;
             rpc Gone(M) returns (M) { option deprecated = true; }
             rpc Here(M) returns (M);
           }"#,
    )]);
    let legacy = &m.services[0];
    assert!(legacy.deprecated);
    assert!(!legacy.methods[0].deprecated);
    let current = &m.services[1];
    assert!(!current.deprecated);
    assert!(current.methods[0].deprecated);
    assert!(!current.methods[1].deprecated);
}

#[test]
fn well_known_types_resolve_locally_when_compiled() {
    let files = [(
        "wk.proto",
        r#"syntax = "proto3";
           package wk;
           import "google/protobuf/empty.proto";
           import "google/protobuf/timestamp.proto";
           service Clock { rpc Now(google.protobuf.Empty) returns (google.protobuf.Timestamp); }"#,
    )];
    let prost_types = compile_files(&files, &Options::new()).unwrap().model;
    let now = &prost_types.services[0].methods[0];
    assert_eq!(now.input.rust_path, "()");
    assert_eq!(now.output.rust_path, "::prost_types::Timestamp");
    let local = compile_files(&files, &Options::new().compile_well_known_types(true))
        .unwrap()
        .model;
    let now = &local.services[0].methods[0];
    assert_eq!(now.input.rust_path, "super::google::protobuf::Empty");
    assert_eq!(now.output.rust_path, "super::google::protobuf::Timestamp");
}

#[test]
fn clickable_paths() {
    use crate::load::clickable_for_tests as clickable;
    assert_eq!(
        clickable(Path::new("./proto/a.proto")),
        Path::new("proto/a.proto")
    );
    assert_eq!(
        clickable(Path::new("proto/a.proto")),
        Path::new("proto/a.proto")
    );
    let cwd = std::env::current_dir().unwrap();
    assert_eq!(
        clickable(&cwd.join("proto/a.proto")),
        Path::new("proto/a.proto")
    );
    assert_eq!(
        clickable(Path::new("/elsewhere/a.proto")),
        Path::new("/elsewhere/a.proto")
    );
}
