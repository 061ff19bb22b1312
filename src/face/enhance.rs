//! Face enhancer (GFPGAN contract): warp the face onto ffhq_512, restore it,
//! paste it back under the box mask, blended (FaceFusion's default 80 %).

use super::aligned::AlignedModel;
use super::{MaskSettings, Result};
use crate::infer::Model;
use crate::manifest::ModelEntry;
use crate::vision::{paste_back, unpack_nchw, RgbImage, Template};

/// FaceFusion's default enhancer blend.
pub const DEFAULT_BLEND: f32 = 0.8;

pub struct Enhancer {
    model: AlignedModel,
    out: RgbImage,
    mask: Vec<f32>,
    /// Mix of enhanced (1) and unenhanced (0) face.
    pub blend: f32,
}

impl Enhancer {
    pub fn new(entry: ModelEntry, model: &dyn Model, mask: MaskSettings) -> Result<Enhancer> {
        let [w, h] = entry.input_size;
        Ok(Enhancer {
            out: RgbImage::new(w, h),
            mask: mask.build(w, h),
            blend: DEFAULT_BLEND,
            model: AlignedModel::new(entry, model, None, Template::Ffhq512)?,
        })
    }

    /// Rebuilds the box mask with new settings.
    pub fn set_mask(&mut self, mask: MaskSettings) {
        self.mask = mask.build(self.out.width(), self.out.height());
    }

    /// Time the last run spent inside the inference engine.
    pub fn last_inference(&self) -> std::time::Duration {
        self.model.last_inference
    }

    pub fn entry(&self) -> &ModelEntry {
        &self.model.entry
    }

    /// Enhances the face at `landmarks` in place.
    pub fn enhance(&mut self, frame: &mut RgbImage, landmarks: &[[f32; 2]; 5]) -> Result<()> {
        let (e, out) = (&self.model.entry, &mut self.out);
        let (channels, mean, std) = (e.channels, e.output_mean, e.output_std);
        let len = self.model.input_len();
        let to_crop =
            self.model.run(frame, landmarks, &[], Some(len), |t| unpack_nchw(t.data(), channels, mean, std, out))?;
        paste_back(frame, &self.out, &self.mask, &to_crop, self.blend);
        Ok(())
    }
}
