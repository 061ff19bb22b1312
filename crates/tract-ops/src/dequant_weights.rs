//! Constant dequantisers in QDQ graphs: every weight and bias of an INT8 QDQ
//! graph is an integer initializer read through a `DequantizeLinear`. tract
//! runs QDQ convolutions in f32, so its import turns each into f32 constants by
//! analysing a cast, a subtraction and a multiplication per weight: that
//! analysis made an INT8 tier load slower than its FP32 twin (figures:
//! crates/tract-ops/README.md). [`fold`] computes those f32 weights straight
//! into the protobuf instead, with tract's arithmetic, so tract imports the
//! graph an FP32 export would give it.
//!
//! Only weights whose f32 form fits tract's own constant-folding budget
//! (`CONST_FOLD_MEM_BUDGET`, 4 MiB) are computed: tract keeps bigger ones as
//! integers and dequantises them as it runs, which holds a big INT8 model (the
//! 139 MB INT8 swapper) in a quarter of the memory its f32 weights would take;
//! computing those too raised that model's peak memory for no gain in speed.
//! Where such weights feed a convolution of many taps, fusiond's blocked
//! product takes them as INT8 (`int8_weights`).

use super::floats;
use std::collections::{HashMap, HashSet};
use tract_onnx::pb::{tensor_proto::DataType, GraphProto, NodeProto, TensorProto};
use tract_onnx::tract_core::optim::CONST_FOLD_MEM_BUDGET;

/// The integer types a dequantiser reads.
fn integers(t: &TensorProto) -> Option<Vec<i32>> {
    let raw = &t.raw_data;
    let from_raw = !raw.is_empty();
    let values = match DataType::try_from(t.data_type).ok()? {
        DataType::Int8 if from_raw => raw.iter().map(|&b| b as i8 as i32).collect(),
        DataType::Uint8 if from_raw => raw.iter().map(|&b| b as i32).collect(),
        DataType::Int32 if from_raw => {
            raw.chunks_exact(4).map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
        }
        DataType::Int8 | DataType::Uint8 | DataType::Int32 => t.int32_data.clone(),
        _ => return None,
    };
    (Some(values.len() as i64) == super::element_count(&t.dims)).then_some(values)
}

/// `(x - zero_point) * scale` along `axis` (per tensor when `scale` has one
/// value), as tract's `DequantizeLinearF32` and its per-axis cast, sub and
/// mul compute it; `None` where the shapes do not fit.
fn dequantise(x: &[i32], dims: &[i64], scale: &[f32], zero_point: &[i32], axis: i64) -> Option<Vec<f32>> {
    if scale.is_empty() || (zero_point.len() != scale.len()) {
        return None;
    }
    if scale.len() == 1 {
        return Some(x.iter().map(|&v| (v - zero_point[0]) as f32 * scale[0]).collect());
    }
    let axis = usize::try_from(if axis < 0 { axis + dims.len() as i64 } else { axis }).ok()?;
    if dims.get(axis) != Some(&(scale.len() as i64)) {
        return None;
    }
    // `x` holds exactly `dims`' count of values (checked where it was read).
    let inner = super::element_count(&dims[axis + 1..])?.max(1) as usize;
    let mut out = Vec::with_capacity(x.len());
    // One run of `inner` values per index along the axis, cycling.
    for (run, values) in x.chunks(inner).enumerate() {
        let channel = run % scale.len();
        let (zero, scale) = (zero_point[channel] as f32, scale[channel]);
        out.extend(values.iter().map(|&v| (v as f32 - zero) * scale));
    }
    Some(out)
}

fn axis(node: &NodeProto) -> i64 {
    node.attribute.iter().find(|a| a.name == "axis").map_or(1, |a| a.i)
}

/// Replaces every `DequantizeLinear` whose inputs are all initializers, and
/// whose output fits tract's folding budget, by an f32 initializer holding
/// its output; integer initializers nothing else reads any more are
/// dropped. Returns how many it folded.
pub fn fold(graph: &mut GraphProto) -> usize {
    let index: HashMap<&str, &TensorProto> = graph.initializer.iter().map(|t| (t.name.as_str(), t)).collect();
    let folded: Vec<(usize, TensorProto)> =
        graph.node.iter().enumerate().filter_map(|(ix, node)| Some((ix, folded(node, &index)?))).collect();
    let count = folded.len();
    let mut dropped = vec![false; graph.node.len()];
    let mut sources = HashSet::new();
    for (ix, tensor) in folded {
        dropped[ix] = true;
        sources.extend(graph.node[ix].input.iter().cloned());
        graph.initializer.push(tensor);
    }
    super::remove_nodes(graph, &dropped);
    // The integers (and scales) only the folded nodes read.
    super::drop_unread(graph, sources);
    count
}

/// The f32 initializer `node` computes, when it is a `DequantizeLinear` of
/// initializers (`index`) within the budget; named as its output.
fn folded(node: &NodeProto, index: &HashMap<&str, &TensorProto>) -> Option<TensorProto> {
    if node.op_type != "DequantizeLinear" || node.output.len() != 1 || node.input.len() < 2 {
        return None;
    }
    let inputs: Vec<&TensorProto> = node.input.iter().map(|n| index.get(n.as_str()).copied()).collect::<Option<_>>()?;
    let f32_size = super::element_count(&inputs[0].dims)?.checked_mul(4)?;
    if f32_size as u64 > CONST_FOLD_MEM_BUDGET {
        return None;
    }
    let (x, scale) = (integers(inputs[0])?, floats(inputs[1])?);
    let zero_point = match inputs.get(2) {
        Some(z) => integers(z)?,
        None => vec![0; scale.len()],
    };
    let values = dequantise(&x, &inputs[0].dims, &scale, &zero_point, axis(node))?;
    Some(super::f32_initializer(&node.output[0], &inputs[0].dims, &values))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tract_onnx::pb::{AttributeProto, ValueInfoProto};

    fn tensor(name: &str, dims: &[i64], data_type: DataType, raw: Vec<u8>) -> TensorProto {
        TensorProto {
            name: name.into(),
            dims: dims.to_vec(),
            data_type: data_type as i32,
            raw_data: raw,
            ..Default::default()
        }
    }

    fn f32s(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    fn dq(name: &str, inputs: &[&str], axis: Option<i64>) -> NodeProto {
        NodeProto {
            op_type: "DequantizeLinear".into(),
            name: name.into(),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: vec![format!("{name}_out")],
            attribute: axis
                .map(|i| AttributeProto { name: "axis".into(), i, ..Default::default() })
                .into_iter()
                .collect(),
            ..Default::default()
        }
    }

    fn conv(inputs: &[&str]) -> NodeProto {
        NodeProto {
            op_type: "Conv".into(),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    fn graph() -> GraphProto {
        GraphProto {
            node: vec![
                dq("w", &["w_q", "w_scale", "w_zp"], Some(0)),
                dq("b", &["b_q", "b_scale"], None),
                dq("x", &["x_q", "x_scale", "x_zp"], None),
                conv(&["x_out", "w_out", "b_out"]),
                conv(&["x_out", "w_scale"]),
            ],
            initializer: vec![
                // Two output channels of three weights, one scale and zero point each.
                tensor("w_q", &[2, 3], DataType::Int8, [-128i8, -1, 0, 1, 2, 127].map(|v| v as u8).to_vec()),
                tensor("w_scale", &[2], DataType::Float, f32s(&[0.5, 0.25])),
                tensor("w_zp", &[2], DataType::Int8, vec![0, 2]),
                tensor("b_q", &[2], DataType::Int32, [-70000i32, 3].iter().flat_map(|v| v.to_le_bytes()).collect()),
                tensor("b_scale", &[], DataType::Float, f32s(&[0.125])),
                tensor("x_scale", &[], DataType::Float, f32s(&[0.1])),
                tensor("x_zp", &[], DataType::Uint8, vec![3]),
            ],
            input: vec![ValueInfoProto { name: "x_q".into(), ..Default::default() }],
            ..Default::default()
        }
    }

    fn values(g: &GraphProto, name: &str) -> Vec<f32> {
        floats(g.initializer.iter().find(|t| t.name == name).unwrap_or_else(|| panic!("no initializer {name}")))
            .unwrap()
    }

    #[test]
    fn constant_dequantisers_become_f32_initializers_with_tracts_arithmetic() {
        let mut g = graph();
        assert_eq!(fold(&mut g), 2);
        assert_eq!(values(&g, "w_out"), [-64.0, -0.5, 0.0, -0.25, 0.0, 31.25]);
        assert_eq!(values(&g, "b_out"), [-8750.0, 0.375]);
        let nodes: Vec<&str> = g.node.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(nodes, ["x", "", ""], "the activation's dequantiser stays");
        let names: Vec<&str> = g.initializer.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            names,
            ["w_scale", "x_scale", "x_zp", "w_out", "b_out"],
            "the integers and their grids go, unless another node reads them (w_scale)"
        );
    }

    #[test]
    fn weights_beyond_tracts_folding_budget_stay_integers() {
        let mut g = graph();
        let n = CONST_FOLD_MEM_BUDGET as i64 / 4 + 2;
        g.initializer[0] = tensor("w_q", &[2, n / 2], DataType::Int8, vec![1; n as usize]);
        assert_eq!(fold(&mut g), 1, "only the bias");
        assert_eq!(g.node[0].name, "w", "the weight's dequantiser stays");
        assert!(g.initializer.iter().any(|t| t.name == "w_q"));
    }

    #[test]
    fn hostile_dims_are_left_alone_without_a_panic() {
        for dims in [vec![i64::MAX, 4], vec![-2, -3], vec![1 << 40, 1 << 40]] {
            let mut g = graph();
            g.initializer[0].dims = dims.clone();
            assert_eq!(fold(&mut g), 1, "{dims:?}: only the bias");
            let mut g = graph();
            g.initializer[1].dims = dims;
            assert_eq!(fold(&mut g), 1, "only the bias");
        }
    }

    #[test]
    fn dequantisers_that_do_not_fit_are_left_to_tract() {
        let mut g = graph();
        // A per-axis scale along an axis of another length, and a float input.
        g.node[0].attribute[0].i = 1;
        g.initializer[3] = tensor("b_q", &[2], DataType::Float, f32s(&[1.0, 2.0]));
        let before = g.clone();
        assert_eq!(fold(&mut g), 0);
        assert_eq!(g, before);
    }
}
