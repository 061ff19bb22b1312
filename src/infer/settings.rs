//! What the engines are told: which engine runs which model, and the ONNX
//! Runtime options (providers, CUDA, TensorRT). These are the `[inference]`
//! section of the daemon's config as it is written; the config embeds them.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Most threads per model run a setting or flag may ask for.
pub const MAX_THREADS: usize = 256;

/// An inference engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    /// tract: pure Rust, in every build.
    Tract,
    /// ONNX Runtime, loaded at run time; needs a build with the `ort` feature.
    Ort,
    /// ONNX Runtime when this build has it and its library loads, else
    /// tract (a library that fails to load is then a warning).
    Auto,
}

/// The float precision a model's arithmetic runs in (`[[tier]] precision`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Deserialize, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// As the file says: f32 weights and activations.
    #[default]
    Fp32,
    /// tract converts the graph's f32 weights and activations to f16 (its
    /// `f32_to_f16` transform) and picks its FP16 kernels where the CPU has
    /// FP16 arithmetic (aarch64 `asimdhp`); elsewhere f16 is emulated.
    Fp16,
}

impl std::fmt::Display for Precision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Precision::Fp32 => "fp32",
            Precision::Fp16 => "fp16",
        })
    }
}

/// Where tract rounds an INT8 QDQ graph's activations to their 8-bit grids
/// (`inference.tract_int8_activations`; with `tract_fused_ops`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Int8Activations {
    /// `grid` where the CPU has an 8-bit dot product for the integer
    /// kernels, `float` elsewhere.
    #[default]
    Auto,
    /// Every quantise-dequantise pair runs, as the graph says.
    Grid,
    /// The pairs are left out: the INT8 weights with f32 activations, at
    /// FP32's cost.
    Float,
}

/// An ONNX Runtime execution provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    Tensorrt,
    Cuda,
    Cpu,
}

impl ProviderKind {
    pub fn is_gpu(self) -> bool {
        matches!(self, ProviderKind::Tensorrt | ProviderKind::Cuda)
    }

    pub fn name(self) -> &'static str {
        match self {
            ProviderKind::Tensorrt => "tensorrt",
            ProviderKind::Cuda => "cuda",
            ProviderKind::Cpu => "cpu",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct InferenceSettings {
    /// Engine of every model that `engines` does not name.
    pub engine: EngineKind,
    /// Engine per model name, overriding `engine`.
    pub engines: BTreeMap<String, EngineKind>,
    /// tract: threads per matrix product (1 runs on the calling thread).
    pub tract_threads: usize,
    /// tract: fusiond's one-pass kernels in place of tract's decompositions
    /// (PRelu); false runs tract's own ops.
    pub tract_fused_ops: bool,
    /// tract: where an INT8 graph's activations are rounded to their grids.
    pub tract_int8_activations: Int8Activations,
    pub ort: OrtSettings,
}

impl Default for InferenceSettings {
    fn default() -> Self {
        InferenceSettings {
            engine: EngineKind::Auto,
            engines: Default::default(),
            tract_threads: 1,
            tract_fused_ops: true,
            tract_int8_activations: Int8Activations::Auto,
            ort: Default::default(),
        }
    }
}

impl InferenceSettings {
    /// Whether some model may run on ONNX Runtime (named, or under `auto`).
    pub fn uses_ort(&self) -> bool {
        self.kinds().any(|e| e != EngineKind::Tract)
    }

    /// Whether some model must run on ONNX Runtime (named explicitly).
    pub fn requires_ort(&self) -> bool {
        self.kinds().any(|e| e == EngineKind::Ort)
    }

    fn kinds(&self) -> impl Iterator<Item = EngineKind> + '_ {
        std::iter::once(self.engine).chain(self.engines.values().copied())
    }

    /// Whether loading runs TensorRT's engine builder (minutes on a Jetson).
    pub fn builds_engines(&self) -> bool {
        self.uses_ort() && self.ort.providers.contains(&ProviderKind::Tensorrt)
    }

    /// The checks that need nothing outside this section.
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=MAX_THREADS).contains(&self.tract_threads) || !(1..=MAX_THREADS).contains(&self.ort.threads) {
            return Err(format!("inference: tract_threads and ort.threads must be 1 to {MAX_THREADS}"));
        }
        let t = &self.ort.tensorrt;
        if !(t.build_timeout_s > 0.0 && t.build_timeout_s.is_finite()) || t.build_attempts == 0 {
            return Err("inference.ort.tensorrt: build_timeout_s must be above 0 and build_attempts at least 1".into());
        }
        if self.ort.providers.is_empty() {
            return Err("inference.ort.providers is empty; list at least \"cpu\"".into());
        }
        Ok(())
    }
}

/// `inference.ort.library`'s default.
pub const DEFAULT_ORT_LIBRARY: &str = "/usr/lib/libonnxruntime.so";

/// Debian's multiarch library directory for this build's target.
const MULTIARCH: &str = if cfg!(target_arch = "x86_64") {
    "usr/lib/x86_64-linux-gnu"
} else if cfg!(target_arch = "aarch64") {
    "usr/lib/aarch64-linux-gnu"
} else if cfg!(target_arch = "arm") {
    "usr/lib/arm-linux-gnueabihf"
} else {
    "usr/lib"
};

/// The library to load for `configured` under `root` (`/` but in tests):
/// `configured` itself, unless it is the default and absent; then Debian's
/// multiarch directory (`libonnxruntime.so` of the -dev package, else the
/// newest `libonnxruntime.so.*` of the runtime package), then
/// `/usr/local/lib` (an upstream tarball), then `configured` again (whose
/// absence the engine reports).
pub fn find_ort_library(configured: &Path, root: &Path) -> PathBuf {
    let under = |p: &Path| root.join(p.strip_prefix("/").unwrap_or(p));
    if configured != Path::new(DEFAULT_ORT_LIBRARY) || under(configured).is_file() {
        return under(configured);
    }
    for dir in [MULTIARCH, "usr/local/lib"].map(|d| root.join(d)) {
        if dir.join("libonnxruntime.so").is_file() {
            return dir.join("libonnxruntime.so");
        }
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        let mut versioned: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("libonnxruntime.so.")))
            .collect();
        versioned.sort();
        if let Some(newest) = versioned.pop() {
            return newest;
        }
    }
    under(configured)
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct OrtSettings {
    /// The ONNX Runtime shared library (1.17 or newer), loaded at start.
    pub library: PathBuf,
    /// Execution providers in order of preference; the CPU provider always
    /// runs what the others do not take.
    pub providers: Vec<ProviderKind>,
    /// A provider that fails to register fails the model load, instead of
    /// falling back to the next provider (always logged and reported).
    pub error_on_failure: bool,
    /// CPU provider: threads per model run.
    pub threads: usize,
    /// CPU provider: the arena allocator (faster, keeps peak memory).
    pub arena: bool,
    /// With a GPU provider listed: let a model run on the CPU provider when
    /// no GPU provider registers, or let some of its nodes run there. False:
    /// such a model fails its load (so its tier fails loudly), and every
    /// model's first run is profiled to prove that no node ran on the CPU.
    pub cpu_fallback: bool,
    pub cuda: CudaSettings,
    pub tensorrt: TensorrtSettings,
}

impl Default for OrtSettings {
    fn default() -> Self {
        OrtSettings {
            library: PathBuf::from(DEFAULT_ORT_LIBRARY),
            providers: vec![ProviderKind::Cpu],
            error_on_failure: false,
            threads: 1,
            arena: true,
            cpu_fallback: false,
            cuda: CudaSettings::default(),
            tensorrt: TensorrtSettings::default(),
        }
    }
}

impl OrtSettings {
    /// Whether a GPU provider is listed and the CPU may not stand in for it.
    pub fn requires_gpu(&self) -> bool {
        !self.cpu_fallback && self.providers.iter().any(|p| p.is_gpu())
    }

    /// The library to load: `library`, or where Debian or an upstream
    /// tarball put it when `library` is left at its default and is absent
    /// ([`find_ort_library`]).
    pub fn library_path(&self) -> PathBuf {
        find_ort_library(&self.library, Path::new("/"))
    }

    /// The CPU provider only, with `threads` threads.
    pub fn cpu(library: PathBuf, threads: usize) -> Self {
        OrtSettings { library, threads: threads.max(1), ..OrtSettings::default() }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct CudaSettings {
    pub device_id: i32,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct TensorrtSettings {
    pub device_id: i32,
    pub fp16: bool,
    pub int8: bool,
    /// Engine and timing caches. Persistent storage (never the model
    /// ramdisk): building engines takes minutes on a Jetson.
    pub cache_dir: PathBuf,
    /// Builder workspace limit.
    pub max_workspace_mib: u64,
    /// With `fp16`: build FP32 too at first load and refuse FP16 for a model
    /// whose outputs drift from FP32 on fixed inputs.
    pub fp16_check: bool,
    /// Write an EP-context model after the first build and load it on later
    /// starts, skipping the builder (ONNX Runtime 1.17 or newer).
    pub ep_context: bool,
    /// `fusiond warm`: seconds one attempt at building every engine may take.
    pub build_timeout_s: f64,
    /// `fusiond warm`: attempts before it gives up (a builder that crashes
    /// or runs out of time gets another).
    pub build_attempts: u32,
}

impl Default for TensorrtSettings {
    fn default() -> Self {
        TensorrtSettings {
            device_id: 0,
            fp16: true,
            int8: false,
            cache_dir: PathBuf::from("/var/lib/fusiond/state/tensorrt"),
            max_workspace_mib: 1024,
            fp16_check: true,
            ep_context: true,
            build_timeout_s: 1800.0,
            build_attempts: 2,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_library_is_found_where_debian_or_a_tarball_puts_it() {
        let root = tempfile::tempdir().unwrap();
        let at = |p: &str| root.path().join(p);
        let default = Path::new(DEFAULT_ORT_LIBRARY);
        assert_eq!(find_ort_library(default, root.path()), at("usr/lib/libonnxruntime.so"), "nothing there");
        std::fs::create_dir_all(at("usr/local/lib")).unwrap();
        std::fs::write(at("usr/local/lib/libonnxruntime.so.1.20.0"), b"").unwrap();
        assert_eq!(find_ort_library(default, root.path()), at("usr/local/lib/libonnxruntime.so.1.20.0"));
        std::fs::create_dir_all(at(MULTIARCH)).unwrap();
        for v in ["1.19.2", "1.21.0"] {
            std::fs::write(at(&format!("{MULTIARCH}/libonnxruntime.so.{v}")), b"").unwrap();
        }
        let newest = at(&format!("{MULTIARCH}/libonnxruntime.so.1.21.0"));
        assert_eq!(find_ort_library(default, root.path()), newest, "Debian's runtime package, newest");
        std::fs::write(at(&format!("{MULTIARCH}/libonnxruntime.so")), b"").unwrap();
        assert_eq!(find_ort_library(default, root.path()), at(&format!("{MULTIARCH}/libonnxruntime.so")));
        // A path the config names is taken as it is, found or not.
        assert_eq!(find_ort_library(Path::new("/opt/ort/lib.so"), root.path()), at("opt/ort/lib.so"));
    }
}
