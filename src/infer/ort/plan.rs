//! How one session of a model is built: the precision TensorRT builds it
//! in, the key folder of its engines (none when the box cannot say what
//! its GPU and libraries are, since an engine cached under an unknown key
//! could be loaded on a box it was not built for), whether an EP-context
//! model is written or read, and whether the run is profiled.

use super::super::{InputSpec, OrtSettings, ProviderKind};
use super::engine_cache::{EngineDir, EngineKey};
use super::gpu::{self, GpuIdentity, Toolkit};
use super::options::{self, OrtVersion};
use sha2::{Digest, Sha256};
use std::path::PathBuf;

#[derive(Debug, Clone, Default)]
pub(super) struct BuildPlan {
    /// TensorRT builds FP16 kernels where faster.
    pub fp16: bool,
    /// The key folder of the engine and timing caches.
    pub engines: Option<EngineDir>,
    /// TensorRT writes an EP-context model into `engines` after its build.
    pub dump_context: bool,
    /// An EP-context model of an earlier build, loaded instead of the model.
    pub context: Option<PathBuf>,
    /// ONNX Runtime's profiler writes this session's runs here (prefix).
    pub profile_to: Option<PathBuf>,
}

/// What the engine cache's key needs to know of the box, probed once when
/// the ONNX Runtime engine starts with TensorRT listed.
#[derive(Debug, Clone, Default)]
pub(super) struct BoxIdentity {
    pub version: Option<OrtVersion>,
    pub gpu: Option<GpuIdentity>,
    pub toolkit: Toolkit,
}

impl BoxIdentity {
    pub fn probe(settings: &OrtSettings, version: Option<OrtVersion>) -> BoxIdentity {
        if !settings.providers.contains(&ProviderKind::Tensorrt) {
            return BoxIdentity { version, ..BoxIdentity::default() };
        }
        let gpu = gpu::probe(settings.tensorrt.device_id);
        let toolkit = gpu::toolkit(&gpu::library_dirs(&settings.library));
        log::info!(
            "TensorRT engine cache key: GPU {}, TensorRT {}, CUDA {}, ONNX Runtime {}",
            gpu.as_ref().map_or("unknown".into(), |g| format!("{} (compute {})", g.name, g.compute_capability)),
            toolkit.tensorrt.as_deref().unwrap_or("unknown"),
            toolkit.cuda.as_deref().unwrap_or("unknown"),
            version.map_or("unknown".into(), |v| v.to_string()),
        );
        BoxIdentity { version, gpu, toolkit }
    }

    /// The key of `raw` built at `precision` for `inputs`, or why there is none.
    pub fn key(&self, raw: &[u8], inputs: &[InputSpec], precision: String) -> Result<EngineKey, String> {
        let unknown = |what: &str| format!("cannot tell the {what}");
        let gpu = self.gpu.as_ref().ok_or_else(|| unknown("GPU (no nvidia-smi, not a Jetson)"))?;
        let tensorrt = self.toolkit.tensorrt.clone().ok_or_else(|| unknown("TensorRT version (no libnvinfer.so.N)"))?;
        let cuda = self.toolkit.cuda.clone().ok_or_else(|| unknown("CUDA version (no libcudart.so.N)"))?;
        let version = self.version.ok_or_else(|| unknown("ONNX Runtime version"))?;
        Ok(EngineKey {
            gpu: gpu.name.clone(),
            compute_capability: gpu.compute_capability.clone(),
            tensorrt,
            cuda,
            onnxruntime: version.to_string(),
            model_sha256: Sha256::digest(raw).iter().map(|b| format!("{b:02x}")).collect(),
            precision,
            inputs: inputs.iter().map(|i| format!("{}:{:?}", i.name, i.shape)).collect(),
        })
    }
}

/// The plan of the first build of `raw` at `fp16`: with TensorRT listed,
/// its key folder, and the EP-context model to read or to write.
pub(super) fn first_build(
    settings: &OrtSettings,
    identity: &BoxIdentity,
    raw: &[u8],
    inputs: &[InputSpec],
    fp16: bool,
) -> BuildPlan {
    if !settings.providers.contains(&ProviderKind::Tensorrt) {
        return BuildPlan::default();
    }
    let precision = EngineKey::precision(fp16, settings.tensorrt.int8);
    let engines = identity
        .key(raw, inputs, precision)
        .and_then(|key| EngineDir::prepare(&settings.tensorrt.cache_dir, &key).map_err(|e| e.to_string()))
        .map_err(|why| log::warn!("TensorRT engines are not cached ({why}); every start builds them anew"))
        .ok();
    let version = identity.version.unwrap_or(OrtVersion::FLOOR);
    let ep_context = settings.tensorrt.ep_context && options::has_ep_context(version) && engines.is_some();
    let context = engines.as_ref().filter(|_| ep_context).and_then(EngineDir::built_context);
    let dump_context = ep_context && context.is_none();
    BuildPlan { fp16, engines, dump_context, context, profile_to: None }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity(version: Option<OrtVersion>) -> BoxIdentity {
        BoxIdentity {
            version,
            gpu: Some(GpuIdentity { name: "NVIDIA H200".into(), compute_capability: "9.0".into() }),
            toolkit: Toolkit { tensorrt: Some("10.3.0".into()), cuda: Some("13.0.48".into()) },
        }
    }

    fn trt(cache: &std::path::Path) -> OrtSettings {
        let mut s = OrtSettings { providers: vec![ProviderKind::Tensorrt, ProviderKind::Cuda], ..Default::default() };
        s.tensorrt.cache_dir = cache.to_path_buf();
        s
    }

    #[test]
    fn the_first_start_writes_the_context_model_and_the_next_reads_it() {
        let cache = tempfile::tempdir().unwrap();
        let s = trt(cache.path());
        let id = identity(Some(OrtVersion(1, 20, 1)));
        let first = first_build(&s, &id, b"model", &[], true);
        assert!(first.dump_context && first.context.is_none());
        let dir = first.engines.unwrap();
        std::fs::write(dir.context_model(), b"engine").unwrap();
        let next = first_build(&s, &id, b"model", &[], true);
        assert!(!next.dump_context && next.context == Some(dir.context_model()));
        let fp32 = first_build(&s, &id, b"model", &[], false);
        assert!(fp32.dump_context && fp32.engines.unwrap().engines != dir.engines);
        let other_model = first_build(&s, &id, b"other", &[], true);
        assert!(other_model.context.is_none());
    }

    #[test]
    fn an_unknown_gpu_or_an_old_library_builds_without_a_cache_or_context() {
        let cache = tempfile::tempdir().unwrap();
        let s = trt(cache.path());
        let mut unknown = identity(Some(OrtVersion(1, 20, 1)));
        unknown.gpu = None;
        let p = first_build(&s, &unknown, b"model", &[], true);
        assert!(p.engines.is_none() && !p.dump_context);
        let err = unknown.key(b"m", &[], "fp16".into()).unwrap_err();
        assert!(err.contains("GPU"), "{err}");
        let old = first_build(&s, &identity(Some(OrtVersion(1, 16, 3))), b"model", &[], true);
        assert!(old.engines.is_some() && !old.dump_context && old.context.is_none());
        let cpu = OrtSettings::default();
        assert!(first_build(&cpu, &identity(None), b"model", &[], true).engines.is_none());
    }
}
