//! MJPEG frames from cameras. Many UVC webcams send JPEGs without Huffman
//! tables (no DHT segment) and rely on the standard tables of JPEG's Annex
//! K, as the MJPEG/AVI convention says; decoders that follow the JPEG
//! standard alone refuse those frames. The standard tables are put in when
//! a frame has none.

use crate::vision::RgbImage;
use image::ImageDecoder;
use std::borrow::Cow;

/// Code counts per length (16 bytes) then the symbols: Annex K.3 tables for
/// DC luminance (class 0, id 0), DC chrominance (0, 1), AC luminance (1, 0)
/// and AC chrominance (1, 1).
const DC_LUMA: ([u8; 16], &[u8]) =
    ([0, 1, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0], &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
const DC_CHROMA: ([u8; 16], &[u8]) =
    ([0, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0], &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
const AC_LUMA: ([u8; 16], &[u8]) = (
    [0, 2, 1, 3, 3, 2, 4, 3, 5, 5, 4, 4, 0, 0, 1, 0x7d],
    &[
        0x01, 0x02, 0x03, 0x00, 0x04, 0x11, 0x05, 0x12, 0x21, 0x31, 0x41, 0x06, 0x13, 0x51, 0x61, 0x07, 0x22, 0x71,
        0x14, 0x32, 0x81, 0x91, 0xa1, 0x08, 0x23, 0x42, 0xb1, 0xc1, 0x15, 0x52, 0xd1, 0xf0, 0x24, 0x33, 0x62, 0x72,
        0x82, 0x09, 0x0a, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x25, 0x26, 0x27, 0x28, 0x29, 0x2a, 0x34, 0x35, 0x36, 0x37,
        0x38, 0x39, 0x3a, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48, 0x49, 0x4a, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58, 0x59,
        0x5a, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69, 0x6a, 0x73, 0x74, 0x75, 0x76, 0x77, 0x78, 0x79, 0x7a, 0x83,
        0x84, 0x85, 0x86, 0x87, 0x88, 0x89, 0x8a, 0x92, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98, 0x99, 0x9a, 0xa2, 0xa3,
        0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7, 0xb8, 0xb9, 0xba, 0xc2, 0xc3,
        0xc4, 0xc5, 0xc6, 0xc7, 0xc8, 0xc9, 0xca, 0xd2, 0xd3, 0xd4, 0xd5, 0xd6, 0xd7, 0xd8, 0xd9, 0xda, 0xe1, 0xe2,
        0xe3, 0xe4, 0xe5, 0xe6, 0xe7, 0xe8, 0xe9, 0xea, 0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8, 0xf9, 0xfa,
    ],
);
const AC_CHROMA: ([u8; 16], &[u8]) = (
    [0, 2, 1, 2, 4, 4, 3, 4, 7, 5, 4, 4, 0, 1, 2, 0x77],
    &[
        0x00, 0x01, 0x02, 0x03, 0x11, 0x04, 0x05, 0x21, 0x31, 0x06, 0x12, 0x41, 0x51, 0x07, 0x61, 0x71, 0x13, 0x22,
        0x32, 0x81, 0x08, 0x14, 0x42, 0x91, 0xa1, 0xb1, 0xc1, 0x09, 0x23, 0x33, 0x52, 0xf0, 0x15, 0x62, 0x72, 0xd1,
        0x0a, 0x16, 0x24, 0x34, 0xe1, 0x25, 0xf1, 0x17, 0x18, 0x19, 0x1a, 0x26, 0x27, 0x28, 0x29, 0x2a, 0x35, 0x36,
        0x37, 0x38, 0x39, 0x3a, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48, 0x49, 0x4a, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58,
        0x59, 0x5a, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69, 0x6a, 0x73, 0x74, 0x75, 0x76, 0x77, 0x78, 0x79, 0x7a,
        0x82, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89, 0x8a, 0x92, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98, 0x99, 0x9a,
        0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7, 0xb8, 0xb9, 0xba,
        0xc2, 0xc3, 0xc4, 0xc5, 0xc6, 0xc7, 0xc8, 0xc9, 0xca, 0xd2, 0xd3, 0xd4, 0xd5, 0xd6, 0xd7, 0xd8, 0xd9, 0xda,
        0xe2, 0xe3, 0xe4, 0xe5, 0xe6, 0xe7, 0xe8, 0xe9, 0xea, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8, 0xf9, 0xfa,
    ],
);

/// One DHT segment holding the four standard tables.
fn standard_dht() -> Vec<u8> {
    let tables = [(0x00, DC_LUMA), (0x01, DC_CHROMA), (0x10, AC_LUMA), (0x11, AC_CHROMA)];
    let mut body = Vec::new();
    for (class_id, (counts, symbols)) in tables {
        body.push(class_id);
        body.extend_from_slice(&counts);
        body.extend_from_slice(symbols);
    }
    let mut dht = vec![0xFF, 0xC4];
    dht.extend_from_slice(&((body.len() + 2) as u16).to_be_bytes());
    dht.extend(body);
    dht
}

/// Whether a DHT segment comes before the start of scan.
fn has_huffman_tables(jpeg: &[u8]) -> bool {
    let mut at = 2;
    while at + 4 <= jpeg.len() && jpeg[at] == 0xFF {
        match jpeg[at + 1] {
            0xC4 => return true,
            0xDA => return false,
            _ => at += 2 + u16::from_be_bytes([jpeg[at + 2], jpeg[at + 3]]) as usize,
        }
    }
    false
}

/// `jpeg` as is, or with the standard tables after its SOI when it has none.
fn with_huffman_tables(jpeg: &[u8]) -> Cow<'_, [u8]> {
    if jpeg.len() < 4 || jpeg[..2] != [0xFF, 0xD8] || has_huffman_tables(jpeg) {
        return Cow::Borrowed(jpeg);
    }
    let mut out = jpeg[..2].to_vec();
    out.extend(standard_dht());
    out.extend_from_slice(&jpeg[2..]);
    Cow::Owned(out)
}

/// Decodes one MJPEG frame into `dst`, which already has the frame's size.
pub fn decode(data: &[u8], dst: &mut RgbImage) -> Result<(), String> {
    let data = with_huffman_tables(data);
    let decoder = image::codecs::jpeg::JpegDecoder::new(std::io::Cursor::new(&data[..])).map_err(|e| e.to_string())?;
    if decoder.dimensions() != dst.dimensions() || decoder.color_type() != image::ColorType::Rgb8 {
        return Err(format!(
            "MJPEG frame is {:?} {:?}, expected RGB {:?}",
            decoder.dimensions(),
            decoder.color_type(),
            dst.dimensions()
        ));
    }
    decoder.read_image(dst).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_standard_tables_have_their_code_counts() {
        for (counts, symbols) in [DC_LUMA, DC_CHROMA, AC_LUMA, AC_CHROMA] {
            assert_eq!(counts.iter().map(|&c| c as usize).sum::<usize>(), symbols.len());
        }
        assert_eq!(standard_dht().len(), 2 + 2 + 4 * 17 + 12 + 12 + 162 + 162);
    }

    /// `jpeg` without its DHT segments: what many webcams send, relying on
    /// the standard tables of JPEG's Annex K.
    fn without_huffman_tables(jpeg: &[u8]) -> Vec<u8> {
        let mut out = jpeg[..2].to_vec();
        let mut at = 2;
        while at + 4 <= jpeg.len() && jpeg[at] == 0xFF {
            let marker = jpeg[at + 1];
            if marker == 0xDA {
                break; // start of scan: the rest is entropy-coded data
            }
            let len = u16::from_be_bytes([jpeg[at + 2], jpeg[at + 3]]) as usize;
            if marker != 0xC4 {
                out.extend_from_slice(&jpeg[at..at + 2 + len]);
            }
            at += 2 + len;
        }
        out.extend_from_slice(&jpeg[at..]);
        out
    }

    #[test]
    fn an_mjpeg_frame_without_huffman_tables_decodes_as_with_them() {
        let img = RgbImage::from_fn(64, 48, |x, y| image::Rgb([(x * 4) as u8, (y * 5) as u8, ((x + y) * 2) as u8]));
        let jpeg = crate::vision::encode_jpeg(&img, 80).unwrap();
        let bare = without_huffman_tables(&jpeg);
        assert!(bare.len() + 400 < jpeg.len(), "the DHT segments were removed ({} -> {})", jpeg.len(), bare.len());
        assert!(!bare.windows(2).any(|w| w == [0xFF, 0xC4]), "no DHT marker is left");
        let (mut with, mut without) = (RgbImage::new(64, 48), RgbImage::new(64, 48));
        decode(&jpeg, &mut with).unwrap();
        decode(&bare, &mut without).unwrap();
        assert_eq!(with, without);
        let mut wrong_size = RgbImage::new(32, 48);
        assert!(decode(&jpeg, &mut wrong_size).unwrap_err().contains("expected RGB"));
    }
}
