use super::*;
use fusiond_kernels::test_values as values;
use tract_linalg::multithread::{multithread_tract_scope, Executor};

/// The convolution as plain loops over every output and tap, in f64.
fn reference_conv(x: &[f32], w: &[f32], b: &[f32], g: Geometry, co: usize, relu: bool) -> Vec<f32> {
    let ((h, wd), (oh, ow), (kh, kw), (sy, sx), (bt, bl)) = (g.input, g.output, g.kernel, g.stride, g.before);
    let mut y = vec![0f32; co * oh * ow];
    for (i, out) in y.iter_mut().enumerate() {
        let (o, oy, ox) = (i / (oh * ow), i / ow % oh, i % ow);
        let mut sum = b[o] as f64;
        for (c, dy, dx) in (0..g.ci).flat_map(|c| (0..kh).flat_map(move |dy| (0..kw).map(move |dx| (c, dy, dx)))) {
            let (iy, ix) = ((oy * sy + dy) as isize - bt as isize, (ox * sx + dx) as isize - bl as isize);
            if (0..h as isize).contains(&iy) && (0..wd as isize).contains(&ix) {
                let tap = w[((o * g.ci + c) * kh + dy) * kw + dx] as f64;
                sum += tap * x[(c * h + iy as usize) * wd + ix as usize] as f64;
            }
        }
        *out = if relu { sum.max(0.0) as f32 } else { sum as f32 };
    }
    y
}

type Case = (usize, usize, (usize, usize), (usize, usize), (usize, usize), (usize, usize), (usize, usize));

/// Runs each case (ci, co, input, kernel, stride, padding before and
/// after) with and without the ReLU, on 1 and 3 threads, through the
/// kernel that `kernel(weights, bias, co, taps)` makes, against
/// [`reference_conv`].
fn check(cases: &[Case], kernel: impl Fn(&[f32], &[f32], usize, usize) -> Kernel) {
    for &(ci, co, (h, wd), (kh, kw), (sy, sx), (bt, bl), (at, al)) in cases {
        let output = ((h + bt + at - kh) / sy + 1, (wd + bl + al - kw) / sx + 1);
        let g = Geometry { ci, input: (h, wd), output, kernel: (kh, kw), stride: (sy, sx), before: (bt, bl) };
        let (w, b, x) = (values(co * ci * kh * kw, 1), values(co, 2), values(ci * h * wd, 3));
        for relu in [false, true] {
            let op = PatchConv {
                geometry: g,
                kernel: kernel(&w, &b, co, ci * kh * kw),
                relu,
                out_grid: None,
                in_grid: None,
            };
            let want = reference_conv(&x, &w, &b, g, co, relu);
            for threads in [1, 3] {
                let mut y = vec![f32::NAN; co * output.0 * output.1];
                multithread_tract_scope(Executor::multithread(threads), || op.run(&x, &mut y));
                assert!(y.iter().all(|v| v.is_finite()), "{g:?}: an output left unwritten");
                let worst = y.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
                assert!(worst < 1e-4, "{g:?}, relu {relu}, {threads} threads: off by {worst}");
            }
        }
    }
}

#[test]
fn every_output_is_its_bias_plus_the_taps_under_it_at_any_stride_and_padding() {
    // The detectors' first layer on a small picture (stride 2, odd and
    // even sizes), stride 1, a 1×3 kernel without padding, and a map
    // wide enough for several rows a step to differ from one.
    let cases = [
        (3, 16, (13, 18), (3, 3), (2, 2), (1, 1), (1, 1)),
        (3, 5, (9, 7), (3, 3), (1, 1), (1, 1), (1, 1)),
        (2, 4, (6, 11), (1, 3), (1, 2), (0, 0), (0, 0)),
        (3, 8, (80, 200), (3, 3), (2, 2), (1, 1), (1, 1)),
    ];
    check(&cases, |w, b, co, taps| Kernel::Patches(Packed::new(w, b, co, taps)));
}

#[test]
fn the_blocked_product_gives_every_output_whatever_the_stride_and_padding() {
    // The swapper's 3×3 at stride 1 and 2 on small maps whose rows are
    // not whole panels, its 7×7, a 1×1 over many channels, a padding
    // that reaches past the last tap, and more taps than one block.
    let cases = [
        (40, 13, (9, 7), (3, 3), (1, 1), (1, 1), (1, 1)),
        (8, 7, (12, 11), (3, 3), (2, 2), (1, 1), (1, 1)),
        (3, 5, (20, 19), (7, 7), (1, 1), (3, 3), (3, 3)),
        (100, 9, (5, 6), (1, 1), (1, 1), (0, 0), (0, 0)),
        (4, 6, (6, 6), (3, 3), (2, 2), (0, 0), (2, 2)),
        (64, 20, (10, 40), (3, 3), (1, 1), (1, 1), (1, 1)),
    ];
    check(&cases, |w, b, co, taps| {
        let w = w.to_vec();
        let packer = move || Panels::F32(fusiond_kernels::gemm::pack(&w, co, taps));
        Kernel::Gemm(GemmWeights::deferred(Box::new(packer), b, co, taps))
    });
}
