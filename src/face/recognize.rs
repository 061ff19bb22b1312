//! ArcFace-style recogniser: align on the template, run, keep the raw and the
//! L2-normalised embedding.

use super::aligned::AlignedModel;
use super::{FaceError, Result};
use crate::infer::Model;
use crate::manifest::ModelEntry;
use crate::vision::{RgbImage, Template};

/// An identity vector: the model's raw output and its L2-normalised form.
#[derive(Debug, Clone, PartialEq)]
pub struct Embedding {
    pub raw: Vec<f32>,
    pub normed: Vec<f32>,
}

impl Embedding {
    pub fn from_raw(raw: Vec<f32>) -> Embedding {
        let norm = raw.iter().map(|v| v * v).sum::<f32>().sqrt().max(1e-12);
        let normed = raw.iter().map(|v| v / norm).collect();
        Embedding { raw, normed }
    }

    /// The mean of `all`'s normalised vectors (one identity from several
    /// photos, as FaceFusion averages its source images); `None` when `all`
    /// is empty or the lengths differ.
    pub fn mean(all: &[Embedding]) -> Option<Embedding> {
        let n = all.first()?.normed.len();
        if all.iter().any(|e| e.normed.len() != n) {
            return None;
        }
        let mut sum = vec![0.0f32; n];
        for e in all {
            sum.iter_mut().zip(&e.normed).for_each(|(s, v)| *s += v / all.len() as f32);
        }
        Some(Embedding::from_raw(sum))
    }

    /// Cosine similarity of the normalised vectors.
    pub fn cosine(&self, other: &Embedding) -> f32 {
        self.normed.iter().zip(&other.normed).map(|(a, b)| a * b).sum()
    }

    /// FaceFusion's face distance on a 0..1 scale: (1 − cosine) / 2.
    pub fn distance(&self, other: &Embedding) -> f32 {
        (1.0 - self.cosine(other)) / 2.0
    }
}

pub struct Recognizer {
    model: AlignedModel,
}

impl Recognizer {
    pub fn new(entry: ModelEntry, model: &dyn Model) -> Result<Recognizer> {
        Ok(Recognizer { model: AlignedModel::new(entry, model, None, Template::Arcface112V2)? })
    }

    /// Time the last run spent inside the inference engine.
    pub fn last_inference(&self) -> std::time::Duration {
        self.model.last_inference
    }

    pub fn entry(&self) -> &ModelEntry {
        &self.model.entry
    }

    pub fn embed(&mut self, frame: &RgbImage, landmarks: &[[f32; 2]; 5]) -> Result<Embedding> {
        let mut raw = Vec::new();
        self.model.run(frame, landmarks, &[], None, |t| raw = t.data().to_vec())?;
        if raw.iter().any(|v| !v.is_finite()) {
            let model = self.model.entry.name.clone();
            return Err(FaceError::Contract { model, message: "a non-finite embedding".into() });
        }
        Ok(Embedding::from_raw(raw))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mean_of_identities_lies_between_them_and_is_normalised() {
        let (a, b) = (Embedding::from_raw(vec![3.0, 0.0]), Embedding::from_raw(vec![0.0, 1.0]));
        let m = Embedding::mean(&[a.clone(), b.clone()]).unwrap();
        assert!((m.normed[0] - m.normed[1]).abs() < 1e-6 && (m.cosine(&a) - m.cosine(&b)).abs() < 1e-6);
        assert!((m.normed.iter().map(|v| v * v).sum::<f32>() - 1.0).abs() < 1e-5);
        assert!(Embedding::mean(&[]).is_none());
        assert!(Embedding::mean(&[a, Embedding::from_raw(vec![1.0; 3])]).is_none());
    }
}
