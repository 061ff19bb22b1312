use super::RgbImage;

/// One output coordinate's two source taps and the weight of the second.
#[derive(Debug, Clone, Copy, Default)]
struct Tap {
    i0: usize,
    i1: usize,
    w: f32,
}

/// Taps for resizing `src` samples to `dst`, with OpenCV's `INTER_LINEAR`
/// pixel-centre convention and edge clamping.
fn taps(src: usize, dst: usize, out: &mut Vec<Tap>) {
    out.clear();
    let scale = src as f32 / dst.max(1) as f32;
    let last = src.saturating_sub(1);
    out.extend((0..dst).map(|d| {
        let f = ((d as f32 + 0.5) * scale - 0.5).max(0.0);
        let i0 = (f as usize).min(last);
        Tap { i0, i1: (i0 + 1).min(last), w: if i0 >= last { 0.0 } else { f - i0 as f32 } }
    }));
}

/// Bilinear resizer that keeps its coordinate tables between calls, so a
/// stream of same-sized frames allocates nothing.
#[derive(Debug, Default)]
pub struct Resizer {
    key: (u32, u32, u32, u32),
    xs: Vec<Tap>,
    ys: Vec<Tap>,
}

impl Resizer {
    /// Resizes `src` to `w`×`h` into the top-left corner of `dst` (which may
    /// be larger: this is the detector letterbox).
    pub fn resize_into(&mut self, src: &RgbImage, dst: &mut RgbImage, w: u32, h: u32) {
        let (w, h) = (w.min(dst.width()), h.min(dst.height()));
        if src.width() == 0 || src.height() == 0 {
            return;
        }
        let key = (src.width(), src.height(), w, h);
        if self.key != key {
            taps(src.width() as usize, w as usize, &mut self.xs);
            taps(src.height() as usize, h as usize, &mut self.ys);
            self.key = key;
        }
        let (sstride, dstride) = (src.width() as usize * 3, dst.width() as usize * 3);
        let (s, d): (&[u8], &mut [u8]) = (src.as_raw(), dst);
        // Same size: bilinear taps land on the pixels themselves; copy rows.
        if (src.width(), src.height()) == (w, h) {
            for (from, to) in s.chunks_exact(sstride).zip(d.chunks_exact_mut(dstride)) {
                to[..sstride].copy_from_slice(from);
            }
            return;
        }
        for (y, ty) in self.ys.iter().enumerate() {
            let r0 = &s[ty.i0 * sstride..(ty.i0 + 1) * sstride];
            let r1 = &s[ty.i1 * sstride..(ty.i1 + 1) * sstride];
            let out = &mut d[y * dstride..y * dstride + w as usize * 3];
            for (px, tx) in out.chunks_exact_mut(3).zip(&self.xs) {
                let (a, b) = (tx.i0 * 3, tx.i1 * 3);
                for c in 0..3 {
                    let top = r0[a + c] as f32 + (r0[b + c] as f32 - r0[a + c] as f32) * tx.w;
                    let bottom = r1[a + c] as f32 + (r1[b + c] as f32 - r1[a + c] as f32) * tx.w;
                    px[c] = (top + (bottom - top) * ty.w + 0.5) as u8;
                }
            }
        }
    }
}

/// One-off form of [`Resizer::resize_into`].
pub fn resize_into(src: &RgbImage, dst: &mut RgbImage, w: u32, h: u32) {
    Resizer::default().resize_into(src, dst, w, h)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn halving_averages_pixel_pairs() {
        let src = RgbImage::from_fn(4, 2, |x, _| image::Rgb([x as u8 * 10, 0, 0]));
        let mut dst = RgbImage::new(4, 4);
        resize_into(&src, &mut dst, 2, 1);
        assert_eq!(dst.get_pixel(0, 0)[0], 5);
        assert_eq!(dst.get_pixel(1, 0)[0], 25);
        assert_eq!(dst.get_pixel(2, 0)[0], 0, "outside the letterbox stays untouched");
    }

    #[test]
    fn same_size_resize_is_a_copy_and_tables_are_reused() {
        let src = RgbImage::from_fn(7, 5, |x, y| image::Rgb([x as u8 * 30, y as u8 * 40, 9]));
        let mut r = Resizer::default();
        for _ in 0..2 {
            let mut dst = RgbImage::new(7, 5);
            r.resize_into(&src, &mut dst, 7, 5);
            assert_eq!(dst, src);
        }
    }

    #[test]
    fn upscaling_clamps_at_the_edges() {
        let src = RgbImage::from_fn(2, 1, |x, _| image::Rgb([x as u8 * 100, 0, 0]));
        let mut dst = RgbImage::new(4, 1);
        resize_into(&src, &mut dst, 4, 1);
        let row: Vec<u8> = (0..4).map(|x| dst.get_pixel(x, 0)[0]).collect();
        assert_eq!(row, vec![0, 25, 75, 100]);
    }
}
