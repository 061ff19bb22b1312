//! The 68-point landmarker (`landmark68` contract): the face box cut out of
//! the frame, in grey, resized to the model's input and normalised; the 68
//! outputs are (x, y) pairs normalised to the box. Points 48–59 are the
//! outer lip line, which the mouth mask keeps.

use super::{infer_err, FaceError, Result};
use crate::infer::{Model, Session, Tensor};
use crate::manifest::ModelEntry;
use crate::vision::{sample_replicate, RgbImage};

pub struct Landmarker {
    entry: ModelEntry,
    session: Box<dyn Session>,
    input_name: String,
    tensor: Tensor,
    /// Time the last run spent inside the inference engine.
    pub last_inference: std::time::Duration,
}

impl Landmarker {
    pub fn new(entry: ModelEntry, model: &dyn Model) -> Result<Landmarker> {
        let [w, h] = entry.input_size;
        let input = model.inputs().first().ok_or_else(|| FaceError::Contract {
            model: entry.name.clone(),
            message: "a graph without inputs".into(),
        })?;
        Ok(Landmarker {
            input_name: input.name.clone(),
            session: model.session().map_err(infer_err(&entry))?,
            tensor: Tensor::zeros(&[1, 1, h as usize, w as usize]),
            last_inference: std::time::Duration::ZERO,
            entry,
        })
    }

    /// The 68 points of the face in `bbox`, in frame coordinates.
    pub fn landmarks(&mut self, frame: &RgbImage, bbox: [f32; 4]) -> Result<[[f32; 2]; 68]> {
        let [w, h] = self.entry.input_size;
        let (bw, bh) = ((bbox[2] - bbox[0]).max(1.0), (bbox[3] - bbox[1]).max(1.0));
        let (mean, std) = (self.entry.norm.mean[0], self.entry.norm.std[0]);
        let data = self.tensor.data_mut();
        for y in 0..h {
            for x in 0..w {
                // Pixel centres of the box, resampled bilinearly.
                let sx = bbox[0] + (x as f32 + 0.5) * bw / w as f32 - 0.5;
                let sy = bbox[1] + (y as f32 + 0.5) * bh / h as f32 - 0.5;
                let [r, g, b] = sample_replicate(frame, sx, sy);
                let grey = 0.299 * r + 0.587 * g + 0.114 * b;
                data[(y * w + x) as usize] = (grey - mean) / std;
            }
        }
        let t = std::time::Instant::now();
        let out = self.session.run(&[(&self.input_name, &self.tensor)]).map_err(infer_err(&self.entry))?;
        self.last_inference = t.elapsed();
        let contract = |message: String| FaceError::Contract { model: self.entry.name.clone(), message };
        let (_, t) = out.iter().next().ok_or_else(|| contract("no output".into()))?;
        if t.len() != 136 {
            return Err(contract(format!("an output of shape {:?}, not 68 points", t.shape())));
        }
        let mut pts = [[0.0f32; 2]; 68];
        for (p, v) in pts.iter_mut().zip(t.data().chunks_exact(2)) {
            *p = [bbox[0] + v[0] * bw, bbox[1] + v[1] * bh];
        }
        Ok(pts)
    }

    /// The outer lip line (points 48–59), in frame coordinates.
    pub fn mouth(&mut self, frame: &RgbImage, bbox: [f32; 4]) -> Result<[[f32; 2]; 12]> {
        let all = self.landmarks(frame, bbox)?;
        let mut lips = [[0.0f32; 2]; 12];
        lips.copy_from_slice(&all[48..60]);
        Ok(lips)
    }
}
