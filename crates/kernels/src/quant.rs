//! Rounding activations to an 8-bit grid and back (a quantise-dequantise
//! pair) in f32, as tract's `QuantizeLinear` and `DequantizeLinear` do it.

/// An 8-bit grid: `scale`, `zero_point` and the range of the integer type.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Grid {
    pub scale: f32,
    pub zero_point: f32,
    pub lo: f32,
    pub hi: f32,
}

/// Rounds `x` in place to `grid` and back, as tract's `QuantizeLinearU8` (or
/// `I8`) followed by `DequantizeLinearF32` does:
/// `(clamp(round_half_even(x * (1 / scale)) + zp, lo, hi) - zp) * scale`,
/// with a NaN becoming 0 (tract casts it to the integer 0 before adding the
/// zero point). With AVX-512 or AVX2 (checked at run time) 16 or 8 values
/// at a time.
pub fn fake_quant_in_place(x: &mut [f32], grid: Grid) {
    #[cfg(target_arch = "x86_64")]
    if crate::cpu::has(crate::cpu::Feature::Avx512F) {
        // SAFETY: the CPU has AVX-512, checked just above.
        return unsafe { fake_quant_avx512(x, grid) };
    }
    #[cfg(target_arch = "x86_64")]
    if crate::cpu::has(crate::cpu::Feature::Avx2) {
        // SAFETY: the CPU has AVX2, checked just above.
        return unsafe { fake_quant_avx2(x, grid) };
    }
    fake_quant(x, grid)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn fake_quant_avx2(x: &mut [f32], grid: Grid) {
    fake_quant(x, grid)
}

/// [`fake_quant`] with AVX-512: 16 values a vector through
/// [`Rounding::apply_avx512`], the rest through [`Rounding::apply`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn fake_quant_avx512(x: &mut [f32], grid: Grid) {
    use std::arch::x86_64::*;
    let r = grid.rounding();
    let mut vectors = x.chunks_exact_mut(16);
    for v in &mut vectors {
        _mm512_storeu_ps(v.as_mut_ptr(), r.apply_avx512(_mm512_loadu_ps(v.as_ptr())));
    }
    for v in vectors.into_remainder() {
        *v = r.apply(*v);
    }
}

impl Grid {
    /// The grid's constants as [`Rounding::apply`] uses them.
    ///
    /// `clamp(round(t) + zp, lo, hi) - zp` is `round(clamp(t, lo - zp, hi - zp))`
    /// because the bounds are integers, and once clamped `t` is small enough
    /// for adding and subtracting 1.5 × 2^23 to round it half to even.
    pub fn rounding(self) -> Rounding {
        let Grid { scale, zero_point, lo, hi } = self;
        Rounding { inv: scale.recip(), low: lo - zero_point, high: hi - zero_point, scale }
    }
}

/// 1.5 × 2^23: added to and taken from an f32 under 2^22, it rounds it to
/// an integer, half to even.
pub const MAGIC: f32 = 12_582_912.0;

/// One value to a [`Grid`] and back, for loops that vectorise.
#[derive(Debug, Clone, Copy)]
pub struct Rounding {
    inv: f32,
    low: f32,
    high: f32,
    scale: f32,
}

impl Rounding {
    #[inline(always)]
    pub fn apply(self, v: f32) -> f32 {
        self.steps(v) * self.scale
    }

    /// [`Self::apply`] on 16 values, to the bit: the same product, clamps
    /// (`max` and `min` give the bound on equal zeros, as the selects do)
    /// and rounding, whose adding and subtracting also turns a -0 into 0.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub(crate) fn apply_avx512(self, v: std::arch::x86_64::__m512) -> std::arch::x86_64::__m512 {
        use std::arch::x86_64::*;
        let magic = _mm512_set1_ps(MAGIC);
        // NaN lanes are left out of the product, so 0 below: the clamps
        // keep 0 (the zero point lies on the grid).
        let numbers = _mm512_cmp_ps_mask::<_CMP_ORD_Q>(v, v);
        let t = _mm512_maskz_mul_ps(numbers, v, _mm512_set1_ps(self.inv));
        let t = _mm512_min_ps(_mm512_max_ps(t, _mm512_set1_ps(self.low)), _mm512_set1_ps(self.high));
        _mm512_mul_ps(_mm512_sub_ps(_mm512_add_ps(t, magic), magic), _mm512_set1_ps(self.scale))
    }

    /// The grid's integer for `v` less the zero point, as an f32 (a NaN is
    /// 0, as tract casts it).
    #[inline(always)]
    pub fn steps(self, v: f32) -> f32 {
        let t = v * self.inv;
        // Comparisons and selects, not f32::max/min (whose NaN rules cost
        // extra instructions): a NaN is dealt with by the last select.
        let t = if t > self.low { t } else { self.low };
        let t = if t < self.high { t } else { self.high };
        let rounded = (t + MAGIC) - MAGIC;
        if v.is_nan() {
            0.0
        } else {
            rounded
        }
    }
}

/// [`fake_quant_in_place`]'s loop, compiled once for the build's baseline
/// and once for AVX2.
#[inline(always)]
fn fake_quant(x: &mut [f32], grid: Grid) {
    let r = grid.rounding();
    for v in x {
        *v = r.apply(*v);
    }
}
