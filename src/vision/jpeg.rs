//! Baseline JPEG encoding of RGB frames through libjpeg-turbo (SIMD on
//! x86_64 and ARM): MQTT frames, snapshots, the MJPEG virtual camera and the
//! synthetic camera's compression.
//!
//! The output is what OpenCV's `imencode` writes by default, which is what
//! FaceFusion users compare against: 4:2:0 chroma subsampling at any quality,
//! standard Huffman tables, not progressive.

use std::cell::RefCell;

use super::RgbImage;

thread_local! {
    /// One compressor per thread, kept between frames: its allocation and
    /// tables are set up once, not per frame. A thread that never encodes
    /// never makes one.
    static COMPRESSOR: RefCell<Option<turbojpeg::Compressor>> = const { RefCell::new(None) };
}

/// A `side`×`side` JPEG of the face in `bbox` (`[x1, y1, x2, y2]`): a
/// square 1.4 times the box's longer side around its centre, cut to the
/// picture.
pub fn face_thumbnail(img: &RgbImage, bbox: &[f32; 4], side: u32) -> Result<Vec<u8>, String> {
    let (w, h) = (img.width() as f32, img.height() as f32);
    let [x1, y1, x2, y2] = *bbox;
    let half = 0.7 * (x2 - x1).max(y2 - y1);
    let (cx, cy) = ((x1 + x2) / 2.0, (y1 + y2) / 2.0);
    let left = (cx - half).clamp(0.0, w - 1.0) as u32;
    let top = (cy - half).clamp(0.0, h - 1.0) as u32;
    let right = (cx + half).clamp(left as f32 + 1.0, w) as u32;
    let bottom = (cy + half).clamp(top as f32 + 1.0, h) as u32;
    let crop = image::imageops::crop_imm(img, left, top, right - left, bottom - top).to_image();
    let thumb = image::imageops::resize(&crop, side, side, image::imageops::FilterType::Triangle);
    encode_jpeg(&thumb, 85)
}

/// Encodes `img` as a baseline JPEG at `quality` (1–100).
pub fn encode_jpeg(img: &RgbImage, quality: u8) -> Result<Vec<u8>, String> {
    let (w, h) = img.dimensions();
    if w > u16::MAX as u32 || h > u16::MAX as u32 {
        return Err(format!("{w}x{h} is too large for JPEG"));
    }
    let image = turbojpeg::Image {
        pixels: img.as_raw().as_slice(),
        width: w as usize,
        pitch: 3 * w as usize,
        height: h as usize,
        format: turbojpeg::PixelFormat::RGB,
    };
    COMPRESSOR.with(|cell| {
        let mut slot = cell.borrow_mut();
        let compressor = match slot.as_mut() {
            Some(c) => c,
            None => slot.insert(new_compressor().map_err(|e| format!("cannot start libjpeg-turbo: {e}"))?),
        };
        compressor.set_quality(i32::from(quality.clamp(1, 100))).map_err(|e| e.to_string())?;
        compressor.compress_to_vec(image).map_err(|e| format!("JPEG encoding of a {w}x{h} frame failed: {e}"))
    })
}

fn new_compressor() -> turbojpeg::Result<turbojpeg::Compressor> {
    let mut c = turbojpeg::Compressor::new()?;
    c.set_subsamp(turbojpeg::Subsamp::Sub2x2)?;
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gradient(w: u32, h: u32) -> RgbImage {
        RgbImage::from_fn(w, h, |x, y| image::Rgb([(x * 255 / w) as u8, (y * 255 / h) as u8, 128]))
    }

    #[test]
    fn decodes_back_to_the_frame_it_encoded() {
        let img = gradient(64, 48);
        let jpeg = encode_jpeg(&img, 90).unwrap();
        assert_eq!(&jpeg[..2], &[0xFF, 0xD8], "a JPEG starts with SOI");
        let back = image::load_from_memory(&jpeg).unwrap().to_rgb8();
        assert_eq!(back.dimensions(), (64, 48));
        let worst = img.as_raw().iter().zip(back.as_raw()).map(|(a, b)| a.abs_diff(*b)).max().unwrap();
        assert!(worst < 24, "worst level difference {worst}");
    }

    #[test]
    fn quality_orders_the_size_and_odd_sizes_encode() {
        let img = gradient(33, 17);
        let low = encode_jpeg(&img, 10).unwrap();
        let high = encode_jpeg(&img, 95).unwrap();
        assert!(low.len() < high.len(), "q10 {} B, q95 {} B", low.len(), high.len());
        assert!(encode_jpeg(&img, 0).is_ok(), "quality 0 is clamped to 1");
    }
}
