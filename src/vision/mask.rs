use super::{sample_replicate, Affine, RgbImage};

/// FaceFusion's box mask for a `w`×`h` crop: ones, with each edge zeroed over
/// max(blur_amount/2, 1) px or its padding (percent: top, right, bottom,
/// left), then Gaussian-blurred with σ = blur_amount/4, where
/// blur_amount = ⌊w · 0.5 · blur⌋. Computed once per crop size, not per frame.
pub fn box_mask(w: usize, h: usize, blur: f32, padding: [f32; 4]) -> Vec<f32> {
    let blur_amount = (w as f32 * 0.5 * blur) as usize;
    let blur_area = (blur_amount / 2).max(1);
    let edge = |pad: f32, extent: usize| blur_area.max((extent as f32 * pad / 100.0) as usize).min(extent);
    let (top, right, bottom, left) =
        (edge(padding[0], h), edge(padding[1], w), edge(padding[2], h), edge(padding[3], w));
    let mut mask = vec![0f32; w * h];
    for y in top..h.saturating_sub(bottom) {
        for x in left..w.saturating_sub(right) {
            mask[y * w + x] = 1.0;
        }
    }
    if blur_amount > 0 {
        gaussian_blur(&mut mask, w, h, blur_amount as f32 * 0.25);
    }
    mask
}

/// Separable Gaussian blur in place, matching OpenCV's `GaussianBlur` on f32
/// with ksize (0, 0): kernel size round(8σ + 1) | 1, reflect-101 borders.
pub fn gaussian_blur(data: &mut [f32], w: usize, h: usize, sigma: f32) {
    if w == 0 || h == 0 || sigma <= 0.0 {
        return;
    }
    let k = ((sigma * 8.0 + 1.0).round() as usize) | 1;
    let half = (k / 2) as isize;
    let mut kernel: Vec<f32> =
        (0..k).map(|i| (-((i as f32 - half as f32).powi(2)) / (2.0 * sigma * sigma)).exp()).collect();
    let sum: f32 = kernel.iter().sum();
    kernel.iter_mut().for_each(|v| *v /= sum);
    let reflect = |i: isize, n: usize| -> usize {
        let n = n as isize;
        if n == 1 {
            return 0;
        }
        let mut i = i;
        while i < 0 || i >= n {
            i = if i < 0 { -i } else { 2 * n - 2 - i };
        }
        i as usize
    };
    let mut tmp = vec![0f32; w * h];
    for y in 0..h {
        let row = &data[y * w..(y + 1) * w];
        for x in 0..w {
            tmp[y * w + x] =
                kernel.iter().enumerate().map(|(i, kv)| kv * row[reflect(x as isize + i as isize - half, w)]).sum();
        }
    }
    for y in 0..h {
        for x in 0..w {
            data[y * w + x] = kernel
                .iter()
                .enumerate()
                .map(|(i, kv)| kv * tmp[reflect(y as isize + i as isize - half, h) * w + x])
                .sum();
        }
    }
}

/// The frame rectangle `[x1, y1, x2)`×`[y1, y2)` that a `cw`×`ch` crop covers
/// once mapped back through the inverse of `to_crop` (frame → crop): the
/// integer bounding box of its corners, clipped to the frame. `None` when it
/// is empty or the map is singular.
pub fn paste_region(to_crop: &Affine, cw: u32, ch: u32, fw: u32, fh: u32) -> Option<[u32; 4]> {
    let inv = to_crop.invert()?;
    let corners = [(0.0, 0.0), (cw as f32, 0.0), (cw as f32, ch as f32), (0.0, ch as f32)];
    let pts = corners.map(|(x, y)| inv.apply(x, y));
    let min_x = pts.iter().map(|p| p.0).fold(f32::INFINITY, f32::min).floor();
    let min_y = pts.iter().map(|p| p.1).fold(f32::INFINITY, f32::min).floor();
    let max_x = pts.iter().map(|p| p.0).fold(f32::NEG_INFINITY, f32::max).ceil();
    let max_y = pts.iter().map(|p| p.1).fold(f32::NEG_INFINITY, f32::max).ceil();
    let clip = |v: f32, hi: u32| {
        if v.is_finite() {
            v.clamp(0.0, hi as f32) as u32
        } else {
            0
        }
    };
    let r = [clip(min_x, fw), clip(min_y, fh), clip(max_x, fw), clip(max_y, fh)];
    (r[2] > r[0] && r[3] > r[1]).then_some(r)
}

/// Bilinear sample of a single-channel mask with a zero border.
#[inline]
fn sample_zero(mask: &[f32], w: usize, h: usize, x: f32, y: f32) -> f32 {
    let (fx, fy) = (x.floor(), y.floor());
    let (ax, ay) = (x - fx, y - fy);
    let (x0, y0) = (fx as isize, fy as isize);
    let at = |xx: isize, yy: isize| {
        if xx < 0 || yy < 0 || xx >= w as isize || yy >= h as isize {
            0.0
        } else {
            mask[yy as usize * w + xx as usize]
        }
    };
    let top = at(x0, y0) * (1.0 - ax) + at(x0 + 1, y0) * ax;
    let bottom = at(x0, y0 + 1) * (1.0 - ax) + at(x0 + 1, y0 + 1) * ax;
    top * (1.0 - ay) + bottom * ay
}

/// The offsets along a row, within `0..=len`, where the sample point lies
/// strictly inside (-1, cw) × (-1, ch): each axis is (start, step per
/// pixel, limit). Outside the span the mask is zero, so the frame stays
/// bit-identical and nothing is sampled; `None` when the span is empty.
fn inside_span(axes: [(f32, f32, f32); 2], len: f32) -> Option<(f32, f32)> {
    let (mut lo, mut hi) = (0f32, len);
    for (start, step, limit) in axes {
        if step.abs() < 1e-12 {
            if start <= -1.0 || start >= limit {
                return None;
            }
        } else {
            let (a, b) = ((-1.0 - start) / step, (limit - start) / step);
            lo = lo.max(a.min(b));
            hi = hi.min(a.max(b));
        }
    }
    (hi >= lo).then_some((lo, hi))
}

/// Pastes `crop` back into `frame`, where `to_crop` maps frame pixels to crop
/// pixels (the alignment transform). Only the paste region is visited; each
/// pixel becomes frame·(1 − m) + crop·m with m = mask · blend. Pixels whose
/// weight is zero are left bit-identical.
pub fn paste_back(frame: &mut RgbImage, crop: &RgbImage, mask: &[f32], to_crop: &Affine, blend: f32) {
    let (cw, ch) = (crop.width(), crop.height());
    let Some([x1, y1, x2, y2]) = paste_region(to_crop, cw, ch, frame.width(), frame.height()) else {
        return;
    };
    let blend = blend.clamp(0.0, 1.0);
    let stride = frame.width() as usize * 3;
    let buf: &mut [u8] = frame;
    let (cwu, chu) = (cw as usize, ch as usize);
    let (fw, fh) = (cw as f32, ch as f32);
    let craw = crop.as_raw();
    let cstride = cwu * 3;
    let [dx_x, _, _, dy_x, _, _] = to_crop.0;
    for y in y1..y2 {
        let (cx0, cy0) = to_crop.apply(x1 as f32, y as f32);
        let Some((lo, hi)) = inside_span([(cx0, dx_x, fw), (cy0, dy_x, fh)], (x2 - x1) as f32) else {
            continue;
        };
        let (xa, xb) = (x1 + (lo.floor().max(0.0) as u32), (x1 + hi.ceil() as u32 + 1).min(x2));
        let row = &mut buf[y as usize * stride..(y as usize + 1) * stride];
        let (mut cx, mut cy) = to_crop.apply(xa as f32, y as f32);
        for x in xa..xb {
            let (fx, fy) = (cx.floor(), cy.floor());
            let (x0, y0) = (fx as isize, fy as isize);
            let px = &mut row[x as usize * 3..x as usize * 3 + 3];
            if x0 >= 0 && y0 >= 0 && (x0 as usize) + 1 < cwu && (y0 as usize) + 1 < chu {
                // Interior: mask and crop share the taps and the weights.
                let (ax, ay) = (cx - fx, cy - fy);
                let (w00, w01, w10, w11) = ((1.0 - ax) * (1.0 - ay), ax * (1.0 - ay), (1.0 - ax) * ay, ax * ay);
                let mi = y0 as usize * cwu + x0 as usize;
                let m = (mask[mi] * w00 + mask[mi + 1] * w01 + mask[mi + cwu] * w10 + mask[mi + cwu + 1] * w11)
                    .clamp(0.0, 1.0)
                    * blend;
                if m > 0.0 {
                    let ci = y0 as usize * cstride + x0 as usize * 3;
                    let (t, b) = (&craw[ci..ci + 6], &craw[ci + cstride..ci + cstride + 6]);
                    for c in 0..3 {
                        let v = t[c] as f32 * w00 + t[c + 3] as f32 * w01 + b[c] as f32 * w10 + b[c + 3] as f32 * w11;
                        px[c] = super::to_u8(px[c] as f32 * (1.0 - m) + v * m);
                    }
                }
            } else if cx > -1.0 && cy > -1.0 && cx < fw && cy < fh {
                let m = sample_zero(mask, cwu, chu, cx, cy).clamp(0.0, 1.0) * blend;
                if m > 0.0 {
                    let v = sample_replicate(crop, cx, cy);
                    for c in 0..3 {
                        px[c] = super::to_u8(px[c] as f32 * (1.0 - m) + v[c] * m);
                    }
                }
            }
            cx += dx_x;
            cy += dy_x;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn box_mask_matches_facefusion_with_opencv_blur() {
        // Reference values from FaceFusion's create_box_mask (cv2.GaussianBlur)
        // on a 128 crop with blur 0.3 and no padding.
        let m = box_mask(128, 128, 0.3, [0.0; 4]);
        let at = |y: usize, x: usize| m[y * 128 + x];
        for (got, want) in [
            (at(0, 0), 0.005_324_7),
            (at(0, 64), 0.072_970_7),
            (at(9, 64), 0.542_087_6),
            (at(20, 64), 0.992_376_2),
            (at(64, 64), 1.0),
        ] {
            assert!((got - want).abs() < 1e-4, "{got} vs {want}");
        }
        assert!(m.iter().all(|v| (0.0..=1.0001).contains(v)));
    }

    #[test]
    fn gaussian_blur_preserves_a_constant() {
        let mut d = vec![0.5f32; 20 * 10];
        gaussian_blur(&mut d, 20, 10, 2.0);
        assert!(d.iter().all(|v| (v - 0.5).abs() < 1e-5));
    }

    #[test]
    fn paste_region_is_clipped_to_the_frame() {
        let to_crop = Affine([1.0, 0.0, 10.0, 0.0, 1.0, 10.0]);
        assert_eq!(paste_region(&to_crop, 64, 64, 40, 40), Some([0, 0, 40, 40]));
        assert_eq!(paste_region(&to_crop, 64, 64, 100, 100), Some([0, 0, 54, 54]));
    }

    #[test]
    fn paste_with_zero_blend_changes_nothing() {
        let mut frame = RgbImage::from_pixel(50, 50, image::Rgb([9, 9, 9]));
        let before = frame.clone();
        let crop = RgbImage::from_pixel(16, 16, image::Rgb([200, 0, 0]));
        paste_back(&mut frame, &crop, &vec![1.0; 256], &Affine([1.0, 0.0, -5.0, 0.0, 1.0, -5.0]), 0.0);
        assert_eq!(frame, before);
    }
}
