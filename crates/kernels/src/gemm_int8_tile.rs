//! The tiles of [`crate::gemm_int8`]'s integer product: `quads` steps of
//! four taps, [`MR`] output channels by [`NR`] pixels, their 32-bit sums
//! kept between calls. A vector tile (VNNI on x86_64, 512- or 256-bit;
//! the dot product on aarch64, `crate::aarch64`) is the one that runs; the
//! plain one is the reference each is held to, to the bit.

/// Output channels per tile: one broadcast of four weights each (tuning:
/// crates/kernels/README.md).
pub(super) const MR: usize = 8;
/// Pixels per tile: two vectors of 16 lanes, four taps a lane.
pub(super) const NR: usize = 32;

/// The 8-bit dot product this CPU has for the integer product: VNNI on
/// 512-bit vectors (AVX-512 VNNI: Xeons since Cascade Lake, Zen 4) or on
/// 256-bit ones only (AVX-VNNI: Alder Lake and later, the N100 of many
/// mini-PCs), or aarch64's `sdot` (Armv8.2 DotProd: Cortex-A76 and A78,
/// so the Pi 5, RK3588 and Jetson Orin; not the Pi 4's A72). Without one,
/// INT8 convolutions take the f32 product.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
// Each architecture has only its own.
#[allow(dead_code)]
pub enum Dot {
    Vnni512,
    Vnni256,
    NeonDot,
}

/// The widest dot product of this CPU, with its tile (found once: each
/// convolution of a run asks).
pub(super) fn widest() -> Option<(Dot, Tile)> {
    static WIDEST: std::sync::OnceLock<Option<(Dot, Tile)>> = std::sync::OnceLock::new();
    *WIDEST.get_or_init(|| kernels().into_iter().next())
}

/// Every vector tile this CPU runs, the widest first.
pub(super) fn kernels() -> Vec<(Dot, Tile)> {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::cpu::{has, Feature};
        let mut tiles: Vec<(Dot, Tile)> = vec![];
        if has(Feature::Avx512Vnni) {
            tiles.push((Dot::Vnni512, vnni512_tile));
        }
        if has(Feature::AvxVnni) {
            tiles.push((Dot::Vnni256, vnni256_tile));
        }
        tiles
    }
    #[cfg(target_arch = "aarch64")]
    {
        use crate::cpu::{has, Feature};
        match has(Feature::Dotprod) {
            true => vec![(Dot::NeonDot, crate::aarch64::dot_tile as Tile)],
            false => vec![],
        }
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        vec![]
    }
}

/// A tile kernel: `quads` steps of four taps of weights `a` and pixels `b`
/// added to the sums in `acc` ([`MR`] rows of [`NR`]; zeroed first when
/// `first`).
pub(super) type Tile = fn(quads: usize, a: &[i8], b: &[u8], acc: &mut [i32; MR * NR], first: bool);

/// [`Tile`] in plain loops: the reference the vector kernel is held to.
#[cfg_attr(not(test), allow(dead_code))]
pub(super) fn plain_tile(quads: usize, a: &[i8], b: &[u8], acc: &mut [i32; MR * NR], first: bool) {
    if first {
        acc.fill(0);
    }
    for q in 0..quads {
        for r in 0..MR {
            for p in 0..NR {
                let products = (0..4).map(|i| a[(q * MR + r) * 4 + i] as i32 * b[(q * NR + p) * 4 + i] as i32);
                acc[r * NR + p] += products.sum::<i32>();
            }
        }
    }
}

/// [`Tile`] on AVX-512 VNNI: the tile's 16 sums in registers.
#[cfg(target_arch = "x86_64")]
fn vnni512_tile(quads: usize, a: &[i8], b: &[u8], acc: &mut [i32; MR * NR], first: bool) {
    assert!(a.len() >= quads * 4 * MR && b.len() >= quads * 4 * NR);
    assert!(std::arch::is_x86_feature_detected!("avx512vnni"), "no AVX-512 VNNI on this CPU");
    // SAFETY: the CPU has AVX-512 VNNI and `a` and `b` hold `quads` quads
    // (both asserted above); `acc` is a whole tile.
    unsafe { vnni512_tile_x86(quads, a.as_ptr(), b.as_ptr(), acc, first) }
}

/// [`Tile`] on AVX-VNNI (16 registers of 8 lanes): two channels at a time,
/// 8 sums in registers, the tile's pixels read again for each pair.
#[cfg(target_arch = "x86_64")]
fn vnni256_tile(quads: usize, a: &[i8], b: &[u8], acc: &mut [i32; MR * NR], first: bool) {
    assert!(a.len() >= quads * 4 * MR && b.len() >= quads * 4 * NR);
    assert!(std::arch::is_x86_feature_detected!("avxvnni"), "no AVX-VNNI on this CPU");
    // SAFETY: the CPU has AVX-VNNI (and so AVX2) and `a` and `b` hold
    // `quads` quads (both asserted above); `acc` is a whole tile.
    unsafe { vnni256_tile_x86(quads, a.as_ptr(), b.as_ptr(), acc, first) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,avxvnni")]
unsafe fn vnni256_tile_x86(quads: usize, a: *const i8, b: *const u8, acc: &mut [i32; MR * NR], first: bool) {
    use std::arch::x86_64::*;
    const V: usize = NR / 8;
    let sums = acc.as_mut_ptr();
    for r0 in (0..MR).step_by(2) {
        let mut c = [[_mm256_setzero_si256(); V]; 2];
        if !first {
            for (i, row) in c.iter_mut().enumerate() {
                for (j, v) in row.iter_mut().enumerate() {
                    *v = _mm256_loadu_si256(sums.add((r0 + i) * NR + j * 8).cast());
                }
            }
        }
        for q in 0..quads {
            // 8 pixels × 4 taps per vector; four taps of a channel
            // broadcast to every lane.
            let pixels: [__m256i; V] = std::array::from_fn(|j| _mm256_loadu_si256(b.add((q * NR + j * 8) * 4).cast()));
            let weights = a.add(q * MR * 4).cast::<i32>();
            for (i, row) in c.iter_mut().enumerate() {
                let w = _mm256_set1_epi32(weights.add(r0 + i).read_unaligned());
                for (v, p) in row.iter_mut().zip(pixels) {
                    *v = _mm256_dpbusd_avx_epi32(*v, p, w);
                }
            }
        }
        for (i, row) in c.iter().enumerate() {
            for (j, v) in row.iter().enumerate() {
                _mm256_storeu_si256(sums.add((r0 + i) * NR + j * 8).cast(), *v);
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vnni")]
unsafe fn vnni512_tile_x86(quads: usize, a: *const i8, b: *const u8, acc: &mut [i32; MR * NR], first: bool) {
    use std::arch::x86_64::*;
    let sums = acc.as_mut_ptr();
    let mut c = [[_mm512_setzero_si512(); 2]; MR];
    if !first {
        for (r, row) in c.iter_mut().enumerate() {
            row[0] = _mm512_loadu_si512(sums.add(r * NR).cast());
            row[1] = _mm512_loadu_si512(sums.add(r * NR + 16).cast());
        }
    }
    for q in 0..quads {
        // 16 pixels × 4 taps per vector, two vectors; four taps of each
        // channel broadcast to every lane.
        let b0 = _mm512_loadu_si512(b.add(q * NR * 4).cast());
        let b1 = _mm512_loadu_si512(b.add(q * NR * 4 + 64).cast());
        let weights = a.add(q * MR * 4).cast::<i32>();
        for (r, row) in c.iter_mut().enumerate() {
            let w = _mm512_set1_epi32(weights.add(r).read_unaligned());
            row[0] = _mm512_dpbusd_epi32(row[0], b0, w);
            row[1] = _mm512_dpbusd_epi32(row[1], b1, w);
        }
    }
    for (r, row) in c.iter().enumerate() {
        _mm512_storeu_si512(sums.add(r * NR).cast(), row[0]);
        _mm512_storeu_si512(sums.add(r * NR + 16).cast(), row[1]);
    }
}
