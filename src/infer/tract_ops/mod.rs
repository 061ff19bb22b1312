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

mod max_pool;
mod prelu;

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
}
