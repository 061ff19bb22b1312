//! fusiond's own tract ops (src/infer/tract_ops.rs) against tract's own
//! decompositions, on the real ArcFace and its INT8 twin.

use crate::util::{image, int8_models, shared};
use fusiond::infer::{Backend, InputShape, Model, Tensor, TractBackend};
use std::sync::Arc;

/// A real photo as ArcFace's input: 112×112, RGB planes scaled to [-1, 1].
fn face_input() -> Tensor {
    let img = image::imageops::resize(&image("fr_obama.jpg"), 112, 112, image::imageops::FilterType::Triangle);
    let mut data = vec![0f32; 3 * 112 * 112];
    for (i, p) in img.pixels().enumerate() {
        for c in 0..3 {
            data[c * 112 * 112 + i] = (p[c] as f32 - 127.5) / 127.5;
        }
    }
    Tensor::new(&[1, 3, 112, 112], data).unwrap()
}

/// A real photo of two people as YuNet's input: 640×640, BGR planes, 0–255.
fn frame_input() -> Tensor {
    let img = image::imageops::resize(&image("fr_two_people.jpg"), 640, 640, image::imageops::FilterType::Triangle);
    let mut data = vec![0f32; 3 * 640 * 640];
    for (i, p) in img.pixels().enumerate() {
        for c in 0..3 {
            data[c * 640 * 640 + i] = p[2 - c] as f32;
        }
    }
    Tensor::new(&[1, 3, 640, 640], data).unwrap()
}

fn load(backend: TractBackend, file: &std::path::Path, shape: &[usize]) -> Arc<dyn Model> {
    let bytes = Arc::new(std::fs::read(file).unwrap_or_else(|e| panic!("{}: {e}", file.display())));
    backend.load(bytes, &[InputShape::first(shape)]).unwrap()
}

/// The fused and the stock plan of `file` on `input`: both outputs (all of
/// them, concatenated) and the op names of both plans.
fn both(file: &std::path::Path, input: &Tensor) -> [(Vec<f32>, Vec<String>); 2] {
    [TractBackend::default(), TractBackend::default().with_fused_ops(false)]
        .map(|backend| run(&load(backend, file, input.shape()), input))
}

fn count(ops: &[String], name: &str) -> usize {
    ops.iter().filter(|o| *o == name).count()
}

fn max_difference(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).fold(0f32, |m, (p, q)| m.max((p - q).abs()))
}

/// The outputs of one run and the op names of the plan's nodes.
fn run(model: &Arc<dyn Model>, input: &Tensor) -> (Vec<f32>, Vec<String>) {
    let name = model.inputs()[0].name.clone();
    let mut session = model.session().unwrap();
    let out = session.run(&[(&name, input)]).unwrap().iter().flat_map(|(_, t)| t.data().to_vec()).collect();
    let ops = session.profile(&[(&name, input)]).unwrap().unwrap().into_iter().map(|t| t.op.to_string()).collect();
    (out, ops)
}

#[test]
fn the_fused_prelu_gives_tracts_own_outputs_to_1e_5() {
    let input = face_input();
    for file in [shared("models/arcface_fr_feature.onnx"), int8_models().join("arcface_fr_feature_int8.onnx")] {
        let [(fused, fused_ops), (stock, stock_ops)] = both(&file, &input);
        let prelus = fused_ops.iter().filter(|o| o.starts_with("Fusiond") && o.contains("Prelu")).count();
        assert_eq!(prelus, 33, "{}: every PRelu runs fused", file.display());
        assert_eq!(count(&stock_ops, "FusiondPrelu"), 0);
        assert_eq!(count(&fused_ops, "Iff"), 0, "no select of tract's decomposition is left");
        assert_eq!(count(&stock_ops, "Iff"), 33);
        assert_eq!(fused.len(), 512);
        let scale = stock.iter().fold(0f32, |m, v| m.max(v.abs()));
        assert!(scale > 0.1, "a real embedding, not zeros: {scale}");
        let diff = max_difference(&fused, &stock);
        assert!(diff <= 1e-5, "{}: the fused PRelu differs from tract's by {diff}", file.display());
    }
}

/// YuNet on a real photo at 640×640 (its four pools are 2×2, stride 2):
/// every output of the detector's heads the same.
#[test]
fn the_2x2_max_pool_gives_tracts_own_outputs_to_1e_5() {
    let input = frame_input();
    for file in [
        shared("models/face_detection_yunet_2023mar.onnx"),
        int8_models().join("face_detection_yunet_2023mar_int8.onnx"),
    ] {
        let [(fused, fused_ops), (stock, stock_ops)] = both(&file, &input);
        // Standing alone, or taken into the block before it where fusiond's
        // pointwise kernel runs (`+MaxPool2x2`).
        let pools = fused_ops.iter().filter(|o| *o == "FusiondMaxPool2x2" || o.ends_with("+MaxPool2x2")).count();
        assert_eq!(pools, 4, "{}: every pool runs fused", file.display());
        assert_eq!(count(&stock_ops, "FusiondMaxPool2x2"), 0);
        assert_eq!(count(&fused_ops, "OptMaxPool"), 0);
        let diff = max_difference(&fused, &stock);
        assert!(diff <= 1e-5, "{}: the 2x2 pool differs from tract's by {diff}", file.display());
    }
}

/// YuNet and SCRFD on a real photo at 640×640: their 1×1 convolutions of up
/// to 64 input channels and their 3×3 depthwise ones
/// run as fusiond's kernels where the CPU has AVX2 and FMA (tract's own
/// elsewhere), and every output of the heads is tract's own to 1e-5 of the
/// largest.
#[test]
fn the_pointwise_convolutions_give_tracts_own_outputs_to_1e_5() {
    let input = frame_input();
    #[cfg(target_arch = "x86_64")]
    let kernel = std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma");
    #[cfg(not(target_arch = "x86_64"))]
    let kernel = false;
    // Pointwise nodes in all (up to 64 input channels), those that took in the depthwise convolution (and
    // ReLU) after them, those of them that took in a 2×2 pool too, the
    // small-patch convolutions (the first layer; in YuNet also its six
    // 1-channel 3×3 heads) and the depthwise convolutions left on their own.
    for (file, want) in [
        (shared("models/face_detection_yunet_2023mar.onnx"), [17, 14, 2, 7, 6]),
        (shared("models/scrfd_500m_bnkps.onnx"), [10, 5, 0, 1, 15]),
        (int8_models().join("face_detection_yunet_2023mar_int8.onnx"), [17, 14, 2, 7, 6]),
    ] {
        let [(fused, fused_ops), (stock, stock_ops)] = both(&file, &input);
        let want = if kernel { want } else { [0; 5] };
        let ours =
            |part: &str| fused_ops.iter().filter(|o| o.starts_with("FusiondPointwise") && o.contains(part)).count();
        let patch = fused_ops.iter().filter(|o| o.starts_with("FusiondPatchConv")).count();
        let depthwise = fused_ops.iter().filter(|o| o.starts_with("FusiondDepthwise")).count();
        let got = [ours(""), ours("+Depthwise"), ours("+MaxPool"), patch, depthwise];
        assert_eq!(got, want, "{}", file.display());
        assert!(stock_ops.iter().all(|o| !o.starts_with("Fusiond")));
        let scale = stock.iter().fold(0f32, |m, v| m.max(v.abs()));
        assert!(scale > 1.0, "{}: real outputs, not zeros: {scale}", file.display());
        let diff = max_difference(&fused, &stock);
        assert!(diff <= 1e-5 * scale, "{}: differs from tract's by {diff} (largest output {scale})", file.display());
    }
}

/// The INT8 (QDQ) ArcFace and YuNet: every activation quantise-dequantise
/// pair runs as one fused op, and the outputs are tract's own two ops'.
#[test]
fn the_fused_quantise_dequantise_pairs_give_tracts_own_outputs_to_1e_5() {
    let (face, frame) = (face_input(), frame_input());
    for (file, input) in [
        (int8_models().join("arcface_fr_feature_int8.onnx"), &face),
        (int8_models().join("face_detection_yunet_2023mar_int8.onnx"), &frame),
    ] {
        let [(fused, fused_ops), (stock, stock_ops)] = both(&file, input);
        // Standing alone or taken into a PRelu ("FusiondFakeQuant+Prelu+FakeQuant").
        let pairs: usize = fused_ops.iter().map(|o| o.matches("FakeQuant").count()).sum();
        assert!(pairs >= 10, "{}: {pairs} fused pairs", file.display());
        assert_eq!(count(&fused_ops, "QuantizeLinearU8"), 0, "{}: a quantiser was left", file.display());
        let stock_pairs = count(&stock_ops, "QuantizeLinearU8") + count(&stock_ops, "LookupTable");
        assert_eq!(pairs, stock_pairs, "{}: tract's own plan quantises in as many places", file.display());
        let scale = stock.iter().fold(0f32, |m, v| m.max(v.abs()));
        assert!(scale > 0.1, "real outputs, not zeros: {scale}");
        let diff = max_difference(&fused, &stock);
        assert!(diff <= 1e-5, "{}: the fused pairs differ from tract's by {diff}", file.display());
    }
}

/// The detectors' sibling heads run as one convolution a level: SCRFD's
/// three 3×3 over the same 64 channels and YuNet's four 1×1 (their outputs
/// are checked against tract's own by the test above), in the INT8 twins
/// too once their weights are folded.
#[test]
fn the_detectors_sibling_heads_are_merged_into_one_convolution_a_level() {
    for (file, merged) in [
        (shared("models/face_detection_yunet_2023mar.onnx"), 9),
        (shared("models/scrfd_500m_bnkps.onnx"), 6),
        (int8_models().join("face_detection_yunet_2023mar_int8.onnx"), 9),
        (int8_models().join("scrfd_500m_bnkps_int8.onnx"), 6),
    ] {
        let mut proto = tract_onnx::prelude::Framework::proto_model_for_path(&tract_onnx::onnx(), &file).unwrap();
        let prepared = fusiond::infer::tract_ops::prepare(&mut proto);
        assert_eq!(prepared.merged_convs, merged, "{}", file.display());
    }
}

/// An ONNX graph of one 3×3 convolution (`ci` → `co` channels, padding 1,
/// stride 1) and a ReLU over a 1×`ci`×`h`×`w` input, with weights that vary
/// across channels and taps.
fn conv_relu_model(ci: usize, co: usize, (h, w): (usize, usize)) -> Vec<u8> {
    use prost::Message;
    use tract_onnx::pb::{self, tensor_proto::DataType};
    let value = |i: usize| ((i.wrapping_mul(2654435761) >> 8) % 2001) as f32 / 1000.0 - 1.0;
    let weights: Vec<f32> = (0..co * ci * 9).map(|i| value(i) / (ci as f32 * 9.0).sqrt()).collect();
    let tensor = |name: &str, dims: Vec<i64>, values: Vec<f32>| pb::TensorProto {
        name: name.into(),
        dims,
        data_type: DataType::Float as i32,
        raw_data: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        ..Default::default()
    };
    let ints = |name: &str, v: Vec<i64>| pb::AttributeProto {
        name: name.into(),
        ints: v,
        r#type: pb::attribute_proto::AttributeType::Ints as i32,
        ..Default::default()
    };
    let node = |op: &str, inputs: &[&str], output: &str, attribute| pb::NodeProto {
        op_type: op.into(),
        name: output.into(),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: vec![output.into()],
        attribute,
        ..Default::default()
    };
    let value_info = |name: &str, dims: [usize; 4]| {
        let dim = dims.map(|d| pb::tensor_shape_proto::Dimension {
            value: Some(pb::tensor_shape_proto::dimension::Value::DimValue(d as i64)),
            ..Default::default()
        });
        let tensor_type = pb::type_proto::Tensor {
            elem_type: DataType::Float as i32,
            shape: Some(pb::TensorShapeProto { dim: dim.to_vec() }),
        };
        pb::ValueInfoProto {
            name: name.into(),
            r#type: Some(pb::TypeProto {
                value: Some(pb::type_proto::Value::TensorType(tensor_type)),
                ..Default::default()
            }),
            ..Default::default()
        }
    };
    let conv_attrs = vec![ints("kernel_shape", vec![3, 3]), ints("pads", vec![1; 4]), ints("strides", vec![1, 1])];
    let graph = pb::GraphProto {
        name: "conv".into(),
        node: vec![node("Conv", &["x", "w", "b"], "conv", conv_attrs), node("Relu", &["conv"], "y", vec![])],
        initializer: vec![
            tensor("w", vec![co as i64, ci as i64, 3, 3], weights),
            tensor("b", vec![co as i64], (0..co).map(|o| value(o + 7) * 0.1).collect()),
        ],
        input: vec![value_info("x", [1, ci, h, w])],
        output: vec![value_info("y", [1, co, h, w])],
        ..Default::default()
    };
    let opset = pb::OperatorSetIdProto { domain: String::new(), version: 13 };
    pb::ModelProto { ir_version: 7, opset_import: vec![opset], graph: Some(graph), ..Default::default() }
        .encode_to_vec()
}

/// A 3×3 convolution over 512 channels (4608 taps, the swapper's smallest
/// that fusiond's blocked product takes) and its ReLU run as one
/// `FusiondGemmConv+Relu` where the CPU has AVX2 and FMA, and give tract's
/// own outputs to 1e-5 of the largest; over 256 channels (2304 taps) tract's
/// own product runs. The map (9×13) and the 20 output channels are not
/// whole tiles.
#[test]
fn the_blocked_product_gives_tracts_own_outputs_to_1e_5() {
    #[cfg(target_arch = "x86_64")]
    let kernel = std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma");
    #[cfg(not(target_arch = "x86_64"))]
    let kernel = false;
    let dir = tempfile::tempdir().unwrap();
    for (ci, want) in [(512, usize::from(kernel)), (256, 0)] {
        let file = dir.path().join(format!("conv{ci}.onnx"));
        std::fs::write(&file, conv_relu_model(ci, 20, (9, 13))).unwrap();
        let values: Vec<f32> = (0..ci * 9 * 13).map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0).collect();
        let input = Tensor::new(&[1, ci, 9, 13], values).unwrap();
        let [(fused, fused_ops), (stock, stock_ops)] = both(&file, &input);
        assert_eq!(count(&fused_ops, "FusiondGemmConv+Relu"), want, "{ci} channels: {fused_ops:?}");
        assert!(stock_ops.iter().all(|o| !o.starts_with("Fusiond")));
        let scale = stock.iter().fold(0f32, |m, v| m.max(v.abs()));
        let zeros = stock.iter().filter(|v| **v == 0.0).count();
        assert!(scale > 0.1 && zeros > 0, "{ci} channels: outputs on both sides of the ReLU: {scale}, {zeros} zeros");
        let diff = max_difference(&fused, &stock);
        assert!(diff <= 1e-5 * scale, "{ci} channels: differs from tract's by {diff} (largest output {scale})");
    }
}
