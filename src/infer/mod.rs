//! The inference boundary. Everything above this module talks to models through
//! [`Backend`], [`Model`] and [`Session`]; no other module names an engine.
//!
//! A [`Model`] is the shared, optimised plan (`Send + Sync`, load once). A
//! [`Session`] is the per-thread mutable state that runs it.

pub mod agreement;
mod engines;
pub mod onnx;
#[cfg(feature = "ort")]
mod ort;
pub mod profile;
mod settings;
mod tensor;
#[cfg(feature = "tract")]
mod tract;
#[cfg(feature = "tract")]
mod tract_import;
#[cfg(feature = "tract")]
pub use fusiond_tract_ops as tract_ops;
#[cfg(feature = "tract")]
mod tract_pool;

pub use engines::{EngineError, Engines};
#[cfg(feature = "ort")]
pub use ort::OrtBackend;
pub use settings::{
    CudaSettings, EngineKind, InferenceSettings, Int8Activations, OrtSettings, Precision, ProviderKind,
    TensorrtSettings, MAX_THREADS,
};
pub use tensor::Tensor;
#[cfg(feature = "tract")]
pub use tract::TractBackend;

use std::sync::Arc;
use std::time::Duration;

/// Where a backend spent its load time.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct LoadPhases {
    /// Decoding the file (protobuf) into the engine's graph.
    pub parse: Duration,
    /// Type inference, decluttering and optimisation.
    pub optimize: Duration,
    /// Building the runnable plan.
    pub plan: Duration,
    /// The process's resident memory through loading (all 0 where the
    /// engine does not say).
    pub resident: Resident,
}

/// Resident bytes of the process at the end of each loading phase, and its
/// peak by the end of the import and of the whole load: where a big model's
/// transient copies are.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct Resident {
    pub parse: u64,
    /// The engine's graph built from the protobuf (tract's import).
    pub import: u64,
    pub import_peak: u64,
    pub optimize: u64,
    pub peak: u64,
}

/// Model file bytes, shared with the backend: an engine that can run on the
/// bytes in place keeps them alive instead of copying the weights.
pub type ModelBytes = Arc<dyn ModelData>;

/// A model file's bytes as an engine reads them.
pub trait ModelData: AsRef<[u8]> + Send + Sync {
    /// The bytes in `range` will not be read again: a file mapping may hand
    /// their pages back to the kernel (the file keeps them, and a later read
    /// would fault them in again). Memory that has no file behind it keeps
    /// its bytes, which is the default.
    fn release(&self, _range: std::ops::Range<usize>) {}
}

impl ModelData for Vec<u8> {}

/// An execution provider that was asked for but could not be used.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ProviderFailure {
    pub provider: String,
    pub error: String,
}

/// Where a loaded model runs.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Placement {
    /// Engine name (`tract`, `ort`).
    pub engine: &'static str,
    /// Execution providers that registered, in order; `cpu` for tract.
    pub providers: Vec<String>,
    /// Providers the config asked for that failed to register.
    pub failed: Vec<ProviderFailure>,
    /// Whether the engine runs on the file's bytes in place (weights resident once).
    pub zero_copy: bool,
    /// Where a profiled run after warm-up ran its nodes, for a model on a
    /// GPU provider (`cuda: 112 nodes`).
    pub proven_on: Option<String>,
}

/// A model input as loaded: its name and the fixed shape it was planned for.
#[derive(Debug, Clone, PartialEq)]
pub struct InputSpec {
    pub name: String,
    pub shape: Vec<usize>,
}

/// Which input a requested shape applies to.
#[derive(Debug, Clone, PartialEq)]
pub enum InputRef {
    Name(String),
    /// Position among the graph's (non-initializer) inputs: detectors name
    /// their single input differently from export to export.
    Index(usize),
}

/// A fixed shape to impose on one input at load time.
#[derive(Debug, Clone, PartialEq)]
pub struct InputShape {
    pub input: InputRef,
    pub shape: Vec<usize>,
}

impl InputShape {
    pub fn named(name: &str, shape: &[usize]) -> Self {
        InputShape { input: InputRef::Name(name.into()), shape: shape.to_vec() }
    }

    pub fn first(shape: &[usize]) -> Self {
        InputShape { input: InputRef::Index(0), shape: shape.to_vec() }
    }

    #[cfg_attr(not(any(feature = "tract", feature = "ort")), allow(dead_code))]
    fn matches(&self, index: usize, name: &str) -> bool {
        match &self.input {
            InputRef::Name(n) => n == name,
            InputRef::Index(i) => *i == index,
        }
    }
}

/// Fixes the shape of every declared input (name, static shape if any):
/// from `specs`, else from a fully static declaration. A spec that names no
/// declared input is an error. Shared by the engines.
#[cfg_attr(not(any(feature = "tract", feature = "ort")), allow(dead_code))]
fn fix_input_shapes(declared: &[(String, Option<Vec<usize>>)], specs: &[InputShape]) -> Result<Vec<InputSpec>> {
    for spec in specs {
        if !declared.iter().enumerate().any(|(i, (n, _))| spec.matches(i, n)) {
            return Err(InferError::UnknownInput {
                name: format!("{:?}", spec.input),
                available: declared.iter().map(|d| d.0.as_str()).collect::<Vec<_>>().join(", "),
            });
        }
    }
    declared
        .iter()
        .enumerate()
        .map(|(ix, (name, shape))| {
            let shape = match specs.iter().find(|s| s.matches(ix, name)) {
                Some(spec) => spec.shape.clone(),
                None => shape.clone().ok_or_else(|| {
                    InferError::Load(format!(
                        "input `{name}` has a dynamic shape; give it a fixed size in the manifest"
                    ))
                })?,
            };
            Ok(InputSpec { name: name.clone(), shape })
        })
        .collect()
}

/// The tensor `given` for `spec`, checked against the shape it was loaded for.
#[cfg_attr(not(any(feature = "tract", feature = "ort")), allow(dead_code))]
fn fed<'a>(spec: &InputSpec, given: &[(&str, &'a Tensor)]) -> Result<&'a Tensor> {
    let t = given
        .iter()
        .find(|(n, _)| *n == spec.name)
        .map(|(_, t)| *t)
        .ok_or_else(|| InferError::UnknownInput { name: spec.name.clone(), available: "(missing)".into() })?;
    if t.shape() != spec.shape.as_slice() {
        return Err(InferError::InputShape {
            name: spec.name.clone(),
            got: t.shape().to_vec(),
            want: spec.shape.clone(),
        });
    }
    Ok(t)
}

#[derive(Debug, thiserror::Error)]
pub enum InferError {
    #[error("cannot load model: {0}; check that the file is a valid ONNX model of the contract the manifest names")]
    Load(String),
    #[error("model has no input {name} (it has: {available}); is the manifest's contract right?")]
    UnknownInput { name: String, available: String },
    #[error("input `{name}` has shape {got:?}, but the model was loaded for {want:?}")]
    InputShape { name: String, got: Vec<usize>, want: Vec<usize> },
    #[error("model has no output named `{name}` (it has: {available})")]
    UnknownOutput { name: String, available: String },
    #[error("inference failed: {0}")]
    Run(String),
    /// A model cannot run where the config puts it (no GPU provider, a node
    /// left to the CPU); the message says what to install or set.
    #[error("{0}")]
    Placement(String),
    /// The engine itself cannot start (a missing, foreign or too old ONNX
    /// Runtime library); the message says what to install or set.
    #[error("{0}")]
    Engine(String),
}

pub type Result<T, E = InferError> = std::result::Result<T, E>;

/// An inference engine: turns model bytes into a runnable [`Model`].
pub trait Backend: Send + Sync {
    /// Engine name for logs and stats (e.g. "tract").
    fn name(&self) -> &'static str;

    /// Parses, types, optimises and plans `bytes` for the given fixed input
    /// shapes, its arithmetic in `precision`. Inputs not listed keep the
    /// shapes the file declares, which must then be fully static. An engine
    /// that cannot run `precision` says so and loads nothing.
    fn load(&self, bytes: ModelBytes, inputs: &[InputShape], precision: Precision) -> Result<Arc<dyn Model>>;
}

/// A loaded, optimised model. Shared between threads; each thread runs it
/// through its own [`Session`].
pub trait Model: Send + Sync {
    fn inputs(&self) -> &[InputSpec];
    fn output_names(&self) -> &[String];
    fn session(&self) -> Result<Box<dyn Session>>;
    fn load_phases(&self) -> LoadPhases;
    fn placement(&self) -> Placement;
    /// The compute kernels the engine chose for this model, each with the
    /// number of plan nodes that run it (`arm64simd_mmm_f32_8x8_gen ×12`);
    /// empty where the engine does not say.
    fn kernels(&self) -> Vec<String> {
        Vec::new()
    }
}

/// Per-thread execution state of a [`Model`].
pub trait Session: Send {
    /// Runs the model. `inputs` are matched by name and must cover every model
    /// input; the outputs come back in [`Model::output_names`] order.
    fn run(&mut self, inputs: &[(&str, &Tensor)]) -> Result<Outputs>;

    /// Runs the model once and times each node of the engine's own plan, in
    /// plan order; `None` from an engine that cannot (ONNX Runtime has a
    /// profiler of its own: `benches/ort_profile.py`).
    fn profile(&mut self, inputs: &[(&str, &Tensor)]) -> Result<Option<Vec<NodeTime>>> {
        let _ = inputs;
        Ok(None)
    }
}

/// One node of an engine's plan, timed in one run ([`Session::profile`]).
#[derive(Debug, Clone, PartialEq)]
pub struct NodeTime {
    /// The node's name: tract names the nodes it makes out of an ONNX node
    /// `<onnx name>.<part>`. Shared, as the op's: a profiled run allocates
    /// nothing that outlives it but its one list of times, since every
    /// block kept across runs can split a freed activation's place in the
    /// heap, and the next run's activation then takes fresh pages.
    pub node: Arc<str>,
    /// The engine's operator.
    pub op: Arc<str>,
    pub time: std::time::Duration,
}

/// Named model outputs, looked up by name.
#[derive(Debug)]
pub struct Outputs {
    names: Arc<[String]>,
    tensors: Vec<Tensor>,
}

impl Outputs {
    /// `names` is shared with the model, so building outputs per run does
    /// not copy them.
    pub fn new(names: Arc<[String]>, tensors: Vec<Tensor>) -> Self {
        Outputs { names, tensors }
    }

    pub fn get(&self, name: &str) -> Result<&Tensor> {
        self.names
            .iter()
            .position(|n| n == name)
            .map(|i| &self.tensors[i])
            .ok_or_else(|| InferError::UnknownOutput { name: name.to_string(), available: self.names.join(", ") })
    }

    /// Outputs in model order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Tensor)> {
        self.names.iter().map(String::as_str).zip(self.tensors.iter())
    }
}
