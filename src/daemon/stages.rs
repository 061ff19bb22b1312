//! Face stages over a tier's loaded models: the swap pipeline the worker
//! runs, and the detector and recogniser the control loop computes source
//! identities with. Each gets sessions of its own over the shared models.

use super::settings::WorkerConfig;
use crate::control::Settings;
use crate::face::{
    Detector, Enhancer, FaceError, FusionPipeline, Landmarker, LiveSettings, MaskSettings, MouthSettings,
    PipelineSettings, Recognizer, Swapper,
};
use crate::store::{LoadedModel, TierModels};

/// The live pipeline's settings from the worker's config keys and the
/// commanded settings, as the worker runs them.
pub fn live_settings(config: &WorkerConfig, settings: &Settings) -> LiveSettings {
    LiveSettings {
        detect_interval: config.detect_interval,
        blend: settings.blend,
        selector: settings.selector,
        smoothing: config.smoothing,
        sticky: config.sticky,
        reference_distance: settings.reference_distance,
        mask: settings.mask,
        order: settings.face_order,
        color_transfer: settings.color_transfer,
        mouth: MouthSettings { enabled: settings.mouth_mask, grow: config.mouth_grow, feather: config.mouth_feather },
        max_yaw_deg: config.max_yaw_deg,
    }
}

fn detector(m: &LoadedModel) -> Result<Detector, FaceError> {
    Detector::new(m.entry.clone(), &*m.model)
}

fn recognizer(m: &LoadedModel) -> Result<Recognizer, FaceError> {
    Recognizer::new(m.entry.clone(), &*m.model)
}

/// Detector, recogniser, swapper and the tier's enhancer, with fresh
/// sessions over `models`.
pub fn fusion_pipeline(models: &TierModels) -> Result<FusionPipeline, FaceError> {
    let mask = MaskSettings::default();
    let s = &models.swapper;
    let mut p = FusionPipeline::new(
        detector(&models.detector)?,
        recognizer(&models.recognizer)?,
        Swapper::new(s.entry.clone(), &*s.model, s.emap.clone(), mask)?,
        PipelineSettings::default(),
    );
    if let Some(e) = &models.enhancer {
        p.enhancer = Some(Enhancer::new(e.entry.clone(), &*e.model, mask)?);
    }
    if let Some(r) = &models.refiner {
        let mut refiner = detector(r)?;
        refiner.settings = p.detector.settings;
        p.refiner = Some(refiner);
    }
    if let Some(l) = &models.landmarker {
        p.landmarker = Some(Landmarker::new(l.entry.clone(), &*l.model)?);
    }
    Ok(p)
}

/// Detector and recogniser sessions for source identities, off the
/// worker's thread.
pub struct Identifier {
    pub detector: Detector,
    pub recognizer: Recognizer,
}

impl Identifier {
    pub fn new(models: &TierModels) -> Result<Identifier, FaceError> {
        Ok(Identifier { detector: detector(&models.detector)?, recognizer: recognizer(&models.recognizer)? })
    }
}
