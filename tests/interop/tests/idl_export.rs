//! The IDL exporter (`protorb_idl::corba::to_corba_idl`, `orb idl`) against omniidl itself, on
//! protos that break naive IDL: an operation named like its service, IDL keywords as method,
//! service and package names, a service named like its package, oneway, raises across
//! packages and of a nested message, nested packages, no package at all. The generated C++
//! is compiled too (syntax only), and the operation names and repository ids omniidl put in
//! the stubs are the ones the runtime uses on the wire.
//!
//! Skipped when omniORB is not installed, unless `ORB_INTEROP_REQUIRED=1`.

use orb_interop::{run, tool, TempDir};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const ERRS: &str = r#"syntax = "proto3";
package errs.v1;
message Denied { string why = 1; }
"#;

const TRICKY: &str = r#"syntax = "proto3";
package a.module.echo;
import "google/protobuf/empty.proto";
import "orb/options.proto";
import "errs.proto";

message Msg { bytes data = 1; }
message Outer { message Inner { int32 x = 1; } }

// An operation named like its service, and like its package.
service Echo {
  rpc Echo(Msg) returns (Msg);
  rpc oneway(Msg) returns (google.protobuf.Empty) { option (orb.oneway) = true; }
  rpc Object(Msg) returns (google.protobuf.Empty) {
    option (orb.raises) = "Outer.Inner";
    option (orb.raises) = ".errs.v1.Denied";
  }
  rpc p(Msg) returns (Msg);
  rpc Octets(Msg) returns (Msg);
  rpc interface(google.protobuf.Empty) returns (Msg);
}
service Object { rpc in(Msg) returns (Msg) { option (orb.raises) = ".errs.v1.Denied"; } }
service module { rpc Get(Msg) returns (Msg); }
"#;

const NO_PACKAGE: &str = r#"syntax = "proto3";
import "orb/options.proto";
message Req { string s = 1; }
message Bad { string s = 1; }
service Plain { rpc typedef(Req) returns (Req) { option (orb.raises) = "Bad"; } }
"#;

/// The wire names and repository ids the runtime uses for these protos.
const EXPECTED_IN_STUBS: &[&str] = &[
    "\"Echo\"",
    "\"oneway\"",
    "\"Object\"",
    "\"p\"",
    "\"Octets\"",
    "\"interface\"",
    "\"in\"",
    "\"Get\"",
    "\"typedef\"",
    "\"IDL:a/module/echo/Echo:1.0\"",
    "\"IDL:a/module/echo/Object:1.0\"",
    "\"IDL:a/module/echo/module:1.0\"",
    "\"IDL:a/module/echo/Outer/Inner:1.0\"",
    "\"IDL:errs/v1/Denied:1.0\"",
    "\"IDL:Plain:1.0\"",
    "\"IDL:Bad:1.0\"",
];

#[test]
fn exported_idl_of_tricky_protos_compiles_with_omniidl() {
    let test = "exported_idl_of_tricky_protos_compiles_with_omniidl";
    let Some(omniidl) = tool(test, "omniidl") else {
        return;
    };
    let dir = TempDir::new("idl-export");
    let protos = dir.path().join("protos");
    std::fs::create_dir_all(&protos).expect("mkdir");
    for (name, text) in [
        ("errs.proto", ERRS),
        ("tricky.proto", TRICKY),
        ("plain.proto", NO_PACKAGE),
    ] {
        std::fs::write(protos.join(name), text).expect("write proto");
    }
    let compiled = protorb_idl::compile(
        &["tricky.proto", "plain.proto"],
        &[&protos],
        &protorb_idl::Options::new(),
    )
    .expect("the protos compile");
    let idl = protorb_idl::corba::to_corba_idl(&compiled.model);
    let file = dir.path().join("tricky.idl");
    std::fs::write(&file, &idl).expect("write idl");

    let out = run(
        Command::new(&omniidl)
            .arg("-bcxx")
            .arg("-C")
            .arg(dir.path())
            .arg(&file),
        Duration::from_secs(120),
    );
    assert!(out.success(), "omniidl failed: {out:?}\n{idl}");
    let stubs = std::fs::read_to_string(dir.path().join("trickySK.cc")).expect("stubs");
    for s in EXPECTED_IN_STUBS {
        assert!(stubs.contains(s), "{s} not in the stubs of\n{idl}");
    }
    compile_cxx(test, dir.path(), &idl);
}

/// The generated C++ compiles (syntax only: no linking).
fn compile_cxx(test: &str, dir: &Path, idl: &str) {
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "g++".into());
    let Some(cxx) = tool(test, &cxx) else {
        return;
    };
    let out = run(
        Command::new(cxx)
            .arg("-fsyntax-only")
            .arg("-I")
            .arg(dir)
            .arg(dir.join("trickySK.cc")),
        Duration::from_secs(300),
    );
    assert!(
        out.success(),
        "the C++ stubs do not compile: {out:?}\n{idl}"
    );
}
