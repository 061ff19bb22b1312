//! The per-frame path of a live stream, the one the daemon, the benchmarks
//! and the command line all run: detection at most every
//! `detect_interval`, tracks smoothed and, between detections, predicted;
//! selection that sticks to its face (or its reference identity), then the
//! swap stages of [`FusionPipeline`].
//!
//! Time comes in as an argument, so the cadence is testable without sleeps.

use super::pose::Fader;
use super::refine::{recheck_at_edge, refine, substitute, CropBuffers};
use super::reid::Reid;
use super::smooth::iod;
use super::{
    largest, Blend, ColorTransfer, Embedding, Face, FaceOrder, FusionPipeline, Mappings, MaskSettings, MouthSettings,
    Result, Selector, SelectorMode, SmoothSettings, StageTimings, Sticky, StickySettings, Tracked, Tracker,
    REFERENCE_DISTANCE,
};
use crate::vision::RgbImage;
use serde::Serialize;
use std::time::{Duration, Instant};

/// What happened to one frame.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FrameReport {
    /// Whether the detector ran on this frame (else the faces are tracked).
    pub detected: bool,
    /// The live tracks, in the order of the detection that last saw them.
    pub faces: Vec<Face>,
    /// Track id of each face.
    pub ids: Vec<u64>,
    /// Frames each face's track has been live.
    pub ages: Vec<u64>,
    /// Indices into `faces` that were swapped.
    pub swapped: Vec<usize>,
    /// Indices into `faces` whose swap is being faded out (a turned head).
    pub fading: Vec<usize>,
    pub timings: StageTimings,
}

/// The live settings, as commands change them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LiveSettings {
    /// Run the detector at most this often; zero detects on every frame.
    pub detect_interval: Duration,
    pub blend: Blend,
    pub selector: SelectorMode,
    pub smoothing: SmoothSettings,
    pub sticky: StickySettings,
    /// `reference`: largest distance ((1 - cos)/2) that is still the person.
    pub reference_distance: f32,
    pub mask: MaskSettings,
    /// Which face `one` picks first.
    pub order: FaceOrder,
    pub color_transfer: ColorTransfer,
    pub mouth: MouthSettings,
    /// A face turned further than this (degrees of yaw) has its swap faded
    /// out; 90 or more never fades.
    pub max_yaw_deg: f32,
}

impl LiveSettings {
    /// For still images: detect on every frame, no smoothing, full blend.
    pub fn still(selector: SelectorMode) -> LiveSettings {
        LiveSettings {
            detect_interval: Duration::ZERO,
            blend: Blend::FULL,
            selector,
            smoothing: SmoothSettings::OFF,
            sticky: StickySettings::default(),
            reference_distance: REFERENCE_DISTANCE,
            mask: MaskSettings::default(),
            order: FaceOrder::LargeSmall,
            color_transfer: ColorTransfer::None,
            mouth: MouthSettings::default(),
            max_yaw_deg: 90.0,
        }
    }
}

/// Cadence, tracking and selection over the swap stages.
pub struct LivePipeline {
    fusion: FusionPipeline,
    settings: LiveSettings,
    tracker: Tracker,
    mappings: Mappings,
    /// The tracks of the last detection, predicted to the current frame.
    tracks: Vec<Tracked>,
    sticky: Sticky,
    /// The clock's origin: track filters run on seconds since it.
    epoch: Option<Instant>,
    last_detect: Option<Instant>,
    /// Lock onto the largest face on the next frame (mode `reference`).
    want_reference: bool,
    /// The refiner's crops, reused from frame to frame.
    crops: CropBuffers,
    /// Each track's swap level, for heads turned away.
    fader: Fader,
    /// Identities of live and recently ended tracks.
    reid: Reid,
}

impl LivePipeline {
    pub fn new(mut fusion: FusionPipeline, settings: LiveSettings) -> LivePipeline {
        fusion.settings.blend = settings.blend;
        fusion.set_mask(settings.mask);
        fusion.swapper.color_transfer = settings.color_transfer;
        fusion.mouth = settings.mouth;
        fusion.settings.selector = Selector::One;
        let mut live = LivePipeline {
            fusion,
            settings: LiveSettings { selector: SelectorMode::One, ..settings },
            tracker: Tracker::new(settings.smoothing),
            mappings: Mappings::default(),
            tracks: Vec::new(),
            sticky: Sticky::new(settings.sticky, settings.order),
            epoch: None,
            last_detect: None,
            want_reference: false,
            crops: CropBuffers::default(),
            fader: Fader::default(),
            reid: Reid::default(),
        };
        live.set_selector(settings.selector);
        live
    }

    pub fn settings(&self) -> LiveSettings {
        self.settings
    }

    pub fn fusion(&self) -> &FusionPipeline {
        &self.fusion
    }

    /// The stages, to hand them a landmarker or a refiner.
    pub fn fusion_mut(&mut self) -> &mut FusionPipeline {
        &mut self.fusion
    }

    /// Swaps in stages over other models (a tier switch), keeping the
    /// source identity, the tracks and the settings. A source the new
    /// swapper cannot use is an error and leaves the old stages running.
    pub fn replace_stages(&mut self, mut fusion: FusionPipeline) -> Result<()> {
        if let Some(source) = self.fusion.source().cloned() {
            fusion.set_source_embedding(source)?;
        }
        fusion.settings = self.fusion.settings.clone();
        fusion.set_mask(self.settings.mask);
        fusion.swapper.color_transfer = self.settings.color_transfer;
        fusion.mouth = self.settings.mouth;
        self.mappings.relatent(&fusion.swapper)?;
        self.fusion = fusion;
        Ok(())
    }

    /// Faces matching each `from` identity are swapped with its `to`.
    pub fn set_mappings(&mut self, pairs: Vec<(Embedding, Embedding)>) -> Result<()> {
        self.mappings.set(pairs, &self.fusion.swapper)
    }

    pub fn set_mouth(&mut self, m: MouthSettings) {
        self.settings.mouth = m;
        self.fusion.mouth = m;
    }

    pub fn set_color_transfer(&mut self, c: ColorTransfer) {
        self.settings.color_transfer = c;
        self.fusion.swapper.color_transfer = c;
    }

    pub fn set_face_order(&mut self, order: FaceOrder) {
        self.settings.order = order;
        self.sticky.order = order;
    }

    pub fn set_mask(&mut self, mask: MaskSettings) {
        if mask != self.settings.mask {
            self.settings.mask = mask;
            self.fusion.set_mask(mask);
        }
    }

    /// The distance `reference` accepts, for the lock held now and later ones.
    pub fn set_reference_distance(&mut self, d: f32) {
        self.settings.reference_distance = d;
        if let Selector::Reference { max_distance, .. } = &mut self.fusion.settings.selector {
            *max_distance = d;
        }
    }

    pub fn set_blend(&mut self, blend: Blend) {
        self.settings.blend = blend;
        self.fusion.settings.blend = blend;
    }

    pub fn set_detect_interval(&mut self, every: Duration) {
        self.settings.detect_interval = every;
    }

    pub fn set_max_yaw(&mut self, degrees: f32) {
        self.settings.max_yaw_deg = degrees;
    }

    /// New smoothing and stickiness; the tracks and the chosen face stay.
    pub fn set_tracking(&mut self, smoothing: SmoothSettings, sticky: StickySettings) {
        self.settings.smoothing = smoothing;
        self.settings.sticky = sticky;
        self.tracker.smoothing = smoothing;
        self.sticky.settings = sticky;
    }

    /// `reference` locks onto the person who is the largest face on the
    /// next frame; choosing it again while locked keeps the lock.
    pub fn set_selector(&mut self, mode: SelectorMode) {
        self.want_reference = mode == SelectorMode::Reference && self.settings.selector != SelectorMode::Reference;
        match mode {
            SelectorMode::One => self.fusion.settings.selector = Selector::One,
            SelectorMode::Many => self.fusion.settings.selector = Selector::Many,
            SelectorMode::Reference => {}
        }
        self.settings.selector = mode;
    }

    /// Follows `reference` (an identity computed elsewhere) from now on.
    pub fn lock_reference(&mut self, reference: Embedding, max_distance: f32) {
        self.settings.selector = SelectorMode::Reference;
        self.fusion.settings.selector = Selector::Reference { reference, max_distance };
        self.want_reference = false;
    }

    /// Sets the identity to swap in: the largest face of `img`.
    pub fn set_source(&mut self, img: &RgbImage, label: &str) -> Result<&Embedding> {
        self.fusion.set_source(img, label)
    }

    pub fn set_source_embedding(&mut self, embedding: Embedding) -> Result<()> {
        self.fusion.set_source_embedding(embedding)
    }

    pub fn clear_source(&mut self) {
        self.fusion.clear_source();
    }

    /// Detects when due (else predicts the tracks), selects and swaps
    /// `frame` in place.
    pub fn process(&mut self, frame: &mut RgbImage, now: Instant) -> Result<FrameReport> {
        let (due, detect, detector_inference) = self.locate(frame, now)?;
        let faces: Vec<Face> = self.tracks.iter().map(|t| t.face.clone()).collect();
        let ids: Vec<u64> = self.tracks.iter().map(|t| t.id).collect();
        if self.want_reference {
            if let Some(i) = largest(&faces) {
                let reference = self.fusion.recognizer.embed(frame, &faces[i].landmarks)?;
                self.lock_reference(reference, self.settings.reference_distance);
            }
        }
        let levels = self.fader.levels(&faces, &ids, self.settings.max_yaw_deg, now);
        let (swapped, fading, t) = self.swap(frame, &faces, &ids, &levels, now)?;
        let timings =
            StageTimings { detect, inference: t.inference + detector_inference, total: t.total + detect, ..t };
        let ages = self.tracks.iter().map(|t| t.age).collect();
        Ok(FrameReport { detected: due, faces, ids, ages, swapped, fading, timings })
    }

    /// Moves the tracks to this frame: a full detection when one is due,
    /// else prediction, and with a refiner a small detection around each
    /// track. Returns whether a full detection ran, the time spent and the
    /// part of it inside the engine.
    fn locate(&mut self, frame: &RgbImage, now: Instant) -> Result<(bool, Duration, Duration)> {
        let t = now.saturating_duration_since(*self.epoch.get_or_insert(now)).as_secs_f64();
        let started = Instant::now();
        let due = self.last_detect.is_none_or(|t| now.saturating_duration_since(t) >= self.settings.detect_interval);
        let mut inference = Duration::ZERO;
        if due {
            let mut faces = self.fusion.detector.detect(frame)?;
            inference += self.fusion.detector.last_inference;
            // With a refiner, the faces of live tracks come from it on
            // detection frames too, so each track's filter sees one
            // detector's bias; the full detection decides births and ends.
            if let Some(refiner) = self.fusion.refiner.as_mut() {
                let refined = refine(refiner, &mut self.crops, frame, &self.tracker.predicted(t))?;
                substitute(&mut faces, &refined.found);
                inference += refined.inference;
            }
            self.tracks = self.tracker.update(&faces, t);
            inference += self.reidentify(frame, t);
            self.last_detect = Some(now);
        } else {
            self.tracker.predict(&mut self.tracks, t);
            if let Some(refiner) = self.fusion.refiner.as_mut() {
                let refined = refine(refiner, &mut self.crops, frame, &self.tracks)?;
                self.tracker.correct(&mut self.tracks, &refined.found, t);
                // Inside the frame one empty crop is the refiner's miss; at
                // the edge a full detection says whether the face has left
                // (its track is held for re-identification).
                let edge = recheck_at_edge(&mut self.fusion.detector, frame, &self.tracks, &refined.empty)?;
                self.tracker.correct(&mut self.tracks, &edge.found, t);
                self.tracks.retain(|k| !edge.left.contains(&k.id));
                inference += refined.inference + edge.inference;
            }
        }
        let detect = if due || self.fusion.refiner.is_some() { started.elapsed() } else { Duration::ZERO };
        Ok((due, detect, inference))
    }

    /// Tracks born on this detection are embedded; one that is a person
    /// whose track is held unseen beside it ([`Reid::beside`]), or ended
    /// within [`Reid::KEEP_S`], takes that person's id back. Returns the
    /// time inside the recogniser.
    fn reidentify(&mut self, frame: &RgbImage, t: f64) -> Duration {
        let tracker = &self.tracker;
        self.reid.retire(|id| tracker.tracks().iter().any(|k| k.id == id), t);
        let mut spent = Duration::ZERO;
        for k in self.tracks.iter_mut().filter(|k| k.age == 1 && iod(&k.face.landmarks) >= Reid::MIN_IOD_PX) {
            let Ok(identity) = self.fusion.recognizer.embed(frame, &k.face.landmarks) else { continue };
            spent += self.fusion.recognizer.last_inference();
            let distance = self.settings.reference_distance;
            let (tracker, bbox) = (&self.tracker, k.face.bbox);
            let held = |id: u64| {
                tracker.tracks().iter().any(|h| h.id == id && h.missed > 0 && Reid::beside(&h.face.bbox, &bbox))
            };
            let old = self.reid.recognise_held(&identity, held, distance);
            if let Some(old) = old.or_else(|| self.reid.recognise(&identity, distance)) {
                self.tracker.rename(k.id, old);
                self.reid.forget(old);
                k.id = old;
            }
            self.reid.remember(k.id, identity);
        }
        spent
    }

    /// Mapped faces take their mapping's identity; the rest follow the
    /// selector. Each face is pasted at its level (`levels`, a turned
    /// head's fade). Returns the swapped faces and the faded ones.
    fn swap(
        &mut self,
        frame: &mut RgbImage,
        faces: &[Face],
        ids: &[u64],
        levels: &[f32],
        now: Instant,
    ) -> Result<(Vec<usize>, Vec<usize>, StageTimings)> {
        if self.mappings.is_empty() {
            return self.select_and_swap(frame, faces, ids, levels, now);
        }
        let tracker = &self.tracker;
        self.mappings.forget(|id| tracker.tracks().iter().any(|t| t.id == id));
        let mut t = StageTimings::default();
        let with_ids: Vec<(u64, &Face)> = ids.iter().copied().zip(faces).collect();
        let distance = self.settings.reference_distance;
        let assigned = self.mappings.assign(frame, &with_ids, &mut self.fusion.recognizer, distance, &mut t)?;
        let (mut swapped, mut fading) = (Vec::new(), Vec::new());
        for (i, m) in assigned.iter().enumerate() {
            if let Some(m) = m {
                let latent = self.mappings.latent(*m).clone();
                if levels[i] < 1.0 {
                    fading.push(i);
                }
                if levels[i] > 0.0
                    && self.fusion.at_level(levels[i], |f| f.swap_with(frame, &faces[i], &latent, &mut t))?
                {
                    swapped.push(i);
                }
            }
        }
        let rest: Vec<usize> = (0..faces.len()).filter(|i| assigned[*i].is_none()).collect();
        let sub_faces: Vec<Face> = rest.iter().map(|&i| faces[i].clone()).collect();
        let sub_ids: Vec<u64> = rest.iter().map(|&i| ids[i]).collect();
        let sub_levels: Vec<f32> = rest.iter().map(|&i| levels[i]).collect();
        let (more, more_fading, t2) = self.select_and_swap(frame, &sub_faces, &sub_ids, &sub_levels, now)?;
        swapped.extend(more.iter().map(|&k| rest[k]));
        fading.extend(more_fading.iter().map(|&k| rest[k]));
        Ok((swapped, fading, t + t2))
    }

    /// `one` swaps the face it sticks to; the other modes select in the
    /// swap stages.
    fn select_and_swap(
        &mut self,
        frame: &mut RgbImage,
        faces: &[Face],
        ids: &[u64],
        levels: &[f32],
        now: Instant,
    ) -> Result<(Vec<usize>, Vec<usize>, StageTimings)> {
        if self.settings.selector != SelectorMode::One {
            let all: Vec<usize> = (0..faces.len()).collect();
            return self.fusion.fuse_at_levels(frame, faces, &all, levels);
        }
        let tracker = &self.tracker;
        let alive = |id: u64| tracker.tracks().iter().any(|t| t.id == id);
        self.sticky.center = [frame.width() as f32 / 2.0, frame.height() as f32 / 2.0];
        match self.sticky.pick(faces, ids, alive, now) {
            Some(i) => self.fusion.fuse_at_levels(frame, faces, &[i], levels),
            None => self.fusion.fuse_at_levels(frame, faces, &[], levels),
        }
    }
}
