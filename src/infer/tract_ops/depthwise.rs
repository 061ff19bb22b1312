//! Depthwise 3×3 convolution, stride 1 or 2, padding 1, with constant f32
//! weights: YuNet runs 20, SCRFD 20, ArcFace 17, about a fifth of each
//! model's time on tract, whose depthwise kernel walks every output value's
//! window. `Depthwise3x3` adds each of the nine weighted input rows to a
//! whole output row at once, a pass that vectorises.

use std::sync::{Arc, OnceLock};
use tract_onnx::model::ParsingContext;
use tract_onnx::pb::NodeProto;
use tract_onnx::tract_core::{args_1, as_op, op_as_typed_op, op_out_of_plan};
use tract_onnx::tract_hir::internal::*;

type Builder = fn(&ParsingContext, &NodeProto) -> TractResult<(Box<dyn InferenceOp>, Vec<String>)>;

/// tract's own Conv parser: every Conv is parsed by it, and runs its op
/// wherever this kernel does not fit.
static STOCK: OnceLock<Builder> = OnceLock::new();

pub fn set_stock(stock: Builder) {
    let _ = STOCK.set(stock);
}

pub fn parse(ctx: &ParsingContext, node: &NodeProto) -> TractResult<(Box<dyn InferenceOp>, Vec<String>)> {
    let stock = STOCK.get().context("Conv: no parser")?;
    let (op, extra) = stock(ctx, node)?;
    let Some(stride) = fits(node)? else { return Ok((op, extra)) };
    let group = node.get_attr_opt::<i64>("group")?.unwrap_or(1) as usize;
    let as_op: &dyn Op = op.as_ref();
    match as_op.downcast_ref::<Box<dyn Expansion>>() {
        Some(expansion) => Ok((expand(DepthwiseExpansion { stock: expansion.clone(), stride, group }), extra)),
        None => Ok((op, extra)),
    }
}

/// The stride when the node's attributes are a grouped 3×3 convolution with
/// padding 1 on every side, stride 1 or 2 and no dilation.
fn fits(node: &NodeProto) -> TractResult<Option<usize>> {
    let ints = |name: &str| node.get_attr_opt_vec::<i64>(name);
    let auto_pad = node.get_attr_opt::<&str>("auto_pad")?.unwrap_or("NOTSET");
    let plain = node.get_attr_opt::<i64>("group")?.unwrap_or(1) > 1
        && ints("kernel_shape")?.is_none_or(|k| k == [3, 3])
        && ints("pads")? == Some(vec![1, 1, 1, 1])
        && ints("dilations")?.is_none_or(|d| d == [1, 1])
        && auto_pad == "NOTSET";
    Ok(match ints("strides")? {
        _ if !plain => None,
        None => Some(1),
        Some(s) if s == [1, 1] => Some(1),
        Some(s) if s == [2, 2] => Some(2),
        Some(_) => None,
    })
}

#[derive(Debug, Clone)]
struct DepthwiseExpansion {
    /// tract's own Conv, for the rules and for what the weights rule out.
    stock: Box<dyn Expansion>,
    stride: usize,
    group: usize,
}

impl Expansion for DepthwiseExpansion {
    fn name(&self) -> StaticName {
        "Conv".into()
    }

    fn rules<'r, 'p: 'r, 's: 'r>(
        &'s self,
        s: &mut Solver<'r>,
        inputs: &'p [TensorProxy],
        outputs: &'p [TensorProxy],
    ) -> InferenceResult {
        self.stock.rules(s, inputs, outputs)
    }

    fn wire(&self, name: &str, model: &mut TypedModel, inputs: &[OutletId]) -> TractResult<TVec<OutletId>> {
        match self.kernel(model, inputs)? {
            Some(op) => model.wire_node(name, op, &inputs[..1]),
            None => self.stock.wire(name, model, inputs),
        }
    }
}

impl DepthwiseExpansion {
    /// The kernel, when the input is NCHW f32 with `group` channels and the
    /// weights (C×1×3×3) and bias (C) are constant f32.
    fn kernel(&self, model: &TypedModel, inputs: &[OutletId]) -> TractResult<Option<Depthwise3x3>> {
        let x = model.outlet_fact(inputs[0])?;
        let f32_const = |i: usize| -> TractResult<Option<Arc<Tensor>>> {
            let fact = model.outlet_fact(inputs[i])?;
            Ok(fact.konst.clone().filter(|t| t.datum_type() == f32::datum_type()))
        };
        let Some(weights) = f32_const(1)? else { return Ok(None) };
        let c = self.group;
        let channels = x.shape.get(1).and_then(|d| d.to_usize().ok());
        if x.datum_type != f32::datum_type() || x.rank() != 4 || channels != Some(c) || weights.shape() != [c, 1, 3, 3]
        {
            return Ok(None);
        }
        let bias = match inputs.len() {
            2 => Arc::new(Tensor::zero::<f32>(&[c])?),
            _ => match f32_const(2)? {
                Some(b) if b.len() == c => b,
                _ => return Ok(None),
            },
        };
        Ok(Some(Depthwise3x3 { stride: self.stride, weights, bias }))
    }
}

/// The output's height or width for an input's: (d - 1) / stride + 1.
fn out_dim(d: usize, stride: usize) -> usize {
    if d == 0 {
        0
    } else {
        (d - 1) / stride + 1
    }
}

/// One input row's contribution to one output row: `out[ox] += w *
/// row[ox * stride + kx - 1]` for every `ox` whose input lies inside the row.
/// `odd` and `even` are the row's odd and even columns (stride 2 only).
fn add_row(out: &mut [f32], row: &[f32], split: (&[f32], &[f32]), k: &[f32], stride: usize) {
    let ow = out.len();
    if stride == 1 {
        // kx = 0 reads ox - 1, kx = 1 ox, kx = 2 ox + 1.
        let n = row.len();
        axpy(&mut out[1..], &row[..n - 1], k[0]);
        axpy(out, row, k[1]);
        axpy(&mut out[..n - 1], &row[1..], k[2]);
    } else {
        let (even, odd) = split;
        // kx = 0 reads 2ox - 1 = odd[ox - 1], kx = 1 even[ox], kx = 2 odd[ox].
        axpy(&mut out[1..], &odd[..(ow - 1).min(odd.len())], k[0]);
        axpy(out, &even[..ow.min(even.len())], k[1]);
        axpy(out, &odd[..ow.min(odd.len())], k[2]);
    }
}

/// `out[i] += w * x[i]` over the shorter of the two.
fn axpy(out: &mut [f32], x: &[f32], w: f32) {
    for (o, v) in out.iter_mut().zip(x) {
        *o += w * v;
    }
}

/// Convolves `planes` planes of `h`×`w` (plane `p` uses channel `p % c`'s
/// nine weights and bias) into `out`.
pub fn depthwise_3x3(
    x: &[f32],
    out: &mut [f32],
    (c, h, w): (usize, usize, usize),
    stride: usize,
    k: &[f32],
    bias: &[f32],
) {
    let (oh, ow) = (out_dim(h, stride), out_dim(w, stride));
    if oh == 0 || ow == 0 || c == 0 {
        return;
    }
    let (mut even, mut odd) = (vec![0f32; w.div_ceil(2)], vec![0f32; w / 2]);
    for (p, (plane, o)) in x.chunks_exact(h * w).zip(out.chunks_exact_mut(oh * ow)).enumerate() {
        let ch = p % c;
        o.fill(bias[ch]);
        for (oy, orow) in o.chunks_exact_mut(ow).enumerate() {
            for ky in 0..3 {
                let Some(iy) = (oy * stride + ky).checked_sub(1).filter(|iy| *iy < h) else { continue };
                let row = &plane[iy * w..][..w];
                if stride == 2 {
                    for (i, v) in row.iter().enumerate() {
                        if i % 2 == 0 {
                            even[i / 2] = *v
                        } else {
                            odd[i / 2] = *v
                        }
                    }
                }
                add_row(orow, row, (&even, &odd), &k[ch * 9 + ky * 3..][..3], stride);
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Depthwise3x3 {
    stride: usize,
    /// C×1×3×3.
    weights: Arc<Tensor>,
    /// C.
    bias: Arc<Tensor>,
}

impl Op for Depthwise3x3 {
    fn name(&self) -> StaticName {
        "FusiondDepthwise3x3".into()
    }

    op_as_typed_op!();
}

impl EvalOp for Depthwise3x3 {
    op_out_of_plan!();

    fn eval(&self, _ctx: &EvalContext, inputs: TVec<TValue>) -> TractResult<TVec<TValue>> {
        let x = args_1!(inputs);
        let &[n, c, h, w] = x.shape() else { bail!("Conv: a rank-4 NCHW input, not {:?}", x.shape()) };
        ensure!(c == self.bias.len(), "Conv: {c} channels for {} depthwise filters", self.bias.len());
        let mut out = Tensor::zero::<f32>(&[n, c, out_dim(h, self.stride), out_dim(w, self.stride)])?;
        {
            let (k, b) = (self.weights.try_as_plain_ram()?, self.bias.try_as_plain_ram()?);
            let (input, mut dest) = (x.try_as_plain_ram()?, out.try_as_plain_ram_mut()?);
            let (k, b) = (k.as_slice::<f32>()?, b.as_slice::<f32>()?);
            depthwise_3x3(input.as_slice::<f32>()?, dest.as_slice_mut::<f32>()?, (c, h, w), self.stride, k, b);
        }
        Ok(tvec!(out.into_tvalue()))
    }
}

impl TypedOp for Depthwise3x3 {
    fn output_facts(&self, inputs: &[&TypedFact]) -> TractResult<TVec<TypedFact>> {
        let s = &inputs[0].shape;
        ensure!(s.rank() == 4, "Conv: a rank-4 NCHW input, not {s:?}");
        let dim = |d: &TDim| (d.clone() - 1) / self.stride as u64 + 1;
        Ok(tvec!(f32::fact([s[0].clone(), s[1].clone(), dim(&s[2]), dim(&s[3])])))
    }

    as_op!();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition, one output value at a time.
    fn reference(x: &[f32], c: usize, h: usize, w: usize, stride: usize, k: &[f32], b: &[f32]) -> Vec<f32> {
        let (oh, ow) = (out_dim(h, stride), out_dim(w, stride));
        let mut out = vec![];
        for p in 0..x.len() / (h * w) {
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut acc = b[p % c];
                    for ky in 0..3 {
                        for kx in 0..3 {
                            let (iy, ix) = ((oy * stride + ky) as isize - 1, (ox * stride + kx) as isize - 1);
                            if iy >= 0 && ix >= 0 && (iy as usize) < h && (ix as usize) < w {
                                acc += k[(p % c) * 9 + ky * 3 + kx] * x[p * h * w + iy as usize * w + ix as usize];
                            }
                        }
                    }
                    out.push(acc);
                }
            }
        }
        out
    }

    #[test]
    fn rows_at_a_time_equal_the_definition_at_both_strides_and_odd_sizes() {
        let mut v = 0.37f32;
        let mut next = || {
            v = (v * 7.13 + 0.31).fract();
            v - 0.5
        };
        for (c, h, w) in [(3, 5, 7), (2, 6, 6), (1, 1, 1), (4, 2, 9)] {
            let x: Vec<f32> = (0..2 * c * h * w).map(|_| next()).collect();
            let k: Vec<f32> = (0..c * 9).map(|_| next()).collect();
            let b: Vec<f32> = (0..c).map(|_| next()).collect();
            for stride in [1, 2] {
                let want = reference(&x, c, h, w, stride, &k, &b);
                let mut got = vec![0f32; want.len()];
                depthwise_3x3(&x, &mut got, (c, h, w), stride, &k, &b);
                let diff = got.iter().zip(&want).fold(0f32, |m, (a, b)| m.max((a - b).abs()));
                assert!(diff < 1e-5, "{c}x{h}x{w} stride {stride}: {diff}");
            }
        }
    }
}
