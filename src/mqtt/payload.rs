//! Everything fusiond publishes as JSON, as typed payloads: the events, the
//! per-frame `faces` message, `stats`, and the `source` state. The shapes
//! are documented in `docs/mqtt.md`; a field added here is added there.

use super::{CommandError, Message, Topics};
use crate::infer::Placement;
use crate::stats::Percentiles;
use serde::Serialize;
use std::path::PathBuf;

/// Where an error event comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    Startup,
    Camera,
    Pipeline,
}

/// A message on `<base>/events`, tagged by `event`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    SourceSet {
        source: String,
        cached: bool,
    },
    /// `forget`: an identity left the face bank.
    Forgotten {
        name: String,
    },
    TierChanged {
        from: String,
        tier: String,
    },
    /// Running on a lower tier than `wanted`.
    Degraded {
        wanted: String,
        tier: String,
        reason: String,
    },
    /// An execution provider the config asked for could not be used.
    ProviderFailed {
        model: String,
        provider: String,
        error: String,
        running_on: Vec<String>,
    },
    CameraLost {
        reason: String,
    },
    CameraBack {
        after_ms: u64,
        attempts: u32,
    },
    /// The V4L2 output device (`output.v4l2`) cannot be opened or written.
    #[serde(rename = "v4l2out_lost")]
    V4l2OutLost {
        reason: String,
    },
    #[serde(rename = "v4l2out_back")]
    V4l2OutBack {
        after_ms: u64,
        attempts: u32,
    },
    /// The config was reread; `restart_needed` names the changed keys that
    /// take effect only after a restart.
    Reloaded {
        config: PathBuf,
        restart_needed: Vec<String>,
    },
    Error {
        stage: Stage,
        message: String,
    },
}

fn json(v: &impl Serialize) -> Vec<u8> {
    // These types have string keys only, so serialising cannot fail.
    serde_json::to_vec(v).unwrap_or_default()
}

impl Event {
    pub fn message(&self, topics: &Topics) -> Message {
        Message::event(topics.events(), json(self))
    }
}

impl CommandError {
    /// The refusal on `<base>/error`.
    pub fn message(&self, topics: &Topics) -> Message {
        Message::event(topics.error(), json(self))
    }
}

/// The retained `source` state.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SourceState<'a> {
    pub active: Option<&'a str>,
    /// How many images went into the active identity.
    pub images: usize,
    pub bank: Vec<String>,
}

impl SourceState<'_> {
    pub fn to_json(&self) -> String {
        String::from_utf8(json(self)).unwrap_or_default()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FaceOut {
    /// The track id.
    pub id: u64,
    #[serde(rename = "box")]
    pub bbox: [f32; 4],
    pub score: f32,
    /// The 5 smoothed landmarks: left eye, right eye, nose tip, left and
    /// right mouth corner.
    pub landmarks: [[f32; 2]; 5],
    /// Frames the track has been live.
    pub age: u64,
    pub swapped: bool,
    /// The swap is being faded out (or back in): the head is turned past
    /// `pipeline.max_yaw_deg`, or was a moment ago.
    pub fading: bool,
    /// Head pose from the landmarks, degrees: yaw positive with the nose
    /// toward the image's right, pitch positive looking up.
    pub yaw: f32,
    pub pitch: f32,
}

/// Milliseconds per stage of one frame.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TimingsOut {
    /// Time inside the inference engine, summed over models.
    pub inference: f32,
    pub detect: f32,
    pub embed: f32,
    pub swap: f32,
    pub paste: f32,
    pub enhance: f32,
    /// Colour transfer of the swapped faces.
    pub color: f32,
    /// The mouth mask (68-point landmarker and the cut).
    pub mouth: f32,
    pub encode: f32,
    pub total: f32,
}

/// `<base>/faces`, one per processed frame.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FacesMessage<'a> {
    pub seq: u64,
    /// Capture time, Unix milliseconds.
    pub captured_ms: u128,
    /// Whether the detector ran on this frame (else the faces are tracked).
    pub detected: bool,
    pub tier: &'a str,
    pub faces: Vec<FaceOut>,
    pub timings_ms: TimingsOut,
}

impl FacesMessage<'_> {
    /// QoS 0: a lost one is replaced by the next frame's.
    pub fn message(&self, topics: &Topics) -> Message {
        Message::volatile(topics.faces(), json(self))
    }
}

/// Latency percentiles per stage over the last frames.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LatencyReport {
    pub detect: Option<Percentiles>,
    pub swap: Option<Percentiles>,
    pub paste: Option<Percentiles>,
    pub enhance: Option<Percentiles>,
    pub color: Option<Percentiles>,
    pub mouth: Option<Percentiles>,
    pub pipeline: Option<Percentiles>,
    pub encode: Option<Percentiles>,
    pub capture_to_publish: Option<Percentiles>,
}

/// One loaded model's load phases in milliseconds and its memory cost.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelStats {
    pub name: String,
    pub map_ms: f64,
    pub parse_ms: f64,
    pub optimize_ms: f64,
    pub plan_ms: f64,
    pub warmup_ms: f64,
    pub file_bytes: u64,
    pub rss_delta_bytes: i64,
    pub placement: Placement,
}

/// `<base>/stats`, every `output.stats_interval_s`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StatsMessage {
    pub version: &'static str,
    pub uptime_s: u64,
    pub tier: String,
    pub camera: &'static str,
    pub capture_fps: f64,
    pub processed_fps: f64,
    pub frames_captured: u64,
    pub frames_processed: u64,
    pub detections: u64,
    pub dropped_frames: u64,
    pub dropped_publish_frames: u64,
    pub dropped_messages: u64,
    /// Commands refused as busy because the queue was full (each answered
    /// on `error`).
    pub dropped_commands: u64,
    /// `reload` and `source` commands a newer one replaced while waiting
    /// (each answered on `error`).
    pub coalesced_commands: u64,
    /// Settings the worker had to coalesce (a newer one replaced one not yet
    /// applied).
    pub coalesced_settings: u64,
    pub mqtt_connects: u64,
    /// Frames HTTP stream clients skipped (each takes the newest frame).
    pub http_dropped_frames: u64,
    pub http_stream_clients: usize,
    /// `output.v4l2`: `off`, `writing` or `lost`.
    pub v4l2_output: &'static str,
    pub v4l2_frames_written: u64,
    /// Fused frames the V4L2 output replaced before writing them.
    pub v4l2_dropped_frames: u64,
    pub latency_ms: LatencyReport,
    pub rss_bytes: u64,
    pub peak_rss_bytes: u64,
    pub models: Vec<ModelStats>,
    /// Models the store holds loaded (the running tier's, and a preloaded
    /// next tier's), least recently used first.
    pub models_cached: Vec<String>,
}

impl StatsMessage {
    pub fn message(&self, topics: &Topics) -> Message {
        Message::event(topics.stats(), json(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_tagged_by_name_with_their_fields() {
        let e = Event::Degraded { wanted: "quality".into(), tier: "fast".into(), reason: "corrupt".into() };
        let v: serde_json::Value = serde_json::from_slice(&json(&e)).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"event": "degraded", "wanted": "quality", "tier": "fast", "reason": "corrupt"})
        );
        let e = Event::Error { stage: Stage::Camera, message: "bad".into() };
        assert_eq!(String::from_utf8(json(&e)).unwrap(), r#"{"event":"error","stage":"camera","message":"bad"}"#);
    }

    #[test]
    fn the_source_state_names_the_active_identity_and_the_bank() {
        let s = SourceState { active: Some("alice"), images: 1, bank: vec!["alice".into(), "bob".into()] };
        assert_eq!(s.to_json(), r#"{"active":"alice","images":1,"bank":["alice","bob"]}"#);
    }
}
