//! The build-script API: [`configure`] → [`Builder`] → [`Builder::compile_protos`].

use crate::gen::GenOptions;
use crate::service_generator::Generator;
use protorb_idl::{Model, Options, OBJECT_REF_PROTO_PATH, OBJECT_REF_RUST_PATH};
use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};

/// Starts a [`Builder`] with the defaults.
pub fn configure() -> Builder {
    Builder::default()
}

/// Compiles `protos` (found under `includes`) into Rust: prost's messages plus our servant
/// traits, skeletons and clients, one file per package in `OUT_DIR`. The common case of
/// [`configure`]`().compile_protos(..)`.
pub fn compile_protos(
    protos: &[impl AsRef<Path>],
    includes: &[impl AsRef<Path>],
) -> io::Result<()> {
    configure().compile_protos(protos, includes)
}

/// Options for a compilation; setters take and return the builder by value.
///
/// Settings prost-build already has ([`bytes`](Self::bytes), [`btree_map`](Self::btree_map),
/// [`boxed`](Self::boxed), the `*_attribute` setters, [`extern_path`](Self::extern_path),
/// [`compile_well_known_types`](Self::compile_well_known_types),
/// [`include_file`](Self::include_file)) are handed to `prost_build::Config` unchanged, with
/// prost's path syntax (`"."` for everything, `.pkg`, `.pkg.Msg`, `.pkg.Msg.field`).
/// [`build_server`](Self::build_server), [`build_client`](Self::build_client) and
/// [`generate_default_stubs`](Self::generate_default_stubs) shape the ORB code, as their
/// tonic-build namesakes do.
///
/// There is no `emit_package` (tonic-build's switch that leaves the package out of the gRPC
/// service path). Here the package is part of the repository id
/// (`IDL:demo/Echo:1.0`), which `narrow` checks, `_is_a` answers and IORs carry; user
/// exception ids are built the same way. Leaving it out would make a server and a client
/// built with different settings fail to recognise each other's objects and exceptions:
/// a footgun, with nothing in return. Operation names on the wire are the proto method
/// names either way.
#[derive(Clone, Debug)]
pub struct Builder {
    out_dir: Option<PathBuf>,
    extern_paths: Vec<(String, String)>,
    skip_streaming: bool,
    file_descriptor_set_path: Option<PathBuf>,
    emit_rerun_if_changed: bool,
    include_file: Option<PathBuf>,
    bytes: Vec<String>,
    btree_map: Vec<String>,
    boxed: Vec<String>,
    type_attributes: Vec<(String, String)>,
    message_attributes: Vec<(String, String)>,
    enum_attributes: Vec<(String, String)>,
    field_attributes: Vec<(String, String)>,
    compile_well_known_types: bool,
    gen: GenOptions,
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            out_dir: None,
            extern_paths: Vec::new(),
            skip_streaming: false,
            file_descriptor_set_path: None,
            emit_rerun_if_changed: true,
            include_file: None,
            bytes: Vec::new(),
            btree_map: Vec::new(),
            boxed: Vec::new(),
            type_attributes: Vec::new(),
            message_attributes: Vec::new(),
            enum_attributes: Vec::new(),
            field_attributes: Vec::new(),
            compile_well_known_types: false,
            gen: GenOptions::default(),
        }
    }
}

/// What a compilation produced, from [`Builder::compile`].
#[derive(Clone, Debug)]
pub struct Report {
    /// The interface model the code was generated from (its `skipped` lists the streaming
    /// methods left out under `skip_streaming`).
    pub model: Model,
    /// The .proto files read from disk (inputs and imports), for `rerun-if-changed`.
    pub proto_files: Vec<PathBuf>,
}

impl Builder {
    /// Where to write the generated files (default: `$OUT_DIR`).
    #[must_use]
    pub fn out_dir(mut self, out_dir: impl AsRef<Path>) -> Self {
        self.out_dir = Some(out_dir.as_ref().to_path_buf());
        self
    }

    /// Uses Rust types generated elsewhere for messages under `proto_path` (fully qualified,
    /// `.pkg` or `.pkg.Msg`), as prost-build's `Config::extern_path`. `.orb.ObjectRef` →
    /// `::protorb::ObjectRef` is always there.
    #[must_use]
    pub fn extern_path(
        mut self,
        proto_path: impl Into<String>,
        rust_path: impl Into<String>,
    ) -> Self {
        self.extern_paths
            .push((proto_path.into(), rust_path.into()));
        self
    }

    /// Generates `bytes` fields under these paths (`"."` for all, `.pkg.Msg.field` for one)
    /// as `bytes::Bytes` instead of `Vec<u8>`, as prost-build's `Config::bytes`. The ORB hands
    /// skeletons and stubs the received frame as `Bytes`, so such fields are then slices of it:
    /// no copy of a large payload on decode. The other side of that: a field kept after the
    /// call keeps the buffer it was received in alive: its frame and, for a small frame, the
    /// read chunk of 8 KiB or more it shares with its neighbours. Copy small fields you keep
    /// for long (`Bytes::copy_from_slice`). Your crate then needs the `bytes` dependency.
    #[must_use]
    pub fn bytes<I, S>(mut self, paths: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.bytes
            .extend(paths.into_iter().map(|p| p.as_ref().to_string()));
        self
    }

    /// Generates `map` fields under these paths (`"."` for all) as `BTreeMap` instead of
    /// `HashMap`, as prost-build's `Config::btree_map`: ordered iteration, and the map (so the
    /// message) can derive `Hash`/`Ord`.
    #[must_use]
    pub fn btree_map<I, S>(mut self, paths: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.btree_map
            .extend(paths.into_iter().map(|p| p.as_ref().to_string()));
        self
    }

    /// Boxes the message field at `path` (`.pkg.Msg.field`): `Option<Box<T>>`, as
    /// prost-build's `Config::boxed`. Recursive fields are boxed anyway.
    #[must_use]
    pub fn boxed(mut self, path: impl AsRef<str>) -> Self {
        self.boxed.push(path.as_ref().to_string());
        self
    }

    /// Adds `attribute` (e.g. `#[derive(Eq, Hash)]`, `#[derive(serde::Serialize)]`) to the
    /// messages, enums and oneofs under `path`, as prost-build's `Config::type_attribute`.
    /// Only prost's types: the ORB's generated traits, skeletons and clients are not touched.
    #[must_use]
    pub fn type_attribute(mut self, path: impl AsRef<str>, attribute: impl AsRef<str>) -> Self {
        self.type_attributes
            .push((path.as_ref().to_string(), attribute.as_ref().to_string()));
        self
    }

    /// Adds `attribute` to the messages (not enums or oneofs) under `path`, as prost-build's
    /// `Config::message_attribute`.
    #[must_use]
    pub fn message_attribute(mut self, path: impl AsRef<str>, attribute: impl AsRef<str>) -> Self {
        self.message_attributes
            .push((path.as_ref().to_string(), attribute.as_ref().to_string()));
        self
    }

    /// Adds `attribute` to the enums and oneofs (not messages) under `path`, as prost-build's
    /// `Config::enum_attribute`.
    #[must_use]
    pub fn enum_attribute(mut self, path: impl AsRef<str>, attribute: impl AsRef<str>) -> Self {
        self.enum_attributes
            .push((path.as_ref().to_string(), attribute.as_ref().to_string()));
        self
    }

    /// Adds `attribute` to the fields under `path` (`.pkg.Msg.field`, or a message for all its
    /// fields), as prost-build's `Config::field_attribute`.
    #[must_use]
    pub fn field_attribute(mut self, path: impl AsRef<str>, attribute: impl AsRef<str>) -> Self {
        self.field_attributes
            .push((path.as_ref().to_string(), attribute.as_ref().to_string()));
        self
    }

    /// Generates the `google.protobuf` types used by the .proto files instead of using
    /// `prost_types` (and `()` for `Empty`, primitives for the wrappers), as prost-build's
    /// `Config::compile_well_known_types` (default: false). The output then has a
    /// `google.protobuf.rs`, which your crate must include as module `google::protobuf`
    /// beside the packages that use it; servant and client signatures name those types.
    #[must_use]
    pub fn compile_well_known_types(mut self, compile: bool) -> Self {
        self.compile_well_known_types = compile;
        self
    }

    /// Generates the server side: servant traits and skeletons (default: true). With `false`,
    /// a client-only crate gets messages, clients and exception enums.
    #[must_use]
    pub fn build_server(mut self, build: bool) -> Self {
        self.gen = self.gen.server(build);
        self
    }

    /// Generates client stubs (default: true). With `false`, a server-only crate gets messages,
    /// servant traits, skeletons and exception enums.
    #[must_use]
    pub fn build_client(mut self, build: bool) -> Self {
        self.gen = self.gen.client(build);
        self
    }

    /// Gives every servant trait method a default body that raises NO_IMPLEMENT
    /// (completed NO), as tonic-build's `generate_default_stubs` answers "unimplemented"
    /// (default: false, so the compiler lists the methods a servant lacks). A servant then
    /// implements only the operations it serves; a client calling another one gets
    /// `SystemException` NO_IMPLEMENT back.
    #[must_use]
    pub fn generate_default_stubs(mut self, generate: bool) -> Self {
        self.gen = self.gen.default_stubs(generate);
        self
    }

    /// Leaves streaming methods out, with a `cargo:warning` for each, instead of failing
    /// (default: false).
    #[must_use]
    pub fn skip_streaming(mut self, skip: bool) -> Self {
        self.skip_streaming = skip;
        self
    }

    /// Also writes the encoded `FileDescriptorSet` (imports, source info and custom options
    /// included) to `path`.
    #[must_use]
    pub fn file_descriptor_set_path(mut self, path: impl AsRef<Path>) -> Self {
        self.file_descriptor_set_path = Some(path.as_ref().to_path_buf());
        self
    }

    /// Prints `cargo:rerun-if-changed` for every .proto read from disk (default: true).
    #[must_use]
    pub fn emit_rerun_if_changed(mut self, emit: bool) -> Self {
        self.emit_rerun_if_changed = emit;
        self
    }

    /// Also writes a file (name relative to the output directory) that declares the package
    /// modules and `include!`s each generated file, as prost-build's `Config::include_file`:
    /// then `include!(concat!(env!("OUT_DIR"), "/<name>"));` brings in every package at once.
    #[must_use]
    pub fn include_file(mut self, path: impl AsRef<Path>) -> Self {
        self.include_file = Some(path.as_ref().to_path_buf());
        self
    }

    /// Compiles `protos` (paths under one of `includes`, or names relative to them); prints the
    /// build-script lines (`rerun-if-changed`, a `warning` per skipped streaming method).
    pub fn compile_protos(
        self,
        protos: &[impl AsRef<Path>],
        includes: &[impl AsRef<Path>],
    ) -> io::Result<()> {
        self.compile(protos, includes).map(drop)
    }

    /// As [`compile_protos`](Self::compile_protos), and returns what was generated.
    pub fn compile(
        self,
        protos: &[impl AsRef<Path>],
        includes: &[impl AsRef<Path>],
    ) -> io::Result<Report> {
        let mut options = Options::new()
            .skip_streaming(self.skip_streaming)
            .compile_well_known_types(self.compile_well_known_types);
        for (proto, rust) in &self.extern_paths {
            options = options.extern_path(proto.clone(), rust.clone());
        }
        let compiled = protorb_idl::compile(protos, includes, &options)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;

        // Inputs and imports as read from disk (built-in files have no path).
        let proto_files: BTreeSet<PathBuf> = compiled
            .files
            .iter()
            .filter_map(|f| f.path.clone())
            .collect();
        let proto_files: Vec<PathBuf> = proto_files.into_iter().collect();
        if self.emit_rerun_if_changed {
            for file in &proto_files {
                println!("cargo:rerun-if-changed={}", file.display());
            }
        }
        for skipped in &compiled.model.skipped {
            println!("cargo:warning={skipped}");
        }

        if let Some(path) = &self.file_descriptor_set_path {
            std::fs::write(path, &compiled.encoded_file_descriptor_set)?;
        }

        let mut config = prost_build::Config::new();
        if let Some(out_dir) = &self.out_dir {
            config.out_dir(out_dir);
        }
        if let Some(include_file) = &self.include_file {
            config.include_file(include_file);
        }
        if !self
            .extern_paths
            .iter()
            .any(|(p, _)| p == OBJECT_REF_PROTO_PATH)
        {
            config.extern_path(OBJECT_REF_PROTO_PATH, OBJECT_REF_RUST_PATH);
        }
        for (proto, rust) in &self.extern_paths {
            config.extern_path(proto, rust);
        }
        if !self.bytes.is_empty() {
            config.bytes(&self.bytes);
        }
        if !self.btree_map.is_empty() {
            config.btree_map(&self.btree_map);
        }
        for path in &self.boxed {
            config.boxed(path);
        }
        for (path, attribute) in &self.type_attributes {
            config.type_attribute(path, attribute);
        }
        for (path, attribute) in &self.message_attributes {
            config.message_attribute(path, attribute);
        }
        for (path, attribute) in &self.enum_attributes {
            config.enum_attribute(path, attribute);
        }
        for (path, attribute) in &self.field_attributes {
            config.field_attribute(path, attribute);
        }
        if self.compile_well_known_types {
            config.compile_well_known_types();
        }
        config.service_generator(Box::new(Generator::with_options(&compiled.model, self.gen)));
        // Every file goes in (prost needs the whole message graph); the options file and the
        // well-known types produce no module, since all their messages are extern.
        config.compile_fds(compiled.file_descriptor_set)?;

        Ok(Report {
            model: compiled.model,
            proto_files,
        })
    }
}
