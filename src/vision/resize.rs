use super::{sample_replicate, to_u8, RgbImage};

/// Bilinear resize of `src` to `w`×`h`, written into the top-left corner of
/// `dst` (which may be larger: this is the detector letterbox). Uses OpenCV's
/// `INTER_LINEAR` pixel-centre convention so detector inputs match the
/// reference implementation.
pub fn resize_into(src: &RgbImage, dst: &mut RgbImage, w: u32, h: u32) {
    let (w, h) = (w.min(dst.width()) as usize, h.min(dst.height()) as usize);
    let sx = src.width() as f32 / w.max(1) as f32;
    let sy = src.height() as f32 / h.max(1) as f32;
    let stride = dst.width() as usize * 3;
    let buf: &mut [u8] = dst;
    for y in 0..h {
        let fy = (y as f32 + 0.5) * sy - 0.5;
        let row = &mut buf[y * stride..y * stride + w * 3];
        for (x, px) in row.chunks_exact_mut(3).enumerate() {
            let v = sample_replicate(src, (x as f32 + 0.5) * sx - 0.5, fy);
            px[0] = to_u8(v[0]);
            px[1] = to_u8(v[1]);
            px[2] = to_u8(v[2]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn halving_averages_pixel_pairs() {
        let src = RgbImage::from_fn(4, 2, |x, _| image::Rgb([x as u8 * 10, 0, 0]));
        let mut dst = RgbImage::new(4, 4);
        resize_into(&src, &mut dst, 2, 1);
        assert_eq!(dst.get_pixel(0, 0)[0], 5);
        assert_eq!(dst.get_pixel(1, 0)[0], 25);
        assert_eq!(dst.get_pixel(2, 0)[0], 0, "outside the letterbox stays untouched");
    }
}
