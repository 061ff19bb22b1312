//! How a session of a model is built: the provider-less first look at its
//! inputs that TensorRT's shape profile needs, the build from an earlier
//! start's EP-context model, and every build's options and providers.

use super::super::{InputShape, InputSpec, ModelBytes, ProviderKind, Result};
use super::plan::BuildPlan;
use super::{declared, is_ort_format, load_err, providers, redeclare, resolve_inputs, Built, OrtBackend};
use ort::session::builder::GraphOptimizationLevel;
use ort::session::Session as OrtSession;

impl OrtBackend {
    /// `bytes` with its inputs declared at the load's shapes, and those
    /// shapes, when TensorRT is listed: its shape profile needs the input
    /// names before the session exists, so a first, provider-less session
    /// reads them. Otherwise `bytes` as they are and no profile.
    pub(super) fn shape_profile(
        &self,
        bytes: ModelBytes,
        specs: &[InputShape],
    ) -> Result<(ModelBytes, Vec<InputSpec>)> {
        if !self.settings.providers.contains(&ProviderKind::Tensorrt) {
            return Ok((bytes, Vec::new()));
        }
        let probe = OrtSession::builder(&self.env)
            .map_err(load_err)?
            .with_optimization_level(GraphOptimizationLevel::Disable)
            .map_err(load_err)?
            .commit_from_memory((*bytes).as_ref())
            .map_err(load_err)?;
        let profile = resolve_inputs(&declared(&probe), specs)?;
        Ok((redeclare(bytes, &declared(&probe), &profile)?.0, profile))
    }

    /// The first build: from the EP-context model of an earlier start where
    /// there is one, and from the model itself (writing a new context
    /// model) when that one does not load.
    pub(super) fn build_first(&self, raw: &[u8], profile: &[InputSpec], plan: &mut BuildPlan) -> Result<Built> {
        let Some(context) = plan.context.clone() else {
            return self.build(raw, profile, plan);
        };
        match self.build(raw, profile, plan) {
            Ok(built) => {
                log::info!("TensorRT: loaded the EP-context model {}", context.display());
                Ok(built)
            }
            Err(e) => {
                log::warn!("the EP-context model {} does not load ({e}); building anew", context.display());
                let _ = std::fs::remove_file(&context);
                plan.context = None;
                plan.dump_context = true;
                self.build(raw, profile, plan)
            }
        }
    }

    /// One session over `raw` (or the plan's EP-context model) with the
    /// configured options and providers.
    pub(super) fn build(&self, raw: &[u8], profile: &[InputSpec], plan: &BuildPlan) -> Result<Built> {
        let mut builder = OrtSession::builder(&self.env)
            .map_err(load_err)?
            .with_optimization_level(GraphOptimizationLevel::All)
            .map_err(load_err)?
            .with_intra_threads(self.settings.threads)
            .map_err(load_err)?
            .with_inter_threads(1)
            .map_err(load_err)?;
        let context = match &plan.context {
            Some(path) => Some(std::fs::read(path).map_err(|e| load_err(format!("{}: {e}", path.display())))?),
            None => None,
        };
        let raw = context.as_deref().unwrap_or(raw);
        if is_ort_format(raw) {
            // The session reads initializers straight from the mapped file;
            // `Shared` keeps the mapping alive as long as its sessions.
            builder = builder
                .with_config_entry("session.use_ort_model_bytes_directly", "1")
                .map_err(load_err)?
                .with_config_entry("session.use_ort_model_bytes_for_initializers", "1")
                .map_err(load_err)?;
        }
        if self.settings.requires_gpu() {
            builder = builder.with_config_entry("session.disable_cpu_ep_fallback", "1").map_err(load_err)?;
        }
        if let Some(prefix) = &plan.profile_to {
            builder = builder.with_profiling(prefix).map_err(load_err)?;
        }
        let registration =
            providers::Registration { settings: &self.settings, version: self.version(), inputs: profile, plan };
        let (providers, failed) = providers::register(&registration, &mut builder)?;
        let session = builder.commit_from_memory(raw).map_err(load_err)?;
        Ok((session, providers, failed))
    }
}
