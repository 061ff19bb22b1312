//! The tests of [`super::DotPointwise`]: each output integer is the exact
//! sum rounded once, and the VNNI rows are the plain ones to the byte.

use super::*;

/// The input's grid: a u8 grid with zero point 7 and steps of 1/16.
const IN: Grid = Grid { scale: 0.0625, zero_point: 7.0, lo: 0.0, hi: 255.0 };
/// The output's grid: zero point 120 and steps of 0.05.
const OUT: Grid = Grid { scale: 0.05, zero_point: 120.0, lo: 0.0, hi: 255.0 };

/// Weights of integers (each channel reaching ±127 once) times a scale per
/// channel, their integers, scales and biases.
fn weights(ci: usize, co: usize) -> (Vec<f32>, Vec<i8>, Vec<f32>, Vec<f32>) {
    let ints: Vec<i8> = (0..co * ci)
        .map(|i| if i % ci == i / ci % ci { -127 } else { ((i * 37 + 11) % 255) as i16 as i8 / 2 })
        .collect();
    let scales: Vec<f32> = (0..co).map(|c| 0.002 + c as f32 * 1e-4).collect();
    let floats = ints.iter().enumerate().map(|(i, &q)| f32::from(q) * scales[i / ci]).collect();
    let bias = (0..co).map(|c| c as f32 * 0.0625 - 0.75).collect();
    (floats, ints, scales, bias)
}

/// `ci` planes of `plane` values on [`IN`] (its integers -7..=248, and two
/// values past its ends).
fn input(ci: usize, plane: usize) -> Vec<f32> {
    (0..ci * plane).map(|i| (((i * 131 + 17) % 263) as f32 - 10.0) * IN.scale).collect()
}

#[test]
fn every_integer_is_the_exact_sum_rounded_once_and_the_vnni_row_is_the_plain_one() {
    for (ci, co) in [(4, 8), (16, 16), (64, 64)] {
        let (floats, ints, scales, bias) = weights(ci, co);
        for relu in [false, true] {
            let op = DotPointwise::new(&floats, &bias, (ci, co), (IN, OUT), relu).expect("integer weights");
            for w in (1..=45).chain([80, 160]) {
                let (plane, at, stride, offset) = (w + 9, 3, w + 32, 5);
                let x = input(ci, plane);
                let mut got = vec![0xa5u8; co * stride];
                op.row((&x, plane, at), w, (&mut got, stride, offset), &mut vec![]);
                let mut plain = got.clone();
                op.row_plain((&x, plane, at), w, (&mut plain, stride, offset));
                assert_eq!(got, plain, "{ci}→{co}, width {w}, relu {relu}: VNNI against plain");
                for (c, row) in got.chunks_exact(stride).enumerate() {
                    assert!(row[..offset].iter().chain(&row[offset + w..]).all(|&b| b == 0xa5), "a byte past the row");
                    for (p, &u) in row[offset..offset + w].iter().enumerate() {
                        let value = |k: usize| {
                            let q = (f64::from(x[k * plane + at + p]) / f64::from(IN.scale)).round().clamp(-7.0, 248.0);
                            q * f64::from(IN.scale)
                        };
                        let products = (0..ci).map(|k| f64::from(ints[c * ci + k]) * f64::from(scales[c]) * value(k));
                        let exact = products.sum::<f64>() + f64::from(bias[c]);
                        let exact = if relu { exact.max(0.0) } else { exact };
                        let steps = exact / f64::from(OUT.scale);
                        let want = (steps.round().clamp(-120.0, 135.0) + 120.0) as u8;
                        let tie = (steps - steps.floor() - 0.5).abs() < 1e-4;
                        assert!(u == want || tie, "{ci}→{co}, width {w}, channel {c}, pixel {p}: {u} against {want}");
                    }
                }
            }
        }
    }
}

#[test]
fn weights_that_are_not_integers_or_channels_that_do_not_fit_are_refused() {
    let (floats, _, _, bias) = weights(16, 16);
    let (ci, co) = (16, 16);
    let skewed: Vec<f32> = floats.iter().enumerate().map(|(i, v)| v + (i as f32 * 0.37).sin() * 1e-3).collect();
    assert!(DotPointwise::new(&skewed, &bias, (ci, co), (IN, OUT), false).is_none());
    let (floats, _, _, bias) = weights(6, 8);
    assert!(DotPointwise::new(&floats, &bias, (6, 8), (IN, OUT), false).is_none(), "6 input channels");
    let (floats, _, _, bias) = weights(8, 12);
    assert!(DotPointwise::new(&floats, &bias, (8, 12), (IN, OUT), false).is_none(), "12 output channels");
}
