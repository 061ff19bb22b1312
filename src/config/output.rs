//! The `[output]` section: what the worker publishes, and how it marks it.

use crate::vcam::VcamSettings;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct OutputConfig {
    /// Publish fused frames on `<base>/frame`.
    pub frames: bool,
    /// Frames per second on `<base>/frame` at start (0 is off).
    pub frame_rate: f32,
    /// Highest `frame_rate` a command may set.
    pub max_frame_rate: f32,
    /// JPEG quality 1..=100 of frames and snapshots.
    pub jpeg_quality: u8,
    /// Seconds between messages on `<base>/stats`.
    pub stats_interval_s: u64,
    /// `[output.v4l2]`: the fused frames as a webcam.
    pub v4l2: VcamSettings,
    /// Draw a visible "AI-GENERATED" badge in the bottom-right corner of
    /// every output frame.
    pub label: bool,
    /// `[output.watermark]`: the invisible mark on every output frame.
    pub watermark: crate::mark::WatermarkSettings,
    /// `[output.c2pa]`: the signed C2PA manifest on published JPEGs.
    pub c2pa: crate::mark::C2paSettings,
}

impl Default for OutputConfig {
    fn default() -> Self {
        OutputConfig {
            frames: true,
            frame_rate: 5.0,
            max_frame_rate: 30.0,
            jpeg_quality: 80,
            stats_interval_s: 10,
            v4l2: VcamSettings::default(),
            label: false,
            watermark: Default::default(),
            c2pa: Default::default(),
        }
    }
}

impl OutputConfig {
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=100).contains(&self.jpeg_quality) || self.stats_interval_s == 0 {
            return Err("output: jpeg_quality must be in 1..=100 and stats_interval_s > 0".into());
        }
        let rate_ok = self.max_frame_rate > 0.0 && self.max_frame_rate <= 120.0;
        if !(rate_ok && (0.0..=self.max_frame_rate).contains(&self.frame_rate)) {
            return Err("output: need 0 < max_frame_rate <= 120 and 0 <= frame_rate <= max_frame_rate".into());
        }
        self.watermark.validate()?;
        self.c2pa.validate()?;
        self.v4l2.validate()
    }
}
