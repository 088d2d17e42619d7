//! Building the [`Model`] from a prost-reflect [`DescriptorPool`]: services, methods, the ORB
//! method options (read as extension fields, which prost_types would drop), and the checks.

use crate::error::Error;
use crate::model::{
    MessageType, Method, Model, Service, SkippedMethod, UserExceptionType, EMPTY_PROTO_NAME,
};
use crate::paths::{repository_id, RustPaths};
use crate::{ident, Options};
use prost_reflect::{
    DescriptorPool, ExtensionDescriptor, FileDescriptor, MethodDescriptor, ServiceDescriptor,
};
use std::collections::HashMap;

/// The full name of the `oneway` method option.
pub const ONEWAY_OPTION: &str = "orb.oneway";
/// The full name of the `raises` method option.
pub const RAISES_OPTION: &str = "orb.raises";

struct Extensions {
    oneway: Option<ExtensionDescriptor>,
    raises: Option<ExtensionDescriptor>,
}

impl Model {
    /// Builds the model from every service in `pool` (files added by the user and their
    /// imports alike, since prost generates code for all of them).
    pub fn from_pool(pool: &DescriptorPool, options: &Options) -> Result<Model, Error> {
        let paths =
            RustPaths::with_prost_types(&options.extern_paths, !options.compile_well_known_types)
                .map_err(Error::ExternPath)?;
        let ext = Extensions {
            oneway: pool.get_extension_by_name(ONEWAY_OPTION),
            raises: pool.get_extension_by_name(RAISES_OPTION),
        };
        let mut model = Model::default();
        for file in pool.files() {
            for service in file.services() {
                let service =
                    build_service(pool, &file, &service, &ext, &paths, options, &mut model)?;
                model.services.push(service);
            }
        }
        Ok(model)
    }

    /// Builds the model from an encoded `FileDescriptorSet` (e.g. from `protoc -o` or
    /// `protox`), keeping the custom options that prost_types would drop.
    pub fn from_encoded_file_descriptor_set(
        bytes: &[u8],
        options: &Options,
    ) -> Result<Model, Error> {
        let pool = DescriptorPool::decode(bytes)?;
        Model::from_pool(&pool, options)
    }
}

fn build_service(
    pool: &DescriptorPool,
    file: &FileDescriptor,
    service: &ServiceDescriptor,
    ext: &Extensions,
    paths: &RustPaths,
    options: &Options,
    model: &mut Model,
) -> Result<Service, Error> {
    let package = service.package_name().to_string();
    let mut methods = Vec::new();
    let mut rust_names: HashMap<String, String> = HashMap::new();
    for method in service.methods() {
        let at = Site {
            file: file.name(),
            service: service.name(),
            method: method.name(),
        };
        if method.is_client_streaming() || method.is_server_streaming() {
            if options.skip_streaming {
                model.skipped.push(SkippedMethod {
                    file: at.file.to_string(),
                    service: at.service.to_string(),
                    method: at.method.to_string(),
                });
                continue;
            }
            return Err(Error::Streaming {
                file: at.file.to_string(),
                service: at.service.to_string(),
                method: at.method.to_string(),
            });
        }
        let m = build_method(pool, file, &method, ext, paths, &package, &at)?;
        // Every Rust name the generator derives from the method must be unique in the service.
        let raw = ident::to_snake_raw(method.name());
        let mut derived = vec![raw.clone()];
        if !m.oneway {
            derived.push(format!("{raw}_with_timeout"));
        }
        for name in derived {
            if let Some(first) = rust_names.insert(name.clone(), method.name().to_string()) {
                return Err(Error::NameClash {
                    file: at.file.to_string(),
                    service: at.service.to_string(),
                    first,
                    second: method.name().to_string(),
                    rust_name: ident::sanitize_identifier(&name),
                });
            }
        }
        methods.push(m);
    }
    Ok(Service {
        name: ident::to_upper_camel(service.name()),
        proto_name: service.name().to_string(),
        package,
        file: file.name().to_string(),
        repository_id: repository_id(service.full_name()),
        docs: docs(file, service.path()),
        deprecated: is_deprecated(&service.options()),
        methods,
    })
}

struct Site<'a> {
    file: &'a str,
    service: &'a str,
    method: &'a str,
}

fn build_method(
    pool: &DescriptorPool,
    file: &FileDescriptor,
    method: &MethodDescriptor,
    ext: &Extensions,
    paths: &RustPaths,
    package: &str,
    at: &Site<'_>,
) -> Result<Method, Error> {
    let options = method.options();
    let oneway = match &ext.oneway {
        Some(e) if options.has_extension(e) => options.get_extension(e).as_bool().unwrap_or(false),
        _ => false,
    };
    let raise_names: Vec<String> = match &ext.raises {
        Some(e) if options.has_extension(e) => options
            .get_extension(e)
            .as_list()
            .unwrap_or_default()
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    };
    let input = method.input();
    let output = method.output();
    if oneway {
        if output.full_name() != EMPTY_PROTO_NAME {
            return Err(Error::OnewayOutput {
                file: at.file.to_string(),
                service: at.service.to_string(),
                method: at.method.to_string(),
                output: output.full_name().to_string(),
            });
        }
        if !raise_names.is_empty() {
            return Err(Error::OnewayRaises {
                file: at.file.to_string(),
                service: at.service.to_string(),
                method: at.method.to_string(),
            });
        }
    }
    let mut raises: Vec<UserExceptionType> = Vec::new();
    for name in &raise_names {
        let full_name =
            resolve_message(pool, package, name).ok_or_else(|| Error::UnknownException {
                file: at.file.to_string(),
                service: at.service.to_string(),
                method: at.method.to_string(),
                name: name.clone(),
            })?;
        if raises.iter().any(|r| r.full_name == full_name) {
            return Err(Error::DuplicateException {
                file: at.file.to_string(),
                service: at.service.to_string(),
                method: at.method.to_string(),
                name: full_name,
            });
        }
        raises.push(UserExceptionType {
            rust_path: paths.resolve(package, &full_name),
            repository_id: repository_id(&full_name),
            full_name,
        });
    }
    Ok(Method {
        name: ident::to_snake(method.name()),
        proto_name: method.name().to_string(),
        input: MessageType::new(input.full_name(), paths.resolve(package, input.full_name())),
        output: MessageType::new(
            output.full_name(),
            paths.resolve(package, output.full_name()),
        ),
        docs: docs(file, method.path()),
        oneway,
        raises,
        deprecated: is_deprecated(&options),
    })
}

/// Whether service or method `options` say `deprecated = true` (a standard option, field 33
/// of both `ServiceOptions` and `MethodOptions`).
fn is_deprecated(options: &prost_reflect::DynamicMessage) -> bool {
    options
        .get_field_by_name("deprecated")
        .is_some_and(|v| v.as_bool() == Some(true))
}

/// Resolves a `raises` entry to a message's full name: `.a.b.C` is absolute; otherwise the name
/// is looked up from the service's package outwards, as protobuf resolves type names
/// (`C` in package `a.b` tries `a.b.C`, `a.C`, `C`).
fn resolve_message(pool: &DescriptorPool, package: &str, name: &str) -> Option<String> {
    if let Some(abs) = name.strip_prefix('.') {
        return pool
            .get_message_by_name(abs)
            .map(|m| m.full_name().to_string());
    }
    let mut scope: Vec<&str> = package.split('.').filter(|s| !s.is_empty()).collect();
    loop {
        let candidate = if scope.is_empty() {
            name.to_string()
        } else {
            format!("{}.{name}", scope.join("."))
        };
        if let Some(m) = pool.get_message_by_name(&candidate) {
            return Some(m.full_name().to_string());
        }
        scope.pop()?;
    }
}

/// The leading (then trailing) comments at `path` in `file`'s source info, as doc lines.
fn docs(file: &FileDescriptor, path: &[i32]) -> Vec<String> {
    let Some(info) = &file.file_descriptor_proto().source_code_info else {
        return Vec::new();
    };
    let Some(loc) = info.location.iter().find(|l| l.path == path) else {
        return Vec::new();
    };
    let mut lines: Vec<String> = loc
        .leading_comments
        .as_deref()
        .map(|c| c.lines().map(str::to_owned).collect())
        .unwrap_or_default();
    if let Some(trailing) = loc.trailing_comments.as_deref() {
        if !lines.is_empty() {
            lines.push(String::new());
        }
        lines.extend(trailing.lines().map(str::to_owned));
    }
    lines
}
