//! The checks a model passes after it is built and before it serves: the
//! FP16 self-test (TensorRT FP16 against FP32 on fixed inputs) and the
//! proof, from one profiled run, that every node ran on the GPU.

use super::super::agreement::{self, Bounds};
use super::super::{InferError, InputSpec, Outputs, ProviderFailure, Result, Tensor};
use super::plan::{self, BuildPlan};
use super::proof::Assignment;
use super::{fp16, load_err, run_session, OrtBackend};
use ort::session::Session as OrtSession;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A model's inputs as loaded and its output names.
pub(super) struct Io<'a> {
    pub inputs: &'a [InputSpec],
    pub outputs: &'a Arc<[String]>,
}

impl Io<'_> {
    fn run(&self, session: &mut OrtSession, given: &[(String, Tensor)]) -> Result<Outputs> {
        let refs: Vec<(&str, &Tensor)> = given.iter().map(|(n, t)| (n.as_str(), t)).collect();
        run_session(session, self.inputs, self.outputs, &refs)
    }
}

/// A prefix of its own for one session's profile (ONNX Runtime appends the
/// time and `.json`), in the temporary folder.
pub(super) fn profile_prefix() -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("fusiond-ort-profile-{}-{n}", std::process::id()))
}

/// Runs `session` (built with profiling on) once on zeros, ends its
/// profiling and reads where the nodes of its runs so far ran; the profile
/// file is removed. With `strict`, a node that ran on the CPU fails the
/// load; without, it is a warning in the log.
pub(super) fn prove(session: &mut OrtSession, io: &Io, strict: bool) -> Result<Assignment> {
    let zeros: Vec<(String, Tensor)> = io.inputs.iter().map(|i| (i.name.clone(), Tensor::zeros(&i.shape))).collect();
    let ran = io.run(session, &zeros);
    let path = session.end_profiling().map_err(load_err)?;
    let json = std::fs::read(&path);
    let _ = std::fs::remove_file(&path);
    ran?;
    let json = json.map_err(|e| load_err(format!("cannot read ONNX Runtime's profile {path}: {e}")))?;
    let assignment = Assignment::from_profile(&json).map_err(InferError::Load)?;
    match assignment.all_on_gpu() {
        Ok(()) => log::info!("proven on the GPU: {}", assignment.summary()),
        Err(why) if strict => return Err(InferError::Placement(why)),
        Err(_) => log::warn!(
            "not all on the GPU (inference.ort.cpu_fallback = true lets the CPU run the rest): {}",
            assignment.summary()
        ),
    }
    Ok(assignment)
}

/// Ends the profiling of a session that is about to be replaced and
/// removes its file, which ONNX Runtime would otherwise write when the
/// session is dropped.
pub(super) fn discard_profile(session: &mut OrtSession) {
    if let Ok(path) = session.end_profiling() {
        let _ = std::fs::remove_file(path);
    }
}

impl OrtBackend {
    /// Builds the model in FP32 too and runs both builds on the fixed
    /// inputs. `None` when FP16 holds; else the refusal, with `session` and
    /// `plan` now the FP32 build's.
    pub(super) fn fp16_self_test(
        &self,
        session: &mut OrtSession,
        raw: &[u8],
        profile: &[InputSpec],
        plan: &mut BuildPlan,
        io: &Io,
    ) -> Result<Option<ProviderFailure>> {
        let mut fp32 = plan::first_build(&self.settings, &self.identity, raw, profile, false);
        let (mut reference, providers, _) = self.build_first(raw, profile, &mut fp32)?;
        if !providers.iter().any(|p| p == "tensorrt") {
            log::warn!("FP16 self-test skipped: the FP32 build did not get TensorRT");
            return Ok(None);
        }
        let inputs = fp16::probe_inputs(io.inputs);
        let want = io.run(&mut reference, &inputs)?;
        let got = io.run(session, &inputs)?;
        let why = match agreement::judge(&want, &got, Bounds::FP16) {
            Ok(summary) => {
                log::info!("FP16 self-test passed against FP32: {summary}");
                return Ok(None);
            }
            Err(why) => why,
        };
        log::error!("FP16 refused by the self-test: {why}; the model runs FP32 on the GPU");
        fp32.profile_to = plan.profile_to.take();
        fp32.dump_context = false;
        fp32.context = fp32.engines.as_ref().and_then(|d| d.built_context());
        *session = match fp32.profile_to {
            Some(_) => {
                discard_profile(session);
                self.build_first(raw, profile, &mut fp32)?.0
            }
            None => reference,
        };
        *plan = fp32;
        let error = format!("FP16 refused by the self-test ({why}); running FP32 on the GPU");
        Ok(Some(ProviderFailure { provider: "tensorrt fp16".into(), error }))
    }
}
