//! Builds the omniORB C++ peers (`interop_client`, `interop_server`) with omniidl and a C++
//! compiler, into `OUT_DIR`, from:
//! - `proto/interop.proto`, exported to IDL with `protorb_idl::corba::to_corba_idl` (as `orb idl`
//!   does) into `OUT_DIR/idl/interop_proto.idl`: `Octets`, `Oops`, `Echo`, `Callback`;
//! - `idl/interop.idl`, which includes it and adds what a .proto cannot express;
//! - `cpp/*.cc`.
//!
//! The .proto is ours: if it does not compile, the build fails (a bug, not a missing tool).
//!
//! Exports to the crate (always set, possibly empty):
//! - `ORB_INTEROP_CLIENT`, `ORB_INTEROP_SERVER`: paths of the built programs;
//! - `ORB_INTEROP_UNAVAILABLE`: why they could not be built (empty when they were).
//!
//! A missing omniidl, compiler or omniORB installation never fails the build: it becomes a
//! `cargo:warning`, and the tests then skip (or fail, under `ORB_INTEROP_REQUIRED=1`).
//! Tools: `OMNIIDL` (default `omniidl`), `CXX` (default `g++`); libraries from
//! `pkg-config omniORB4`, else `-lomniORB4 -lomnithread`, then omniORB's SSL transport
//! `-lomnisslTP4` and OpenSSL (`pkg-config openssl`, else `-lssl -lcrypto`): the peers can speak
//! SSL (`--ssl DIR`), so they include `omniORB4/sslContext.h`, which needs OpenSSL's headers
//! (Debian: libomniorb4-dev, libssl-dev).

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let manifest =
        PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    for f in [
        "build.rs",
        "proto/interop.proto",
        "idl/interop.idl",
        "cpp/common.h",
        "cpp/client.cc",
        "cpp/server.cc",
    ] {
        println!("cargo:rerun-if-changed={}", manifest.join(f).display());
    }
    for v in ["OMNIIDL", "CXX", "CXXFLAGS", "PKG_CONFIG_PATH"] {
        println!("cargo:rerun-if-env-changed={v}");
    }
    let gen = out.join("idl");
    if let Err(e) = std::fs::create_dir_all(&gen) {
        panic!("cannot create {}: {e}", gen.display());
    }
    let compiled = protorb_idl::compile(
        &["interop.proto"],
        &[manifest.join("proto")],
        &protorb_idl::Options::new(),
    )
    .unwrap_or_else(|e| panic!("proto/interop.proto: {e}"));
    let exported = gen.join("interop_proto.idl");
    if let Err(e) = std::fs::write(&exported, protorb_idl::corba::to_corba_idl(&compiled.model)) {
        panic!("cannot write {}: {e}", exported.display());
    }
    match build(&manifest, &out) {
        Ok((client, server)) => {
            println!("cargo:rustc-env=ORB_INTEROP_CLIENT={}", client.display());
            println!("cargo:rustc-env=ORB_INTEROP_SERVER={}", server.display());
            println!("cargo:rustc-env=ORB_INTEROP_UNAVAILABLE=");
        }
        Err(why) => {
            let why: String = why
                .chars()
                .map(|c| if c.is_control() { ' ' } else { c })
                .take(400)
                .collect();
            println!("cargo:warning=omniORB interop peers not built ({why}); the interop tests will be skipped");
            println!("cargo:rustc-env=ORB_INTEROP_CLIENT=");
            println!("cargo:rustc-env=ORB_INTEROP_SERVER=");
            println!("cargo:rustc-env=ORB_INTEROP_UNAVAILABLE=omniORB not installed or not usable: {why}");
            // Look again on the next build (once omniORB may have been installed): a path that
            // does not exist makes Cargo rerun the script every time, which is cheap here.
            println!(
                "cargo:rerun-if-changed={}",
                out.join("omniorb-missing").display()
            );
        }
    }
}

fn build(manifest: &Path, out: &Path) -> Result<(PathBuf, PathBuf), String> {
    let omniidl = std::env::var("OMNIIDL").unwrap_or_else(|_| "omniidl".into());
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "g++".into());
    let gen = out.join("idl");
    // The exported IDL, then the hand-written file that includes it (omniidl generates code
    // for the main file only, so each gets its own stubs).
    for idl in [
        gen.join("interop_proto.idl"),
        manifest.join("idl/interop.idl"),
    ] {
        run(
            Command::new(&omniidl)
                .arg("-bcxx")
                .arg("-C")
                .arg(&gen)
                .arg("-I")
                .arg(&gen)
                .arg(idl),
            &omniidl,
        )?;
    }
    let libs = omniorb_libs();
    let cxxflags: Vec<String> = std::env::var("CXXFLAGS")
        .map(|s| s.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default();
    let mut skels = Vec::new();
    for stem in ["interop_proto", "interop"] {
        let skel = out.join(format!("{stem}SK.o"));
        run(
            Command::new(&cxx)
                .args(["-O1", "-c", "-o"])
                .arg(&skel)
                .arg("-I")
                .arg(&gen)
                .args(&cxxflags)
                .arg(gen.join(format!("{stem}SK.cc"))),
            &cxx,
        )?;
        skels.push(skel);
    }
    let mut built = Vec::new();
    for name in ["client", "server"] {
        let exe = out.join(format!("interop_{name}"));
        run(
            Command::new(&cxx)
                .args(["-O1", "-Wall", "-o"])
                .arg(&exe)
                .arg("-I")
                .arg(&gen)
                .args(&cxxflags)
                .arg(manifest.join(format!("cpp/{name}.cc")))
                .args(&skels)
                .args(&libs),
            &cxx,
        )?;
        built.push(exe);
    }
    let server = built.pop().ok_or("nothing built")?;
    let client = built.pop().ok_or("nothing built")?;
    Ok((client, server))
}

/// Linker flags for omniORB and its SSL transport: pkg-config's where it knows the package,
/// else the usual libraries. `omnisslTP4` comes first: it depends on `omniORB4` and OpenSSL.
fn omniorb_libs() -> Vec<String> {
    let mut libs = vec!["-lomnisslTP4".to_owned()];
    libs.extend(pkg_config_libs("omniORB4", &["-lomniORB4", "-lomnithread"]));
    libs.extend(pkg_config_libs("openssl", &["-lssl", "-lcrypto"]));
    libs.push("-lpthread".into());
    libs
}

/// `pkg-config --libs PACKAGE`, or `fallback` when pkg-config does not know it.
fn pkg_config_libs(package: &str, fallback: &[&str]) -> Vec<String> {
    let libs: Vec<String> = Command::new("pkg-config")
        .args(["--libs", package])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .split_whitespace()
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    if libs.is_empty() {
        fallback.iter().map(|s| (*s).to_owned()).collect()
    } else {
        libs
    }
}

fn run(cmd: &mut Command, tool: &str) -> Result<(), String> {
    let output = cmd
        .output()
        .map_err(|e| format!("cannot run `{tool}`: {e}"))?;
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let first: Vec<&str> = stderr
        .lines()
        .filter(|l| !l.trim().is_empty())
        .take(3)
        .collect();
    Err(format!(
        "`{tool}` failed ({}): {}",
        output.status,
        first.join(" | ")
    ))
}
