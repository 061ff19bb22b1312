use super::{sample_replicate, to_u8, RgbImage};

/// A 2×3 affine map `[a b c; d e f]`: (x, y) → (a·x + b·y + c, d·x + e·y + f).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Affine(pub [f32; 6]);

impl Affine {
    pub const IDENTITY: Affine = Affine([1.0, 0.0, 0.0, 0.0, 1.0, 0.0]);

    pub fn apply(&self, x: f32, y: f32) -> (f32, f32) {
        let m = &self.0;
        (m[0] * x + m[1] * y + m[2], m[3] * x + m[4] * y + m[5])
    }

    /// The inverse map; `None` when the map is singular (e.g. all landmarks on
    /// one point).
    pub fn invert(&self) -> Option<Affine> {
        let [a, b, c, d, e, f] = self.0.map(f64::from);
        let det = a * e - b * d;
        if det.abs() < 1e-12 || !det.is_finite() {
            return None;
        }
        let (ia, ib, id, ie) = (e / det, -b / det, -d / det, a / det);
        let m = [ia, ib, -(ia * c + ib * f), id, ie, -(id * c + ie * f)];
        Some(Affine(m.map(|v| v as f32)))
    }
}

/// Least-squares similarity transform (rotation, uniform scale, translation;
/// no shear, no reflection) taking `src` points onto `dst` points: Umeyama's
/// estimate, which in 2-D has this closed form. `None` when the source points
/// coincide.
pub fn estimate_similarity(src: &[[f32; 2]], dst: &[[f32; 2]]) -> Option<Affine> {
    let n = src.len().min(dst.len());
    if n < 2 {
        return None;
    }
    let mean = |p: &[[f32; 2]]| {
        let (sx, sy) = p[..n].iter().fold((0f64, 0f64), |(x, y), q| (x + q[0] as f64, y + q[1] as f64));
        (sx / n as f64, sy / n as f64)
    };
    let (msx, msy) = mean(src);
    let (mdx, mdy) = mean(dst);
    let (mut num_a, mut num_b, mut den) = (0f64, 0f64, 0f64);
    for (s, d) in src[..n].iter().zip(&dst[..n]) {
        let (sx, sy) = (s[0] as f64 - msx, s[1] as f64 - msy);
        let (dx, dy) = (d[0] as f64 - mdx, d[1] as f64 - mdy);
        num_a += sx * dx + sy * dy;
        num_b += sx * dy - sy * dx;
        den += sx * sx + sy * sy;
    }
    if den < 1e-9 {
        return None;
    }
    let (a, b) = (num_a / den, num_b / den);
    let tx = mdx - (a * msx - b * msy);
    let ty = mdy - (b * msx + a * msy);
    Some(Affine([a, -b, tx, b, a, ty].map(|v| v as f32)))
}

/// Warps `src` into `dst` with `m` mapping source pixels to destination
/// pixels (OpenCV's `warpAffine` convention), bilinear with edge replication.
pub fn warp_affine_into(src: &RgbImage, m: &Affine, dst: &mut RgbImage) {
    let inv = m.invert().unwrap_or(Affine::IDENTITY);
    let w = dst.width() as usize;
    for (y, row) in dst.chunks_exact_mut(w * 3).enumerate() {
        let (mut sx, mut sy) = inv.apply(0.0, y as f32);
        for px in row.chunks_exact_mut(3) {
            let v = sample_replicate(src, sx, sy);
            px[0] = to_u8(v[0]);
            px[1] = to_u8(v[1]);
            px[2] = to_u8(v[2]);
            sx += inv.0[0];
            sy += inv.0[3];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn similarity_recovers_a_known_transform() {
        let truth = Affine([0.8, -0.6, 10.0, 0.6, 0.8, -5.0]);
        let src = [[1.0, 2.0], [30.0, 4.0], [15.0, 20.0], [5.0, 33.0], [28.0, 31.0]];
        let dst: Vec<[f32; 2]> = src.iter().map(|p| truth.apply(p[0], p[1]).into()).collect();
        let got = estimate_similarity(&src, &dst).unwrap();
        for (g, t) in got.0.iter().zip(truth.0) {
            assert!((g - t).abs() < 1e-4, "{got:?} vs {truth:?}");
        }
    }

    #[test]
    fn coincident_points_have_no_similarity() {
        assert!(estimate_similarity(&[[1.0, 1.0]; 5], &[[0.0, 0.0]; 5]).is_none());
    }

    #[test]
    fn invert_round_trips() {
        let m = Affine([1.2, 0.3, 4.0, -0.3, 1.2, 7.0]);
        let inv = m.invert().unwrap();
        let (x, y) = m.apply(3.0, -2.0);
        let (bx, by) = inv.apply(x, y);
        assert!((bx - 3.0).abs() < 1e-4 && (by + 2.0).abs() < 1e-4);
    }

    #[test]
    fn identity_warp_copies_pixels() {
        let src = RgbImage::from_fn(9, 7, |x, y| image::Rgb([x as u8 * 20, y as u8 * 30, 7]));
        let mut dst = RgbImage::new(9, 7);
        warp_affine_into(&src, &Affine::IDENTITY, &mut dst);
        assert_eq!(src, dst);
    }
}
