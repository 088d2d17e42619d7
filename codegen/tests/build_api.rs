//! The build-script API on real .proto files in a temporary directory: what lands in the output
//! directory, and the streaming errors and warnings.

use std::fs;
use std::path::Path;

fn write(dir: &Path, name: &str, text: &str) {
    let path = dir.join(name);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

const FEED: &str = r#"
syntax = "proto3";
package st;
message M { string s = 1; }
service Feed {
  rpc Get(M) returns (M);
  rpc Watch(M) returns (stream M);
  rpc Upload(stream M) returns (M);
}
"#;

#[test]
fn streaming_method_fails_the_build_naming_file_service_and_method() {
    let src = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    write(src.path(), "st/feed.proto", FEED);
    let err = orb_codegen::configure()
        .out_dir(out.path())
        .emit_rerun_if_changed(false)
        .compile_protos(&["st/feed.proto"], &[src.path()])
        .expect_err("streaming must fail");
    let text = err.to_string();
    assert_eq!(
        text,
        "streaming method `Feed.Watch` in `st/feed.proto` is not supported by orb (CORBA \
         operations are request/reply); remove it or call `skip_streaming(true)`"
    );
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert!(
        fs::read_dir(out.path()).unwrap().next().is_none(),
        "nothing written"
    );
}

#[test]
fn skip_streaming_succeeds_and_reports_skipped_methods() {
    let src = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    write(src.path(), "st/feed.proto", FEED);
    let report = orb_codegen::configure()
        .out_dir(out.path())
        .emit_rerun_if_changed(false)
        .skip_streaming(true)
        .compile(&["st/feed.proto"], &[src.path()])
        .unwrap();
    let skipped: Vec<String> = report
        .model
        .skipped
        .iter()
        .map(|s| format!("{}:{}.{}", s.file, s.service, s.method))
        .collect();
    assert_eq!(
        skipped,
        ["st/feed.proto:Feed.Watch", "st/feed.proto:Feed.Upload"]
    );
    assert!(report.model.skipped[0].to_string().contains("`Feed.Watch`"));
    let code = fs::read_to_string(out.path().join("st.rs")).unwrap();
    assert!(code.contains("pub trait Feed"), "{code}");
    assert!(code.contains("fn get("), "{code}");
    assert!(!code.contains("fn watch("), "{code}");
}

#[test]
fn output_has_only_user_packages_and_the_descriptor_set_keeps_options() {
    let src = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    write(
        src.path(),
        "demo/echo.proto",
        r#"syntax = "proto3";
           package demo;
           import "google/protobuf/empty.proto";
           import "google/protobuf/timestamp.proto";
           import "orb/options.proto";
           message Msg { string text = 1; orb.ObjectRef target = 2; google.protobuf.Timestamp at = 3; }
           message Oops { string why = 1; }
           service Echo {
             rpc Echo(Msg) returns (Msg) { option (orb.raises) = "Oops"; }
             rpc Tell(Msg) returns (google.protobuf.Empty) { option (orb.oneway) = true; }
           }"#,
    );
    let fds = out.path().join("fds.bin");
    let report = orb_codegen::configure()
        .out_dir(out.path())
        .emit_rerun_if_changed(false)
        .file_descriptor_set_path(&fds)
        .include_file("_all.rs")
        .compile(&[src.path().join("demo/echo.proto")], &[src.path()])
        .unwrap();
    let mut files: Vec<String> = fs::read_dir(out.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(files, ["_all.rs", "demo.rs", "fds.bin"]);
    assert_eq!(report.proto_files, [src.path().join("demo/echo.proto")]);

    let code = fs::read_to_string(out.path().join("demo.rs")).unwrap();
    assert!(code.contains("::orb::ObjectRef"), "{code}");
    assert!(code.contains("pub enum EchoEchoError"), "{code}");
    assert!(code.contains("\"IDL:demo/Oops:1.0\""), "{code}");

    let model = orb_codegen::idl::Model::from_encoded_file_descriptor_set(
        &fs::read(&fds).unwrap(),
        &orb_codegen::idl::Options::new(),
    )
    .unwrap();
    assert_eq!(model, report.model);
    assert!(model.services[0].methods[1].oneway);
}

#[test]
fn parse_errors_are_reported_with_the_file() {
    let src = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    write(src.path(), "bad.proto", "syntax = \"proto3\";\nservice {");
    let err = orb_codegen::configure()
        .out_dir(out.path())
        .emit_rerun_if_changed(false)
        .compile_protos(&["bad.proto"], &[src.path()])
        .unwrap_err();
    assert!(err.to_string().starts_with("bad.proto:2:"), "{err}");
}
