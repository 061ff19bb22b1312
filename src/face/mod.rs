//! The face pipeline: detect → align → embed → swap → paste back.

mod aligned;
pub mod detect;
mod enhance;
mod pipeline;
mod recognize;
mod select;
mod swap;
mod track;

pub use detect::Detector;
pub use enhance::Enhancer;
pub use pipeline::{FrameReport, FusionPipeline, PipelineSettings, StageTimings};
pub use recognize::{Embedding, Recognizer};
pub use select::Selector;
pub use swap::{emap_path, extract_emap, read_emap, write_emap, MaskSettings, Swapper};
pub use track::{Tracked, Tracker};

use crate::catalog::CatalogError;
use crate::infer::{InferError, InputShape};
use crate::manifest::{Contract, Kind, ModelEntry};
use crate::vision::{estimate_similarity, Affine, RgbImage};
use serde::{Deserialize, Serialize};

/// Length of the identity vector every supported swapper takes as `source`.
pub const LATENT_LEN: usize = 512;

/// The fixed input shapes a model of `entry`'s contract is loaded with.
pub fn input_shapes(entry: &ModelEntry) -> Vec<InputShape> {
    let [w, h] = entry.input_size.map(|v| v as usize);
    match (entry.kind(), entry.contract) {
        (Kind::Swapper, _) => {
            vec![InputShape::named("target", &[1, 3, h, w]), InputShape::named("source", &[1, LATENT_LEN])]
        }
        (_, Contract::Landmark68) => vec![InputShape::first(&[1, 1, h, w])],
        _ => vec![InputShape::first(&[1, 3, h, w])],
    }
}

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
    let faces = det.detect(img)?;
    let face = largest(&faces).map(|i| &faces[i]).ok_or_else(|| FaceError::NoFace(label.to_string()))?;
    rec.embed(img, &face.landmarks)
}

#[derive(Debug, thiserror::Error)]
pub enum FaceError {
    #[error(transparent)]
    Catalog(#[from] CatalogError),
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

/// The 5-point alignment templates, normalised to a unit crop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Template {
    Arcface112V2,
    Arcface128,
    Arcface112V1,
    Ffhq512,
}

impl Template {
    // Quoted digit for digit from the reference, so they can be checked by eye.
    #[allow(clippy::excessive_precision)]
    const fn unit(self) -> [[f32; 2]; 5] {
        match self {
            Template::Arcface112V2 => [
                [0.341_916_07, 0.461_574_11],
                [0.656_533_93, 0.459_833_93],
                [0.500_225, 0.640_505_36],
                [0.370_975_89, 0.824_691_96],
                [0.631_516_96, 0.823_250_89],
            ],
            Template::Arcface128 => [
                [0.361_676_56, 0.403_877_34],
                [0.636_967_19, 0.402_354_69],
                [0.500_196_87, 0.560_442_19],
                [0.387_103_91, 0.721_605_47],
                [0.615_077_34, 0.720_344_53],
            ],
            Template::Arcface112V1 => [
                [0.354_732_14, 0.456_589_29],
                [0.645_267_86, 0.456_589_29],
                [0.5, 0.611_544_64],
                [0.379_133_93, 0.776_875],
                [0.620_866_07, 0.776_875],
            ],
            Template::Ffhq512 => [
                [0.376_916_76, 0.468_646_64],
                [0.622_856_97, 0.469_128_13],
                [0.501_238_59, 0.613_319_04],
                [0.393_088_22, 0.725_411],
                [0.611_502_05, 0.724_904_65],
            ],
        }
    }

    /// Template points for a `size`×`size` crop.
    pub fn points(self, size: u32) -> [[f32; 2]; 5] {
        self.unit().map(|[x, y]| [x * size as f32, y * size as f32])
    }

    /// The frame → crop similarity that puts `landmarks` on this template.
    pub fn align(self, landmarks: &[[f32; 2]; 5], size: u32) -> Result<Affine> {
        estimate_similarity(landmarks, &self.points(size)).ok_or(FaceError::Degenerate)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arcface_112_v2_matches_insightface_reference_points() {
        let p = Template::Arcface112V2.points(112);
        let want = [[38.2946, 51.6963], [73.5318, 51.5014], [56.0252, 71.7366], [41.5493, 92.3655], [70.7299, 92.2041]];
        for (a, b) in p.iter().zip(want) {
            assert!((a[0] - b[0]).abs() < 1e-3 && (a[1] - b[1]).abs() < 1e-3, "{a:?} vs {b:?}");
        }
    }

    #[test]
    fn arcface_128_is_arcface_112_v2_shifted_by_8px() {
        let a = Template::Arcface112V2.points(112);
        let b = Template::Arcface128.points(128);
        for (p, q) in a.iter().zip(b) {
            assert!((p[0] + 8.0 - q[0]).abs() < 1e-3 && (p[1] - q[1]).abs() < 1e-3);
        }
    }
}
