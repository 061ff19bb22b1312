//! The depthwise half of an INT8 [`super::pw_dw::PointwiseDepthwise`] at
//! stride 1, as integers. Its input, the pointwise half's output that the
//! quantise-dequantise pair between the halves puts on an 8-bit grid, goes
//! back to that grid's integers (shifted to 0..=255) a row at a time; its
//! weights, symmetric INT8 per channel, are found again in their f32 fold
//! (`int8_weights::recovered`). For each output row the bytes of the three
//! input rows at each column make one 32-bit word (top, middle, bottom, 0),
//! and with AVX-512 VNNI three `vpdpbusd` give 16 outputs, one per kernel
//! column: the words left of, at and right of the outputs. In f32 the same
//! 16 outputs take 9 multiplies and 9 adds, twice over on 8 lanes.
//!
//! An output is `scale × s × (Σ k·u − z·Σ k) + bias`
//! ([`super::gemm_int8::Dequantise`]): the exact sum of the dequantised
//! products, rounded once. tract's f32 depthwise convolution rounds at every
//! tap, so where a sum lies within those roundings of a tie of the grid
//! after the block, the two land a step apart.

use super::fake_quant::Grid;
use super::gemm_int8::{zero_shift, Dequantise, Vnni};
use super::int8_weights;
use tract_onnx::prelude::Tensor;

/// A stride-1 3×3 depthwise convolution's kernels as integers, over an input
/// on `grid`.
#[derive(Debug, Clone, PartialEq)]
pub struct DotDepthwise {
    /// Per channel, the kernel's left, centre and right columns, each as
    /// the bytes (top, middle, bottom, 0) of a word.
    columns: Vec<[i32; 3]>,
    outputs: Vec<Dequantise>,
    grid: Grid,
}

/// Whether this CPU runs [`DotDepthwise`]: with AVX-512 VNNI.
pub fn available() -> bool {
    super::gemm_int8::vnni() == Some(Vnni::Bits512)
}

impl DotDepthwise {
    /// `kernels` (row by row, one a channel) and their `bias` over an input
    /// on `grid`; `None` where the kernels are not symmetric INT8 weights
    /// folded to f32.
    pub fn new(kernels: &[[f32; 9]], bias: &[f32], grid: Grid) -> Option<DotDepthwise> {
        let flat: Vec<f32> = kernels.iter().flatten().copied().collect();
        let found = int8_weights::recovered(&Tensor::from_shape(&[kernels.len(), 1, 3, 3], &flat).ok()?)?;
        let values = found.values.try_as_plain_ram().ok()?;
        let values = values.as_slice::<i8>().ok()?;
        if bias.len() != kernels.len() {
            return None;
        }
        let mut columns = Vec::with_capacity(kernels.len());
        let mut outputs = Vec::with_capacity(kernels.len());
        for ((k, &scale), &b) in values.chunks_exact(9).zip(&found.scale).zip(bias) {
            let word = |dx: usize| i32::from_le_bytes([k[dx] as u8, k[3 + dx] as u8, k[6 + dx] as u8, 0]);
            columns.push([word(0), word(1), word(2)]);
            let sum = k.iter().map(|&v| i32::from(v)).sum();
            outputs.push(Dequantise::new(scale, sum, b, grid));
        }
        Some(DotDepthwise { columns, outputs, grid })
    }

    /// The integer of the value 0, which pads the plane.
    pub fn pad(&self) -> u8 {
        zero_shift(self.grid) as u8
    }

    /// `floats` to the grid's integers (rounded half to even, clamped; NaN
    /// is 0, as tract's QuantizeLinear does), shifted to 0..=255, into `out`.
    pub fn to_integers(&self, floats: &[f32], out: &mut [u8]) {
        assert!(out.len() >= floats.len(), "depthwise_int8: the integers do not fit");
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512 (checked just above); `out` holds
            // `floats.len()` values (asserted above).
            return unsafe { to_integers_avx512(floats, self.grid, out) };
        }
        to_integers_loop(floats, self.grid, out);
    }

    /// Channel `c`'s output rows `out` from its input rows `rows` (the row
    /// above the first output row, those at each, and the row below the
    /// last: rows of [`Self::pad`] past the plane's edges), each at least
    /// as long as the output rows; negative outputs become 0 with `relu`.
    /// `quads` is scratch.
    pub fn rows(&self, c: usize, rows: &[&[u8]], relu: bool, out: &mut [&mut [f32]], quads: &mut Vec<u32>) {
        let Some(w) = out.first().map(|o| o.len()) else { return };
        assert!(
            rows.len() == out.len() + 2 && rows.iter().all(|r| r.len() >= w) && out.iter().all(|o| o.len() == w),
            "depthwise_int8: one input row more on each side than output rows, all as long"
        );
        // The words of columns -1 to w, and a vector's worth past them.
        quads.resize(w + 2 + 16, 0);
        let pad = u32::from_le_bytes([self.pad(), self.pad(), self.pad(), 0]);
        let channel = (self.columns[c], self.outputs[c], relu);
        #[cfg(target_arch = "x86_64")]
        let vnni = available();
        for (r, out) in out.iter_mut().enumerate() {
            #[cfg(target_arch = "x86_64")]
            if vnni {
                // SAFETY: the CPU has AVX-512 VNNI (checked just above);
                // `quads` holds 16 words past column w.
                unsafe { row_vnni512(&rows[r..r + 3], pad, channel, out, quads) };
                continue;
            }
            row_plain(&rows[r..r + 3], pad, channel, out, quads);
        }
    }
}

/// The words of the columns of three rows: column x (from -1, the pad) at
/// `quads[x + 1]`.
#[inline(always)]
fn columns_of(rows: &[&[u8]], pad: u32, quads: &mut [u32], w: usize) {
    let (top, middle, bottom) = (&rows[0][..w], &rows[1][..w], &rows[2][..w]);
    let words = top.iter().zip(middle).zip(bottom);
    for (q, ((&a, &b), &c)) in quads[1..=w].iter_mut().zip(words) {
        *q = u32::from(a) | u32::from(b) << 8 | u32::from(c) << 16;
    }
    quads[0] = pad;
    quads[w + 1] = pad;
}

/// One output row in plain loops: the reference the VNNI row is held to.
fn row_plain(rows: &[&[u8]], pad: u32, (columns, d, relu): ([i32; 3], Dequantise, bool), out: &mut [f32], quads: &mut [u32]) {
    columns_of(rows, pad, quads, out.len());
    let dot = |u: u32, k: i32| -> i32 {
        let (u, k) = (u.to_le_bytes(), k.to_le_bytes());
        (0..4).map(|i| i32::from(u[i]) * i32::from(k[i] as i8)).sum()
    };
    for (x, y) in out.iter_mut().enumerate() {
        let sum = (0..3).map(|dx| dot(quads[x + dx], columns[dx])).sum();
        let v = d.apply(sum);
        *y = if relu { v.max(0.0) } else { v };
    }
}

/// [`row_plain`] with AVX-512 VNNI: 16 outputs at a time, the last ones
/// written through a mask.
///
/// # Safety
/// The CPU has AVX-512 VNNI; `quads` holds 16 words past column `out.len()`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vnni")]
unsafe fn row_vnni512(
    rows: &[&[u8]],
    pad: u32,
    (columns, d, relu): ([i32; 3], Dequantise, bool),
    out: &mut [f32],
    quads: &mut [u32],
) {
    use std::arch::x86_64::*;
    let w = out.len();
    columns_of(rows, pad, quads, w);
    let taps = [0, 1, 2].map(|dx| _mm512_set1_epi32(columns[dx]));
    for x in (0..w).step_by(16) {
        let at = quads.as_ptr().add(x);
        let mut sums = _mm512_setzero_si512();
        for (dx, tap) in taps.iter().enumerate() {
            sums = _mm512_dpbusd_epi32(sums, _mm512_loadu_si512(at.add(dx).cast()), *tap);
        }
        let v = d.apply_avx512(sums);
        let v = if relu { _mm512_max_ps(v, _mm512_setzero_ps()) } else { v };
        let lanes = (w - x).min(16);
        _mm512_mask_storeu_ps(out.as_mut_ptr().add(x), (u32::MAX >> (32 - lanes)) as u16, v);
    }
}

/// [`DotDepthwise::to_integers`] in a plain loop.
fn to_integers_loop(floats: &[f32], grid: Grid, out: &mut [u8]) {
    let (rounding, shift) = (grid.rounding(), zero_shift(grid) as f32);
    for (u, &v) in out.iter_mut().zip(floats) {
        *u = (rounding.steps(v) + shift) as u8;
    }
}

/// [`DotDepthwise::to_integers`] with AVX-512, 16 values at a time.
///
/// # Safety
/// The CPU has AVX-512; `out` holds `floats.len()` values.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn to_integers_avx512(floats: &[f32], grid: Grid, out: &mut [u8]) {
    use std::arch::x86_64::*;
    let whole = floats.len() / 16 * 16;
    for i in (0..whole).step_by(16) {
        let u = super::gemm_int8::integers_avx512(_mm512_loadu_ps(floats.as_ptr().add(i)), grid);
        _mm_storeu_si128(out.as_mut_ptr().add(i).cast(), _mm512_cvtepi32_epi8(u));
    }
    to_integers_loop(&floats[whole..], grid, &mut out[whole..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A u8 grid with zero point 7 (pad 7) and steps of 1/16.
    const GRID: Grid = Grid { scale: 0.0625, zero_point: 7.0, lo: 0.0, hi: 255.0 };

    /// Kernels of integers times a scale per channel (one reaching only
    /// ±90, one all zeros), and biases.
    fn case(channels: usize) -> (Vec<[f32; 9]>, Vec<f32>, Vec<[i8; 9]>, Vec<f32>) {
        let mut ints = vec![];
        let mut kernels = vec![];
        for c in 0..channels {
            let scale = 0.003 + c as f32 * 2e-4;
            let k: [i8; 9] = std::array::from_fn(|t| match c % 3 {
                0 if t == 4 => -127,
                0 => (((c * 9 + t) * 37 % 255) as i16 - 127) as i8,
                1 if t == 0 => 90,
                1 => (((c * 9 + t) * 23 % 181) as i16 - 90) as i8,
                _ => 0,
            });
            kernels.push(k.map(|v| v as f32 * scale));
            ints.push(k);
        }
        let scales = (0..channels).map(|c| 0.003 + c as f32 * 2e-4).collect();
        let bias = (0..channels).map(|c| c as f32 * 0.125 - 0.5).collect();
        (kernels, bias, ints, scales)
    }

    #[test]
    fn every_output_is_the_exact_sum_rounded_once_and_the_vnni_row_is_the_plain_one() {
        let (kernels, bias, ints, scales) = case(6);
        let op = DotDepthwise::new(&kernels, &bias, GRID).expect("integer kernels found again");
        for (h, w) in [(1, 1), (3, 9), (5, 16), (4, 17), (2, 45)] {
            // Rows of integers, the pad row above and below.
            let plane: Vec<Vec<u8>> = (0..h).map(|y| (0..w).map(|x| ((y * 71 + x * 29) % 256) as u8).collect()).collect();
            let pads = vec![op.pad(); w];
            let rows: Vec<&[u8]> = std::iter::once(&pads[..]).chain(plane.iter().map(|r| &r[..])).chain([&pads[..]]).collect();
            for (c, relu) in [(0, false), (1, true), (2, false), (3, false), (4, true)] {
                let mut out = vec![vec![f32::NAN; w]; h];
                let mut refs: Vec<&mut [f32]> = out.iter_mut().map(|r| &mut r[..]).collect();
                op.rows(c, &rows, relu, &mut refs, &mut vec![]);
                let mut plain = vec![vec![f32::NAN; w]; h];
                let mut quads = vec![0; w + 18];
                for (r, row) in plain.iter_mut().enumerate() {
                    row_plain(&rows[r..r + 3], u32::from_le_bytes([7, 7, 7, 0]), (op.columns[c], op.outputs[c], relu), row, &mut quads);
                }
                for (y, (got, plain)) in out.iter().zip(&plain).enumerate() {
                    for x in 0..w {
                        // The dequantised input (the pad is the value 0) and
                        // the exact sum of its products, in f64.
                        let value = |yy: isize, xx: isize| {
                            let inside = (0..h as isize).contains(&yy) && (0..w as isize).contains(&xx);
                            let u = if inside { plane[yy as usize][xx as usize] } else { 7 };
                            (f64::from(u) - 7.0) * f64::from(GRID.scale)
                        };
                        let exact: f64 = (0..9)
                            .map(|t| f64::from(ints[c][t]) * f64::from(scales[c]) * value(y as isize + t as isize / 3 - 1, x as isize + t as isize % 3 - 1))
                            .sum::<f64>()
                            + f64::from(bias[c]);
                        let exact = if relu { exact.max(0.0) } else { exact };
                        let at = format!("channel {c} at {y},{x} of {h}×{w}");
                        assert_eq!(got[x].to_bits(), plain[x].to_bits(), "{at}: {} against the plain row's {}", got[x], plain[x]);
                        assert!((f64::from(got[x]) - exact).abs() <= 1e-6 * (1.0 + exact.abs()), "{at}: {} against {exact}", got[x]);
                    }
                }
            }
        }
    }

    #[test]
    fn the_integers_round_half_to_even_clamp_and_take_nan_as_zero() {
        let (kernels, bias, _, _) = case(1);
        let op = DotDepthwise::new(&kernels, &bias, GRID).unwrap();
        // 37 values: ties both ways, the ends of the grid, beyond, NaN.
        let mut floats: Vec<f32> = (-10..20).map(|k| (k as f32 + 0.5) * 0.0625).collect();
        floats.extend([-1.0, 0.0, 248.0 * 0.0625, 249.0 * 0.0625, 1e9, -1e9, f32::NAN]);
        let mut got = vec![0u8; floats.len()];
        op.to_integers(&floats, &mut got);
        let want: Vec<u8> = floats
            .iter()
            .map(|&v| if v.is_nan() { 7 } else { ((v / 0.0625).round_ties_even() + 7.0).clamp(0.0, 255.0) as u8 })
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn kernels_that_are_not_integers_are_refused() {
        let kernels = vec![std::array::from_fn(|t| (t as f32 * 0.37).sin()); 2];
        assert!(DotDepthwise::new(&kernels, &[0.0, 0.0], GRID).is_none());
    }
}
