//! The kernel of fusiond's big convolutions (crates/tract-ops'
//! `gemm_conv`): the product of the weights (`co` output channels × `k`
//! taps, packed once, at their first use) by the input's patches (`k` taps
//! × pixels, packed as it runs), blocked for the caches the way BLIS blocks
//! a product. tract runs such a convolution (the inswapper-size swapper's
//! 3×3 over 1024 channels, 9216 taps) as one product over all the taps:
//! each 16-row panel of its weights (590 KB) is read from memory again for
//! every 6 pixels.
//!
//! Here the taps go in blocks of [`KC`]: a panel of [`NR`] pixels of one
//! tap block (16 KiB) stays in the L1 cache while the weights of [`MC`]
//! output channels (96 KiB, in the L2 cache) run past it, [`MR`] at a time
//! (the block sizes' tuning: crates/kernels/README.md). A tile of 6 × 16
//! outputs is 12 AVX2 registers, fed per tap by two pixel loads and six
//! broadcast weights; with AVX-512, two tiles side by side (6 × 32) are 12
//! registers of 16 lanes. Each sum runs over the taps in order from zero,
//! by FMA, and the bias is added last, as in tract's own product.

use crate::gemm_int8::{self, DotWeights};
pub use crate::gemm_tile::NR;
use crate::gemm_tile::{run_kernel, run_pair, wide_kernel_available, Operands, Step, MR};
use std::ops::Range;
use std::sync::{Arc, Mutex, OnceLock};

/// Taps per block (tuning: crates/kernels/README.md).
const KC: usize = 256;
/// Output channels per block of weights (tuning: crates/kernels/README.md).
const MC: usize = 96;
/// Pixels whose patches are packed at once, one tap block of them (512 KiB;
/// tuning: crates/kernels/README.md).
const NC: usize = 512;

/// A convolution's weights for [`gemm`], packed when they are first used
/// ([`pack`]), and the biases padded to whole panels of [`MR`]. Until then
/// they are the model's own tensor, which packing lets go of: packed when
/// the op was made, a big model's weights would be held twice while tract
/// builds its plan (the swapper's peak memory: crates/kernels/README.md).
#[derive(Clone)]
pub struct GemmWeights {
    co: usize,
    k: usize,
    bias: Arc<Vec<f32>>,
    packing: Arc<Packing>,
}

/// Packed weights ([`pack`]), as f32 or as INT8 with each output channel's
/// scale and zero point (padded to whole panels with zeros). INT8 ones are
/// dequantised one block at a time as they are used, `(q − zero) × scale`
/// in f32 as tract dequantises them, so the sums are those of tract's
/// product over its dequantised weights; they take a quarter of the memory.
/// `Dot` ones go to the integer product ([`gemm_int8`]) instead.
pub enum Panels {
    F32(Vec<f32>),
    Int8 { values: Vec<i8>, scale: Vec<f32>, zero: Vec<f32> },
    Dot(DotWeights),
}

/// What packs the weights (reading the model's tensor, which it then
/// drops), and what it packed.
pub type Packer = Box<dyn FnOnce() -> Panels + Send>;

struct Packing {
    packer: Mutex<Option<Packer>>,
    packed: OnceLock<Panels>,
}

impl PartialEq for GemmWeights {
    fn eq(&self, other: &Self) -> bool {
        (self.co, self.k, &self.bias) == (other.co, other.k, &other.bias) && Arc::ptr_eq(&self.packing, &other.packing)
    }
}

impl Eq for GemmWeights {}

impl std::fmt::Debug for GemmWeights {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let packed = self.packing.packed.get().is_some();
        write!(f, "GemmWeights {{ co: {}, k: {}, packed: {packed} }}", self.co, self.k)
    }
}

impl GemmWeights {
    /// The weights that `packer` packs ([`pack`]: `co` rows of `k` taps)
    /// when they are first used, and `bias` (`co`).
    pub fn deferred(packer: Packer, bias: &[f32], co: usize, k: usize) -> GemmWeights {
        let packing = Packing { packer: Mutex::new(Some(packer)), packed: OnceLock::new() };
        GemmWeights { co, k, bias: Arc::new(padded(bias, co)), packing: Arc::new(packing) }
    }

    /// Output channels and taps.
    pub fn shape(&self) -> (usize, usize) {
        (self.co, self.k)
    }

    /// The packed weights, packed by the first call.
    fn packed(&self) -> &Panels {
        self.packing.packed.get_or_init(|| {
            let packer = self.packing.packer.lock().ok().and_then(|mut p| p.take());
            // Without a packer (a panic while packing), zeros rather than
            // a second panic.
            let zeros = || Panels::F32(vec![0f32; self.k.div_ceil(KC) * self.co.div_ceil(MR) * KC * MR]);
            packer.map_or_else(zeros, |p| p())
        })
    }
}

/// The first `co` of `values`, then zeros to a whole panel of [`MR`].
pub fn padded(values: &[f32], co: usize) -> Vec<f32> {
    let mut lanes = vec![0f32; co.div_ceil(MR) * MR];
    lanes[..co].copy_from_slice(&values[..co]);
    lanes
}

/// `weights` (`co` rows of `k` taps; zeros where it holds fewer) packed for
/// [`gemm`]: tap block `b`, panel `p` of [`MR`] output channels, tap `t`
/// of the block and channel `r` of the panel at `((b × panels + p) × KC +
/// t) × MR + r` (channels past `co` are zero).
pub fn pack<T: Copy + Default>(weights: &[T], co: usize, k: usize) -> Vec<T> {
    let panels = co.div_ceil(MR);
    let mut data = vec![T::default(); k.div_ceil(KC) * panels * KC * MR];
    for (o, row) in weights.chunks_exact(k.max(1)).take(co).enumerate() {
        let (p, r) = (o / MR, o % MR);
        for (block, taps) in row.chunks(KC).enumerate() {
            let panel = &mut data[(block * panels + p) * KC * MR..][..KC * MR];
            for (t, w) in taps.iter().enumerate() {
                panel[t * MR + r] = *w;
            }
        }
    }
    data
}

impl Panels {
    /// Panels `ps` of tap block `block` of the weights of `co` channels,
    /// one after another ([`KC`] × [`MR`] values each); INT8 ones
    /// dequantised into `scratch` ([`MC`] × [`KC`] values).
    fn block<'a>(&'a self, block: usize, ps: Range<usize>, co: usize, scratch: &'a mut [f32]) -> &'a [f32] {
        let first = block * co.div_ceil(MR);
        let at = (first + ps.start) * KC * MR..(first + ps.end) * KC * MR;
        match self {
            Panels::F32(data) => &data[at],
            // [`gemm`] hands these to the integer product before tiling.
            Panels::Dot(_) => unreachable!("integer weights in the f32 product"),
            Panels::Int8 { values, scale, zero } => {
                let out = &mut scratch[..at.len()];
                let panels = out.chunks_exact_mut(KC * MR).zip(values[at].chunks_exact(KC * MR));
                for (p, (dst, src)) in ps.zip(panels) {
                    dequantise(src, (&scale[p * MR..][..MR], &zero[p * MR..][..MR]), dst);
                }
                out
            }
        }
    }
}

/// One panel of INT8 weights (`kc` × [`MR`]) into f32, channel `r` of each
/// tap by `scale[r]` and `zero[r]`, four taps a step so that the compiler
/// vectorises it.
fn dequantise(q: &[i8], (scale, zero): (&[f32], &[f32]), out: &mut [f32]) {
    const STEP: usize = 4 * MR;
    let tiled = |v: &[f32]| -> [f32; STEP] { std::array::from_fn(|i| v[i % MR]) };
    let (scale, zero) = (tiled(scale), tiled(zero));
    for (dst, src) in out.chunks_exact_mut(STEP).zip(q.chunks_exact(STEP)) {
        for i in 0..STEP {
            dst[i] = (src[i] as f32 - zero[i]) * scale[i];
        }
    }
}

/// The outputs `out` (`co` rows, each holding `n` pixels) of the weights
/// `w` by the patches that `pack(taps, first_pixel, panel)` writes: for each
/// tap of `taps`, [`NR`] values (pixels `first_pixel..`, zero past `n`),
/// tap-major. With `relu`, negative outputs become 0.
///
/// Between tap blocks, each tile's sums wait in a buffer of whole tiles,
/// 384 contiguous bytes each, not in the output's rows: rows a power of two
/// apart (64 KiB on a 128×128 map) share the L1 cache's sets (the cost:
/// crates/kernels/README.md).
pub fn gemm<F>(w: &GemmWeights, n: usize, pack: F, out: &mut [&mut [f32]], relu: bool)
where
    F: Fn(Range<usize>, usize, &mut [f32]),
{
    match w.packed() {
        Panels::Dot(dot) => gemm_int8::gemm(dot, n, pack, out, relu),
        _ => tiled(w, n, pack, out, relu, wide_kernel_available()),
    }
}

/// [`gemm`], two pixel panels a tile where both are whole when `wide`.
fn tiled<F>(w: &GemmWeights, n: usize, pack: F, out: &mut [&mut [f32]], relu: bool, wide: bool)
where
    F: Fn(Range<usize>, usize, &mut [f32]),
{
    assert!(out.len() == w.co && out.iter().all(|row| row.len() >= n), "gemm: the output does not fit the weights");
    let (pixel_panels, row_panels, blocks) = (n.div_ceil(NR), w.co.div_ceil(MR), w.k.div_ceil(KC));
    let (chunk, kc_max) = ((NC / NR).min(pixel_panels).max(1), KC.min(w.k));
    let weights = w.packed();
    let mut scratch = vec![0f32; if matches!(weights, Panels::Int8 { .. }) { MC * KC } else { 0 }];
    let mut packed = vec![0f32; chunk * kc_max * NR];
    let mut partial = vec![0f32; if blocks > 1 { row_panels * chunk * MR * NR } else { 0 }];
    for j0 in (0..pixel_panels).step_by(chunk) {
        let js = j0..(j0 + chunk).min(pixel_panels);
        for block in 0..blocks {
            let taps = block * KC..((block + 1) * KC).min(w.k);
            let kc = taps.len();
            for (panel, j) in packed.chunks_exact_mut(kc_max * NR).zip(js.clone()) {
                pack(taps.clone(), j * NR, &mut panel[..kc * NR]);
            }
            let step = Step { first: block == 0, last: block + 1 == blocks, relu };
            for p0 in (0..row_panels).step_by(MC / MR) {
                let ps = p0..(p0 + MC / MR).min(row_panels);
                let a_block = weights.block(block, ps.clone(), w.co, &mut scratch);
                let mut q = 0;
                while q < js.len() {
                    // Two pixel panels at once where both are whole.
                    let width = if wide && q + 1 < js.len() && (js.start + q + 2) * NR <= n { 2 } else { 1 };
                    let panels = &packed[q * kc_max * NR..][..((width - 1) * kc_max + kc) * NR];
                    for p in ps.clone() {
                        let a = &a_block[(p - p0) * KC * MR..][..kc * MR];
                        let bias = &w.bias[p * MR..][..MR];
                        let part = match partial.len() {
                            0 => &mut [][..],
                            _ => &mut partial[(p * chunk + q) * MR * NR..][..width * MR * NR],
                        };
                        let at = (p * MR, (js.start + q) * NR, n);
                        if width == 2 && (p + 1) * MR <= w.co {
                            tile_pair(a, (panels, kc_max * NR), bias, (out, part), at, step);
                            continue;
                        }
                        for h in 0..width {
                            let b = &panels[h * kc_max * NR..][..kc * NR];
                            let part = if part.is_empty() { &mut [][..] } else { &mut part[h * MR * NR..][..MR * NR] };
                            tile(a, b, bias, (out, part), (at.0, at.1 + h * NR, n), step);
                        }
                    }
                    q += width;
                }
            }
        }
    }
}

/// One tile: output channels `c0..` and pixels `p0..` of `out` (fewer at
/// the edges of `co` and `n`), from weight panel `a` and pixel panel `b`,
/// its sums so far in `part` (empty when there is one tap block).
fn tile(
    a: &[f32],
    b: &[f32],
    bias: &[f32],
    (out, part): (&mut [&mut [f32]], &mut [f32]),
    (c0, p0, n): (usize, usize, usize),
    step: Step,
) {
    let (rows, cols) = ((out.len() - c0).min(MR), (n - p0).min(NR));
    assert!(a.len() / MR == b.len() / NR && bias.len() == MR && (step.first && step.last || part.len() == MR * NR));
    let mut edge = [[0f32; NR]; MR];
    let whole = rows == MR && cols == NR;
    let from = if step.first { std::ptr::null() } else { part.as_ptr() };
    let to: [*mut f32; MR] = std::array::from_fn(|r| match step.last {
        false => part[r * NR..].as_mut_ptr(),
        true if whole => out[c0 + r][p0..p0 + NR].as_mut_ptr(),
        true => edge[r].as_mut_ptr(),
    });
    // SAFETY: `a` holds kc × MR weights and `b` kc × NR values (checked
    // above), `from` (unless null) and each row of `to` NR values.
    unsafe { run_kernel(Operands { kc: b.len() / NR, a: a.as_ptr(), b: b.as_ptr(), from, to }, bias, step) };
    if step.last && !whole {
        for (src, row) in edge.iter().zip(&mut out[c0..c0 + rows]) {
            row[p0..p0 + cols].copy_from_slice(&src[..cols]);
        }
    }
}

/// Two tiles side by side: pixels `p0..p0 + 2 NR` (both whole) of output
/// channels `c0..c0 + MR`, from the pixel panels in `b` (the second
/// `stride` values after the first); otherwise as [`tile`], its sums so far
/// in `part` as two tiles one after the other.
fn tile_pair(
    a: &[f32],
    (b, stride): (&[f32], usize),
    bias: &[f32],
    (out, part): (&mut [&mut [f32]], &mut [f32]),
    (c0, p0, n): (usize, usize, usize),
    step: Step,
) {
    let kc = a.len() / MR;
    assert!(b.len() == stride + kc * NR && c0 + MR <= out.len() && p0 + 2 * NR <= n && bias.len() == MR);
    assert!(step.first && step.last || part.len() == 2 * MR * NR);
    let from = if step.first { std::ptr::null() } else { part.as_ptr() };
    let rows: [*mut f32; MR] = std::array::from_fn(|r| match step.last {
        true => out[c0 + r][p0..p0 + 2 * NR].as_mut_ptr(),
        false => part[r * NR..].as_mut_ptr(),
    });
    // The second tile: NR pixels on in the output's rows, a tile on in `part`.
    let skip = if step.last { NR } else { MR * NR };
    // SAFETY: `a` holds kc × MR weights and `b` two panels of kc × NR values
    // `stride` apart (checked above); `from` (unless null) two tiles; each
    // row of `rows` 2 NR values, or NR and, `skip` on, NR more.
    unsafe {
        let to = [rows, rows.map(|r| r.add(skip))];
        let b = [b.as_ptr(), b.as_ptr().add(stride)];
        run_pair(Operands { kc, a: a.as_ptr(), b: b[0], from, to: to[0] }, (b[1], to[1]), bias, step);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_values as values;

    /// The outputs of `weights` by the `k` × `n` values `x`, through [`gemm`].
    fn product(weights: GemmWeights, x: &[f32], n: usize, relu: bool) -> Vec<f32> {
        product_tiled(weights, x, n, relu, wide_kernel_available())
    }

    /// [`product`], two pixel panels a tile or not.
    fn product_tiled(weights: GemmWeights, x: &[f32], n: usize, relu: bool, wide: bool) -> Vec<f32> {
        let pack = |taps: Range<usize>, p0: usize, dst: &mut [f32]| {
            for (t, line) in taps.zip(dst.chunks_exact_mut(NR)) {
                for (i, v) in line.iter_mut().enumerate() {
                    *v = if p0 + i < n { x[t * n + p0 + i] } else { 0.0 };
                }
            }
        };
        let mut y = vec![f32::NAN; weights.co * n];
        let mut rows: Vec<&mut [f32]> = y.chunks_exact_mut(n).collect();
        tiled(&weights, n, pack, &mut rows, relu, wide);
        y
    }

    /// Tiles of two pixel panels (the AVX-512 kernel where the CPU has it,
    /// else the two tiles in turn) give the outputs of one-panel tiles to
    /// the bit: panel counts odd and even, past a packed chunk, channels off
    /// the tile, one tap block and several (the sums kept between them).
    #[test]
    fn two_panel_tiles_give_the_one_panel_outputs_to_the_bit() {
        for (co, k, n) in [(12, 9, 64), (7, 300, 80), (13, 600, 48), (100, 520, 530), (6, 256, 33)] {
            let (w, b, x) = (values(co * k, 1), values(co, 2), values(k * n, 3));
            for relu in [false, true] {
                let weights =
                    |w: Vec<f32>| GemmWeights::deferred(Box::new(move || Panels::F32(pack(&w, co, k))), &b, co, k);
                let one = product_tiled(weights(w.clone()), &x, n, relu, false);
                let two = product_tiled(weights(w.clone()), &x, n, relu, true);
                let same = one.iter().zip(&two).all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "co {co} k {k} n {n} relu {relu}: the two-panel tiles differ");
            }
        }
    }

    #[test]
    fn every_output_is_its_taps_summed_then_its_bias_at_any_size() {
        // Channel counts off the tile (7, 1) and past a block of them (100),
        // taps off a block and past two (9, 600), pixels off a panel and past
        // a packed chunk (5, 37, 530).
        for (co, k, n) in [(7, 9, 37), (1, 600, 5), (100, 300, 530), (12, 256, 16)] {
            let (w, b, x) = (values(co * k, 1), values(co, 2), values(k * n, 3));
            for relu in [false, true] {
                let weights = w.clone();
                let packed = GemmWeights::deferred(Box::new(move || Panels::F32(pack(&weights, co, k))), &b, co, k);
                let y = product(packed, &x, n, relu);
                for (i, got) in y.iter().enumerate() {
                    let (o, p) = (i / n, i % n);
                    let sum = (0..k).map(|t| w[o * k + t] as f64 * x[t * n + p] as f64).sum::<f64>() + b[o] as f64;
                    let want = if relu { sum.max(0.0) } else { sum } as f32;
                    assert!((got - want).abs() < 1e-4, "co {co} k {k} n {n}: output {i} is {got}, not {want}");
                }
            }
        }
    }

    #[test]
    fn int8_weights_give_the_outputs_of_their_dequantised_f32_to_the_bit() {
        // Channels past a block of them and off the tile, taps past two
        // blocks and off one, zero points on both sides of zero.
        for (co, k, n) in [(7, 9, 37), (100, 600, 40)] {
            let q: Vec<i8> = (0..co * k).map(|i| ((i * 37) % 255) as i16 - 127).map(|v| v as i8).collect();
            let scale: Vec<f32> = (0..co).map(|o| 0.01 + o as f32 * 1e-3).collect();
            let zero: Vec<f32> = (0..co).map(|o| (o % 5) as f32 - 2.0).collect();
            let f: Vec<f32> = q.iter().enumerate().map(|(i, v)| (*v as f32 - zero[i / k]) * scale[i / k]).collect();
            let (b, x) = (values(co, 2), values(k * n, 3));
            let int8 =
                move || Panels::Int8 { values: pack(&q, co, k), scale: padded(&scale, co), zero: padded(&zero, co) };
            let want =
                product(GemmWeights::deferred(Box::new(move || Panels::F32(pack(&f, co, k))), &b, co, k), &x, n, true);
            let got = product(GemmWeights::deferred(Box::new(int8), &b, co, k), &x, n, true);
            assert!(got.iter().zip(&want).all(|(g, w)| g.to_bits() == w.to_bits()), "co {co} k {k} n {n}");
        }
    }
}
