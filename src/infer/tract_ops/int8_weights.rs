//! The INT8 weights behind a convolution, as tract wires a per-channel
//! `DequantizeLinear` of a constant: `cast` to f32, `sub` the zero points,
//! `mul` by the scales. `dequant_weights` computes such weights to f32 before
//! import only up to tract's folding budget (4 MiB); bigger ones (the
//! inswapper-size swapper's, 9216 taps over 1024 channels) stay INT8 and tract
//! dequantises them every run, into its own product. [`behind`] reads them
//! back out of that chain, so the blocked product (`gemm_kernel`) can hold
//! them as INT8 and dequantise a block at a time, with tract's arithmetic.

use std::sync::Arc;
use tract_onnx::tract_core::ops::binary::{BinMiniOp, TypedBinOp};
use tract_onnx::tract_core::ops::cast::Cast;
use tract_onnx::tract_core::ops::math::{Mul, Sub};
use tract_onnx::tract_hir::internal::*;

/// INT8 weights (OIHW) and each output channel's scale and zero point: the
/// weight `q` of channel `o` is `(q − zero[o]) × scale[o]`, computed in f32
/// as tract computes it (a subtraction, then a product; no FMA).
#[derive(Debug, Clone)]
pub struct Int8Weights {
    pub values: Arc<Tensor>,
    pub scale: Vec<f32>,
    pub zero: Vec<f32>,
}

/// The INT8 weights that outlet `w` of `model` dequantises, where `w` is the
/// `mul` of the `sub` of the `cast` of a constant i8 tensor, with constant
/// scales and zero points per output channel (or one for all); `None` for
/// anything else.
pub fn behind(model: &TypedModel, w: OutletId) -> Option<Int8Weights> {
    let mul = model.node(w.node);
    let [sub_out, scale] = binary::<Mul>(mul)?;
    let sub = model.node(sub_out.node);
    let [cast_out, zero] = binary::<Sub>(sub)?;
    let cast = model.node(cast_out.node);
    let is_f32_cast = cast.op_as::<Cast>().is_some_and(|c| c.to == f32::datum_type());
    let [values] = cast.inputs[..] else { return None };
    let values = model.outlet_fact(values).ok()?.konst.clone()?;
    if !is_f32_cast || values.datum_type() != i8::datum_type() || values.rank() != 4 {
        return None;
    }
    let co = values.shape()[0];
    let scale = per_channel(model, scale, co)?;
    let zero = per_channel(model, zero, co)?;
    Some(Int8Weights { values, scale, zero })
}

/// The two inputs of `node` where it is the binary op `B`, in order.
fn binary<B: BinMiniOp>(node: &TypedNode) -> Option<[OutletId; 2]> {
    let op = node.op_as::<TypedBinOp>()?;
    let [a, b] = node.inputs[..] else { return None };
    op.0.is::<B>().then_some([a, b])
}

/// The `co` values (as f32) of the constant at `outlet`: one per output
/// channel, laid along axis 0, or one for every channel.
fn per_channel(model: &TypedModel, outlet: OutletId, co: usize) -> Option<Vec<f32>> {
    let konst = model.outlet_fact(outlet).ok()?.konst.clone()?;
    let along_axis_0 = konst.len() == co && konst.shape().first() == Some(&co);
    if !(along_axis_0 || konst.len() == 1) {
        return None;
    }
    let values = konst.cast_to::<f32>().ok()?;
    let values = values.try_as_plain_ram().ok()?.as_slice::<f32>().ok()?.to_vec();
    Some(if values.len() == co { values } else { vec![values[0]; co] })
}
