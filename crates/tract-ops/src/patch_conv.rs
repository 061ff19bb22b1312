//! A convolution whose patch is small (input channels × kernel height × width
//! at most [`MAX_TAPS`]): the first layer of YuNet and SCRFD, 3 × 3 × 3 taps
//! with stride 2 over a 640×640 picture, and SCRFD's 3×3 convolutions of 16
//! channels in its heads. `PatchConv` copies the patches of a few output rows
//! into a buffer that stays in the L2 cache (one row of each tap, "im2col") and
//! runs them through the pointwise kernel as that many input channels, then
//! applies the ReLU after it, taken in by `declutter`. The taps are summed in
//! tract's own order (input channel, kernel row, kernel column, from the
//! bias, by FMA), so the outputs are those of tract's vectorised loop.
//!
//! A convolution with very many taps (at least [`gemm_conv::MIN_TAPS`],
//! the swapper's), or with many taps and few output channels
//! ([`FEW_CO`]: SCRFD's merged heads), is the same op with another kernel:
//! the blocked product of [`gemm_conv`], whose sums are those of tract's
//! product (bit for bit in `tests/it/tract_ops.rs`).

use super::gemm_conv;
use super::geometry::Geometry;
use super::int8_weights::Int8Weights;
use super::share_rows;
use super::{next_tail, Tail};
use fusiond_kernels::gather::gather;
use fusiond_kernels::gemm::{GemmWeights, Panels};
use fusiond_kernels::gemm_int8::{self, Dot, DotWeights};
use fusiond_kernels::pointwise::{pointwise, Packed, Run, Tiles};
use fusiond_kernels::quant::Grid;
use std::ops::Range;
use tract_onnx::tract_core::{args_1, as_op, op_as_typed_op, op_out_of_plan};
use tract_onnx::tract_hir::internal::*;
use tract_onnx::tract_hir::ops::cnn::Conv;

/// The patches and outputs a thread keeps at once, in values: 256 KiB, to
/// stay in the L2 cache (tuning: crates/tract-ops/README.md).
const STRIP_VALUES: usize = 64 << 10;

/// How the patches meet the weights.
#[derive(Debug, Clone, PartialEq)]
enum Kernel {
    /// A few rows of patches at a time through the pointwise kernel, the
    /// weights as a 1×1 convolution of the patch rows, in OIHW order.
    Patches(Packed),
    /// A product blocked for the caches ([`gemm_conv`]), for many taps.
    Gemm(GemmWeights),
}

/// A convolution run on its patches, as the module describes.
#[derive(Debug, Clone, PartialEq)]
pub struct PatchConv {
    geometry: Geometry,
    kernel: Kernel,
    relu: bool,
    /// The grid of the quantise-dequantise pair after it, in an INT8 graph.
    out_grid: Option<Grid>,
    /// The grid of the input, where the integer product runs it.
    in_grid: Option<Grid>,
}

impl Eq for PatchConv {}

/// The fewest taps an INT8 convolution runs through the integer product
/// ([`gemm_int8`]) with on this CPU (fewer take the f32 ones); `None`
/// without an 8-bit dot product.
///
/// With AVX-512 VNNI, 256: from there the integer product beat tract's f32
/// product on every shared model's convolutions it was tried on. With
/// AVX-VNNI alone, [`gemm_conv::MIN_TAPS`]: the convolutions that take
/// fusiond's blocked f32 product anyway, since the 256-bit tile lost to the
/// f32 products on fewer taps. On aarch64's dot product, [`NEON_DOT_MIN_TAPS`]
/// (tuning: crates/tract-ops/README.md).
pub fn integer_min_taps() -> Option<usize> {
    gemm_int8::dot().map(|dot| match dot {
        Dot::Vnni512 => 256,
        Dot::Vnni256 => gemm_conv::MIN_TAPS,
        Dot::NeonDot => NEON_DOT_MIN_TAPS,
    })
}

/// See [`integer_min_taps`]: chosen by the ARM cost model on cortex-a76
/// (tuning: crates/tract-ops/README.md).
const NEON_DOT_MIN_TAPS: usize = 64;

/// The most taps a patch fusiond runs this way: up to it (SCRFD's 3×3
/// convolutions of 16 channels) the patch kernel beats tract's convolution
/// on the large maps; with more (its 576-tap heads) tract's product is as
/// fast or faster (tuning: crates/tract-ops/README.md).
const MAX_TAPS: usize = 144;

/// The most output channels a convolution of [`FEW_CO_TAPS`] taps or more
/// takes the blocked product with (below [`gemm_conv::MIN_TAPS`]): tract's
/// product is slow on so few rows of weights. SCRFD's merged heads (576
/// taps, 30 channels) take it, while ArcFace's plan takes none: tract's own
/// product still runs all 22 of its convolutions (tuning:
/// crates/tract-ops/README.md).
const FEW_CO: usize = 64;

/// See [`FEW_CO`] (tuning: crates/tract-ops/README.md).
const FEW_CO_TAPS: usize = 512;

impl PatchConv {
    /// The op for this ONNX convolution (already found plain) and these
    /// facts, where [`Geometry::of`] finds one and the weights are f32
    /// constants: with at most [`MAX_TAPS`] taps (and more than one a
    /// channel) through the pointwise kernel, with at least
    /// [`gemm_conv::MIN_TAPS`] (or [`FEW_CO_TAPS`] and at most [`FEW_CO`]
    /// output channels) through the blocked product; `None` otherwise.
    pub fn for_facts(conv: &Conv, x: &TypedFact, w: &TypedFact, bias: Option<&TypedFact>) -> Option<PatchConv> {
        let konst = w.konst.as_ref()?;
        let geometry = Geometry::of(conv, x, konst.shape())?;
        let (co, taps, (kh, kw)) = (konst.shape()[0], geometry.taps(), geometry.kernel);
        let small = taps <= MAX_TAPS && kh * kw > 1;
        let blocked = taps >= gemm_conv::MIN_TAPS || (taps >= FEW_CO_TAPS && co <= FEW_CO);
        if !small && !blocked {
            return None;
        }
        let bias = super::const_bias(bias, co)?;
        let weights = konst.try_as_plain_ram().ok()?;
        let weights = weights.as_slice::<f32>().ok()?;
        let kernel = if small {
            Kernel::Patches(Packed::new(weights, &bias, co, taps))
        } else {
            let konst = konst.clone();
            let packer = move || {
                let weights = konst.try_as_plain_ram().ok();
                let weights = weights.as_ref().and_then(|w| w.as_slice::<f32>().ok()).unwrap_or(&[]);
                Panels::F32(fusiond_kernels::gemm::pack(weights, co, taps))
            };
            Kernel::Gemm(GemmWeights::deferred(Box::new(packer), &bias, co, taps))
        };
        Some(PatchConv { geometry, kernel, relu: false, out_grid: None, in_grid: None })
    }

    /// The op for this ONNX convolution (already found plain) of INT8
    /// weights that tract would dequantise as it runs ([`Int8Weights`]),
    /// where [`Geometry::of`] finds one with at least
    /// [`gemm_conv::MIN_TAPS`] taps: the blocked product, which keeps them
    /// INT8; `None` otherwise. With the input's grid (`in_grid`, where a
    /// quantise-dequantise pair feeds it), symmetric weights and a CPU that
    /// has it, the integer product ([`gemm_int8`]); else the f32 one.
    pub fn for_int8(
        conv: &Conv,
        (x, in_grid): (&TypedFact, Option<Grid>),
        w: Int8Weights,
        bias: Option<&TypedFact>,
    ) -> Option<PatchConv> {
        let geometry = Geometry::of(conv, x, w.values.shape())?;
        let (co, taps) = (w.values.shape()[0], geometry.taps());
        let symmetric = w.zero.iter().all(|z| *z == 0.0);
        let enough = integer_min_taps().is_some_and(|m| taps >= m);
        let integer = symmetric && co >= gemm_int8::MIN_CO && enough && gemm_int8::fits(taps);
        let in_grid = in_grid.filter(|_| integer);
        // Without fusiond's f32 kernels (ARM), only the integer product.
        let f32_product = taps >= gemm_conv::MIN_TAPS && fusiond_kernels::pointwise::kernel_available();
        let blocked = in_grid.is_some() || f32_product;
        if !blocked || w.values.try_as_plain_ram().ok()?.as_slice::<i8>().is_err() {
            return None;
        }
        let bias = super::const_bias(bias, co)?;
        let dot_bias = bias.clone();
        let packer = move || {
            let values = w.values.try_as_plain_ram().ok();
            let values = values.as_ref().and_then(|v| v.as_slice::<i8>().ok()).unwrap_or(&[]);
            let dot = in_grid.and_then(|g| DotWeights::pack(values, (co, taps), (&w.scale, &dot_bias), g));
            dot.map(Panels::Dot).unwrap_or_else(|| {
                let (scale, zero) =
                    (fusiond_kernels::gemm::padded(&w.scale, co), fusiond_kernels::gemm::padded(&w.zero, co));
                Panels::Int8 { values: fusiond_kernels::gemm::pack(values, co, taps), scale, zero }
            })
        };
        let kernel = Kernel::Gemm(GemmWeights::deferred(Box::new(packer), &bias, co, taps));
        Some(PatchConv { geometry, kernel, relu: false, out_grid: None, in_grid })
    }

    /// The grid its outputs are rounded to, in an INT8 graph.
    pub fn out_grid(&self) -> Option<Grid> {
        self.out_grid
    }

    /// Output channels.
    fn co(&self) -> usize {
        match &self.kernel {
            Kernel::Patches(pw) => pw.channels().1,
            Kernel::Gemm(w) => w.shape().0,
        }
    }

    /// One batch item: `x` is `ci` input planes, `y` `co` output planes.
    /// Output rows are shared among tract's threads.
    pub fn run(&self, x: &[f32], y: &mut [f32]) {
        match &self.kernel {
            Kernel::Patches(pw) => {
                let taps = self.geometry.ci * self.geometry.kernel.0 * self.geometry.kernel.1;
                share_rows(y, self.geometry.output, taps, |range, share| self.rows(pw, x, range, share))
            }
            Kernel::Gemm(w) => gemm_conv::run(&self.geometry, w, (self.relu, self.out_grid), x, y),
        }
    }

    /// Output rows `range` of every plane into `out` (one slice a plane,
    /// holding those rows), a few rows at a time.
    fn rows(&self, pw: &Packed, x: &[f32], range: Range<usize>, mut out: Vec<&mut [f32]>) {
        let ow = self.geometry.output.1;
        let (taps, co) = pw.channels();
        let step = (STRIP_VALUES / ((taps + co) * ow).max(1)).max(1);
        let mut patches = vec![0f32; taps * step * ow];
        for y0 in range.clone().step_by(step) {
            let y1 = (y0 + step).min(range.end);
            let n = (y1 - y0) * ow;
            self.im2col(x, y0..y1, &mut patches[..taps * n]);
            let patch_run = Run { data: &patches[..taps * n], stride: n, n };
            let mut rows: Vec<&mut [f32]> = out.iter_mut().map(|o| &mut o[(y0 - range.start) * ow..][..n]).collect();
            let tiles = Tiles { relu: self.relu, round: self.out_grid, ..pw.tiles(0..co) };
            pointwise(patch_run, tiles, &mut rows);
        }
    }

    /// The patch rows of output rows `rows`: for each tap (input channel,
    /// kernel row, kernel column), the input value under it at every output
    /// pixel, zero in the padding.
    fn im2col(&self, x: &[f32], rows: Range<usize>, patches: &mut [f32]) {
        let g = self.geometry;
        let ((h, w), ow, (kh, kw), sx, bl) = (g.input, g.output.1, g.kernel, g.stride.1, g.before.1);
        let n = rows.len() * ow;
        for (t, line) in patches.chunks_exact_mut(n).enumerate() {
            let (c, dy, dx) = (t / (kh * kw), t / kw % kh, t % kw);
            let inside = g.columns(dx);
            for (y, dst) in rows.clone().zip(line.chunks_exact_mut(ow)) {
                let Some(iy) = g.input_row(y, dy).filter(|_| !inside.is_empty()) else {
                    dst.fill(0.0);
                    continue;
                };
                let src = &x[(c * h + iy) * w..][..w];
                dst[..inside.start].fill(0.0);
                dst[inside.end..].fill(0.0);
                let first = inside.start * sx + dx - bl;
                let dst = &mut dst[inside.clone()];
                gather(dst, &src[first..], sx);
            }
        }
    }
}

impl Op for PatchConv {
    fn name(&self) -> StaticName {
        let relu = if self.relu { "+Relu" } else { "" };
        let grid = if self.out_grid.is_some() { "+FakeQuant" } else { "" };
        let kind = match (&self.kernel, self.in_grid) {
            (Kernel::Gemm(_), Some(_)) => "GemmInt8",
            (Kernel::Gemm(_), None) => "Gemm",
            (Kernel::Patches(_), _) => "Patch",
        };
        format!("Fusiond{kind}Conv{relu}{grid}").into()
    }

    fn info(&self) -> TractResult<Vec<String>> {
        let g = self.geometry;
        Ok(vec![format!("{:?} kernel, {:?} stride, {} taps", g.kernel, g.stride, g.taps())])
    }

    op_as_typed_op!();
}

impl EvalOp for PatchConv {
    op_out_of_plan!();

    fn eval(&self, _ctx: &EvalContext, inputs: TVec<TValue>) -> TractResult<TVec<TValue>> {
        let x = args_1!(inputs);
        let g = self.geometry;
        let co = self.co();
        let &[n, c, h, w] = x.shape() else { bail!("Conv: a rank-4 NCHW input, not {:?}", x.shape()) };
        ensure!((c, (h, w)) == (g.ci, g.input), "Conv: input {:?} where the model was planned for {:?}", x.shape(), g);
        let (oh, ow) = g.output;
        // SAFETY: every value is written below (`run` writes whole planes).
        #[allow(unsafe_code)]
        let mut y = unsafe { Tensor::uninitialized::<f32>(&[n, co, oh, ow])? };
        if n * oh * ow > 0 {
            let xs = x.try_as_plain_ram()?;
            let mut ys = y.try_as_plain_ram_mut()?;
            let items = xs
                .as_slice::<f32>()?
                .chunks_exact(c * h * w)
                .zip(ys.as_slice_mut::<f32>()?.chunks_exact_mut(co * oh * ow));
            for (x, y) in items {
                self.run(x, y);
            }
        }
        Ok(tvec!(y.into_tvalue()))
    }
}

impl TypedOp for PatchConv {
    fn output_facts(&self, inputs: &[&TypedFact]) -> TractResult<TVec<TypedFact>> {
        let s = &inputs[0].shape;
        ensure!(s.rank() == 4, "Conv: a rank-4 NCHW input, not {s:?}");
        let (oh, ow) = self.geometry.output;
        Ok(tvec!(f32::fact([s[0].clone(), self.co().to_dim(), oh.to_dim(), ow.to_dim()])))
    }

    /// Takes in the ReLU that alone reads this node, and then the
    /// quantise-dequantise pair that alone reads it.
    fn declutter(&self, model: &TypedModel, node: &TypedNode) -> TractResult<Option<TypedModelPatch>> {
        let fused = match next_tail(model, node, self.relu, self.out_grid)? {
            Some(Tail::Relu) => PatchConv { relu: true, ..self.clone() },
            Some(Tail::Grid(grid)) => PatchConv { out_grid: Some(grid), ..self.clone() },
            None => return Ok(None),
        };
        TypedModelPatch::fuse_with_next(model, node, fused).map(Some)
    }

    as_op!();
}

#[cfg(test)]
#[path = "patch_conv_tests.rs"]
mod tests;
