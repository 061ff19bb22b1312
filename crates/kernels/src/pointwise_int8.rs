//! The pointwise half of an INT8 fused block (crates/tract-ops'
//! `pw_dw::PointwiseDepthwise`) as integers, where the depthwise half runs as
//! integers too ([`crate::depthwise_int8`]) and the block's input lies on a
//! grid (a quantise-dequantise pair, or an op that takes one in, writes it).
//! The input goes back to that grid's integers (shifted to 0..=255), four
//! channels to a 32-bit word, a row at a time; the weights, symmetric INT8 per
//! output channel, are found again in their f32 fold
//! ([`crate::int8::recover`]). With AVX-512 VNNI one `vpdpbusd` adds four
//! channels' products for 16 pixels, where f32 takes four FMAs. Each exact sum
//! is dequantised ([`Dequantise`]), clamped (with the ReLU between the halves,
//! if any) and rounded to the grid between the halves, and its integer is
//! written straight into the rows the depthwise half reads: the f32 output and
//! its conversion are not made at all.
//!
//! An output is the exact sum rounded once, where the f32 half rounds at
//! every product; the two land a grid step apart where a sum lies within
//! those roundings of a tie.

use crate::gemm_int8::{zero_shift, Dequantise};
use crate::quant::Grid;

/// The output channels a pass over a row's words serves (tuning:
/// crates/kernels/README.md).
const BLOCK: usize = 8;

/// A 1×1 convolution's weights as integers, over an input on one grid,
/// writing the integers of another.
#[derive(Debug, Clone, PartialEq)]
pub struct DotPointwise {
    ci: usize,
    co: usize,
    /// Per output channel, per four input channels, their weights as the
    /// bytes of a word.
    words: Vec<i32>,
    /// Per output channel, its sum to steps of the output grid.
    outputs: Vec<Dequantise>,
    in_grid: Grid,
    /// The clamps in steps of the output grid (the ReLU's 0 folded in).
    low: f32,
    high: f32,
    /// The output grid's zero point, as its integers are shifted.
    shift: i32,
}

impl DotPointwise {
    /// `weights` (`co` rows of `ci`) and `bias` over an input on `in_grid`,
    /// with a ReLU after them where `relu`, rounded to `out_grid`; `None`
    /// where the weights are not symmetric INT8 folded to f32 or the
    /// channels do not come in fours (in) and [`BLOCK`]s (out).
    pub fn new(
        weights: &[f32],
        bias: &[f32],
        (ci, co): (usize, usize),
        grids: (Grid, Grid),
        relu: bool,
    ) -> Option<Self> {
        let (in_grid, out_grid) = grids;
        if ci % 4 != 0 || co % BLOCK != 0 || co == 0 || bias.len() != co || weights.len() != ci * co {
            return None;
        }
        let found = crate::int8::recover(weights, co)?;
        let values = &found.values;
        let mut words = Vec::with_capacity(co * ci / 4);
        let mut outputs = Vec::with_capacity(co);
        for ((row, &scale), &b) in values.chunks_exact(ci).zip(&found.scale).zip(bias) {
            words.extend(row.chunks_exact(4).map(|k| i32::from_le_bytes([k[0], k[1], k[2], k[3]].map(|v| v as u8))));
            let sum = row.iter().map(|&v| i32::from(v)).sum();
            outputs.push(Dequantise::new(scale, sum, b, in_grid).times(out_grid.scale.recip()));
        }
        let low = out_grid.lo - out_grid.zero_point;
        let low = if relu { low.max(0.0) } else { low };
        let (high, shift) = (out_grid.hi - out_grid.zero_point, zero_shift(out_grid));
        Some(DotPointwise { ci, co, words, outputs, in_grid, low, high, shift })
    }

    /// The output integers of one row of `w` pixels: the input's row is
    /// `x[at..at + w]` of each of `ci` planes `plane` values apart; output
    /// channel `c`'s row goes to `out[c × stride + offset..][..w]`.
    /// `words` is scratch.
    pub fn row(
        &self,
        (x, plane, at): (&[f32], usize, usize),
        w: usize,
        out: (&mut [u8], usize, usize),
        words: &mut Vec<i32>,
    ) {
        let (out, stride, offset) = out;
        assert!(
            (self.ci - 1) * plane + at + w <= x.len() && (self.co - 1) * stride + offset + w <= out.len(),
            "pointwise_int8: a row past its planes"
        );
        let padded = w.div_ceil(16) * 16;
        words.resize(self.ci / 4 * padded, 0);
        #[cfg(target_arch = "x86_64")]
        if crate::depthwise_int8::available() {
            // SAFETY: the CPU has AVX-512 VNNI (F, BW and VNNI; checked
            // just above); the rows lie inside `x` and `out` (asserted
            // above) and `words` holds `ci / 4` rows of `padded` words.
            unsafe {
                self.words_avx512((x, plane, at), w, words);
                self.sums_vnni512(words, w, (out, stride, offset));
            }
            return;
        }
        self.row_plain((x, plane, at), w, (out, stride, offset));
    }

    /// [`Self::row`] in plain loops: the reference the VNNI row is held to.
    fn row_plain(
        &self,
        (x, plane, at): (&[f32], usize, usize),
        w: usize,
        (out, stride, offset): (&mut [u8], usize, usize),
    ) {
        let rounding = self.in_grid.rounding();
        let shift = zero_shift(self.in_grid) as f32;
        for p in 0..w {
            let u: Vec<i32> = (0..self.ci).map(|k| (rounding.steps(x[k * plane + at + p]) + shift) as i32).collect();
            for c in 0..self.co {
                let taps = &self.words[c * self.ci / 4..][..self.ci / 4];
                let sum: i32 =
                    taps.iter().flat_map(|t| t.to_le_bytes()).zip(&u).map(|(k, u)| i32::from(k as i8) * u).sum();
                let t = self.outputs[c].apply(sum).clamp(self.low, self.high);
                out[c * stride + offset + p] = (t.round_ties_even() as i32 + self.shift) as u8;
            }
        }
    }

    /// The words of one row: for each four input channels, 16 pixels a
    /// vector, the last through a mask (its other lanes the zero point's).
    ///
    /// # Safety
    /// As [`Self::row`]'s VNNI path.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw")]
    unsafe fn words_avx512(&self, (x, plane, at): (&[f32], usize, usize), w: usize, words: &mut [i32]) {
        use crate::gemm_int8::integers_avx512;
        use std::arch::x86_64::*;
        let padded = w.div_ceil(16) * 16;
        for (q, quad) in words.chunks_exact_mut(padded).enumerate() {
            for p in (0..w).step_by(16) {
                let mask = (u32::MAX >> (32 - (w - p).min(16))) as u16;
                let u = [0, 1, 2, 3].map(|i| {
                    let v = _mm512_maskz_loadu_ps(mask, x.as_ptr().add((4 * q + i) * plane + at + p));
                    integers_avx512(v, self.in_grid)
                });
                let (a, b) = (u[0], _mm512_slli_epi32::<8>(u[1]));
                let (c, d) = (_mm512_slli_epi32::<16>(u[2]), _mm512_slli_epi32::<24>(u[3]));
                let word = _mm512_or_si512(_mm512_or_si512(a, b), _mm512_or_si512(c, d));
                _mm512_storeu_si512(quad.as_mut_ptr().add(p).cast(), word);
            }
        }
    }

    /// The sums of one row's `words` by each output channel's weights,
    /// [`BLOCK`] channels and 16 pixels at a time, finished to the output
    /// integers and written through a mask.
    ///
    /// # Safety
    /// As [`Self::row`]'s VNNI path.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    unsafe fn sums_vnni512(&self, words: &[i32], w: usize, (out, stride, offset): (&mut [u8], usize, usize)) {
        use std::arch::x86_64::*;
        let (quads, padded) = (self.ci / 4, w.div_ceil(16) * 16);
        let (low, high, shift) = (_mm512_set1_ps(self.low), _mm512_set1_ps(self.high), _mm512_set1_epi32(self.shift));
        for c0 in (0..self.co).step_by(BLOCK) {
            let taps = &self.words[c0 * quads..][..BLOCK * quads];
            for p in (0..w).step_by(16) {
                let mut sums = [_mm512_setzero_si512(); BLOCK];
                for q in 0..quads {
                    let word = _mm512_loadu_si512(words.as_ptr().add(q * padded + p).cast());
                    for (j, sum) in sums.iter_mut().enumerate() {
                        *sum = _mm512_dpbusd_epi32(*sum, word, _mm512_set1_epi32(taps[j * quads + q]));
                    }
                }
                let mask = (u32::MAX >> (32 - (w - p).min(16))) as u16;
                for (j, sum) in sums.into_iter().enumerate() {
                    let t = _mm512_min_ps(_mm512_max_ps(self.outputs[c0 + j].apply_avx512(sum), low), high);
                    let u = _mm512_add_epi32(_mm512_cvtps_epi32(t), shift);
                    let dst = out.as_mut_ptr().add((c0 + j) * stride + offset + p);
                    _mm512_mask_cvtepi32_storeu_epi8(dst.cast(), mask, u);
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "pointwise_int8_tests.rs"]
mod tests;
