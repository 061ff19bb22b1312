//! [`super::pointwise_kernel`]'s tiles with AVX-512: [`TILE_CO`] output
//! channels × 48 pixels (three 16-lane vectors each), fed per input channel
//! by three pixel loads and four broadcast weights, then 16 pixels a tile
//! for what is left. Each sum is the AVX2 tiles' FMA chain, in the same
//! order from the same start, so the outputs are the same to the bit.

use super::pointwise_kernel::{Run, Tiles, BIAS_FIRST_UP_TO, TILE_CO};

/// Pixels per tile: three AVX-512 vectors.
const TILE_PX: usize = 48;

/// Blocks of [`TILE_PX`] pixels copied together into one contiguous buffer
/// (`ci` × 48 × 4 values, 24 KiB for 32 input channels), as the AVX2 path
/// copies its blocks.
const BLOCKS_PER_COPY: usize = 4;

/// The pixels of a run that fill whole 16-lane vectors; returns how many of
/// each run it wrote (the rest is the scalar loop's).
///
/// # Safety
/// The CPU has AVX-512F, and the slices are as `pointwise` checks.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn runs_avx512(x: &Run, tiles: Tiles, y: &mut [&mut [f32]]) -> usize {
    let (n, ci) = (x.n, tiles.ci);
    let blocks = n / TILE_PX;
    let mut scratch = vec![0f32; ci * TILE_PX * BLOCKS_PER_COPY];
    for first in (0..blocks).step_by(BLOCKS_PER_COPY) {
        let count = BLOCKS_PER_COPY.min(blocks - first);
        for (q, block) in scratch.chunks_exact_mut(ci * TILE_PX).take(count).enumerate() {
            let p = (first + q) * TILE_PX;
            for (k, line) in block.chunks_exact_mut(TILE_PX).enumerate() {
                line.copy_from_slice(&x.data[k * x.stride + p..][..TILE_PX]);
            }
        }
        let copied = Run { data: &scratch[..count * ci * TILE_PX], stride: TILE_PX, n: count * TILE_PX };
        if ci > BIAS_FIRST_UP_TO {
            tiles_avx512::<3, true>(&copied, TILE_PX * ci, tiles, y, first * TILE_PX);
        } else {
            tiles_avx512::<3, false>(&copied, TILE_PX * ci, tiles, y, first * TILE_PX);
        }
    }
    let tail = (n - blocks * TILE_PX) / 16 * 16;
    let rest = Run { data: &x.data[blocks * TILE_PX..], stride: x.stride, n: tail };
    if ci > BIAS_FIRST_UP_TO {
        tiles_avx512::<1, true>(&rest, 16, tiles, y, blocks * TILE_PX);
    } else {
        tiles_avx512::<1, false>(&rest, 16, tiles, y, blocks * TILE_PX);
    }
    blocks * TILE_PX + tail
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
                    _mm512_storeu_ps(dst.add(16 * i), a);
                }
            }
        }
    }
}
