//! Models by quality tier: loaded through the [`Loader`] from the staged
//! ramdisk (or the persistent directories before staging), cached with LRU
//! bounds, and falling back to the tier below when a tier cannot load.

use super::cache::Cache;
use super::loader::{LoadedModel, Loader};
use super::stage::{StageReport, READY};
use super::StoreError;
use crate::catalog::Catalog;
use crate::config::Config;
use crate::infer::{Engines, Precision};
use crate::manifest::{Kind, ModelEntry};
use std::sync::{Arc, Mutex};

/// The models one tier runs on.
#[derive(Clone)]
pub struct TierModels {
    pub tier: String,
    pub detector: Arc<LoadedModel>,
    pub recognizer: Arc<LoadedModel>,
    pub swapper: Arc<LoadedModel>,
    pub enhancer: Option<Arc<LoadedModel>>,
    /// The 68-point landmarker the mouth mask needs, when the tier lists one.
    pub landmarker: Option<Arc<LoadedModel>>,
    /// The detector again at `pipeline.refine_size`, when set.
    pub refiner: Option<Arc<LoadedModel>>,
}

impl TierModels {
    pub fn all(&self) -> Vec<&Arc<LoadedModel>> {
        let mut all = vec![&self.detector, &self.recognizer, &self.swapper];
        all.extend(self.enhancer.as_ref());
        all.extend(self.landmarker.as_ref());
        all.extend(self.refiner.as_ref());
        all
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

impl TierOutcome {
    /// The models that run, and why they are not the ones asked for.
    pub fn into_parts(self) -> (TierModels, Option<String>) {
        match self {
            TierOutcome::Ready(m) => (m, None),
            TierOutcome::Degraded { models, reason, .. } => (models, Some(reason)),
        }
    }
}

pub struct Store {
    loader: Loader,
    config: Config,
    staged: Option<StageReport>,
    cache: Mutex<Cache<LoadedModel>>,
}

impl Store {
    /// Opens the staged ramdisk when staging finished (its `.ready` marker is
    /// there); otherwise loads straight from the persistent directories.
    pub fn open(config: &Config, engines: impl Into<Engines>) -> Result<Store, StoreError> {
        let ramdisk = &config.models.ramdisk;
        let staged = if ramdisk.join(READY).is_file() { StageReport::read(ramdisk) } else { None };
        let mut catalog = match &staged {
            Some(_) => Catalog::open(std::slice::from_ref(ramdisk))?,
            None => {
                log::warn!("{} holds no staged models; loading from {:?}", ramdisk.display(), config.models.dirs);
                Catalog::open(&config.models.dirs)?
            }
        };
        catalog.set_verify(staged.is_none() || config.models.verify_on_load);
        let cache = Cache::new(config.models.cache_max_models, config.models.cache_max_mib * 1024 * 1024);
        let loader = Loader::new(catalog, engines).with_cache(Some(config.pipeline.state_dir.join("cache")));
        Ok(Store { loader, config: config.clone(), staged, cache: Mutex::new(cache) })
    }

    /// Names of the cached models, least recently used first.
    pub fn cached(&self) -> Vec<String> {
        self.cache.lock().map(|c| c.names().into_iter().map(String::from).collect()).unwrap_or_default()
    }

    /// Loads (or takes from the cache) model `name`, warmed up.
    pub fn model(&self, name: &str) -> Result<Arc<LoadedModel>, StoreError> {
        self.variant(name, None, Precision::Fp32)
    }

    /// Model `name` at input `size` when given (a resizable detector) and
    /// at `precision`, each variant cached apart.
    pub fn variant(
        &self,
        name: &str,
        size: Option<[u32; 2]>,
        precision: Precision,
    ) -> Result<Arc<LoadedModel>, StoreError> {
        let mut key = name.to_string();
        if let Some([w, h]) = size {
            key += &format!("@{w}x{h}");
        }
        if precision != Precision::Fp32 {
            key += &format!(":{precision}");
        }
        if let Some(m) = self.cache.lock().map_err(|_| StoreError::Poisoned)?.get(&key) {
            return Ok(m);
        }
        let entry = self.loader.catalog().entry(name)?;
        let entry = match size {
            Some(size) => {
                entry.resized(size).map_err(|message| StoreError::Contract { model: name.into(), message })?
            }
            None => entry.clone(),
        };
        self.cached_load(&key, entry, precision)
    }

    fn cached_load(&self, name: &str, entry: ModelEntry, precision: Precision) -> Result<Arc<LoadedModel>, StoreError> {
        let loaded = Arc::new(self.loader.load_as(&entry, precision)?);
        log::info!("{}", loaded.timings.describe(name));
        let bytes = loaded.timings.file_bytes;
        let evicted = self.cache.lock().map_err(|_| StoreError::Poisoned)?.insert(name, loaded.clone(), bytes);
        for e in evicted {
            log::info!("model cache full: dropped `{e}`");
        }
        Ok(loaded)
    }

    /// Loads every model of tier `name` (lazily, through the cache).
    pub fn tier(&self, name: &str) -> Result<TierModels, String> {
        let t = self.config.tier.iter().find(|t| t.name == name).ok_or_else(|| format!("no tier named `{name}`"))?;
        if let Some(status) = self.staged.as_ref().and_then(|s| s.tiers.iter().find(|s| s.name == name)) {
            if !status.usable {
                return Err(format!("staging marked it unusable: {}", status.reason.clone().unwrap_or_default()));
            }
        }
        let catalog = self.loader.catalog();
        if let Some(unknown) = t.models.iter().find(|m| catalog.entry(m).is_err()) {
            return Err(format!("model `{unknown}` is in no manifest"));
        }
        let entry_of = |kind: Kind| t.models.iter().find_map(|m| catalog.entry(m).ok().filter(|e| e.kind() == kind));
        let missing = |kind: Kind| format!("it lists no {kind:?} model");
        let optional = |kind: Kind| -> Result<Option<Arc<LoadedModel>>, String> {
            entry_of(kind).map(|e| self.variant(&e.name, None, t.precision).map_err(|e| e.to_string())).transpose()
        };
        let role = |kind: Kind| optional(kind)?.ok_or_else(|| missing(kind));
        let detector = entry_of(Kind::Detector).ok_or_else(|| missing(Kind::Detector))?;
        let detector = self.detector(detector, t.precision)?;
        let refiner = match self.config.pipeline.refine_size {
            0 => None,
            _ if !detector.entry.resizable => {
                let d = &detector.entry.name;
                log::info!("tier `{name}`: detector `{d}` has a fixed input, so tracks are predicted between detections, not refined");
                None
            }
            n => Some(self.variant(&detector.entry.name, Some([n, n]), t.precision).map_err(|e| e.to_string())?),
        };
        Ok(TierModels {
            tier: name.to_string(),
            refiner,
            detector,
            recognizer: role(Kind::Recognizer)?,
            swapper: role(Kind::Swapper)?,
            enhancer: optional(Kind::Enhancer)?,
            landmarker: optional(Kind::Landmarker)?,
        })
    }

    /// Detector `entry`, fitted to the camera's frame when
    /// `pipeline.fit_detector` is on and it is resizable.
    fn detector(&self, entry: &ModelEntry, precision: Precision) -> Result<Arc<LoadedModel>, String> {
        let camera = [self.config.camera.width, self.config.camera.height];
        let size = entry.fitted(camera).input_size;
        let fit = self.config.pipeline.fit_detector && size != entry.input_size;
        self.variant(&entry.name, fit.then_some(size), precision).map_err(|e| e.to_string())
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

    /// Loads the tier after `current` on a background thread, when
    /// `models.preload_next` asks for it, so a switch up finds it cached.
    pub fn preload_next(self: &Arc<Self>, current: &str) -> Option<std::thread::JoinHandle<()>> {
        if !self.config.models.preload_next {
            return None;
        }
        let next = self.config.tier.get(self.config.tier_index(current)? + 1)?.name.clone();
        let store = self.clone();
        let spawned = std::thread::Builder::new().name("preload".into()).spawn(move || match store.tier(&next) {
            Ok(_) => log::info!("preloaded tier `{next}`"),
            Err(e) => log::warn!("preloading tier `{next}` failed: {e}"),
        });
        spawned.map_err(|e| log::warn!("cannot start preloading: {e}")).ok()
    }
}
