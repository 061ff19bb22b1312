//! The kernel of fusiond's 1×1 convolutions (crates/tract-ops' `pointwise`
//! op, and the ops built on it): a 1×1 convolution of NCHW rows in tiles of
//! [`TILE_CO`] output channels × 24 pixels, with AVX2 and FMA where the CPU
//! has them, tiles of 8 pixels for what is left of a run, and a scalar loop
//! for the last few pixels (and everywhere, for the tests, where the CPU
//! lacks those units). A tile is 12 AVX2 registers, fed per input channel by
//! three pixel loads and four broadcast weights; with AVX-512, tiles of 48
//! pixels, three 16-lane vectors.

use crate::quant::Grid;
use std::ops::Range;
use std::sync::Arc;

/// Output channels per tile, one broadcast weight each (tuning:
/// crates/kernels/README.md).
pub const TILE_CO: usize = 4;
/// Pixels per tile: three AVX2 vectors.
#[cfg(target_arch = "x86_64")]
const TILE_PX: usize = 24;

/// The most input and output channels fusiond gives this kernel (both at
/// once; [`MAX_CO_ANY_CI`] is the exception). With few input channels tract
/// spends about as long packing the input into panels as multiplying it,
/// and this kernel, which reads the rows where they lie, is the faster; with
/// many channels on small maps tract's tuned product is the faster, so those
/// convolutions stay tract's (tuning: crates/kernels/README.md).
pub const MAX_CI: usize = 160;

/// With this many output channels or fewer, fusiond gives this kernel any
/// number of input channels: tract's packing of the whole input then
/// outweighs its product of so few rows (SCRFD's lateral 1×1s, 72, 152 and
/// 288 → 16 channels; tuning: crates/kernels/README.md).
pub const MAX_CO_ANY_CI: usize = 16;

/// Up to this many input channels a sum starts from the bias, past it the
/// bias is added last, as tract's own product does there: the sums are
/// then tract's own to the bit, which an INT8 graph's rounding after every
/// node needs (with the bias first at 64 channels, the INT8 YuNet's and
/// ArcFace's outputs were no longer tract's; figures in
/// crates/kernels/README.md).
const BIAS_FIRST_UP_TO: usize = 32;

/// A 1×1 convolution's weights for [`pointwise`]: in tiles of [`TILE_CO`]
/// output channels, tile `t`, input channel `k`, lane `j` at
/// `(t * ci + k) * TILE_CO + j` (lanes past `co` are zero), and the biases
/// in the same lanes.
#[derive(Debug, Clone, PartialEq)]
pub struct Packed {
    ci: usize,
    co: usize,
    weights: Arc<Vec<f32>>,
    bias: Arc<Vec<f32>>,
    /// Whether negative outputs become 0 (a ReLU taken in).
    relu: bool,
}

impl Eq for Packed {}

impl Packed {
    /// Packs `weights` (`co` rows of `ci`) and `bias` into tiles.
    pub fn new(weights: &[f32], bias: &[f32], co: usize, ci: usize) -> Packed {
        let tiles = co.div_ceil(TILE_CO);
        let mut packed = vec![0f32; tiles * ci * TILE_CO];
        let mut lanes = vec![0f32; tiles * TILE_CO];
        for (o, (row, b)) in weights.chunks_exact(ci).zip(bias).take(co).enumerate() {
            let (t, j) = (o / TILE_CO, o % TILE_CO);
            for (k, w) in row.iter().enumerate() {
                packed[(t * ci + k) * TILE_CO + j] = *w;
            }
            lanes[o] = *b;
        }
        Packed { ci, co, weights: Arc::new(packed), bias: Arc::new(lanes), relu: false }
    }

    /// The packed weights of output channels `channels`, which start at a
    /// tile's first.
    pub fn tiles(&self, channels: Range<usize>) -> Tiles<'_> {
        let (t0, t1) = (channels.start / TILE_CO, channels.end.div_ceil(TILE_CO));
        Tiles {
            weights: &self.weights[t0 * self.ci * TILE_CO..t1 * self.ci * TILE_CO],
            bias: &self.bias[t0 * TILE_CO..t1 * TILE_CO],
            ci: self.ci,
            co: channels.len(),
            relu: self.relu,
            round: None,
        }
    }

    /// The weights (`co` rows of `ci`) and biases, unpacked.
    pub fn unpacked(&self) -> (Vec<f32>, Vec<f32>) {
        let weights = (0..self.co * self.ci)
            .map(|i| {
                let (o, k) = (i / self.ci, i % self.ci);
                self.weights[(o / TILE_CO * self.ci + k) * TILE_CO + o % TILE_CO]
            })
            .collect();
        (weights, self.bias[..self.co].to_vec())
    }

    /// The same weights with the ReLU after them taken in.
    pub fn with_relu(&self) -> Packed {
        Packed { relu: true, ..self.clone() }
    }

    /// Whether the ReLU after the weights is taken in.
    pub fn relu(&self) -> bool {
        self.relu
    }

    /// Input and output channels.
    pub fn channels(&self) -> (usize, usize) {
        (self.ci, self.co)
    }
}

/// Whether this CPU has the units the kernel is written for.
pub fn kernel_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        crate::cpu::has(crate::cpu::Feature::Avx2)
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Packed weights of some output channels: tile `t`, input channel `k`,
/// lane `j` at `(t * ci + k) * TILE_CO + j` (lanes past `co` are zero), and
/// the biases in the same lanes; with `relu`, negative outputs become 0,
/// and with `round`, each output is then rounded to a grid and back (in
/// registers on AVX-512, by [`crate::quant::fake_quant_in_place`]
/// after AVX2 tiles).
#[derive(Clone, Copy, Debug)]
pub struct Tiles<'a> {
    pub weights: &'a [f32],
    pub bias: &'a [f32],
    pub ci: usize,
    pub co: usize,
    pub relu: bool,
    pub round: Option<Grid>,
}

/// A run of `n` pixels of some channels, their planes `stride` values apart
/// in `data` (which starts at the run's first pixel).
pub struct Run<'a> {
    pub data: &'a [f32],
    pub stride: usize,
    pub n: usize,
}

/// The output `y` (a run of as many pixels for each of `tiles.co`
/// channels) of the input run `x` (`tiles.ci` channels).
pub fn pointwise(x: Run, tiles: Tiles, y: &mut [&mut [f32]]) {
    let (n, ci, co) = (x.n, tiles.ci, tiles.co);
    if n == 0 || co == 0 {
        return;
    }
    let padded = co.div_ceil(TILE_CO) * TILE_CO;
    assert!(
        y.len() == co
            && y.iter().all(|row| row.len() >= n)
            && ci > 0
            && x.data.len() >= (ci - 1) * x.stride + n
            && tiles.weights.len() >= padded * ci
            && tiles.bias.len() >= padded,
        "pointwise: inputs do not fit the output run"
    );
    let rounding = tiles.round.map(Grid::rounding);
    #[cfg(target_arch = "x86_64")]
    let done = if kernel_available() {
        let wide = crate::cpu::has(crate::cpu::Feature::Avx512F);
        // SAFETY: the CPU has AVX2 and FMA, and AVX-512F when asked; the
        // slices' lengths are checked above.
        let done = unsafe { runs_simd(&x, tiles, y, wide) };
        // The AVX2 tiles leave the rounding to a pass of its own.
        if let (Some(grid), false) = (tiles.round, wide) {
            y.iter_mut().for_each(|row| crate::quant::fake_quant_in_place(&mut row[..done], grid));
        }
        done
    } else {
        0
    };
    #[cfg(not(target_arch = "x86_64"))]
    let done = 0;
    for (o, row) in y.iter_mut().enumerate() {
        let (t, j) = (o / TILE_CO, o % TILE_CO);
        let w = &tiles.weights[t * ci * TILE_CO..(t + 1) * ci * TILE_CO];
        for (p, out) in row[..n].iter_mut().enumerate().skip(done) {
            let column = x.data[p..].iter().step_by(x.stride).take(ci);
            let first = if ci <= BIAS_FIRST_UP_TO { tiles.bias[o] } else { 0.0 };
            let sum = column.zip(w.iter().skip(j).step_by(TILE_CO)).fold(first, |a, (x, w)| a + w * x);
            let sum = if ci > BIAS_FIRST_UP_TO { sum + tiles.bias[o] } else { sum };
            let v = if tiles.relu { sum.max(0.0) } else { sum };
            *out = rounding.map_or(v, |r| r.apply(v));
        }
    }
}

/// How a kernel covers a run: blocks of `px` pixels, `per_copy` of them
/// copied at once out of the `ci` strided input planes into one contiguous
/// buffer, which every tile then reads in order from the L1 cache (faster
/// than reading the strided planes in place; tuning:
/// crates/kernels/README.md); then what is left in vectors of `lanes`, read
/// in place.
#[cfg(target_arch = "x86_64")]
struct Cover {
    px: usize,
    lanes: usize,
    per_copy: usize,
}

/// The pixels of [`pointwise`] that fill whole vectors, as `cover` says;
/// returns how many of each run it wrote. `tile(x, block, whole, y, p0)`
/// writes the tiles of `x`: blocks `block` values apart, of `cover.px`
/// pixels when `whole`, else of `cover.lanes`, from pixel `p0` of `y`.
#[cfg(target_arch = "x86_64")]
fn runs<F>(x: &Run, ci: usize, y: &mut [&mut [f32]], cover: Cover, tile: F) -> usize
where
    F: Fn(&Run, usize, bool, &mut [&mut [f32]], usize),
{
    let (n, Cover { px, lanes, per_copy }) = (x.n, cover);
    let blocks = n / px;
    let mut scratch = vec![0f32; ci * px * per_copy];
    for first in (0..blocks).step_by(per_copy) {
        let count = per_copy.min(blocks - first);
        for (q, block) in scratch.chunks_exact_mut(ci * px).take(count).enumerate() {
            let p = (first + q) * px;
            for (k, line) in block.chunks_exact_mut(px).enumerate() {
                line.copy_from_slice(&x.data[k * x.stride + p..][..px]);
            }
        }
        let copied = Run { data: &scratch[..count * ci * px], stride: px, n: count * px };
        tile(&copied, px * ci, true, y, first * px);
    }
    let tail = (n - blocks * px) / lanes * lanes;
    tile(&Run { data: &x.data[blocks * px..], stride: x.stride, n: tail }, lanes, false, y, blocks * px);
    blocks * px + tail
}

/// The most bytes of input [`runs`] copies at once: every output tile reads
/// them all, so they must stay in the L1 cache beside the tile's weights;
/// sized for an L1 data cache of 32 KiB or more (tuning:
/// crates/kernels/README.md).
#[cfg(target_arch = "x86_64")]
const COPY_BYTES: usize = 24 << 10;

/// [`runs`] with AVX2 (`wide` false): blocks of [`TILE_PX`], up to 8 of
/// them copied at once (24 KiB for 32 input channels), then 8 pixels a
/// tile; or with AVX-512: blocks of 48 pixels (three 16-lane vectors), up to
/// 4 copied at once, then 16 pixels a tile; as many as fit [`COPY_BYTES`],
/// and at least one. Each sum is the same FMA chain, in the same
/// order from the same start, so the outputs are the same to the bit.
///
/// # Safety
/// The CPU has AVX2 and FMA, and AVX-512F when `wide`; the slices are as
/// [`pointwise`] checks.
#[cfg(target_arch = "x86_64")]
unsafe fn runs_simd(x: &Run, tiles: Tiles, y: &mut [&mut [f32]], wide: bool) -> usize {
    let last = tiles.ci > BIAS_FIRST_UP_TO;
    let (px, lanes, most) = if wide { (48, 16, 4) } else { (TILE_PX, 8, 8) };
    let per_copy = (COPY_BYTES / (tiles.ci * px * std::mem::size_of::<f32>())).clamp(1, most);
    let cover = Cover { px, lanes, per_copy };
    runs(x, tiles.ci, y, cover, |x, block, whole, y, p0| {
        // SAFETY: as this function's; `runs` hands over whole blocks.
        unsafe {
            match (wide, whole, last) {
                (false, true, true) => tiles_avx2::<3, true>(x, block, tiles, y, p0),
                (false, true, false) => tiles_avx2::<3, false>(x, block, tiles, y, p0),
                (false, false, true) => tiles_avx2::<1, true>(x, block, tiles, y, p0),
                (false, false, false) => tiles_avx2::<1, false>(x, block, tiles, y, p0),
                (true, true, true) => tiles_avx512::<3, true>(x, block, tiles, y, p0),
                (true, true, false) => tiles_avx512::<3, false>(x, block, tiles, y, p0),
                (true, false, true) => tiles_avx512::<1, true>(x, block, tiles, y, p0),
                (true, false, false) => tiles_avx512::<1, false>(x, block, tiles, y, p0),
            }
        }
    })
}

/// Every output tile of `V` vectors of pixels for the input pixels of `x`
/// (blocks of `8 × V` pixels, `block` values apart, each holding `ci`
/// lines `x.stride` apart), the first written at pixel `p0` of each row of
/// `y`. With `BIAS_LAST` each sum starts from zero and the bias is added
/// at the end ([`BIAS_FIRST_UP_TO`]); the two are separate functions, so
/// that neither carries the other's branch.
///
/// # Safety
/// The CPU has AVX2 and FMA; `tiles` holds every tile of `y`, `x` holds
/// `x.n / (8 × V)` whole blocks, and each row of `y` holds their pixels
/// from `p0`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn tiles_avx2<const V: usize, const BIAS_LAST: bool>(
    x: &Run,
    block: usize,
    tiles: Tiles,
    y: &mut [&mut [f32]],
    p0: usize,
) {
    use std::arch::x86_64::*;
    let (ci, co) = (tiles.ci, tiles.co);
    for (t, w) in tiles.weights.chunks_exact(ci * TILE_CO).take(co.div_ceil(TILE_CO)).enumerate() {
        for q in 0..x.n / (8 * V) {
            let bias = |j: usize| _mm256_set1_ps(*tiles.bias.get_unchecked(t * TILE_CO + j));
            // The bias is not held in registers through the sum: the 12
            // accumulators, 3 inputs and a weight fill 16 of AVX2's 16.
            let mut acc = [[_mm256_setzero_ps(); V]; TILE_CO];
            if !BIAS_LAST {
                for (j, lane) in acc.iter_mut().enumerate() {
                    *lane = [bias(j); V];
                }
            }
            let src = x.data.as_ptr().add(q * block);
            for k in 0..ci {
                let line = src.add(k * x.stride);
                let v: [__m256; V] = std::array::from_fn(|i| _mm256_loadu_ps(line.add(8 * i)));
                for (j, lane) in acc.iter_mut().enumerate() {
                    let wj = _mm256_set1_ps(*w.get_unchecked(k * TILE_CO + j));
                    for (a, v) in lane.iter_mut().zip(&v) {
                        *a = _mm256_fmadd_ps(wj, *v, *a);
                    }
                }
            }
            let p = p0 + q * 8 * V;
            for (j, lane) in acc.iter().enumerate().take(co - t * TILE_CO) {
                let dst = y.get_unchecked_mut(t * TILE_CO + j).as_mut_ptr().add(p);
                for (i, a) in lane.iter().enumerate() {
                    let a = if BIAS_LAST { _mm256_add_ps(*a, bias(j)) } else { *a };
                    let a = if tiles.relu { _mm256_max_ps(a, _mm256_setzero_ps()) } else { a };
                    _mm256_storeu_ps(dst.add(8 * i), a);
                }
            }
        }
    }
}

/// Every output tile of `V` vectors of pixels for the input pixels of `x`
/// (blocks of `16 × V` pixels, `block` values apart, each holding `ci`
/// lines `x.stride` apart), the first written at pixel `p0` of each row of
/// `y`; with `BIAS_LAST` each sum starts from zero and the bias comes last.
///
/// # Safety
/// The CPU has AVX-512F; `tiles` holds every tile of `y`, `x` holds
/// `x.n / (16 × V)` whole blocks, and each row of `y` holds their pixels
/// from `p0`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn tiles_avx512<const V: usize, const BIAS_LAST: bool>(
    x: &Run,
    block: usize,
    tiles: Tiles,
    y: &mut [&mut [f32]],
    p0: usize,
) {
    use std::arch::x86_64::*;
    let (ci, co) = (tiles.ci, tiles.co);
    let rounding = tiles.round.map(Grid::rounding);
    for (t, w) in tiles.weights.chunks_exact(ci * TILE_CO).take(co.div_ceil(TILE_CO)).enumerate() {
        let bias: [__m512; TILE_CO] =
            std::array::from_fn(|j| _mm512_set1_ps(*tiles.bias.get_unchecked(t * TILE_CO + j)));
        for q in 0..x.n / (16 * V) {
            let mut acc = [[_mm512_setzero_ps(); V]; TILE_CO];
            if !BIAS_LAST {
                for (lane, b) in acc.iter_mut().zip(&bias) {
                    *lane = [*b; V];
                }
            }
            let src = x.data.as_ptr().add(q * block);
            for k in 0..ci {
                let line = src.add(k * x.stride);
                let v: [__m512; V] = std::array::from_fn(|i| _mm512_loadu_ps(line.add(16 * i)));
                for (j, lane) in acc.iter_mut().enumerate() {
                    let wj = _mm512_set1_ps(*w.get_unchecked(k * TILE_CO + j));
                    for (a, v) in lane.iter_mut().zip(&v) {
                        *a = _mm512_fmadd_ps(wj, *v, *a);
                    }
                }
            }
            let p = p0 + q * 16 * V;
            for (j, (lane, b)) in acc.iter().zip(&bias).enumerate().take(co - t * TILE_CO) {
                let dst = y.get_unchecked_mut(t * TILE_CO + j).as_mut_ptr().add(p);
                for (i, a) in lane.iter().enumerate() {
                    let a = if BIAS_LAST { _mm512_add_ps(*a, *b) } else { *a };
                    let a = if tiles.relu { _mm512_max_ps(a, _mm512_setzero_ps()) } else { a };
                    let a = match rounding {
                        Some(r) => r.apply_avx512(a),
                        None => a,
                    };
                    _mm512_storeu_ps(dst.add(16 * i), a);
                }
            }
        }
    }
}
