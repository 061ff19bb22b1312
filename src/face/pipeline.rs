//! The stages of one frame after detection: select, embed, swap, paste
//! and enhance, with per-stage timings.

use super::{
    cut_mouth, Blend, Detector, Embedding, Enhancer, Face, FaceError, Landmarker, MouthSettings, Recognizer, Result,
    Selector, Swapper,
};
use crate::infer::Tensor;
use crate::vision::{Affine, RgbImage};
use serde::Serialize;
use std::time::{Duration, Instant};

/// Wall time spent in each stage of one frame.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct StageTimings {
    pub detect: Duration,
    /// Alignment and recognition of target faces (reference mode only).
    pub embed: Duration,
    /// Target alignment and the swap model.
    pub swap: Duration,
    pub paste: Duration,
    /// The optional enhancer on each swapped face (warp, model, paste).
    pub enhance: Duration,
    /// Colour transfer of the swapped faces (`pipeline.color_transfer`).
    pub color: Duration,
    /// The mouth mask: the 68-point landmarker and the cut (`mouth_mask`).
    pub mouth: Duration,
    pub total: Duration,
    /// Of all the above, the time inside the inference engine; the rest is
    /// pixel and bookkeeping work (letterbox, decode, NMS, align, paste).
    pub inference: Duration,
}

impl std::ops::Add for StageTimings {
    type Output = StageTimings;
    fn add(self, o: StageTimings) -> StageTimings {
        StageTimings {
            detect: self.detect + o.detect,
            embed: self.embed + o.embed,
            swap: self.swap + o.swap,
            paste: self.paste + o.paste,
            enhance: self.enhance + o.enhance,
            color: self.color + o.color,
            mouth: self.mouth + o.mouth,
            total: self.total + o.total,
            inference: self.inference + o.inference,
        }
    }
}

#[derive(Debug, Clone)]
pub struct PipelineSettings {
    pub blend: Blend,
    pub selector: Selector,
}

impl Default for PipelineSettings {
    fn default() -> Self {
        PipelineSettings { blend: Blend::FULL, selector: Selector::One }
    }
}

struct Source {
    embedding: Embedding,
    latent: Tensor,
}

/// Detector, recogniser and swapper wired together, with the source
/// identity's latent computed once. [`super::LivePipeline`] drives it.
pub struct FusionPipeline {
    pub detector: Detector,
    pub recognizer: Recognizer,
    pub swapper: Swapper,
    /// Runs on every swapped face when present.
    pub enhancer: Option<Enhancer>,
    /// Finds the lip line for the mouth mask, when the tier has one.
    pub landmarker: Option<Landmarker>,
    /// The detector at a small input, refining tracks on crops between full
    /// detections (`pipeline.refine_size`).
    pub refiner: Option<Detector>,
    pub mouth: MouthSettings,
    pub settings: PipelineSettings,
    source: Option<Source>,
}

impl FusionPipeline {
    pub fn new(detector: Detector, recognizer: Recognizer, swapper: Swapper, settings: PipelineSettings) -> Self {
        FusionPipeline {
            detector,
            recognizer,
            swapper,
            enhancer: None,
            landmarker: None,
            refiner: None,
            mouth: MouthSettings::default(),
            settings,
            source: None,
        }
    }

    /// Sets the identity to swap in: the largest face of `img`.
    pub fn set_source(&mut self, img: &RgbImage, label: &str) -> Result<&Embedding> {
        let embedding = super::largest_identity(&mut self.detector, &mut self.recognizer, img, label)?;
        let latent = self.swapper.latent(&embedding)?;
        Ok(&self.source.insert(Source { embedding, latent }).embedding)
    }

    /// Sets an identity computed elsewhere (the source cache, the face bank).
    pub fn set_source_embedding(&mut self, embedding: Embedding) -> Result<()> {
        let latent = self.swapper.latent(&embedding)?;
        self.source = Some(Source { embedding, latent });
        Ok(())
    }

    /// New box-mask settings for the swapper and the enhancer.
    pub fn set_mask(&mut self, mask: super::MaskSettings) {
        self.swapper.set_mask(mask);
        if let Some(e) = self.enhancer.as_mut() {
            e.set_mask(mask);
        }
    }

    pub fn clear_source(&mut self) {
        self.source = None;
    }

    pub fn source(&self) -> Option<&Embedding> {
        self.source.as_ref().map(|s| &s.embedding)
    }

    /// Selects and swaps among `faces` (detected in this frame or tracked
    /// from an earlier one) in place; returns the swapped indices. The
    /// timings have no detect part.
    pub fn fuse(&mut self, frame: &mut RgbImage, faces: &[Face]) -> Result<(Vec<usize>, StageTimings)> {
        let start = Instant::now();
        let mut t = StageTimings::default();
        let mut embeddings = Vec::new();
        if self.settings.selector.needs_embeddings() {
            let s = Instant::now();
            for f in faces {
                embeddings.push(self.recognizer.embed(frame, &f.landmarks)?);
                t.inference += self.recognizer.last_inference();
            }
            t.embed = s.elapsed();
        }
        let mut swapped = Vec::new();
        if let Some(latent) = self.source.as_ref().map(|s| s.latent.clone()) {
            for i in self.settings.selector.select(faces, &embeddings) {
                if self.swap_with(frame, &faces[i], &latent, &mut t)? {
                    swapped.push(i);
                }
            }
        }
        t.total = start.elapsed();
        Ok((swapped, t))
    }

    /// Runs `f` on the swap stages with the blend scaled by `level`.
    pub fn at_level<T>(&mut self, level: f32, f: impl FnOnce(&mut FusionPipeline) -> Result<T>) -> Result<T> {
        let blend = self.settings.blend;
        if level < 1.0 {
            self.settings.blend = Blend::new(blend.percent() * level.clamp(0.0, 1.0)).unwrap_or(blend);
        }
        let out = f(self);
        self.settings.blend = blend;
        out
    }

    /// Fuses `faces[picks]` (the selector still chooses among them), the
    /// ones at level 1 together, the fading ones one by one at their level,
    /// none at level 0. Returns the swapped and the fading faces.
    pub fn fuse_at_levels(
        &mut self,
        frame: &mut RgbImage,
        faces: &[Face],
        picks: &[usize],
        levels: &[f32],
    ) -> Result<(Vec<usize>, Vec<usize>, StageTimings)> {
        let full: Vec<usize> = picks.iter().copied().filter(|&i| levels[i] >= 1.0).collect();
        let fading: Vec<usize> = picks.iter().copied().filter(|&i| levels[i] < 1.0).collect();
        // Every face at full level (the usual frame) or one: fused from the
        // caller's slice; only a mix of levels copies the faces.
        let (done, mut t) = match full[..] {
            _ if full.len() == faces.len() => self.fuse(frame, faces)?,
            [one] => self.fuse(frame, std::slice::from_ref(&faces[one]))?,
            _ => self.fuse(frame, &full.iter().map(|&i| faces[i].clone()).collect::<Vec<_>>())?,
        };
        let mut swapped: Vec<usize> = done.iter().map(|&k| full[k]).collect();
        for &i in fading.iter().filter(|&&i| levels[i] > 0.0) {
            let (done, t2) = self.at_level(levels[i], |f| f.fuse(frame, std::slice::from_ref(&faces[i])))?;
            swapped.extend(done.iter().map(|_| i));
            t = t + t2;
        }
        Ok((swapped, fading, t))
    }

    /// Swaps one face with `latent` (a source identity's, see
    /// [`Swapper::latent`]): swap, colour transfer, paste (with the mouth
    /// mask) and the enhancer, timed into `t`. False when the face's
    /// landmarks are degenerate and nothing was done.
    pub fn swap_with(
        &mut self,
        frame: &mut RgbImage,
        face: &Face,
        latent: &Tensor,
        t: &mut StageTimings,
    ) -> Result<bool> {
        let s = Instant::now();
        let to_crop = match self.swapper.run(frame, &face.landmarks, latent) {
            Ok(m) => m,
            Err(FaceError::Degenerate) => return Ok(false),
            Err(e) => return Err(e),
        };
        let p = Instant::now();
        t.color += self.swapper.last_color;
        t.swap += (p - s).saturating_sub(self.swapper.last_color);
        t.inference += self.swapper.last_inference();
        let blend = self.settings.blend.fraction();
        match self.landmarker.as_mut().filter(|_| self.mouth.enabled) {
            Some(lm) => {
                let mask = mouth_mask(lm, &self.swapper, frame, face.bbox, &to_crop, &self.mouth)?;
                t.mouth += p.elapsed();
                t.inference += lm.last_inference;
                let q = Instant::now();
                self.swapper.paste_with(frame, &to_crop, blend, &mask);
                t.paste += q.elapsed();
            }
            None => {
                self.swapper.paste(frame, &to_crop, blend);
                t.paste += p.elapsed();
            }
        }
        if let Some(enhancer) = self.enhancer.as_mut() {
            let e = Instant::now();
            enhancer.enhance(frame, &face.landmarks)?;
            t.enhance += e.elapsed();
            t.inference += enhancer.last_inference();
        }
        Ok(true)
    }
}

/// The swapper's paste mask with the mouth of the face in `bbox` cut out.
fn mouth_mask(
    lm: &mut Landmarker,
    swapper: &Swapper,
    frame: &RgbImage,
    bbox: [f32; 4],
    to_crop: &Affine,
    s: &MouthSettings,
) -> Result<Vec<f32>> {
    let lips = lm.mouth(frame, bbox)?.map(|[x, y]| {
        let (u, v) = to_crop.apply(x, y);
        [u, v]
    });
    let (mask, w, h) = swapper.mask();
    Ok(cut_mouth(mask, w, h, &lips, s))
}
