//! fusiond's own tract ops: one-pass kernels for ONNX ops that tract runs
//! slowly on the shared models. Each replaces the op's parser in tract's
//! ONNX registry, so the kernel is in the typed model before tract optimises
//! it; where a kernel's preconditions do not hold, tract's own op runs.
//! `fusiond profile MODEL --tract-stock-ops` (inference.tract_fused_ops =
//! false) runs tract's ops instead, to compare.
//!
//! | ONNX op | kernel | where tract is slow |
//! |---|---|---|
//! | PRelu | `prelu::ChannelPrelu`, one pass in place | a multiply, a comparison and a select, three passes |
//! | MaxPool 2×2, stride 2 | `max_pool::MaxPool2x2`, two rows at a time | a generic patch walk per output value |
//! | Conv 1×1 (pointwise) of up to 160 input and output channels, or up to 16 output channels (→ Relu), f32, x86_64 with AVX2 and FMA | `pointwise::PointwiseConv`, straight from NCHW rows | it copies the whole input into panels first |
//! | Conv with at most 144 taps a patch (3 × 3 × 3: the detectors' first layer; 3 × 3 × 16: SCRFD's heads), → Relu | `patch_conv::PatchConv`, the patches of a few rows into the pointwise kernel | a direct loop over every tap |
//! | Conv with at least 4096 taps a patch (the swapper's 3×3 over 512 and 1024 channels), or at least 512 and at most 64 output channels (SCRFD's merged heads), → Relu, f32 weights or INT8 ones that tract dequantises as it runs (`int8_weights`), x86_64 with AVX2 and FMA | `gemm_conv`, as `PatchConv`'s blocked product (`fusiond_kernels::gemm`): patches packed a block of taps at a time, the weights once (INT8 ones kept INT8, dequantised a block at a time) | one product over all the taps: each panel of weights is read from beyond the L2 cache again for every 6 pixels; INT8 weights dequantised whole every run |
//! | Conv 3×3 depthwise, stride 1 or 2 (→ Relu), f32, x86_64 with AVX2 and FMA | `depthwise::Depthwise`, four rows at a time | a generic loop over every tap |
//! | Conv 1×1 (→ Relu) → Conv 3×3 depthwise, stride 1 or 2 (→ Relu) (→ MaxPool 2×2 after stride 1), with the INT8 pairs between | `pw_dw::PointwiseDepthwise`, a few rows at a time in the L2 cache; in INT8 at stride 1 with AVX-512 VNNI, both halves as integers (`fusiond_kernels::pointwise_int8`, `fusiond_kernels::depthwise_int8`) | each node writes its whole output to memory and the next reads it back; INT8 runs in f32 |
//! | QuantizeLinear → DequantizeLinear (INT8 QDQ activations) | `fake_quant::FakeQuant`, one pass in place; none where its input is already on its grid (`qdq_pairs::drop_repeats`), and none at all on a CPU without an 8-bit dot product, the activations left in f32 (`int8_activations`) | two passes through a u8 tensor, a scalar rounding per value |
//! | Resize, nearest, to constant `sizes` that repeat each pixel a whole number of times | tract's `NearestUpsample` ([`optimize`], `upsample`), rows copied | a generic resampling plan, axis by axis |
//!
//! The quantise-dequantise pairs are two ONNX nodes, so
//! [`qdq_pairs::fuse_pairs`] first rewrites each into one node in the protobuf
//! (see [`prepare`]), which also computes an INT8 graph's constant weights to
//! f32 there (`dequant_weights`), since tract's own analysis reaches the same
//! constants much more slowly. There too, convolutions that read one input with
//! one geometry (the detectors' heads) become one and a Split
//! ([`sibling_convs::merge`]), so that tract packs their input once.
//!
//! The thresholds in this table, and the measurements behind them, are in
//! this crate's README.md.
//!
//! No `unsafe` here but five output tensors left uninitialised for an op
//! that writes every value (each marked `#[allow(unsafe_code)]` with its
//! reason); the vector code is crates/kernels'.
#![deny(unsafe_code)]

mod depthwise;
mod dequant_weights;
mod fake_quant;
mod gemm_conv;
mod geometry;
mod half_cast;
mod int8_activations;
mod int8_weights;
mod max_pool;
mod patch_conv;
mod pointwise;
mod prelu;
mod pw_dw;
mod qdq_pairs;
mod share;
mod sibling_convs;
mod upsample;

pub use fake_quant::FakeQuant;
pub use fusiond_kernels::cpu;
pub use fusiond_kernels::prelu::prelu_in_place;
pub use fusiond_kernels::quant::{fake_quant_in_place, Grid};
pub use int8_activations::Int8Activations;
pub use max_pool::{max_pool_2x2, MaxPool2x2};
pub use prelu::ChannelPrelu;
use share::share_rows;
use std::sync::OnceLock;
use tract_onnx::model::{OnnxOpRegister, ParsingContext};
use tract_onnx::pb::NodeProto;
use tract_onnx::tract_core::floats::FloatPrecisionTranslator;
use tract_onnx::tract_core::transform::ModelTransform;
use tract_onnx::tract_hir::internal::*;
pub use ::{fusiond_kernels, tract_linalg, tract_onnx};

type Parser = fn(&ParsingContext, &NodeProto) -> TractResult<(Box<dyn InferenceOp>, Vec<String>)>;

/// tract's own parser for an ONNX op whose parser fusiond replaces, for the
/// nodes fusiond's kernel does not fit. Set once, by [`register`].
pub struct StockParser {
    op: &'static str,
    parser: OnceLock<Parser>,
}

impl StockParser {
    const fn new(op: &'static str) -> StockParser {
        StockParser { op, parser: OnceLock::new() }
    }

    /// Keeps tract's parser for this op from `ops`, before it is replaced.
    fn take_from(&self, ops: &OnnxOpRegister) {
        if let Some(stock) = ops.0.get(self.op).copied() {
            let _ = self.parser.set(stock);
        }
    }

    fn parse(&self, ctx: &ParsingContext, node: &NodeProto) -> TractResult<(Box<dyn InferenceOp>, Vec<String>)> {
        match self.parser.get() {
            Some(stock) => stock(ctx, node),
            None => bail!("{} {}: tract has no parser for this op", self.op, node.name),
        }
    }
}

/// Puts fusiond's parsers in `ops`, over tract's own (which they fall back
/// on). The first call logs the kernels' CPU features (and a bad
/// `FUSIOND_CPU`).
pub fn register(ops: &mut OnnxOpRegister) {
    static SAID: OnceLock<()> = OnceLock::new();
    SAID.get_or_init(|| {
        if let Some(problem) = cpu::override_problem() {
            log::warn!("{problem}");
        }
        log::debug!("fusiond kernels: {}", cpu::describe());
    });
    max_pool::STOCK.take_from(ops);
    ops.insert("MaxPool", max_pool::parse);
    pointwise::STOCK.take_from(ops);
    ops.insert("Conv", pointwise::parse);
    ops.insert("PRelu", prelu::parse);
    ops.insert(qdq_pairs::OP_TYPE, fake_quant::parse);
}

/// What [`prepare`] changed in a graph.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Prepared {
    /// Constant dequantisers computed into f32 initializers.
    pub folded: usize,
    /// Quantise-dequantise pairs fused into one node.
    pub fused_pairs: usize,
    /// Fused pairs dropped, their input already on their grid.
    pub repeated_pairs: usize,
    /// Fused pairs left out, the activations kept in f32
    /// ([`Int8Activations::Float`]).
    pub float_pairs: usize,
    /// Convolutions merged into a sibling that reads the same input.
    pub merged_convs: usize,
}

/// Rewrites a graph for tract before it is imported. In an INT8 QDQ graph,
/// constant weights are dequantised ([`dequant_weights::fold`]) and the
/// activations' quantise-dequantise pairs fused ([`qdq_pairs::fuse_pairs`]),
/// those whose input is already on their grid dropped
/// ([`qdq_pairs::drop_repeats`]), and with [`Int8Activations::Float`] the
/// others too, a ReLU kept where one clamps ([`int8_activations::to_float`]); in any graph, convolutions of one
/// input and geometry are merged ([`sibling_convs::merge`]), after the
/// folding that makes an INT8 graph's weights constants.
pub fn prepare(proto: &mut tract_onnx::pb::ModelProto, activations: Int8Activations) -> Prepared {
    let opset =
        proto.opset_import.iter().find(|o| o.domain.is_empty() || o.domain == "ai.onnx").map_or(0, |o| o.version);
    let Some(graph) = proto.graph.as_mut() else { return Prepared::default() };
    let folded = dequant_weights::fold(graph);
    let fused_pairs = qdq_pairs::fuse_pairs(graph);
    // A repeat's input is on its grid already, so also clamped where that
    // grid starts at 0: with f32 activations, its ReLU would be a repeat.
    let repeated_pairs = qdq_pairs::drop_repeats(graph);
    let float_pairs = match activations {
        Int8Activations::Grid => 0,
        Int8Activations::Float => int8_activations::to_float(graph),
    };
    let merged_convs = sibling_convs::merge(graph, opset);
    Prepared { folded, fused_pairs, repeated_pairs, float_pairs, merged_convs }
}

/// tract's `into_optimized`, with fusiond's rewrites of the typed model
/// between its declutter and codegen passes where `fused` is set: the
/// Resizes that repeat pixels become upsamplings ([`upsample::lower`]),
/// which needs their `sizes` folded to constants first. With `half`, the
/// decluttered graph's f32 weights and activations become f16 (tract's
/// float translator), inputs and outputs included; fusiond's own ops, which
/// compute in f32, keep f32 with casts around them, and where `fused` is
/// set so do depthwise convolutions, with fusiond's vector casts
/// ([`half_cast`]) in place of tract's.
pub fn optimize(model: InferenceModel, fused: bool, half: bool) -> TractResult<TypedModel> {
    let mut typed = model.into_typed()?;
    typed.declutter()?;
    if fused && upsample::lower(&mut typed)? > 0 {
        typed.compact()?;
    }
    if half {
        let to_half = FloatPrecisionTranslator::with_filter(DatumType::F32, DatumType::F16, move |node| {
            let kept_f32 = node.op.name().starts_with("Fusiond") || (fused && half_cast::is_depthwise(node));
            !kept_f32
        });
        to_half.transform(&mut typed)?;
        typed.declutter()?;
        if fused && half_cast::take_over(&mut typed)? > 0 {
            typed.compact()?;
        }
    }
    typed.optimize()?;
    Ok(typed)
}

/// Whether `t` holds f32 values, as many as its dims say.
fn holds_f32(t: &tract_onnx::pb::TensorProto) -> bool {
    use tract_onnx::pb::tensor_proto::DataType;
    let count = element_count(&t.dims).and_then(|n| usize::try_from(n).ok());
    let held = if t.raw_data.is_empty() {
        Some(t.float_data.len())
    } else {
        Some(t.raw_data.len() / 4).filter(|_| t.raw_data.len().is_multiple_of(4))
    };
    t.data_type == DataType::Float as i32 && count.is_some() && count == held
}

/// The values of an f32 initializer, when it holds as many as its dims say.
fn floats(t: &tract_onnx::pb::TensorProto) -> Option<Vec<f32>> {
    if !holds_f32(t) {
        return None;
    }
    Some(if t.raw_data.is_empty() {
        t.float_data.clone()
    } else {
        t.raw_data.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
    })
}

/// An f32 initializer of `values`, little-endian in its raw data.
fn f32_initializer(name: &str, dims: &[i64], values: &[f32]) -> tract_onnx::pb::TensorProto {
    tract_onnx::pb::TensorProto {
        name: name.into(),
        dims: dims.to_vec(),
        data_type: tract_onnx::pb::tensor_proto::DataType::Float as i32,
        raw_data: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        ..Default::default()
    }
}

/// Removes the initializers (and graph inputs) among `sources` that no
/// node reads and the graph does not output.
fn drop_unread(graph: &mut tract_onnx::pb::GraphProto, sources: std::collections::HashSet<String>) {
    let read: std::collections::HashSet<&str> = graph
        .node
        .iter()
        .flat_map(|n| n.input.iter())
        .chain(graph.output.iter().map(|o| &o.name))
        .map(String::as_str)
        .collect();
    let unread: std::collections::HashSet<String> =
        sources.into_iter().filter(|n| !read.contains(n.as_str())).collect();
    graph.initializer.retain(|t| !unread.contains(&t.name));
    graph.input.retain(|i| !unread.contains(&i.name));
}

/// The `co` biases of a convolution: its constant f32 bias input, or zeros
/// without one; `None` for any other.
fn const_bias(bias: Option<&TypedFact>, co: usize) -> Option<Vec<f32>> {
    let Some(b) = bias else { return Some(vec![0f32; co]) };
    let b = b.konst.as_ref()?;
    if b.datum_type() != f32::datum_type() || b.len() != co || b.rank() > 1 {
        return None;
    }
    Some(b.try_as_plain_ram().ok()?.as_slice::<f32>().ok()?.to_vec())
}

/// Whether `node` is `max(x, 0)` of the output of node `from`, as tract
/// wires an ONNX Relu, without broadcasting `x` to a bigger shape.
fn is_relu(model: &TypedModel, node: &TypedNode, from: usize) -> bool {
    let Some(bin) = node.op_as::<tract_onnx::tract_core::ops::binary::TypedBinOp>() else { return false };
    let [a, b] = node.inputs[..] else { return false };
    let other = if a.node == from { b } else { a };
    let zero = model.outlet_fact(other).ok().and_then(|f| f.konst.clone().or_else(|| f.uniform.clone()));
    let is_zero =
        zero.is_some_and(|z| z.is_uniform() && z.len() >= 1 && z.cast_to_scalar::<f32>().is_ok_and(|v| v == 0.0));
    let same_shape = match (model.outlet_fact(OutletId::new(from, 0)), model.outlet_fact(node.id.into())) {
        (Ok(i), Ok(o)) => i.shape == o.shape,
        _ => false,
    };
    bin.0.is::<tract_onnx::tract_core::ops::math::Max>()
        && (a.node == from) != (b.node == from)
        && is_zero
        && same_shape
}

/// What an op with `relu` and `grid` so far takes in next from the node
/// that alone reads it: its ReLU, or then the quantise-dequantise pair.
enum Tail {
    Relu,
    Grid(Grid),
}

fn next_tail(model: &TypedModel, node: &TypedNode, relu: bool, grid: Option<Grid>) -> TractResult<Option<Tail>> {
    let Some(next) = model.single_succ(node.id)? else { return Ok(None) };
    Ok(match fake_quant_grid(next) {
        _ if grid.is_some() => None,
        Some(grid) => Some(Tail::Grid(grid)),
        None if !relu && is_relu(model, next, node.id) => Some(Tail::Relu),
        None => None,
    })
}

/// The grid whose values `outlet` holds: the output of a
/// quantise-dequantise pair, or of an op that takes one in, through the
/// ops after them that only choose or move values ([`keeps_values`]),
/// where `qdq_pairs::drop_repeats` dropped the pair that stood after them.
fn output_grid(model: &TypedModel, outlet: OutletId) -> Option<Grid> {
    let node = model.node(outlet.node);
    if outlet.slot != 0 {
        return None;
    }
    if let Some(op) = node.op_as::<pw_dw::PointwiseDepthwise>() {
        return op.out_grid();
    }
    if let Some(op) = node.op_as::<patch_conv::PatchConv>() {
        return op.out_grid();
    }
    if let Some(op) = node.op_as::<depthwise::Depthwise>() {
        return op.out_grid;
    }
    match fake_quant_grid(node) {
        Some(grid) => Some(grid),
        None if keeps_values(node) && !node.inputs.is_empty() => output_grid(model, node.inputs[0]),
        None => None,
    }
}

/// Whether `node`'s output holds only values of its first input, chosen or
/// moved: a max pooling, an axis change, a slice, or a nearest resize (as
/// tract-onnx wires it, or as tract's core op and upsampling after
/// decluttering) that does not crop, which could extrapolate a value.
fn keeps_values(node: &TypedNode) -> bool {
    use tract_onnx::tract_core::ops::array::Slice;
    use tract_onnx::tract_core::ops::cnn::MaxPool;
    use tract_onnx::tract_core::ops::nn::resize::{Interpolator, NearestUpsample, Resize};
    use tract_onnx_opl::resize::{CoordTransform, Resize as OnnxResize};
    let nearest = |interpolator: &Interpolator| matches!(interpolator, Interpolator::Nearest);
    let onnx = node.op_as::<OnnxResize>();
    node.op_is::<MaxPool2x2>()
        || node.op_is::<MaxPool>()
        || node.op_is::<AxisOp>()
        || node.op_is::<Slice>()
        || node.op_is::<NearestUpsample>()
        || onnx.is_some_and(|r| nearest(&r.interpolator) && matches!(r.coord_transformer, CoordTransform::Plain(_)))
        || node.op_as::<Resize>().is_some_and(|r| nearest(&r.interpolator))
}

/// The grid of `node` where it is a [`FakeQuant`] of one input.
fn fake_quant_grid(node: &TypedNode) -> Option<Grid> {
    node.op_as::<FakeQuant>().filter(|_| node.inputs.len() == 1).map(FakeQuant::grid)
}

/// How many values a tensor of `dims` holds; `None` for a negative
/// dimension or a count beyond i64 (a hostile file's dims).
fn element_count(dims: &[i64]) -> Option<i64> {
    dims.iter().try_fold(1i64, |n, &d| if d < 0 { None } else { n.checked_mul(d) })
}

/// Drops the nodes of `graph` whose index `dropped` marks, keeping the
/// others in order.
fn remove_nodes(graph: &mut tract_onnx::pb::GraphProto, dropped: &[bool]) {
    let nodes = std::mem::take(&mut graph.node);
    graph.node = nodes.into_iter().zip(dropped).filter(|(_, d)| !**d).map(|(n, _)| n).collect();
}
