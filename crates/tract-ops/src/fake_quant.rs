//! Activation quantisation in QDQ graphs: each `QuantizeLinear` whose only
//! consumers are `DequantizeLinear` nodes with the same scale and zero point is
//! rounding to the 8-bit grid and back, all in f32 on tract (which runs QDQ
//! convolutions in f32). tract does it in two passes over a u8 tensor, per
//! element through a scalar rounding, a large share of an INT8 ArcFace's time
//! (figures: crates/tract-ops/README.md). `qdq_pairs::fuse_pairs` rewrites each
//! such pair in the protobuf into one `FusiondFakeQuant` node, and
//! [`FakeQuant`] does it in one pass, in place, with the same arithmetic as
//! tract's two ops.

use fusiond_kernels::quant::{fake_quant_in_place, Grid};
use tract_onnx::model::ParsingContext;
use tract_onnx::pb::NodeProto;
use tract_onnx::tract_core::ops::quant::{quantize_linear_i8, quantize_linear_u8, DequantizeLinearF32};
use tract_onnx::tract_core::{args_1, as_op, op_as_typed_op, op_out_of_plan};
use tract_onnx::tract_hir::internal::*;

pub fn parse(_ctx: &ParsingContext, node: &NodeProto) -> TractResult<(Box<dyn InferenceOp>, Vec<String>)> {
    Ok((expand(FakeQuantPair { zero_point: node.input.len() == 3 }), vec![]))
}

#[derive(Debug, Clone)]
struct FakeQuantPair {
    zero_point: bool,
}

impl Expansion for FakeQuantPair {
    fn name(&self) -> StaticName {
        "FakeQuantPair".into()
    }

    fn rules<'r, 'p: 'r, 's: 'r>(
        &'s self,
        s: &mut Solver<'r>,
        inputs: &'p [TensorProxy],
        outputs: &'p [TensorProxy],
    ) -> InferenceResult {
        check_input_arity(inputs, 2 + self.zero_point as usize)?;
        check_output_arity(outputs, 1)?;
        s.equals(&outputs[0].datum_type, f32::datum_type())?;
        s.equals(&inputs[0].shape, &outputs[0].shape)?;
        Ok(())
    }

    fn wire(&self, name: &str, model: &mut TypedModel, inputs: &[OutletId]) -> TractResult<TVec<OutletId>> {
        let scale = model.outlet_fact(inputs[1])?.konst.clone().context("a fused quantiser's scale is a constant")?;
        let scale = scale.cast_to_scalar::<f32>()?;
        let zero_point = match inputs.get(2) {
            Some(z) => model.outlet_fact(*z)?.konst.clone().context("a fused quantiser's zero point is a constant")?,
            None => rctensor0(0u8),
        };
        let (zp, signed) = match zero_point.datum_type() {
            DatumType::U8 => (zero_point.cast_to_scalar::<u8>()? as i32, false),
            DatumType::I8 => (zero_point.cast_to_scalar::<i8>()? as i32, true),
            dt => bail!("QuantizeLinear to {dt:?} is not supported"),
        };
        let x = inputs[0];
        if model.outlet_fact(x)?.datum_type != f32::datum_type() {
            // tract's own two ops, as its importer wires them.
            let q: Box<dyn TypedOp> = if signed {
                Box::new(quantize_linear_i8(scale.recip(), zp as i8))
            } else {
                Box::new(quantize_linear_u8(scale.recip(), zp as u8))
            };
            let q = model.wire_node(format!("{name}.quantize"), q, &[x])?;
            return model.wire_node(name, DequantizeLinearF32::new(scale, zp), &q);
        }
        let (lo, hi) = if signed { (i8::MIN as f32, i8::MAX as f32) } else { (u8::MIN as f32, u8::MAX as f32) };
        model.wire_node(name, FakeQuant { grid: Grid { scale, zero_point: zp as f32, lo, hi } }, &[x])
    }
}

/// A fused quantise-dequantise pair on f32.
#[derive(Debug, Clone, PartialEq)]
pub struct FakeQuant {
    grid: Grid,
}

impl Eq for FakeQuant {}

impl FakeQuant {
    pub fn grid(&self) -> Grid {
        self.grid
    }
}

impl Op for FakeQuant {
    fn name(&self) -> StaticName {
        "FusiondFakeQuant".into()
    }

    fn info(&self) -> TractResult<Vec<String>> {
        Ok(vec![format!("scale: {} zero_point: {}", self.grid.scale, self.grid.zero_point)])
    }

    op_as_typed_op!();
}

impl EvalOp for FakeQuant {
    op_out_of_plan!();

    fn eval(&self, _ctx: &EvalContext, inputs: TVec<TValue>) -> TractResult<TVec<TValue>> {
        let x = args_1!(inputs);
        let mut x = x.into_tensor();
        fake_quant_in_place(x.try_as_plain_ram_mut()?.as_slice_mut::<f32>()?, self.grid);
        Ok(tvec!(x.into_tvalue()))
    }
}

impl TypedOp for FakeQuant {
    fn output_facts(&self, inputs: &[&TypedFact]) -> TractResult<TVec<TypedFact>> {
        Ok(tvec!(inputs[0].without_value()))
    }

    fn axes_mapping(&self, inputs: &[&TypedFact], outputs: &[&TypedFact]) -> TractResult<AxesMapping> {
        AxesMapping::natural(inputs, outputs)
    }

    fn change_axes(
        &self,
        model: &TypedModel,
        node: &TypedNode,
        _io: InOut,
        change: &AxisOp,
    ) -> TractResult<Option<AxisChangeConsequence>> {
        // Element by element: any axis change passes through.
        Ok(Some(AxisChangeConsequence::new(model, node, None, change)))
    }

    as_op!();
}

#[cfg(test)]
mod tests {
    use super::*;
    use tract_onnx::tract_core::ops::quant::{quantize_linear_f32_i8, quantize_linear_f32_u8};

    /// tract's two ops on one value, as `QuantizeLinearU8`/`I8` and
    /// `DequantizeLinearF32` compute them.
    fn tracts(x: f32, scale: f32, zp: i32, signed: bool) -> f32 {
        let q = if signed {
            quantize_linear_f32_i8(x, scale.recip(), zp) as i32
        } else {
            quantize_linear_f32_u8(x, scale.recip(), zp) as i32
        };
        (q - zp) as f32 * scale
    }

    #[test]
    fn one_pass_gives_tracts_two_ops_bit_for_bit() {
        let scale = 0.0235;
        // Exact ties (k + 0.5 steps), both signs, the clamps, huge values.
        let mut xs: Vec<f32> = (-700..700).map(|k| (k as f32 + 0.5) * scale).collect();
        xs.extend((-4000..4000).map(|k| k as f32 * 0.00377));
        xs.extend([0.0, -0.0, 4e5, -4e5, 1e-30]);
        for (zp, signed, lo, hi) in [(0, false, 0., 255.), (131, false, 0., 255.), (-3, true, -128., 127.)] {
            let grid = Grid { scale, zero_point: zp as f32, lo, hi };
            let (mut ours, mut baseline) = (xs.clone(), xs.clone());
            fake_quant_in_place(&mut ours, grid);
            let r = grid.rounding();
            baseline.iter_mut().for_each(|v| *v = r.apply(*v));
            for ((x, y), z) in xs.iter().zip(&ours).zip(&baseline) {
                let want = tracts(*x, scale, zp, signed);
                assert_eq!(y.to_bits(), want.to_bits(), "x {x} zp {zp}: {y} against tract's {want}");
                assert_eq!(
                    z.to_bits(),
                    want.to_bits(),
                    "x {x} zp {zp}, the scalar reference: {z} against tract's {want}"
                );
            }
        }
        // Beyond i32, tract's `round(x / scale) as i32 + zp` saturates and
        // then overflows (wrapping to the low end in a release build); the
        // fused op clamps to the end of the grid the value lies beyond.
        let mut huge = [1e9, 3e38, f32::INFINITY, -1e9, -3e38, f32::NEG_INFINITY];
        fake_quant_in_place(&mut huge, Grid { scale: 0.5, zero_point: 3.0, lo: 0.0, hi: 255.0 });
        assert_eq!(huge, [126.0, 126.0, 126.0, -1.5, -1.5, -1.5]);
        let mut nan = [f32::NAN];
        fake_quant_in_place(&mut nan, Grid { scale, zero_point: 7.0, lo: 0.0, hi: 255.0 });
        assert_eq!(nan, [0.0], "tract casts NaN to the integer 0, then adds and subtracts the zero point");
    }

    #[test]
    fn rounding_again_to_the_same_grid_gives_each_value_back_to_the_bit() {
        // What `qdq_pairs::drop_repeats` rests on, over the scales it
        // accepts (1e-30 to 1e30), zero points inside and at the grids'
        // ends, and values past both ends.
        for (i, scale) in [1e-30, 3.7e-9, 0.0049, 0.0235, 0.15, 1.0, 977.3, 1e30].into_iter().enumerate() {
            for (zp, lo, hi) in [(0., 0., 255.), (131., 0., 255.), (255., 0., 255.), (-3., -128., 127.)] {
                let grid = Grid { scale, zero_point: zp, lo, hi };
                let mut once: Vec<f32> =
                    fusiond_kernels::test_values(4000, i as u32).iter().map(|v| v * 300.0 * scale).collect();
                fake_quant_in_place(&mut once, grid);
                let mut twice = once.clone();
                fake_quant_in_place(&mut twice, grid);
                let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&twice), bits(&once), "scale {scale}, zero point {zp}");
            }
        }
    }
}
