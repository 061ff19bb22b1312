//! The depthwise half of an INT8 fused block (crates/tract-ops'
//! `pw_dw::PointwiseDepthwise`) at stride 1, as integers. Its input, the
//! pointwise half's output that the quantise-dequantise pair between the halves
//! puts on an 8-bit grid, goes back to that grid's integers (shifted to
//! 0..=255) a row at a time; its weights, symmetric INT8 per channel, are found
//! again in their f32 fold ([`crate::int8::recover`]). For each pair of output
//! rows the bytes of their four input rows at each column make one 32-bit word,
//! and with AVX-512 VNNI three `vpdpbusd` give 16 outputs of a row, one per
//! kernel column: the words left of, at and right of the outputs, by the
//! column's taps (in bytes 0 to 2 for the first row, 1 to 3 for the second).
//! The rounding to the grid after the block is done on them in registers. In
//! f32 the same 16 outputs take 9 multiplies and 9 adds, twice over on 8 lanes.
//!
//! An output is `scale × s × (Σ k·u − z·Σ k) + bias`
//! ([`crate::gemm_int8::Dequantise`]): the exact sum of the dequantised
//! products, rounded once. tract's f32 depthwise convolution rounds at every
//! tap, so where a sum lies within those roundings of a tie of the grid
//! after the block, the two land a step apart.

use crate::gemm_int8::{zero_shift, Dequantise, Dot};
use crate::quant::{Grid, MAGIC};

/// A stride-1 3×3 depthwise convolution's kernels as integers, over an input
/// on `grid`.
#[derive(Debug, Clone, PartialEq)]
pub struct DotDepthwise {
    /// Per channel, the kernel's left, centre and right columns, each as
    /// the bytes (top, middle, bottom, 0) of a word (the second row of a
    /// pair takes them shifted a byte up).
    columns: Vec<[i32; 3]>,
    outputs: Vec<Dequantise>,
    grid: Grid,
}

/// Whether this CPU runs [`DotDepthwise`]: with AVX-512 VNNI.
pub fn available() -> bool {
    crate::gemm_int8::dot() == Some(Dot::Vnni512)
}

impl DotDepthwise {
    /// `kernels` (row by row, one a channel) and their `bias` over an input
    /// on `grid`; `None` where the kernels are not symmetric INT8 weights
    /// folded to f32.
    pub fn new(kernels: &[[f32; 9]], bias: &[f32], grid: Grid) -> Option<DotDepthwise> {
        let flat: Vec<f32> = kernels.iter().flatten().copied().collect();
        let found = crate::int8::recover(&flat, kernels.len())?;
        let values = &found.values;
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
    /// is 0, as tract's QuantizeLinear does), shifted to 0..=255, into the
    /// start of `out`.
    pub fn to_integers(&self, floats: &[f32], out: &mut [u8]) {
        assert!(out.len() >= floats.len(), "depthwise_int8: the integers do not fit");
        #[cfg(target_arch = "x86_64")]
        if crate::cpu::has(crate::cpu::Feature::Avx512Bw) {
            // SAFETY: the CPU has AVX-512 F and BW (checked just above);
            // `out` holds `floats.len()` values (asserted above).
            return unsafe { to_integers_avx512(floats, self.grid, out) };
        }
        to_integers_loop(floats, self.grid, out);
    }

    /// Channel `c`'s output rows `out` from its input rows `rows` (the row
    /// above the first output row, those at each, and the row below the
    /// last), each holding the output rows' `w` values and [`MARGIN`]
    /// more of [`Self::pad`] (whole rows of it past the plane's edges);
    /// negative outputs become 0 with `relu`, and then each is rounded to
    /// `grid` and back where given (half to even, as the f32 block does).
    pub fn rows(&self, c: usize, rows: &[&[u8]], (relu, grid): (bool, Option<Grid>), out: &mut [&mut [f32]]) {
        let Some(w) = out.first().map(|o| o.len()) else { return };
        assert!(
            rows.len() == out.len() + 2
                && rows.iter().all(|r| r.len() >= w + MARGIN)
                && out.iter().all(|o| o.len() == w),
            "depthwise_int8: one input row more on each side than output rows, each with its margin"
        );
        let (ch, pad) = (self.channel(c, relu, grid), self.pad());
        #[cfg(target_arch = "x86_64")]
        if available() {
            // SAFETY: the CPU has AVX-512 VNNI (checked just above); the
            // rows hold their margins (asserted above).
            unsafe { rows_vnni512(rows, pad, ch, out) };
            return;
        }
        for (r, out) in out.iter_mut().enumerate() {
            row_plain(&rows[r..r + 3], pad, ch, out);
        }
    }

    /// What channel `c`'s outputs take, with the ReLU and the grid given.
    fn channel(&self, c: usize, relu: bool, grid: Option<Grid>) -> Channel {
        let (out, columns) = (self.outputs[c], self.columns[c]);
        let floor = |low: f32| if relu { low.max(0.0) } else { low };
        match grid {
            // The grid's steps (its scale is positive: a ReLU before the
            // rounding is a floor of 0 steps).
            Some(g) => {
                let (low, high) = (floor(g.lo - g.zero_point), g.hi - g.zero_point);
                Channel { columns, out: out.times(g.scale.recip()), low, high, scale: Some(g.scale) }
            }
            None => Channel { columns, out, low: floor(f32::NEG_INFINITY), high: f32::INFINITY, scale: None },
        }
    }
}

/// Bytes of the pad after each input row's values: what the last vector of
/// 16 outputs reads past the row for the words right of it.
pub const MARGIN: usize = 32;

/// What one channel's outputs take: its kernel's columns, how a sum
/// becomes an output (or, with a grid, its value in the grid's steps), the
/// clamps (the grid's ends, the ReLU's 0) and the grid's scale.
#[derive(Clone, Copy)]
struct Channel {
    columns: [i32; 3],
    out: Dequantise,
    low: f32,
    high: f32,
    scale: Option<f32>,
}

impl Channel {
    /// The output of `sum`: clamped, then rounded half to even to a step
    /// and times the grid's scale where there is a grid. A sum is never
    /// NaN, so the comparisons are `max` and `min` as the CPU's.
    #[inline(always)]
    fn finish(self, sum: i32) -> f32 {
        let t = self.out.apply(sum);
        let t = if t > self.low { t } else { self.low };
        let t = if t < self.high { t } else { self.high };
        match self.scale {
            Some(s) => ((t + MAGIC) - MAGIC) * s,
            None => t,
        }
    }
}

/// One output row from its three input rows in plain loops: the reference
/// the VNNI rows are held to.
fn row_plain(rows: &[&[u8]], pad: u8, ch: Channel, out: &mut [f32]) {
    let w = out.len();
    for (x, y) in out.iter_mut().enumerate() {
        let mut sum = 0;
        for (dx, column) in ch.columns.iter().enumerate() {
            let k = column.to_le_bytes();
            for (dy, row) in rows.iter().enumerate() {
                // Column x + dx - 1, the pad outside the plane.
                let u = if (1..=w).contains(&(x + dx)) { row[x + dx - 1] } else { pad };
                sum += i32::from(u) * i32::from(k[dy] as i8);
            }
        }
        *y = ch.finish(sum);
    }
}

/// [`row_plain`] for each output row with AVX-512 VNNI, two rows at a
/// time, 16 outputs at a time. The bytes of the four input rows of two
/// output rows at each column make one word, which serves both: the first
/// row's taps weigh its bytes 0 to 2, the second's (the same taps shifted
/// a byte up) bytes 1 to 3. The words left and right of 16 outputs are
/// shifted in from the vectors before and after (the pad's before the
/// first); the last outputs are written through a mask.
///
/// # Safety
/// The CPU has AVX-512 VNNI; `rows` holds two rows more than `out`, each
/// with [`MARGIN`] bytes past the output rows' length.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vnni")]
unsafe fn rows_vnni512(rows: &[&[u8]], pad: u8, ch: Channel, out: &mut [&mut [f32]]) {
    let Some(w) = out.first().map(|o| o.len()) else { return };
    for r in (0..out.len()).step_by(2) {
        // A lone last row takes its third input row again as the fourth,
        // which its taps weigh 0, and writes no second row.
        let pair = r + 1 < out.len();
        let inputs = [0, 1, 2, if pair { 3 } else { 2 }].map(|i| rows[r + i].as_ptr());
        let second = if pair { out[r + 1].as_mut_ptr() } else { std::ptr::null_mut() };
        let outputs = [out[r].as_mut_ptr(), second];
        if pair {
            row_pair_vnni512::<true>(inputs, pad, ch, outputs, w);
        } else {
            row_pair_vnni512::<false>(inputs, pad, ch, outputs, w);
        }
    }
}

/// One output row, or two with `PAIR`, of [`rows_vnni512`]: from the four
/// input rows `inputs`, `w` outputs into each of `outputs`.
///
/// # Safety
/// As [`rows_vnni512`]'s; each input row holds `w` + [`MARGIN`] bytes and
/// each output row (the first only, without `PAIR`) `w` values.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vnni")]
#[inline]
unsafe fn row_pair_vnni512<const PAIR: bool>(
    inputs: [*const u8; 4],
    pad: u8,
    ch: Channel,
    outputs: [*mut f32; 2],
    w: usize,
) {
    use std::arch::x86_64::*;
    let bytes = |p: *const u8, x: usize| _mm512_cvtepu8_epi32(_mm_loadu_si128(p.add(x).cast()));
    let words = |x: usize| {
        let (a, b) = (bytes(inputs[0], x), _mm512_slli_epi32::<8>(bytes(inputs[1], x)));
        let (c, d) = (_mm512_slli_epi32::<16>(bytes(inputs[2], x)), _mm512_slli_epi32::<24>(bytes(inputs[3], x)));
        _mm512_or_si512(_mm512_or_si512(a, b), _mm512_or_si512(c, d))
    };
    let taps = [0, 1, 2].map(|dx| _mm512_set1_epi32(ch.columns[dx]));
    let shifted = [0, 1, 2].map(|dx| _mm512_set1_epi32(ch.columns[dx] << 8));
    let (low, high) = (_mm512_set1_ps(ch.low), _mm512_set1_ps(ch.high));
    let (magic, scale) = (_mm512_set1_ps(MAGIC), _mm512_set1_ps(ch.scale.unwrap_or(1.0)));
    let finish = |sums: __m512i| {
        let t = _mm512_min_ps(_mm512_max_ps(ch.out.apply_avx512(sums), low), high);
        match ch.scale {
            Some(_) => _mm512_mul_ps(_mm512_sub_ps(_mm512_add_ps(t, magic), magic), scale),
            None => t,
        }
    };
    let (mut before, mut here) = (_mm512_set1_epi32(i32::from_le_bytes([pad; 4])), words(0));
    for x in (0..w).step_by(16) {
        let after = words(x + 16);
        let columns = [_mm512_alignr_epi32::<15>(here, before), here, _mm512_alignr_epi32::<1>(after, here)];
        let mask = (u32::MAX >> (32 - (w - x).min(16))) as u16;
        let mut sums = _mm512_setzero_si512();
        for (column, tap) in columns.iter().zip(&taps) {
            sums = _mm512_dpbusd_epi32(sums, *column, *tap);
        }
        _mm512_mask_storeu_ps(outputs[0].add(x), mask, finish(sums));
        if PAIR {
            let mut sums = _mm512_setzero_si512();
            for (column, tap) in columns.iter().zip(&shifted) {
                sums = _mm512_dpbusd_epi32(sums, *column, *tap);
            }
            _mm512_mask_storeu_ps(outputs[1].add(x), mask, finish(sums));
        }
        (before, here) = (here, after);
    }
}

/// [`DotDepthwise::to_integers`] in a plain loop.
fn to_integers_loop(floats: &[f32], grid: Grid, out: &mut [u8]) {
    let (rounding, shift) = (grid.rounding(), zero_shift(grid) as f32);
    for (u, &v) in out.iter_mut().zip(floats) {
        *u = (rounding.steps(v) + shift) as u8;
    }
}

/// [`DotDepthwise::to_integers`] with AVX-512 (F and BW): 64 values at a
/// time, packed to bytes in two steps that interleave the vectors' 128-bit
/// lanes, then put back in order; then 16 at a time, the last through a
/// mask (a row's width is rarely a multiple of 16: YuNet's 40 and 20).
///
/// # Safety
/// The CPU has AVX-512 F and BW; `out` holds `floats.len()` values.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn to_integers_avx512(floats: &[f32], grid: Grid, out: &mut [u8]) {
    use std::arch::x86_64::*;
    // Dword k of the packed bytes holds values 4k..4k + 3 of vector
    // k % 4's lane k / 4; dword j of the output is vector j / 4, lane j % 4.
    let order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    let whole = floats.len() / 64 * 64;
    for i in (0..whole).step_by(64) {
        let u: [__m512i; 4] = std::array::from_fn(|j| {
            crate::gemm_int8::integers_avx512(_mm512_loadu_ps(floats.as_ptr().add(i + 16 * j)), grid)
        });
        let bytes = _mm512_packus_epi16(_mm512_packus_epi32(u[0], u[1]), _mm512_packus_epi32(u[2], u[3]));
        _mm512_storeu_si512(out.as_mut_ptr().add(i).cast(), _mm512_permutexvar_epi32(order, bytes));
    }
    for i in (whole..floats.len()).step_by(16) {
        let mask = (u32::MAX >> (32 - (floats.len() - i).min(16))) as u16;
        let v = _mm512_maskz_loadu_ps(mask, floats.as_ptr().add(i));
        let u = crate::gemm_int8::integers_avx512(v, grid);
        _mm512_mask_cvtepi32_storeu_epi8(out.as_mut_ptr().add(i).cast(), mask, u);
    }
}

#[cfg(test)]
#[path = "depthwise_int8_tests.rs"]
mod tests;
