//! Loading one model: map and verify its file (the catalog), load it on the
//! engine the config gives it, read its emap, warm it once and check its
//! outputs against the manifest, with every phase timed.

use super::{emap, StoreError};
use crate::catalog::Catalog;
use crate::infer::{Engines, InputShape, LoadPhases, Model, Precision, Tensor};
use crate::manifest::{Contract, Kind, ModelEntry};
use crate::procmem::rss;
use serde::Serialize;
use std::path::PathBuf;
use std::sync::Arc;
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

/// A model ready to run: its entry, the engine's shared plan, its emap
/// (inswapper only) and what loading it cost.
pub struct LoadedModel {
    pub entry: ModelEntry,
    pub model: Arc<dyn Model>,
    pub emap: Option<Tensor>,
    pub timings: ModelTimings,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Bytes as whole MB, or "?" where the engine did not say.
fn mb(bytes: u64) -> String {
    if bytes == 0 {
        "?".into()
    } else {
        format!("{}", bytes / 1_000_000)
    }
}

/// A mapped model file releases the pages a parser has passed.
impl crate::infer::ModelData for crate::catalog::ModelFile {
    fn release(&self, range: std::ops::Range<usize>) {
        self.release_pages(range);
    }
}

impl ModelTimings {
    /// One line for the log: where loading `name` spent its time.
    pub fn describe(&self, name: &str) -> String {
        let p = &self.backend;
        format!(
            "model `{name}`: map {:.1} ms, parse {:.1} ms, optimise {:.1} ms, plan {:.1} ms, {}; \
             resident after parse {}, import {} (peak {}), optimise {} MB, peak {} MB",
            ms(self.map),
            ms(p.parse),
            ms(p.optimize),
            ms(p.plan),
            if self.warmup.is_zero() { "no warm-up".to_string() } else { format!("warm-up {:.1} ms", ms(self.warmup)) },
            mb(p.resident.parse),
            mb(p.resident.import),
            mb(p.resident.import_peak),
            mb(p.resident.optimize),
            mb(p.resident.peak),
        )
    }
}

/// Finds models through a catalog and loads them on their engines.
pub struct Loader {
    catalog: Catalog,
    engines: Engines,
    /// Where emaps read from graphs are cached (`emap::load_emap`).
    cache: Option<PathBuf>,
    /// Whether every model is run once on zeros after loading.
    warm_up: bool,
    /// The precision [`Loader::load`] loads at (`--precision`).
    precision: Precision,
}

impl Loader {
    pub fn new(catalog: Catalog, engines: impl Into<Engines>) -> Loader {
        Loader { catalog, engines: engines.into(), cache: None, warm_up: true, precision: Precision::Fp32 }
    }

    /// The same loader, loading at `precision` unless told otherwise
    /// ([`Loader::load_as`]).
    pub fn with_precision(self, precision: Precision) -> Loader {
        Loader { precision, ..self }
    }

    /// The same loader without the warm-up run, for a command that runs
    /// each model once or twice, where it would be one run more (the
    /// inswapper-size swap: a third of the two-face swap's compute). A
    /// recogniser is still run once: its output length is checked there.
    pub fn without_warm_up(self) -> Loader {
        Loader { warm_up: false, ..self }
    }

    /// The same loader, caching what it reads out of graphs under `dir`.
    pub fn with_cache(self, dir: Option<PathBuf>) -> Loader {
        Loader { cache: dir, ..self }
    }

    /// A loader over the manifests of `dirs`.
    pub fn open(dirs: &[PathBuf], engines: impl Into<Engines>) -> Result<Loader, StoreError> {
        Ok(Loader::new(Catalog::open(dirs)?, engines))
    }

    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    pub fn engines(&self) -> &Engines {
        &self.engines
    }

    /// Verifies and maps `entry`'s file and loads it on its engine with the
    /// given fixed input shapes; no emap, no warm-up.
    pub fn load_with(&self, entry: &ModelEntry, inputs: &[InputShape]) -> Result<Arc<dyn Model>, StoreError> {
        let file = Arc::new(self.catalog.open_file(entry)?);
        self.on_engine(entry, file, inputs, self.precision)
    }

    fn on_engine(
        &self,
        entry: &ModelEntry,
        file: Arc<crate::catalog::ModelFile>,
        inputs: &[InputShape],
        precision: Precision,
    ) -> Result<Arc<dyn Model>, StoreError> {
        let path = file.path.clone();
        let backend = self.engines.for_model(&entry.name);
        let loaded = backend.load(file, inputs, precision);
        loaded.map_err(|source| StoreError::Load { name: entry.name.clone(), path, source })
    }

    /// Model `name` (checked to be of `kind`), or the first of `kind` whose
    /// file is present, loaded and warmed.
    pub fn pick(&self, name: Option<&str>, kind: Kind) -> Result<LoadedModel, StoreError> {
        let entry = self.catalog.pick(name, kind)?.clone();
        self.load(&entry)
    }

    /// Loads `entry` on its contract's input shapes, with its emap, warmed
    /// once and checked against the manifest.
    pub fn load(&self, entry: &ModelEntry) -> Result<LoadedModel, StoreError> {
        self.load_as(entry, self.precision)
    }

    /// [`Loader::load`] at `precision`.
    pub fn load_as(&self, entry: &ModelEntry, precision: Precision) -> Result<LoadedModel, StoreError> {
        let (rss_before, _) = rss();
        let t = Instant::now();
        let file = Arc::new(self.catalog.open_file(entry)?);
        let map = t.elapsed();
        let file_bytes = file.len() as u64;
        // The emap first, from the mapped bytes (one walk, no copy of the
        // weights), so that reading it adds nothing to the load's peak.
        let emap = match entry.contract {
            Contract::Inswapper => Some(emap::load_emap(&self.catalog, entry, self.cache.as_deref(), &file)?),
            _ => None,
        };
        let model = self.on_engine(entry, file, &entry.input_shapes(), precision)?;
        let warms = self.warm_up || entry.embedding_len.is_some();
        let t = Instant::now();
        if warms {
            warm(entry, &*model)?;
        }
        let warmup = if warms { t.elapsed() } else { Duration::ZERO };
        let timings = ModelTimings {
            map,
            backend: model.load_phases(),
            warmup,
            file_bytes,
            rss_delta_bytes: rss().0 as i64 - rss_before as i64,
        };
        log::debug!("{}", timings.describe(&entry.name));
        Ok(LoadedModel { entry: entry.clone(), model, emap, timings })
    }
}

/// One run on zero inputs; a recogniser's output must have the manifest's
/// `embedding_len` values, or every identity it computes would be refused
/// later (or worse, mixed with identities of another length).
fn warm(entry: &ModelEntry, model: &dyn Model) -> Result<(), StoreError> {
    let infer = |source| StoreError::Infer { model: entry.name.clone(), source };
    let mut session = model.session().map_err(infer)?;
    let zeros: Vec<(String, Tensor)> =
        model.inputs().iter().map(|i| (i.name.clone(), Tensor::zeros(&i.shape))).collect();
    let refs: Vec<(&str, &Tensor)> = zeros.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let outputs = session.run(&refs).map_err(infer)?;
    if let Some(want) = entry.embedding_len {
        let got = outputs.iter().next().map(|(_, t)| t.len()).unwrap_or(0);
        if got != want {
            return Err(StoreError::Contract {
                model: entry.name.clone(),
                message: format!(
                    "its output has {got} values but the manifest says the embedding has {want}; use an \
                     ArcFace-style recogniser with {want}-d output or fix embedding_len"
                ),
            });
        }
    }
    Ok(())
}
