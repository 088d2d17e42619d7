//! Generates the stubs and skeletons of every example from its `.proto` file, the way a user's
//! own crate does it: `protorb_codegen::compile_protos(files, include_dirs)` in `build.rs`, then
//! `protorb::include_proto!("package")` where the code is needed.

fn main() -> std::io::Result<()> {
    protorb_codegen::compile_protos(
        &[
            "proto/echo.proto",
            "proto/nested.proto",
            "proto/observer.proto",
            "proto/bank.proto",
            "proto/tutorial.proto",
        ],
        &["proto"],
    )
}
