//! Image operations on packed RGB8 frames: resampling, affine warps, masks,
//! blending and tensor packing. Every hot-path function writes into a buffer
//! the caller owns, so a steady stream allocates nothing per frame.

mod affine;
mod convert;
mod draw;
mod mask;
mod resize;
mod tensor;

pub use affine::{estimate_similarity, warp_affine_into, Affine};
pub use convert::{nv12_to_rgb, yuyv_to_rgb, ConvertError};
pub use draw::{draw_circle, draw_rect};
pub use mask::{box_mask, gaussian_blur, paste_back, paste_region};
pub use resize::{resize_into, Resizer};
pub use tensor::{pack_nchw, unpack_nchw, ChannelOrder, Normalization};

pub use image::RgbImage;

/// Samples `img` bilinearly at (x, y) in pixel-centre coordinates, with edge
/// replication. `x`/`y` may lie anywhere; the result is per channel in 0..255.
#[inline]
pub(crate) fn sample_replicate(img: &RgbImage, x: f32, y: f32) -> [f32; 3] {
    let (w, h) = (img.width() as i32, img.height() as i32);
    let (fx, fy) = (x.floor(), y.floor());
    let (ax, ay) = (x - fx, y - fy);
    let (x0, y0) = (fx as i32, fy as i32);
    let cx = |v: i32| v.clamp(0, w - 1) as usize;
    let cy = |v: i32| v.clamp(0, h - 1) as usize;
    let (xa, xb, ya, yb) = (cx(x0), cx(x0 + 1), cy(y0), cy(y0 + 1));
    let raw = img.as_raw();
    let stride = w as usize * 3;
    let px = |xx: usize, yy: usize, c: usize| raw[yy * stride + xx * 3 + c] as f32;
    let mut out = [0.0; 3];
    for (c, o) in out.iter_mut().enumerate() {
        let top = px(xa, ya, c) * (1.0 - ax) + px(xb, ya, c) * ax;
        let bottom = px(xa, yb, c) * (1.0 - ax) + px(xb, yb, c) * ax;
        *o = top * (1.0 - ay) + bottom * ay;
    }
    out
}

#[inline]
pub(crate) fn to_u8(v: f32) -> u8 {
    (v + 0.5).clamp(0.0, 255.0) as u8
}
