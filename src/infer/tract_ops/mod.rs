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
//! | QuantizeLinear → DequantizeLinear (INT8 QDQ activations) | `fake_quant::FakeQuant`, one pass in place | two passes through a u8 tensor, a scalar rounding per value |
//!
//! The quantise-dequantise pairs are two ONNX nodes, so
//! [`qdq_pairs::fuse_pairs`] first rewrites each into one node in the
//! protobuf (see [`prepare`]), which also computes an INT8 graph's
//! constant weights to f32 there (`dequant_weights`), since tract would
//! analyse its way to the same constants several times slower.

mod dequant_weights;
mod fake_quant;
mod max_pool;
mod prelu;
mod qdq_pairs;

pub use fake_quant::{fake_quant_in_place, FakeQuant, Grid};
pub use max_pool::{max_pool_2x2, MaxPool2x2};
pub use prelu::{prelu_in_place, ChannelPrelu};
use tract_onnx::model::OnnxOpRegister;

/// Puts fusiond's parsers in `ops`, over tract's own (which they fall back
/// on).
pub fn register(ops: &mut OnnxOpRegister) {
    if let Some(stock) = ops.0.get("MaxPool").copied() {
        max_pool::set_stock(stock);
    }
    ops.insert("MaxPool", max_pool::parse);
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
}

/// Rewrites an INT8 QDQ graph for tract before it is imported: constant
/// weights dequantised ([`dequant_weights::fold`]) and the activations'
/// quantise-dequantise pairs fused ([`qdq_pairs::fuse_pairs`]). A float
/// graph has neither and is left as it is.
pub fn prepare(proto: &mut tract_onnx::pb::ModelProto) -> Prepared {
    let Some(graph) = proto.graph.as_mut() else { return Prepared::default() };
    Prepared { folded: dequant_weights::fold(graph), fused_pairs: qdq_pairs::fuse_pairs(graph) }
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
