//! Temporal smoothing of one track's face over its 5 landmarks, with the
//! box carried along: an alpha-beta (constant velocity) filter whose gain
//! adapts as in the One Euro filter (Casiez et al., CHI 2012). It smooths
//! hard while the face moves steadily or stands still (the detector's own
//! jitter), reacts fast when the motion changes, and predicts where the
//! face is between detections from its velocity. Speeds are measured in
//! inter-ocular distances (IOD) per second, so one setting fits a face near
//! the camera and one far away.

use super::Face;
use serde::{Deserialize, Serialize};
use std::f32::consts::PI;

/// The detector's jitter that does not shrink with the face, pixels: about
/// a pixel of the detector's input grid at the scale faces are found at.
pub const NOISE_PX: f32 = 1.0;

/// How a track's landmarks are filtered and predicted.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct SmoothSettings {
    /// Smooth landmarks at all (off: each detection as it is).
    pub enabled: bool,
    /// Cutoff frequency while the face is still or moves steadily, in Hz:
    /// lower is smoother.
    pub min_cutoff_hz: f32,
    /// How fast the cutoff rises when a detection lands off the prediction
    /// by more than the jitter, in Hz per IOD/s: higher reacts faster.
    pub beta: f32,
    /// The detector's own jitter, in IOD: residuals within it do not raise
    /// the cutoff.
    pub jitter_iod: f32,
    /// Between detections, move each face by its filtered velocity.
    pub predict: bool,
    /// A detection this far (in IOD) from the track's prediction is a jump
    /// (a cut, a re-detection elsewhere): the filter restarts there.
    pub reset_iod: f32,
}

impl Default for SmoothSettings {
    fn default() -> Self {
        SmoothSettings { enabled: true, min_cutoff_hz: 1.2, beta: 3.0, jitter_iod: 0.03, predict: true, reset_iod: 1.0 }
    }
}

impl SmoothSettings {
    /// Raw detections, frozen between them: the filter switched off.
    pub const OFF: SmoothSettings = SmoothSettings {
        enabled: false,
        min_cutoff_hz: 1.0,
        beta: 0.0,
        jitter_iod: 0.0,
        predict: false,
        reset_iod: 1.0,
    };

    pub fn validate(&self) -> Result<(), String> {
        let finite = [self.min_cutoff_hz, self.beta, self.jitter_iod, self.reset_iod].iter().all(|v| v.is_finite());
        if !finite || self.min_cutoff_hz <= 0.0 || self.beta < 0.0 || self.jitter_iod < 0.0 || self.reset_iod <= 0.0 {
            return Err(
                "pipeline.smoothing: need min_cutoff_hz > 0, beta >= 0, jitter_iod >= 0 and reset_iod > 0".into()
            );
        }
        Ok(())
    }
}

fn alpha(cutoff_hz: f32, dt: f32) -> f32 {
    let tau = 1.0 / (2.0 * PI * cutoff_hz);
    1.0 / (1.0 + tau / dt)
}

/// Distance between the eyes, never below one pixel.
pub fn iod(landmarks: &[[f32; 2]; 5]) -> f32 {
    let [l, r, ..] = landmarks;
    (r[0] - l[0]).hypot(r[1] - l[1]).max(1.0)
}

/// The mean of the five landmarks.
pub fn centre(landmarks: &[[f32; 2]; 5]) -> [f32; 2] {
    let s = landmarks.iter().fold([0.0, 0.0], |a, p| [a[0] + p[0], a[1] + p[1]]);
    [s[0] / 5.0, s[1] / 5.0]
}

/// The filter state of one track.
#[derive(Debug, Clone, PartialEq)]
pub struct FaceFilter {
    /// The filtered face at `t`.
    face: Face,
    /// Filtered landmark velocity, pixels per second.
    velocity: [[f32; 2]; 5],
    /// Seconds on the caller's clock of the last update.
    t: f64,
}

impl FaceFilter {
    /// A new track starts where it was detected, unsmoothed.
    pub fn new(face: &Face, t: f64) -> FaceFilter {
        FaceFilter { face: face.clone(), velocity: [[0.0; 2]; 5], t }
    }

    pub fn face(&self) -> &Face {
        &self.face
    }

    /// Where the face is at `t` by its filtered velocity (the filtered face
    /// itself when prediction is off).
    pub fn predict(&self, t: f64, s: &SmoothSettings) -> Face {
        let dt = (t - self.t).max(0.0) as f32;
        if !s.predict || dt == 0.0 {
            return self.face.clone();
        }
        let mut lm = self.face.landmarks;
        for (p, v) in lm.iter_mut().zip(&self.velocity) {
            p[0] += v[0] * dt;
            p[1] += v[1] * dt;
        }
        moved(&self.face, lm)
    }

    /// Feeds the detection `raw` seen at `t`; returns the filtered face.
    ///
    /// An alpha-beta filter with the One Euro's adaptive gain: the face is
    /// first moved by its velocity, then pulled toward the detection by
    /// `alpha` and its velocity corrected by `beta = alpha^2 / (2 - alpha)`
    /// (Kalata's relation), so a steady motion is followed without lag and
    /// only the detector's jitter is smoothed away. `alpha` comes from a
    /// cutoff that rises with how far the detection is from the prediction
    /// per second: a face that starts or stops moving is caught quickly.
    pub fn update(&mut self, raw: &Face, t: f64, s: &SmoothSettings) -> &Face {
        let dt = (t - self.t) as f32;
        let predicted = self.predict(t, s);
        let jumped = mean_distance(&predicted.landmarks, &raw.landmarks) > s.reset_iod * iod(&raw.landmarks);
        if !s.enabled || jumped || dt <= 0.0 {
            *self = FaceFilter::new(raw, t);
            return &self.face;
        }
        let mut residual = [[0.0f32; 2]; 5];
        for (r, (z, p)) in residual.iter_mut().zip(raw.landmarks.iter().zip(&predicted.landmarks)) {
            *r = [z[0] - p[0], z[1] - p[1]];
        }
        // One gain for the whole face: it moves as one, and the mean of five
        // points is steadier than any one of them. Within the detector's own
        // jitter the gain stays at its floor; beyond it (the face started,
        // stopped or turned) it rises at once.
        let mean = residual.iter().fold([0.0, 0.0], |a, r| [a[0] + r[0] / 5.0, a[1] + r[1] / 5.0]);
        let scale = iod(&raw.landmarks);
        let surprise = (mean[0].hypot(mean[1]) / scale - noise_iod(s, scale, raw.score)).max(0.0) / dt;
        let a = alpha(s.min_cutoff_hz + s.beta * surprise, dt);
        let b = if s.predict { a * a / (2.0 - a) } else { 0.0 };
        let mut lm = predicted.landmarks;
        for ((p, v), r) in lm.iter_mut().zip(self.velocity.iter_mut()).zip(&residual) {
            for c in 0..2 {
                p[c] += a * r[c];
                v[c] += b * r[c] / dt;
            }
        }
        self.face = Face { score: raw.score, ..moved(raw, lm) };
        self.t = t;
        &self.face
    }
}

/// The detector's jitter for a face of `iod` pixels and `score`, in IOD:
/// `jitter_iod` and [`NOISE_PX`] pixels added in quadrature (independent
/// errors), the pixels weighing more the smaller the face, raised as the
/// score falls (to twice at a score of 0.5). Residuals
/// within it do not raise the cutoff, so small and doubtful faces are
/// smoothed harder.
fn noise_iod(s: &SmoothSettings, iod: f32, score: f32) -> f32 {
    s.jitter_iod.hypot(NOISE_PX / iod.max(1.0)) / score.clamp(0.5, 1.0)
}

fn mean_distance(a: &[[f32; 2]; 5], b: &[[f32; 2]; 5]) -> f32 {
    a.iter().zip(b).map(|(p, q)| (p[0] - q[0]).hypot(p[1] - q[1])).sum::<f32>() / 5.0
}

/// `face` with landmarks `lm`, its box moved and scaled with them.
fn moved(face: &Face, lm: [[f32; 2]; 5]) -> Face {
    let (from, to) = (centre(&face.landmarks), centre(&lm));
    let k = iod(&lm) / iod(&face.landmarks);
    let b = face.bbox;
    let map = |x: f32, y: f32| [to[0] + (x - from[0]) * k, to[1] + (y - from[1]) * k];
    let ([x1, y1], [x2, y2]) = (map(b[0], b[1]), map(b[2], b[3]));
    Face { bbox: [x1, y1, x2, y2], score: face.score, landmarks: lm }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn face_at(x: f32, y: f32) -> Face {
        let lm = [[x - 20.0, y], [x + 20.0, y], [x, y + 15.0], [x - 15.0, y + 30.0], [x + 15.0, y + 30.0]];
        Face { bbox: [x - 40.0, y - 40.0, x + 40.0, y + 60.0], score: 0.9, landmarks: lm }
    }

    /// Deterministic noise in [-1, 1].
    fn noise(i: u32) -> f32 {
        let h = i.wrapping_mul(2_654_435_761).rotate_left(13).wrapping_mul(2_246_822_519);
        (h >> 8) as f32 / (1u32 << 23) as f32 - 1.0
    }

    /// Jitter within `jitter_iod` (80 % of it, on a 40 px IOD) is smoothed
    /// away.
    #[test]
    fn a_still_face_is_smoothed_well_below_its_jitter() {
        let s = SmoothSettings::default();
        let amplitude = 0.8 * s.jitter_iod * 40.0;
        let mut f = FaceFilter::new(&face_at(100.0, 100.0), 0.0);
        let (mut raw_step, mut out_step, mut prev_raw, mut prev_out) = (0.0, 0.0, 100.0, 100.0);
        for i in 1..300 {
            let x = 100.0 + amplitude * noise(i);
            let out = f.update(&face_at(x, 100.0), i as f64 / 15.0, &s).landmarks[2][0];
            if i > 30 {
                raw_step += (x - prev_raw).powi(2);
                out_step += (out - prev_out).powi(2);
            }
            (prev_raw, prev_out) = (x, out);
        }
        assert!(out_step.sqrt() < 0.3 * raw_step.sqrt(), "step {out_step} vs raw {raw_step}");
    }

    #[test]
    fn a_moving_face_is_followed_and_predicted_between_detections() {
        let s = SmoothSettings::default();
        let mut f = FaceFilter::new(&face_at(100.0, 100.0), 0.0);
        // 60 px/s = 1.5 IOD/s, detected every other frame at 15 fps.
        for i in 1..60 {
            let t = i as f64 * 2.0 / 15.0;
            f.update(&face_at(100.0 + 60.0 * t as f32, 100.0), t, &s);
        }
        let t = 59.0 * 2.0 / 15.0;
        let truth = 100.0 + 60.0 * t as f32;
        let lag = truth - f.face().landmarks[2][0];
        assert!(lag.abs() < 4.0, "lag {lag} px");
        let ahead = f.predict(t + 1.0 / 15.0, &s);
        let err = (truth + 4.0 - ahead.landmarks[2][0]).abs();
        assert!(err < 4.0, "prediction one frame ahead is off by {err} px");
        assert!((ahead.bbox[0] - (ahead.landmarks[2][0] - 40.0)).abs() < 1e-3, "the box moves with the landmarks");
    }

    #[test]
    fn a_jump_or_smoothing_off_restarts_at_the_detection() {
        let s = SmoothSettings::default();
        let mut f = FaceFilter::new(&face_at(100.0, 100.0), 0.0);
        f.update(&face_at(101.0, 100.0), 0.1, &s);
        let far = face_at(300.0, 100.0);
        assert_eq!(f.update(&far, 0.2, &s), &far, "a jump resets the filter");
        let near = face_at(302.0, 100.0);
        assert_eq!(f.update(&near, 0.3, &SmoothSettings::OFF), &near);
    }
}
