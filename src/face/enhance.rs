//! Face enhancer (GFPGAN contract): warp the face onto ffhq_512, restore it,
//! paste it back under the box mask, blended (FaceFusion's default 80 %).

use super::{infer_err, input_shapes, FaceError, MaskSettings, Result, Template};
use crate::catalog::Catalog;
use crate::infer::{Model, Session, Tensor};
use crate::manifest::{Kind, ModelEntry};
use crate::vision::{box_mask, pack_nchw, paste_back, unpack_nchw, warp_affine_into, RgbImage};

/// FaceFusion's default enhancer blend.
pub const DEFAULT_BLEND: f32 = 0.8;

pub struct Enhancer {
    entry: ModelEntry,
    session: Box<dyn Session>,
    input_name: String,
    template: Template,
    crop: RgbImage,
    out: RgbImage,
    tensor: Tensor,
    mask: Vec<f32>,
    /// Mix of enhanced (1) and unenhanced (0) face.
    pub blend: f32,
}

impl Enhancer {
    pub fn load(catalog: &Catalog, name: Option<&str>) -> Result<Enhancer> {
        let entry = catalog.pick(name, Kind::Enhancer)?.clone();
        let model = catalog.load(&entry, &input_shapes(&entry))?;
        Enhancer::new(entry, &*model, MaskSettings::default())
    }

    pub fn new(entry: ModelEntry, model: &dyn Model, mask: MaskSettings) -> Result<Enhancer> {
        let size = entry.input_size[0];
        let input = model.inputs().first().ok_or_else(|| FaceError::Contract {
            model: entry.name.clone(),
            message: "a graph without inputs".into(),
        })?;
        Ok(Enhancer {
            input_name: input.name.clone(),
            session: model.session().map_err(infer_err(&entry))?,
            template: entry.template.unwrap_or(Template::Ffhq512),
            crop: RgbImage::new(size, size),
            out: RgbImage::new(size, size),
            tensor: Tensor::zeros(&[1, 3, size as usize, size as usize]),
            mask: box_mask(size as usize, size as usize, mask.blur, mask.padding),
            blend: DEFAULT_BLEND,
            entry,
        })
    }

    pub fn entry(&self) -> &ModelEntry {
        &self.entry
    }

    /// Enhances the face at `landmarks` in place.
    pub fn enhance(&mut self, frame: &mut RgbImage, landmarks: &[[f32; 2]; 5]) -> Result<()> {
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
        if t.len() != self.tensor.len() {
            let message = format!("an output of shape {:?}; expected {:?}", t.shape(), self.tensor.shape());
            return Err(FaceError::Contract { model: model.clone(), message });
        }
        unpack_nchw(t.data(), self.entry.channels, self.entry.output_mean, self.entry.output_std, &mut self.out);
        paste_back(frame, &self.out, &self.mask, &to_crop, self.blend);
        Ok(())
    }
}
