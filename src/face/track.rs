//! Tracking faces between detections: detections are matched to the
//! tracks' predicted boxes by IoU (greedy, best pairs first), then the
//! rest by the distance of their landmarks from where each track's motion
//! puts it; unmatched detections start new tracks, and a track is held
//! through missed detections for [`HOLD_S`] before it ends. Each track's
//! landmarks go through its own [`FaceFilter`]; between detections the
//! tracks are moved to where their motion says they are.

use super::detect::iou;
use super::smooth::{FaceFilter, SmoothSettings};
use super::Face;

/// How long a track is held through missed detections, seconds.
pub const HOLD_S: f64 = 0.5;
/// The second match: a detection whose box centre lies within this share
/// of a track's predicted box width from its centre, its box width within
/// 1/`MAX_SCALE`..`MAX_SCALE` of the track's, continues it. Boxes, not
/// the eyes' distance, since a turning head's eyes close up.
const NEAR_WIDTH: f32 = 0.5;
const MAX_SCALE: f32 = 1.6;

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
    /// When a detection last matched it, seconds on the tracker's clock.
    #[serde(skip)]
    seen_at: f64,
    #[serde(skip)]
    filter: FaceFilter,
}

#[derive(Debug, Clone)]
pub struct Tracker {
    tracks: Vec<Tracked>,
    next_id: u64,
    /// Smallest IoU that continues a track.
    pub min_iou: f32,
    /// Seconds without a matching detection after which a track ends.
    pub hold_s: f64,
    pub smoothing: SmoothSettings,
}

impl Default for Tracker {
    fn default() -> Self {
        Tracker { tracks: Vec::new(), next_id: 1, min_iou: 0.3, hold_s: HOLD_S, smoothing: SmoothSettings::OFF }
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
            if seen {
                track.seen_at = t;
            }
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
                    self.tracks.push(Tracked { id, face: face.clone(), age: 1, missed: 0, seen_at: t, filter });
                    self.tracks.len() - 1
                }
            };
            seen.push(self.tracks[t_ix].clone());
        }
        let hold = self.hold_s;
        self.tracks.retain(|k| t - k.seen_at <= hold + 1e-9);
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
    /// where each track is predicted to be at `t`, best first, then the
    /// rest by the distance of the landmarks' centres, nearest first.
    fn match_detections(&self, faces: &[Face], t: f64) -> Vec<Option<usize>> {
        let predicted: Vec<Face> = self.tracks.iter().map(|k| k.filter.predict(t, &self.smoothing)).collect();
        let mut track_of: Vec<Option<usize>> = vec![None; faces.len()];
        let mut used = vec![false; self.tracks.len()];
        let by_overlap = |at: &Face, face: &Face| {
            let o = iou(&at.bbox, &face.bbox);
            (o >= self.min_iou).then_some(-o)
        };
        pair_greedily(&predicted, faces, by_overlap, &mut used, &mut track_of);
        pair_greedily(&predicted, faces, near, &mut used, &mut track_of);
        track_of
    }

    /// Gives live track `from` the id `to` (a re-identified person's own);
    /// a track still holding `to` (missed, held) is dropped for it.
    pub fn rename(&mut self, from: u64, to: u64) {
        self.tracks.retain(|k| k.id != to);
        for k in self.tracks.iter_mut().filter(|k| k.id == from) {
            k.id = to;
        }
    }

    /// Live tracks, including ones missed in the last few detections.
    pub fn tracks(&self) -> &[Tracked] {
        &self.tracks
    }
}

/// Pairs the free tracks (`used` false) with the free detections by
/// `cost` (None: no pair), least first, each at most once.
fn pair_greedily(
    tracks: &[Face],
    faces: &[Face],
    cost: impl Fn(&Face, &Face) -> Option<f32>,
    used: &mut [bool],
    track_of: &mut [Option<usize>],
) {
    let mut pairs: Vec<(f32, usize, usize)> = Vec::new();
    for (k, at) in tracks.iter().enumerate().filter(|(k, _)| !used[*k]) {
        for (d, face) in faces.iter().enumerate().filter(|(d, _)| track_of[*d].is_none()) {
            if let Some(c) = cost(at, face) {
                pairs.push((c, k, d));
            }
        }
    }
    pairs.sort_by(|a, b| a.0.total_cmp(&b.0));
    for (_, k, d) in pairs {
        if !used[k] && track_of[d].is_none() {
            used[k] = true;
            track_of[d] = Some(k);
        }
    }
}

/// A detection near a track's predicted box at a similar size: the
/// distance of their centres in the track's box widths.
fn near(at: &Face, face: &Face) -> Option<f32> {
    box_distance(&at.bbox, &face.bbox, MAX_SCALE).filter(|d| *d < NEAR_WIDTH)
}

/// The distance of two boxes' centres in `a`'s width, when their widths
/// are within 1/`max_scale`..`max_scale` of each other.
pub fn box_distance(a: &[f32; 4], b: &[f32; 4], max_scale: f32) -> Option<f32> {
    let (wa, wb) = ((a[2] - a[0]).max(1.0), (b[2] - b[0]).max(1.0));
    let d = ((a[0] + a[2] - b[0] - b[2]) / 2.0).hypot((a[1] + a[3] - b[1] - b[3]) / 2.0) / wa;
    (wb / wa < max_scale && wa / wb < max_scale).then_some(d)
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
    fn tracks_are_held_through_half_a_second_of_misses_and_end_after() {
        let mut t = Tracker::default();
        t.update(&[face(0.0)], 0.0);
        for i in 1..6 {
            t.update(&[], i as f64 * 0.1);
        }
        assert_eq!(t.update(&[face(1.0)], 0.5)[0].id, 1, "0.5 s of misses are bridged");
        for i in 6..11 {
            t.update(&[], 0.5 + i as f64 * 0.1);
        }
        assert!(t.tracks().is_empty(), "{:?}", t.tracks());
        assert_eq!(t.update(&[face(1.0)], 1.6)[0].id, 2);
    }

    #[test]
    fn a_detection_that_overlaps_too_little_but_sits_near_the_prediction_continues_the_track() {
        let mut t = Tracker::default();
        t.update(&[face(0.0)], 0.0);
        // A turning head's box, moved by under half its width: IoU 0.28.
        let mut turned = face(4.5);
        turned.bbox = [4.5, 2.0, 14.5, 12.0];
        assert!(iou(&turned.bbox, &face(0.0).bbox) < 0.3);
        assert_eq!(t.update(&[turned], 0.1)[0].id, 1);
        assert_eq!(t.update(&[face(40.0)], 0.2)[0].id, 2, "a face four widths away is another person");
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
