//! Why a set of .proto files cannot become an ORB interface model. Every message names the
//! file, and where there is one the service and method (`Svc.Method`), as a user would look
//! for them.

use std::fmt;
use std::path::{Path, PathBuf};

/// An error from [`crate::compile`] or [`crate::Model`] building.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The .proto files do not parse or resolve: protox's report, prefixed with the file (and
    /// line and column where protox knows them).
    Parse {
        /// protox's error.
        error: Box<protox::Error>,
        /// Where the file it names was read from, as the user can open it (relative to the
        /// current directory when under it, else absolute); `None` for built-in files or
        /// when not known, and the error then shows the name imports use.
        path: Option<PathBuf>,
    },
    /// An input file that does not exist.
    FileNotFound {
        /// The input as given.
        input: PathBuf,
        /// The paths looked at: the input itself when it lies under an include path, else the
        /// input joined to each include path.
        tried: Vec<PathBuf>,
    },
    /// An input file that exists but lies under none of the include paths, so it has no name
    /// for imports and no package path.
    NotInIncludePath {
        /// The input as given.
        input: PathBuf,
        /// The include paths.
        includes: Vec<PathBuf>,
    },
    /// A descriptor set could not be read.
    Descriptor(Box<prost_reflect::DescriptorError>),
    /// A client- or server-streaming method, without `skip_streaming`.
    Streaming {
        /// The .proto file.
        file: String,
        /// The service's name as written.
        service: String,
        /// The method's name as written.
        method: String,
    },
    /// A oneway method whose output is not `google.protobuf.Empty`.
    OnewayOutput {
        /// The .proto file.
        file: String,
        /// The service's name as written.
        service: String,
        /// The method's name as written.
        method: String,
        /// The declared output type.
        output: String,
    },
    /// A oneway method that declares user exceptions (there is no reply to carry them).
    OnewayRaises {
        /// The .proto file.
        file: String,
        /// The service's name as written.
        service: String,
        /// The method's name as written.
        method: String,
    },
    /// A `raises` entry that does not name a message type.
    UnknownException {
        /// The .proto file.
        file: String,
        /// The service's name as written.
        service: String,
        /// The method's name as written.
        method: String,
        /// The `raises` entry as written.
        name: String,
    },
    /// The same exception type declared twice on one method.
    DuplicateException {
        /// The .proto file.
        file: String,
        /// The service's name as written.
        service: String,
        /// The method's name as written.
        method: String,
        /// The exception's fully qualified name.
        name: String,
    },
    /// Two methods of one service that map to the same Rust name (`GetItem` and `get_item`).
    NameClash {
        /// The .proto file.
        file: String,
        /// The service's name as written.
        service: String,
        /// The first method's name as written.
        first: String,
        /// The second method's name as written.
        second: String,
        /// The Rust name both map to.
        rust_name: String,
    },
    /// An invalid `extern_path`.
    ExternPath(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Parse { error, path } => write_parse_error(f, error, path.as_deref()),
            Error::FileNotFound { input, tried } => match tried.as_slice() {
                [one] => write!(f, "file `{}` does not exist", one.display()),
                _ => write!(
                    f,
                    "file `{}` does not exist in any include path (tried {})",
                    input.display(),
                    list(tried)
                ),
            },
            Error::NotInIncludePath { input, includes } => write!(
                f,
                "file `{}` is not under any include path ({}); name it relative to one, or add \
                 its directory to the include paths",
                input.display(),
                list(includes)
            ),
            Error::Descriptor(e) => write!(f, "invalid file descriptor set: {e}"),
            Error::Streaming {
                file,
                service,
                method,
            } => write!(
                f,
                "streaming method `{service}.{method}` in `{file}` is not supported by orb \
                 (CORBA operations are request/reply); remove it or call `skip_streaming(true)`"
            ),
            Error::OnewayOutput {
                file,
                service,
                method,
                output,
            } => write!(
                f,
                "oneway method `{service}.{method}` in `{file}` must return \
                 `google.protobuf.Empty`, not `{output}` (a oneway call gets no reply)"
            ),
            Error::OnewayRaises {
                file,
                service,
                method,
            } => write!(
                f,
                "oneway method `{service}.{method}` in `{file}` must not declare `raises` \
                 (a oneway call gets no reply to carry an exception)"
            ),
            Error::UnknownException {
                file,
                service,
                method,
                name,
            } => write!(
                f,
                "`raises` entry `{name}` of method `{service}.{method}` in `{file}` does not \
                 name a message type"
            ),
            Error::DuplicateException {
                file,
                service,
                method,
                name,
            } => write!(
                f,
                "method `{service}.{method}` in `{file}` declares `raises` `{name}` twice"
            ),
            Error::NameClash {
                file,
                service,
                first,
                second,
                rust_name,
            } => write!(
                f,
                "methods `{service}.{first}` and `{service}.{second}` in `{file}` both map to \
                 the Rust name `{rust_name}`; rename one"
            ),
            Error::ExternPath(e) => write!(f, "invalid extern path: {e}"),
        }
    }
}

/// `` `a`, `b` `` for a list of paths.
fn list(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| format!("`{}`", p.display()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// protox's message, prefixed with `file:line:column` where protox knows them (its `Display`
/// alone does not name the file), and followed by its help text. The file is `path` when known
/// (a path the user can open), else the name protox has.
fn write_parse_error(
    f: &mut fmt::Formatter<'_>,
    e: &protox::Error,
    path: Option<&Path>,
) -> fmt::Result {
    use miette::Diagnostic;
    let position = e
        .labels()
        .and_then(|mut labels| labels.next())
        .and_then(|label| {
            let source = e.source_code()?;
            let span = source.read_span(label.inner(), 0, 0).ok()?;
            Some((span.line() + 1, span.column() + 1))
        });
    let shown = path.map(|p| p.display().to_string());
    match (e.file(), position) {
        (Some(file), Some((line, column))) => {
            let file = shown.as_deref().unwrap_or(file);
            write!(f, "{file}:{line}:{column}: {e}")?;
        }
        (Some(file), None) if shown.is_some() || !e.to_string().contains(file) => {
            let file = shown.as_deref().unwrap_or(file);
            write!(f, "{file}: {e}")?;
        }
        _ => write!(f, "{e}")?,
    }
    if let Some(help) = e.help() {
        write!(f, " ({help})")?;
    }
    Ok(())
}

impl Error {
    /// Replaces the .proto file names this error shows with what `path_of` returns for them
    /// (a path on disk), where it returns one.
    pub(crate) fn with_paths(mut self, path_of: impl Fn(&str) -> Option<PathBuf>) -> Self {
        match &mut self {
            Error::Parse { error, path } => {
                if path.is_none() {
                    *path = error.file().and_then(&path_of);
                }
            }
            Error::Streaming { file, .. }
            | Error::OnewayOutput { file, .. }
            | Error::OnewayRaises { file, .. }
            | Error::UnknownException { file, .. }
            | Error::DuplicateException { file, .. }
            | Error::NameClash { file, .. } => {
                if let Some(p) = path_of(file) {
                    *file = p.display().to_string();
                }
            }
            Error::Descriptor(_)
            | Error::ExternPath(_)
            | Error::FileNotFound { .. }
            | Error::NotInIncludePath { .. } => {}
        }
        self
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Parse { error, .. } => Some(&**error),
            Error::Descriptor(e) => Some(&**e),
            _ => None,
        }
    }
}

impl From<protox::Error> for Error {
    fn from(e: protox::Error) -> Self {
        Error::Parse {
            error: Box::new(e),
            path: None,
        }
    }
}

impl From<prost_reflect::DescriptorError> for Error {
    fn from(e: prost_reflect::DescriptorError) -> Self {
        Error::Descriptor(Box::new(e))
    }
}
