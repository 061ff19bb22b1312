//! Re-identification: a track's identity (its face's embedding at birth)
//! is remembered, and kept for [`Reid::KEEP_S`] after the track ends; a new
//! track whose identity is within the distance of a remembered one takes
//! that id back. A person who was hidden or left for longer than the
//! tracker holds a track comes back as themselves, so `one` keeps its face
//! and the ids in `faces` stay the person's.

use super::track::box_distance;
use super::Embedding;
use std::collections::HashMap;

#[derive(Debug, Clone, Default)]
pub struct Reid {
    /// Live tracks' identities.
    live: HashMap<u64, Embedding>,
    /// Ended tracks: id, identity, when they ended (tracker seconds).
    lost: Vec<(u64, Embedding, f64)>,
}

impl Reid {
    /// How long an ended track's identity is kept, seconds.
    pub const KEEP_S: f64 = 10.0;
    /// Ended tracks kept at most (the oldest go first).
    pub const MAX_LOST: usize = 16;
    /// Faces with fewer pixels between the eyes are not re-identified:
    /// their embeddings are too coarse to tell people apart.
    pub const MIN_IOD_PX: f32 = 16.0;
    /// A held track gives its id only to a new track whose box is within
    /// this many of the held box's widths (centre to centre) and at most
    /// [`Reid::HELD_SCALE`] times larger or smaller: a turning head found
    /// again beside its track, not another person after a cut whose face
    /// looks alike.
    pub const HELD_WIDTHS: f32 = 2.0;
    /// See [`Reid::HELD_WIDTHS`].
    pub const HELD_SCALE: f32 = 2.0;

    /// Remembers live track `id`'s identity.
    pub fn remember(&mut self, id: u64, identity: Embedding) {
        self.live.insert(id, identity);
    }

    /// Tracks `alive` no longer knows move to the ended list, stamped `t`;
    /// identities older than [`Reid::KEEP_S`] are forgotten.
    pub fn retire(&mut self, alive: impl Fn(u64) -> bool, t: f64) {
        let ended: Vec<u64> = self.live.keys().copied().filter(|id| !alive(*id)).collect();
        for id in ended {
            if let Some(identity) = self.live.remove(&id) {
                self.lost.push((id, identity, t));
            }
        }
        self.lost.retain(|(_, _, at)| t - at <= Self::KEEP_S);
        let over = self.lost.len().saturating_sub(Self::MAX_LOST);
        self.lost.drain(..over);
    }

    /// The held track (live, but missed by the last detections: `held`)
    /// `identity` is, nearest within `max_distance`: a turning head the
    /// detector found again too far from its track to continue it.
    pub fn recognise_held(&self, identity: &Embedding, held: impl Fn(u64) -> bool, max_distance: f32) -> Option<u64> {
        let near = self.live.iter().filter(|(id, _)| held(**id)).map(|(id, e)| (*id, identity.distance(e)));
        near.filter(|(_, d)| *d <= max_distance).min_by(|a, b| a.1.total_cmp(&b.1)).map(|(id, _)| id)
    }

    /// Whether a new track's box `new` is beside held track's box `held`
    /// (see [`Reid::HELD_WIDTHS`]).
    pub fn beside(held: &[f32; 4], new: &[f32; 4]) -> bool {
        box_distance(held, new, Self::HELD_SCALE).is_some_and(|d| d < Self::HELD_WIDTHS)
    }

    /// Forgets live track `id` (its person continues under another id).
    pub fn forget(&mut self, id: u64) {
        self.live.remove(&id);
    }

    /// The ended track `identity` is (the nearest within `max_distance`,
    /// `(1 - cos) / 2`), taken off the ended list.
    pub fn recognise(&mut self, identity: &Embedding, max_distance: f32) -> Option<u64> {
        let (at, _) = self
            .lost
            .iter()
            .enumerate()
            .map(|(i, (_, e, _))| (i, identity.distance(e)))
            .filter(|(_, d)| *d <= max_distance)
            .min_by(|a, b| a.1.total_cmp(&b.1))?;
        Some(self.lost.remove(at).0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(v: &[f32]) -> Embedding {
        Embedding::from_raw(v.to_vec())
    }

    #[test]
    fn an_ended_track_is_recognised_by_its_identity_once_and_forgotten_after_keep() {
        let mut r = Reid::default();
        r.remember(1, e(&[1.0, 0.0]));
        r.remember(2, e(&[0.0, 1.0]));
        r.retire(|id| id == 2, 5.0);
        assert_eq!(r.recognise(&e(&[0.0, 1.0]), 0.3), None, "track 2 lives: nobody to take back");
        assert_eq!(r.recognise(&e(&[0.95, 0.1]), 0.3), Some(1));
        assert_eq!(r.recognise(&e(&[1.0, 0.0]), 0.3), None, "taken back once");
        r.remember(3, e(&[1.0, 0.0]));
        r.retire(|_| false, 6.0);
        assert_eq!(r.recognise(&e(&[-1.0, 0.0]), 0.3), None, "another person");
        r.retire(|_| false, 6.0 + Reid::KEEP_S + 1.0);
        assert_eq!(r.recognise(&e(&[1.0, 0.0]), 0.3), None, "forgotten after KEEP_S");
    }

    #[test]
    fn a_held_track_is_beside_a_new_box_near_it_at_a_similar_size_only() {
        let held = [100.0, 100.0, 140.0, 150.0];
        assert!(Reid::beside(&held, &[150.0, 100.0, 190.0, 150.0]), "1.25 widths to the side");
        assert!(!Reid::beside(&held, &[200.0, 100.0, 240.0, 150.0]), "2.5 widths away");
        assert!(!Reid::beside(&held, &[100.0, 100.0, 190.0, 210.0]), "2.25 times as wide");
    }

    #[test]
    fn a_held_track_is_recognised_only_while_it_is_held() {
        let mut r = Reid::default();
        r.remember(7, e(&[1.0, 0.0]));
        assert_eq!(r.recognise_held(&e(&[0.9, 0.1]), |id| id == 7, 0.3), Some(7));
        assert_eq!(r.recognise_held(&e(&[0.9, 0.1]), |_| false, 0.3), None, "seen this frame: not held");
        r.forget(7);
        assert_eq!(r.recognise_held(&e(&[0.9, 0.1]), |_| true, 0.3), None);
    }
}
