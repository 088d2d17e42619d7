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
    let err = protorb_codegen::configure()
        .out_dir(out.path())
        .emit_rerun_if_changed(false)
        .compile_protos(&["st/feed.proto"], &[src.path()])
        .expect_err("streaming must fail");
    let text = err.to_string();
    // The temporary directory is outside the current one: the path is absolute.
    assert_eq!(
        text,
        format!(
            "streaming method `Feed.Watch` in `{}` is not supported by orb (CORBA \
             operations are request/reply); remove it or call `skip_streaming(true)`",
            src.path().join("st/feed.proto").display()
        )
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
    let report = protorb_codegen::configure()
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
    let report = protorb_codegen::configure()
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
    assert!(code.contains("::protorb::ObjectRef"), "{code}");
    assert!(code.contains("pub enum EchoEchoError"), "{code}");
    assert!(code.contains("\"IDL:demo/Oops:1.0\""), "{code}");

    let model = protorb_codegen::idl::Model::from_encoded_file_descriptor_set(
        &fs::read(&fds).unwrap(),
        &protorb_codegen::idl::Options::new(),
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
    let err = protorb_codegen::configure()
        .out_dir(out.path())
        .emit_rerun_if_changed(false)
        .compile_protos(&["bad.proto"], &[src.path()])
        .unwrap_err();
    let expected = format!("{}:2:", src.path().join("bad.proto").display());
    assert!(err.to_string().starts_with(&expected), "{err}");
}

fn compile_err(protos: &[&Path], includes: &[&Path]) -> String {
    let out = tempfile::tempdir().unwrap();
    protorb_codegen::configure()
        .out_dir(out.path())
        .emit_rerun_if_changed(false)
        .compile_protos(protos, includes)
        .expect_err("must fail")
        .to_string()
}

#[test]
fn a_missing_input_is_reported_as_missing_with_the_paths_tried() {
    let src = tempfile::tempdir().unwrap();
    let other = tempfile::tempdir().unwrap();
    write(src.path(), "here.proto", "syntax = \"proto3\";");
    // A path under the include path: the file itself was looked for.
    let missing = src.path().join("nope.proto");
    assert_eq!(
        compile_err(&[&missing], &[src.path()]),
        format!("file `{}` does not exist", missing.display())
    );
    // A name relative to the include paths: each was looked in.
    assert_eq!(
        compile_err(&[Path::new("sub/nope.proto")], &[src.path(), other.path()]),
        format!(
            "file `sub/nope.proto` does not exist in any include path (tried `{}`, `{}`)",
            src.path().join("sub/nope.proto").display(),
            other.path().join("sub/nope.proto").display()
        )
    );
    // A file that exists outside the include paths is a different mistake.
    let outside = src.path().join("here.proto");
    assert_eq!(
        compile_err(&[&outside], &[other.path()]),
        format!(
            "file `{}` is not under any include path (`{}`); name it relative to one, or add \
             its directory to the include paths",
            outside.display(),
            other.path().display()
        )
    );
}

#[test]
fn error_positions_name_the_file_relative_to_the_current_directory() {
    // Tests run in the crate's directory, as build scripts do.
    let cwd = std::env::current_dir().unwrap();
    let tmp = tempfile::tempdir_in(&cwd).unwrap();
    let rel = tmp.path().strip_prefix(&cwd).unwrap().to_path_buf();
    write(
        tmp.path(),
        "proto/a.proto",
        "syntax = \"proto3\";\npackage a;\nimport \"b.proto\";\nmessage M {\n  b.B x = 1;\n}\n",
    );
    write(
        tmp.path(),
        "proto/b.proto",
        "syntax = \"proto3\";\npackage b;\nmessage B {\n  strin g = 1;\n}\n",
    );
    write(
        tmp.path(),
        "proto/c.proto",
        "syntax = \"proto3\";\npackage c;\nmessage M {\n  int32 x = 1;\n  int32 y = ;\n}\n",
    );
    write(
        tmp.path(),
        "proto/s.proto",
        "syntax = \"proto3\";\npackage s;\nmessage M {}\nservice S { rpc W(M) returns (stream M); }\n",
    );
    write(
        tmp.path(),
        "proto/b2.proto",
        "syntax = \"proto3\";\npackage b2;\nmessage B {}\n",
    );
    let include = rel.join("proto");
    let shown = |name: &str| include.join(name).display().to_string();

    // A relative include path, the file given by name: the path keeps the include path.
    let err = compile_err(&[Path::new("c.proto")], &[&include]);
    assert!(
        err.starts_with(&format!("{}:5:13: ", shown("c.proto"))),
        "{err}"
    );
    // An absolute include path under the current directory: shown relative to it.
    let err = compile_err(
        &[&tmp.path().join("proto/c.proto")],
        &[&tmp.path().join("proto")],
    );
    assert!(
        err.starts_with(&format!("{}:5:13: ", shown("c.proto"))),
        "{err}"
    );
    // An error in an imported file names that file.
    let err = compile_err(&[&include.join("a.proto")], &[&include]);
    assert!(
        err.starts_with(&format!("{}:4:", shown("b.proto"))),
        "{err}"
    );
    // An absolute input under a relative include path (or the reverse) is found.
    for (input, include) in [
        (tmp.path().join("proto/b2.proto"), include.clone()),
        (include.join("b2.proto"), tmp.path().join("proto")),
    ] {
        let out = tempfile::tempdir().unwrap();
        protorb_codegen::configure()
            .out_dir(out.path())
            .emit_rerun_if_changed(false)
            .compile_protos(&[&input], &[&include])
            .unwrap_or_else(|e| panic!("{} under {}: {e}", input.display(), include.display()));
        assert!(out.path().join("b2.rs").is_file());
    }
    // Model errors name the path too.
    let err = compile_err(&[Path::new("s.proto")], &[&include]);
    assert!(
        err.starts_with(&format!("streaming method `S.W` in `{}`", shown("s.proto"))),
        "{err}"
    );
}
