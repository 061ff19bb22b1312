//! The execution providers an ONNX Runtime session gets, in the configured
//! order (`inference.ort.providers`), and what became of each. Every option
//! is set by its key, after [`super::options`] has left out the keys the
//! loaded library does not know.

use super::super::{InferError, InputSpec, OrtSettings, ProviderFailure, ProviderKind, Result};
use super::options::{self, Options, OrtVersion};
use super::plan::BuildPlan;
use ort::ep::{self, ArbitrarilyConfigurableExecutionProvider, ExecutionProviderDispatch};
use ort::session::builder::SessionBuilder;

/// What one session build registers providers for.
pub(super) struct Registration<'a> {
    pub settings: &'a OrtSettings,
    pub version: OrtVersion,
    /// The inputs, fixed at load: TensorRT's one shape profile.
    pub inputs: &'a [InputSpec],
    pub plan: &'a BuildPlan,
}

fn bool_opt(v: bool) -> String {
    if v { "1" } else { "0" }.to_string()
}

/// TensorRT's options: precision, workspace, the shape profile (inputs are
/// fixed at load, so min = opt = max) and, where the plan has a key folder,
/// the engine and timing caches and the EP-context model.
fn tensorrt_options(r: &Registration) -> Options {
    let t = &r.settings.tensorrt;
    let shapes = r
        .inputs
        .iter()
        .map(|i| {
            let dims: Vec<String> = i.shape.iter().map(usize::to_string).collect();
            format!("{}:{}", i.name, dims.join("x"))
        })
        .collect::<Vec<_>>()
        .join(",");
    let mut o: Options = vec![
        ("device_id", t.device_id.to_string()),
        ("trt_fp16_enable", bool_opt(r.plan.fp16)),
        ("trt_int8_enable", bool_opt(t.int8)),
        ("trt_max_workspace_size", ((t.max_workspace_mib as usize) << 20).to_string()),
    ];
    if !shapes.is_empty() {
        o.extend([
            ("trt_profile_min_shapes", shapes.clone()),
            ("trt_profile_opt_shapes", shapes.clone()),
            ("trt_profile_max_shapes", shapes),
        ]);
    }
    match &r.plan.engines {
        Some(dir) => {
            o.extend([
                ("trt_engine_cache_enable", "1".to_string()),
                ("trt_engine_cache_path", dir.engines.display().to_string()),
                ("trt_timing_cache_enable", "1".to_string()),
                ("trt_timing_cache_path", dir.timing.display().to_string()),
            ]);
            if r.plan.dump_context {
                o.extend([
                    ("trt_dump_ep_context_model", "1".to_string()),
                    ("trt_ep_context_file_path", dir.context_model().display().to_string()),
                    ("trt_ep_context_embed_mode", "1".to_string()),
                ]);
            }
        }
        None => o.push(("trt_engine_cache_enable", "0".to_string())),
    }
    o
}

fn cuda_options(r: &Registration) -> Options {
    vec![("device_id", r.settings.cuda.device_id.to_string())]
}

/// `opts` filtered for the library, each key left out logged.
fn known(kind: ProviderKind, r: &Registration, opts: Options) -> Options {
    let (kept, dropped) = match kind {
        ProviderKind::Tensorrt => options::tensorrt(r.version, opts),
        _ => options::cuda(r.version, opts),
    };
    if !dropped.is_empty() {
        log::warn!(
            "ONNX Runtime {}: left out the {} options it does not know: {}",
            r.version,
            kind.name(),
            dropped.join(", ")
        );
    }
    kept
}

fn with_options<E: ArbitrarilyConfigurableExecutionProvider>(mut ep: E, opts: Options) -> E {
    for (key, value) in opts {
        ep = ep.with_arbitrary_config(key, value);
    }
    ep
}

fn provider(r: &Registration, kind: ProviderKind) -> std::result::Result<ExecutionProviderDispatch, String> {
    Ok(match kind {
        ProviderKind::Cpu => ep::CPU::default().with_arena_allocator(r.settings.arena).build(),
        ProviderKind::Cuda => with_options(ep::CUDA::default(), known(kind, r, cuda_options(r))).build(),
        ProviderKind::Tensorrt => {
            if let Some(dir) = &r.plan.engines {
                std::fs::create_dir_all(&dir.engines)
                    .map_err(|e| format!("cannot create the engine cache {}: {e}", dir.engines.display()))?;
            }
            with_options(ep::TensorRT::default(), known(kind, r, tensorrt_options(r))).build()
        }
    })
}

/// Registers the configured providers in order. Failures are collected;
/// with `error_on_failure` the first one ends the load, and where the CPU
/// may not stand in for the GPU (`requires_gpu`) a build on which no GPU
/// provider registered ends it too.
pub(super) fn register(r: &Registration, builder: &mut SessionBuilder) -> Result<(Vec<String>, Vec<ProviderFailure>)> {
    let mut used = Vec::new();
    let mut failed = Vec::new();
    for &kind in &r.settings.providers {
        let name = kind.name();
        match provider(r, kind).and_then(|p| p.register(builder).map_err(|e| e.to_string())) {
            Ok(()) => used.push(name.to_string()),
            Err(error) if r.settings.error_on_failure => {
                return Err(InferError::Load(format!(
                    "execution provider {name} failed to register: {error}; it is required because \
                     inference.ort.error_on_failure is set (unset it to fall back to the next provider)"
                )));
            }
            Err(error) => {
                log::error!("ONNX Runtime execution provider {name} failed to register: {error}");
                failed.push(ProviderFailure { provider: name.to_string(), error });
            }
        }
    }
    let on_gpu = r.settings.providers.iter().any(|k| k.is_gpu() && used.iter().any(|u| u == k.name()));
    if r.settings.requires_gpu() && !on_gpu {
        let why: Vec<String> = failed.iter().map(|f| format!("{}: {}", f.provider, f.error)).collect();
        return Err(InferError::Placement(format!(
            "no GPU execution provider registered ({}), and inference.ort.cpu_fallback is false, so the model \
             does not run on the CPU instead; install ONNX Runtime with CUDA/TensorRT and their libraries \
             (docs/engines.md), or set cpu_fallback = true",
            why.join("; ")
        )));
    }
    if !used.iter().any(|u| u == "cpu") {
        used.push("cpu".into());
    }
    Ok((used, failed))
}

#[cfg(test)]
mod tests {
    use super::super::engine_cache::EngineDir;
    use super::*;
    use std::path::PathBuf;

    fn plan(engines: Option<EngineDir>, dump_context: bool) -> BuildPlan {
        BuildPlan { fp16: true, engines, dump_context, context: None, profile_to: None }
    }

    fn keys(o: &Options) -> Vec<&'static str> {
        o.iter().map(|(k, _)| *k).collect()
    }

    #[test]
    fn tensorrt_gets_the_key_folders_caches_and_the_context_model_only_with_a_folder() {
        let settings = OrtSettings::default();
        let inputs = [InputSpec { name: "input".into(), shape: vec![1, 3, 640, 640] }];
        let dir =
            EngineDir { engines: PathBuf::from("/s/engines/ab"), timing: PathBuf::from("/s/timing/cd"), fresh: true };
        let p = plan(Some(dir), true);
        let r = Registration { settings: &settings, version: OrtVersion(1, 20, 0), inputs: &inputs, plan: &p };
        let o = tensorrt_options(&r);
        let get = |k: &str| o.iter().find(|(key, _)| *key == k).map(|(_, v)| v.as_str());
        assert_eq!(get("trt_profile_opt_shapes"), Some("input:1x3x640x640"));
        assert_eq!(get("trt_engine_cache_path"), Some("/s/engines/ab"));
        assert_eq!(get("trt_timing_cache_path"), Some("/s/timing/cd"));
        assert_eq!(get("trt_ep_context_file_path"), Some("/s/engines/ab/model_ctx.onnx"));
        assert_eq!(get("trt_fp16_enable"), Some("1"));
        let uncached = plan(None, false);
        let r = Registration { plan: &uncached, ..r };
        let o = tensorrt_options(&r);
        assert!(keys(&o).contains(&"trt_engine_cache_enable") && !keys(&o).contains(&"trt_engine_cache_path"));
        assert!(!keys(&o).iter().any(|k| k.contains("ep_context") || k.contains("timing")));
    }

    #[test]
    fn an_older_library_gets_no_ep_context_keys() {
        let settings = OrtSettings::default();
        let dir = EngineDir { engines: PathBuf::from("/e"), timing: PathBuf::from("/t"), fresh: true };
        let p = plan(Some(dir), true);
        let r = Registration { settings: &settings, version: OrtVersion(1, 16, 0), inputs: &[], plan: &p };
        let kept = known(ProviderKind::Tensorrt, &r, tensorrt_options(&r));
        assert!(keys(&kept).contains(&"trt_timing_cache_path"));
        assert!(!keys(&kept).iter().any(|k| k.contains("ep_context")));
    }
}
