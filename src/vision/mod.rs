//! Image operations on packed RGB8 frames: resampling, affine warps, masks,
//! blending and tensor packing. Every hot-path function writes into a buffer
//! the caller owns, so a steady stream allocates nothing per frame.

mod affine;
mod color;
mod convert;
mod draw;
mod jpeg;
mod label;
mod mask;
mod resize;
mod template;
mod tensor;

pub use affine::{estimate_similarity, warp_affine_into, Affine};
pub use color::{lab_stats, lab_to_rgb, reinhard_transfer, rgb_to_lab};
pub use convert::{nv12_to_rgb, rgb_to_yuyv, rgb_to_yuyv_into, yuyv_to_rgb, ConvertError};
pub use draw::{draw_circle, draw_rect};
pub use jpeg::{encode_jpeg, face_thumbnail};
pub use label::draw_label;
pub use mask::{box_mask, gaussian_blur, paste_back, paste_region};
pub use resize::{resize_into, Resizer};
pub use template::Template;
pub use tensor::{pack_nchw, pack_nchw_rows, unpack_nchw, ChannelOrder, Normalization};

pub use image::RgbImage;

/// The largest width or height of a camera frame: 8K video's width, with
/// room; a frame this size is 201 MB of RGB. The config and every V4L2
/// buffer are held to it.
pub const MAX_SIDE: u32 = 8192;

/// Samples `img` bilinearly at (x, y) in pixel-centre coordinates, with edge
/// replication. `x`/`y` may lie anywhere; the result is per channel in 0..255.
#[inline]
pub(crate) fn sample_replicate(img: &RgbImage, x: f32, y: f32) -> [f32; 3] {
    let (w, h) = (img.width() as i32, img.height() as i32);
    let (fx, fy) = (x.floor(), y.floor());
    let (ax, ay) = (x - fx, y - fy);
    let (x0, y0) = (fx as i32, fy as i32);
    let raw = img.as_raw();
    let stride = w as usize * 3;
    // Interior fast path: all four taps inside, one bounds-checked slice.
    let (top, bottom) = if x0 >= 0 && y0 >= 0 && x0 + 1 < w && y0 + 1 < h {
        let i = y0 as usize * stride + x0 as usize * 3;
        (&raw[i..i + 6], &raw[i + stride..i + stride + 6])
    } else {
        let cx = |v: i32| v.clamp(0, w - 1) as usize * 3;
        let cy = |v: i32| v.clamp(0, h - 1) as usize * stride;
        let (xa, xb, ya, yb) = (cx(x0), cx(x0 + 1), cy(y0), cy(y0 + 1));
        let px = |row: usize, col: usize, c: usize| raw[row + col + c] as f32;
        let mut out = [0.0; 3];
        for (c, o) in out.iter_mut().enumerate() {
            let t = px(ya, xa, c) * (1.0 - ax) + px(ya, xb, c) * ax;
            let b = px(yb, xa, c) * (1.0 - ax) + px(yb, xb, c) * ax;
            *o = t * (1.0 - ay) + b * ay;
        }
        return out;
    };
    let mut out = [0.0; 3];
    for (c, o) in out.iter_mut().enumerate() {
        let t = top[c] as f32 * (1.0 - ax) + top[c + 3] as f32 * ax;
        let b = bottom[c] as f32 * (1.0 - ax) + bottom[c + 3] as f32 * ax;
        *o = t * (1.0 - ay) + b * ay;
    }
    out
}

#[inline]
pub(crate) fn to_u8(v: f32) -> u8 {
    (v + 0.5).clamp(0.0, 255.0) as u8
}
