//! Tracking faces between detections: detections are matched to existing
//! tracks by IoU (greedy, best pairs first), unmatched detections start new
//! tracks, and a track survives a few missed detections before it ends.

use super::detect::iou;
use super::Face;

/// A face with a stable id across frames.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Tracked {
    pub id: u64,
    #[serde(flatten)]
    pub face: Face,
    /// Consecutive detections this track was not matched in.
    #[serde(skip)]
    pub missed: u32,
}

#[derive(Debug, Clone)]
pub struct Tracker {
    tracks: Vec<Tracked>,
    next_id: u64,
    /// Smallest IoU that continues a track.
    pub min_iou: f32,
    /// Missed detections after which a track ends.
    pub max_missed: u32,
}

impl Default for Tracker {
    fn default() -> Self {
        Tracker { tracks: Vec::new(), next_id: 1, min_iou: 0.3, max_missed: 2 }
    }
}

impl Tracker {
    /// Feeds one detection result; returns the live tracks that were seen in
    /// it, in detection order.
    pub fn update(&mut self, faces: &[Face]) -> Vec<Tracked> {
        let mut pairs: Vec<(f32, usize, usize)> = Vec::new();
        for (t, track) in self.tracks.iter().enumerate() {
            for (d, face) in faces.iter().enumerate() {
                let o = iou(&track.face.bbox, &face.bbox);
                if o >= self.min_iou {
                    pairs.push((o, t, d));
                }
            }
        }
        pairs.sort_by(|a, b| b.0.total_cmp(&a.0));
        let mut track_of: Vec<Option<usize>> = vec![None; faces.len()];
        let mut used = vec![false; self.tracks.len()];
        for (_, t, d) in pairs {
            if !used[t] && track_of[d].is_none() {
                used[t] = true;
                track_of[d] = Some(t);
            }
        }
        for (t, track) in self.tracks.iter_mut().enumerate() {
            track.missed = if used[t] { 0 } else { track.missed + 1 };
        }
        let mut seen = Vec::with_capacity(faces.len());
        for (d, face) in faces.iter().enumerate() {
            let t = match track_of[d] {
                Some(t) => t,
                None => {
                    self.tracks.push(Tracked { id: self.next_id, face: face.clone(), missed: 0 });
                    self.next_id += 1;
                    self.tracks.len() - 1
                }
            };
            self.tracks[t].face = face.clone();
            seen.push(self.tracks[t].clone());
        }
        let max_missed = self.max_missed;
        self.tracks.retain(|t| t.missed <= max_missed);
        seen
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
        Face { bbox: [x, 0.0, x + 10.0, 10.0], score: 0.9, landmarks: [[0.0; 2]; 5] }
    }

    #[test]
    fn a_moving_face_keeps_its_id_and_a_new_one_gets_the_next() {
        let mut t = Tracker::default();
        let first = t.update(&[face(0.0)]);
        assert_eq!(first[0].id, 1);
        let second = t.update(&[face(50.0), face(2.0)]);
        assert_eq!(second.iter().map(|s| s.id).collect::<Vec<_>>(), vec![2, 1]);
        assert_eq!(second[1].face.bbox[0], 2.0, "the track follows the face");
    }

    #[test]
    fn tracks_survive_short_gaps_and_end_after_max_missed() {
        let mut t = Tracker::default();
        t.update(&[face(0.0)]);
        t.update(&[]);
        t.update(&[]);
        assert_eq!(t.update(&[face(1.0)])[0].id, 1, "two misses are bridged");
        for _ in 0..3 {
            t.update(&[]);
        }
        assert!(t.tracks().is_empty());
        assert_eq!(t.update(&[face(1.0)])[0].id, 2);
    }

    #[test]
    fn each_track_takes_its_best_match_only_once() {
        let mut t = Tracker::default();
        t.update(&[face(0.0), face(12.0)]);
        let next = t.update(&[face(11.0), face(1.0)]);
        assert_eq!(next.iter().map(|s| s.id).collect::<Vec<_>>(), vec![2, 1]);
    }
}
