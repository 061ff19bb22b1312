//! fusiond's own tract ops (crates/tract-ops) against tract's own
//! decompositions, on the real ArcFace and its INT8 twin.

use crate::conv_graph::{self, Weights};
use crate::util::{image, int8_models, shared};
use fusiond::infer::{Backend, InputShape, Int8Activations, Model, Precision, Tensor, TractBackend};
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
    backend.load(bytes, &[InputShape::first(shape)], Precision::Fp32).unwrap()
}

/// The fused and the stock plan of `file` on `input`: both outputs (all of
/// them, concatenated) and the op names of both plans. An INT8 graph's
/// activations are rounded in both, as tract's own plan does.
fn both(file: &std::path::Path, input: &Tensor) -> [(Vec<f32>, Vec<String>); 2] {
    let fused = TractBackend::default().with_int8_activations(Int8Activations::Grid);
    [fused, TractBackend::default().with_fused_ops(false)]
        .map(|backend| run(&load(backend, file, input.shape()), input))
}

fn count(ops: &[String], name: &str) -> usize {
    ops.iter().filter(|o| *o == name).count()
}

fn max_difference(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).fold(0f32, |m, (p, q)| m.max((p - q).abs()))
}

/// The fused plan's outputs against tract's own (`stock`) for `file` on
/// `input`: within `tolerance`. Where the plan runs the depthwise half of
/// an INT8 block as integers (`+DepthwiseInt8`, with AVX-512 VNNI), its
/// exact sums land a step of the grid away from tract's f32 ones at ties,
/// and each such step travels on through the layers after it (on YuNet,
/// 0.024 apart on average, 0.37 at most, of outputs up to 6.5). There, the
/// outputs must be as close to the FP32 model's as tract's own INT8 ones
/// are, on average within 5 % (both 0.049, the quantisation's own error)
/// and at the worst within 25 % (0.68 against 0.73).
fn assert_tracts_own(
    file: &std::path::Path,
    input: &Tensor,
    fused: (&[f32], &[String]),
    stock: &[f32],
    tolerance: f32,
) {
    let (fused, ops) = fused;
    if !ops.iter().any(|o| o.contains("+DepthwiseInt8")) {
        let diff = max_difference(fused, stock);
        assert!(diff <= tolerance, "{}: differs from tract's by {diff}", file.display());
        return;
    }
    let name = file.file_name().unwrap().to_string_lossy().replace("_int8", "");
    let (fp32, _) = run(&load(TractBackend::default(), &shared(&format!("models/{name}")), input.shape()), input);
    let mean = |x: &[f32]| x.iter().zip(&fp32).map(|(a, b)| f64::from((a - b).abs())).sum::<f64>() / x.len() as f64;
    let (ours, tracts) = (mean(fused), mean(stock));
    assert!(ours <= 1.05 * tracts, "{}: {ours} from FP32 on average, tract's own {tracts}", file.display());
    let (ours, tracts) = (max_difference(fused, &fp32), max_difference(stock, &fp32));
    assert!(ours <= 1.25 * tracts, "{}: {ours} from FP32 at the worst, tract's own {tracts}", file.display());
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
        assert_tracts_own(&file, &input, (&fused, &fused_ops), &stock, 1e-5);
    }
}

/// YuNet and SCRFD on a real photo at 640×640: their 1×1 convolutions of up
/// to 160 input and output channels and their 3×3 depthwise ones
/// run as fusiond's kernels where the CPU has AVX2 and FMA (tract's own
/// elsewhere), and every output of the heads is tract's own to 1e-5 of the
/// largest.
#[test]
fn the_pointwise_convolutions_give_tracts_own_outputs_to_1e_5() {
    let input = frame_input();
    let kernel = fusiond::infer::tract_ops::cpu::has(fusiond::infer::tract_ops::cpu::Feature::Avx2);
    // Pointwise nodes in all (up to 160 input and output channels, or up to
    // 16 output channels), those that took in the depthwise convolution (and
    // ReLU) after them, those of them that took in a 2×2 pool too, the
    // small-patch convolutions (the first layer; in SCRFD also its seven
    // 3×3s over 16 channels; in YuNet also its six
    // 1-channel 3×3 heads) and the depthwise convolutions left on their own.
    for (file, want) in [
        (shared("models/face_detection_yunet_2023mar.onnx"), [17, 14, 2, 7, 6]),
        (shared("models/scrfd_500m_bnkps.onnx"), [17, 9, 0, 8, 11]),
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
        assert_tracts_own(&file, &input, (&fused, &fused_ops), &stock, 1e-5 * scale);
    }
}

/// The INT8 (QDQ) ArcFace and YuNet: every activation quantise-dequantise
/// pair runs as one fused op, but those whose input is already on their
/// grid, which are dropped (YuNet's 24 after its max poolings, nearest
/// upsamplings, and the heads' transposes and reshapes, but for the 6
/// whose outputs are the graph's), and the outputs are tract's own two
/// ops'.
#[test]
fn the_fused_quantise_dequantise_pairs_give_tracts_own_outputs_to_1e_5() {
    let (face, frame) = (face_input(), frame_input());
    for (file, input, dropped) in [
        (int8_models().join("arcface_fr_feature_int8.onnx"), &face, 0),
        (int8_models().join("face_detection_yunet_2023mar_int8.onnx"), &frame, 24),
    ] {
        let [(fused, fused_ops), (stock, stock_ops)] = both(&file, input);
        // Standing alone or taken into a PRelu ("FusiondFakeQuant+Prelu+FakeQuant").
        let pairs: usize = fused_ops.iter().map(|o| o.matches("FakeQuant").count()).sum();
        assert!(pairs >= 10, "{}: {pairs} fused pairs", file.display());
        assert_eq!(count(&fused_ops, "QuantizeLinearU8"), 0, "{}: a quantiser was left", file.display());
        let stock_pairs = count(&stock_ops, "QuantizeLinearU8") + count(&stock_ops, "LookupTable");
        assert_eq!(pairs + dropped, stock_pairs, "{}: tract's own plan quantises in as many places", file.display());
        let scale = stock.iter().fold(0f32, |m, v| m.max(v.abs()));
        assert!(scale > 0.1, "real outputs, not zeros: {scale}");
        assert_tracts_own(&file, input, (&fused, &fused_ops), &stock, 1e-5);
    }
}

/// SCRFD's two nearest upsamplings (their `sizes` read from the lateral
/// maps' shapes) run as tract's `NearestUpsample` rather than its generic
/// Resize, in the INT8 twin too; the FP32 heads' outputs are tract's own
/// to 1e-5 of the largest. (The INT8 twin's outputs are left out: with or
/// without this change, one of its roundings lands a step away from
/// tract's own, 0.037 of 5.5.)
#[test]
fn the_resizes_to_whole_multiples_run_as_upsamplings_with_tracts_own_outputs() {
    let input = frame_input();
    for file in [shared("models/scrfd_500m_bnkps.onnx"), int8_models().join("scrfd_500m_bnkps_int8.onnx")] {
        let [(fused, fused_ops), (stock, stock_ops)] = both(&file, &input);
        assert_eq!(count(&fused_ops, "NearestUpsample"), 2, "{}", file.display());
        assert_eq!(count(&fused_ops, "Resize"), 0, "{}", file.display());
        assert_eq!(count(&stock_ops, "Resize"), 2, "{}: tract's own plan resizes", file.display());
        if file.to_string_lossy().contains("int8") {
            continue;
        }
        let scale = stock.iter().fold(0f32, |m, v| m.max(v.abs()));
        assert!(scale > 1.0, "{}: real outputs, not zeros: {scale}", file.display());
        let diff = max_difference(&fused, &stock);
        assert!(diff <= 1e-5 * scale, "{}: differs from tract's by {diff} (largest output {scale})", file.display());
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
        let mut proto = fusiond::infer::tract_ops::tract_onnx::prelude::Framework::proto_model_for_path(
            &fusiond::infer::tract_ops::tract_onnx::onnx(),
            &file,
        )
        .unwrap();
        let prepared = fusiond::infer::tract_ops::prepare(&mut proto, fusiond::infer::tract_ops::Int8Activations::Grid);
        assert_eq!(prepared.merged_convs, merged, "{}", file.display());
    }
}

/// A 3×3 convolution over 512 channels (4608 taps, the swapper's smallest
/// that fusiond's blocked product takes) and its ReLU run as one
/// `FusiondGemmConv+Relu` where the CPU has AVX2 and FMA, and give tract's
/// own outputs to 1e-5 of the largest, with f32 weights and with INT8 ones
/// too big for `dequant_weights` to compute before import (230 channels:
/// 4.2 MB as f32, past tract's 4 MiB folding budget); over 256 channels
/// (2304 taps) too with few output channels (20), but with 80 tract's own
/// product runs. With symmetric INT8 weights and
/// the input on a u8 grid, the integer product runs where the CPU has VNNI
/// (`FusiondGemmInt8Conv+Relu`), with AVX-512 VNNI from 1152 taps, also
/// when the weights were folded to f32, and behind a nearest upsampling
/// whose repeated pair is dropped. The map (9×13) and the output channels
/// are not whole tiles.
#[test]
fn the_blocked_product_gives_tracts_own_outputs_to_1e_5() {
    // What the kernels may use here: the CPU's features under FUSIOND_CPU's cap.
    use fusiond::infer::tract_ops::cpu::{has, Feature};
    let (kernel, vnni512, vnni256) = (has(Feature::Avx2), has(Feature::Avx512Vnni), has(Feature::AvxVnni));
    let dir = tempfile::tempdir().unwrap();
    let (f32_op, int8_op) = ("FusiondGemmConv+Relu", "FusiondGemmInt8Conv+Relu");
    // 4608 taps take the integer product with either VNNI, 1152 with
    // AVX-512 VNNI only.
    let qdq_op = if vnni512 || vnni256 { int8_op } else { f32_op };
    let cases = [
        (512, 20, Weights::F32, (f32_op, usize::from(kernel))),
        (256, 20, Weights::F32, (f32_op, usize::from(kernel))),
        (256, 80, Weights::F32, (f32_op, 0)),
        (512, 230, Weights::Int8, (f32_op, usize::from(kernel))),
        (512, 230, Weights::Int8Qdq, (qdq_op, usize::from(kernel))),
        // Weights small enough to be folded to f32 before import, and
        // found again as integers.
        (128, 40, Weights::Int8Qdq, (int8_op, usize::from(vnni512))),
        // The same behind a nearest upsampling whose repeated pair is
        // dropped: the input's grid is found through the upsampling.
        (128, 40, Weights::Int8QdqUpsampled, (int8_op, usize::from(vnni512))),
    ];
    for (ci, co, weights, (op, want)) in cases {
        let file = dir.path().join(format!("conv{ci}-{weights:?}.onnx"));
        std::fs::write(&file, conv_graph::conv_relu(ci, co, (9, 13), weights)).unwrap();
        let values: Vec<f32> = (0..ci * 9 * 13).map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0).collect();
        let input = Tensor::new(&[1, ci, 9, 13], values).unwrap();
        let [(fused, fused_ops), (stock, stock_ops)] = both(&file, &input);
        let case = format!("{ci} → {co} channels, {weights:?}");
        assert_eq!(count(&fused_ops, op), want, "{case}: {fused_ops:?}");
        assert!(stock_ops.iter().all(|o| !o.starts_with("Fusiond")));
        let scale = stock.iter().fold(0f32, |m, v| m.max(v.abs()));
        let zeros = stock.iter().filter(|v| **v == 0.0).count();
        assert!(scale > 0.1 && zeros > 0, "{case}: outputs on both sides of the ReLU: {scale}, {zeros} zeros");
        let diff = max_difference(&fused, &stock);
        assert!(diff <= 1e-5 * scale, "{case}: differs from tract's by {diff} (largest output {scale})");
    }
}

/// With `tract_int8_activations = "float"` (the default on a CPU without an
/// 8-bit dot product) the INT8 ArcFace and YuNet run no rounding of their
/// activations: no pair is left in the plan, and the outputs are closer to
/// the FP32 model's than those of the rounded plan (`grid`), whose error
/// is the activations' rounding on top of the weights'.
#[test]
fn int8_graphs_with_float_activations_round_nothing_and_stay_closer_to_fp32() {
    let (face, frame) = (face_input(), frame_input());
    for (name, input) in [("arcface_fr_feature", &face), ("face_detection_yunet_2023mar", &frame)] {
        let file = int8_models().join(format!("{name}_int8.onnx"));
        let with = |a| run(&load(TractBackend::default().with_int8_activations(a), &file, input.shape()), input);
        let ((float, float_ops), (grid, grid_ops)) = (with(Int8Activations::Float), with(Int8Activations::Grid));
        let (fp32, _) =
            run(&load(TractBackend::default(), &shared(&format!("models/{name}.onnx")), input.shape()), input);
        let rounds = |ops: &[String]| ops.iter().filter(|o| o.contains("FakeQuant") || o.contains("Quantize")).count();
        assert_eq!(rounds(&float_ops), 0, "{name}: {float_ops:?}");
        assert!(rounds(&grid_ops) >= 10, "{name}: {grid_ops:?}");
        let mean = |x: &[f32]| x.iter().zip(&fp32).map(|(a, b)| f64::from((a - b).abs())).sum::<f64>() / x.len() as f64;
        let (f, g) = (mean(&float), mean(&grid));
        eprintln!("{name}: mean distance from FP32, float activations {f:.5}, rounded {g:.5}");
        assert!(f < g, "{name}: float activations {f} from FP32 on average, rounded ones {g}");
    }
}
