//! A PReLU with one slope per channel, in place, with an optional rounding
//! to an 8-bit grid before and after it.

use crate::quant::Grid;

/// `x` in place: each run of `inner` values shares one slope, the runs
/// cycling through `slope` (one run per channel per batch item); each value
/// is first rounded to `before` and last to `after` where they are given.
/// With AVX2 (checked at run time) eight values at a time.
pub fn prelu_in_place(x: &mut [f32], slope: &[f32], inner: usize, before: Option<Grid>, after: Option<Grid>) {
    if x.is_empty() || inner == 0 || slope.is_empty() {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if crate::cpu::has(crate::cpu::Feature::Avx2) {
        // SAFETY: the CPU has AVX2, checked just above.
        return unsafe { prelu_avx2(x, slope, inner, before, after) };
    }
    prelu_between(x, slope, inner, before, after)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn prelu_avx2(x: &mut [f32], slope: &[f32], inner: usize, before: Option<Grid>, after: Option<Grid>) {
    prelu_between(x, slope, inner, before, after)
}

/// [`prelu_in_place`]'s loops, one per combination of grids so that each
/// vectorises, compiled once for the build's baseline and once for AVX2.
#[inline(always)]
fn prelu_between(x: &mut [f32], slope: &[f32], inner: usize, before: Option<Grid>, after: Option<Grid>) {
    let same = |v: f32| v;
    match (before.map(Grid::rounding), after.map(Grid::rounding)) {
        (None, None) => prelu_runs(x, slope, inner, same, same),
        (Some(b), None) => prelu_runs(x, slope, inner, |v| b.apply(v), same),
        (None, Some(a)) => prelu_runs(x, slope, inner, same, |v| a.apply(v)),
        (Some(b), Some(a)) => prelu_runs(x, slope, inner, |v| b.apply(v), |v| a.apply(v)),
    }
}

#[inline(always)]
fn prelu_runs(x: &mut [f32], slope: &[f32], inner: usize, before: impl Fn(f32) -> f32, after: impl Fn(f32) -> f32) {
    for (run, chunk) in x.chunks_mut(inner).enumerate() {
        let s = slope[run % slope.len()];
        for v in chunk {
            let t = before(*v);
            // A select, not a branch: the loop vectorises.
            *v = after(if t < 0.0 { t * s } else { t });
        }
    }
}
