//! The step every crop model shares: align the face on a template, warp it
//! into a preallocated crop, pack it as the model's input, run, and check the
//! first output's size.

use super::{infer_err, FaceError, Result};
use crate::infer::{Model, Session, Tensor};
use crate::manifest::ModelEntry;
use crate::vision::{pack_nchw, warp_affine_into, Affine, RgbImage, Template};

pub(crate) struct AlignedModel {
    pub entry: ModelEntry,
    session: Box<dyn Session>,
    input_name: String,
    template: Template,
    /// The aligned crop of the last run.
    pub crop: RgbImage,
    tensor: Tensor,
    /// Time the last run spent inside the inference engine.
    pub last_inference: std::time::Duration,
}

impl AlignedModel {
    /// `input` names the crop input; `None` takes the model's first input.
    pub fn new(entry: ModelEntry, model: &dyn Model, input: Option<&str>, template: Template) -> Result<Self> {
        let [w, h] = entry.input_size;
        let input_name = match input {
            Some(name) => name.to_string(),
            None => model.inputs().first().map(|i| i.name.clone()).ok_or_else(|| FaceError::Contract {
                model: entry.name.clone(),
                message: "a graph without inputs".into(),
            })?,
        };
        Ok(AlignedModel {
            session: model.session().map_err(infer_err(&entry))?,
            input_name,
            template: entry.template.unwrap_or(template),
            crop: RgbImage::new(w, h),
            tensor: Tensor::zeros(&[1, 3, h as usize, w as usize]),
            last_inference: std::time::Duration::ZERO,
            entry,
        })
    }

    /// Runs on the face at `landmarks` (plus any `extra` inputs) and calls
    /// `use_output` with the first output, which must have `output_len`
    /// values when given. Returns the frame → crop transform.
    pub fn run(
        &mut self,
        frame: &RgbImage,
        landmarks: &[[f32; 2]; 5],
        extra: &[(&str, &Tensor)],
        output_len: Option<usize>,
        use_output: impl FnOnce(&Tensor),
    ) -> Result<Affine> {
        let to_crop = self.template.align(landmarks, self.crop.width()).ok_or(FaceError::Degenerate)?;
        warp_affine_into(frame, &to_crop, &mut self.crop);
        pack_nchw(&self.crop, self.entry.channels, &self.entry.norm, self.tensor.data_mut());
        let mut inputs = vec![(self.input_name.as_str(), &self.tensor)];
        inputs.extend_from_slice(extra);
        let t = std::time::Instant::now();
        let out = self.session.run(&inputs).map_err(infer_err(&self.entry))?;
        self.last_inference = t.elapsed();
        let contract = |message: String| FaceError::Contract { model: self.entry.name.clone(), message };
        let (_, t) = out.iter().next().ok_or_else(|| contract("no output".into()))?;
        if output_len.is_some_and(|n| n != t.len()) || t.is_empty() {
            return Err(contract(format!("an output of shape {:?}", t.shape())));
        }
        use_output(t);
        Ok(to_crop)
    }

    /// Values in the crop input (3 × width × height).
    pub fn input_len(&self) -> usize {
        self.tensor.len()
    }
}
