//! Compiles the suite's .proto files with protorb-codegen, as a user's build script would.
//!
//! Besides the default build (`proto/suite`, `proto/plain.proto`), the `proto/extras` files
//! exercise the Builder's options, each compilation on its own package, since prost writes a
//! file for every package of a compilation:
//!
//! - `extras.attrs`: prost-build's settings passed through (attributes, btree_map, boxed);
//! - `extras.library`: `generate_default_stubs(true)`, deprecation, shared exception enums;
//! - `extras.split`: compiled server-only into `$OUT_DIR/server_only` and client-only into
//!   `$OUT_DIR/client_only`;
//! - `extras.clock`: `compile_well_known_types(true)`, into `$OUT_DIR/wkt`.

use std::path::PathBuf;

fn main() -> std::io::Result<()> {
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR is set"));
    protorb_codegen::configure()
        .file_descriptor_set_path(out_dir.join("suite.fds"))
        .compile_protos(
            &[
                "proto/suite/common/types.proto",
                "proto/suite/api/store.proto",
                "proto/suite/hostile/names.proto",
                "proto/suite/hostile/inner.proto",
                "proto/plain.proto",
            ],
            &["proto"],
        )?;

    protorb_codegen::configure()
        // prost derives Eq and Hash itself where every field allows them (Point, the oneof);
        // Shape needs its map as a BTreeMap for them.
        .message_attribute(".extras.attrs.Shape", "#[derive(Eq, Hash)]")
        .type_attribute(".extras.attrs.Point", "#[derive(PartialOrd, Ord)]")
        .enum_attribute(".extras.attrs.Shape.kind", "#[derive(PartialOrd)]")
        .field_attribute(
            ".extras.attrs.Shape.name",
            "#[doc = \"Set by field_attribute.\"]",
        )
        .btree_map([".extras.attrs.Shape.tags"])
        .boxed(".extras.attrs.Shape.origin")
        .compile_protos(&["proto/extras/attrs.proto"], &["proto"])?;

    protorb_codegen::configure()
        .generate_default_stubs(true)
        .compile_protos(&["proto/extras/library.proto"], &["proto"])?;

    for (dir, server, client) in [("server_only", true, false), ("client_only", false, true)] {
        let out = out_dir.join(dir);
        std::fs::create_dir_all(&out)?;
        protorb_codegen::configure()
            .out_dir(&out)
            .build_server(server)
            .build_client(client)
            .compile_protos(&["proto/extras/split.proto"], &["proto"])?;
    }

    let wkt = out_dir.join("wkt");
    std::fs::create_dir_all(&wkt)?;
    protorb_codegen::configure()
        .out_dir(&wkt)
        .compile_well_known_types(true)
        .compile_protos(&["proto/extras/clock.proto"], &["proto"])
}
