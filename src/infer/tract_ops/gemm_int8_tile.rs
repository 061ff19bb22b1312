//! The tiles of [`super::gemm_int8`]'s integer product: `quads` steps of
//! four taps, [`MR`] output channels by [`NR`] pixels, their 32-bit sums
//! kept between calls. The AVX-512 VNNI tile is the one that runs; the
//! plain one is the reference it is held to, to the bit.

/// Output channels per tile: one broadcast of four weights each.
pub(super) const MR: usize = 8;
/// Pixels per tile: two vectors of 16 lanes, four taps a lane.
pub(super) const NR: usize = 32;

/// Whether this CPU runs the integer product (AVX-512 VNNI); elsewhere
/// INT8 convolutions take the f32 product.
pub fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f") && std::arch::is_x86_feature_detected!("avx512vnni")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
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

/// [`Tile`] on AVX-512 VNNI.
pub(super) fn vnni_tile(quads: usize, a: &[i8], b: &[u8], acc: &mut [i32; MR * NR], first: bool) {
    assert!(a.len() >= quads * 4 * MR && b.len() >= quads * 4 * NR);
    #[cfg(target_arch = "x86_64")]
    if available() {
        // SAFETY: the CPU has AVX-512 VNNI (checked above), `a` and `b`
        // hold `quads` quads (asserted above) and `acc` a whole tile.
        return unsafe { vnni_tile_x86(quads, a.as_ptr(), b.as_ptr(), acc, first) };
    }
    let _ = (acc, first);
    unreachable!("gemm_int8 runs on CPUs with AVX-512 VNNI only");
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vnni")]
unsafe fn vnni_tile_x86(quads: usize, a: *const i8, b: *const u8, acc: &mut [i32; MR * NR], first: bool) {
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
