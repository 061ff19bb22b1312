//! Baseline JPEG encoding of RGB frames (pure Rust, AVX2 when the CPU has
//! it): MQTT frames, snapshots and the synthetic camera's compression.

use super::RgbImage;

/// Encodes `img` as a baseline JPEG.
pub fn encode_jpeg(img: &RgbImage, quality: u8) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(img.len() / 8);
    let (w, h) = img.dimensions();
    if w > u16::MAX as u32 || h > u16::MAX as u32 {
        return Err(format!("{w}x{h} is too large for JPEG"));
    }
    let encoder = jpeg_encoder::Encoder::new(&mut out, quality);
    encoder.encode(img.as_raw(), w as u16, h as u16, jpeg_encoder::ColorType::Rgb).map_err(|e| e.to_string())?;
    Ok(out)
}
