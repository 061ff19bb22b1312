//! Face swappers (inswapper and hyperswap contracts): warp the target face,
//! run the model with the source latent, paste the result back under a soft
//! box mask.

use super::aligned::AlignedModel;
use super::{Embedding, FaceError, Result};
use crate::infer::{Model, Tensor};
use crate::manifest::{Contract, ModelEntry, LATENT_LEN};
use crate::vision::{box_mask, paste_back, reinhard_transfer, unpack_nchw, Affine, RgbImage, Template};
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// Colour transfer of the swapped face onto the scene, before paste-back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ColorTransfer {
    /// The swapper's colours as they are.
    #[default]
    None,
    /// Reinhard's mean and deviation transfer in Lab, over the masked face
    /// region of the swapped crop against the same region of the target crop.
    Rct,
}

impl ColorTransfer {
    pub fn as_str(self) -> &'static str {
        match self {
            ColorTransfer::None => "none",
            ColorTransfer::Rct => "rct",
        }
    }

    pub fn parse(s: &str) -> Option<ColorTransfer> {
        [ColorTransfer::None, ColorTransfer::Rct].into_iter().find(|c| c.as_str() == s)
    }
}

impl std::fmt::Display for ColorTransfer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Box-mask shape, with FaceFusion's meaning (defaults: blur 0.3, no
/// padding).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MaskSettings {
    /// Fraction of half the crop width used as blur amount (0..1).
    pub blur: f32,
    /// Percent of the crop zeroed at top, right, bottom, left.
    pub padding: [f32; 4],
}

impl Default for MaskSettings {
    fn default() -> Self {
        MaskSettings { blur: 0.3, padding: [0.0; 4] }
    }
}

impl MaskSettings {
    /// `blur` within 0..=1 and each padding within 0..=100.
    pub fn is_valid(&self) -> bool {
        (0.0..=1.0).contains(&self.blur) && self.padding.iter().all(|p| (0.0..=100.0).contains(p))
    }

    /// The mask of a `w`×`h` crop.
    pub fn build(&self, w: u32, h: u32) -> Vec<f32> {
        box_mask(w as usize, h as usize, self.blur, self.padding)
    }
}

pub struct Swapper {
    model: AlignedModel,
    out: RgbImage,
    mask: Vec<f32>,
    pub color_transfer: ColorTransfer,
    /// Time the last run spent on colour transfer.
    pub last_color: Duration,
    /// `[embedding_len, LATENT_LEN]` row-major; inswapper only.
    emap: Option<Tensor>,
}

impl Swapper {
    /// A swapper over a loaded `model`; `emap` is required for inswapper.
    pub fn new(entry: ModelEntry, model: &dyn Model, emap: Option<Tensor>, mask: MaskSettings) -> Result<Swapper> {
        match (&emap, entry.contract) {
            (None, Contract::Inswapper) => {
                return Err(FaceError::Emap(format!("model `{}` needs its emap", entry.name)))
            }
            (Some(e), _) if e.shape().len() != 2 || e.shape()[1] != LATENT_LEN => {
                return Err(FaceError::Emap(format!("emap has shape {:?}, expected [512, {LATENT_LEN}]", e.shape())))
            }
            _ => {}
        }
        let [w, h] = entry.input_size;
        Ok(Swapper {
            out: RgbImage::new(w, h),
            mask: mask.build(w, h),
            color_transfer: ColorTransfer::None,
            last_color: Duration::ZERO,
            emap,
            model: AlignedModel::new(entry, model, Some("target"), Template::Arcface128)?,
        })
    }

    /// Time the last run spent inside the inference engine.
    pub fn last_inference(&self) -> std::time::Duration {
        self.model.last_inference
    }

    pub fn entry(&self) -> &ModelEntry {
        &self.model.entry
    }

    /// The `source` input for an identity: for inswapper normed · emap,
    /// L2-normalised again when the manifest says so; otherwise the
    /// normalised embedding itself.
    pub fn latent(&self, identity: &Embedding) -> Result<Tensor> {
        let e = &identity.normed;
        let mut latent = match &self.emap {
            Some(emap) => {
                let [rows, cols] = [emap.shape()[0], emap.shape()[1]];
                if rows != e.len() {
                    return Err(FaceError::Emap(format!(
                        "emap has {rows} rows but the embedding has {} values",
                        e.len()
                    )));
                }
                let mut out = vec![0f32; cols];
                for (ei, row) in e.iter().zip(emap.data().chunks_exact(cols)) {
                    out.iter_mut().zip(row).for_each(|(o, w)| *o += ei * w);
                }
                out
            }
            None => e.clone(),
        };
        if latent.len() != LATENT_LEN {
            return Err(FaceError::Emap(format!("latent has {} values, model wants {LATENT_LEN}", latent.len())));
        }
        if self.model.entry.renormalize_latent {
            let n = latent.iter().map(|v| v * v).sum::<f32>().sqrt().max(1e-12);
            latent.iter_mut().for_each(|v| *v /= n);
        }
        Ok(Tensor::new(&[1, LATENT_LEN], latent).expect("latent length checked above"))
    }

    /// Aligns the face at `landmarks`, runs the model and keeps its output
    /// crop. Returns the frame → crop transform for [`Swapper::paste`].
    pub fn run(&mut self, frame: &RgbImage, landmarks: &[[f32; 2]; 5], latent: &Tensor) -> Result<Affine> {
        let (e, out) = (&self.model.entry, &mut self.out);
        let (channels, mean, std) = (e.channels, e.output_mean, e.output_std);
        let len = self.model.input_len();
        let unpack = |t: &Tensor| unpack_nchw(t.data(), channels, mean, std, out);
        let to_crop = self.model.run(frame, landmarks, &[("source", latent)], Some(len), unpack)?;
        let t = Instant::now();
        if self.color_transfer == ColorTransfer::Rct {
            reinhard_transfer(&mut self.out, &self.model.crop, &self.mask);
        }
        self.last_color = t.elapsed();
        Ok(to_crop)
    }

    /// The last swapped crop (after colour transfer), the aligned target
    /// crop it replaces, and the box mask it is pasted with.
    pub fn last_crops(&self) -> (&RgbImage, &RgbImage, &[f32]) {
        (&self.out, &self.model.crop, &self.mask)
    }

    /// Rebuilds the box mask with new settings.
    pub fn set_mask(&mut self, mask: MaskSettings) {
        self.mask = mask.build(self.out.width(), self.out.height());
    }

    /// Pastes the last output crop into `frame` with the box mask, touching
    /// only the face's paste region.
    pub fn paste(&self, frame: &mut RgbImage, to_crop: &Affine, blend: f32) {
        paste_back(frame, &self.out, &self.mask, to_crop, blend);
    }

    /// The box mask, one weight per crop pixel (row-major, crop size).
    pub fn mask(&self) -> (&[f32], usize, usize) {
        (&self.mask, self.out.width() as usize, self.out.height() as usize)
    }

    /// Pastes the last output crop with another mask of the crop's size.
    pub fn paste_with(&self, frame: &mut RgbImage, to_crop: &Affine, blend: f32, mask: &[f32]) {
        paste_back(frame, &self.out, mask, to_crop, blend);
    }
}
