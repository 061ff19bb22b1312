//! tract-onnx backend: pure Rust, runs everywhere, executes INT8 QDQ graphs in f32.

use super::{
    fed, fix_input_shapes, Backend, InferError, InputShape, InputSpec, Int8Activations, LoadPhases, Model, ModelBytes,
    NodeTime, Outputs, Placement, Precision, Resident, Result, Session, Tensor,
};
use fusiond_tract_ops::tract_onnx::pb;
use fusiond_tract_ops::tract_onnx::prelude::*;
use fusiond_tract_ops::tract_onnx::tract_core::internal::OpState;
use fusiond_tract_ops::tract_onnx::tract_core::plan::EvalContext;
use std::sync::Arc;

/// The default, pure-Rust engine.
#[derive(Debug, Clone)]
pub struct TractBackend {
    /// Threads a model runs on (`super::tract_pool`); 1 is the caller's alone.
    threads: usize,
    /// Whether fusiond's one-pass ops replace tract's decompositions
    /// (`super::tract_ops`).
    fused_ops: bool,
    /// Where an INT8 graph's activations are rounded, with `fused_ops`.
    int8_activations: Int8Activations,
}

impl Default for TractBackend {
    fn default() -> Self {
        TractBackend { threads: 1, fused_ops: true, int8_activations: Int8Activations::Auto }
    }
}

impl TractBackend {
    /// An engine whose models run on `threads` threads: the one that runs
    /// the model and the others of its pool (`super::tract_pool`); 1 runs on
    /// the caller's thread alone.
    pub fn with_threads(threads: usize) -> Self {
        TractBackend { threads: threads.max(1), ..Self::default() }
    }

    /// With `false`, tract's own ops run where fusiond has a fused one (to
    /// compare them, or to step around a kernel).
    pub fn with_fused_ops(self, fused_ops: bool) -> Self {
        TractBackend { fused_ops, ..self }
    }

    /// Where an INT8 QDQ graph's activations are rounded to their grids
    /// (with fused ops; tract's own ops always round them).
    pub fn with_int8_activations(self, int8_activations: Int8Activations) -> Self {
        TractBackend { int8_activations, ..self }
    }
}

struct TractModel {
    plan: Arc<TypedRunnableModel>,
    inputs: Vec<InputSpec>,
    input_types: Vec<DatumType>,
    outputs: Arc<[String]>,
    phases: LoadPhases,
    threads: usize,
}

struct TractSession {
    state: TypedSimpleState,
    inputs: Vec<InputSpec>,
    input_types: Vec<DatumType>,
    outputs: Arc<[String]>,
    threads: usize,
    /// Each plan node's name and op, by node id, made on the first
    /// profiled run ([`Session::profile`]).
    names: Vec<(Arc<str>, Arc<str>)>,
}

fn load_err(e: impl std::fmt::Display) -> InferError {
    InferError::Load(format!("{e:#}"))
}

fn run_err(e: impl std::fmt::Display) -> InferError {
    InferError::Run(format!("{e:#}"))
}

/// Graph inputs as the file declares them: name, element type and the static
/// shape when every dimension is a number. Initializers listed as inputs
/// (IR < 4) are skipped.
fn declared_inputs(proto: &pb::ModelProto) -> Vec<(String, DatumType, Option<Vec<usize>>)> {
    let Some(graph) = proto.graph.as_ref() else {
        return vec![];
    };
    let initializers: std::collections::HashSet<&str> = graph.initializer.iter().map(|t| t.name.as_str()).collect();
    graph
        .input
        .iter()
        .filter(|vi| !initializers.contains(vi.name.as_str()))
        .map(|vi| {
            let tensor = vi.r#type.as_ref().and_then(|t| match &t.value {
                Some(pb::type_proto::Value::TensorType(tt)) => Some(tt),
                _ => None,
            });
            let dt = match tensor.map(|t| t.elem_type) {
                Some(10) => DatumType::F16,
                _ => DatumType::F32,
            };
            let shape = tensor.and_then(|t| t.shape.as_ref()).and_then(|s| {
                s.dim
                    .iter()
                    .map(|d| match d.value {
                        Some(pb::tensor_shape_proto::dimension::Value::DimValue(v)) if v > 0 => Some(v as usize),
                        _ => None,
                    })
                    .collect::<Option<Vec<usize>>>()
            });
            (vi.name.clone(), dt, shape)
        })
        .collect()
}

impl Backend for TractBackend {
    fn name(&self) -> &'static str {
        "tract"
    }

    fn load(&self, bytes: ModelBytes, specs: &[InputShape], precision: Precision) -> Result<Arc<dyn Model>> {
        // Value infos are ignored because exported graphs often carry symbolic
        // batch dims that contradict the fixed shapes we impose; every input
        // shape therefore comes from `specs` or from a fully static declaration.
        let start = std::time::Instant::now();
        let mut onnx = fusiond_tract_ops::tract_onnx::onnx().with_ignore_value_info(true);
        if self.fused_ops {
            super::tract_ops::register(&mut onnx.op_register);
        }
        // The weights are held once at a time: see `tract_import` (the
        // caller passes the only reference to the mapping).
        let mut proto = super::tract_import::decode(bytes)?;
        if self.fused_ops {
            prepare_logged(&mut proto, self.int8_activations);
        }
        let parsed = start.elapsed();
        let after_parse = crate::procmem::rss().0;
        let declared = declared_inputs(&proto);
        let shapes: Vec<(String, Option<Vec<usize>>)> =
            declared.iter().map(|(n, _, s)| (n.clone(), s.clone())).collect();
        let inputs = fix_input_shapes(&shapes, specs)?;
        let declared_types: Vec<DatumType> = declared.iter().map(|d| d.1).collect();
        // After `declared_inputs`: the weights become graph inputs here.
        let weights = super::tract_import::take_weights(&mut proto, &onnx).map_err(load_err)?;
        let mut model = onnx.model_for_proto_model(&proto).map_err(load_err)?;
        drop(proto);
        super::tract_import::restore_weights(&mut model, weights).map_err(load_err)?;
        let (import, import_peak) = crate::procmem::rss();
        for (ix, (spec, dt)) in inputs.iter().zip(&declared_types).enumerate() {
            model.set_input_fact(ix, InferenceFact::dt_shape(*dt, &spec.shape)).map_err(load_err)?;
        }
        let half = precision == Precision::Fp16;
        let typed = super::tract_ops::optimize(model, self.fused_ops, half).map_err(load_err)?;
        // At FP16 the inputs become f16 too: `values` casts what it is fed.
        let input_types = input_types(&typed).map_err(load_err)?;
        let outputs = typed
            .output_outlets()
            .map_err(load_err)?
            .iter()
            .map(|o| typed.outlet_label(*o).unwrap_or(&typed.node(o.node).name).to_string())
            .collect();
        let optimized = start.elapsed();
        let after_optimize = crate::procmem::rss().0;
        let plan = typed.into_runnable().map_err(load_err)?;
        let peak = crate::procmem::rss().1;
        let phases = LoadPhases {
            parse: parsed,
            optimize: optimized - parsed,
            plan: start.elapsed() - optimized,
            resident: Resident { parse: after_parse, import, import_peak, optimize: after_optimize, peak },
        };
        Ok(Arc::new(TractModel { plan, inputs, input_types, outputs, phases, threads: self.threads }))
    }
}

/// fusiond's rewrites of the graph before tract imports it, said in the
/// debug log when they changed something; activations left in f32 are said
/// at info, since that sets the model's cost and outputs.
fn prepare_logged(proto: &mut pb::ModelProto, setting: Int8Activations) {
    use super::tract_ops::Int8Activations as Ops;
    let (activations, why) = match setting {
        Int8Activations::Auto => (Ops::for_this_cpu(), "this CPU has no 8-bit dot product for the integer kernels"),
        Int8Activations::Grid => (Ops::Grid, ""),
        Int8Activations::Float => (Ops::Float, "inference.tract_int8_activations = \"float\""),
    };
    let prepared = super::tract_ops::prepare(proto, activations);
    if prepared.float_pairs > 0 {
        log::info!(
            "tract: {} INT8 activation quantise-dequantise pairs left out, the activations kept in f32 ({why}); inference.tract_int8_activations = \"grid\" runs them",
            prepared.float_pairs
        );
    }
    if prepared != super::tract_ops::Prepared::default() {
        log::debug!(
            "tract: {} constant dequantisers folded, {} quantise-dequantise pairs fused ({} of them dropped, already on their grid; {} left out), {} convolutions merged into a sibling",
            prepared.folded,
            prepared.fused_pairs,
            prepared.repeated_pairs,
            prepared.float_pairs,
            prepared.merged_convs
        );
    }
}

/// The element type of each input of the optimised plan.
fn input_types(typed: &TypedModel) -> TractResult<Vec<DatumType>> {
    typed.input_outlets()?.iter().map(|o| typed.outlet_fact(*o).map(|f| f.datum_type)).collect()
}

/// tract's matrix-product kernels by tract-linalg's name, and fusiond's own
/// ops by op name, each with the number of nodes that run it.
fn plan_kernels(model: &TypedModel) -> Vec<String> {
    let mut counts = std::collections::BTreeMap::<String, usize>::new();
    for node in model.nodes() {
        if let Some(mm) = node.op_as::<fusiond_tract_ops::tract_onnx::tract_core::ops::matmul::optimized::OptMatMul>() {
            for kernel in &mm.mmm {
                *counts.entry(kernel.name().to_string()).or_default() += 1;
            }
        } else if node.op.name().starts_with("Fusiond") {
            *counts.entry(node.op.name().to_string()).or_default() += 1;
        }
    }
    counts.into_iter().map(|(name, n)| format!("{name} ×{n}")).collect()
}

impl Model for TractModel {
    fn inputs(&self) -> &[InputSpec] {
        &self.inputs
    }

    fn output_names(&self) -> &[String] {
        &self.outputs
    }

    fn load_phases(&self) -> LoadPhases {
        self.phases
    }

    fn kernels(&self) -> Vec<String> {
        plan_kernels(self.plan.model())
    }

    fn placement(&self) -> Placement {
        Placement { engine: "tract", providers: vec!["cpu".into()], failed: vec![], zero_copy: false, proven_on: None }
    }

    fn session(&self) -> Result<Box<dyn Session>> {
        Ok(Box::new(TractSession {
            state: TypedSimpleState::new(&self.plan).map_err(load_err)?,
            inputs: self.inputs.clone(),
            input_types: self.input_types.clone(),
            outputs: self.outputs.clone(),
            threads: self.threads,
            names: Vec::new(),
        }))
    }
}

impl TractSession {
    fn values(&self, given: &[(&str, &Tensor)]) -> Result<TVec<TValue>> {
        let mut values: TVec<TValue> = tvec!();
        for (spec, dt) in self.inputs.iter().zip(&self.input_types) {
            let t = fed(spec, given)?;
            let tensor =
                fusiond_tract_ops::tract_onnx::prelude::Tensor::from_shape(t.shape(), t.data()).map_err(run_err)?;
            let tensor =
                if *dt == DatumType::F32 { tensor } else { tensor.cast_to_dt(*dt).map_err(run_err)?.into_owned() };
            values.push(tensor.into());
        }
        Ok(values)
    }
}

impl Session for TractSession {
    fn profile(&mut self, given: &[(&str, &Tensor)]) -> Result<Option<Vec<NodeTime>>> {
        if self.names.is_empty() {
            let nodes = self.state.model().nodes();
            self.names = nodes.iter().map(|n| (n.name.as_str().into(), n.op().name().as_ref().into())).collect();
        }
        let mut times = Vec::with_capacity(self.names.len());
        let values = self.values(given)?;
        let names = &self.names;
        let mut timed = |ctx: &EvalContext, state: Option<&mut (dyn OpState + 'static)>, node: &TypedNode, input| {
            let start = std::time::Instant::now();
            let out = fusiond_tract_ops::tract_onnx::tract_core::plan::eval(ctx, state, node, input);
            let (node, op) = names[node.id].clone();
            times.push(NodeTime { node, op, time: start.elapsed() });
            out
        };
        let state = &mut self.state;
        super::tract_pool::run(self.threads, || state.run_plan_with_eval(values, &mut timed)).map_err(run_err)?;
        Ok(Some(times))
    }

    fn run(&mut self, given: &[(&str, &Tensor)]) -> Result<Outputs> {
        let values = self.values(given)?;
        let state = &mut self.state;
        let results = super::tract_pool::run(self.threads, || state.run(values)).map_err(run_err)?;
        let tensors = results
            .into_iter()
            .map(|v| {
                let t = v.cast_to::<f32>().map_err(run_err)?;
                let data =
                    t.try_as_plain_ram().and_then(|v| v.as_slice::<f32>().map(<[f32]>::to_vec)).map_err(run_err)?;
                Ok(Tensor::new(t.shape(), data).expect("tract tensor length matches its shape"))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Outputs::new(self.outputs.clone(), tensors))
    }
}
