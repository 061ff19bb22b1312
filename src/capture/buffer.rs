//! One V4L2 buffer into an RGB frame, without IO: what the driver filled
//! (`bytesused` bytes, rows `stride` apart) in the negotiated format. Every
//! size here comes from a driver, so none of it is trusted: a short, padded
//! or oversized buffer is an error or is repacked, never a panic.

use crate::vision::{nv12_to_rgb, yuyv_to_rgb, RgbImage, MAX_SIDE};

/// The negotiated format of a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferFormat {
    pub fourcc: [u8; 4],
    pub width: u32,
    pub height: u32,
    /// Bytes per line as the driver reports it.
    pub stride: usize,
}

/// Drops row padding: `rows` rows of `row` bytes each, `stride` apart. A
/// buffer that is not padded, or too short for its stride, is left as it
/// is (the converter then refuses a short one).
fn unpad<'a>(src: &'a [u8], stride: usize, row: usize, rows: usize, out: &'a mut Vec<u8>) -> &'a [u8] {
    let needed = rows.checked_sub(1).and_then(|r| stride.checked_mul(r)).and_then(|b| b.checked_add(row));
    if stride <= row || needed.is_none_or(|n| src.len() < n) {
        return src;
    }
    out.clear();
    for r in 0..rows {
        out.extend_from_slice(&src[r * stride..r * stride + row]);
    }
    out
}

/// Converts `data` into `image`, which is resized to the format's size when
/// it differs. `packed` is scratch space for repacking padded rows.
pub fn to_rgb(data: &[u8], format: &BufferFormat, packed: &mut Vec<u8>, image: &mut RgbImage) -> Result<(), String> {
    let (w, h) = (format.width, format.height);
    if !(1..=MAX_SIDE).contains(&w) || !(1..=MAX_SIDE).contains(&h) {
        return Err(format!("the stream's size is {w}x{h}; fusiond takes 1 to {MAX_SIDE} pixels a side"));
    }
    if image.dimensions() != (w, h) {
        *image = RgbImage::new(w, h);
    }
    match &format.fourcc {
        b"YUYV" => {
            let data = unpad(data, format.stride, w as usize * 2, h as usize, packed);
            yuyv_to_rgb(data, image).map_err(|e| e.to_string())
        }
        b"NV12" => {
            // Both planes share the stride; the chroma plane follows h rows.
            let data = unpad(data, format.stride, w as usize, h as usize * 3 / 2, packed);
            nv12_to_rgb(data, image).map_err(|e| e.to_string())
        }
        _ => super::mjpeg::decode(data, image),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padded_nv12_rows_are_repacked_before_conversion() {
        // A 4x2 NV12 frame (2 luma rows, 1 chroma row) with rows padded to 8.
        let (stride, w) = (8usize, 4usize);
        let packed: Vec<u8> = (0..(w * 3)).map(|i| 16 + i as u8 * 10).collect();
        let mut padded = Vec::new();
        for row in packed.chunks(w) {
            padded.extend_from_slice(row);
            padded.extend_from_slice(&[0xEE; 4]);
        }
        let mut scratch = Vec::new();
        assert_eq!(unpad(&padded, stride, w, 3, &mut scratch), &packed[..]);
        let format = BufferFormat { fourcc: *b"NV12", width: 4, height: 2, stride };
        let (mut a, mut b) = (RgbImage::new(1, 1), RgbImage::new(4, 2));
        to_rgb(&padded, &format, &mut scratch, &mut a).unwrap();
        nv12_to_rgb(&packed, &mut b).unwrap();
        assert_eq!(a, b, "the padding never reaches the picture");
        // No padding, or a buffer too short for the stride: left as it is.
        assert_eq!(unpad(&packed, w, w, 3, &mut scratch), &packed[..]);
        assert_eq!(unpad(&padded[..10], stride, w, 3, &mut scratch), &padded[..10]);
    }

    #[test]
    fn hostile_sizes_and_byte_counts_are_errors() {
        let mut scratch = Vec::new();
        let mut img = RgbImage::new(1, 1);
        for (fourcc, w, h, stride, len) in [
            (*b"YUYV", 0, 0, 0, 0),
            (*b"YUYV", 100_000, 2, 200_000, 16),
            (*b"NV12", 4, 0, 8, 16),
            (*b"YUYV", 4, 2, usize::MAX, 8),
            (*b"NV12", 4, 2, usize::MAX / 2, 3),
            (*b"YUYV", 4, 2, 8, 3),
            (*b"MJPG", 4, 2, 0, 0),
        ] {
            let format = BufferFormat { fourcc, width: w, height: h, stride };
            assert!(to_rgb(&vec![0u8; len], &format, &mut scratch, &mut img).is_err(), "{format:?} {len}");
        }
    }
}
