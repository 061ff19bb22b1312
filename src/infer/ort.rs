//! ONNX Runtime backend (cargo feature `ort`). The library is opened at run
//! time (`inference.ort.library`), so the binary builds offline and runs on
//! whatever ONNX Runtime the box has: the CPU build, or CUDA and TensorRT on
//! a Jetson. Any ONNX Runtime 1.17 or newer works: no `api-N` feature of the
//! `ort` crate is enabled, and 1.17 is what it needs without one.
//!
//! Execution providers are registered one by one in the configured order;
//! each failure is kept on the model's [`Placement`] (and logged), so the
//! daemon can report it instead of falling back to the CPU in silence.
//!
//! ONNX Runtime runs a session on one thread at a time, so every thread gets
//! a session of its own: [`Model::session`] takes an idle one from the
//! model's pool or builds a new one from the same bytes and options, and a
//! finished session goes back to the pool. Threads never wait on each other.

use super::{
    fed, fix_input_shapes, Backend, InferError, InputShape, InputSpec, LoadPhases, Model, ModelBytes, Outputs,
    Placement, ProviderFailure, Result, Session, Tensor,
};
use super::{OrtSettings, Precision, ProviderKind};
use options::OrtVersion;
use ort::environment::Environment;
use ort::session::{Session as OrtSession, SessionInputValue};
use ort::value::{TensorElementType, TensorRef, ValueType};
use plan::{BoxIdentity, BuildPlan};
use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

mod build;
mod engine_cache;
mod fp16;
mod gpu;
mod options;
mod plan;
mod proof;
mod providers;
mod verify;

/// One ONNX Runtime environment per process (the library allows no more),
/// and one library: the first one opened successfully.
static ENVIRONMENT: Mutex<Option<(PathBuf, Environment)>> = Mutex::new(None);

fn environment(library: &Path) -> Result<Environment> {
    let mut slot = ENVIRONMENT.lock().map_err(|_| InferError::Engine("ONNX Runtime setup panicked earlier".into()))?;
    if let Some((loaded, env)) = slot.as_ref() {
        if loaded != library {
            return Err(InferError::Engine(format!(
                "ONNX Runtime is already loaded from {}; a process can use only one library, not also {}",
                loaded.display(),
                library.display()
            )));
        }
        return Ok(env.clone());
    }
    if !library.is_file() {
        return Err(InferError::Engine(format!(
            "ONNX Runtime library {} does not exist; install ONNX Runtime 1.17 or newer and set \
             inference.ort.library to its libonnxruntime.so",
            library.display()
        )));
    }
    let env = ort::init_from(library)
        .map_err(|e| {
            InferError::Engine(format!(
                "{e}; inference.ort.library must be libonnxruntime.so of ONNX Runtime 1.17 or newer"
            ))
        })?
        .with_name("fusiond")
        .with_telemetry(false)
        .build()
        .map_err(|e| InferError::Engine(format!("cannot create the ONNX Runtime environment: {e}")))?;
    *slot = Some((library.to_path_buf(), env.clone()));
    Ok(env)
}

#[derive(Clone)]
pub struct OrtBackend {
    env: Environment,
    settings: OrtSettings,
    identity: Arc<BoxIdentity>,
}

impl OrtBackend {
    /// Opens the library now, so a missing or too old one is reported at
    /// start and not at the first model. With TensorRT listed, also reads
    /// what the engine cache's key needs (GPU, library versions).
    pub fn new(settings: OrtSettings) -> Result<Self> {
        let env = environment(&settings.library_path())?;
        let version = OrtVersion::of_library(&settings.library, ort::info());
        if version.is_none() {
            log::warn!(
                "cannot tell the version of ONNX Runtime {}; provider options newer than {} are left out",
                settings.library.display(),
                OrtVersion::FLOOR
            );
        }
        let identity = Arc::new(BoxIdentity::probe(&settings, version));
        Ok(OrtBackend { env, settings, identity })
    }

    fn version(&self) -> OrtVersion {
        self.identity.version.unwrap_or(OrtVersion::FLOOR)
    }
}

fn load_err(e: impl std::fmt::Display) -> InferError {
    InferError::Load(e.to_string())
}

fn run_err(e: impl std::fmt::Display) -> InferError {
    InferError::Run(e.to_string())
}

/// ORT-format files carry the flatbuffer identifier `ORTM` at offset 4.
fn is_ort_format(bytes: &[u8]) -> bool {
    bytes.get(4..8) == Some(b"ORTM")
}

/// A tensor's declared dimensions (below 1: symbolic).
fn dims(dtype: &ValueType) -> Option<Vec<i64>> {
    match dtype {
        ValueType::Tensor { shape, .. } => Some(shape.iter().copied().collect()),
        _ => None,
    }
}

/// Shape of a declared input: `None` when some dimension is symbolic.
fn static_shape(dtype: &ValueType) -> Option<Vec<usize>> {
    dims(dtype)?.into_iter().map(|d| usize::try_from(d).ok().filter(|d| *d > 0)).collect()
}

/// Declared inputs: name, position and element type.
fn declared(session: &OrtSession) -> Vec<(String, ValueType)> {
    session.inputs().iter().map(|o| (o.name().to_string(), o.dtype().clone())).collect()
}

/// The sessions of one model and what builds more of them.
struct Shared {
    // Declared before `bytes`: a session may point into the bytes, so the
    // sessions are dropped first.
    idle: Mutex<Vec<OrtSession>>,
    backend: OrtBackend,
    /// Inputs as TensorRT's shape profile needs them (empty otherwise).
    profile: Vec<InputSpec>,
    /// How the first session was built, less its profiling and its
    /// EP-context writing: later ones find the engines in the cache.
    plan: BuildPlan,
    bytes: ModelBytes,
}

impl Shared {
    fn take(&self) -> Result<OrtSession> {
        let idle = self.idle.lock().map_err(|_| load_err("an earlier session build panicked"))?.pop();
        match idle {
            Some(s) => Ok(s),
            None => Ok(self.backend.build((*self.bytes).as_ref(), &self.profile, &self.plan)?.0),
        }
    }
}

struct OrtModel {
    shared: Arc<Shared>,
    inputs: Vec<InputSpec>,
    outputs: Arc<[String]>,
    phases: LoadPhases,
    placement: Placement,
}

/// One thread's session; it goes back to the model's pool when dropped.
struct OrtRun {
    session: Option<OrtSession>,
    shared: Arc<Shared>,
    inputs: Vec<InputSpec>,
    outputs: Arc<[String]>,
}

impl Drop for OrtRun {
    fn drop(&mut self) {
        if let (Some(s), Ok(mut idle)) = (self.session.take(), self.shared.idle.lock()) {
            idle.push(s);
        }
    }
}

/// One built session and what became of the providers asked for.
type Built = (OrtSession, Vec<String>, Vec<ProviderFailure>);

impl Backend for OrtBackend {
    fn name(&self) -> &'static str {
        "ort"
    }

    fn load(&self, bytes: ModelBytes, specs: &[InputShape], precision: Precision) -> Result<Arc<dyn Model>> {
        if precision != Precision::Fp32 {
            return Err(InferError::Load(format!(
                "precision {precision} runs on tract only; on ONNX Runtime leave the tier at fp32 and set \
                 inference.ort.tensorrt.fp16 for TensorRT's FP16 kernels"
            )));
        }
        let start = Instant::now();
        let (bytes, profile) = self.shape_profile(bytes, specs)?;
        let fp16 = self.settings.providers.contains(&ProviderKind::Tensorrt) && self.settings.tensorrt.fp16;
        let mut plan = plan::first_build(&self.settings, &self.identity, (*bytes).as_ref(), &profile, fp16);
        let on_gpu = self.settings.providers.iter().any(|p| p.is_gpu());
        plan.profile_to = on_gpu.then(verify::profile_prefix);
        let (mut session, mut providers, mut failed) = self.build_first((*bytes).as_ref(), &profile, &mut plan)?;
        let inputs = resolve_inputs(&declared(&session), specs)?;
        let (bytes, changed) = redeclare(bytes, &declared(&session), &inputs)?;
        if changed {
            if plan.profile_to.is_some() {
                verify::discard_profile(&mut session);
            }
            (session, providers, failed) = self.build((*bytes).as_ref(), &profile, &plan)?;
        }
        for (name, dtype) in declared(&session) {
            if !matches!(dtype, ValueType::Tensor { ty: TensorElementType::Float32, .. }) {
                return Err(InferError::Load(format!(
                    "input `{name}` is {dtype}; fusiond feeds float32 inputs (export the model with float32 inputs)"
                )));
            }
        }
        let outputs: Arc<[String]> = session.outputs().iter().map(|o| o.name().to_string()).collect();
        let io = verify::Io { inputs: &inputs, outputs: &outputs };
        if plan.fp16 && self.settings.tensorrt.fp16_check && providers.iter().any(|p| p == "tensorrt") {
            if let Some(refused) = self.fp16_self_test(&mut session, (*bytes).as_ref(), &profile, &mut plan, &io)? {
                failed.push(refused);
            }
        }
        // Also ends the profiling the first session was built with.
        let proven_on = match on_gpu {
            true => Some(verify::prove(&mut session, &io, self.settings.requires_gpu())?.summary()),
            false => None,
        };
        // ONNX Runtime parses, optimises and plans in one call.
        let phases = LoadPhases { optimize: start.elapsed(), ..LoadPhases::default() };
        let zero_copy = is_ort_format((*bytes).as_ref());
        let placement = Placement { engine: "ort", providers, failed, zero_copy, proven_on };
        plan.profile_to = None;
        plan.dump_context = false;
        plan.context = None;
        let shared = Arc::new(Shared {
            idle: Mutex::new(vec![session]),
            backend: self.clone(),
            profile,
            plan,
            bytes: bytes.clone(),
        });
        Ok(Arc::new(OrtModel { shared, inputs, outputs, phases, placement }))
    }
}

/// Fixes every input's shape: from `specs`, else from a fully static
/// declaration.
fn resolve_inputs(declared: &[(String, ValueType)], specs: &[InputShape]) -> Result<Vec<InputSpec>> {
    let shapes: Vec<(String, Option<Vec<usize>>)> =
        declared.iter().map(|(n, t)| (n.clone(), static_shape(t))).collect();
    fix_input_shapes(&shapes, specs)
}

/// `bytes`, or a copy (true) with its inputs declared again where a declared
/// dimension contradicts the shape it is loaded at (an export fixed at one
/// size, loaded at another), which ONNX Runtime would refuse on every run.
fn redeclare(bytes: ModelBytes, declared: &[(String, ValueType)], inputs: &[InputSpec]) -> Result<(ModelBytes, bool)> {
    let declared: Vec<(String, Vec<i64>)> = declared.iter().filter_map(|(n, t)| Some((n.clone(), dims(t)?))).collect();
    let raw: &[u8] = (*bytes).as_ref();
    match super::onnx::redeclared(&declared, inputs, raw, is_ort_format(raw))? {
        Some(patched) => Ok((Arc::new(patched), true)),
        None => Ok((bytes, false)),
    }
}

impl Model for OrtModel {
    fn inputs(&self) -> &[InputSpec] {
        &self.inputs
    }

    fn output_names(&self) -> &[String] {
        &self.outputs
    }

    fn load_phases(&self) -> LoadPhases {
        self.phases
    }

    fn placement(&self) -> Placement {
        self.placement.clone()
    }

    fn session(&self) -> Result<Box<dyn Session>> {
        Ok(Box::new(OrtRun {
            session: Some(self.shared.take()?),
            shared: self.shared.clone(),
            inputs: self.inputs.clone(),
            outputs: self.outputs.clone(),
        }))
    }
}

/// Converts one output to f32, whatever numeric type the graph produces.
fn to_f32(value: &ort::value::DynValue) -> Result<Tensor> {
    macro_rules! cast {
        ($t:ty) => {
            if let Ok((shape, data)) = value.try_extract_tensor::<$t>() {
                let shape: Vec<usize> = shape.iter().map(|&d| d.max(0) as usize).collect();
                let data: Vec<f32> = data.iter().map(|&v| v as f32).collect();
                return Tensor::new(&shape, data).ok_or_else(|| run_err("output length does not match its shape"));
            }
        };
    }
    cast!(f32);
    cast!(i64);
    cast!(i32);
    cast!(u8);
    cast!(i8);
    cast!(f64);
    Err(run_err(format!("output of type {} cannot be read as numbers", value.dtype())))
}

/// Runs `session` on `given`, fed in `inputs` order; the outputs come
/// back in `outputs` order.
fn run_session(
    session: &mut OrtSession,
    inputs: &[InputSpec],
    outputs: &Arc<[String]>,
    given: &[(&str, &Tensor)],
) -> Result<Outputs> {
    let mut values: Vec<(Cow<'_, str>, SessionInputValue<'_>)> = Vec::with_capacity(inputs.len());
    for spec in inputs {
        let t = fed(spec, given)?;
        let shape: Vec<i64> = t.shape().iter().map(|&d| d as i64).collect();
        let view = TensorRef::from_array_view((shape, t.data())).map_err(run_err)?;
        values.push((Cow::Borrowed(spec.name.as_str()), view.into()));
    }
    let results = session.run(values).map_err(run_err)?;
    let tensors = outputs
        .iter()
        .map(|name| {
            let value = results.get(name).ok_or_else(|| run_err(format!("output `{name}` is missing")))?;
            to_f32(value)
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Outputs::new(outputs.clone(), tensors))
}

impl Session for OrtRun {
    fn run(&mut self, given: &[(&str, &Tensor)]) -> Result<Outputs> {
        let session = self.session.as_mut().ok_or_else(|| run_err("the session was returned to its pool"))?;
        run_session(session, &self.inputs, &self.outputs, given)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ort_format_is_recognised_by_its_identifier() {
        assert!(is_ort_format(b"\x10\0\0\0ORTM\0\0"));
        assert!(!is_ort_format(b"\x08\x07\x12\x04onnx"));
        assert!(!is_ort_format(b"ORT"));
    }

    #[test]
    fn a_missing_library_says_what_to_install() {
        let err = OrtBackend::new(OrtSettings::cpu("/nonexistent/libonnxruntime.so".into(), 1)).err().unwrap();
        let msg = err.to_string();
        assert!(msg.contains("inference.ort.library") && msg.contains("1.17"), "{msg}");
    }
}
