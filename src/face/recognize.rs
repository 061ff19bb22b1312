//! ArcFace-style recogniser: align on the template, run, keep the raw and the
//! L2-normalised embedding.

use super::{infer_err, input_shapes, FaceError, Result, Template};
use crate::catalog::Catalog;
use crate::infer::{Model, Session, Tensor};
use crate::manifest::{Kind, ModelEntry};
use crate::vision::{pack_nchw, warp_affine_into, RgbImage};

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
    entry: ModelEntry,
    session: Box<dyn Session>,
    input_name: String,
    template: Template,
    crop: RgbImage,
    tensor: Tensor,
}

impl Recognizer {
    pub fn load(catalog: &Catalog, name: Option<&str>) -> Result<Recognizer> {
        let entry = catalog.pick(name, Kind::Recognizer)?.clone();
        let model = catalog.load(&entry, &input_shapes(&entry))?;
        Recognizer::new(entry, &*model)
    }

    pub fn new(entry: ModelEntry, model: &dyn Model) -> Result<Recognizer> {
        let [w, h] = entry.input_size;
        let shape = [1, 3, h as usize, w as usize];
        let input = model.inputs().first().ok_or_else(|| FaceError::Contract {
            model: entry.name.clone(),
            message: "a graph without inputs".into(),
        })?;
        Ok(Recognizer {
            input_name: input.name.clone(),
            session: model.session().map_err(infer_err(&entry))?,
            template: entry.template.unwrap_or(Template::Arcface112V2),
            crop: RgbImage::new(w, h),
            tensor: Tensor::zeros(&shape),
            entry,
        })
    }

    pub fn entry(&self) -> &ModelEntry {
        &self.entry
    }

    /// The aligned crop of the last [`Recognizer::embed`] call.
    pub fn crop(&self) -> &RgbImage {
        &self.crop
    }

    pub fn embed(&mut self, frame: &RgbImage, landmarks: &[[f32; 2]; 5]) -> Result<Embedding> {
        let to_crop = self.template.align(landmarks, self.crop.width())?;
        warp_affine_into(frame, &to_crop, &mut self.crop);
        pack_nchw(&self.crop, self.entry.channels, &self.entry.norm, self.tensor.data_mut());
        let model = &self.entry.name;
        let out = self
            .session
            .run(&[(&self.input_name, &self.tensor)])
            .map_err(|source| FaceError::Infer { model: model.clone(), source })?;
        let (_, t) = out
            .iter()
            .next()
            .ok_or_else(|| FaceError::Contract { model: model.clone(), message: "no output".into() })?;
        if t.is_empty() || t.data().iter().any(|v| !v.is_finite()) {
            return Err(FaceError::Contract {
                model: model.clone(),
                message: "an empty or non-finite embedding".into(),
            });
        }
        Ok(Embedding::from_raw(t.data().to_vec()))
    }
}
