//! Convolutions with many taps (input channels × kernel height × width),
//! run as [`gemm`] over patches packed straight from a padded copy of the
//! input: the inswapper-size swapper's 3×3 over 1024 channels took 98 % of
//! its time on tract. Each thread takes a share of the output rows and
//! packs, for each block of taps, the patches of its pixels in panels of
//! [`NR`]; a panel's pixels that lie in one output row are one strided run
//! of the padded input, copied (or, at stride 2, gathered) as a whole.

use super::fake_quant::{fake_quant_in_place, Grid};
use super::gather::gather;
use super::gemm_kernel::{gemm, GemmWeights, NR};
use super::geometry::Geometry;
use super::share_rows;
use std::borrow::Cow;
use std::ops::Range;

/// The fewest taps a convolution runs this way with: from about there,
/// tract's product reads each 16-channel panel of weights (256 KiB and
/// more) from beyond the L2 cache for every 6 pixels. On the inswapper-size
/// swapper (`fusiond profile inswapper_bench`, one thread, in turns with
/// tract's own), its convolutions of 4608 taps took 0.91–0.96× tract's
/// time and those of 9216 taps 0.70–0.87×, but those of 2304 taps
/// 1.02–1.05×. With every convolution past 64 taps this way, SCRFD's and
/// ArcFace's (72 to 576 taps) took 1.07× and 1.09× the time of tract's
/// products, packing and padding.
pub const MIN_TAPS: usize = 4096;

/// One batch item: `x` is `ci` input planes, `y` `co` output planes of
/// `w` by the patches of `x`, then the ReLU and the quantise-dequantise
/// pair where they are taken in. Output rows are shared among tract's
/// threads.
pub fn run(g: &Geometry, w: &GemmWeights, (relu, grid): (bool, Option<Grid>), x: &[f32], y: &mut [f32]) {
    let (xp, padded_size) = padded(x, g);
    let ow = g.output.1;
    share_rows(y, g.output, |range, mut share| {
        let pixels = range.start * ow..range.end * ow;
        let pack = |taps: Range<usize>, p0: usize, dst: &mut [f32]| {
            pack(g, (&xp, padded_size), taps, pixels.start + p0..pixels.end, dst);
        };
        gemm(w, pixels.len(), pack, &mut share, relu);
        if let Some(grid) = grid {
            share.iter_mut().for_each(|row| fake_quant_in_place(row, grid));
        }
    });
}

/// The input with its padding written as zeros around each plane, and the
/// padded planes' size: only as much of the input as the taps reach. The
/// input itself where nothing is padded.
fn padded<'a>(x: &'a [f32], g: &Geometry) -> (Cow<'a, [f32]>, (usize, usize)) {
    let ((h, w), (oh, ow), (kh, kw), (sy, sx), (bt, bl)) = (g.input, g.output, g.kernel, g.stride, g.before);
    let (ph, pw) = ((oh - 1) * sy + kh, (ow - 1) * sx + kw);
    if (bt, bl, ph, pw) == (0, 0, h, w) {
        return (Cow::Borrowed(x), (h, w));
    }
    let mut xp = vec![0f32; g.ci * ph * pw];
    let (rows, cols) = (h.min(ph.saturating_sub(bt)), w.min(pw.saturating_sub(bl)));
    for (src, dst) in x.chunks_exact(h * w).zip(xp.chunks_exact_mut(ph * pw)) {
        for (line, out) in src.chunks_exact(w).zip(dst[bt * pw..].chunks_exact_mut(pw)).take(rows) {
            out[bl..bl + cols].copy_from_slice(&line[..cols]);
        }
    }
    (Cow::Owned(xp), (ph, pw))
}

/// Writes the panel of `taps` × [`NR`] pixels from `pixels.start` (whole
/// output map numbering; zero past `pixels.end`) of the padded input
/// `xp`, planes of `(ph, pw)`.
fn pack(
    g: &Geometry,
    (xp, (ph, pw)): (&[f32], (usize, usize)),
    taps: Range<usize>,
    pixels: Range<usize>,
    dst: &mut [f32],
) {
    let ((kh, kw), (sy, sx), ow) = (g.kernel, g.stride, g.output.1);
    // The panel's runs within one output row: (first value in the panel,
    // offset of its first tap in a padded plane, length).
    let mut runs = [(0, 0, 0); NR];
    let (mut count, mut i) = (0, 0);
    while i < NR && pixels.start + i < pixels.end {
        let (oy, ox) = ((pixels.start + i) / ow, (pixels.start + i) % ow);
        let len = (NR - i).min(ow - ox).min(pixels.end - pixels.start - i);
        runs[count] = (i, oy * sy * pw + ox * sx, len);
        (count, i) = (count + 1, i + len);
    }
    // The tap's channel, kernel row and column, stepped rather than
    // divided out of each tap.
    let (mut c, mut dy, mut dx) = (taps.start / (kh * kw), taps.start / kw % kh, taps.start % kw);
    for line in dst.chunks_exact_mut(NR).take(taps.len()) {
        let plane = &xp[c * ph * pw + dy * pw + dx..];
        for &(first, offset, len) in &runs[..count] {
            gather(&mut line[first..first + len], &plane[offset..], sx);
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
