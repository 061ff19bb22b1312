//! MaxPool with a 2×2 kernel and stride 2, no padding: YuNet runs four, and
//! tract's pooling walks a generic patch for every output value (figures:
//! crates/tract-ops/README.md). `MaxPool2x2` takes the maximum of two input
//! rows first, a pass that vectorises, then of each pair of columns. Where it
//! alone reads a block of [`super::pw_dw`], that block takes it in.

use super::{share_rows, StockParser};
use tract_onnx::model::ParsingContext;
use tract_onnx::pb::NodeProto;
use tract_onnx::tract_core::{args_1, as_op, op_as_typed_op, op_out_of_plan};
use tract_onnx::tract_hir::internal::*;

/// tract's own MaxPool parser, for every MaxPool this kernel does not fit.
pub static STOCK: StockParser = StockParser::new("MaxPool");

pub fn parse(ctx: &ParsingContext, node: &NodeProto) -> TractResult<(Box<dyn InferenceOp>, Vec<String>)> {
    if fits(node)? {
        return Ok((expand(MaxPool2x2Expansion), vec![]));
    }
    STOCK.parse(ctx, node)
}

/// Whether the node is a plain 2×2, stride-2 pooling without padding,
/// dilation, ceil mode or an indices output.
fn fits(node: &NodeProto) -> TractResult<bool> {
    let ints = |name: &str| node.get_attr_opt_vec::<i64>(name);
    let all = |v: Option<Vec<i64>>, x: i64, absent: bool| v.map_or(absent, |v| v.iter().all(|d| *d == x));
    let auto_pad = node.get_attr_opt::<&str>("auto_pad")?.unwrap_or("NOTSET");
    Ok(node.output.len() == 1
        && ints("kernel_shape")? == Some(vec![2, 2])
        && ints("strides")? == Some(vec![2, 2])
        && all(ints("pads")?, 0, true)
        && all(ints("dilations")?, 1, true)
        && node.get_attr_opt::<i64>("ceil_mode")?.unwrap_or(0) == 0
        && matches!(auto_pad, "NOTSET" | "VALID"))
}

#[derive(Debug, Clone)]
struct MaxPool2x2Expansion;

/// The pooling of an NCHW f32 tensor; other element types are cast to f32
/// and back around it, which is exact for the maximum.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MaxPool2x2;

/// The output's height or width for an input's: floor(d / 2).
fn half(d: &TDim) -> TDim {
    d.clone() / 2u64
}

impl Expansion for MaxPool2x2Expansion {
    fn name(&self) -> StaticName {
        "MaxPool".into()
    }

    fn rules<'r, 'p: 'r, 's: 'r>(
        &'s self,
        s: &mut Solver<'r>,
        inputs: &'p [TensorProxy],
        outputs: &'p [TensorProxy],
    ) -> InferenceResult {
        check_input_arity(inputs, 1)?;
        check_output_arity(outputs, 1)?;
        s.equals(&inputs[0].datum_type, &outputs[0].datum_type)?;
        s.equals(&inputs[0].rank, 4)?;
        s.equals(&outputs[0].rank, 4)?;
        s.equals(&inputs[0].shape[0], &outputs[0].shape[0])?;
        s.equals(&inputs[0].shape[1], &outputs[0].shape[1])?;
        s.given(&inputs[0].shape[2], move |s, h| s.equals(&outputs[0].shape[2], half(&h)))?;
        s.given(&inputs[0].shape[3], move |s, w| s.equals(&outputs[0].shape[3], half(&w)))?;
        Ok(())
    }

    fn wire(&self, name: &str, model: &mut TypedModel, inputs: &[OutletId]) -> TractResult<TVec<OutletId>> {
        let dt = model.outlet_fact(inputs[0])?.datum_type;
        if dt == f32::datum_type() {
            return model.wire_node(name, MaxPool2x2, inputs);
        }
        let cast = tract_onnx::tract_core::ops::cast::cast;
        let x = model.wire_node(format!("{name}.to-f32"), cast(f32::datum_type()), inputs)?;
        let pooled = model.wire_node(name, MaxPool2x2, &x)?;
        model.wire_node(format!("{name}.from-f32"), cast(dt), &pooled)
    }
}

/// Pools `planes` planes of `h`×`w` values from `x` into `out`, each
/// (h/2)×(w/2) (an odd last row or column is dropped, as ONNX's floor
/// rounding does). Rows are shared among tract's threads.
pub fn max_pool_2x2(x: &[f32], out: &mut [f32], h: usize, w: usize) {
    let (oh, ow) = (h / 2, w / 2);
    share_rows(out, (oh, ow), 4, |range, share| {
        let mut scratch = vec![0f32; w];
        for (plane, pooled) in x.chunks_exact(h * w).zip(share) {
            for (y, line) in range.clone().zip(pooled.chunks_exact_mut(ow)) {
                pool_rows(&plane[2 * y * w..][..w], &plane[(2 * y + 1) * w..][..w], line, &mut scratch);
            }
        }
    });
}

/// One row of 2×2 maxima: `line[i]` is the largest value of columns 2i
/// and 2i + 1 of the rows `a` and `b`. `scratch` (as long as `a`) takes
/// the maximum of the two rows first, a pass that vectorises.
pub fn pool_rows(a: &[f32], b: &[f32], line: &mut [f32], scratch: &mut [f32]) {
    for ((r, p), q) in scratch.iter_mut().zip(a).zip(b) {
        *r = p.max(*q);
    }
    for (o, pair) in line.iter_mut().zip(scratch.chunks_exact(2)) {
        *o = pair[0].max(pair[1]);
    }
}

impl Op for MaxPool2x2 {
    fn name(&self) -> StaticName {
        "FusiondMaxPool2x2".into()
    }

    op_as_typed_op!();
}

impl EvalOp for MaxPool2x2 {
    op_out_of_plan!();

    fn eval(&self, _ctx: &EvalContext, inputs: TVec<TValue>) -> TractResult<TVec<TValue>> {
        let x = args_1!(inputs);
        let &[n, c, h, w] = x.shape() else { bail!("MaxPool: a rank-4 NCHW input, not {:?}", x.shape()) };
        // SAFETY: `max_pool_2x2` writes every value.
        #[allow(unsafe_code)]
        let mut out = unsafe { Tensor::uninitialized::<f32>(&[n, c, h / 2, w / 2])? };
        let input = x.try_as_plain_ram()?;
        max_pool_2x2(input.as_slice::<f32>()?, out.try_as_plain_ram_mut()?.as_slice_mut::<f32>()?, h, w);
        Ok(tvec!(out.into_tvalue()))
    }
}

impl TypedOp for MaxPool2x2 {
    fn output_facts(&self, inputs: &[&TypedFact]) -> TractResult<TVec<TypedFact>> {
        let s = &inputs[0].shape;
        ensure!(s.rank() == 4, "MaxPool: a rank-4 NCHW input, not {s:?}");
        Ok(tvec!(f32::fact([s[0].clone(), s[1].clone(), half(&s[2]), half(&s[3])])))
    }

    as_op!();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_output_is_the_maximum_of_its_2x2_block_and_odd_edges_drop() {
        // One plane of 3×5: the last row and column belong to no block.
        #[rustfmt::skip]
        let x = [
            1., -2., 3., 0., 9.,
            -1., 5., -4., 7., 9.,
            9., 9., 9., 9., 9.,
        ];
        let mut out = [0f32; 2];
        max_pool_2x2(&x, &mut out, 3, 5);
        assert_eq!(out, [5., 7.]);
        // Two planes of 2×2.
        let mut out = [0f32; 2];
        max_pool_2x2(&[1., 2., 3., 4., -8., -7., -6., -5.], &mut out, 2, 2);
        assert_eq!(out, [4., -5.]);
    }
}
