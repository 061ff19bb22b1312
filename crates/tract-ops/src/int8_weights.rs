//! The INT8 weights behind a convolution, as tract wires a per-channel
//! `DequantizeLinear` of a constant: `cast` to f32, `sub` the zero points,
//! `mul` by the scales. `dequant_weights` computes such weights to f32 before
//! import only up to tract's folding budget (4 MiB); bigger ones (the
//! inswapper-size swapper's, 9216 taps over 1024 channels) stay INT8 and tract
//! dequantises them every run, into its own product. [`behind`] reads them
//! back out of that chain, so the blocked product
//! ([`fusiond_kernels::gemm`]) can hold them as INT8 and dequantise a block
//! at a time, with tract's arithmetic.

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

/// The INT8 weights that f32 weights `w` (OIHW) were dequantised from by a
/// symmetric per-channel dequantiser (folded to constants before the
/// integer product could see them: by `dequant_weights`, or by tract's own
/// folding); `None` where they are not such weights
/// ([`fusiond_kernels::int8::recover`]).
pub fn recovered(w: &Tensor) -> Option<Int8Weights> {
    let values = w.try_as_plain_ram().ok()?;
    let values = values.as_slice::<f32>().ok()?;
    let &co = w.shape().first()?;
    if w.rank() != 4 {
        return None;
    }
    let found = fusiond_kernels::int8::recover(values, co)?;
    let values = Arc::new(Tensor::from_shape(w.shape(), &found.values).ok()?);
    Some(Int8Weights { values, scale: found.scale, zero: vec![0.0; co] })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folded_symmetric_weights_give_back_their_integers_and_others_none() {
        let (co, per) = (5, 2 * 3 * 3);
        let scale: Vec<f32> = (0..co).map(|o| 0.0013 + o as f32 * 7.1e-4).collect();
        // Channels that reach ±127, as a symmetric quantiser's do, one
        // that reaches 90 only, and one all zeros.
        let q: Vec<i8> = (0..co * per)
            .map(|i| match i / per {
                o if o == co - 1 => 0,
                1 if i % per == 0 => -90,
                1 => (((i * 41) % 181) as i16 - 90) as i8,
                _ if i % per == 0 => 127,
                _ => (((i * 41) % 255) as i16 - 127) as i8,
            })
            .collect();
        let f: Vec<f32> = q.iter().enumerate().map(|(i, &v)| v as f32 * scale[i / per]).collect();
        let folded = Tensor::from_shape(&[co, 2, 3, 3], &f).unwrap();
        let found = recovered(&folded).expect("integers found again");
        let values = found.values.try_as_plain_ram().unwrap();
        let values = values.as_slice::<i8>().unwrap();
        for (i, (&v, &w)) in values.iter().zip(&f).enumerate() {
            assert_eq!(v as f32 * found.scale[i / per], w, "value {i} is not given back");
        }
        assert!(found.zero.iter().all(|z| *z == 0.0));
        let plain: Vec<f32> = (0..co * per).map(|i| (i as f32 * 0.37).sin()).collect();
        assert!(recovered(&Tensor::from_shape(&[co, 2, 3, 3], &plain).unwrap()).is_none());
    }
}
