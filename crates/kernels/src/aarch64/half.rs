//! [`crate::half`]'s conversions eight values at a time: `fcvtn`/`fcvtn2`
//! (f32 to f16, rounding as the FPCR says: to the nearest, ties to even,
//! which no Rust code changes) and `fcvtl`/`fcvtl2` (f16 to f32, exact).
//! Both are base Armv8 Advanced SIMD; Rust's f16 vector types are not yet
//! stable, so the instructions are written out.

use std::arch::aarch64::*;

/// `src` (a multiple of 8 values) as f16 bytes into `dst`.
pub(crate) fn f32_to_f16(src: &[f32], dst: &mut [u8]) {
    assert!(src.len().is_multiple_of(8) && dst.len() == src.len() * 2);
    assert!(std::arch::is_aarch64_feature_detected!("neon"), "no NEON on this CPU");
    // SAFETY: NEON is present (asserted above) and both slices hold
    // `src.len() / 8` blocks of 8 values.
    unsafe { f32_to_f16_neon(src.as_ptr(), dst.as_mut_ptr(), src.len() / 8) }
}

/// The f16 bytes in `src` (a multiple of 8 values) as f32 into `dst`.
pub(crate) fn f16_to_f32(src: &[u8], dst: &mut [f32]) {
    assert!(dst.len().is_multiple_of(8) && src.len() == dst.len() * 2);
    assert!(std::arch::is_aarch64_feature_detected!("neon"), "no NEON on this CPU");
    // SAFETY: as in `f32_to_f16`.
    unsafe { f16_to_f32_neon(src.as_ptr(), dst.as_mut_ptr(), dst.len() / 8) }
}

#[target_feature(enable = "neon")]
unsafe fn f32_to_f16_neon(src: *const f32, dst: *mut u8, blocks: usize) {
    for i in 0..blocks {
        let lo = vld1q_f32(src.add(i * 8));
        let hi = vld1q_f32(src.add(i * 8 + 4));
        let half: uint16x8_t;
        // `out`, not `lateout`: `half` is written before `hi` is read.
        std::arch::asm!(
            "fcvtn {h:v}.4h, {lo:v}.4s",
            "fcvtn2 {h:v}.8h, {hi:v}.4s",
            h = out(vreg) half,
            lo = in(vreg) lo,
            hi = in(vreg) hi,
            options(pure, nomem, nostack, preserves_flags)
        );
        vst1q_u8(dst.add(i * 16), vreinterpretq_u8_u16(half));
    }
}

#[target_feature(enable = "neon")]
unsafe fn f16_to_f32_neon(src: *const u8, dst: *mut f32, blocks: usize) {
    for i in 0..blocks {
        let half = vreinterpretq_u16_u8(vld1q_u8(src.add(i * 16)));
        let (lo, hi): (float32x4_t, float32x4_t);
        // `out`, not `lateout`: `lo` is written before `half` is read again.
        std::arch::asm!(
            "fcvtl {lo:v}.4s, {h:v}.4h",
            "fcvtl2 {hi:v}.4s, {h:v}.8h",
            lo = out(vreg) lo,
            hi = out(vreg) hi,
            h = in(vreg) half,
            options(pure, nomem, nostack, preserves_flags)
        );
        vst1q_f32(dst.add(i * 8), lo);
        vst1q_f32(dst.add(i * 8 + 4), hi);
    }
}
