//! PRelu: ArcFace runs 33 of them, and tract turns each into a multiply, a
//! comparison and a select, three passes and a boolean tensor, a large share of
//! ArcFace's time on tract (figures: crates/tract-ops/README.md).
//! `ChannelPrelu` does it in one pass, in place. In an INT8 graph each PRelu
//! sits between two quantise-dequantise pairs ([`FakeQuant`]); `ChannelPrelu`
//! takes them in, so the three are still one pass.

use super::fake_quant::FakeQuant;
use fusiond_kernels::prelu::prelu_in_place;
use fusiond_kernels::quant::Grid;
use std::sync::Arc;
use tract_onnx::model::ParsingContext;
use tract_onnx::pb::NodeProto;
use tract_onnx::tract_core::{self, args_1, as_op, op_as_typed_op, op_out_of_plan};
use tract_onnx::tract_hir::internal::*;

pub fn parse(_ctx: &ParsingContext, _node: &NodeProto) -> TractResult<(Box<dyn InferenceOp>, Vec<String>)> {
    Ok((expand(Prelu), vec![]))
}

#[derive(Debug, Clone)]
struct Prelu;

impl Expansion for Prelu {
    fn name(&self) -> StaticName {
        "Prelu".into()
    }

    fn rules<'r, 'p: 'r, 's: 'r>(
        &'s self,
        s: &mut Solver<'r>,
        inputs: &'p [TensorProxy],
        outputs: &'p [TensorProxy],
    ) -> InferenceResult {
        check_input_arity(inputs, 2)?;
        check_output_arity(outputs, 1)?;
        s.equals(&inputs[0].datum_type, &outputs[0].datum_type)?;
        s.equals(&inputs[0].shape, &outputs[0].shape)?;
        Ok(())
    }

    fn wire(&self, name: &str, model: &mut TypedModel, inputs: &[OutletId]) -> TractResult<TVec<OutletId>> {
        let (x, slope) = (inputs[0], inputs[1]);
        match ChannelPrelu::for_facts(model.outlet_fact(x)?, model.outlet_fact(slope)?) {
            Some(op) => model.wire_node(name, op, &[x]),
            None => wire_decomposed(name, model, x, slope),
        }
    }
}

/// tract's own PRelu: `0 > x ? x * slope : x`, as three broadcasting ops.
fn wire_decomposed(
    name: &str,
    model: &mut TypedModel,
    x: OutletId,
    mut slope: OutletId,
) -> TractResult<TVec<OutletId>> {
    let rank = model.outlet_fact(x)?.rank();
    while model.outlet_fact(slope)?.rank() < rank {
        let r = model.outlet_fact(slope)?.rank();
        slope = model.wire_node(format!("{name}.add-axis-{r}"), AxisOp::Add(0), &[slope])?[0];
    }
    let dt = model.outlet_fact(x)?.datum_type;
    let zero = tensor0(0.0f32).cast_to_dt(dt)?.into_owned().broadcast_into_rank(rank)?;
    let zero = model.add_const(format!("{name}.zero"), zero)?;
    let scaled = model.wire_node(format!("{name}.mul"), tract_core::ops::math::mul(), &[x, slope])?[0];
    let negative = model.wire_node(
        format!("{name}.test"),
        tract_core::ops::binary::TypedBinOp(tract_core::ops::logic::comp_gt(), None),
        &[zero, x],
    )?[0];
    model.wire_node(format!("{name}.iff"), tract_core::ops::logic::Iff, &[negative, scaled, x])
}

/// PRelu on f32 with a constant slope that is one value, or one value per
/// index of a single axis of `x` (the channel axis of NCHW, as every
/// exported PRelu has it).
#[derive(Debug, Clone, PartialEq)]
pub struct ChannelPrelu {
    /// The axis of `x` the slope runs along (unused for one slope).
    axis: usize,
    /// The slopes, flat.
    slope: Arc<Tensor>,
    /// A quantise-dequantise pair taken in before the PRelu.
    before: Option<Grid>,
    /// One taken in after it.
    after: Option<Grid>,
}

impl Eq for ChannelPrelu {}

impl ChannelPrelu {
    /// The op for these input facts, or `None` where it does not apply.
    pub fn for_facts(x: &TypedFact, slope: &TypedFact) -> Option<ChannelPrelu> {
        let konst = slope.konst.as_ref()?;
        if x.datum_type != f32::datum_type() || konst.datum_type() != f32::datum_type() || konst.rank() > x.rank() {
            return None;
        }
        let varying: Vec<usize> = konst.shape().iter().enumerate().filter(|(_, d)| **d != 1).map(|(i, _)| i).collect();
        let axis = match varying[..] {
            [] => 0,
            [i] => x.rank() - konst.rank() + i,
            _ => return None,
        };
        if konst.len() > 1 && x.shape[axis].to_usize().is_ok_and(|d| d != konst.len()) {
            return None;
        }
        let flat = konst.clone().into_tensor().into_shape(&[konst.len()]).ok()?;
        Some(ChannelPrelu { axis, slope: Arc::new(flat), before: None, after: None })
    }
}

impl Op for ChannelPrelu {
    fn name(&self) -> StaticName {
        match (self.before, self.after) {
            (None, None) => "FusiondPrelu",
            (Some(_), None) => "FusiondFakeQuant+Prelu",
            (None, Some(_)) => "FusiondPrelu+FakeQuant",
            (Some(_), Some(_)) => "FusiondFakeQuant+Prelu+FakeQuant",
        }
        .into()
    }

    op_as_typed_op!();
}

impl EvalOp for ChannelPrelu {
    op_out_of_plan!();

    fn eval(&self, _ctx: &EvalContext, inputs: TVec<TValue>) -> TractResult<TVec<TValue>> {
        let x = args_1!(inputs);
        let mut x = x.into_tensor();
        let slope = self.slope.try_as_plain_ram()?;
        let slope = slope.as_slice::<f32>()?;
        let inner = if slope.len() == 1 {
            x.len()
        } else {
            ensure!(
                x.shape().get(self.axis) == Some(&slope.len()),
                "PRelu: {} slopes for an input of shape {:?} along axis {}",
                slope.len(),
                x.shape(),
                self.axis
            );
            x.shape()[self.axis + 1..].iter().product()
        };
        prelu_in_place(x.try_as_plain_ram_mut()?.as_slice_mut::<f32>()?, slope, inner, self.before, self.after);
        Ok(tvec!(x.into_tvalue()))
    }
}

impl TypedOp for ChannelPrelu {
    fn output_facts(&self, inputs: &[&TypedFact]) -> TractResult<TVec<TypedFact>> {
        Ok(tvec!(inputs[0].without_value()))
    }

    /// Takes in the [`FakeQuant`] before it when that one feeds only this
    /// PRelu, and the one after it when this PRelu feeds only that one.
    fn declutter(&self, model: &TypedModel, node: &TypedNode) -> TractResult<Option<TypedModelPatch>> {
        if self.before.is_none() {
            let prec = &model.nodes()[node.inputs[0].node];
            if let (Some(fq), [out]) = (prec.op_as::<FakeQuant>(), &prec.outputs[..]) {
                if out.successors.len() == 1 {
                    let op = ChannelPrelu { before: Some(fq.grid()), ..self.clone() };
                    let mut patch = TypedModelPatch::default();
                    let inputs = patch.taps(model, &prec.inputs)?;
                    let wire = patch.wire_node(&node.name, op, &inputs)?;
                    patch.shunt_outside(model, node.id.into(), wire[0])?;
                    return Ok(Some(patch));
                }
            }
        }
        if self.after.is_none() {
            if let Some(fq) = model.single_succ(node.id)?.and_then(|n| n.op_as::<FakeQuant>()) {
                let op = ChannelPrelu { after: Some(fq.grid()), ..self.clone() };
                return TypedModelPatch::fuse_with_next(model, node, op).map(Some);
            }
        }
        Ok(None)
    }

    as_op!();
}

#[cfg(test)]
mod tests {
    use super::*;
    use fusiond_kernels::quant::fake_quant_in_place;

    #[test]
    fn negative_values_take_their_channels_slope_and_the_rest_pass() {
        // Two batch items of 2 channels of 3 values.
        let mut x = vec![-1.0, 2.0, -3.0, -1.0, 0.0, 4.0, -2.0, -0.0, 5.0, -4.0, 1.0, -6.0];
        prelu_in_place(&mut x, &[0.5, 0.25], 3, None, None);
        assert_eq!(x, [-0.5, 2.0, -1.5, -0.25, 0.0, 4.0, -1.0, 0.0, 5.0, -1.0, 1.0, -1.5]);
    }

    #[test]
    fn the_grids_taken_in_round_as_the_pairs_would_before_and_after() {
        let x: Vec<f32> = (-50..50).map(|i| i as f32 * 0.0371).collect();
        let before = Grid { scale: 0.02, zero_point: 128.0, lo: 0.0, hi: 255.0 };
        let after = Grid { scale: 0.013, zero_point: 40.0, lo: 0.0, hi: 255.0 };
        for (b, a) in [(None, None), (Some(before), None), (None, Some(after)), (Some(before), Some(after))] {
            let mut want = x.clone();
            if let Some(b) = b {
                fake_quant_in_place(&mut want, b);
            }
            prelu_in_place(&mut want, &[0.5, 0.25], 25, None, None);
            if let Some(a) = a {
                fake_quant_in_place(&mut want, a);
            }
            let mut got = x.clone();
            prelu_in_place(&mut got, &[0.5, 0.25], 25, b, a);
            assert_eq!(got, want, "grids {b:?} {a:?}");
        }
    }

    #[test]
    fn the_op_applies_only_to_a_constant_slope_along_one_axis() {
        let x = f32::fact([1, 4, 2, 2]);
        let konst = |t: Tensor| TypedFact::try_from(t).unwrap();
        let per_channel = konst(Tensor::from_shape(&[4, 1, 1], &[1f32, 2., 3., 4.]).unwrap());
        assert_eq!(ChannelPrelu::for_facts(&x, &per_channel).map(|o| o.axis), Some(1));
        let scalar = konst(tensor1(&[0.1f32]));
        assert!(ChannelPrelu::for_facts(&x, &scalar).is_some());
        let wrong_length = konst(Tensor::from_shape(&[3, 1, 1], &[1f32, 2., 3.]).unwrap());
        assert!(ChannelPrelu::for_facts(&x, &wrong_length).is_none());
        let two_axes = konst(Tensor::from_shape(&[4, 2, 1], &[0f32; 8]).unwrap());
        assert!(ChannelPrelu::for_facts(&x, &two_axes).is_none());
        assert!(ChannelPrelu::for_facts(&x, &f32::fact([4, 1, 1])).is_none(), "a slope computed at run time");
    }
}
