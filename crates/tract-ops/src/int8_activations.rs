//! Where an INT8 QDQ graph's activations are rounded to their 8-bit grids.
//!
//! tract runs a QDQ graph's convolutions in f32, so the quantise-dequantise
//! pair on an activation is extra work: rounding every value to the grid
//! and back. It buys speed only where an integer kernel reads the rounded
//! values (`gemm_int8`, `pointwise_int8`: a CPU with an 8-bit dot product).
//! Without one, [`Int8Activations::Float`] leaves the pairs out: the graph
//! is the FP32 graph with the INT8 weights (dequantised once, at load), at
//! FP32's cost and closer to FP32's outputs than the rounded activations.
//!
//! A pair whose grid starts at 0 also clamps negative values to 0: ONNX
//! Runtime's quantiser removes a ReLU that such a pair follows (YuNet's
//! INT8 twin has no ReLU node left). Such a pair becomes a ReLU, which the
//! convolution before it takes in, where a ReLU could have stood: after an
//! op whose values may be negative. On a graph input (YuNet's picture,
//! 0–255) or after a sigmoid, a grid from 0 is only the calibration's range,
//! and the pair becomes an identity, as every other pair does. The top of a
//! grid (its saturation) is not kept.

use super::qdq_pairs::OP_TYPE;
use std::collections::HashMap;
use tract_onnx::pb::{GraphProto, TensorProto};

/// What becomes of an INT8 graph's activation quantise-dequantise pairs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Int8Activations {
    /// Rounded to their grids, as the graph says (fused into one op each).
    Grid,
    /// Left in f32: each pair becomes a ReLU where its grid starts at 0,
    /// an identity (which tract removes) elsewhere.
    Float,
}

impl Int8Activations {
    /// [`Int8Activations::Grid`] where this CPU runs an integer product
    /// (an 8-bit dot product, under `FUSIOND_CPU`'s limit), else
    /// [`Int8Activations::Float`].
    pub fn for_this_cpu() -> Int8Activations {
        match super::patch_conv::integer_min_taps() {
            Some(_) => Int8Activations::Grid,
            None => Int8Activations::Float,
        }
    }
}

/// ONNX ops whose outputs are never negative: a grid from 0 after them
/// folded no ReLU.
const NEVER_NEGATIVE: &[&str] = &["Relu", "Sigmoid", "Softmax", "Exp", "Abs", "HardSigmoid", "Sqrt"];

/// Turns each fused pair (`qdq_pairs::fuse_pairs`'s node, after
/// `qdq_pairs::drop_repeats`: a repeat's ReLU would be one too) of `graph`
/// into an ONNX `Relu` of its input where its grid starts at 0 (the zero
/// point is the grid's lowest integer) and a node that may write negative
/// values feeds it, an `Identity` elsewhere, and returns how many it
/// turned; a pair whose zero point it cannot read stays.
pub fn to_float(graph: &mut GraphProto) -> usize {
    let zero_points: HashMap<String, bool> =
        graph.initializer.iter().filter_map(|t| Some((t.name.clone(), zero_at_bottom(t)?))).collect();
    let producers: HashMap<String, String> =
        graph.node.iter().flat_map(|n| n.output.iter().map(|o| (o.clone(), n.op_type.clone()))).collect();
    let mut turned = 0;
    for node in graph.node.iter_mut().filter(|n| n.op_type == OP_TYPE && n.domain.is_empty()) {
        // No zero point: ONNX's default, a u8 grid from 0.
        let from_zero = match node.input.get(2) {
            None => true,
            Some(name) => match zero_points.get(name) {
                Some(from_zero) => *from_zero,
                None => continue,
            },
        };
        let producer = node.input.first().and_then(|x| producers.get(x));
        let clamps = from_zero && producer.is_some_and(|op| !NEVER_NEGATIVE.contains(&op.as_str()));
        node.op_type = if clamps { "Relu" } else { "Identity" }.into();
        node.input.truncate(1);
        node.attribute.clear();
        turned += 1;
    }
    turned
}

/// Whether a single-value zero point is its type's lowest integer (0 of a
/// u8, -128 of an i8); `None` for anything else.
fn zero_at_bottom(t: &TensorProto) -> Option<bool> {
    use tract_onnx::pb::tensor_proto::DataType;
    if super::element_count(&t.dims) != Some(1) {
        return None;
    }
    let value = match (t.raw_data.as_slice(), t.int32_data.as_slice()) {
        ([byte], []) => i32::from(*byte),
        ([], [value]) => *value,
        _ => return None,
    };
    match t.data_type {
        d if d == DataType::Uint8 as i32 => Some(value == 0),
        d if d == DataType::Int8 as i32 => Some(value as u8 as i8 == i8::MIN),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qdq_pairs::fuse_pairs;
    use tract_onnx::pb::{NodeProto, TensorProto};

    fn node(op: &str, inputs: &[&str], output: &str) -> NodeProto {
        NodeProto {
            op_type: op.into(),
            name: output.into(),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: vec![output.into()],
            ..Default::default()
        }
    }

    fn zero_point(name: &str, data_type: i32, byte: u8) -> TensorProto {
        TensorProto { name: name.into(), data_type, raw_data: vec![byte], ..Default::default() }
    }

    /// Five pairs: after a convolution a u8 grid from 0 (a ReLU the
    /// quantiser removed) and an i8 one from -128 (the same); a u8 one
    /// around 128; a u8 one from 0 after a sigmoid (an identity); and one
    /// whose zero point is not an initializer (left as it is). A pair on
    /// the graph input from 0 is an identity too.
    #[test]
    fn pairs_whose_grid_starts_at_zero_after_an_op_become_relus_the_others_identities() {
        let scale = TensorProto { name: "s".into(), data_type: 1, ..Default::default() };
        let pair = |x: &str, z: &str, n: &str| {
            [
                node("QuantizeLinear", &[x, "s", z], &format!("q{n}")),
                node("DequantizeLinear", &[&format!("q{n}"), "s", z], &format!("d{n}")),
            ]
        };
        let mut nodes = vec![];
        nodes.extend(pair("x", "u0", "0"));
        nodes.push(node("Conv", &["d0"], "c"));
        nodes.extend(pair("c", "u0", "1"));
        nodes.extend(pair("d1", "i0", "2"));
        nodes.extend(pair("d2", "u128", "3"));
        nodes.push(node("Sigmoid", &["d3"], "sig"));
        nodes.extend(pair("sig", "u0", "4"));
        nodes.push(node("Constant", &[], "z"));
        nodes.extend(pair("d4", "z", "5"));
        let mut g = GraphProto {
            node: nodes,
            initializer: vec![scale, zero_point("u0", 2, 0), zero_point("i0", 3, 0x80), zero_point("u128", 2, 128)],
            ..Default::default()
        };
        assert_eq!(fuse_pairs(&mut g), 5, "the pair of a Constant zero point stays two nodes");
        assert_eq!(to_float(&mut g), 5);
        let ops: Vec<(&str, &str)> =
            g.node.iter().map(|n| (n.op_type.as_str(), n.input.first().map_or("", String::as_str))).collect();
        let want = [("Identity", "x"), ("Conv", "d0"), ("Relu", "c"), ("Relu", "d1"), ("Identity", "d2")];
        assert_eq!(&ops[..5], want);
        assert_eq!(&ops[5..7], [("Sigmoid", "d3"), ("Identity", "sig")]);
        assert_eq!(ops[8].0, "QuantizeLinear");
        assert_eq!(to_float(&mut g), 0, "a second pass finds nothing");
    }
}
