//! Plays frames through a [`LivePipeline`] as a camera at a fixed rate
//! would deliver them (a simulated clock: frame `i` at `i / fps` seconds),
//! beside a reference detector run on every frame, and keeps what the
//! stream scorer ([`super::stream_score`]) needs. No IO: the caller decodes.

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
