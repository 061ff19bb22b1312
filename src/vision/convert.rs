//! Camera pixel formats to packed RGB and back (RGB to YUYV for the V4L2
//! output and the fake cameras), BT.601 limited range (what UVC cameras send), written into a
//! caller-owned buffer: no allocation per frame.

use super::RgbImage;

#[inline]
fn yuv_to_rgb(y: u8, u: u8, v: u8) -> [u8; 3] {
    // Fixed point (x1024) of: R = 1.164(Y-16) + 1.596(V-128), etc.
    let c = (y as i32 - 16).max(0) * 1192;
    let (d, e) = (u as i32 - 128, v as i32 - 128);
    let clamp = |x: i32| ((x + 512) >> 10).clamp(0, 255) as u8;
    [clamp(c + 1634 * e), clamp(c - 401 * d - 832 * e), clamp(c + 2066 * d)]
}

/// Why a raw buffer could not be converted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{format} frame of {got} bytes, but {width}x{height} needs {want}")]
pub struct ConvertError {
    pub format: &'static str,
    pub width: u32,
    pub height: u32,
    pub got: usize,
    pub want: usize,
}

fn check(format: &'static str, src: &[u8], dst: &RgbImage, want: usize) -> Result<(), ConvertError> {
    let (width, height) = dst.dimensions();
    if src.len() < want || width % 2 != 0 {
        return Err(ConvertError { format, width, height, got: src.len(), want });
    }
    Ok(())
}

/// YUYV 4:2:2 (Y0 U Y1 V per pixel pair) into `dst`, which sets the size.
pub fn yuyv_to_rgb(src: &[u8], dst: &mut RgbImage) -> Result<(), ConvertError> {
    let want = dst.width() as usize * dst.height() as usize * 2;
    check("YUYV", src, dst, want)?;
    for (quad, out) in src[..want].chunks_exact(4).zip(dst.chunks_exact_mut(6)) {
        let [y0, u, y1, v] = [quad[0], quad[1], quad[2], quad[3]];
        out[..3].copy_from_slice(&yuv_to_rgb(y0, u, v));
        out[3..].copy_from_slice(&yuv_to_rgb(y1, u, v));
    }
    Ok(())
}

/// NV12 (full-size Y plane, then interleaved half-size UV) into `dst`.
pub fn nv12_to_rgb(src: &[u8], dst: &mut RgbImage) -> Result<(), ConvertError> {
    let (w, h) = (dst.width() as usize, dst.height() as usize);
    let want = w * h + w * h.div_ceil(2);
    check("NV12", src, dst, want)?;
    let (luma, chroma) = src.split_at(w * h);
    for (y, row) in dst.chunks_exact_mut(w * 3).enumerate() {
        let uv = &chroma[(y / 2) * w..(y / 2) * w + w];
        for (x, out) in row.chunks_exact_mut(3).enumerate() {
            let c = x & !1;
            out.copy_from_slice(&yuv_to_rgb(luma[y * w + x], uv[c], uv[c + 1]));
        }
    }
    Ok(())
}

/// Packed RGB to YUYV 4:2:2 (BT.601 limited range), the inverse of
/// [`yuyv_to_rgb`] up to chroma subsampling: what a UVC camera would send
/// for this picture. Used to emulate a camera in benchmarks and tests.
pub fn rgb_to_yuyv(src: &RgbImage) -> Vec<u8> {
    let mut out = Vec::new();
    rgb_to_yuyv_into(src, &mut out);
    out
}

/// [`rgb_to_yuyv`] into a caller-owned buffer (the V4L2 output reuses one),
/// in fixed point (x256) so that a 640x480 frame costs well under a
/// millisecond on the output's thread.
pub fn rgb_to_yuyv_into(src: &RgbImage, out: &mut Vec<u8>) {
    out.resize(src.width() as usize * src.height() as usize * 2, 0);
    let luma = |r: i32, g: i32, b: i32| ((66 * r + 129 * g + 25 * b + 128) >> 8) + 16;
    for (p, o) in src.chunks_exact(6).zip(out.chunks_exact_mut(4)) {
        let [r0, g0, b0, r1, g1, b1] = [p[0], p[1], p[2], p[3], p[4], p[5]].map(i32::from);
        // Chroma of the pair's mean colour: sums, so the shift is one more.
        let (r, g, b) = (r0 + r1, g0 + g1, b0 + b1);
        let u = ((-38 * r - 74 * g + 112 * b + 256) >> 9) + 128;
        let v = ((112 * r - 94 * g - 18 * b + 256) >> 9) + 128;
        o[0] = luma(r0, g0, b0).clamp(0, 255) as u8;
        o[1] = u.clamp(0, 255) as u8;
        o[2] = luma(r1, g1, b1).clamp(0, 255) as u8;
        o[3] = v.clamp(0, 255) as u8;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limited_range_black_white_and_grey_map_to_rgb() {
        assert_eq!(yuv_to_rgb(16, 128, 128), [0, 0, 0]);
        assert_eq!(yuv_to_rgb(235, 128, 128), [255, 255, 255]);
        assert_eq!(yuv_to_rgb(126, 128, 128), [128, 128, 128]);
    }

    #[test]
    fn yuyv_and_nv12_of_the_same_picture_agree() {
        // A 4x2 picture: left half red-ish chroma, right half blue-ish.
        let (y, u, v) = ([60u8, 90, 120, 150, 70, 100, 130, 160], [90u8, 160], [200u8, 100]);
        let mut yuyv = Vec::new();
        for row in 0..2 {
            for pair in 0..2 {
                yuyv.extend_from_slice(&[y[row * 4 + pair * 2], u[pair], y[row * 4 + pair * 2 + 1], v[pair]]);
            }
        }
        let mut nv12 = y.to_vec();
        nv12.extend_from_slice(&[u[0], v[0], u[1], v[1]]);
        let (mut a, mut b) = (RgbImage::new(4, 2), RgbImage::new(4, 2));
        yuyv_to_rgb(&yuyv, &mut a).unwrap();
        nv12_to_rgb(&nv12, &mut b).unwrap();
        assert_eq!(a, b);
        assert!(a.get_pixel(0, 0)[0] > a.get_pixel(0, 0)[2], "left is red-ish");
        assert!(a.get_pixel(3, 0)[2] > a.get_pixel(3, 0)[0], "right is blue-ish");
    }

    #[test]
    fn rgb_to_yuyv_round_trips_within_rounding() {
        let img = RgbImage::from_fn(8, 4, |x, y| image::Rgb([(x * 30) as u8, (y * 60) as u8, 100]));
        let mut back = RgbImage::new(8, 4);
        yuyv_to_rgb(&rgb_to_yuyv(&img), &mut back).unwrap();
        // Chroma is shared by pixel pairs, so compare pair means.
        for (a, b) in img.chunks_exact(6).zip(back.chunks_exact(6)) {
            for c in 0..3 {
                let (ma, mb) = ((a[c] as i32 + a[c + 3] as i32) / 2, (b[c] as i32 + b[c + 3] as i32) / 2);
                assert!((ma - mb).abs() <= 20, "{a:?} vs {b:?}");
            }
        }
    }

    #[test]
    fn a_short_buffer_is_an_error_that_gives_the_sizes() {
        let err = yuyv_to_rgb(&[0; 10], &mut RgbImage::new(4, 2)).unwrap_err();
        assert_eq!((err.got, err.want), (10, 16));
        assert!(nv12_to_rgb(&[0; 11], &mut RgbImage::new(4, 2)).is_err());
    }
}
