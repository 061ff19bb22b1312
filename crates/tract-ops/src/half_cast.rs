//! The casts between f32 and f16 of an FP16 plan. tract casts one value at
//! a time through the `half` crate, with a check of the CPU's features for
//! each; in an FP16 ArcFace on aarch64 its 66 casts (around the PReLUs,
//! which run in f32) executed about a quarter of the plan's instructions.
//! [`HalfCast`] converts eight values an instruction pair on aarch64
//! (`fusiond_kernels::half`). [`take_over`] puts it in place of every such
//! cast; it also keeps depthwise convolutions out of f16 ([`is_depthwise`]):
//! tract runs them on f16 with a plain loop of scalar multiply-adds, and on
//! f32 with its vector kernels, which the two fast casts around them cost
//! far less than.

use fusiond_kernels::half::{f16_to_f32, f32_to_f16};
use tract_onnx::tract_core::ops::cast::Cast;
use tract_onnx::tract_core::ops::cnn::Conv;
use tract_onnx::tract_core::{as_op, op_as_typed_op, op_out_of_plan};
use tract_onnx::tract_hir::internal::*;

/// A cast of plain f32 values to f16, or of f16 values to f32.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HalfCast {
    /// f32 to f16 (`true`) or f16 to f32.
    to_half: bool,
}

impl Op for HalfCast {
    fn name(&self) -> StaticName {
        if self.to_half { "FusiondCastToF16" } else { "FusiondCastToF32" }.into()
    }

    op_as_typed_op!();
}

impl EvalOp for HalfCast {
    op_out_of_plan!();

    fn eval(&self, _ctx: &EvalContext, inputs: TVec<TValue>) -> TractResult<TVec<TValue>> {
        let x = &inputs[0];
        let view = x.try_as_plain_ram()?;
        let out = if self.to_half {
            let mut out = Tensor::zero_dt(DatumType::F16, x.shape())?;
            f32_to_f16(view.as_slice::<f32>()?, out.try_as_plain_ram_mut()?.as_bytes_mut());
            out
        } else {
            ensure!(x.datum_type() == DatumType::F16, "FusiondCastToF32 on {:?}", x.datum_type());
            let mut out = Tensor::zero::<f32>(x.shape())?;
            f16_to_f32(view.as_bytes(), out.try_as_plain_ram_mut()?.as_slice_mut::<f32>()?);
            out
        };
        Ok(tvec!(out.into_tvalue()))
    }
}

impl TypedOp for HalfCast {
    fn output_facts(&self, inputs: &[&TypedFact]) -> TractResult<TVec<TypedFact>> {
        let dt = if self.to_half { DatumType::F16 } else { DatumType::F32 };
        Ok(tvec!(dt.fact(inputs[0].shape.clone())))
    }

    as_op!();
}

/// Whether `node` is a convolution with one group per input channel.
pub fn is_depthwise(node: &TypedNode) -> bool {
    node.op_as::<Conv>().is_some_and(|c| c.q_params.is_none() && c.group > 1 && c.group == c.pool_spec.input_channels)
}

/// Replaces every cast of plain f32 values to f16, and of f16 values to
/// f32, by a [`HalfCast`]; returns how many. The replaced nodes are left
/// unconnected, for `compact` or the optimiser to drop.
pub fn take_over(model: &mut TypedModel) -> TractResult<usize> {
    let mut replaced = 0;
    for id in model.eval_order()? {
        let node = model.node(id);
        let Some(cast) = node.op_as::<Cast>() else { continue };
        let from = model.outlet_fact(node.inputs[0])?;
        let to_half = match (from.datum_type, cast.to) {
            (DatumType::F32, DatumType::F16) => true,
            (DatumType::F16, DatumType::F32) => false,
            _ => continue,
        };
        if !from.is_plain() || from.konst.is_some() {
            continue;
        }
        let patch = TypedModelPatch::replace_single_op(model, node, &node.inputs, HalfCast { to_half })?;
        patch.apply(model)?;
        replaced += 1;
    }
    Ok(replaced)
}

#[cfg(test)]
mod tests {
    use super::*;
    use fusiond_kernels::test_values as values;
    use tract_onnx::tract_core::ops::cast::cast;

    /// x (f32) → f16 → f32, as a translator leaves around an f32 op.
    fn model() -> TypedModel {
        let mut model = TypedModel::default();
        let x = model.add_source("x", f32::fact([2, 3, 67])).unwrap();
        let h = model.wire_node("to-half", cast(DatumType::F16), &[x]).unwrap();
        let y = model.wire_node("to-single", cast(DatumType::F32), &h).unwrap();
        model.select_output_outlets(&y).unwrap();
        model
    }

    fn run(model: TypedModel, x: &Tensor) -> Tensor {
        let plan = model.into_runnable().unwrap();
        plan.run(tvec!(x.clone().into_tvalue())).unwrap().remove(0).into_tensor()
    }

    #[test]
    fn both_casts_are_taken_over_and_give_tracts_own_values_to_the_bit() {
        let mut v = values(2 * 3 * 67, 11).iter().map(|x| x * 300.0).collect::<Vec<f32>>();
        v[..4].copy_from_slice(&[1e-7, -65_519.0, 70_000.0, f32::from_bits(0x3f80_1000)]);
        let x = Tensor::from_shape(&[2, 3, 67], &v).unwrap();
        let stock = model();
        let mut taken = stock.clone();
        assert_eq!(take_over(&mut taken).unwrap(), 2);
        taken.compact().unwrap();
        let ops: Vec<String> = taken.nodes().iter().map(|n| n.op().name().to_string()).collect();
        assert!(ops.contains(&"FusiondCastToF16".into()) && ops.contains(&"FusiondCastToF32".into()), "{ops:?}");
        assert!(!ops.iter().any(|o| o == "Cast"), "{ops:?}");
        let (a, b) = (run(taken, &x), run(stock, &x));
        let bits = |t: &Tensor| {
            t.try_as_plain_ram().unwrap().as_slice::<f32>().unwrap().iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        };
        assert_eq!(bits(&a), bits(&b));
    }
}
