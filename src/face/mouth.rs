//! The mouth mask: the person's own mouth is kept under the swapped face,
//! so speech stays natural. The outer lip polygon (68-point landmarks
//! 48–59) is grown and feathered in the swapper's crop and cut out of the
//! paste mask; inside the polygon itself the frame is left as it was.

use crate::vision::gaussian_blur;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Deserialize, Serialize)]
pub struct MouthSettings {
    pub enabled: bool,
    /// How much larger than the lip line the kept region is (0.15 = 15 %).
    pub grow: f32,
    /// Feather of its edge, as a fraction of the mouth's width.
    pub feather: f32,
}

impl Default for MouthSettings {
    fn default() -> Self {
        MouthSettings { enabled: false, grow: 0.15, feather: 0.1 }
    }
}

impl MouthSettings {
    pub fn is_valid(&self) -> bool {
        (0.0..=2.0).contains(&self.grow) && (0.0..=1.0).contains(&self.feather)
    }
}

/// Whether (x, y) lies inside `poly` (even-odd rule).
pub fn inside(poly: &[[f32; 2]], x: f32, y: f32) -> bool {
    let mut odd = false;
    let mut j = poly.len() - 1;
    for i in 0..poly.len() {
        let (a, b) = (poly[i], poly[j]);
        if (a[1] > y) != (b[1] > y) && x < (b[0] - a[0]) * (y - a[1]) / (b[1] - a[1]) + a[0] {
            odd = !odd;
        }
        j = i;
    }
    odd
}

fn fill(poly: &[[f32; 2]], w: usize, h: usize) -> Vec<f32> {
    let mut out = vec![0.0; w * h];
    for y in 0..h {
        for x in 0..w {
            if inside(poly, x as f32, y as f32) {
                out[y * w + x] = 1.0;
            }
        }
    }
    out
}

/// `mask` (a `w`×`h` crop's paste mask) with the mouth at `lips` (crop
/// coordinates) cut out: zero inside the lip line, feathered beyond it up
/// to the grown polygon.
pub fn cut_mouth(mask: &[f32], w: usize, h: usize, lips: &[[f32; 2]; 12], s: &MouthSettings) -> Vec<f32> {
    let c = lips.iter().fold([0.0, 0.0], |a, p| [a[0] + p[0] / 12.0, a[1] + p[1] / 12.0]);
    let grown: Vec<[f32; 2]> =
        lips.iter().map(|p| [c[0] + (p[0] - c[0]) * (1.0 + s.grow), c[1] + (p[1] - c[1]) * (1.0 + s.grow)]).collect();
    let width = lips.iter().map(|p| p[0]).fold(f32::MIN, f32::max) - lips.iter().map(|p| p[0]).fold(f32::MAX, f32::min);
    let mut keep = fill(&grown, w, h);
    gaussian_blur(&mut keep, w, h, (s.feather * width).max(0.0));
    let hard = fill(lips, w, h);
    mask.iter().zip(keep.iter().zip(&hard)).map(|(m, (k, h))| m * (1.0 - k.max(*h).min(1.0))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lips() -> [[f32; 2]; 12] {
        // An ellipse 40 wide and 16 tall around (64, 90).
        std::array::from_fn(|i| {
            let a = i as f32 / 12.0 * std::f32::consts::TAU;
            [64.0 + 20.0 * a.cos(), 90.0 + 8.0 * a.sin()]
        })
    }

    #[test]
    fn inside_the_lip_line_nothing_is_pasted_and_far_from_it_everything_is() {
        let mask = vec![1.0; 128 * 128];
        let cut = cut_mouth(&mask, 128, 128, &lips(), &MouthSettings { enabled: true, ..MouthSettings::default() });
        assert_eq!(cut[90 * 128 + 64], 0.0, "the mouth's centre is kept");
        assert_eq!(cut[90 * 128 + 80], 0.0, "inside the lip line is kept");
        assert!(cut[90 * 128 + 88] > 0.0 && cut[90 * 128 + 88] < 1.0, "the grown edge is feathered");
        assert_eq!(cut[40 * 128 + 64], 1.0, "the eyes are pasted");
    }
}
