//! Tracking faces between detections: detections are matched to the
//! tracks' predicted boxes by IoU (greedy, best pairs first), unmatched
//! detections start new tracks, and a track survives a few missed
//! detections before it ends. Each track's landmarks go through its own
//! [`FaceFilter`]; between detections the tracks are moved to where their
//! motion says they are.

use super::detect::iou;
use super::smooth::{FaceFilter, SmoothSettings};
use super::Face;

/// A face with a stable id across frames.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Tracked {
    pub id: u64,
    /// Smoothed (and, between detections, predicted) face.
    #[serde(flatten)]
    pub face: Face,
    /// Frames this track has been live, counting the one it started on.
    pub age: u64,
    /// Consecutive detections this track was not matched in.
    #[serde(skip)]
    pub missed: u32,
    #[serde(skip)]
    filter: FaceFilter,
}

#[derive(Debug, Clone)]
pub struct Tracker {
    tracks: Vec<Tracked>,
    next_id: u64,
    /// Smallest IoU that continues a track.
    pub min_iou: f32,
    /// Missed detections after which a track ends.
    pub max_missed: u32,
    pub smoothing: SmoothSettings,
}

impl Default for Tracker {
    fn default() -> Self {
        Tracker { tracks: Vec::new(), next_id: 1, min_iou: 0.3, max_missed: 2, smoothing: SmoothSettings::OFF }
    }
}

impl Tracker {
    pub fn new(smoothing: SmoothSettings) -> Tracker {
        Tracker { smoothing, ..Tracker::default() }
    }

    /// Feeds one detection result made at `t` (seconds on the caller's
    /// clock); returns the live tracks that were seen in it, in detection
    /// order.
    pub fn update(&mut self, faces: &[Face], t: f64) -> Vec<Tracked> {
        let track_of = self.match_detections(faces, t);
        for (i, track) in self.tracks.iter_mut().enumerate() {
            let seen = track_of.contains(&Some(i));
            track.missed = if seen { 0 } else { track.missed + 1 };
            track.age += 1;
        }
        let mut seen = Vec::with_capacity(faces.len());
        for (d, face) in faces.iter().enumerate() {
            let t_ix = match track_of[d] {
                Some(i) => {
                    let track = &mut self.tracks[i];
                    track.face = track.filter.update(face, t, &self.smoothing).clone();
                    i
                }
                None => {
                    let filter = FaceFilter::new(face, t);
                    let id = self.next_id;
                    self.next_id += 1;
                    self.tracks.push(Tracked { id, face: face.clone(), age: 1, missed: 0, filter });
                    self.tracks.len() - 1
                }
            };
            seen.push(self.tracks[t_ix].clone());
        }
        let max_missed = self.max_missed;
        self.tracks.retain(|t| t.missed <= max_missed);
        seen
    }

    /// A frame without detection at `t`: `seen` (the tracks of the last
    /// detection) moved to where their motion says they are now.
    pub fn predict(&mut self, seen: &mut [Tracked], t: f64) {
        for track in self.tracks.iter_mut() {
            track.age += 1;
        }
        for s in seen.iter_mut() {
            if let Some(track) = self.tracks.iter().find(|k| k.id == s.id) {
                s.face = track.filter.predict(t, &self.smoothing);
                s.age = track.age;
            }
        }
    }

    /// Every live track where its motion says it is at `t` (nothing about
    /// the tracks changes).
    pub fn predicted(&self, t: f64) -> Vec<Tracked> {
        let mut at = self.tracks.clone();
        for track in at.iter_mut() {
            track.face = track.filter.predict(t, &self.smoothing);
        }
        at
    }

    /// Feeds detections made at `t` for some tracks only (a refinement on
    /// crops around them, after [`Tracker::predict`]): their filters take
    /// them and `seen` shows the result; other tracks keep their prediction.
    pub fn correct(&mut self, seen: &mut [Tracked], found: &[(u64, Face)], t: f64) {
        for (id, face) in found {
            let Some(track) = self.tracks.iter_mut().find(|k| k.id == *id) else { continue };
            track.face = track.filter.update(face, t, &self.smoothing).clone();
            if let Some(s) = seen.iter_mut().find(|s| s.id == *id) {
                s.face = track.face.clone();
            }
        }
    }

    /// For each detection, the track it continues: pairs by IoU against
    /// where each track is predicted to be at `t`.
    fn match_detections(&self, faces: &[Face], t: f64) -> Vec<Option<usize>> {
        let mut pairs: Vec<(f32, usize, usize)> = Vec::new();
        for (k, track) in self.tracks.iter().enumerate() {
            let at = track.filter.predict(t, &self.smoothing);
            for (d, face) in faces.iter().enumerate() {
                let o = iou(&at.bbox, &face.bbox);
                if o >= self.min_iou {
                    pairs.push((o, k, d));
                }
            }
        }
        pairs.sort_by(|a, b| b.0.total_cmp(&a.0));
        let mut track_of: Vec<Option<usize>> = vec![None; faces.len()];
        let mut used = vec![false; self.tracks.len()];
        for (_, k, d) in pairs {
            if !used[k] && track_of[d].is_none() {
                used[k] = true;
                track_of[d] = Some(k);
            }
        }
        track_of
    }

    /// Live tracks, including ones missed in the last few detections.
    pub fn tracks(&self) -> &[Tracked] {
        &self.tracks
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn face(x: f32) -> Face {
        let lm = [[x + 3.0, 3.0], [x + 7.0, 3.0], [x + 5.0, 5.0], [x + 3.0, 7.0], [x + 7.0, 7.0]];
        Face { bbox: [x, 0.0, x + 10.0, 10.0], score: 0.9, landmarks: lm }
    }

    #[test]
    fn a_moving_face_keeps_its_id_and_a_new_one_gets_the_next() {
        let mut t = Tracker::default();
        let first = t.update(&[face(0.0)], 0.0);
        assert_eq!(first[0].id, 1);
        let second = t.update(&[face(50.0), face(2.0)], 0.1);
        assert_eq!(second.iter().map(|s| s.id).collect::<Vec<_>>(), vec![2, 1]);
        assert_eq!(second[1].face.bbox[0], 2.0, "the track follows the face");
        assert_eq!((second[0].age, second[1].age), (1, 2));
    }

    #[test]
    fn tracks_survive_short_gaps_and_end_after_max_missed() {
        let mut t = Tracker::default();
        t.update(&[face(0.0)], 0.0);
        t.update(&[], 0.1);
        t.update(&[], 0.2);
        assert_eq!(t.update(&[face(1.0)], 0.3)[0].id, 1, "two misses are bridged");
        for i in 0..3 {
            t.update(&[], 0.4 + i as f64 * 0.1);
        }
        assert!(t.tracks().is_empty());
        assert_eq!(t.update(&[face(1.0)], 1.0)[0].id, 2);
    }

    #[test]
    fn each_track_takes_its_best_match_only_once() {
        let mut t = Tracker::default();
        t.update(&[face(0.0), face(12.0)], 0.0);
        let next = t.update(&[face(11.0), face(1.0)], 0.1);
        assert_eq!(next.iter().map(|s| s.id).collect::<Vec<_>>(), vec![2, 1]);
    }

    #[test]
    fn a_refinement_corrects_the_tracks_it_found_and_leaves_the_rest_predicted() {
        let mut t = Tracker::new(SmoothSettings::default());
        let mut seen = t.update(&[face(0.0), face(50.0)], 0.0);
        t.predict(&mut seen, 0.1);
        let predicted = seen[1].face.clone();
        t.correct(&mut seen, &[(1, face(3.0))], 0.1);
        assert!(seen[0].face.bbox[0] > 0.0, "track 1 moved toward its refinement");
        assert_eq!(seen[1].face, predicted, "track 2 keeps its prediction");
        assert_eq!(t.tracks().len(), 2, "a refinement ends no track");
    }

    #[test]
    fn between_detections_tracks_move_by_their_velocity() {
        let mut t = Tracker::new(SmoothSettings::default());
        let mut seen = Vec::new();
        for i in 0..30 {
            seen = t.update(&[face(i as f32 * 2.0)], i as f64 * 0.1);
        }
        let before = seen[0].face.landmarks[2][0];
        t.predict(&mut seen, 3.0);
        let after = seen[0].face.landmarks[2][0];
        assert!(after - before > 1.0, "predicted {before} -> {after}: the face moves at 20 px/s");
        assert_eq!(seen[0].age, 31);
    }
}
