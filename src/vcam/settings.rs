//! `[output.v4l2]`: the fused frames as a webcam, on a V4L2 output device.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct VcamSettings {
    /// Write fused frames to `device`.
    pub enabled: bool,
    /// The output node: a v4l2loopback device (`modprobe v4l2loopback
    /// video_nr=10 card_label=fusiond exclusive_caps=1`).
    pub device: PathBuf,
    /// Pixel formats to negotiate, in order: `YUYV` (raw, converted from
    /// the fused RGB) and `MJPG` (JPEG, where the device takes it).
    pub formats: Vec<String>,
    /// JPEG quality of `MJPG` frames.
    pub jpeg_quality: u8,
    /// First wait before reopening a lost device; it doubles up to the max.
    pub reopen_min_ms: u64,
    pub reopen_max_ms: u64,
}

impl Default for VcamSettings {
    fn default() -> Self {
        VcamSettings {
            enabled: false,
            device: PathBuf::from("/dev/video10"),
            formats: vec!["YUYV".into(), "MJPG".into()],
            jpeg_quality: 85,
            reopen_min_ms: 500,
            reopen_max_ms: 10_000,
        }
    }
}

impl VcamSettings {
    pub fn validate(&self) -> Result<(), String> {
        if self.formats.is_empty() || self.formats.iter().any(|f| f != "YUYV" && f != "MJPG") {
            return Err(format!("output.v4l2.formats {:?}: list YUYV and/or MJPG", self.formats));
        }
        if !(1..=100).contains(&self.jpeg_quality) {
            return Err("output.v4l2.jpeg_quality must be in 1..=100".into());
        }
        if self.reopen_min_ms == 0 || self.reopen_max_ms < self.reopen_min_ms {
            return Err("output.v4l2: need 0 < reopen_min_ms <= reopen_max_ms".into());
        }
        Ok(())
    }
}
