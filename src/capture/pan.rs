//! A synthetic camera with known geometry: a still photo seen through a
//! slow zoom and pan, then a faster pan, each frame warped by a known
//! similarity transform, with mild sensor noise and JPEG compression. Since
//! the faces stand still in the photo, every frame's landmarks map back to
//! the same photo positions; whatever moves there is the pipeline's own
//! jitter. The stability benchmark and tests run on it.

use super::{CaptureError, Frame, FrameSource};
use crate::vision::{encode_jpeg, warp_affine_into, Affine, RgbImage};
use std::time::SystemTime;

/// Output size, as a common camera mode.
pub const WIDTH: u32 = 640;
pub const HEIGHT: u32 = 480;

/// Which part of the sequence a frame belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Segment {
    Slow,
    Fast,
}

/// The photo → frame transform of every frame.
#[derive(Debug, Clone)]
pub struct PanPlan {
    pub transforms: Vec<(Affine, Segment)>,
}

/// Photo point (cx, cy) at the frame centre, seen at scale `s`, turned by
/// `angle` radians.
fn view(cx: f32, cy: f32, s: f32, angle: f32) -> Affine {
    let (c, n) = (s * angle.cos(), s * angle.sin());
    let (fx, fy) = (WIDTH as f32 / 2.0, HEIGHT as f32 / 2.0);
    Affine([c, -n, fx - c * cx + n * cy, n, c, fy - n * cx - c * cy])
}

impl PanPlan {
    /// `slow` frames of a slow zoom (scale 1.0 → 1.12 of the fit), pan and
    /// turn across `width`×`height`, then `fast` frames panning back at four
    /// times the slow pan's mean speed, then `slow / 2` frames holding
    /// still. Every move eases
    /// in and out (smoothstep), as a camera or a head does: the velocity is
    /// continuous, only its changes are quick in the fast segment.
    pub fn new(width: u32, height: u32, slow: usize, fast: usize) -> PanPlan {
        let fit = (WIDTH as f32 / width as f32).min(HEIGHT as f32 / height as f32);
        let (w, h) = (width as f32, height as f32);
        let pan = 0.05 * w;
        let ease = |i: usize, n: usize| {
            let k = i as f32 / n.max(1) as f32;
            k * k * (3.0 - 2.0 * k)
        };
        let mut transforms = Vec::new();
        for i in 0..slow {
            let k = ease(i, slow);
            let s = fit * (1.0 + 0.12 * k);
            transforms.push((view(w / 2.0 - pan + 2.0 * pan * k, h / 2.0, s, 0.02 * k), Segment::Slow));
        }
        let back = (4.0 * 2.0 * pan / slow.max(1) as f32 * fast as f32).min(2.0 * pan);
        for i in 0..fast {
            let k = ease(i + 1, fast);
            transforms.push((view(w / 2.0 + pan - back * k, h / 2.0, fit * 1.12, 0.02), Segment::Fast));
        }
        for _ in 0..slow / 2 {
            transforms.push((view(w / 2.0 + pan - back, h / 2.0, fit * 1.12, 0.02), Segment::Slow));
        }
        PanPlan { transforms }
    }

    pub fn len(&self) -> usize {
        self.transforms.len()
    }

    pub fn is_empty(&self) -> bool {
        self.transforms.is_empty()
    }
}

/// Renders the frames of a [`PanPlan`] over a photo.
pub struct Pan {
    photo: RgbImage,
    pub plan: PanPlan,
    /// Noise amplitude, in levels (uniform, ±).
    pub noise: u8,
    pub jpeg_quality: u8,
}

/// Deterministic noise in [-1, 1] for pixel `i` of frame `frame`.
fn noise(frame: usize, i: usize) -> f32 {
    let h = (i as u32 ^ (frame as u32).wrapping_mul(0x9e37_79b9)).wrapping_mul(2_654_435_761);
    let h = h.rotate_left(13).wrapping_mul(2_246_822_519);
    (h >> 8) as f32 / (1u32 << 23) as f32 - 1.0
}

impl Pan {
    pub fn new(photo: RgbImage, slow: usize, fast: usize) -> Pan {
        let plan = PanPlan::new(photo.width(), photo.height(), slow, fast);
        Pan { photo, plan, noise: 3, jpeg_quality: 85 }
    }

    /// Frame `i` as a camera would deliver it, and its photo → frame map.
    pub fn frame(&self, i: usize) -> Result<(RgbImage, Affine), CaptureError> {
        let bad = |message: String| CaptureError::Format { source_name: "pan".into(), message };
        let (to_frame, _) = *self.plan.transforms.get(i).ok_or_else(|| bad(format!("no frame {i}")))?;
        let mut img = RgbImage::new(WIDTH, HEIGHT);
        warp_affine_into(&self.photo, &to_frame, &mut img);
        let amp = self.noise as f32;
        for (k, v) in img.iter_mut().enumerate() {
            *v = (*v as f32 + amp * noise(i, k)).round().clamp(0.0, 255.0) as u8;
        }
        let jpeg = encode_jpeg(&img, self.jpeg_quality).map_err(bad)?;
        let decoded = image::load_from_memory(&jpeg).map_err(|e| bad(e.to_string()))?;
        Ok((decoded.to_rgb8(), to_frame))
    }
}

/// The pan as a frame source, looping; frames are rendered on demand.
pub struct PanSource {
    pan: Pan,
    next: usize,
}

impl PanSource {
    pub fn new(pan: Pan) -> PanSource {
        PanSource { pan, next: 0 }
    }
}

impl FrameSource for PanSource {
    fn name(&self) -> String {
        "synthetic pan".into()
    }

    fn next_frame(&mut self, frame: &mut Frame) -> Result<(), CaptureError> {
        let (img, _) = self.pan.frame(self.next % self.pan.plan.len().max(1))?;
        self.next += 1;
        frame.image = img;
        frame.captured = SystemTime::now();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_zooms_pans_and_keeps_the_photo_centre_in_view() {
        let plan = PanPlan::new(1126, 661, 40, 10);
        assert_eq!(plan.len(), 40 + 10 + 20);
        assert_eq!(plan.transforms.iter().filter(|(_, s)| *s == Segment::Fast).count(), 10);
        let (first, last) = (plan.transforms[0].0, plan.transforms[39].0);
        let scale = |a: Affine| a.0[0].hypot(a.0[3]);
        assert!(scale(last) > scale(first) * 1.1, "it zooms in");
        for (t, _) in &plan.transforms {
            let (x, y) = t.apply(563.0, 330.5);
            assert!((0.0..640.0).contains(&x) && (0.0..480.0).contains(&y), "centre at ({x}, {y})");
        }
    }

    #[test]
    fn frames_are_the_photo_under_the_known_transform() {
        let photo = RgbImage::from_fn(320, 240, |x, y| image::Rgb([(x % 256) as u8, (y % 256) as u8, 128]));
        let pan = Pan { noise: 0, jpeg_quality: 100, ..Pan::new(photo.clone(), 4, 2) };
        let (img, to_frame) = pan.frame(2).unwrap();
        let back = to_frame.invert().unwrap();
        let (px, py) = back.apply(320.0, 240.0);
        let want = photo.get_pixel(px.round() as u32, py.round() as u32);
        let got = img.get_pixel(320, 240);
        for c in 0..3 {
            assert!((want[c] as i32 - got[c] as i32).abs() <= 6, "{want:?} vs {got:?}");
        }
    }
}
