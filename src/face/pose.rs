//! Head pose from the five landmarks, and the per-face fade of the swap
//! for heads turned past `pipeline.max_yaw_deg`.
//!
//! Yaw: in the frame of the eye line (roll removed), the nose tip's offset
//! between the eyes. A head modelled as a cylinder with the eyes 30° either
//! side of the front and the nose tip standing out 0.3 of its radius gives
//! `(dl - dr) / (dl + dr) = tan(yaw) × 0.87`, where `dl` and `dr` are the
//! nose tip's distances from the left and right eye along the eye line.
//! Pitch: the nose tip's place between the eye line and the mouth line,
//! against where the ArcFace template puts it (0.495 of the way down), on
//! the same scale.

use super::Face;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// `(dl - dr) / (dl + dr)` at 45° of yaw, and the pitch's equivalent.
const TAN_SCALE: f32 = 0.87;
/// Where the nose tip sits between the eye and mouth lines on a frontal face.
const NOSE_DOWN: f32 = 0.495;
/// How long a fade out or in takes.
pub const FADE: Duration = Duration::from_millis(150);

/// Yaw and pitch in degrees: yaw positive with the nose toward the image's
/// right, pitch positive looking up. Within -90..=90.
pub fn yaw_pitch(lm: &[[f32; 2]; 5]) -> (f32, f32) {
    let [le, re, nose, ml, mr] = *lm;
    let (ex, ey) = (re[0] - le[0], re[1] - le[1]);
    let len = ex.hypot(ey).max(1e-3);
    let (u, v) = ([ex / len, ey / len], [-ey / len, ex / len]);
    let dot = |a: [f32; 2], b: [f32; 2], w: [f32; 2]| (a[0] - b[0]) * w[0] + (a[1] - b[1]) * w[1];
    let (dl, dr) = (dot(nose, le, u), dot(re, nose, u));
    let yaw = ((dl - dr) / (dl + dr).abs().max(1e-3) / TAN_SCALE).atan();
    let eyes = [(le[0] + re[0]) / 2.0, (le[1] + re[1]) / 2.0];
    let mouth = [(ml[0] + mr[0]) / 2.0, (ml[1] + mr[1]) / 2.0];
    let (down, span) = (dot(nose, eyes, v), dot(mouth, eyes, v));
    let pitch = if span.abs() < 1e-3 { 0.0 } else { (2.0 * (NOSE_DOWN - down / span) / TAN_SCALE).atan() };
    (yaw.to_degrees(), pitch.to_degrees())
}

/// The level each track's swap is pasted at: 1 while the head faces the
/// camera within `max_yaw_deg`, moving to 0 over [`FADE`] when it turns
/// further and back to 1 when it turns back. A track seen for the first
/// time starts where its pose says.
#[derive(Debug, Clone, Default)]
pub struct Fader {
    levels: HashMap<u64, (f32, Instant)>,
}

impl Fader {
    /// Each face's level now (faces with track ids `ids`); at a
    /// `max_yaw_deg` of 90 or more every level is 1.
    pub fn levels(&mut self, faces: &[Face], ids: &[u64], max_yaw_deg: f32, now: Instant) -> Vec<f32> {
        self.levels.retain(|id, _| ids.contains(id));
        faces
            .iter()
            .zip(ids)
            .map(|(f, id)| {
                let target =
                    if max_yaw_deg < 90.0 && yaw_pitch(&f.landmarks).0.abs() > max_yaw_deg { 0.0 } else { 1.0 };
                let (level, at) = self.levels.entry(*id).or_insert((target, now));
                let step = now.saturating_duration_since(*at).as_secs_f32() / FADE.as_secs_f32();
                *level = if target > *level { (*level + step).min(target) } else { (*level - step).max(target) };
                *at = now;
                *level
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ArcFace's 112×112 template: a frontal face.
    const FRONTAL: [[f32; 2]; 5] = [[38.29, 51.70], [73.53, 51.50], [56.03, 71.74], [41.55, 92.37], [70.73, 92.20]];

    fn face(lm: [[f32; 2]; 5]) -> Face {
        Face { bbox: [0.0, 0.0, 112.0, 112.0], score: 0.9, landmarks: lm }
    }

    #[test]
    fn a_frontal_face_has_no_yaw_or_pitch_and_a_turned_or_raised_one_has() {
        let (yaw, pitch) = yaw_pitch(&FRONTAL);
        assert!(yaw.abs() < 2.0 && pitch.abs() < 2.0, "{yaw} {pitch}");
        let mut right = FRONTAL;
        right[2][0] += 14.0; // the nose tip near the right eye
        let (yaw, _) = yaw_pitch(&right);
        assert!(yaw > 35.0, "{yaw}");
        let mut up = FRONTAL;
        up[2][1] -= 8.0;
        assert!(yaw_pitch(&up).1 > 15.0);
        // Roll does not read as yaw: the template turned by 30°.
        let (s, c) = 30f32.to_radians().sin_cos();
        let rolled = FRONTAL.map(|[x, y]| [c * x - s * y, s * x + c * y]);
        assert!(yaw_pitch(&rolled).0.abs() < 2.0);
    }

    #[test]
    fn a_turned_head_fades_out_over_150_ms_and_back_in() {
        let mut profile = FRONTAL;
        profile[2][0] = 90.0; // well past the right eye
        let mut fader = Fader::default();
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        assert_eq!(fader.levels(&[face(FRONTAL)], &[1], 60.0, at(0)), vec![1.0]);
        let half = fader.levels(&[face(profile)], &[1], 60.0, at(75))[0];
        assert!((half - 0.5).abs() < 0.01, "{half}");
        assert_eq!(fader.levels(&[face(profile)], &[1], 60.0, at(150)), vec![0.0]);
        assert_eq!(fader.levels(&[face(FRONTAL)], &[1], 60.0, at(300)), vec![1.0]);
        assert_eq!(fader.levels(&[face(profile)], &[2], 60.0, at(300)), vec![0.0], "a new track starts as posed");
        assert_eq!(fader.levels(&[face(profile)], &[3], 90.0, at(400)), vec![1.0], "90° turns fading off");
    }
}
