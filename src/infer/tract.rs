//! tract-onnx backend: pure Rust, runs everywhere, executes INT8 QDQ graphs in f32.

use super::{
    Backend, InferError, InputShape, InputSpec, LoadPhases, Model, ModelBytes, Outputs, Placement, Result, Session,
    Tensor,
};
use std::sync::Arc;
use tract_linalg::multithread::{multithread_tract_scope, Executor};
use tract_onnx::pb;
use tract_onnx::prelude::*;

/// The default, pure-Rust engine.
#[derive(Debug, Default, Clone)]
pub struct TractBackend {
    /// Thread pool for matrix products; `None` runs on the calling thread.
    executor: Option<Executor>,
}

impl TractBackend {
    /// An engine whose matrix products use `threads` threads (a private pool
    /// shared by every model it loads); 1 runs on the caller's thread.
    pub fn with_threads(threads: usize) -> Self {
        TractBackend { executor: (threads > 1).then(|| Executor::multithread_with_name(threads, "tract")) }
    }
}

struct TractModel {
    plan: Arc<TypedRunnableModel>,
    inputs: Vec<InputSpec>,
    input_types: Vec<DatumType>,
    outputs: Arc<[String]>,
    phases: LoadPhases,
    executor: Option<Executor>,
}

struct TractSession {
    state: TypedSimpleState,
    inputs: Vec<InputSpec>,
    input_types: Vec<DatumType>,
    outputs: Arc<[String]>,
    executor: Option<Executor>,
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

    fn load(&self, bytes: ModelBytes, specs: &[InputShape]) -> Result<Arc<dyn Model>> {
        let bytes: &[u8] = (*bytes).as_ref();
        // Value infos are ignored because exported graphs often carry symbolic
        // batch dims that contradict the fixed shapes we impose; every input
        // shape therefore comes from `specs` or from a fully static declaration.
        let start = std::time::Instant::now();
        let onnx = tract_onnx::onnx().with_ignore_value_info(true);
        let proto = onnx.proto_model_for_read(&mut &bytes[..]).map_err(load_err)?;
        let parsed = start.elapsed();
        let declared = declared_inputs(&proto);
        for spec in specs {
            if !declared.iter().enumerate().any(|(i, (n, _, _))| spec.matches(i, n)) {
                return Err(InferError::UnknownInput {
                    name: format!("{:?}", spec.input),
                    available: declared.iter().map(|d| d.0.as_str()).collect::<Vec<_>>().join(", "),
                });
            }
        }
        let mut model = onnx.model_for_proto_model(&proto).map_err(load_err)?;
        let mut inputs = Vec::new();
        let mut input_types = Vec::new();
        for (ix, (name, dt, shape)) in declared.into_iter().enumerate() {
            let shape = match specs.iter().find(|s| s.matches(ix, &name)) {
                Some(spec) => spec.shape.clone(),
                None => shape.ok_or_else(|| {
                    InferError::Load(format!(
                        "input `{name}` has a dynamic shape; give it a fixed size in the manifest"
                    ))
                })?,
            };
            model.set_input_fact(ix, InferenceFact::dt_shape(dt, &shape)).map_err(load_err)?;
            inputs.push(InputSpec { name, shape });
            input_types.push(dt);
        }
        let typed = model.into_optimized().map_err(load_err)?;
        let outputs = typed
            .output_outlets()
            .map_err(load_err)?
            .iter()
            .map(|o| typed.outlet_label(*o).unwrap_or(&typed.node(o.node).name).to_string())
            .collect();
        let optimized = start.elapsed();
        let plan = typed.into_runnable().map_err(load_err)?;
        let phases = LoadPhases { parse: parsed, optimize: optimized - parsed, plan: start.elapsed() - optimized };
        Ok(Arc::new(TractModel { plan, inputs, input_types, outputs, phases, executor: self.executor.clone() }))
    }
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

    fn placement(&self) -> Placement {
        Placement { engine: "tract", providers: vec!["cpu".into()], failed: vec![], zero_copy: false }
    }

    fn session(&self) -> Result<Box<dyn Session>> {
        Ok(Box::new(TractSession {
            state: TypedSimpleState::new(&self.plan).map_err(load_err)?,
            inputs: self.inputs.clone(),
            input_types: self.input_types.clone(),
            outputs: self.outputs.clone(),
            executor: self.executor.clone(),
        }))
    }
}

impl Session for TractSession {
    fn run(&mut self, given: &[(&str, &Tensor)]) -> Result<Outputs> {
        let mut values: TVec<TValue> = tvec!();
        for (spec, dt) in self.inputs.iter().zip(&self.input_types) {
            let t =
                given.iter().find(|(n, _)| *n == spec.name).map(|(_, t)| *t).ok_or_else(|| {
                    InferError::UnknownInput { name: spec.name.clone(), available: "(missing)".into() }
                })?;
            if t.shape() != spec.shape.as_slice() {
                return Err(InferError::InputShape {
                    name: spec.name.clone(),
                    got: t.shape().to_vec(),
                    want: spec.shape.clone(),
                });
            }
            let tensor = tract_onnx::prelude::Tensor::from_shape(t.shape(), t.data()).map_err(run_err)?;
            let tensor =
                if *dt == DatumType::F32 { tensor } else { tensor.cast_to_dt(*dt).map_err(run_err)?.into_owned() };
            values.push(tensor.into());
        }
        let state = &mut self.state;
        let results = match &self.executor {
            Some(pool) => multithread_tract_scope(pool.clone(), || state.run(values)),
            None => state.run(values),
        }
        .map_err(run_err)?;
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
