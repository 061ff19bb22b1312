//! The tiles of [`crate::gemm`]'s product: `kc` taps of a panel of
//! [`MR`] output channels by a panel of [`NR`] pixels, on AVX2 and FMA, two
//! such tiles at once on AVX-512, or in plain loops that sum in the same
//! order. Every output is one FMA chain over its taps from zero (or from the
//! sums so far), then the bias, so each kernel gives the same bits.

/// Output channels per tile, one broadcast weight each (tuning:
/// crates/kernels/README.md).
pub(super) const MR: usize = 6;
/// Pixels per tile: two AVX2 vectors (tuning: crates/kernels/README.md).
pub const NR: usize = 16;

/// What a call of the kernel does besides summing its taps.
#[derive(Debug, Clone, Copy)]
pub(super) struct Step {
    /// The sums start from zero, not from the partial sums.
    pub first: bool,
    /// The bias is added (and the ReLU applied) to the sums, which go to
    /// the output rather than to the partial sums.
    pub last: bool,
    pub relu: bool,
}

/// One call of the kernel: `kc` taps of weights `a` (`kc` × [`MR`]) and
/// pixels `b` (`kc` × [`NR`]), the sums so far in `from` (null: none, or
/// [`MR`] rows of [`NR`]), written to the [`NR`] values of each row of
/// `to`; `from` may be `to`'s tile itself.
#[derive(Clone, Copy)]
pub(super) struct Operands {
    pub kc: usize,
    pub a: *const f32,
    pub b: *const f32,
    pub from: *const f32,
    pub to: [*mut f32; MR],
}

/// The kernel for this CPU: AVX2 and FMA where it has them, plain loops
/// (summed in the same order) elsewhere.
///
/// # Safety
/// The pointers hold what [`Operands`] says, and `bias` [`MR`] values.
pub(super) unsafe fn run_kernel(op: Operands, bias: &[f32], step: Step) {
    #[cfg(target_arch = "x86_64")]
    if crate::pointwise::kernel_available() {
        return kernel_avx2(op, bias, step);
    }
    let Operands { kc, a, b, from, to } = op;
    for (r, row) in to.iter().enumerate() {
        for i in 0..NR {
            let mut sum = if from.is_null() { 0.0 } else { *from.add(r * NR + i) };
            for t in 0..kc {
                sum = (*a.add(t * MR + r)).mul_add(*b.add(t * NR + i), sum);
            }
            *row.add(i) = match step {
                Step { last: false, .. } => sum,
                Step { relu: true, .. } => (sum + bias[r]).max(0.0),
                _ => sum + bias[r],
            };
        }
    }
}

/// Whether the two-tile kernel has AVX-512 to run on ([`crate::gemm`] tiles two
/// pixel panels at once only then).
pub(super) fn wide_kernel_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        crate::cpu::has(crate::cpu::Feature::Avx512F)
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Two tiles of the same weights: `op`, and the pixels `b1` into `to1`
/// (its sums so far a tile after `op.from`). With AVX-512, six rows of two
/// 16-lane vectors; otherwise the tiles one after the other. Each sum is
/// the same FMA chain either way, so the outputs are the same to the bit.
///
/// # Safety
/// As [`run_kernel`], for both tiles.
pub(super) unsafe fn run_pair(op: Operands, (b1, to1): (*const f32, [*mut f32; MR]), bias: &[f32], step: Step) {
    #[cfg(target_arch = "x86_64")]
    if wide_kernel_available() {
        return kernel_avx512(op, (b1, to1), bias, step);
    }
    run_kernel(op, bias, step);
    let from = if op.from.is_null() { op.from } else { op.from.add(MR * NR) };
    run_kernel(Operands { b: b1, from, to: to1, ..op }, bias, step);
}

/// [`run_pair`] with AVX-512: twelve accumulators, fed per tap by two pixel
/// loads and six broadcast weights.
///
/// # Safety
/// The CPU has AVX-512F, and the operands are as [`run_pair`] says.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn kernel_avx512(op: Operands, (b1, to1): (*const f32, [*mut f32; MR]), bias: &[f32], step: Step) {
    let Operands { kc, a, b, from, to } = op;
    use std::arch::x86_64::*;
    let mut acc = [[_mm512_setzero_ps(); 2]; MR];
    if !from.is_null() {
        for (r, lane) in acc.iter_mut().enumerate() {
            *lane = [_mm512_loadu_ps(from.add(r * NR)), _mm512_loadu_ps(from.add(MR * NR + r * NR))];
        }
    }
    for t in 0..kc {
        let (x0, x1) = (_mm512_loadu_ps(b.add(t * NR)), _mm512_loadu_ps(b1.add(t * NR)));
        for (r, lane) in acc.iter_mut().enumerate() {
            let w = _mm512_set1_ps(*a.add(t * MR + r));
            lane[0] = _mm512_fmadd_ps(w, x0, lane[0]);
            lane[1] = _mm512_fmadd_ps(w, x1, lane[1]);
        }
    }
    for (r, (lane, b)) in acc.iter().zip(bias).enumerate() {
        for (v, row) in lane.iter().zip([to[r], to1[r]]) {
            let v = if step.last { _mm512_add_ps(*v, _mm512_set1_ps(*b)) } else { *v };
            let v = if step.last && step.relu { _mm512_max_ps(v, _mm512_setzero_ps()) } else { v };
            _mm512_storeu_ps(row, v);
        }
    }
}

/// The tile with AVX2 and FMA: six rows of two vectors.
///
/// # Safety
/// The CPU has AVX2 and FMA, and the operands are as [`run_kernel`] says.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn kernel_avx2(op: Operands, bias: &[f32], step: Step) {
    let Operands { kc, a, b, from, to } = op;
    use std::arch::x86_64::*;
    let mut acc = [[_mm256_setzero_ps(); 2]; MR];
    if !from.is_null() {
        for (r, lane) in acc.iter_mut().enumerate() {
            *lane = [_mm256_loadu_ps(from.add(r * NR)), _mm256_loadu_ps(from.add(r * NR + 8))];
        }
    }
    for t in 0..kc {
        let (x0, x1) = (_mm256_loadu_ps(b.add(t * NR)), _mm256_loadu_ps(b.add(t * NR + 8)));
        for (r, lane) in acc.iter_mut().enumerate() {
            let w = _mm256_broadcast_ss(&*a.add(t * MR + r));
            lane[0] = _mm256_fmadd_ps(w, x0, lane[0]);
            lane[1] = _mm256_fmadd_ps(w, x1, lane[1]);
        }
    }
    for ((lane, row), b) in acc.iter().zip(&to).zip(bias) {
        for (h, v) in lane.iter().enumerate() {
            let v = if step.last { _mm256_add_ps(*v, _mm256_set1_ps(*b)) } else { *v };
            let v = if step.last && step.relu { _mm256_max_ps(v, _mm256_setzero_ps()) } else { v };
            _mm256_storeu_ps(row.add(8 * h), v);
        }
    }
}
