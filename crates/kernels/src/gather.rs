//! Strided copies out of an input row: the patches of a strided
//! convolution (crates/tract-ops' `patch_conv` and `gemm_conv`) and the odd
//! and even columns of the stride-2 depthwise kernel ([`crate::depthwise`]).

/// `dst[i] = src[i × stride]` for every `i` of `dst`, which `src` covers;
/// with AVX2 (checked at run time), stride 2 takes 8 values from each 16.
pub fn gather(dst: &mut [f32], src: &[f32], stride: usize) {
    if stride == 1 {
        return dst.copy_from_slice(&src[..dst.len()]);
    }
    #[cfg(target_arch = "x86_64")]
    let done = if stride == 2 && crate::cpu::has(crate::cpu::Feature::Avx2) {
        // SAFETY: the CPU has AVX2, checked just above.
        unsafe { evens_avx2(dst, src) }
    } else {
        0
    };
    #[cfg(not(target_arch = "x86_64"))]
    let done = 0;
    for (d, s) in dst[done..].iter_mut().zip(src[done * stride..].iter().step_by(stride)) {
        *d = *s;
    }
}

/// The whole vectors of [`gather`] at stride 2: returns how many values of
/// `dst` it wrote, each 8 from two loads of 8 that lie inside `src`.
///
/// # Safety
/// The CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn evens_avx2(dst: &mut [f32], src: &[f32]) -> usize {
    use std::arch::x86_64::*;
    let vectors = (dst.len() / 8).min(src.len() / 16);
    for (i, out) in dst.chunks_exact_mut(8).take(vectors).enumerate() {
        let p = src.as_ptr().add(16 * i);
        let (a, b) = (_mm256_loadu_ps(p), _mm256_loadu_ps(p.add(8)));
        // Lanes 0–3 of a and of b, then 4–7 of each: the even values of
        // each pair of 128-bit halves sit at 0 and 2 of every half.
        let (lo, hi) = (_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
        _mm256_storeu_ps(out.as_mut_ptr(), _mm256_shuffle_ps(lo, hi, 0x88));
    }
    vectors * 8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gathering_takes_every_stride_th_value_whatever_the_length() {
        let src: Vec<f32> = (0..70).map(|i| i as f32).collect();
        for (stride, n) in [(2, 35), (2, 34), (2, 17), (2, 3), (1, 70), (3, 24)] {
            let mut dst = vec![f32::NAN; n];
            gather(&mut dst, &src[..(n - 1) * stride + 1], stride);
            let want: Vec<f32> = (0..n).map(|i| (i * stride) as f32).collect();
            assert_eq!(dst, want, "stride {stride}, {n} values");
        }
    }
}
