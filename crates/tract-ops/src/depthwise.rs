//! 3×3 depthwise convolutions, stride 1 or 2, padded by one, on NCHW f32
//! with constant weights: YuNet's fifteen that follow a 1×1 of more than
//! [`fusiond_kernels::pointwise::MAX_CI`] input channels, SCRFD's first (16
//! channels at 320×320) and its two of stride 2 after such a 1×1 (its other
//! two go into [`super::pw_dw`]). The rows of each plane go through the
//! kernels of [`fusiond_kernels::depthwise`] (at stride 1, the fused
//! blocks'), four output rows at a time, in tract's summing order, and rows
//! are shared among tract's threads. It takes in the ReLU and the
//! quantise-dequantise pair after it, and where a 1×1 convolution alone
//! feeds it, [`super::pw_dw`] takes it into one block with that.
//!
//! Wired where the pointwise kernel is (x86_64 with AVX2 and FMA).

use super::{next_tail, share_rows, Tail};
use fusiond_kernels::depthwise::{depthwise_rows, depthwise_rows_s2};
use fusiond_kernels::quant::{fake_quant_in_place, Grid};
use std::ops::Range;
use std::sync::Arc;
use tract_onnx::tract_core::{args_1, as_op, op_as_typed_op, op_out_of_plan};
use tract_onnx::tract_hir::internal::*;
use tract_onnx::tract_hir::ops::cnn::{Conv, PaddingSpec};

/// A 3×3 depthwise convolution (stride 1 or 2, padded by one), with what
/// it took in after it.
#[derive(Debug, Clone, PartialEq)]
pub struct Depthwise {
    /// One kernel a channel, row by row.
    pub kernels: Arc<Vec<[f32; 9]>>,
    pub bias: Arc<Vec<f32>>,
    /// 1 or 2, across and down alike.
    pub stride: usize,
    /// Whether negative outputs become 0 (a ReLU taken in).
    pub relu: bool,
    /// The grid the output is rounded to, in an INT8 graph.
    pub out_grid: Option<Grid>,
}

impl Eq for Depthwise {}

/// Whether the attributes of `conv` allow a [`Depthwise`]: a 3×3 kernel,
/// groups, stride 1 or 2 (the same both ways), dilation 1, padding 1 on
/// every side (or "same" at stride 1).
pub fn may_be_depthwise(conv: &Conv) -> bool {
    let ones = |v: &Option<TVec<usize>>| v.as_ref().is_none_or(|v| v.iter().all(|d| *d == 1));
    let stride = stride(conv);
    let pads_one = match &conv.padding {
        PaddingSpec::Explicit(b, a) | PaddingSpec::ExplicitOnnxPool(b, a, false) => b.iter().chain(a).all(|p| *p == 1),
        PaddingSpec::SameUpper | PaddingSpec::SameLower => stride == Some(1),
        _ => false,
    };
    conv.group.is_some_and(|g| g > 1)
        && conv.kernel_shape.as_ref().is_none_or(|k| k[..] == [3, 3])
        && stride.is_some()
        && ones(&conv.dilations)
        && pads_one
}

/// The convolution's stride where it is 1 or 2 both ways.
fn stride(conv: &Conv) -> Option<usize> {
    match conv.strides.as_deref() {
        None => Some(1),
        Some(&[a, b]) if a == b && (a == 1 || a == 2) => Some(a),
        _ => None,
    }
}

impl Depthwise {
    /// The op for these input facts (weights `c`×1×3×3 over `c` channels in
    /// `c` groups, bias `c` or none), or `None` where it does not apply.
    pub fn for_facts(conv: &Conv, x: &TypedFact, w: &TypedFact, bias: Option<&TypedFact>) -> Option<Depthwise> {
        let f32_dt = f32::datum_type();
        let w = w.konst.as_ref()?;
        let &[c, 1, 3, 3] = w.shape() else { return None };
        let channels_match = x.shape.rank() == 4 && x.shape[1].to_usize().is_ok_and(|d| d == c);
        if x.datum_type != f32_dt || w.datum_type() != f32_dt || !channels_match || conv.group != Some(c) {
            return None;
        }
        let stride = stride(conv)?;
        let bias = super::const_bias(bias, c)?;
        let w = w.try_as_plain_ram().ok()?;
        let kernels = w.as_slice::<f32>().ok()?.chunks_exact(9).map(|k| std::array::from_fn(|i| k[i])).collect();
        Some(Depthwise { kernels: Arc::new(kernels), bias: Arc::new(bias), stride, relu: false, out_grid: None })
    }

    /// The output's height or width for the input's `d`.
    fn out_size(&self, d: usize) -> usize {
        d.div_ceil(self.stride)
    }

    /// One batch item: `x` is `c` planes of `h`×`w`, `y` as many of the
    /// output's size. Output rows are shared among tract's threads.
    pub fn run(&self, x: &[f32], y: &mut [f32], h: usize, w: usize) {
        let size = (self.out_size(h), self.out_size(w));
        share_rows(y, size, 9, |range, share| self.rows(x, (h, w), range, share));
    }

    /// Output rows `range` of every plane into `out` (one slice a plane,
    /// holding those rows).
    fn rows(&self, x: &[f32], (h, w): (usize, usize), range: Range<usize>, out: Vec<&mut [f32]>) {
        let (zeros, ow) = (vec![0f32; w], self.out_size(w));
        let mut scratch = Vec::new();
        for (c, (plane, done)) in x.chunks_exact(h * w).zip(out).enumerate() {
            let row = |r: usize| if (1..=h).contains(&r) { &plane[(r - 1) * w..][..w] } else { &zeros[..] };
            // Input row r - 1 for each r: the row above the first output
            // row's centre row to the one below the last's.
            let s = self.stride;
            let inputs: Vec<&[f32]> = (s * range.start..s * (range.end - 1) + 3).map(row).collect();
            let mut dst: Vec<&mut [f32]> = done.chunks_exact_mut(ow).collect();
            let (k, bias) = (&self.kernels[c], self.bias[c]);
            if s == 1 {
                depthwise_rows(&inputs, k, bias, self.relu, &mut dst);
            } else {
                depthwise_rows_s2(&inputs, k, (bias, self.relu), &mut dst, &mut scratch);
            }
            if let Some(grid) = self.out_grid {
                fake_quant_in_place(done, grid);
            }
        }
    }
}

impl Op for Depthwise {
    fn name(&self) -> StaticName {
        let relu = if self.relu { "+Relu" } else { "" };
        let out = if self.out_grid.is_some() { "+FakeQuant" } else { "" };
        format!("FusiondDepthwise{relu}{out}").into()
    }

    op_as_typed_op!();
}

impl EvalOp for Depthwise {
    op_out_of_plan!();

    fn eval(&self, _ctx: &EvalContext, inputs: TVec<TValue>) -> TractResult<TVec<TValue>> {
        let x = args_1!(inputs);
        let &[n, c, h, w] = x.shape() else { bail!("Conv 3×3 depthwise: a rank-4 NCHW input, not {:?}", x.shape()) };
        ensure!(c == self.bias.len(), "Conv 3×3 depthwise: {c} channels where the weights have {}", self.bias.len());
        let (oh, ow) = (self.out_size(h), self.out_size(w));
        // SAFETY: every value is written below (`run` writes whole planes).
        #[allow(unsafe_code)]
        let mut y = unsafe { Tensor::uninitialized::<f32>(&[n, c, oh, ow])? };
        if n * c * oh * ow > 0 {
            let xs = x.try_as_plain_ram()?;
            let mut ys = y.try_as_plain_ram_mut()?;
            let xs = xs.as_slice::<f32>()?.chunks_exact(c * h * w);
            for (x, y) in xs.zip(ys.as_slice_mut::<f32>()?.chunks_exact_mut(c * oh * ow)) {
                self.run(x, y, h, w);
            }
        }
        Ok(tvec!(y.into_tvalue()))
    }
}

impl TypedOp for Depthwise {
    fn output_facts(&self, inputs: &[&TypedFact]) -> TractResult<TVec<TypedFact>> {
        let s = &inputs[0].shape;
        ensure!(s.rank() == 4, "Conv 3×3 depthwise: a rank-4 NCHW input, not {s:?}");
        let out = |d: &TDim| (d.clone() + (self.stride - 1) as u64) / self.stride as u64;
        Ok(tvec!(f32::fact([s[0].clone(), s[1].clone(), out(&s[2]), out(&s[3])])))
    }

    /// Takes in the ReLU that alone reads this node, and then the
    /// quantise-dequantise pair that alone reads it.
    fn declutter(&self, model: &TypedModel, node: &TypedNode) -> TractResult<Option<TypedModelPatch>> {
        let fused = match next_tail(model, node, self.relu, self.out_grid)? {
            Some(Tail::Relu) => Depthwise { relu: true, ..self.clone() },
            Some(Tail::Grid(grid)) => Depthwise { out_grid: Some(grid), ..self.clone() },
            None => return Ok(None),
        };
        TypedModelPatch::fuse_with_next(model, node, fused).map(Some)
    }

    as_op!();
}

#[cfg(test)]
mod tests {
    use super::*;
    use fusiond_kernels::test_values as values;
    use tract_linalg::multithread::{multithread_tract_scope, Executor};

    #[test]
    fn each_output_is_its_bias_plus_the_taps_under_it_whatever_the_stride_and_threads() {
        // Odd and even sides at both strides, one pixel, rows as wide as a
        // vector or two at stride 2 (16, 20: a last vector over the one
        // before), and rows wider than a few vectors.
        let cases = [
            (3, 5, 7, false),
            (2, 1, 1, true),
            (2, 9, 16, false),
            (3, 6, 20, true),
            (16, 40, 33, true),
            (4, 12, 50, false),
        ];
        for ((c, h, w, relu), stride) in cases.into_iter().flat_map(|case| [(case, 1), (case, 2)]) {
            let kernels: Vec<[f32; 9]> =
                values(c * 9, 1).chunks_exact(9).map(|k| std::array::from_fn(|i| k[i])).collect();
            let (kernels, bias) = (Arc::new(kernels), Arc::new(values(c, 2)));
            let op = Depthwise { kernels, bias, stride, relu, out_grid: None };
            let (oh, ow) = (op.out_size(h), op.out_size(w));
            let x = values(c * h * w, 3);
            let at = |p: usize, y: isize, x_: isize| {
                let inside = (0..h as isize).contains(&y) && (0..w as isize).contains(&x_);
                if inside {
                    x[p * h * w + y as usize * w + x_ as usize] as f64
                } else {
                    0.0
                }
            };
            let want: Vec<f32> = (0..c * oh * ow)
                .map(|i| {
                    let (p, oy, ox) = (i / (oh * ow), i / ow % oh, i % ow);
                    let (y, x_) = ((oy * stride) as isize, (ox * stride) as isize);
                    let taps = (0..9)
                        .map(|t| op.kernels[p][t] as f64 * at(p, y + t as isize / 3 - 1, x_ + t as isize % 3 - 1));
                    let v = op.bias[p] as f64 + taps.sum::<f64>();
                    (if relu { v.max(0.0) } else { v }) as f32
                })
                .collect();
            for threads in [1, 3] {
                let mut y = vec![f32::NAN; c * oh * ow];
                multithread_tract_scope(Executor::multithread(threads), || op.run(&x, &mut y, h, w));
                let worst = y.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
                assert!(worst < 1e-5, "{c}×{h}×{w}, stride {stride}, relu {relu}, {threads} threads: off by {worst}");
            }
        }
    }
}
