//! Where a convolution's taps fall over its input, read from the ONNX
//! node and the facts tract knows when the node is wired: the shape that
//! fusiond's patch kernels (`patch_conv`, `gemm_conv`) work to.

use tract_onnx::tract_hir::internal::*;
use tract_onnx::tract_hir::ops::cnn::{Conv, PaddingSpec};

/// Where the kernel's taps fall: input and output sizes, kernel, strides
/// and the padding before each axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    pub ci: usize,
    pub input: (usize, usize),
    pub output: (usize, usize),
    pub kernel: (usize, usize),
    pub stride: (usize, usize),
    pub before: (usize, usize),
}

impl Geometry {
    /// The geometry of an ONNX convolution over an f32 NCHW input of fixed
    /// size with constant OIHW weights of shape `weights` and explicit
    /// padding; `None` for any other.
    pub fn of(conv: &Conv, x: &TypedFact, weights: &[usize]) -> Option<Geometry> {
        let &[co, ci, kh, kw] = weights else { return None };
        let size = |d: usize| x.shape.get(d)?.to_usize().ok();
        let (c, h, wd) = (size(1)?, size(2)?, size(3)?);
        let fits = c == ci && kh * kw > 0 && co > 0 && x.shape.rank() == 4;
        if x.datum_type != f32::datum_type() || !fits {
            return None;
        }
        let (before, after) = match &conv.padding {
            PaddingSpec::Explicit(b, a) | PaddingSpec::ExplicitOnnxPool(b, a, false) => (b.clone(), a.clone()),
            PaddingSpec::Valid => (tvec!(0, 0), tvec!(0, 0)),
            _ => return None,
        };
        let strides = conv.strides.clone().unwrap_or_else(|| tvec!(1, 1));
        let &[sy, sx] = &strides[..] else { return None };
        let (&[bt, bl], &[at, al]) = (&before[..], &after[..]) else { return None };
        let (padded_h, padded_w) = (h + bt + at, wd + bl + al);
        if padded_h < kh || padded_w < kw || sy == 0 || sx == 0 {
            return None;
        }
        let output = ((padded_h - kh) / sy + 1, (padded_w - kw) / sx + 1);
        Some(Geometry { ci, input: (h, wd), output, kernel: (kh, kw), stride: (sy, sx), before: (bt, bl) })
    }

    /// The output columns whose input column under kernel column `dx`
    /// (`x·sx + dx − bl`) lies inside the input rather than in the padding.
    pub fn columns(&self, dx: usize) -> std::ops::Range<usize> {
        let ((_, w), (_, ow), (_, sx), (_, bl)) = (self.input, self.output, self.stride, self.before);
        let first = bl.saturating_sub(dx).div_ceil(sx);
        let end = (w + bl).saturating_sub(dx).div_ceil(sx).min(ow);
        first..end.max(first)
    }

    /// The input row under output row `oy` and kernel row `dy`, unless it
    /// falls in the padding.
    pub fn input_row(&self, oy: usize, dy: usize) -> Option<usize> {
        (oy * self.stride.0 + dy).checked_sub(self.before.0).filter(|iy| *iy < self.input.0)
    }

    pub fn taps(&self) -> usize {
        self.ci * self.kernel.0 * self.kernel.1
    }
}
