//! The tests of [`super::PointwiseDepthwise`]: the block against its
//! steps, and its integer halves against its f32 ones.

use super::super::max_pool::max_pool_2x2;
use super::*;
use fusiond_kernels::test_values as values;
use tract_linalg::multithread::{multithread_tract_scope, Executor};

/// `flat` (9 values a channel) as one kernel a channel.
fn kernels(flat: &[f32]) -> Vec<[f32; 9]> {
    flat.chunks_exact(9).map(|k| std::array::from_fn(|i| k[i])).collect()
}

/// The three steps one after the other, in f64, as plain loops, at
/// stride 1 (the caller takes every other row and column for stride 2).
fn reference(x: &[f32], op: &PointwiseDepthwise, pw: (&[f32], &[f32]), h: usize, w: usize) -> Vec<f32> {
    let (ci, co) = op.pw.channels();
    let hw = h * w;
    let mid: Vec<f64> = (0..co * hw)
        .map(|i| {
            let (o, p) = (i / hw, i % hw);
            let v = pw.1[o] as f64 + (0..ci).map(|k| pw.0[o * ci + k] as f64 * x[k * hw + p] as f64).sum::<f64>();
            if op.pw.relu() {
                v.max(0.0)
            } else {
                v
            }
        })
        .collect();
    let at = |c: usize, y: isize, x: isize| {
        let inside = (0..h as isize).contains(&y) && (0..w as isize).contains(&x);
        if inside {
            mid[c * hw + y as usize * w + x as usize]
        } else {
            0.0
        }
    };
    (0..co * hw)
        .map(|i| {
            let (c, y, x) = (i / hw, (i % hw / w) as isize, (i % w) as isize);
            let taps = (0..9).map(|t| op.dw[c][t] as f64 * at(c, y + t as isize / 3 - 1, x + t as isize % 3 - 1));
            let v = op.dw_bias[c] as f64 + taps.sum::<f64>();
            (if op.relu { v.max(0.0) } else { v }) as f32
        })
        .collect()
}

/// The block's output for `x` with `threads` threads.
fn run(op: &PointwiseDepthwise, x: &[f32], (h, w): (usize, usize), threads: usize) -> Vec<f32> {
    let (oh, ow) = op.out_size(h, w);
    let mut y = vec![f32::NAN; op.pw.channels().1 * oh * ow];
    multithread_tract_scope(Executor::multithread(threads), || op.run(x, &mut y, h, w));
    assert!(y.iter().all(|v| v.is_finite()), "an output left unwritten");
    y
}

#[test]
fn the_fused_block_equals_its_steps_whatever_the_rows_and_threads() {
    // Small maps (one step, odd sides), one pixel, and 16 × 300 (65536
    // / 4800 - 2 = 11 rows a step, 10 when pooled: the rows kept from
    // one step to the next).
    // At stride 2, pointwise rows kept from one step to the next: 16
    // channels × 300 hold 65536 / 4800 = 13 rows, 6 block rows a step.
    let strided = [(false, false, 2), (true, false, 2)];
    for (ci, co, h, w) in [(3, 5, 7, 9), (4, 8, 1, 1), (2, 3, 40, 2), (3, 16, 40, 300), (2, 16, 41, 300)] {
        let unstrided = [(false, false), (true, false), (false, true), (true, true)].map(|(r, p)| (r, p, 1));
        for (relu, pool, stride) in unstrided.into_iter().chain(strided) {
            let (pw_w, pw_b) = (values(co * ci, 1), values(co, 2));
            // The ReLU on both halves, or on neither (SCRFD's block has both).
            let pw = Packed::new(&pw_w, &pw_b, co, ci);
            let pw = if relu { pw.with_relu() } else { pw };
            let (dw, dw_bias) = (Arc::new(kernels(&values(co * 9, 3))), Arc::new(values(co, 4)));
            let op = PointwiseDepthwise {
                pw,
                mid_grid: None,
                dw,
                dw_bias,
                stride,
                relu,
                out_grid: None,
                pool,
                int8: None,
                int8_pw: None,
            };
            let x = values(ci * h * w, 5);
            let mut want = reference(&x, &op, (&pw_w, &pw_b), h, w);
            if pool {
                let mut pooled = vec![0f32; co * (h / 2) * (w / 2)];
                max_pool_2x2(&want, &mut pooled, h, w);
                want = pooled;
            }
            if stride == 2 {
                let at = |i: usize| (i / w % h).is_multiple_of(2) && (i % w).is_multiple_of(2);
                want = want.iter().enumerate().filter(|(i, _)| at(*i)).map(|(_, v)| *v).collect();
            }
            for threads in [1, 3] {
                let y = run(&op, &x, (h, w), threads);
                let worst = y.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
                let case =
                    format!("{ci}→{co} at {h}×{w}, stride {stride}, relu {relu}, pool {pool}, {threads} threads");
                assert!(worst < 1e-4, "{case}: off by {worst}");
            }
        }
    }
}

/// An INT8 block (both grids, integer kernels, its input on a grid) with
/// its depthwise half as integers, both halves as integers, and as f32:
/// an output a step of the output grid apart at most, where a sum lies
/// within the f32 roundings of a tie, and nearly all the same.
#[test]
fn the_integer_halves_give_the_f32_blocks_outputs_but_near_ties() {
    let input = Grid { scale: 0.01, zero_point: 100.0, lo: 0.0, hi: 255.0 };
    let mid = Grid { scale: 0.02, zero_point: 0.0, lo: 0.0, hi: 255.0 };
    let out = Grid { scale: 0.05, zero_point: 3.0, lo: 0.0, hi: 255.0 };
    let (ci, co) = (8, 16);
    let integers = |n: usize, per: usize, seed: u32, scale: f32| -> Vec<f32> {
        let ints = values(n, seed);
        ints.iter().enumerate().map(|(i, v)| (v * 127.0).round() * (scale + (i / per) as f32 * 3e-4)).collect()
    };
    let dw: Vec<[f32; 9]> = integers(co * 9, 9, 3, 0.004).chunks_exact(9).map(|k| k.try_into().unwrap()).collect();
    let (pw_weights, pw_bias) = (integers(co * ci, ci, 1, 0.002), values(co, 2));
    let pw = Packed::new(&pw_weights, &pw_bias, co, ci);
    // One step; and 16 × 300, 13 rows held (11 block rows a step, 10
    // pooled), the rows kept from one step to the next.
    for (h, w) in [(23, 37), (41, 300)] {
        let mut x = values(ci * h * w, 5);
        fake_quant_in_place(&mut x, input);
        for (relu, pool) in [(false, false), (true, false), (false, true)] {
            let int8 = DotDepthwise::new(&dw, &values(co, 4), mid).map(Arc::new);
            let int8_pw = DotPointwise::new(&pw_weights, &pw_bias, (ci, co), (input, mid), false).map(Arc::new);
            assert!(int8.is_some() && int8_pw.is_some(), "integer kernels found again");
            let (dw, dw_bias) = (Arc::new(dw.clone()), Arc::new(values(co, 4)));
            let (mid_grid, out_grid) = (Some(mid), Some(out));
            let both = PointwiseDepthwise {
                pw: pw.clone(),
                mid_grid,
                dw,
                dw_bias,
                stride: 1,
                relu,
                out_grid,
                pool,
                int8,
                int8_pw,
            };
            let (dw_only, f32_op) = (
                PointwiseDepthwise { int8_pw: None, ..both.clone() },
                PointwiseDepthwise { int8: None, int8_pw: None, ..both.clone() },
            );
            for threads in [1, 3] {
                let want = run(&f32_op, &x, (h, w), threads);
                for (op, halves) in [(&dw_only, "depthwise half"), (&both, "both halves")] {
                    let got = run(op, &x, (h, w), threads);
                    let apart = got.iter().zip(&want).filter(|(a, b)| a != b).count();
                    let worst = got.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
                    let case = format!("{halves} as integers, {h}×{w}, relu {relu}, pool {pool}, {threads} threads");
                    assert!(worst <= out.scale * 1.001, "{case}: off by {worst}");
                    assert!(apart * 1000 <= got.len(), "{case}: {apart} of {} apart", got.len());
                }
            }
        }
    }
}
