//! Which detected faces get swapped.

use super::{Embedding, Face};

/// Face selection mode.
#[derive(Debug, Clone)]
pub enum Selector {
    /// Only the largest face.
    One,
    /// Every face.
    Many,
    /// The face closest to `reference`, if its distance ((1 − cos)/2) is
    /// below `max_distance` (FaceFusion's default 0.3).
    Reference { reference: Embedding, max_distance: f32 },
}

impl Selector {
    pub fn needs_embeddings(&self) -> bool {
        matches!(self, Selector::Reference { .. })
    }

    /// Indices into `faces` to swap. `embeddings` is parallel to `faces` and
    /// only consulted in reference mode.
    pub fn select(&self, faces: &[Face], embeddings: &[Embedding]) -> Vec<usize> {
        match self {
            Selector::Many => (0..faces.len()).collect(),
            Selector::One => super::largest(faces).into_iter().collect(),
            Selector::Reference { reference, max_distance } => embeddings
                .iter()
                .enumerate()
                .map(|(i, e)| (i, reference.distance(e)))
                .filter(|(_, d)| d < max_distance)
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .map(|(i, _)| i)
                .into_iter()
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn face(size: f32) -> Face {
        Face { bbox: [0.0, 0.0, size, size], score: 0.9, landmarks: [[0.0; 2]; 5] }
    }

    #[test]
    fn one_picks_the_largest_face() {
        assert_eq!(Selector::One.select(&[face(10.0), face(30.0), face(20.0)], &[]), vec![1]);
        assert!(Selector::One.select(&[], &[]).is_empty());
    }

    #[test]
    fn reference_picks_the_closest_face_within_the_threshold() {
        let r = Embedding::from_raw(vec![1.0, 0.0]);
        let near = Embedding::from_raw(vec![0.9, 0.1]);
        let far = Embedding::from_raw(vec![-1.0, 0.2]);
        let sel = Selector::Reference { reference: r, max_distance: 0.3 };
        assert_eq!(sel.select(&[face(1.0), face(2.0)], &[far.clone(), near]), vec![1]);
        assert!(sel.select(&[face(1.0)], &[far]).is_empty());
    }
}
