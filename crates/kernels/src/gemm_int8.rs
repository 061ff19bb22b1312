//! The integer product of an INT8 convolution with many taps (the
//! inswapper-size swapper's): its weights stay INT8 and its input, which the
//! quantise-dequantise pair before it put on an 8-bit grid, goes back to
//! that grid's integers as it is packed, so each sum of products is exact
//! in 32 bits. With AVX-512 VNNI one instruction multiplies and adds four
//! taps of 16 pixels (64 products, four times an FMA's 16; with AVX-VNNI,
//! of 8 pixels); the f32 product of [`crate::gemm`] dequantises the
//! weights and runs in f32.
//!
//! An output is `scale[o] × s × (Σ w·u − z·Σ w) + bias[o]`, where `w` are
//! channel `o`'s weights (symmetric: zero point 0), `u` the input's
//! integers shifted to 0..=255 and `z` the input grid's zero point so
//! shifted; the padding is the input value 0, that is `u = z`. The result
//! is the exact sum of the dequantised products, rounded once, where the
//! f32 product rounds at every tap.

pub use crate::gemm_int8_tile::Dot;
use crate::gemm_int8_tile::{widest, Tile, MR, NR};
pub use crate::gemm_tile::NR as PACK_NR;
use crate::quant::Grid;
use std::ops::Range;

/// Taps per block (a multiple of 4; tuning: crates/kernels/README.md).
const KC: usize = 256;
/// Pixel panels packed at once, one tap block of them (64 KiB; tuning:
/// crates/kernels/README.md).
const CHUNK: usize = 8;

/// The dot product this CPU runs the integer product on, if any.
pub fn dot() -> Option<Dot> {
    widest().map(|(dot, _)| dot)
}

/// The fewest output channels it runs with: packing the input costs the
/// same for any number of them, and for a few (the swapper's last
/// convolution, 3 channels over 6272 taps) it is most of the work, which
/// f32 patches do cheaper (tuning: crates/kernels/README.md).
pub const MIN_CO: usize = 16;

// A tile's pixels are whole f32 panels of the caller's packer.
const _: () = assert!(NR.is_multiple_of(PACK_NR) && KC.is_multiple_of(4) && PACK_NR == 16);

/// A convolution's INT8 weights packed for [`gemm`]: tap block `b`, panel
/// `p` of [`MR`] channels, quad `q` (four taps) of the block, channel `r`
/// and tap `i` of the quad at `(((b × panels + p) × KC / 4 + q) × MR + r) ×
/// 4 + i`; zeros past `co` and `k`.
#[derive(Debug, Clone, PartialEq)]
pub struct DotWeights {
    co: usize,
    k: usize,
    values: Vec<i8>,
    /// Each channel's sum of weights (for the input's zero point).
    sums: Vec<i32>,
    scale: Vec<f32>,
    bias: Vec<f32>,
    /// The input's grid.
    grid: Grid,
}

impl DotWeights {
    /// `values` (`co` rows of `k` taps, symmetric per channel) with each
    /// channel's `scale` and `bias`, for an input on `grid`; `None` where a
    /// sum could overflow 32 bits ([`fits`]).
    pub fn pack(
        values: &[i8],
        (co, k): (usize, usize),
        (scale, bias): (&[f32], &[f32]),
        grid: Grid,
    ) -> Option<DotWeights> {
        if !fits(k) || values.len() != co * k || scale.len() < co || bias.len() < co {
            return None;
        }
        let panels = co.div_ceil(MR);
        let mut packed = vec![0i8; k.div_ceil(KC) * panels * KC * MR];
        for (o, row) in values.chunks_exact(k).enumerate() {
            let (p, r) = (o / MR, o % MR);
            for (t, &v) in row.iter().enumerate() {
                let (b, q, i) = (t / KC, t % KC / 4, t % 4);
                packed[(((b * panels + p) * KC / 4 + q) * MR + r) * 4 + i] = v;
            }
        }
        let sums = values.chunks_exact(k).map(|row| row.iter().map(|&v| v as i32).sum()).collect();
        Some(DotWeights { co, k, values: packed, sums, scale: scale[..co].to_vec(), bias: bias[..co].to_vec(), grid })
    }
}

/// Whether sums over `k` taps fit in 32 bits.
pub fn fits(k: usize) -> bool {
    k > 0 && k <= i32::MAX as usize / (128 * 255)
}

/// The outputs `out` (`co` rows of `n` pixels) of `w` by the patches that
/// `pack(taps, first_pixel, panel)` writes in f32 ([`PACK_NR`] pixels a
/// tap, zero past `n`), whose values lie on `w`'s input grid; with `relu`,
/// negative outputs become 0. Runs only on CPUs with a dot product ([`dot`]).
pub fn gemm<F>(w: &DotWeights, n: usize, pack: F, out: &mut [&mut [f32]], relu: bool)
where
    F: Fn(Range<usize>, usize, &mut [f32]),
{
    let (_, tile) = widest().expect("gemm_int8 runs on CPUs with a dot product only");
    tiled(w, n, pack, out, relu, tile);
}

fn tiled<F>(w: &DotWeights, n: usize, pack: F, out: &mut [&mut [f32]], relu: bool, tile: Tile)
where
    F: Fn(Range<usize>, usize, &mut [f32]),
{
    let grid = w.grid;
    assert!(out.len() == w.co && out.iter().all(|row| row.len() >= n), "gemm_int8: the output does not fit");
    let (pixel_panels, row_panels, blocks) = (n.div_ceil(NR), w.co.div_ceil(MR), w.k.div_ceil(KC));
    let chunk = CHUNK.min(pixel_panels).max(1);
    let mut floats = vec![0f32; KC * PACK_NR];
    let mut packed = vec![0u8; chunk * KC * NR];
    let mut partial = vec![0i32; row_panels * chunk * MR * NR];
    for j0 in (0..pixel_panels).step_by(chunk) {
        let js = j0..(j0 + chunk).min(pixel_panels);
        for block in 0..blocks {
            let taps = block * KC..((block + 1) * KC).min(w.k);
            let quads = taps.len().div_ceil(4);
            for (panel, j) in packed.chunks_exact_mut(KC * NR).zip(js.clone()) {
                for half in 0..NR / PACK_NR {
                    let floats = &mut floats[..taps.len() * PACK_NR];
                    pack(taps.clone(), j * NR + half * PACK_NR, floats);
                    to_integers(floats, grid, (half * PACK_NR, quads), panel);
                }
            }
            for (q, j) in js.clone().enumerate() {
                let b = &packed[q * KC * NR..][..quads * 4 * NR];
                for p in 0..row_panels {
                    let a = &w.values[(block * row_panels + p) * KC * MR..][..quads * 4 * MR];
                    let acc: &mut [i32; MR * NR] =
                        (&mut partial[(p * chunk + q) * MR * NR..][..MR * NR]).try_into().expect("a whole tile");
                    tile(quads, a, b, acc, block == 0);
                    if block + 1 == blocks {
                        finish(w, acc, (p * MR, j * NR, n), out, relu);
                    }
                }
            }
        }
    }
}

/// The input grid's zero point as an integer of 0..=255 (the grid's
/// integers shifted by its lowest).
pub(super) fn zero_shift(grid: Grid) -> i32 {
    (grid.zero_point - grid.lo) as i32
}

/// `floats` (taps × [`PACK_NR`] pixels) to the grid's integers shifted to
/// 0..=255, into pixels `first..first + PACK_NR` of `panel` (quad, pixel,
/// tap of the quad); the taps past the last of `quads` quads take the zero
/// point (their weights are zero).
fn to_integers(floats: &[f32], grid: Grid, at: (usize, usize), panel: &mut [u8]) {
    #[cfg(target_arch = "x86_64")]
    {
        if crate::cpu::has(crate::cpu::Feature::Avx512F) {
            // SAFETY: the CPU has AVX-512 (checked just above); the sizes
            // are asserted inside.
            return unsafe { to_integers_avx512(floats, grid, at, panel) };
        }
        if crate::cpu::has(crate::cpu::Feature::Avx2) {
            // SAFETY: the CPU has AVX2 (checked just above).
            return unsafe { to_integers_avx2(floats, grid, at, panel) };
        }
    }
    #[cfg(target_arch = "aarch64")]
    if crate::cpu::has(crate::cpu::Feature::Neon) && crate::aarch64::to_integers(floats, grid, at, panel) {
        return;
    }
    to_integers_loop(floats, grid, at, panel)
}

/// [`to_integers_loop`] compiled for AVX2 (the CPUs with AVX-VNNI only).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn to_integers_avx2(floats: &[f32], grid: Grid, at: (usize, usize), panel: &mut [u8]) {
    to_integers_loop(floats, grid, at, panel)
}

/// [`to_integers`] with AVX-512: 16 pixels of a tap a vector, rounded by
/// the conversion (half to even, as the CPU rounds by default), the four
/// taps of a quad shifted into the bytes of each lane.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn to_integers_avx512(floats: &[f32], grid: Grid, (first, quads): (usize, usize), panel: &mut [u8]) {
    use std::arch::x86_64::*;
    let taps = floats.len() / PACK_NR;
    assert!(panel.len() >= (quads * NR) * 4 && first + PACK_NR <= NR);
    for q in 0..quads {
        let mut word = _mm512_setzero_si512();
        for i in 0..4 {
            let t = q * 4 + i;
            let v = if t < taps { _mm512_loadu_ps(floats.as_ptr().add(t * PACK_NR)) } else { _mm512_setzero_ps() };
            let u = integers_avx512(v, grid);
            word = _mm512_or_si512(word, _mm512_sllv_epi32(u, _mm512_set1_epi32(8 * i as i32)));
        }
        _mm512_storeu_si512(panel.as_mut_ptr().add((q * NR + first) * 4).cast(), word);
    }
}

/// 16 values on `grid` to its integers shifted to 0..=255, rounded by the
/// conversion (half to even, as the CPU rounds by default); NaN lanes are
/// the zero point, as tract casts NaN to 0.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
pub(super) fn integers_avx512(v: std::arch::x86_64::__m512, grid: Grid) -> std::arch::x86_64::__m512i {
    use std::arch::x86_64::*;
    let inv = _mm512_set1_ps(grid.scale.recip());
    let (low, high) = (_mm512_set1_ps(grid.lo - grid.zero_point), _mm512_set1_ps(grid.hi - grid.zero_point));
    let numbers = _mm512_cmp_ps_mask::<_CMP_ORD_Q>(v, v);
    let v = _mm512_min_ps(_mm512_max_ps(_mm512_maskz_mul_ps(numbers, v, inv), low), high);
    _mm512_add_epi32(_mm512_cvtps_epi32(v), _mm512_set1_epi32(zero_shift(grid)))
}

/// [`to_integers`] in plain loops: the four taps of a quad of each pixel
/// go into one 32-bit word.
#[inline(always)]
fn to_integers_loop(floats: &[f32], grid: Grid, (first, quads): (usize, usize), panel: &mut [u8]) {
    let (rounding, shift) = (grid.rounding(), zero_shift(grid) as f32);
    let zeros = [0f32; PACK_NR];
    for q in 0..quads {
        let mut words = [0u32; PACK_NR];
        for i in 0..4 {
            let row = floats.get((q * 4 + i) * PACK_NR..(q * 4 + i + 1) * PACK_NR).unwrap_or(&zeros);
            for (word, &v) in words.iter_mut().zip(row) {
                // As tract's QuantizeLinear: half to even, clamped; NaN is 0.
                *word |= ((rounding.steps(v) + shift) as u32) << (8 * i);
            }
        }
        let out = &mut panel[(q * NR + first) * 4..][..PACK_NR * 4];
        for (dst, word) in out.chunks_exact_mut(4).zip(words) {
            dst.copy_from_slice(&word.to_le_bytes());
        }
    }
}

/// How an output channel's exact sum `Σ w·u` becomes its output:
/// `(sum − z·Σ w) × (scale × s) + bias` in f32, for weights `w` with
/// `scale` over an input on a grid of scale `s` and shifted zero point `z`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Dequantise {
    m: f32,
    add: i32,
    bias: f32,
}

impl Dequantise {
    /// For a channel whose weights sum to `sum` (as integers).
    pub fn new(scale: f32, sum: i32, bias: f32, grid: Grid) -> Dequantise {
        Dequantise { m: scale * grid.scale, add: zero_shift(grid) * sum, bias }
    }

    /// The same, times `f` (folded into the constants).
    pub fn times(self, f: f32) -> Dequantise {
        Dequantise { m: self.m * f, bias: self.bias * f, ..self }
    }

    #[inline(always)]
    pub fn apply(self, sum: i32) -> f32 {
        (sum - self.add) as f32 * self.m + self.bias
    }

    /// [`Self::apply`] on 16 sums.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub(crate) fn apply_avx512(self, sums: std::arch::x86_64::__m512i) -> std::arch::x86_64::__m512 {
        use std::arch::x86_64::*;
        let v = _mm512_cvtepi32_ps(_mm512_sub_epi32(sums, _mm512_set1_epi32(self.add)));
        _mm512_add_ps(_mm512_mul_ps(v, _mm512_set1_ps(self.m)), _mm512_set1_ps(self.bias))
    }
}

/// The last tap block's sums of tile `(c0, p0)` to the outputs.
fn finish(
    w: &DotWeights,
    acc: &[i32; MR * NR],
    (c0, p0, n): (usize, usize, usize),
    out: &mut [&mut [f32]],
    relu: bool,
) {
    let cols = (n - p0).min(NR);
    for (r, row) in out.iter_mut().enumerate().skip(c0).take(MR) {
        let d = Dequantise::new(w.scale[r], w.sums[r], w.bias[r], w.grid);
        let sums = &acc[(r - c0) * NR..][..cols];
        for (y, &sum) in row[p0..p0 + cols].iter_mut().zip(sums) {
            let v = d.apply(sum);
            *y = if relu { v.max(0.0) } else { v };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gemm_int8_tile::{kernels, plain_tile};

    /// A u8 grid with zero point 7: integers -7..=248 times 1/16 (exact in
    /// f32, so that the rounding cases below are exact).
    const GRID: Grid = Grid { scale: 0.0625, zero_point: 7.0, lo: 0.0, hi: 255.0 };

    /// Weights, biases and an input on `GRID` for `co` × `k` × `n`.
    fn case(co: usize, k: usize, n: usize) -> (Vec<i8>, Vec<f32>, Vec<f32>, Vec<f32>) {
        let w: Vec<i8> = (0..co * k).map(|i| ((i * 37 + 11) % 255) as i16 - 127).map(|v| v as i8).collect();
        let scale: Vec<f32> = (0..co).map(|o| 0.002 + o as f32 * 1e-4).collect();
        let bias: Vec<f32> = (0..co).map(|o| o as f32 * 0.25 - 1.0).collect();
        let x: Vec<f32> = (0..k * n).map(|i| (((i * 53) % 256) as f32 - 7.0) * 0.0625).collect();
        (w, scale, bias, x)
    }

    fn product(w: &DotWeights, x: &[f32], n: usize, relu: bool, tile: Tile) -> Vec<f32> {
        let pack = |taps: Range<usize>, p0: usize, dst: &mut [f32]| {
            for (t, line) in taps.zip(dst.chunks_exact_mut(PACK_NR)) {
                for (i, v) in line.iter_mut().enumerate() {
                    *v = if p0 + i < n { x[t * n + p0 + i] } else { 0.0 };
                }
            }
        };
        let mut y = vec![f32::NAN; w.co * n];
        let mut rows: Vec<&mut [f32]> = y.chunks_exact_mut(n).collect();
        tiled(w, n, pack, &mut rows, relu, tile);
        y
    }

    /// Channels off a tile and past several, taps off a quad, a block and
    /// past two blocks, pixels off a panel and past a chunk of panels.
    const SHAPES: [(usize, usize, usize); 4] = [(7, 9, 37), (1, 600, 5), (20, 515, 290), (8, 256, 32)];

    #[test]
    fn every_output_is_the_exact_sum_of_its_dequantised_products_then_its_bias() {
        for (co, k, n) in SHAPES {
            let (w, scale, bias, x) = case(co, k, n);
            let packed = DotWeights::pack(&w, (co, k), (&scale, &bias), GRID).unwrap();
            for relu in [false, true] {
                let y = product(&packed, &x, n, relu, plain_tile);
                for (i, got) in y.iter().enumerate() {
                    let (o, p) = (i / n, i % n);
                    let dot = (0..k).map(|t| w[o * k + t] as f64 * scale[o] as f64 * x[t * n + p] as f64);
                    let sum = dot.sum::<f64>() + bias[o] as f64;
                    let want = if relu { sum.max(0.0) } else { sum };
                    let tolerance = 1e-6 * (1.0 + sum.abs());
                    assert!(
                        (*got as f64 - want).abs() < tolerance,
                        "co {co} k {k} n {n}: output {i} {got}, not {want}"
                    );
                }
            }
        }
    }

    #[test]
    fn each_dot_tile_gives_the_plain_tiles_outputs_to_the_bit_or_none_is_used() {
        if widest().is_none() {
            // Without a dot product the convolution keeps the f32 product: `gemm`
            // refuses to run rather than fall back to plain loops.
            let (w, scale, bias, _) = case(8, 16, 32);
            let packed = DotWeights::pack(&w, (8, 16), (&scale, &bias), GRID).unwrap();
            let refused = std::panic::catch_unwind(|| {
                let mut y = vec![0f32; 8 * 32];
                let mut rows: Vec<&mut [f32]> = y.chunks_exact_mut(32).collect();
                gemm(&packed, 32, |_, _, _| {}, &mut rows, false);
            });
            assert!(refused.is_err(), "gemm_int8 ran on a CPU without a dot product");
            return;
        }
        for (co, k, n) in SHAPES {
            let (w, scale, bias, x) = case(co, k, n);
            let packed = DotWeights::pack(&w, (co, k), (&scale, &bias), GRID).unwrap();
            let plain = product(&packed, &x, n, true, plain_tile);
            for (dot, tile) in kernels() {
                let got = product(&packed, &x, n, true, tile);
                let same = plain.iter().zip(&got).all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "{dot:?}: co {co} k {k} n {n}");
            }
        }
    }

    #[test]
    fn padding_and_values_off_the_grid_take_the_grids_integers() {
        // 0.0 (the padding) is the zero point; values between grid points
        // round half to even; beyond the grid they clamp; NaN is 0.0.
        let values = [0.0, 0.03125, 0.09375, -1.0, 100.0, f32::NAN, 0.0625, -0.4375];
        let floats: Vec<f32> = (0..4 * PACK_NR).map(|i| values[i % 8]).collect();
        let want = [7u8, 7, 9, 0, 255, 7, 8, 0];
        type Convert = fn(&[f32], Grid, (usize, usize), &mut [u8]);
        let convert: [Convert; 2] = [to_integers, to_integers_loop];
        for (way, convert) in convert.iter().enumerate() {
            let mut panel = vec![0u8; 4 * NR];
            convert(&floats[..3 * PACK_NR], GRID, (PACK_NR, 1), &mut panel);
            for p in 0..PACK_NR {
                let at = (PACK_NR + p) * 4;
                for i in 0..3 {
                    assert_eq!(panel[at + i], want[p % 8], "way {way}: pixel {p} tap {i}");
                }
                assert_eq!(panel[at + 3], 7, "way {way}: the tap past the last takes the zero point");
                assert_eq!(panel[p * 4..p * 4 + 4], [0; 4], "way {way}: the other half is left alone");
            }
        }
    }
}
