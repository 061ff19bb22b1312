//! Plays frames through a [`LivePipeline`] as a camera at a fixed rate
//! would deliver them (a simulated clock: frame `i` at `i / fps` seconds),
//! beside a reference detector run on every frame, and keeps what the
//! stream scorer ([`super::stream_score`]) needs. No IO: the caller decodes.

use super::refine::{find_in_crop, CropBuffers};
use super::stream_score::{OutFace, StreamFrame};
use super::{Detector, FrameReport, LivePipeline, Result};
use crate::vision::RgbImage;
use std::time::{Duration, Instant};

/// The pipeline's faces on one frame, as the scorer takes them.
pub fn out_faces(report: &FrameReport) -> Vec<OutFace> {
    (0..report.faces.len())
        .map(|k| OutFace {
            track: report.ids[k],
            landmarks: report.faces[k].landmarks,
            swapped: report.swapped.contains(&k),
            fading: report.fading.contains(&k),
        })
        .collect()
}

/// Runs `live` and `reference` over `frames` (each image with the truth's
/// landmarks on it, empty where no geometry is known) at `fps`.
pub fn record(
    live: &mut LivePipeline,
    reference: &mut Detector,
    frames: impl IntoIterator<Item = Result<(RgbImage, Vec<[[f32; 2]; 5]>)>>,
    fps: f32,
) -> Result<Vec<StreamFrame>> {
    let start = Instant::now();
    let mut out = Vec::new();
    for (i, frame) in frames.into_iter().enumerate() {
        let (mut img, truth) = frame?;
        let reference = reference.detect(&img)?.into_iter().map(|f| f.landmarks).collect();
        let now = start + Duration::from_secs_f64(i as f64 / fps as f64);
        let report = live.process(&mut img, now)?;
        out.push(StreamFrame { reference, output: out_faces(&report), truth });
    }
    Ok(out)
}

/// The scorer's accuracy reference: every face a full detection finds,
/// found again on a crop twice its box, scaled to the `fine` detector's
/// larger input, and on the crop's mirror image, the two averaged
/// ([`super::refine::find_in_crop`]). Small faces are seen upscaled and the
/// detector's left-right bias cancels, so it is less noisy than the full
/// detection it starts from; a face the crop does not find again is left
/// out.
pub struct AccuracyReference {
    full: Detector,
    fine: Detector,
    buffers: CropBuffers,
}

impl AccuracyReference {
    pub fn new(full: Detector, fine: Detector) -> AccuracyReference {
        AccuracyReference { full, fine, buffers: CropBuffers::default() }
    }

    /// The landmarks of the faces on `img`.
    pub fn faces(&mut self, img: &RgbImage) -> Result<Vec<[[f32; 2]; 5]>> {
        let mut out = Vec::new();
        for face in self.full.detect(img)? {
            if let Some(found) = find_in_crop(&mut self.fine, &mut self.buffers, img, &face.bbox)?.and_then(|f| f.face)
            {
                out.push(found.landmarks);
            }
        }
        Ok(out)
    }
}
