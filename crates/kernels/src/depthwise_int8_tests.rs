//! The tests of [`super::DotDepthwise`]: exact sums rounded once, the VNNI
//! rows against the plain ones, the conversion to the grid's integers.

use super::*;

/// A u8 grid with zero point 7 (pad 7) and steps of 1/16.
const GRID: Grid = Grid { scale: 0.0625, zero_point: 7.0, lo: 0.0, hi: 255.0 };

/// Kernels of integers times a scale per channel (one reaching only
/// ±90, one all zeros), their integers and scales, and biases.
struct Case {
    kernels: Vec<[f32; 9]>,
    bias: Vec<f32>,
    ints: Vec<[i8; 9]>,
    scales: Vec<f32>,
}

fn case(channels: usize) -> Case {
    let mut ints = vec![];
    let mut kernels = vec![];
    for c in 0..channels {
        let scale = 0.003 + c as f32 * 2e-4;
        let k: [i8; 9] = std::array::from_fn(|t| match c % 3 {
            0 if t == 4 => -127,
            0 => (((c * 9 + t) * 37 % 255) as i16 - 127) as i8,
            1 if t == 0 => 90,
            1 => (((c * 9 + t) * 23 % 181) as i16 - 90) as i8,
            _ => 0,
        });
        kernels.push(k.map(|v| v as f32 * scale));
        ints.push(k);
    }
    let scales = (0..channels).map(|c| 0.003 + c as f32 * 2e-4).collect();
    let bias = (0..channels).map(|c| c as f32 * 0.125 - 0.5).collect();
    Case { kernels, bias, ints, scales }
}

/// Output (y, x) of channel `c` of `case` over `plane` (integers, the pad
/// 7 outside), in f64: the exact sum of the dequantised products.
fn exact(case: &Case, c: usize, plane: &[Vec<u8>], (h, w): (usize, usize), (y, x): (usize, usize)) -> f64 {
    let value = |yy: isize, xx: isize| {
        let inside = (0..h as isize).contains(&yy) && (0..w as isize).contains(&xx);
        let u = if inside { plane[yy as usize][xx as usize] } else { 7 };
        (f64::from(u) - 7.0) * f64::from(GRID.scale)
    };
    let tap = |t: usize| {
        let (dy, dx) = (t as isize / 3 - 1, t as isize % 3 - 1);
        f64::from(case.ints[c][t]) * f64::from(case.scales[c]) * value(y as isize + dy, x as isize + dx)
    };
    (0..9).map(tap).sum::<f64>() + f64::from(case.bias[c])
}

/// `got` (rounded to `grid`, if any) against the exact value `want`: the
/// exact value rounded once, or its nearest step of the grid.
fn assert_rounded_once(got: f32, want: f64, grid: Option<Grid>, at: &str) {
    match grid {
        None => assert!((f64::from(got) - want).abs() <= 1e-6 * (1.0 + want.abs()), "{at}: {got} against {want}"),
        Some(g) => {
            let step = (f64::from(got) / f64::from(g.scale)).round();
            assert!((-100.0..=155.0).contains(&step), "{at}: {got} is off the grid");
            let nearest = (want / f64::from(g.scale)).clamp(-100.0, 155.0);
            assert!((step - nearest).abs() <= 0.5 + 1e-4, "{at}: {got} against {want}");
        }
    }
}

#[test]
fn every_output_is_the_exact_sum_rounded_once_and_the_vnni_row_is_the_plain_one() {
    let case = case(6);
    let op = DotDepthwise::new(&case.kernels, &case.bias, GRID).expect("integer kernels found again");
    let out_grid = Grid { scale: 0.1, zero_point: 100.0, lo: 0.0, hi: 255.0 };
    for (h, w) in [(1, 1), (3, 9), (5, 16), (4, 17), (2, 45)] {
        // Rows of integers with their margins, the pad row above and below.
        let mut plane = vec![vec![op.pad(); w + MARGIN]; h];
        for (y, row) in plane.iter_mut().enumerate() {
            for (x, u) in row[..w].iter_mut().enumerate() {
                *u = ((y * 71 + x * 29) % 256) as u8;
            }
        }
        let pads = vec![op.pad(); w + MARGIN];
        let rows: Vec<&[u8]> =
            std::iter::once(&pads[..]).chain(plane.iter().map(|r| &r[..])).chain([&pads[..]]).collect();
        for (c, relu, grid) in
            [(0, false, None), (1, true, None), (2, false, None), (3, false, Some(out_grid)), (4, true, Some(out_grid))]
        {
            let mut out = vec![vec![f32::NAN; w]; h];
            let mut refs: Vec<&mut [f32]> = out.iter_mut().map(|r| &mut r[..]).collect();
            op.rows(c, &rows, (relu, grid), &mut refs);
            for (y, got) in out.iter().enumerate() {
                let mut plain = vec![f32::NAN; w];
                row_plain(&rows[y..y + 3], op.pad(), op.channel(c, relu, grid), &mut plain);
                for (x, (&got, &plain)) in got.iter().zip(&plain).enumerate() {
                    let at = format!("channel {c} at {y},{x} of {h}×{w}");
                    assert_eq!(got.to_bits(), plain.to_bits(), "{at}: {got} against the plain row's {plain}");
                    let want = exact(&case, c, &plane, (h, w), (y, x));
                    assert_rounded_once(got, if relu { want.max(0.0) } else { want }, grid, &at);
                }
            }
        }
    }
}

#[test]
fn the_integers_round_half_to_even_clamp_and_take_nan_as_zero() {
    let Case { kernels, bias, .. } = case(1);
    let op = DotDepthwise::new(&kernels, &bias, GRID).unwrap();
    // 167 values (two runs of 64, two of 16, then 7 through a mask): ties
    // both ways, the ends of the grid, beyond, NaN; and every shorter
    // length, whose last values take the mask. Nothing past them changes.
    let mut floats: Vec<f32> = (-10..150).map(|k| (k as f32 + 0.5) * 0.0625).collect();
    floats.extend([-1.0, 0.0, 248.0 * 0.0625, 249.0 * 0.0625, 1e9, -1e9, f32::NAN]);
    let want: Vec<u8> = floats
        .iter()
        .map(|&v| if v.is_nan() { 7 } else { ((v / 0.0625).round_ties_even() + 7.0).clamp(0.0, 255.0) as u8 })
        .collect();
    for n in (1..=floats.len()).rev() {
        let mut got = vec![0xa5u8; n + 20];
        op.to_integers(&floats[floats.len() - n..], &mut got);
        assert_eq!(got[..n], want[want.len() - n..], "{n} values");
        assert!(got[n..].iter().all(|&b| b == 0xa5), "{n} values: a byte past them was written");
    }
}

#[test]
fn kernels_that_are_not_integers_are_refused() {
    let kernels = vec![std::array::from_fn(|t| (t as f32 * 0.37).sin()); 2];
    assert!(DotDepthwise::new(&kernels, &[0.0, 0.0], GRID).is_none());
}
