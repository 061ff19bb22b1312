//! Which engine runs which model, as [`InferenceSettings`] says.

use super::{Backend, EngineKind, InferenceSettings};
use std::collections::BTreeMap;
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(
        "the config asks for the ONNX Runtime engine, but this fusiond was built without it; \
         rebuild with `--features ort` or set inference.engine = \"tract\" and remove \"ort\" from inference.engines"
    )]
    NotBuilt,
    #[error("cannot start ONNX Runtime: {0}")]
    Ort(String),
    #[error("this fusiond was built without the tract engine; rebuild with the default features")]
    NoTract,
}

/// The backends models are loaded with: one default, plus per-model choices.
#[derive(Clone)]
pub struct Engines {
    default: Arc<dyn Backend>,
    by_model: BTreeMap<String, Arc<dyn Backend>>,
}

impl<B: Backend + 'static> From<Arc<B>> for Engines {
    fn from(backend: Arc<B>) -> Self {
        Engines::only(backend)
    }
}

impl From<Arc<dyn Backend>> for Engines {
    fn from(backend: Arc<dyn Backend>) -> Self {
        Engines::only(backend)
    }
}

impl Engines {
    /// Every model on `backend`.
    pub fn only(backend: Arc<dyn Backend>) -> Self {
        Engines { default: backend, by_model: BTreeMap::new() }
    }

    /// The engines `[inference]` names. ONNX Runtime is started (its library
    /// loaded) only when some model may use it; under `auto` alone, one that
    /// does not start leaves those models on tract.
    pub fn from_settings(config: &InferenceSettings) -> Result<Self, EngineError> {
        let tract = tract_backend(config);
        let ort = match (config.requires_ort(), config.uses_ort()) {
            (true, _) => Some(ort_backend(config)?),
            (false, true) => auto_ort(config),
            (false, false) => None,
        };
        let pick = |kind: EngineKind| match (kind, &ort, &tract) {
            (EngineKind::Ort | EngineKind::Auto, Some(o), _) => Ok(o.clone()),
            (_, _, Some(t)) => Ok(t.clone()),
            _ => Err(EngineError::NoTract),
        };
        let by_model =
            config.engines.iter().map(|(name, kind)| Ok((name.clone(), pick(*kind)?))).collect::<Result<_, _>>()?;
        Ok(Engines { default: pick(config.engine)?, by_model })
    }

    /// Whether some model runs on the engine called `engine` (`tract`, `ort`).
    pub fn runs_on(&self, engine: &str) -> bool {
        self.default.name() == engine || self.by_model.values().any(|b| b.name() == engine)
    }

    pub fn for_model(&self, name: &str) -> &dyn Backend {
        &**self.by_model.get(name).unwrap_or(&self.default)
    }

    /// `tract`, or e.g. `tract (ort: inswapper_128)` when models differ.
    pub fn describe(&self) -> String {
        let differ: Vec<String> = self
            .by_model
            .iter()
            .filter(|(_, b)| b.name() != self.default.name())
            .map(|(m, b)| format!("{}: {m}", b.name()))
            .collect();
        match differ.is_empty() {
            true => self.default.name().to_string(),
            false => format!("{} ({})", self.default.name(), differ.join(", ")),
        }
    }
}

/// ONNX Runtime for `auto`, or `None` (tract), saying which in the log.
fn auto_ort(config: &InferenceSettings) -> Option<Arc<dyn Backend>> {
    match ort_backend(config) {
        Ok(ort) => {
            log::info!("inference.engine = \"auto\": ONNX Runtime from {}", config.ort.library.display());
            Some(ort)
        }
        Err(EngineError::NotBuilt) => {
            log::info!("inference.engine = \"auto\": tract (this build has no ONNX Runtime engine)");
            None
        }
        Err(e) => {
            log::warn!("inference.engine = \"auto\": running on tract, since {e}");
            None
        }
    }
}

#[cfg(feature = "tract")]
fn tract_backend(config: &InferenceSettings) -> Option<Arc<dyn Backend>> {
    let tract = super::TractBackend::with_threads(config.tract_threads)
        .with_fused_ops(config.tract_fused_ops)
        .with_int8_activations(config.tract_int8_activations);
    Some(Arc::new(tract))
}

#[cfg(not(feature = "tract"))]
fn tract_backend(_: &InferenceSettings) -> Option<Arc<dyn Backend>> {
    None
}

#[cfg(feature = "ort")]
fn ort_backend(config: &InferenceSettings) -> Result<Arc<dyn Backend>, EngineError> {
    Ok(Arc::new(super::OrtBackend::new(config.ort.clone()).map_err(|e| EngineError::Ort(e.to_string()))?))
}

#[cfg(not(feature = "ort"))]
fn ort_backend(_: &InferenceSettings) -> Result<Arc<dyn Backend>, EngineError> {
    Err(EngineError::NotBuilt)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "tract")]
    #[test]
    fn models_follow_the_default_unless_named() {
        let config = InferenceSettings { engine: EngineKind::Tract, ..Default::default() };
        let e = Engines::from_settings(&config).unwrap();
        assert_eq!(e.for_model("anything").name(), "tract");
        assert_eq!(e.describe(), "tract");
    }

    /// `auto` (the default) falls back to tract when ONNX Runtime cannot
    /// start, where an explicit `ort` is an error.
    #[cfg(feature = "tract")]
    #[test]
    fn auto_runs_on_tract_when_onnx_runtime_cannot_start_and_ort_fails() {
        let mut config = InferenceSettings::default();
        assert_eq!(config.engine, EngineKind::Auto);
        config.ort.library = "/nonexistent/libonnxruntime.so".into();
        let e = Engines::from_settings(&config).unwrap();
        assert_eq!(e.for_model("anything").name(), "tract");
        assert!(!e.runs_on("ort"));
        config.engine = EngineKind::Ort;
        assert!(Engines::from_settings(&config).is_err());
    }

    #[cfg(not(feature = "ort"))]
    #[test]
    fn asking_for_ort_in_a_build_without_it_says_how_to_fix_it() {
        let mut config = InferenceSettings::default();
        config.engines.insert("inswapper_128".into(), EngineKind::Ort);
        let err = Engines::from_settings(&config).err().unwrap().to_string();
        assert!(err.contains("--features ort"), "{err}");
    }
}
