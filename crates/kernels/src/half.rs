//! Conversions between f32 and IEEE half precision (f16, held as its
//! little-endian bytes), for the casts an FP16 plan keeps around the ops it
//! runs in f32. Rounding is to the nearest, ties to even, as Arm's `fcvtn`
//! and every IEEE conversion do; a NaN stays a NaN (made quiet).
//!
//! The plain loops convert one value at a time with integer arithmetic; on
//! aarch64 NEON converts eight at a time (`fcvtn`/`fcvtl`, base Armv8, no
//! FP16 arithmetic needed), held to the plain loops to the bit.

/// `src` as f16 into `dst`, two little-endian bytes a value.
///
/// # Panics
/// When `dst` is not twice as long as `src`.
pub fn f32_to_f16(src: &[f32], dst: &mut [u8]) {
    assert_eq!(dst.len(), src.len() * 2, "f32_to_f16: {} values into {} bytes", src.len(), dst.len());
    #[cfg(target_arch = "aarch64")]
    if crate::cpu::has(crate::cpu::Feature::Neon) {
        let whole = src.len() / 8 * 8;
        crate::aarch64::f32_to_f16(&src[..whole], &mut dst[..whole * 2]);
        return f32_to_f16_plain(&src[whole..], &mut dst[whole * 2..]);
    }
    f32_to_f16_plain(src, dst)
}

/// The f16 values in `src` (two little-endian bytes each) as f32 into `dst`.
///
/// # Panics
/// When `src` is not twice as long as `dst`.
pub fn f16_to_f32(src: &[u8], dst: &mut [f32]) {
    assert_eq!(src.len(), dst.len() * 2, "f16_to_f32: {} bytes into {} values", src.len(), dst.len());
    #[cfg(target_arch = "aarch64")]
    if crate::cpu::has(crate::cpu::Feature::Neon) {
        let whole = dst.len() / 8 * 8;
        crate::aarch64::f16_to_f32(&src[..whole * 2], &mut dst[..whole]);
        return f16_to_f32_plain(&src[whole * 2..], &mut dst[whole..]);
    }
    f16_to_f32_plain(src, dst)
}

/// [`f32_to_f16`]'s plain loop.
pub fn f32_to_f16_plain(src: &[f32], dst: &mut [u8]) {
    for (v, out) in src.iter().zip(dst.chunks_exact_mut(2)) {
        out.copy_from_slice(&to_half(*v).to_le_bytes());
    }
}

/// [`f16_to_f32`]'s plain loop.
pub fn f16_to_f32_plain(src: &[u8], dst: &mut [f32]) {
    for (h, out) in src.chunks_exact(2).zip(dst.iter_mut()) {
        *out = from_half(u16::from_le_bytes([h[0], h[1]]));
    }
}

/// One f32 as f16 bits, rounded to the nearest, ties to even.
pub fn to_half(value: f32) -> u16 {
    let x = value.to_bits();
    let sign = (x >> 16) & 0x8000;
    let exp = (x >> 23) & 0xff;
    let man = x & 0x7f_ffff;
    if exp == 0xff {
        // Infinity, or a NaN with its top mantissa bits, made quiet.
        let quiet = if man == 0 { 0 } else { 0x200 };
        return (sign | 0x7c00 | quiet | (man >> 13)) as u16;
    }
    let half_exp = exp as i32 - 127 + 15;
    if half_exp >= 0x1f {
        return (sign | 0x7c00) as u16;
    }
    if half_exp <= 0 {
        // A subnormal f16 (or zero): the implicit bit joins the mantissa.
        let shift = (14 - half_exp) as u32;
        if shift > 24 {
            return sign as u16;
        }
        let man = man | 0x80_0000;
        return (sign | round_shift(man, shift)) as u16;
    }
    // The carry of a rounding may run into the exponent: that is the next
    // binade up, or infinity, as it should be.
    ((sign | ((half_exp as u32) << 10)) + round_shift(man, 13)) as u16
}

/// `man >> shift`, rounded to the nearest, ties to even.
fn round_shift(man: u32, shift: u32) -> u32 {
    let kept = man >> shift;
    let half = 1u32 << (shift - 1);
    let rest = man & ((1u32 << shift) - 1);
    kept + u32::from(rest > half || (rest == half && kept & 1 == 1))
}

/// One f16 (its bits) as f32: exact.
pub fn from_half(h: u16) -> f32 {
    let sign = u32::from(h & 0x8000) << 16;
    let exp = u32::from(h >> 10) & 0x1f;
    let man = u32::from(h & 0x3ff);
    let bits = match (exp, man) {
        (0, 0) => sign,
        (0, _) => {
            // Subnormal: normalise. `man` < 2^10 has at least 22 leading zeros.
            let shift = man.leading_zeros() - 21;
            sign | ((127 - 15 + 1 - shift) << 23) | ((man << shift) & 0x3ff) << 13
        }
        (0x1f, 0) => sign | 0x7f80_0000,
        (0x1f, _) => sign | 0x7fc0_0000 | (man << 13),
        _ => sign | ((exp + 127 - 15) << 23) | (man << 13),
    };
    f32::from_bits(bits)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn same(a: f32, b: f32) -> bool {
        a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
    }

    #[test]
    fn known_values_convert_both_ways() {
        let cases: [(f32, u16); 12] = [
            (0.0, 0x0000),
            (-0.0, 0x8000),
            (1.0, 0x3c00),
            (-2.0, 0xc000),
            (65504.0, 0x7bff),
            (f32::INFINITY, 0x7c00),
            (f32::NEG_INFINITY, 0xfc00),
            (6.103_515_6e-5, 0x0400),
            (5.960_464_5e-8, 0x0001),
            (0.333_251_95, 0x3555),
            (1.0 + 1.0 / 2048.0, 0x3c00),
            (1.0 + 3.0 / 2048.0, 0x3c02),
        ];
        for (f, h) in cases {
            assert_eq!(to_half(f), h, "{f} to f16");
        }
        // Overflow past the largest f16's rounding point, a tiny value to zero.
        assert_eq!(to_half(65520.0), 0x7c00);
        assert_eq!(to_half(65519.0), 0x7bff);
        assert_eq!(to_half(1e-9), 0);
        assert_eq!(to_half(f32::NAN) & 0x7e00, 0x7e00);
        for (f, h) in cases.iter().take(10) {
            assert!(same(from_half(*h), *f), "{h:#06x} to f32");
        }
    }

    #[test]
    fn every_f16_goes_to_f32_and_back_unchanged() {
        for h in 0..=u16::MAX {
            let f = from_half(h);
            if f.is_nan() {
                assert_eq!(h & 0x7c00, 0x7c00);
                assert_eq!(to_half(f) & 0x7fff, h & 0x7fff | 0x200, "NaN {h:#06x}");
            } else {
                assert_eq!(to_half(f), h, "{h:#06x} -> {f:e}");
            }
        }
    }

    #[test]
    fn rounding_is_to_the_nearest_ties_to_even_between_neighbours() {
        // Midpoints of every pair of neighbouring finite positive f16s (exact
        // in f32) round to the even one; a hair either side, to the nearer.
        for h in 0..0x7bffu16 {
            let (lo, hi) = (from_half(h) as f64, from_half(h + 1) as f64);
            let mid = ((lo + hi) / 2.0) as f32;
            let even = if h % 2 == 0 { h } else { h + 1 };
            assert_eq!(to_half(mid), even, "midpoint of {h:#06x}");
            assert_eq!(to_half(f32::from_bits(mid.to_bits() - 1)), h, "below the midpoint of {h:#06x}");
            assert_eq!(to_half(f32::from_bits(mid.to_bits() + 1)), h + 1, "above the midpoint of {h:#06x}");
        }
    }

    /// f32 bit patterns across the whole range: every sign, exponent and a
    /// spread of mantissas, with NaNs and infinities.
    fn sweep() -> Vec<f32> {
        let mut v: Vec<f32> = (0..=u32::MAX / 65_521).map(|i| f32::from_bits(i.wrapping_mul(65_521))).collect();
        v.extend(crate::test_values(4099, 7).iter().map(|x| x * 70_000.0));
        v.extend([f32::NAN, -f32::NAN, f32::INFINITY, f32::MIN_POSITIVE, -1e-30, 65_519.99]);
        v
    }

    #[test]
    fn the_dispatched_conversions_match_the_plain_loops_to_the_bit() {
        let src = sweep();
        let (mut fast, mut plain) = (vec![0u8; src.len() * 2], vec![0u8; src.len() * 2]);
        f32_to_f16(&src, &mut fast);
        f32_to_f16_plain(&src, &mut plain);
        assert_eq!(fast, plain, "f32 to f16 on {}", crate::cpu::describe());
        let halves: Vec<u8> = (0..=u16::MAX).flat_map(u16::to_le_bytes).chain([0, 0x3c, 1]).collect();
        let halves = &halves[..halves.len() - 1];
        let (mut fast, mut plain) = (vec![0f32; halves.len() / 2], vec![0f32; halves.len() / 2]);
        f16_to_f32(halves, &mut fast);
        f16_to_f32_plain(halves, &mut plain);
        for (i, (a, b)) in fast.iter().zip(&plain).enumerate() {
            assert!(same(*a, *b), "f16 #{i}: {a:e} against {b:e} on {}", crate::cpu::describe());
        }
    }
}
