//! Loading .proto files with protox: the include-path chain with `orb/options.proto` built in.

use crate::error::Error;
use crate::model::Model;
use crate::Options;
use prost_reflect::DescriptorPool;
use protox::file::{
    ChainFileResolver, File, FileResolver, GoogleFileResolver, IncludeFileResolver,
};
use std::path::{Component, Path, PathBuf};

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
    let includes: Vec<&Path> = includes.iter().map(AsRef::as_ref).collect();
    let path_of = |name: &str| source_path(name, &includes);
    let mut compiler = protox::Compiler::with_file_resolver(file_resolver(&includes));
    compiler.include_imports(true).include_source_info(true);
    for proto in protos {
        let proto = &align_input(proto.as_ref(), &includes);
        if let Err(e) = compiler.open_file(proto) {
            return Err(input_error(e, proto, &includes).with_paths(path_of));
        }
    }
    let pool = compiler.descriptor_pool();
    let model = Model::from_pool(&pool, options).map_err(|e| e.with_paths(path_of))?;
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

/// The error for an input protox could not open. protox says "not in any include path" both
/// for a file that does not exist and for one outside the include paths: tell them apart.
fn input_error(e: protox::Error, input: &Path, includes: &[&Path]) -> Error {
    // protox's FileNotIncluded: a not-found error that names no file.
    if !(e.is_file_not_found() && e.file().is_none()) {
        return e.into();
    }
    if includes.iter().any(|include| is_under(input, include)) {
        // protox took it as a path: it names the file itself.
        return Error::FileNotFound {
            input: input.to_path_buf(),
            tried: vec![clickable(input)],
        };
    }
    if input.is_file() {
        return Error::NotInIncludePath {
            input: input.to_path_buf(),
            includes: includes.iter().map(|p| p.to_path_buf()).collect(),
        };
    }
    // protox took it as a name relative to the include paths.
    let tried = if input.is_relative() {
        includes.iter().map(|i| clickable(&i.join(input))).collect()
    } else {
        vec![input.to_path_buf()]
    };
    Error::FileNotFound {
        input: input.to_path_buf(),
        tried,
    }
}

/// `input` spelled from the include path it lies under, when only one of the two is absolute
/// (`/crate/proto/a.proto` with include `proto`, or the reverse): protox compares them as
/// written and would not find the file, though it is there.
fn align_input(input: &Path, includes: &[&Path]) -> PathBuf {
    if includes.iter().any(|include| is_under(input, include)) {
        return input.to_path_buf();
    }
    let Ok(cwd) = std::env::current_dir() else {
        return input.to_path_buf();
    };
    let absolute = |p: &Path| -> PathBuf {
        cwd.join(p)
            .components()
            .filter(|c| !matches!(c, Component::CurDir))
            .collect()
    };
    let abs_input = absolute(input);
    includes
        .iter()
        .find_map(|include| {
            let rest = abs_input.strip_prefix(absolute(include)).ok()?;
            Some(include.join(rest))
        })
        .unwrap_or_else(|| input.to_path_buf())
}

/// Whether `path` lies under `dir`, ignoring `.` components (as protox compares them).
fn is_under(path: &Path, dir: &Path) -> bool {
    let strip = |p: &Path| -> PathBuf {
        p.components()
            .filter(|c| !matches!(c, Component::CurDir))
            .collect()
    };
    strip(path).starts_with(strip(dir))
}

/// Where file `name` (as imports name it) is read from under `includes`: the first include
/// path that has it, as protox's resolver chain finds it, shown by [`clickable`]. `None` for
/// `orb/options.proto` and for files only protox has (the well-known types).
fn source_path(name: &str, includes: &[&Path]) -> Option<PathBuf> {
    if name == OPTIONS_PROTO_NAME {
        return None;
    }
    includes
        .iter()
        .map(|include| include.join(name))
        .find(|p| p.is_file())
        .map(|p| clickable(&p))
}

/// `path` as a user can open it from where the build runs (a build script's current directory
/// is its crate's root, `CARGO_MANIFEST_DIR`): relative paths as they are (without a leading
/// `./`); absolute ones relative to the current directory, or else to `CARGO_MANIFEST_DIR`,
/// when under it, else absolute.
fn clickable(path: &Path) -> PathBuf {
    if path.is_relative() {
        let trimmed: PathBuf = path
            .components()
            .skip_while(|c| matches!(c, Component::CurDir))
            .collect();
        return if trimmed.as_os_str().is_empty() {
            path.to_path_buf()
        } else {
            trimmed
        };
    }
    let bases = [
        std::env::current_dir().ok(),
        std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from),
    ];
    bases
        .iter()
        .flatten()
        .filter_map(|base| path.strip_prefix(base).ok())
        .find(|rel| !rel.as_os_str().is_empty())
        .map_or_else(|| path.to_path_buf(), Path::to_path_buf)
}

#[cfg(test)]
pub(crate) fn clickable_for_tests(path: &Path) -> PathBuf {
    clickable(path)
}
