//! Loading models by tier: from the staged ramdisk (memory-mapped), through
//! the backend, warmed once, cached, with every phase timed. A tier that
//! cannot load falls back to the tier below it.

use super::cache::Cache;
use super::stage::{StageReport, READY};
use crate::catalog::Catalog;
use crate::config::Config;
use crate::face::{
    input_shapes, Detector, Enhancer, FaceError, FusionPipeline, MaskSettings, PipelineSettings, Recognizer, Swapper,
};
use crate::infer::{Engines, LoadPhases, Model, Tensor};
use crate::manifest::{Contract, Kind, ModelEntry};
use serde::Serialize;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Time spent on each load phase of one model, and its memory cost.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct ModelTimings {
    /// Mapping the file (and hashing it when verification is on).
    pub map: Duration,
    #[serde(flatten)]
    pub backend: LoadPhases,
    /// One run on a zero input of the configured shape.
    pub warmup: Duration,
    pub file_bytes: u64,
    /// Resident memory added by loading (the backend's own copy of weights).
    pub rss_delta_bytes: i64,
}

pub struct LoadedModel {
    pub entry: ModelEntry,
    pub model: Arc<dyn Model>,
    pub emap: Option<Tensor>,
    pub timings: ModelTimings,
}

/// The models one tier runs on.
#[derive(Clone)]
pub struct TierModels {
    pub tier: String,
    pub detector: Arc<LoadedModel>,
    pub recognizer: Arc<LoadedModel>,
    pub swapper: Arc<LoadedModel>,
    pub enhancer: Option<Arc<LoadedModel>>,
}

impl TierModels {
    pub fn all(&self) -> Vec<&Arc<LoadedModel>> {
        let mut all = vec![&self.detector, &self.recognizer, &self.swapper];
        all.extend(self.enhancer.as_ref());
        all
    }

    /// A pipeline with fresh per-thread sessions over these shared models.
    pub fn pipeline(&self, settings: PipelineSettings) -> Result<FusionPipeline, FaceError> {
        let mask = MaskSettings::default();
        let swapper = &self.swapper;
        let mut p = FusionPipeline::new(
            Detector::new(self.detector.entry.clone(), &*self.detector.model)?,
            Recognizer::new(self.recognizer.entry.clone(), &*self.recognizer.model)?,
            Swapper::new(swapper.entry.clone(), &*swapper.model, swapper.emap.clone(), mask)?,
            settings,
        );
        if let Some(e) = &self.enhancer {
            p.enhancer = Some(Enhancer::new(e.entry.clone(), &*e.model, mask)?);
        }
        Ok(p)
    }
}

pub enum TierOutcome {
    Ready(TierModels),
    /// Running on a lower tier than asked for, and why.
    Degraded {
        wanted: String,
        models: TierModels,
        reason: String,
    },
}

/// Resident and peak resident memory of this process, in bytes.
pub fn rss() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |key: &str| {
        status
            .lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

pub struct Store {
    catalog: Catalog,
    config: Config,
    staged: Option<StageReport>,
    cache: Mutex<Cache<LoadedModel>>,
}

impl Store {
    /// Opens the staged ramdisk when staging finished (its `.ready` marker is
    /// there); otherwise loads straight from the persistent directories.
    pub fn open(config: &Config, engines: impl Into<Engines>) -> Result<Store, crate::catalog::CatalogError> {
        let engines = engines.into();
        let ramdisk = &config.models.ramdisk;
        let staged = if ramdisk.join(READY).is_file() { StageReport::read(ramdisk) } else { None };
        let mut catalog = match &staged {
            Some(_) => Catalog::open(std::slice::from_ref(ramdisk), engines)?,
            None => {
                log::warn!("{} holds no staged models; loading from {:?}", ramdisk.display(), config.models.dirs);
                Catalog::open(&config.models.dirs, engines)?
            }
        };
        catalog.set_verify(staged.is_none() || config.models.verify_on_load);
        let cache = Cache::new(config.models.cache_max_models, config.models.cache_max_mib * 1024 * 1024);
        Ok(Store { catalog, config: config.clone(), staged, cache: Mutex::new(cache) })
    }

    /// Names of the cached models, least recently used first.
    pub fn cached(&self) -> Vec<String> {
        self.cache.lock().map(|c| c.names().into_iter().map(String::from).collect()).unwrap_or_default()
    }

    /// Loads (or takes from the cache) model `name`, warmed up.
    pub fn model(&self, name: &str) -> Result<Arc<LoadedModel>, FaceError> {
        if let Some(m) = self.cache.lock().map_err(|_| poisoned())?.get(name) {
            return Ok(m);
        }
        let loaded = Arc::new(self.load(name)?);
        let bytes = loaded.timings.file_bytes;
        let evicted = self.cache.lock().map_err(|_| poisoned())?.insert(name, loaded.clone(), bytes);
        for e in evicted {
            log::info!("model cache full: dropped `{e}`");
        }
        Ok(loaded)
    }

    fn load(&self, name: &str) -> Result<LoadedModel, FaceError> {
        let entry = self.catalog.entry(name)?.clone();
        let (rss_before, _) = rss();
        let t = Instant::now();
        let file = Arc::new(self.catalog.open_file(&entry)?);
        let map = t.elapsed();
        let file_bytes = file.len() as u64;
        let model = self.catalog.load_file(&entry, file, &input_shapes(&entry))?;
        let emap = match entry.contract {
            Contract::Inswapper => Some(Swapper::load_emap(&self.catalog, &entry)?),
            _ => None,
        };
        let t = Instant::now();
        let mut session = model.session().map_err(|source| FaceError::Infer { model: name.into(), source })?;
        let zeros: Vec<(String, Tensor)> =
            model.inputs().iter().map(|i| (i.name.clone(), Tensor::zeros(&i.shape))).collect();
        let refs: Vec<(&str, &Tensor)> = zeros.iter().map(|(n, t)| (n.as_str(), t)).collect();
        session.run(&refs).map_err(|source| FaceError::Infer { model: name.into(), source })?;
        let warmup = t.elapsed();
        let timings = ModelTimings {
            map,
            backend: model.load_phases(),
            warmup,
            file_bytes,
            rss_delta_bytes: rss().0 as i64 - rss_before as i64,
        };
        let p = &timings.backend;
        log::info!(
            "model `{name}`: map {:.1} ms, parse {:.1} ms, optimise {:.1} ms, plan {:.1} ms, warm-up {:.1} ms",
            ms(map),
            ms(p.parse),
            ms(p.optimize),
            ms(p.plan),
            ms(warmup)
        );
        Ok(LoadedModel { entry, model, emap, timings })
    }

    /// Loads every model of tier `name` (lazily, through the cache).
    pub fn tier(&self, name: &str) -> Result<TierModels, String> {
        let t = self.config.tier.iter().find(|t| t.name == name).ok_or_else(|| format!("no tier named `{name}`"))?;
        if let Some(status) = self.staged.as_ref().and_then(|s| s.tiers.iter().find(|s| s.name == name)) {
            if !status.usable {
                return Err(format!("staging marked it unusable: {}", status.reason.clone().unwrap_or_default()));
            }
        }
        if let Some(unknown) = t.models.iter().find(|m| self.catalog.entry(m).is_err()) {
            return Err(format!("model `{unknown}` is in no manifest"));
        }
        let optional = |kind: Kind| -> Result<Option<Arc<LoadedModel>>, String> {
            match t.models.iter().find(|m| self.catalog.entry(m).is_ok_and(|e| e.kind() == kind)) {
                Some(name) => self.model(name).map(Some).map_err(|e| e.to_string()),
                None => Ok(None),
            }
        };
        let role = |kind: Kind| optional(kind)?.ok_or_else(|| format!("it lists no {kind:?} model"));
        Ok(TierModels {
            tier: name.to_string(),
            detector: role(Kind::Detector)?,
            recognizer: role(Kind::Recognizer)?,
            swapper: role(Kind::Swapper)?,
            enhancer: optional(Kind::Enhancer)?,
        })
    }

    /// Loads tier `wanted`, or the highest tier below it that loads.
    pub fn activate(&self, wanted: &str) -> Result<TierOutcome, String> {
        let top = self.config.tier_index(wanted).ok_or_else(|| format!("no tier named `{wanted}`"))?;
        let mut reasons = Vec::new();
        for i in (0..=top).rev() {
            let name = &self.config.tier[i].name;
            match self.tier(name) {
                Ok(models) if i == top => return Ok(TierOutcome::Ready(models)),
                Ok(models) => {
                    let reason = reasons.join("; ");
                    log::warn!("degraded: running tier `{name}` instead of `{wanted}`: {reason}");
                    return Ok(TierOutcome::Degraded { wanted: wanted.into(), models, reason });
                }
                Err(e) => {
                    log::error!("tier `{name}` cannot load: {e}");
                    reasons.push(format!("tier `{name}`: {e}"));
                }
            }
        }
        Err(reasons.join("; "))
    }

    /// Loads the tier after `current` on a background thread, when the
    /// config asks for it.
    pub fn preload_next(self: &Arc<Self>, current: &str) -> Option<std::thread::JoinHandle<()>> {
        let next = self.config.tier.get(self.config.tier_index(current)? + 1)?.name.clone();
        if !self.config.models.preload_next {
            return None;
        }
        let store = self.clone();
        Some(std::thread::spawn(move || {
            if let Err(e) = store.tier(&next) {
                log::warn!("preloading tier `{next}` failed: {e}");
            }
        }))
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn poisoned() -> FaceError {
    FaceError::Contract { model: "cache".into(), message: "a poisoned lock after a panic".into() }
}
