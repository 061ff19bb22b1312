//! Face detectors: letterbox the frame, run the model, decode its contract,
//! threshold, NMS, and map back to frame coordinates.

mod scrfd;
mod yolo_face;
mod yunet;

use super::{infer_err, Face, FaceError, Result};
use crate::infer::{Model, Session, Tensor};
use crate::manifest::{Contract, ModelEntry};
use crate::vision::{pack_nchw_rows, Resizer, RgbImage};

/// Detector tuning. Defaults follow FaceFusion.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DetectorSettings {
    /// Keep candidates scoring above this (default 0.5).
    pub score_threshold: f32,
    /// Suppress overlaps above this IoU (default 0.4).
    pub nms_iou: f32,
}

impl Default for DetectorSettings {
    fn default() -> Self {
        DetectorSettings { score_threshold: 0.5, nms_iou: 0.4 }
    }
}

/// A loaded detector with its preallocated letterbox canvas and input tensor.
pub struct Detector {
    /// Time the last detection spent inside the inference engine (the rest
    /// is letterboxing, packing, decoding and NMS).
    pub last_inference: std::time::Duration,
    entry: ModelEntry,
    session: Box<dyn Session>,
    input_name: String,
    canvas: RgbImage,
    resizer: Resizer,
    /// Size of the image last resized into `canvas`; the rest of the canvas is
    /// zero only while this stays the same.
    filled: (u32, u32),
    tensor: Tensor,
    candidates: Vec<Face>,
    pub settings: DetectorSettings,
}

impl Detector {
    /// A detector over an already loaded `model` (loaded with
    /// [`ModelEntry::input_shapes`] of `entry`).
    pub fn new(entry: ModelEntry, model: &dyn Model) -> Result<Detector> {
        let [w, h] = entry.input_size;
        let shape = [1, 3, h as usize, w as usize];
        let input = model.inputs().first().ok_or_else(|| FaceError::Contract {
            model: entry.name.clone(),
            message: "a graph without inputs".into(),
        })?;
        Ok(Detector {
            input_name: input.name.clone(),
            session: model.session().map_err(infer_err(&entry))?,
            canvas: RgbImage::new(w, h),
            resizer: Resizer::default(),
            filled: (0, 0),
            tensor: Tensor::zeros(&shape),
            candidates: Vec::new(),
            settings: DetectorSettings::default(),
            last_inference: std::time::Duration::ZERO,
            entry,
        })
    }

    pub fn entry(&self) -> &ModelEntry {
        &self.entry
    }

    /// Detects faces in `img`, best score first.
    pub fn detect(&mut self, img: &RgbImage) -> Result<Vec<Face>> {
        let [dw, dh] = self.entry.input_size;
        let (w, h) = (img.width().max(1), img.height().max(1));
        // Shrink (never enlarge) to fit, keeping the aspect ratio; top-left.
        let scale = (dw as f32 / w as f32).min(dh as f32 / h as f32).min(1.0);
        let (nw, nh) = (((w as f32 * scale) as u32).clamp(1, dw), ((h as f32 * scale) as u32).clamp(1, dh));
        // The padding below and right of the picture is constant: packed in
        // full only when the picture's size changes, then row by row.
        let rows = if self.filled != (nw, nh) {
            self.canvas.fill(0);
            self.filled = (nw, nh);
            dh
        } else {
            nh
        };
        self.resizer.resize_into(img, &mut self.canvas, nw, nh);
        pack_nchw_rows(&self.canvas, rows, self.entry.channels, &self.entry.norm, self.tensor.data_mut());

        let model = &self.entry.name;
        let t = std::time::Instant::now();
        let outputs = self
            .session
            .run(&[(&self.input_name, &self.tensor)])
            .map_err(|source| FaceError::Infer { model: model.clone(), source })?;
        self.last_inference = t.elapsed();
        let outs: Vec<&Tensor> = outputs.iter().map(|(_, t)| t).collect();
        self.candidates.clear();
        let (iw, ih, thr) = (dw as usize, dh as usize, self.settings.score_threshold);
        match self.entry.contract {
            Contract::Yunet => yunet::decode(&outs, iw, ih, thr, &mut self.candidates),
            Contract::Scrfd => scrfd::decode(&outs, iw, ih, thr, &mut self.candidates),
            Contract::YoloFace => yolo_face::decode(&outs, thr, &mut self.candidates),
            other => Err(format!("no detections: {other:?} is not a detector contract")),
        }
        .map_err(|message| FaceError::Contract { model: model.clone(), message })?;

        let (rx, ry) = (w as f32 / nw as f32, h as f32 / nh as f32);
        let mut faces = nms(&mut self.candidates, self.settings.nms_iou);
        for f in &mut faces {
            f.bbox = [f.bbox[0] * rx, f.bbox[1] * ry, f.bbox[2] * rx, f.bbox[3] * ry];
            for p in &mut f.landmarks {
                *p = [p[0] * rx, p[1] * ry];
            }
        }
        Ok(faces)
    }
}

/// Number of values per anchor in `t`, checked against the expected count.
fn per_anchor(t: &Tensor, anchors: usize, what: &str) -> std::result::Result<usize, String> {
    if anchors == 0 || !t.len().is_multiple_of(anchors) {
        return Err(format!("{what} with {} values, which does not divide into {anchors} anchors", t.len()));
    }
    Ok(t.len() / anchors)
}

pub fn iou(a: &[f32; 4], b: &[f32; 4]) -> f32 {
    let iw = (a[2].min(b[2]) - a[0].max(b[0])).max(0.0);
    let ih = (a[3].min(b[3]) - a[1].max(b[1])).max(0.0);
    let inter = iw * ih;
    let area = |r: &[f32; 4]| (r[2] - r[0]).max(0.0) * (r[3] - r[1]).max(0.0);
    let union = area(a) + area(b) - inter;
    if union <= 0.0 {
        0.0
    } else {
        inter / union
    }
}

/// Greedy non-maximum suppression, best score first.
fn nms(candidates: &mut [Face], threshold: f32) -> Vec<Face> {
    candidates.sort_by(|a, b| b.score.total_cmp(&a.score));
    let mut kept: Vec<Face> = Vec::new();
    for c in candidates.iter() {
        if kept.iter().all(|k| iou(&k.bbox, &c.bbox) <= threshold) {
            kept.push(c.clone());
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    fn face(bbox: [f32; 4], score: f32) -> Face {
        Face { bbox, score, landmarks: [[0.0; 2]; 5] }
    }

    #[test]
    fn nms_keeps_the_best_of_overlapping_boxes() {
        let mut c = vec![face([0., 0., 10., 10.], 0.6), face([1., 1., 11., 11.], 0.9), face([50., 50., 60., 60.], 0.7)];
        let kept = nms(&mut c, 0.4);
        assert_eq!(kept.len(), 2);
        assert_eq!(kept[0].score, 0.9);
        assert_eq!(kept[1].score, 0.7);
    }

    #[test]
    fn iou_of_disjoint_boxes_is_zero() {
        assert_eq!(iou(&[0., 0., 1., 1.], &[2., 2., 3., 3.]), 0.0);
        assert!((iou(&[0., 0., 2., 2.], &[0., 0., 2., 2.]) - 1.0).abs() < 1e-6);
    }
}
