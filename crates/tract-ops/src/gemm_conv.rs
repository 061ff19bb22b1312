//! Convolutions with many taps (input channels × kernel height × width),
//! run as [`gemm`] over patches packed straight from the input (zeros where
//! a tap falls in the padding, with no padded copy of the input): the
//! inswapper-size swapper's 3×3 convolutions over 1024 channels, where
//! tract's one product over all the taps spends most of the swap. Each
//! thread takes a share of the output rows and packs, for each block of
//! taps, the patches of its pixels in panels of [`NR`]; a panel's pixels
//! that lie in one output row are one strided run of an input row, copied
//! (or, at stride 2, gathered) as a whole.

use super::geometry::Geometry;
use super::share_rows;
use fusiond_kernels::gather::gather;
use fusiond_kernels::gemm::{gemm, GemmWeights, NR};
use fusiond_kernels::quant::{fake_quant_in_place, Grid};
use std::ops::Range;

/// The fewest taps a convolution runs this way with: from about there,
/// tract's product reads each 16-channel panel of weights (256 KiB and
/// more) from beyond the L2 cache for every 6 pixels, and the blocked
/// product is the faster; below it, tract's own product, packing and
/// padding are as fast or faster (tuning: crates/tract-ops/README.md).
pub const MIN_TAPS: usize = 4096;

/// One batch item: `x` is `ci` input planes, `y` `co` output planes of
/// `w` by the patches of `x`, then the ReLU and the quantise-dequantise
/// pair where they are taken in. Output rows are shared among tract's
/// threads.
pub fn run(g: &Geometry, w: &GemmWeights, (relu, grid): (bool, Option<Grid>), x: &[f32], y: &mut [f32]) {
    let ow = g.output.1;
    // Each kernel column's output columns inside the input, once a call.
    let columns: Vec<Range<usize>> = (0..g.kernel.1).map(|dx| g.columns(dx)).collect();
    share_rows(y, g.output, g.ci * g.kernel.0 * g.kernel.1, |range, mut share| {
        let pixels = range.start * ow..range.end * ow;
        let pack = |taps: Range<usize>, p0: usize, dst: &mut [f32]| {
            pack(g, (x, &columns), taps, pixels.start + p0..pixels.end, dst);
        };
        gemm(w, pixels.len(), pack, &mut share, relu);
        if let Some(grid) = grid {
            share.iter_mut().for_each(|row| fake_quant_in_place(row, grid));
        }
    });
}

/// Writes the panel of `taps` × [`NR`] pixels from `pixels.start` (whole
/// output map numbering; zero past `pixels.end`) of the input `x`, zeros
/// where a tap falls in the padding; `columns` is [`Geometry::columns`]
/// of each kernel column.
fn pack(
    g: &Geometry,
    (x, columns): (&[f32], &[Range<usize>]),
    taps: Range<usize>,
    pixels: Range<usize>,
    dst: &mut [f32],
) {
    let ((h, w), (kh, kw), sx, ow, bl) = (g.input, g.kernel, g.stride.1, g.output.1, g.before.1);
    // The panel's runs within one output row: (first value in the panel,
    // output row, first output column, length).
    let mut runs = [(0, 0, 0, 0); NR];
    let (mut count, mut i) = (0, 0);
    while i < NR && pixels.start + i < pixels.end {
        let (oy, ox) = ((pixels.start + i) / ow, (pixels.start + i) % ow);
        let len = (NR - i).min(ow - ox).min(pixels.end - pixels.start - i);
        runs[count] = (i, oy, ox, len);
        (count, i) = (count + 1, i + len);
    }
    // The tap's channel, kernel row and column, stepped rather than
    // divided out of each tap.
    let (mut c, mut dy, mut dx) = (taps.start / (kh * kw), taps.start / kw % kh, taps.start % kw);
    for line in dst.chunks_exact_mut(NR).take(taps.len()) {
        let inside = &columns[dx];
        for &(first, oy, ox, len) in &runs[..count] {
            let out = &mut line[first..first + len];
            // The run's output columns whose input lies inside, from `ox`.
            let (a, b) = (inside.start.clamp(ox, ox + len) - ox, inside.end.clamp(ox, ox + len) - ox);
            match g.input_row(oy, dy) {
                Some(iy) if a < b => {
                    out[..a].fill(0.0);
                    out[b..].fill(0.0);
                    let src = &x[(c * h + iy) * w + (ox + a) * sx + dx - bl..];
                    gather(&mut out[a..b], src, sx);
                }
                _ => out.fill(0.0),
            }
        }
        line[i..].fill(0.0);
        dx += 1;
        if dx == kw {
            (dx, dy) = (0, dy + 1);
            if dy == kh {
                (dy, c) = (0, c + 1);
            }
        }
    }
}
