//! Generates the stubs and skeletons of every example from its `.proto` file, the way a user's
//! own crate does it: `orb_codegen::compile_protos(files, include_dirs)` in `build.rs`, then
//! `orb::include_proto!("package")` where the code is needed.

fn main() -> std::io::Result<()> {
    orb_codegen::compile_protos(
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
