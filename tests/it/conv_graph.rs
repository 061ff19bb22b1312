//! Small ONNX graphs built in Rust for the op tests (`tract_ops`): one 3×3
//! convolution and a ReLU, its weights as f32 or as INT8 behind a
//! per-channel `DequantizeLinear`, as an INT8 QDQ export writes them.

use fusiond::infer::tract_ops::tract_onnx::pb::{self, tensor_proto::DataType};
use prost::Message;

/// How the convolution's weights are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Weights {
    F32,
    /// INT8, one scale and zero point per output channel (axis 0).
    Int8,
    /// INT8, one scale per output channel and zero points 0, and the input
    /// on a u8 grid through a quantise-dequantise pair, as onnxruntime's
    /// QDQ quantiser writes a convolution.
    Int8Qdq,
    /// As `Int8Qdq`, the input upsampled 2× (nearest) between its pair and
    /// a second pair of the same grid, as the swapper's decoder has it.
    Int8QdqUpsampled,
}

/// A value in [-1, 1] that varies with `i` without a pattern the kernels
/// could align with.
fn value(i: usize) -> f32 {
    ((i.wrapping_mul(2654435761) >> 8) % 2001) as f32 / 1000.0 - 1.0
}

fn tensor(name: &str, dims: Vec<i64>, data_type: DataType, raw_data: Vec<u8>) -> pb::TensorProto {
    pb::TensorProto { name: name.into(), dims, data_type: data_type as i32, raw_data, ..Default::default() }
}

fn floats(name: &str, dims: Vec<i64>, values: &[f32]) -> pb::TensorProto {
    tensor(name, dims, DataType::Float, values.iter().flat_map(|v| v.to_le_bytes()).collect())
}

fn node(op: &str, inputs: &[&str], output: &str, attribute: Vec<pb::AttributeProto>) -> pb::NodeProto {
    pb::NodeProto {
        op_type: op.into(),
        name: output.into(),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: vec![output.into()],
        attribute,
        ..Default::default()
    }
}

fn attribute(name: &str, ints: Vec<i64>, i: i64) -> pb::AttributeProto {
    let kind = if ints.is_empty() {
        pb::attribute_proto::AttributeType::Int
    } else {
        pb::attribute_proto::AttributeType::Ints
    };
    pb::AttributeProto { name: name.into(), ints, i, r#type: kind as i32, ..Default::default() }
}

fn value_info(name: &str, dims: [usize; 4]) -> pb::ValueInfoProto {
    let dim = dims.map(|d| pb::tensor_shape_proto::Dimension {
        value: Some(pb::tensor_shape_proto::dimension::Value::DimValue(d as i64)),
        ..Default::default()
    });
    let tensor_type = pb::type_proto::Tensor {
        elem_type: DataType::Float as i32,
        shape: Some(pb::TensorShapeProto { dim: dim.to_vec() }),
    };
    let value = Some(pb::type_proto::Value::TensorType(tensor_type));
    pb::ValueInfoProto {
        name: name.into(),
        r#type: Some(pb::TypeProto { value, ..Default::default() }),
        ..Default::default()
    }
}

/// The nodes and initializers that give the weights `w` (`co` × `ci` × 3 × 3),
/// varying across channels and taps.
fn weights(ci: usize, co: usize, kind: Weights) -> (Vec<pb::NodeProto>, Vec<pb::TensorProto>) {
    let dims = vec![co as i64, ci as i64, 3, 3];
    let spread = (ci as f32 * 9.0).sqrt();
    let kind = if kind == Weights::Int8QdqUpsampled { Weights::Int8Qdq } else { kind };
    if kind == Weights::F32 {
        let values: Vec<f32> = (0..co * ci * 9).map(|i| value(i) / spread).collect();
        return (vec![], vec![floats("w", dims, &values)]);
    }
    // Zero points on both sides of zero (or 0), scales that differ per
    // channel.
    let zero: Vec<i8> = (0..co).map(|o| if kind == Weights::Int8 { (o % 3) as i8 - 1 } else { 0 }).collect();
    let q: Vec<u8> = (0..co * ci * 9).map(|i| (value(i) * 120.0).round() as i8 as u8).collect();
    let scale: Vec<f32> = (0..co).map(|o| (1.0 + (o % 4) as f32 * 0.1) / (120.0 * spread)).collect();
    let initializers = vec![
        tensor("wq", dims, DataType::Int8, q),
        floats("ws", vec![co as i64], &scale),
        tensor("wz", vec![co as i64], DataType::Int8, zero.iter().map(|z| *z as u8).collect()),
    ];
    (vec![node("DequantizeLinear", &["wq", "ws", "wz"], "w", vec![attribute("axis", vec![], 0)])], initializers)
}

/// An ONNX graph of one 3×3 convolution (`ci` → `co` channels, padding 1,
/// stride 1) and a ReLU over a 1×`ci`×`h`×`w` input (upsampled 2× first
/// with `Int8QdqUpsampled`).
pub fn conv_relu(ci: usize, co: usize, (h, w): (usize, usize), kind: Weights) -> Vec<u8> {
    let conv_attrs = vec![
        attribute("kernel_shape", vec![3, 3], 0),
        attribute("pads", vec![1; 4], 0),
        attribute("strides", vec![1, 1], 0),
    ];
    let (mut nodes, mut initializer) = weights(ci, co, kind);
    let factor = if kind == Weights::Int8QdqUpsampled { 2 } else { 1 };
    let input = if matches!(kind, Weights::Int8Qdq | Weights::Int8QdqUpsampled) {
        nodes.push(node("QuantizeLinear", &["x", "xs", "xz"], "xq", vec![]));
        nodes.push(node("DequantizeLinear", &["xq", "xs", "xz"], "xd", vec![]));
        initializer.push(floats("xs", vec![], &[1.0 / 120.0]));
        initializer.push(tensor("xz", vec![], DataType::Uint8, vec![131]));
        "xd"
    } else {
        "x"
    };
    let (input, (h, w)) = if kind == Weights::Int8QdqUpsampled {
        let mode = pb::AttributeProto {
            name: "mode".into(),
            s: b"nearest".to_vec(),
            r#type: pb::attribute_proto::AttributeType::String as i32,
            ..Default::default()
        };
        nodes.push(node("Resize", &[input, "", "up"], "xu", vec![mode]));
        nodes.push(node("QuantizeLinear", &["xu", "xs", "xz"], "xuq", vec![]));
        nodes.push(node("DequantizeLinear", &["xuq", "xs", "xz"], "xud", vec![]));
        initializer.push(floats("up", vec![4], &[1.0, 1.0, 2.0, 2.0]));
        ("xud", (2 * h, 2 * w))
    } else {
        (input, (h, w))
    };
    nodes.extend([node("Conv", &[input, "w", "b"], "conv", conv_attrs), node("Relu", &["conv"], "y", vec![])]);
    initializer.push(floats("b", vec![co as i64], &(0..co).map(|o| value(o + 7) * 0.1).collect::<Vec<_>>()));
    let graph = pb::GraphProto {
        name: "conv".into(),
        node: nodes,
        initializer,
        input: vec![value_info("x", [1, ci, h / factor, w / factor])],
        output: vec![value_info("y", [1, co, h, w])],
        ..Default::default()
    };
    let opset = pb::OperatorSetIdProto { domain: String::new(), version: 13 };
    pb::ModelProto { ir_version: 7, opset_import: vec![opset], graph: Some(graph), ..Default::default() }
        .encode_to_vec()
}
