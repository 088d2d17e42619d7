//! Compiles the suite's .proto files with orb-codegen, as a user's build script would.

fn main() -> std::io::Result<()> {
    orb_codegen::configure()
        .file_descriptor_set_path(
            std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR is set"))
                .join("suite.fds"),
        )
        .compile_protos(
            &[
                "proto/suite/common/types.proto",
                "proto/suite/api/store.proto",
                "proto/suite/hostile/names.proto",
                "proto/suite/hostile/inner.proto",
                "proto/plain.proto",
            ],
            &["proto"],
        )
}
