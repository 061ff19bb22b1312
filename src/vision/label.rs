//! The visible label (`output.label`): "AI-GENERATED" in white on a dark
//! badge in the frame's bottom-right corner, from a built-in 5 × 7 pixel
//! font scaled with the frame (one font pixel per 240 rows).

use image::RgbImage;

const TEXT: &str = "AI-GENERATED";
const GLYPH_W: u32 = 5;
const GLYPH_H: u32 = 7;

/// Rows of a glyph, most significant of the five bits on the left.
fn glyph(c: char) -> [u8; 7] {
    match c {
        'A' => [0b01110, 0b10001, 0b10001, 0b11111, 0b10001, 0b10001, 0b10001],
        'I' => [0b11111, 0b00100, 0b00100, 0b00100, 0b00100, 0b00100, 0b11111],
        '-' => [0, 0, 0, 0b11111, 0, 0, 0],
        'G' => [0b01110, 0b10001, 0b10000, 0b10111, 0b10001, 0b10001, 0b01111],
        'E' => [0b11111, 0b10000, 0b10000, 0b11110, 0b10000, 0b10000, 0b11111],
        'N' => [0b10001, 0b11001, 0b10101, 0b10011, 0b10001, 0b10001, 0b10001],
        'R' => [0b11110, 0b10001, 0b10001, 0b11110, 0b10100, 0b10010, 0b10001],
        'T' => [0b11111, 0b00100, 0b00100, 0b00100, 0b00100, 0b00100, 0b00100],
        'D' => [0b11110, 0b10001, 0b10001, 0b10001, 0b10001, 0b10001, 0b11110],
        _ => [0; 7],
    }
}

/// Draws the badge; a frame too small for it is left as it is.
pub fn draw_label(img: &mut RgbImage) {
    let scale = (img.height() / 240).max(1);
    let chars = TEXT.chars().count() as u32;
    let (pad, gap) = (2 * scale, scale);
    let badge_w = chars * (GLYPH_W * scale + gap) - gap + 2 * pad;
    let badge_h = GLYPH_H * scale + 2 * pad;
    let margin = 4 * scale;
    if img.width() < badge_w + 2 * margin || img.height() < badge_h + 2 * margin {
        return;
    }
    let (x0, y0) = (img.width() - margin - badge_w, img.height() - margin - badge_h);
    for y in y0..y0 + badge_h {
        for x in x0..x0 + badge_w {
            let p = img.get_pixel_mut(x, y);
            p.0 = p.0.map(|v| v / 4);
        }
    }
    for (i, c) in TEXT.chars().enumerate() {
        let gx = x0 + pad + i as u32 * (GLYPH_W * scale + gap);
        for (row, bits) in glyph(c).iter().enumerate() {
            for col in 0..GLYPH_W {
                if bits >> (GLYPH_W - 1 - col) & 1 == 0 {
                    continue;
                }
                for dy in 0..scale {
                    for dx in 0..scale {
                        img.put_pixel(gx + col * scale + dx, y0 + pad + row as u32 * scale + dy, image::Rgb([255; 3]));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_badge_sits_in_the_bottom_right_corner_and_nothing_else_moves() {
        let plain = RgbImage::from_pixel(640, 480, image::Rgb([120, 130, 140]));
        let mut labelled = plain.clone();
        draw_label(&mut labelled);
        let changed: Vec<(u32, u32)> = labelled
            .enumerate_pixels()
            .filter(|(x, y, p)| plain.get_pixel(*x, *y) != *p)
            .map(|(x, y, _)| (x, y))
            .collect();
        assert!(changed.len() > 1000, "{} pixels changed", changed.len());
        assert!(changed.iter().all(|&(x, y)| x > 320 && y > 440), "only the corner changes");
        assert!(labelled.pixels().any(|p| p.0 == [255; 3]), "white text");
        let mut tiny = RgbImage::new(40, 30);
        draw_label(&mut tiny);
        assert!(tiny.pixels().all(|p| p.0 == [0; 3]), "too small: left alone");
    }
}
