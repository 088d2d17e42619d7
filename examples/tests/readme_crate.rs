//! A new crate made of the README tutorial's blocks builds and runs (issue 21): the dependency
//! lines a user types, `proto/echo.proto`, `build.rs` and `src/main.rs`, taken from README.md
//! as they stand. The only change is that our crates' version requirements get a `path` to
//! this workspace, since they are not on crates.io from here; every other dependency resolves
//! as it would for a user (versions pinned by a copy of the workspace's Cargo.lock).

use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("examples/ has a parent")
        .to_path_buf()
}

/// The fenced blocks of `lang` in `text`, in order.
fn blocks<'a>(text: &'a str, lang: &str) -> Vec<&'a str> {
    let fence = format!("```{lang}\n");
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(&fence) {
        let body = &rest[start + fence.len()..];
        let end = body
            .find("\n```")
            .expect("an unterminated code block in README.md");
        out.push(&body[..end + 1]);
        rest = &body[end..];
    }
    out
}

/// The package name of the workspace crate in `dir`.
fn package_name(dir: &Path) -> String {
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).expect("a member manifest");
    let line = manifest
        .lines()
        .find(|l| l.starts_with("name = "))
        .expect("a package name");
    line.trim_start_matches("name = ")
        .trim_matches('"')
        .to_string()
}

#[test]
fn the_readme_tutorial_is_a_crate_that_builds_and_runs() {
    let ws = workspace();
    let readme = std::fs::read_to_string(ws.join("README.md")).expect("README.md");
    let tutorial = &readme[readme.find("## Tutorial").expect("a Tutorial section")..];
    let toml = blocks(tutorial, "toml")[0];
    let proto = blocks(tutorial, "proto")[0];
    let rust = blocks(tutorial, "rust");
    let (build_rs, main_rs) = (rust[0], rust[1]);
    assert!(build_rs.contains("fn main"), "{build_rs}");
    assert!(main_rs.contains("include_proto!"), "{main_rs}");

    // Our crates as path dependencies with the README's version requirement.
    let ours: Vec<(String, PathBuf)> = ["orb", "codegen", "idl", "naming"]
        .iter()
        .map(|d| (package_name(&ws.join(d)), ws.join(d)))
        .collect();
    let mut deps = String::new();
    for line in toml.lines() {
        let name = line.split(" = ").next().unwrap_or_default();
        match ours.iter().find(|(n, _)| n == name) {
            Some((n, dir)) => {
                let version = line.split(" = ").nth(1).expect("a version requirement");
                assert!(version.starts_with('"'), "README gives {n} as `{line}`");
                deps.push_str(&format!(
                    "{n} = {{ version = {version}, path = {:?} }}\n",
                    dir.display()
                ));
            }
            None => {
                deps.push_str(line);
                deps.push('\n');
            }
        }
    }
    assert!(
        ours.iter()
            .any(|(n, _)| deps.contains(&format!("{n} = {{"))),
        "README's dependency lines name none of our crates:\n{toml}"
    );

    let dir = std::env::temp_dir().join(format!("orb-readme-crate-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("proto")).expect("mkdir");
    std::fs::create_dir_all(dir.join("src")).expect("mkdir");
    let manifest = format!(
        "[package]\nname = \"readme-tutorial\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\
         publish = false\n\n[workspace]\n\n{deps}"
    );
    std::fs::write(dir.join("Cargo.toml"), manifest).expect("write");
    std::fs::write(dir.join("proto/echo.proto"), proto).expect("write");
    std::fs::write(dir.join("build.rs"), build_rs).expect("write");
    std::fs::write(dir.join("src/main.rs"), main_rs).expect("write");
    std::fs::copy(ws.join("Cargo.lock"), dir.join("Cargo.lock")).expect("copy Cargo.lock");

    // Its own target directory under ours (not the workspace's: a second cargo would wait on
    // the build lock the running `cargo test` holds), kept between runs so that only the
    // first run builds the dependencies.
    let target = ws.join("target").join("readme-crate");
    let out = Command::new(env!("CARGO"))
        .args(["run", "--quiet"])
        .current_dir(&dir)
        .env("CARGO_TARGET_DIR", &target)
        .env_remove("RUSTFLAGS")
        .output()
        .expect("run cargo");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "cargo run failed:\n{stdout}\n{stderr}"
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    assert!(lines[0].starts_with("IOR:"), "{stdout}");
    assert_eq!(lines[1], "HELLO", "{stdout}");
    let _ = std::fs::remove_dir_all(&dir);
}
