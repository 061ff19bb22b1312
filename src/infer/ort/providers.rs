//! The execution providers an ONNX Runtime session gets, in the configured
//! order (`inference.ort.providers`), and what became of each.

use super::super::{InferError, InputSpec, OrtSettings, ProviderFailure, ProviderKind, Result};
use ort::ep::{self, ExecutionProviderDispatch};
use ort::session::builder::SessionBuilder;

fn provider(
    settings: &OrtSettings,
    kind: ProviderKind,
    inputs: &[InputSpec],
) -> std::result::Result<ExecutionProviderDispatch, String> {
    Ok(match kind {
        ProviderKind::Cpu => ep::CPU::default().with_arena_allocator(settings.arena).build(),
        ProviderKind::Cuda => ep::CUDA::default().with_device_id(settings.cuda.device_id).build(),
        ProviderKind::Tensorrt => {
            let t = &settings.tensorrt;
            std::fs::create_dir_all(&t.cache_dir)
                .map_err(|e| format!("cannot create the engine cache {}: {e}", t.cache_dir.display()))?;
            let cache = t.cache_dir.display().to_string();
            // Inputs are fixed at load, so one optimisation profile with
            // min = opt = max serves them.
            let shapes = inputs
                .iter()
                .map(|i| {
                    let dims: Vec<String> = i.shape.iter().map(usize::to_string).collect();
                    format!("{}:{}", i.name, dims.join("x"))
                })
                .collect::<Vec<_>>()
                .join(",");
            ep::TensorRT::default()
                .with_device_id(t.device_id)
                .with_fp16(t.fp16)
                .with_int8(t.int8)
                .with_max_workspace_size((t.max_workspace_mib as usize) << 20)
                .with_engine_cache(true)
                .with_engine_cache_path(&cache)
                .with_timing_cache(true)
                .with_timing_cache_path(&cache)
                .with_profile_min_shapes(&shapes)
                .with_profile_opt_shapes(&shapes)
                .with_profile_max_shapes(&shapes)
                .build()
        }
    })
}

/// Registers the configured providers in order. Failures are collected;
/// with `error_on_failure` the first one ends the load.
pub(super) fn register(
    settings: &OrtSettings,
    builder: &mut SessionBuilder,
    inputs: &[InputSpec],
) -> Result<(Vec<String>, Vec<ProviderFailure>)> {
    let mut used = Vec::new();
    let mut failed = Vec::new();
    for &kind in &settings.providers {
        let name = kind.name();
        match provider(settings, kind, inputs).and_then(|p| p.register(builder).map_err(|e| e.to_string())) {
            Ok(()) => used.push(name.to_string()),
            Err(error) if settings.error_on_failure => {
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
    if !used.iter().any(|u| u == "cpu") {
        used.push("cpu".into());
    }
    Ok((used, failed))
}
