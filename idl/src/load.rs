//! Loading .proto files with protox: the include-path chain with `orb/options.proto` built in.

use crate::error::Error;
use crate::model::Model;
use crate::Options;
use prost_reflect::DescriptorPool;
use protox::file::{
    ChainFileResolver, File, FileResolver, GoogleFileResolver, IncludeFileResolver,
};
use std::path::{Path, PathBuf};

/// The name users import: `import "orb/options.proto";`.
pub const OPTIONS_PROTO_NAME: &str = "orb/options.proto";

/// The text of `orb/options.proto` (the `oneway` and `raises` method options and the
/// `orb.ObjectRef` message).
pub const OPTIONS_PROTO: &str = include_str!("../proto/orb/options.proto");

/// Serves `orb/options.proto` from memory, so users need no include path for it.
#[derive(Debug, Default, Clone, Copy)]
pub struct OrbOptionsResolver;

impl FileResolver for OrbOptionsResolver {
    fn open_file(&self, name: &str) -> Result<File, protox::Error> {
        if name == OPTIONS_PROTO_NAME {
            File::from_source(name, OPTIONS_PROTO)
        } else {
            Err(protox::Error::file_not_found(name))
        }
    }
}

/// The resolver chain [`compile`] uses: `orb/options.proto` first, then each include path in
/// order, then protox's copies of the Google well-known types.
pub fn file_resolver(includes: &[impl AsRef<Path>]) -> ChainFileResolver {
    let mut chain = ChainFileResolver::new();
    chain.add(OrbOptionsResolver);
    for include in includes {
        chain.add(IncludeFileResolver::new(include.as_ref().to_owned()));
    }
    chain.add(GoogleFileResolver::new());
    chain
}

/// One file that took part in a compilation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceFile {
    /// The name imports use, e.g. `demo/echo.proto`.
    pub name: String,
    /// Where it was read from (`None` for built-in files: `orb/options.proto`, the well-known
    /// types).
    pub path: Option<PathBuf>,
    /// Whether it was only imported rather than named as an input.
    pub is_import: bool,
}

/// The result of [`compile`]: descriptors for prost and the interface model for codegen.
#[derive(Debug, Clone)]
pub struct Compiled {
    /// The interface model.
    pub model: Model,
    /// The descriptor pool (includes imports; keeps custom options readable).
    pub pool: DescriptorPool,
    /// The descriptor set for prost-build's `compile_fds`: every file with its imports, with
    /// source info (comments). Custom options are dropped here (prost_types does not know them).
    pub file_descriptor_set: prost_types::FileDescriptorSet,
    /// The same set encoded, with custom options kept (what `protoc -o` would write).
    pub encoded_file_descriptor_set: Vec<u8>,
    /// The files read, in dependency order.
    pub files: Vec<SourceFile>,
}

/// Parses `protos` (paths under one of `includes`, or names relative to them) and their imports,
/// and builds the [`Model`].
pub fn compile(
    protos: &[impl AsRef<Path>],
    includes: &[impl AsRef<Path>],
    options: &Options,
) -> Result<Compiled, Error> {
    let mut compiler = protox::Compiler::with_file_resolver(file_resolver(includes));
    compiler.include_imports(true).include_source_info(true);
    for proto in protos {
        compiler.open_file(proto.as_ref())?;
    }
    let pool = compiler.descriptor_pool();
    let model = Model::from_pool(&pool, options)?;
    let files = compiler
        .files()
        .map(|f| SourceFile {
            name: f.name().to_string(),
            path: f.path().map(Path::to_path_buf),
            is_import: f.is_import(),
        })
        .collect();
    Ok(Compiled {
        model,
        file_descriptor_set: compiler.file_descriptor_set(),
        encoded_file_descriptor_set: compiler.encode_file_descriptor_set(),
        pool,
        files,
    })
}
