use super::RgbImage;
use serde::{Deserialize, Serialize};

/// Channel order a model expects in its input planes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ChannelOrder {
    Rgb,
    Bgr,
}

/// Per-channel `(pixel − mean) / std`, with pixels in 0..255 and the three
/// values given in the model's own channel order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Normalization {
    pub mean: [f32; 3],
    pub std: [f32; 3],
}

impl Normalization {
    pub const fn uniform(mean: f32, std: f32) -> Self {
        Normalization { mean: [mean; 3], std: [std; 3] }
    }
}

fn channel_index(order: ChannelOrder, plane: usize) -> usize {
    match order {
        ChannelOrder::Rgb => plane,
        ChannelOrder::Bgr => 2 - plane,
    }
}

/// Packs an RGB image into `out`, laid out as one NCHW sample (3 planes of
/// `width × height`), in `order` and normalised.
pub fn pack_nchw(img: &RgbImage, order: ChannelOrder, norm: &Normalization, out: &mut [f32]) {
    pack_nchw_rows(img, img.height(), order, norm, out)
}

/// [`pack_nchw`] of the first `rows` rows only; the rest of `out` is left
/// as it is (the detector's constant letterbox padding).
pub fn pack_nchw_rows(img: &RgbImage, rows: u32, order: ChannelOrder, norm: &Normalization, out: &mut [f32]) {
    let plane = img.width() as usize * img.height() as usize;
    debug_assert_eq!(out.len(), plane * 3);
    let n = img.width() as usize * rows.min(img.height()) as usize;
    // One table per output plane: 256 lookups replace a subtract and a
    // multiply per value, and one pass over the pixels fills all planes.
    let mut lut = [[0f32; 256]; 3];
    for (c, table) in lut.iter_mut().enumerate() {
        let (mean, inv_std) = (norm.mean[c], 1.0 / norm.std[c]);
        for (v, t) in table.iter_mut().enumerate() {
            *t = (v as f32 - mean) * inv_std;
        }
    }
    let [s0, s1, s2] = [0, 1, 2].map(|c| channel_index(order, c));
    let (p0, rest) = out.split_at_mut(plane);
    let (p1, p2) = rest.split_at_mut(plane);
    for (i, px) in img.as_raw()[..n * 3].chunks_exact(3).enumerate() {
        p0[i] = lut[0][px[s0] as usize];
        p1[i] = lut[1][px[s1] as usize];
        p2[i] = lut[2][px[s2] as usize];
    }
}

/// The inverse of [`pack_nchw`] for model outputs: `value · std + mean` gives
/// 0..1, which is clipped and scaled to 0..255.
pub fn unpack_nchw(data: &[f32], order: ChannelOrder, mean: f32, std: f32, out: &mut RgbImage) {
    let plane = out.width() as usize * out.height() as usize;
    for c in 0..3 {
        let dst_c = channel_index(order, c);
        let src = &data[c * plane..(c + 1) * plane];
        for (v, px) in src.iter().zip(out.chunks_exact_mut(3)) {
            px[dst_c] = ((v * std + mean).clamp(0.0, 1.0) * 255.0 + 0.5) as u8;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bgr_packing_swaps_planes_and_normalises() {
        let img = RgbImage::from_pixel(2, 1, image::Rgb([10, 20, 30]));
        let mut out = vec![0.0; 6];
        pack_nchw(&img, ChannelOrder::Bgr, &Normalization::uniform(0.0, 10.0), &mut out);
        assert_eq!(out, vec![3.0, 3.0, 2.0, 2.0, 1.0, 1.0]);
    }

    #[test]
    fn unpack_inverts_pack() {
        let img = RgbImage::from_fn(3, 2, |x, y| image::Rgb([x as u8 * 50, y as u8 * 90, 200]));
        let mut t = vec![0.0; 18];
        pack_nchw(&img, ChannelOrder::Rgb, &Normalization::uniform(0.0, 255.0), &mut t);
        let mut back = RgbImage::new(3, 2);
        unpack_nchw(&t, ChannelOrder::Rgb, 0.0, 1.0, &mut back);
        assert_eq!(img, back);
    }
}
