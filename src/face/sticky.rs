//! `one`'s choice of the face to swap, held from frame to frame: which face
//! it starts with, when it lets go, and who takes a re-detected face's place.
use super::{Face, FaceOrder};
use std::time::{Duration, Instant};

/// `one` starts with the most frontal of the faces at least this share of
/// the largest's area ([`Sticky`]).
pub const SIMILAR_SIZE: f32 = 0.8;

/// When `one` lets go of the face it swaps.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StickySettings {
    /// Another face must be this much larger (0.2 = 20 % more area)...
    pub margin: f32,
    /// ...for this long before `one` switches to it.
    pub hold: Duration,
}

impl Default for StickySettings {
    fn default() -> Self {
        StickySettings { margin: 0.2, hold: Duration::from_secs(1) }
    }
}

/// `one` over a stream: keeps the track it chose for as long as it lives,
/// and switches only to a face that stays clearly larger.
#[derive(Debug, Clone, Default)]
pub struct Sticky {
    pub settings: StickySettings,
    /// Which face is picked when there is none to keep.
    pub order: FaceOrder,
    /// The frame's centre, for [`FaceOrder::Center`].
    pub center: [f32; 2],
    chosen: Option<u64>,
    /// Where the chosen face was last seen: a track that ends and a new one
    /// born there is the same person, re-detected.
    last_box: Option<[f32; 4]>,
    /// The newest track id of the frame the chosen face was last seen in:
    /// tracks with larger ids were born after it.
    newest: u64,
    /// A clearly larger face, and since when it has been.
    challenger: Option<(u64, Instant)>,
}

impl Sticky {
    pub fn new(settings: StickySettings, order: FaceOrder) -> Sticky {
        Sticky { settings, order, ..Sticky::default() }
    }

    /// The track `one` swaps now, if any.
    pub fn chosen(&self) -> Option<u64> {
        self.chosen
    }

    /// The face to start with: the order's first, except that by size the
    /// most frontal face (least yaw) of those within [`SIMILAR_SIZE`] of
    /// the largest's area wins, so a profile does not take the swap from a
    /// face of about its size that looks at the camera.
    fn first(&self, faces: &[Face]) -> Option<usize> {
        let first = self.order.first(faces, self.center)?;
        if self.order != FaceOrder::LargeSmall {
            return Some(first);
        }
        let similar = faces.iter().enumerate().filter(|(_, f)| f.area() >= SIMILAR_SIZE * faces[first].area());
        // Yaws within 10° of each other count as the same pose: the larger face wins.
        let yaw = |f: &Face| super::pose::yaw_pitch(&f.landmarks).0.abs();
        let key = |f: &Face| ((yaw(f) / 10.0).round(), -f.area());
        similar.min_by(|a, b| key(a.1).partial_cmp(&key(b.1)).unwrap_or(std::cmp::Ordering::Equal)).map(|(i, _)| i)
    }

    /// Index into `faces` (track ids `ids`) of the face to swap. `alive`
    /// says whether a track still lives. A chosen track that lives but was
    /// not seen in this frame keeps its place and nothing is swapped,
    /// unless a track born since it was last seen sits where it was: that
    /// is the same person, re-detected under a new track, and takes its
    /// place. With the `large-small` order a clearly larger face takes
    /// over.
    pub fn pick(&mut self, faces: &[Face], ids: &[u64], alive: impl Fn(u64) -> bool, now: Instant) -> Option<usize> {
        let first = self.first(faces)?;
        let Some(chosen) = self.chosen.filter(|c| alive(*c)) else {
            let pick = self.where_last_seen(faces, ids, |_| true).unwrap_or(first);
            return Some(self.choose(faces, ids, pick));
        };
        let Some(at) = ids.iter().position(|id| *id == chosen) else {
            let newest = self.newest;
            let again = self.where_last_seen(faces, ids, |id| id > newest)?;
            return Some(self.choose(faces, ids, again));
        };
        self.last_box = Some(faces[at].bbox);
        self.newest = ids.iter().copied().max().unwrap_or(0);
        let largest = super::largest(faces)?;
        let by_size = self.order == FaceOrder::LargeSmall;
        let bigger = by_size && faces[largest].area() > faces[at].area() * (1.0 + self.settings.margin);
        if !bigger || largest == at {
            self.challenger = None;
            return Some(at);
        }
        let since = match self.challenger {
            Some((id, since)) if id == ids[largest] => since,
            _ => now,
        };
        if now.saturating_duration_since(since) >= self.settings.hold {
            self.chosen = Some(ids[largest]);
            self.challenger = None;
            return Some(largest);
        }
        self.challenger = Some((ids[largest], since));
        Some(at)
    }

    /// The face of an eligible track that overlaps the chosen face's last
    /// box most (IoU at least 0.3).
    fn where_last_seen(&self, faces: &[Face], ids: &[u64], eligible: impl Fn(u64) -> bool) -> Option<usize> {
        let last = self.last_box?;
        let near = faces.iter().enumerate().filter(|(i, _)| eligible(ids[*i]));
        let overlap = near.map(|(i, f)| (i, super::detect::iou(&f.bbox, &last)));
        overlap.filter(|(_, o)| *o >= 0.3).max_by(|a, b| a.1.total_cmp(&b.1)).map(|(i, _)| i)
    }

    fn choose(&mut self, faces: &[Face], ids: &[u64], pick: usize) -> usize {
        (self.chosen, self.challenger, self.last_box) = (Some(ids[pick]), None, Some(faces[pick].bbox));
        self.newest = ids.iter().copied().max().unwrap_or(0);
        pick
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn face(size: f32) -> Face {
        Face { bbox: [0.0, 0.0, size, size], score: 0.9, landmarks: [[0.0; 2]; 5] }
    }

    #[test]
    fn one_starts_with_a_frontal_face_over_a_profile_of_about_its_size() {
        // ArcFace's template, scaled to a box of `size`, the nose moved by `turn` of it.
        let posed = |x: f32, size: f32, turn: f32| {
            let t = [[38.3, 51.7], [73.5, 51.5], [56.0 + turn * 112.0, 71.7], [41.5, 92.4], [70.7, 92.2]];
            let k = size / 112.0;
            Face { bbox: [x, 0.0, x + size, size], score: 0.9, landmarks: t.map(|[a, b]| [x + a * k, b * k]) }
        };
        let mut s = Sticky::new(StickySettings::default(), FaceOrder::LargeSmall);
        let (profile, frontal) = (posed(0.0, 100.0, 0.3), posed(200.0, 92.0, 0.0));
        assert_eq!(s.pick(&[profile.clone(), frontal.clone()], &[1, 2], |_| true, Instant::now()), Some(1));
        let mut s = Sticky::new(StickySettings::default(), FaceOrder::LargeSmall);
        let small = posed(200.0, 60.0, 0.0);
        assert_eq!(
            s.pick(&[profile, small], &[1, 2], |_| true, Instant::now()),
            Some(0),
            "0.36 of the area is not similar"
        );
    }

    #[test]
    fn one_keeps_its_face_until_another_stays_clearly_larger() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut s =
            Sticky::new(StickySettings { margin: 0.2, hold: Duration::from_millis(500) }, FaceOrder::LargeSmall);
        let alive = |_| true;
        assert_eq!(s.pick(&[face(10.0), face(9.0)], &[1, 2], alive, at(0)), Some(0));
        // Similar sizes trade places: no switch.
        assert_eq!(s.pick(&[face(10.0), face(10.5)], &[1, 2], alive, at(100)), Some(0));
        // Clearly larger, but not for long enough yet.
        assert_eq!(s.pick(&[face(10.0), face(12.0)], &[1, 2], alive, at(200)), Some(0));
        assert_eq!(s.pick(&[face(10.0), face(12.0)], &[1, 2], alive, at(600)), Some(0));
        assert_eq!(s.pick(&[face(10.0), face(12.0)], &[1, 2], alive, at(700)), Some(1));
        assert_eq!(s.chosen(), Some(2));
    }

    #[test]
    fn one_switches_when_its_track_ends_and_waits_while_it_is_only_missed() {
        let t = Instant::now();
        let mut s = Sticky::default();
        let elsewhere = |size: f32| Face { bbox: [50.0, 0.0, 50.0 + size, size], ..face(size) };
        assert_eq!(s.pick(&[face(10.0), elsewhere(9.0)], &[1, 2], |_| true, t), Some(0));
        assert_eq!(s.pick(&[elsewhere(9.0)], &[2], |_| true, t), None, "track 1 lives: nothing else is swapped");
        assert_eq!(s.pick(&[elsewhere(9.0)], &[2], |id| id != 1, t), Some(0), "track 1 ended");
        assert_eq!(s.chosen(), Some(2));
    }

    #[test]
    fn a_track_born_where_the_chosen_one_was_last_seen_takes_its_place() {
        let t = Instant::now();
        let mut s = Sticky::default();
        let at = |x: f32| Face { bbox: [x, 0.0, x + 10.0, 10.0], ..face(10.0) };
        assert_eq!(s.pick(&[at(0.0), at(50.0)], &[2, 3], |_| true, t), Some(0));
        // Track 2 is held unseen; track 3, seen beside it before, walks
        // onto its place: it does not take the swap.
        assert_eq!(s.pick(&[at(2.0)], &[3], |_| true, t), None);
        // Track 4, born beside track 2's last box, is track 2's person.
        assert_eq!(s.pick(&[at(50.0), at(3.0)], &[3, 4], |_| true, t), Some(1));
        assert_eq!(s.chosen(), Some(4));
        assert_eq!(s.pick(&[at(4.0)], &[4], |_| true, t), Some(0), "and keeps it");
    }

    #[test]
    fn the_order_decides_the_first_pick_and_only_large_small_lets_a_larger_face_take_over() {
        let at =
            |x: f32, size: f32, score: f32| Face { bbox: [x, 0.0, x + size, size], score, landmarks: [[0.0; 2]; 5] };
        let faces = [at(300.0, 20.0, 0.9), at(10.0, 40.0, 0.5), at(150.0, 30.0, 0.7)];
        let first = |o: FaceOrder| o.first(&faces, [165.0, 15.0]);
        assert_eq!(first(FaceOrder::LeftRight), Some(1));
        assert_eq!(first(FaceOrder::RightLeft), Some(0));
        assert_eq!(first(FaceOrder::LargeSmall), Some(1));
        assert_eq!(first(FaceOrder::SmallLarge), Some(0));
        assert_eq!(first(FaceOrder::BestWorst), Some(0));
        assert_eq!(first(FaceOrder::Center), Some(2));
        let t = Instant::now();
        let mut s = Sticky::new(StickySettings { margin: 0.0, hold: Duration::ZERO }, FaceOrder::LeftRight);
        assert_eq!(s.pick(&faces, &[1, 2, 3], |_| true, t), Some(1));
        let grown = [at(300.0, 90.0, 0.9), at(10.0, 40.0, 0.5), at(150.0, 30.0, 0.7)];
        assert_eq!(
            s.pick(&grown, &[1, 2, 3], |_| true, t + Duration::from_secs(5)),
            Some(1),
            "left-right keeps its face"
        );
        assert_eq!(FaceOrder::parse("center"), Some(FaceOrder::Center));
        assert_eq!(FaceOrder::parse("middle"), None);
    }
}
