//! Colour transfer in CIE Lab (D65): Reinhard et al.'s mean and standard
//! deviation matching ("RCT"), weighted by a mask, so a swapped face takes
//! on the scene's colour and lighting.

use super::RgbImage;

fn to_linear(c: f32) -> f32 {
    if c <= 0.04045 {
        c / 12.92
    } else {
        ((c + 0.055) / 1.055).powf(2.4)
    }
}

fn from_linear(c: f32) -> f32 {
    if c <= 0.003_130_8 {
        c * 12.92
    } else {
        1.055 * c.powf(1.0 / 2.4) - 0.055
    }
}

const WHITE: [f32; 3] = [0.950_47, 1.0, 1.088_83];

fn f(t: f32) -> f32 {
    if t > 0.008_856 {
        t.cbrt()
    } else {
        7.787 * t + 16.0 / 116.0
    }
}

fn f_inv(t: f32) -> f32 {
    if t > 0.206_893 {
        t * t * t
    } else {
        (t - 16.0 / 116.0) / 7.787
    }
}

/// sRGB 0..255 → L (0..100), a, b.
pub fn rgb_to_lab(p: [u8; 3]) -> [f32; 3] {
    let [r, g, b] = p.map(|v| to_linear(v as f32 / 255.0));
    let x = (0.412_456_4 * r + 0.357_576_1 * g + 0.180_437_5 * b) / WHITE[0];
    let y = (0.212_672_9 * r + 0.715_152_2 * g + 0.072_175 * b) / WHITE[1];
    let z = (0.019_333_9 * r + 0.119_192 * g + 0.950_304_1 * b) / WHITE[2];
    let (fx, fy, fz) = (f(x), f(y), f(z));
    [116.0 * fy - 16.0, 500.0 * (fx - fy), 200.0 * (fy - fz)]
}

/// L, a, b → sRGB 0..255, clamped.
pub fn lab_to_rgb([l, a, b]: [f32; 3]) -> [u8; 3] {
    let fy = (l + 16.0) / 116.0;
    let (x, y, z) = (f_inv(fy + a / 500.0) * WHITE[0], f_inv(fy) * WHITE[1], f_inv(fy - b / 200.0) * WHITE[2]);
    let r = 3.240_454_2 * x - 1.537_138_5 * y - 0.498_531_4 * z;
    let g = -0.969_266 * x + 1.876_010_8 * y + 0.041_556 * z;
    let bl = 0.055_643_4 * x - 0.204_025_9 * y + 1.057_225_2 * z;
    [r, g, bl].map(|c| (from_linear(c.clamp(0.0, 1.0)) * 255.0 + 0.5).clamp(0.0, 255.0) as u8)
}

/// Mean and standard deviation of L, a and b over `img`, each pixel
/// weighted by `mask` (one weight per pixel).
pub fn lab_stats(img: &RgbImage, mask: &[f32]) -> ([f32; 3], [f32; 3]) {
    let (mut sum, mut sq, mut w) = ([0.0f64; 3], [0.0f64; 3], 0.0f64);
    for (p, &m) in img.pixels().zip(mask) {
        if m <= 0.0 {
            continue;
        }
        let lab = rgb_to_lab(p.0);
        for c in 0..3 {
            sum[c] += m as f64 * lab[c] as f64;
            sq[c] += m as f64 * (lab[c] as f64).powi(2);
        }
        w += m as f64;
    }
    let w = w.max(1e-9);
    let mean = sum.map(|s| s / w);
    let std = [0, 1, 2].map(|c| (sq[c] / w - mean[c] * mean[c]).max(0.0).sqrt() as f32);
    (mean.map(|m| m as f32), std)
}

/// Moves `src`'s Lab mean and spread under `mask` to `target`'s under the
/// same mask (the two images are aligned crops of the same size).
pub fn reinhard_transfer(src: &mut RgbImage, target: &RgbImage, mask: &[f32]) {
    let (ms, ss) = lab_stats(src, mask);
    let (mt, st) = lab_stats(target, mask);
    let gain = [0, 1, 2].map(|c| if ss[c] > 1e-3 { st[c] / ss[c] } else { 1.0 });
    for p in src.pixels_mut() {
        let lab = rgb_to_lab(p.0);
        let moved = [0, 1, 2].map(|c| (lab[c] - ms[c]) * gain[c] + mt[c]);
        p.0 = lab_to_rgb(moved);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lab_round_trips_and_matches_reference_values() {
        let white = rgb_to_lab([255, 255, 255]);
        assert!((white[0] - 100.0).abs() < 0.05 && white[1].abs() < 0.05 && white[2].abs() < 0.05, "{white:?}");
        let red = rgb_to_lab([255, 0, 0]);
        assert!((red[0] - 53.24).abs() < 0.1 && (red[1] - 80.09).abs() < 0.2 && (red[2] - 67.20).abs() < 0.2);
        for p in [[12, 200, 99], [250, 3, 140], [128, 128, 128]] {
            let back = lab_to_rgb(rgb_to_lab(p));
            assert!(p.iter().zip(back).all(|(a, b)| (*a as i32 - b as i32).abs() <= 1), "{p:?} -> {back:?}");
        }
    }

    #[test]
    fn the_transfer_moves_mean_and_spread_to_the_target() {
        let src = RgbImage::from_fn(16, 16, |x, _| image::Rgb([200, (x * 8) as u8, 40]));
        let target = RgbImage::from_fn(16, 16, |_, y| image::Rgb([90, 110, (100 + y * 4) as u8]));
        let mask = vec![1.0; 256];
        let mut out = src.clone();
        reinhard_transfer(&mut out, &target, &mask);
        let ((mo, so), (mt, st)) = (lab_stats(&out, &mask), lab_stats(&target, &mask));
        for c in 0..3 {
            assert!((mo[c] - mt[c]).abs() < 1.5, "channel {c}: mean {} vs {}", mo[c], mt[c]);
            assert!((so[c] - st[c]).abs() < 1.5, "channel {c}: std {} vs {}", so[c], st[c]);
        }
    }
}
