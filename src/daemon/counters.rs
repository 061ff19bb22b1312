//! The shared counters of every loop, folded by the control loop into one
//! typed `<base>/stats` message on a timer.

use super::camera::CaptureCounters;
use super::mailbox::Mailbox;
use super::stats::{Rate, WorkerStats};
use crate::capture::LatestFrame;
use crate::control::Inbox;
use crate::http::FrameHub;
use crate::mqtt::{ModelStats, Outbox, StatsMessage};
use crate::store::TierModels;
use crate::vcam::Vcam;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub struct Counters {
    pub started: Instant,
    pub capture: Arc<CaptureCounters>,
    pub latest: Arc<LatestFrame>,
    pub worker: Arc<Mutex<WorkerStats>>,
    pub mailbox: Arc<Mailbox>,
    pub inbox: Arc<Inbox>,
    pub hub: Arc<FrameHub>,
    /// The V4L2 output's hand-off, when `output.v4l2.enabled`.
    pub vcam: Option<Arc<Vcam>>,
    capture_rate: Rate,
    process_rate: Rate,
}

impl Counters {
    pub fn new(
        started: Instant,
        latest: Arc<LatestFrame>,
        mailbox: Arc<Mailbox>,
        inbox: Arc<Inbox>,
        hub: Arc<FrameHub>,
        vcam: Option<Arc<Vcam>>,
    ) -> Self {
        Counters {
            started,
            capture: Arc::default(),
            latest,
            worker: Arc::default(),
            mailbox,
            inbox,
            hub,
            vcam,
            capture_rate: Rate::default(),
            process_rate: Rate::default(),
        }
    }

    pub fn stats(&mut self, outbox: &Outbox, models: &TierModels, cached: Vec<String>) -> StatsMessage {
        let captured = self.capture.frames.load(Ordering::Relaxed);
        let (processed, detections, tier, latency) = {
            let mut w = self.worker.lock().unwrap_or_else(|p| p.into_inner());
            (w.processed, w.detections, w.tier.clone(), w.latencies())
        };
        let (rss, peak) = crate::procmem::rss();
        let c = &outbox.counters;
        StatsMessage {
            version: env!("CARGO_PKG_VERSION"),
            uptime_s: self.started.elapsed().as_secs(),
            // Before the worker has processed a frame on it, the tier that
            // runs is the one the control loop has loaded.
            tier: if tier.is_empty() { models.tier.clone() } else { tier },
            camera: if self.capture.lost.load(Ordering::Relaxed) { "camera_lost" } else { "streaming" },
            capture_fps: self.capture_rate.update(captured),
            processed_fps: self.process_rate.update(processed),
            frames_captured: captured,
            frames_processed: processed,
            detections,
            dropped_frames: self.latest.dropped(),
            dropped_publish_frames: c.dropped_frames.load(Ordering::Relaxed),
            dropped_messages: c.dropped_messages.load(Ordering::Relaxed),
            dropped_commands: self.inbox.busy(),
            coalesced_commands: self.inbox.coalesced(),
            coalesced_settings: self.mailbox.coalesced(),
            mqtt_connects: c.connects.load(Ordering::Relaxed),
            http_dropped_frames: self.hub.counters.dropped_frames.load(Ordering::Relaxed),
            http_stream_clients: self.hub.clients(),
            v4l2_output: match &self.vcam {
                None => "off",
                Some(v) if v.lost.load(Ordering::Relaxed) => "lost",
                Some(_) => "writing",
            },
            v4l2_frames_written: self.vcam.as_ref().map_or(0, |v| v.written.load(Ordering::Relaxed)),
            v4l2_dropped_frames: self.vcam.as_ref().map_or(0, |v| v.dropped.load(Ordering::Relaxed)),
            latency_ms: latency,
            rss_bytes: rss,
            peak_rss_bytes: peak,
            models: model_stats(models),
            models_cached: cached,
        }
    }
}

/// Each model's load phases in milliseconds, and its memory cost.
fn model_stats(models: &TierModels) -> Vec<ModelStats> {
    let ms = |d: Duration| (d.as_secs_f64() * 1e4).round() / 10.0;
    models
        .all()
        .iter()
        .map(|m| {
            let t = &m.timings;
            ModelStats {
                name: m.entry.name.clone(),
                map_ms: ms(t.map),
                parse_ms: ms(t.backend.parse),
                optimize_ms: ms(t.backend.optimize),
                plan_ms: ms(t.backend.plan),
                warmup_ms: ms(t.warmup),
                file_bytes: t.file_bytes,
                rss_delta_bytes: t.rss_delta_bytes,
                placement: m.model.placement(),
            }
        })
        .collect()
}
