//! The face pipeline: detect → align → embed → swap → paste back. Every
//! stage is built over a model that is already loaded (the store's job), so
//! nothing here finds, verifies or loads files.

mod aligned;
pub mod detect;
mod enhance;
mod landmark68;
mod live;
mod mapping;
mod mouth;
mod pipeline;
pub mod pose;
mod recognize;
mod refine;
mod reid;
mod select;
pub mod smooth;
pub mod stability;
mod sticky;
mod stream_events;
pub mod stream_record;
pub mod stream_score;
mod swap;
mod track;

pub use detect::Detector;
pub use enhance::Enhancer;
pub use landmark68::Landmarker;
pub use live::{FrameReport, LivePipeline, LiveSettings};
pub use mapping::Mappings;
pub use mouth::{cut_mouth, inside as in_polygon, MouthSettings};
pub use pipeline::{FusionPipeline, PipelineSettings, StageTimings};
pub use recognize::{Embedding, Recognizer};
pub use select::{Blend, FaceOrder, Selector, SelectorMode, REFERENCE_DISTANCE};
pub use smooth::SmoothSettings;
pub use sticky::{Sticky, StickySettings};
pub use swap::{ColorTransfer, MaskSettings, Swapper};
pub use track::{Tracked, Tracker};

use crate::infer::InferError;
use crate::manifest::ModelEntry;
use crate::vision::RgbImage;
use serde::Serialize;

fn infer_err(entry: &ModelEntry) -> impl Fn(InferError) -> FaceError + '_ {
    move |source| FaceError::Infer { model: entry.name.clone(), source }
}

/// One detected face in frame coordinates.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Face {
    /// `[x1, y1, x2, y2]`.
    #[serde(rename = "box")]
    pub bbox: [f32; 4],
    pub score: f32,
    /// Left eye, right eye, nose tip, left mouth corner, right mouth corner.
    pub landmarks: [[f32; 2]; 5],
}

impl Face {
    pub fn area(&self) -> f32 {
        (self.bbox[2] - self.bbox[0]).max(0.0) * (self.bbox[3] - self.bbox[1]).max(0.0)
    }
}

/// Index of the largest face.
pub fn largest(faces: &[Face]) -> Option<usize> {
    faces.iter().enumerate().max_by(|a, b| a.1.area().total_cmp(&b.1.area())).map(|(i, _)| i)
}

/// The identity of the largest face in `img`; `label` names the image in the
/// error when there is none.
pub fn largest_identity(det: &mut Detector, rec: &mut Recognizer, img: &RgbImage, label: &str) -> Result<Embedding> {
    let face = largest_face(det, img, label)?;
    rec.embed(img, &face.landmarks)
}

/// The largest face in `img`; `label` names the image in the error.
pub fn largest_face(det: &mut Detector, img: &RgbImage, label: &str) -> Result<Face> {
    let mut faces = det.detect(img)?;
    let i = largest(&faces).ok_or_else(|| FaceError::NoFace(label.to_string()))?;
    Ok(faces.swap_remove(i))
}

#[derive(Debug, thiserror::Error)]
pub enum FaceError {
    #[error("model `{model}`: {source}")]
    Infer { model: String, source: InferError },
    #[error("model `{model}` gave {message}; check its contract in the manifest")]
    Contract { model: String, message: String },
    #[error("no face found in {0}; use a photo with one clearly visible face")]
    NoFace(String),
    #[error("landmarks are degenerate (all on one point); cannot align this face")]
    Degenerate,
    #[error("emap: {0}")]
    Emap(String),
}

pub type Result<T, E = FaceError> = std::result::Result<T, E>;
