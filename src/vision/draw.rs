use super::RgbImage;

/// Draws a rectangle outline of `thickness` px, clipped to the image.
pub fn draw_rect(img: &mut RgbImage, b: [f32; 4], color: [u8; 3], thickness: i32) {
    let (w, h) = (img.width() as i32, img.height() as i32);
    let [x1, y1, x2, y2] = b.map(|v| v.round() as i32);
    let mut put = |x: i32, y: i32| {
        if (0..w).contains(&x) && (0..h).contains(&y) {
            img.put_pixel(x as u32, y as u32, image::Rgb(color));
        }
    };
    for t in 0..thickness {
        for x in x1..=x2 {
            put(x, y1 + t);
            put(x, y2 - t);
        }
        for y in y1..=y2 {
            put(x1 + t, y);
            put(x2 - t, y);
        }
    }
}

/// Draws a filled disc, clipped to the image.
pub fn draw_circle(img: &mut RgbImage, cx: f32, cy: f32, r: i32, color: [u8; 3]) {
    let (w, h) = (img.width() as i32, img.height() as i32);
    let (cx, cy) = (cx.round() as i32, cy.round() as i32);
    for y in (cy - r).max(0)..=(cy + r).min(h - 1) {
        for x in (cx - r).max(0)..=(cx + r).min(w - 1) {
            if (x - cx).pow(2) + (y - cy).pow(2) <= r * r {
                img.put_pixel(x as u32, y as u32, image::Rgb(color));
            }
        }
    }
}
