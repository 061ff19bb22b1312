//! The integer product's tile and input packing on aarch64's dot product
//! (`sdot`: four products of signed bytes summed into each 32-bit lane,
//! 16 products an instruction, where an f32 `fmla` makes 4).
//!
//! `sdot` multiplies signed bytes only, and the packed input holds the
//! grid's integers as unsigned bytes `u`. The tile flips each byte's top
//! bit, which turns `u` into the signed `u − 128`, and adds `128 × Σ w` per
//! channel back at the end: `Σ w·u = Σ w·(u − 128) + 128·Σ w`, exact in
//! 32 bits wherever the plain sum is ([`crate::gemm_int8::fits`]).

use crate::gemm_int8_tile::{MR, NR};
use crate::quant::Grid;
use std::arch::aarch64::*;

/// Pixels of the tile a pass of [`dot_tile`] keeps in registers: 8 channels
/// × 8 pixels are 16 vectors of sums, fed by 2 of weights and 2 of pixels.
const GROUP: usize = 8;

/// `acc += a·b` lane by lane: four byte products of `a`'s lane and of the
/// four bytes `L` of `b` (`sdot` by element).
#[inline(always)]
unsafe fn sdot<const L: i32>(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
    let mut acc = acc;
    // SAFETY (of the caller): only called from functions compiled with
    // `dotprod`, after the CPU was checked for it. The instruction touches
    // registers only.
    std::arch::asm!(
        "sdot {acc:v}.4s, {a:v}.16b, {b:v}.4b[{l}]",
        acc = inout(vreg) acc,
        a = in(vreg) a,
        b = in(vreg) b,
        l = const L,
        options(pure, nomem, nostack, preserves_flags)
    );
    acc
}

/// [`crate::gemm_int8_tile::Tile`] on `sdot`: the plain tile's sums, to the
/// bit.
pub(crate) fn dot_tile(quads: usize, a: &[i8], b: &[u8], acc: &mut [i32; MR * NR], first: bool) {
    assert!(a.len() >= quads * 4 * MR && b.len() >= quads * 4 * NR);
    assert!(std::arch::is_aarch64_feature_detected!("dotprod"), "no dot product on this CPU");
    // SAFETY: the CPU has NEON and the dot product (asserted above; NEON is
    // aarch64's baseline) and `a` and `b` hold `quads` quads; `acc` is a
    // whole tile.
    unsafe { dot_tile_neon(quads, a.as_ptr(), b.as_ptr(), acc, first) }
}

#[target_feature(enable = "neon,dotprod")]
unsafe fn dot_tile_neon(quads: usize, a: *const i8, b: *const u8, acc: &mut [i32; MR * NR], first: bool) {
    const _: () = assert!(MR == 8 && NR.is_multiple_of(GROUP));
    // Each channel's sum of this call's weights, times 128.
    let ones = vdupq_n_s8(1);
    let (mut s0, mut s1) = (vdupq_n_s32(0), vdupq_n_s32(0));
    for q in 0..quads {
        s0 = sdot::<0>(s0, vld1q_s8(a.add(q * 32)), ones);
        s1 = sdot::<0>(s1, vld1q_s8(a.add(q * 32 + 16)), ones);
    }
    let mut shift = [0i32; MR];
    vst1q_s32(shift.as_mut_ptr(), vshlq_n_s32::<7>(s0));
    vst1q_s32(shift.as_mut_ptr().add(4), vshlq_n_s32::<7>(s1));
    let top = vdupq_n_u8(0x80);
    let sums = acc.as_mut_ptr();
    for g in (0..NR).step_by(GROUP) {
        let mut c = [[vdupq_n_s32(0); 2]; MR];
        for (r, row) in c.iter_mut().enumerate() {
            let base = vdupq_n_s32(shift[r]);
            row[0] = if first { base } else { vaddq_s32(vld1q_s32(sums.add(r * NR + g)), base) };
            row[1] = if first { base } else { vaddq_s32(vld1q_s32(sums.add(r * NR + g + 4)), base) };
        }
        for q in 0..quads {
            let (w0, w1) = (vld1q_s8(a.add(q * 32)), vld1q_s8(a.add(q * 32 + 16)));
            let p = b.add((q * NR + g) * 4);
            let p0 = vreinterpretq_s8_u8(veorq_u8(vld1q_u8(p), top));
            let p1 = vreinterpretq_s8_u8(veorq_u8(vld1q_u8(p.add(16)), top));
            macro_rules! rows {
                ($w:expr, $r:expr) => {
                    c[$r][0] = sdot::<0>(c[$r][0], p0, $w);
                    c[$r][1] = sdot::<0>(c[$r][1], p1, $w);
                    c[$r + 1][0] = sdot::<1>(c[$r + 1][0], p0, $w);
                    c[$r + 1][1] = sdot::<1>(c[$r + 1][1], p1, $w);
                    c[$r + 2][0] = sdot::<2>(c[$r + 2][0], p0, $w);
                    c[$r + 2][1] = sdot::<2>(c[$r + 2][1], p1, $w);
                    c[$r + 3][0] = sdot::<3>(c[$r + 3][0], p0, $w);
                    c[$r + 3][1] = sdot::<3>(c[$r + 3][1], p1, $w);
                };
            }
            rows!(w0, 0);
            rows!(w1, 4);
        }
        for (r, row) in c.iter().enumerate() {
            vst1q_s32(sums.add(r * NR + g), row[0]);
            vst1q_s32(sums.add(r * NR + g + 4), row[1]);
        }
    }
}

/// `crate::gemm_int8`'s `to_integers` on NEON, where the grid spans all
/// 256 integers (every INT8 and UINT8 grid): 16 pixels of four taps at a
/// time, rounded half to even by the conversion (`fcvtns`, which makes a
/// NaN 0, as tract casts it), shifted and clamped by saturating narrows,
/// then interleaved into quads by `st4`. `false` where the grid is not so
/// (the caller then runs its plain loop).
pub(crate) fn to_integers(floats: &[f32], grid: Grid, (first, quads): (usize, usize), panel: &mut [u8]) -> bool {
    const PX: usize = crate::gemm_int8::PACK_NR;
    if grid.hi - grid.lo != 255.0 || !std::arch::is_aarch64_feature_detected!("neon") {
        return false;
    }
    let taps = floats.len() / PX;
    assert!(first + PX <= NR && panel.len() >= quads * NR * 4 && floats.len() >= taps * PX);
    // SAFETY: NEON is there (checked above); the loads read whole rows of
    // `floats` (asserted above) and the stores write 64 bytes from
    // `(q × NR + first) × 4`, inside `panel` as asserted.
    unsafe { to_integers_neon(floats, grid, (first, quads), panel) };
    true
}

#[target_feature(enable = "neon")]
unsafe fn to_integers_neon(floats: &[f32], grid: Grid, (first, quads): (usize, usize), panel: &mut [u8]) {
    const PX: usize = crate::gemm_int8::PACK_NR;
    let taps = floats.len() / PX;
    let inv = vdupq_n_f32(grid.scale.recip());
    let shift = vdupq_n_s32(crate::gemm_int8::zero_shift(grid));
    let zero_row = vdupq_n_u8(crate::gemm_int8::zero_shift(grid) as u8);
    let row = |t: usize| -> uint8x16_t {
        if t >= taps {
            return zero_row;
        }
        let src = floats.as_ptr().add(t * PX);
        let ints: [int32x4_t; 4] =
            std::array::from_fn(|i| vqaddq_s32(vcvtnq_s32_f32(vmulq_f32(vld1q_f32(src.add(i * 4)), inv)), shift));
        let low = vqmovun_s32(ints[0]);
        let low = vqmovun_high_s32(low, ints[1]);
        let high = vqmovun_s32(ints[2]);
        let high = vqmovun_high_s32(high, ints[3]);
        vqmovn_high_u16(vqmovn_u16(low), high)
    };
    for q in 0..quads {
        let rows = uint8x16x4_t(row(q * 4), row(q * 4 + 1), row(q * 4 + 2), row(q * 4 + 3));
        vst4q_u8(panel.as_mut_ptr().add((q * NR + first) * 4), rows);
    }
}
