//! The worker's per-frame figures and the rate of a counter, as
//! `<base>/stats` reports them (folded in by [`super::counters`]).

use crate::face::StageTimings;
use crate::mqtt::LatencyReport;
use crate::stats::LatencyWindow;
use std::time::Duration;

/// Samples kept per latency window.
const WINDOW: usize = 256;

/// Written by the worker after every frame.
pub struct WorkerStats {
    pub processed: u64,
    pub detections: u64,
    pub tier: String,
    detect: LatencyWindow,
    swap: LatencyWindow,
    paste: LatencyWindow,
    enhance: LatencyWindow,
    color: LatencyWindow,
    mouth: LatencyWindow,
    pipeline: LatencyWindow,
    encode: LatencyWindow,
    /// Capture to the frame's outputs being queued.
    latency: LatencyWindow,
}

impl Default for WorkerStats {
    fn default() -> Self {
        let w = || LatencyWindow::new(WINDOW);
        WorkerStats {
            processed: 0,
            detections: 0,
            tier: String::new(),
            detect: w(),
            swap: w(),
            paste: w(),
            enhance: w(),
            color: w(),
            mouth: w(),
            pipeline: w(),
            encode: w(),
            latency: w(),
        }
    }
}

impl WorkerStats {
    pub fn record(
        &mut self,
        t: &StageTimings,
        pipeline: Duration,
        encode: Duration,
        latency: Duration,
        detected: bool,
    ) {
        self.processed += 1;
        if detected {
            self.detections += 1;
            self.detect.record(t.detect);
        }
        if !t.swap.is_zero() {
            self.swap.record(t.swap);
            self.paste.record(t.paste);
        }
        if !t.enhance.is_zero() {
            self.enhance.record(t.enhance);
        }
        if !t.color.is_zero() {
            self.color.record(t.color);
        }
        if !t.mouth.is_zero() {
            self.mouth.record(t.mouth);
        }
        self.pipeline.record(pipeline);
        if !encode.is_zero() {
            self.encode.record(encode);
        }
        self.latency.record(latency);
    }

    pub fn latencies(&mut self) -> LatencyReport {
        LatencyReport {
            detect: self.detect.percentiles(),
            swap: self.swap.percentiles(),
            paste: self.paste.percentiles(),
            enhance: self.enhance.percentiles(),
            color: self.color.percentiles(),
            mouth: self.mouth.percentiles(),
            pipeline: self.pipeline.percentiles(),
            encode: self.encode.percentiles(),
            capture_to_publish: self.latency.percentiles(),
        }
    }
}

/// Frames per second between two readings of a counter.
#[derive(Debug, Default)]
pub struct Rate {
    last: Option<(std::time::Instant, u64)>,
}

impl Rate {
    pub fn update(&mut self, count: u64) -> f64 {
        let now = std::time::Instant::now();
        let fps = match self.last {
            Some((t, c)) if now > t => count.saturating_sub(c) as f64 / (now - t).as_secs_f64(),
            _ => 0.0,
        };
        self.last = Some((now, count));
        fps
    }
}
