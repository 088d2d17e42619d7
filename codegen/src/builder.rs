//! The build-script API: [`configure`] → [`Builder`] → [`Builder::compile_protos`].

use crate::service_generator::Generator;
use orb_idl::{Model, Options, OBJECT_REF_PROTO_PATH, OBJECT_REF_RUST_PATH};
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
#[derive(Clone, Debug)]
pub struct Builder {
    out_dir: Option<PathBuf>,
    extern_paths: Vec<(String, String)>,
    skip_streaming: bool,
    file_descriptor_set_path: Option<PathBuf>,
    emit_rerun_if_changed: bool,
    include_file: Option<PathBuf>,
    bytes: Vec<String>,
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
    /// `::orb::ObjectRef` is always there.
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
        let mut options = Options::new().skip_streaming(self.skip_streaming);
        for (proto, rust) in &self.extern_paths {
            options = options.extern_path(proto.clone(), rust.clone());
        }
        let compiled = orb_idl::compile(protos, includes, &options)
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
        config.service_generator(Box::new(Generator::new(&compiled.model)));
        // Every file goes in (prost needs the whole message graph); the options file and the
        // well-known types produce no module, since all their messages are extern.
        config.compile_fds(compiled.file_descriptor_set)?;

        Ok(Report {
            model: compiled.model,
            proto_files,
        })
    }
}
