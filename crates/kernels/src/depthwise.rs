//! A 3×3 depthwise convolution of one plane, some rows at a time, padded with
//! zeros by one pixel on every side, stride 1 ([`depthwise_rows`]) or 2
//! ([`depthwise_rows_s2`]), with its bias and an optional ReLU: the kernel of
//! crates/tract-ops' `depthwise::Depthwise` op and the second half of its
//! `pw_dw::PointwiseDepthwise`. With AVX2 (checked at run time, with FMA, as
//! the pointwise half needs) it computes four output rows 8 pixels at a time,
//! the edges too; rows narrower than 9 pixels, and every row elsewhere, go
//! through a scalar loop. Both add the products in tract's order, so that the
//! outputs are tract's own bit for bit.

use crate::gather::gather;

/// The output rows `out` from the input rows `rows`: the row above the
/// first output row, those at each output row, and the row below the last
/// (a row of zeros past the plane's edge), each at least as long as the
/// output rows, with the kernel `k` (row by row) and `bias`; negative
/// values become 0 where `relu` is set.
pub fn depthwise_rows(rows: &[&[f32]], k: &[f32; 9], bias: f32, relu: bool, out: &mut [&mut [f32]]) {
    let Some(w) = out.first().map(|o| o.len()) else { return };
    assert!(
        rows.len() == out.len() + 2 && rows.iter().all(|r| r.len() >= w) && out.iter().all(|o| o.len() == w),
        "depthwise: one input row more on each side than output rows, all as long"
    );
    for (i, group) in out.chunks_mut(ROWS).enumerate() {
        let inputs = &rows[ROWS * i..ROWS * i + group.len() + 2];
        #[cfg(target_arch = "x86_64")]
        if crate::pointwise::kernel_available() && w >= 9 {
            // SAFETY: the CPU has AVX2, checked just above; every row holds
            // at least `w` ≥ 9 values and `inputs` two more rows than `group`.
            unsafe {
                match group.len() {
                    4 => rows_avx2::<4>(inputs, k, bias, relu, group),
                    3 => rows_avx2::<3>(inputs, k, bias, relu, group),
                    2 => rows_avx2::<2>(inputs, k, bias, relu, group),
                    _ => rows_avx2::<1>(inputs, k, bias, relu, group),
                }
            }
            continue;
        }
        for (r, out) in group.iter_mut().enumerate() {
            for (x, o) in out.iter_mut().enumerate() {
                *o = pixel(&inputs[r..r + 3], w, k, bias, relu, x);
            }
        }
    }
}

/// Output rows computed together (tuning: crates/kernels/README.md).
const ROWS: usize = 4;

/// Output pixel `x` from its three input rows of `w` values, in
/// [`rows_avx2`]'s order.
fn pixel(rows: &[&[f32]], w: usize, k: &[f32; 9], bias: f32, relu: bool, x: usize) -> f32 {
    let mut sum = bias;
    for (dy, row) in rows.iter().enumerate() {
        for dx in 0..3 {
            // Input column x + dx - 1, zero outside the plane.
            if (1..=w).contains(&(x + dx)) {
                sum += k[3 * dy + dx] * row[x + dx - 1];
            }
        }
    }
    if relu {
        sum.max(0.0)
    } else {
        sum
    }
}

/// `R` (at most [`ROWS`]) output rows, every pixel, in vectors of 8. The
/// first and last 8 read a column past the plane's edge: that load leaves
/// the lane out (zero, and no memory read there). Each output row's sums
/// form one chain of dependent adds; `R` of them side by side keep the
/// adder busy.
///
/// Each output is its bias plus each tap's product, added in the kernel's
/// row-major order with a rounding after every multiply and add, as tract's
/// own depthwise convolution does on x86_64: the same bits, which an INT8
/// graph's rounding after the block needs to give tract's own outputs (a
/// tap past the edge adds a product of zero, which changes no sum but the
/// sign of a zero one). On AVX2 a multiply and an add issue as fast as one
/// FMA.
///
/// # Safety
/// The CPU has AVX2; `rows` holds `R + 2` rows and `out` `R` rows, the
/// output rows all as long, at least 9 values, and the input rows no
/// shorter.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn rows_avx2<const R: usize>(rows: &[&[f32]], k: &[f32; 9], bias: f32, relu: bool, out: &mut [&mut [f32]]) {
    use std::arch::x86_64::*;
    let w = out[0].len();
    let t: [__m256; 9] = std::array::from_fn(|i| _mm256_set1_ps(k[i]));
    let inputs = std::array::from_fn(|r| rows.get(r).map_or(std::ptr::null(), |row| row.as_ptr()));
    let mut outputs = [std::ptr::null_mut::<f32>(); ROWS];
    for (p, row) in outputs.iter_mut().zip(out.iter_mut()).take(R) {
        *p = row.as_mut_ptr();
    }
    let io = (inputs, outputs);
    eight::<R, true, false>(io, 0, &t, (bias, relu));
    eight::<R, false, true>(io, w - 8, &t, (bias, relu));
    // The columns between, where every tap lies inside the row (x ≥ 1 and
    // x + 8 < w), the last vector over pixels the one before may have written.
    let inner = if w > 16 { 8..w - 16 } else { 0..0 };
    for x in inner.step_by(8).chain((w > 16).then(|| w - 16)) {
        eight::<R, false, false>(io, x, &t, (bias, relu));
    }
}

/// Outputs `x` to `x + 7` of `R` rows from input rows `r` to `r + 2` of
/// each: columns `x - 1` to `x + 8`, without column -1 where `LEFT` is set
/// and without column `x + 8` where `RIGHT` is.
///
/// # Safety
/// The CPU has AVX2; each of the `R + 2` inputs holds the columns read,
/// and each output row `x + 8` values.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn eight<const R: usize, const LEFT: bool, const RIGHT: bool>(
    (inputs, outputs): ([*const f32; ROWS + 2], [*mut f32; ROWS]),
    x: usize,
    t: &[std::arch::x86_64::__m256; 9],
    (bias, relu): (f32, bool),
) {
    use std::arch::x86_64::*;
    // Lanes 1 to 7, and 0 to 6.
    let (first, last) =
        (_mm256_setr_epi32(0, -1, -1, -1, -1, -1, -1, -1), _mm256_setr_epi32(-1, -1, -1, -1, -1, -1, -1, 0));
    let mut y = [_mm256_set1_ps(bias); R];
    for dy in 0..3 {
        for dx in 0..3 {
            let tap = t[3 * dy + dx];
            for (r, y) in y.iter_mut().enumerate() {
                // Column x - 1 + dx: before the row at x = 0, dx = 0, where
                // the masked load reads nothing of lane 0.
                let p = inputs[r + dy].wrapping_add(x + dx).wrapping_sub(1);
                let v = match dx {
                    0 if LEFT => _mm256_maskload_ps(p, first),
                    2 if RIGHT => _mm256_maskload_ps(p, last),
                    _ => _mm256_loadu_ps(p),
                };
                *y = _mm256_add_ps(*y, _mm256_mul_ps(v, tap));
            }
        }
    }
    for (r, y) in y.iter().enumerate() {
        let y = if relu { _mm256_max_ps(*y, _mm256_setzero_ps()) } else { *y };
        _mm256_storeu_ps(outputs[r].add(x), y);
    }
}

/// The output rows `out` of a 3×3 depthwise convolution at stride 2,
/// padded by one, from `2 × out.len() + 1` input rows of `w` values (output
/// row y reads rows 2y - 1 to 2y + 1 of the plane: the first given is the
/// one above the first output row's, a row of zeros past the plane's
/// edge), each output row (w + 1) / 2 long. `scratch` takes the input rows
/// of [`ROWS`] output rows at a time, each split into its odd and even
/// columns, so that the taps of 8 neighbouring outputs lie side by side;
/// split a group at a time, they stay in the L1 cache (split whole, the
/// 320-pixel rows of SCRFD's first stride-2 plane outgrew the L2 cache).
/// Sums in tract's order, as [`depthwise_rows`].
pub fn depthwise_rows_s2(
    rows: &[&[f32]],
    k: &[f32; 9],
    (bias, relu): (f32, bool),
    out: &mut [&mut [f32]],
    scratch: &mut Vec<f32>,
) {
    let Some(ow) = out.first().map(|o| o.len()) else { return };
    let w = rows.first().map_or(0, |r| r.len());
    assert!(
        rows.len() == 2 * out.len() + 1
            && w > 0
            && ow == w.div_ceil(2)
            && rows.iter().all(|r| r.len() == w)
            && out.iter().all(|o| o.len() == ow),
        "depthwise at stride 2: two input rows an output row and one more, outputs half as long, rounded up"
    );
    // Each row split into its odd and even columns ([`split_columns`]).
    let line = 2 * ow + 1;
    // Every value of a line is written before it is read: no zeroing of
    // the whole scratch, which a fused block calls for a few rows at a time.
    if scratch.len() < (2 * ROWS + 1) * line {
        scratch.resize((2 * ROWS + 1) * line, 0.0);
    }
    for (i, group) in out.chunks_mut(ROWS).enumerate() {
        let lines = &mut scratch[..(2 * group.len() + 1) * line];
        for (row, split) in rows[2 * ROWS * i..].iter().zip(lines.chunks_exact_mut(line)) {
            split_columns(row, split, ow);
        }
        let lines = &*lines;
        #[cfg(target_arch = "x86_64")]
        let done = if crate::pointwise::kernel_available() {
            // SAFETY: the CPU has AVX2, checked just above; `lines` holds
            // 2R + 1 lines of 2 ow + 1 values and `group` R rows of ow.
            unsafe {
                match group.len() {
                    4 => rows_s2_avx2::<4>(lines, k, bias, relu, group),
                    3 => rows_s2_avx2::<3>(lines, k, bias, relu, group),
                    2 => rows_s2_avx2::<2>(lines, k, bias, relu, group),
                    _ => rows_s2_avx2::<1>(lines, k, bias, relu, group),
                }
            }
        } else {
            0
        };
        #[cfg(not(target_arch = "x86_64"))]
        let done = 0;
        for (r, out) in group.iter_mut().enumerate() {
            for (x, o) in out.iter_mut().enumerate().skip(done) {
                *o = pixel_s2(&lines[2 * r * line..], ow, k, (bias, relu), x);
            }
        }
    }
}

/// Output pixel `x` of a row from the split lines of its three input rows
/// (the first of `lines`, each 2 ow + 1 values), in [`rows_s2_avx2`]'s order.
fn pixel_s2(lines: &[f32], ow: usize, k: &[f32; 9], (bias, relu): (f32, bool), x: usize) -> f32 {
    let mut sum = bias;
    for (taps, line) in k.chunks_exact(3).zip(lines.chunks_exact(2 * ow + 1)) {
        let (odd, even) = line.split_at(ow + 1);
        sum += taps[0] * odd[x];
        sum += taps[1] * even[x];
        sum += taps[2] * odd[x + 1];
    }
    if relu {
        sum.max(0.0)
    } else {
        sum
    }
}

/// Writes `row` (`w` values) into `split` (2 ow + 1 values) as
/// [`depthwise_rows_s2`] reads it: column 2x - 1 at x of the first ow + 1
/// (a zero first, and last when `w` is odd), column 2x at x of the ow
/// after. Every value is written, so `split` need not be zeroed.
fn split_columns(row: &[f32], split: &mut [f32], ow: usize) {
    let w = row.len();
    let (odd, even) = split.split_at_mut(ow + 1);
    gather(even, row, 2);
    gather(&mut odd[1..=w / 2], &row[1..], 2);
    odd[0] = 0.0;
    if w % 2 == 1 {
        odd[ow] = 0.0;
    }
}

/// `R` output rows of [`depthwise_rows_s2`] from their split lines, in
/// vectors of 8; returns how many values of each row it wrote (all of
/// them, or none in rows narrower than a vector).
///
/// # Safety
/// The CPU has AVX2; `lines` holds 2R + 1 lines of 2 ow + 1 values and
/// `out` R rows of ow.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn rows_s2_avx2<const R: usize>(
    lines: &[f32],
    k: &[f32; 9],
    bias: f32,
    relu: bool,
    out: &mut [&mut [f32]],
) -> usize {
    use std::arch::x86_64::*;
    let ow = out[0].len();
    let line = 2 * ow + 1;
    let t: [__m256; 9] = std::array::from_fn(|i| _mm256_set1_ps(k[i]));
    let zero = _mm256_setzero_ps();
    // The last vector over pixels the one before may have written.
    let last = (!ow.is_multiple_of(8) && ow > 8).then(|| ow - 8);
    for x in (0..ow / 8).map(|v| 8 * v).chain(last) {
        // R chains of dependent adds side by side, as in `rows_avx2`.
        let mut y = [_mm256_set1_ps(bias); R];
        for dy in 0..3 {
            for dx in 0..3 {
                let tap = t[3 * dy + dx];
                for (r, y) in y.iter_mut().enumerate() {
                    let odd = lines.as_ptr().add((2 * r + dy) * line + x);
                    // Column 2x - 1, 2x, 2x + 1: odd at x, even at x, odd at x + 1.
                    let v = match dx {
                        0 => odd,
                        1 => odd.add(ow + 1),
                        _ => odd.add(1),
                    };
                    *y = _mm256_add_ps(*y, _mm256_mul_ps(_mm256_loadu_ps(v), tap));
                }
            }
        }
        for (y, row) in y.iter().zip(out.iter_mut()) {
            let y = if relu { _mm256_max_ps(*y, zero) } else { *y };
            _mm256_storeu_ps(row.as_mut_ptr().add(x), y);
        }
    }
    if ow >= 8 {
        ow
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_output_is_the_bias_plus_its_zero_padded_3x3_neighbourhood() {
        // Widths through the scalar loop (5), both edge vectors alone (9,
        // 16), one vector between them (17, 20), two (27, the second over
        // the first's pixels); 7 rows: four together, then three.
        for w in [5, 9, 16, 17, 20, 27] {
            let plane: Vec<f32> = (0..7 * w).map(|i| ((i * 37 % 23) as f32 - 11.0) / 7.0).collect();
            let k = [0.5, -1.0, 0.25, 2.0, 1.0, -0.5, -0.75, 0.125, 1.5];
            let at = |y: isize, x: isize| {
                let inside = (0..7).contains(&y) && (0..w as isize).contains(&x);
                if inside {
                    plane[y as usize * w + x as usize]
                } else {
                    0.0
                }
            };
            let zeros = vec![0f32; w];
            let mut rows = vec![&zeros[..]];
            rows.extend(plane.chunks_exact(w));
            rows.push(&zeros[..]);
            for relu in [false, true] {
                let mut out = vec![f32::NAN; 7 * w];
                let mut dst: Vec<&mut [f32]> = out.chunks_exact_mut(w).collect();
                depthwise_rows(&rows, &k, 0.3, relu, &mut dst);
                for (i, got) in out.iter().enumerate() {
                    let (y, x) = ((i / w) as isize, (i % w) as isize);
                    let taps =
                        k.iter().enumerate().map(|(t, kv)| kv * at(y + t as isize / 3 - 1, x + t as isize % 3 - 1));
                    let want = 0.3 + taps.sum::<f32>();
                    let want = if relu { want.max(0.0) } else { want };
                    assert!((got - want).abs() < 1e-5, "width {w} row {y} col {x} relu {relu}: {got} for {want}");
                }
            }
        }
    }

    #[test]
    fn a_one_pixel_wide_plane_uses_only_the_centre_column() {
        let (a, b, c) = ([1.0f32], [2.0f32], [3.0f32]);
        let k = [9.0, 1.0, 9.0, 9.0, 10.0, 9.0, 9.0, 100.0, 9.0];
        let mut out = [0f32];
        depthwise_rows(&[&a, &b, &c], &k, 0.5, false, &mut [&mut out[..]]);
        assert_eq!(out[0], 0.5 + 1.0 + 20.0 + 300.0);
    }
}
