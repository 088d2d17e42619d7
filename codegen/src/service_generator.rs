//! The adapter between prost-build and our model: a `prost_build::ServiceGenerator` that looks
//! each service prost reports up in the [`Model`] (by package and proto name) and appends our
//! code to the package's module.

use crate::gen::{generate_service_with, GenOptions};
use protorb_idl::{Model, Service};
use std::collections::HashMap;

/// Generates servant traits, skeletons and clients for prost-build.
///
/// [`Builder`](crate::Builder) installs it; install it yourself with
/// `prost_build::Config::service_generator` when you drive prost-build directly (build the
/// model from the same descriptors, e.g. with `protorb_idl::compile`, and remember
/// `extern_path(".orb.ObjectRef", "::protorb::ObjectRef")`).
#[derive(Debug, Default)]
pub struct Generator {
    services: HashMap<(String, String), Service>,
    options: GenOptions,
}

impl Generator {
    /// A generator for the services of `model`, with the default [`GenOptions`].
    pub fn new(model: &Model) -> Self {
        Self::with_options(model, GenOptions::default())
    }

    /// A generator for the services of `model` that generates what `options` asks for.
    pub fn with_options(model: &Model, options: GenOptions) -> Self {
        Generator {
            options,
            services: model
                .services
                .iter()
                .map(|s| ((s.package.clone(), s.proto_name.clone()), s.clone()))
                .collect(),
        }
    }
}

impl prost_build::ServiceGenerator for Generator {
    fn generate(&mut self, service: prost_build::Service, buf: &mut String) {
        let key = (service.package.clone(), service.proto_name.clone());
        let Some(model) = self.services.get(&key) else {
            let msg = format!(
                "protorb-codegen has no model for service `{}` in package `{}`",
                service.proto_name, service.package
            );
            buf.push_str(&format!("::core::compile_error!({msg:?});\n"));
            return;
        };
        // prost resolved the request and reply types itself: use its paths for them (ours are
        // computed the same way, and still serve the `raises` types prost never sees).
        let mut model = model.clone();
        for method in &mut model.methods {
            if let Some(p) = service
                .methods
                .iter()
                .find(|p| p.proto_name == method.proto_name)
            {
                method.input.rust_path.clone_from(&p.input_type);
                method.output.rust_path.clone_from(&p.output_type);
            }
        }
        buf.push_str(&generate_service_with(&model, self.options));
    }
}
