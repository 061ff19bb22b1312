//! The processing owner loop: always the newest frame, detection at most
//! every `detect_interval` with IoU tracking in between, the swap, and the
//! frame's outputs (faces JSON, rate-limited JPEG, snapshots) into the
//! outbox. It never waits on MQTT.

use super::stats::WorkerStats;
use crate::capture::{Frame, LatestFrame};
use crate::face::{
    largest, Embedding, Face, FusionPipeline, PipelineSettings, Selector, StageTimings, Tracked, Tracker,
};
use crate::mqtt::{Message, Outbox, Topics};
use crate::store::TierModels;
use crate::vision::RgbImage;
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

/// Changes the control loop sends to the worker.
pub enum ToWorker {
    Models(TierModels),
    /// The identity to swap in; `None` stops swapping.
    Source(Option<Embedding>),
    /// `frame_rate` is frames per second on `frame`; 0 is off.
    Settings {
        enabled: bool,
        blend: f32,
        selector: String,
        frame_rate: f32,
    },
    Snapshot,
    /// Hang (watchdog tests): no more frames, no more watchdog pings.
    Stall,
}

#[derive(Debug, Clone)]
pub struct WorkerConfig {
    pub detect_interval: Duration,
    pub jpeg_quality: u8,
    /// Publishing frames at all (`output.frames`).
    pub frames: bool,
    pub frame_rate: f32,
    pub enabled: bool,
    pub blend: f32,
    pub selector: String,
}

/// FaceFusion's default reference distance.
const REFERENCE_DISTANCE: f32 = 0.3;

#[derive(Serialize)]
struct FaceOut {
    id: u64,
    #[serde(rename = "box")]
    bbox: [f32; 4],
    score: f32,
    swapped: bool,
}

#[derive(Serialize)]
struct TimingsOut {
    /// Time inside the inference engine, summed over models.
    inference: f32,
    detect: f32,
    embed: f32,
    swap: f32,
    paste: f32,
    enhance: f32,
    encode: f32,
    total: f32,
}

#[derive(Serialize)]
struct FacesMessage<'a> {
    seq: u64,
    /// Capture time, Unix milliseconds.
    captured_ms: u128,
    /// Whether the detector ran on this frame (else the faces are tracked).
    detected: bool,
    tier: &'a str,
    faces: Vec<FaceOut>,
    timings_ms: TimingsOut,
}

fn ms(d: Duration) -> f32 {
    d.as_secs_f32() * 1e3
}

/// Encodes `img` as a baseline JPEG.
pub fn encode_jpeg(img: &RgbImage, quality: u8) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(img.len() / 8);
    let (w, h) = img.dimensions();
    if w > u16::MAX as u32 || h > u16::MAX as u32 {
        return Err(format!("{w}x{h} is too large for JPEG"));
    }
    let encoder = jpeg_encoder::Encoder::new(&mut out, quality);
    encoder.encode(img.as_raw(), w as u16, h as u16, jpeg_encoder::ColorType::Rgb).map_err(|e| e.to_string())?;
    Ok(out)
}

pub struct Worker<'a> {
    pub latest: &'a LatestFrame,
    pub outbox: &'a Outbox,
    pub topics: &'a Topics,
    pub stats: &'a Mutex<WorkerStats>,
    /// Milliseconds since the daemon started, written after every frame:
    /// the watchdog's proof of life.
    pub beat: &'a AtomicU64,
    pub started: Instant,
    pub notifier: super::notify::Notifier,
}

struct State {
    pipeline: FusionPipeline,
    tier: String,
    config: WorkerConfig,
    tracker: Tracker,
    tracks: Vec<Tracked>,
    last_detect: Option<Instant>,
    last_frame_sent: Option<Instant>,
    snapshot: bool,
    /// Lock onto the largest face on the next frame (selector `reference`).
    want_reference: bool,
    source: Option<Embedding>,
}

impl State {
    fn apply(&mut self, msg: ToWorker) {
        match msg {
            ToWorker::Models(models) => match models.pipeline(self.pipeline.settings.clone()) {
                Ok(mut p) => {
                    if let Some(src) = self.source.clone() {
                        if let Err(e) = p.set_source_embedding(src) {
                            log::error!("tier `{}`: cannot use the source identity: {e}", models.tier);
                        }
                    }
                    self.pipeline = p;
                    self.tier = models.tier.clone();
                    log::info!("worker: running tier `{}`", self.tier);
                }
                Err(e) => log::error!("tier `{}`: cannot build the pipeline: {e}", models.tier),
            },
            ToWorker::Source(Some(e)) => match self.pipeline.set_source_embedding(e.clone()) {
                Ok(()) => self.source = Some(e),
                Err(err) => log::error!("cannot use the source identity: {err}"),
            },
            ToWorker::Source(None) => {
                self.pipeline.clear_source();
                self.source = None;
            }
            ToWorker::Settings { enabled, blend, selector, frame_rate } => {
                self.config.enabled = enabled;
                self.config.frame_rate = frame_rate;
                self.config.blend = blend;
                self.pipeline.settings.blend = blend / 100.0;
                self.want_reference = selector == "reference" && self.config.selector != "reference";
                self.pipeline.settings.selector = match selector.as_str() {
                    "many" => Selector::Many,
                    "reference" => self.pipeline.settings.selector.clone(),
                    _ => Selector::One,
                };
                self.config.selector = selector;
            }
            ToWorker::Snapshot => self.snapshot = true,
            ToWorker::Stall => {
                log::warn!("stall command: the processing loop stops; the watchdog should restart the daemon");
                loop {
                    std::thread::sleep(Duration::from_secs(3600));
                }
            }
        }
    }
}

impl Worker<'_> {
    /// Runs until the mailbox is closed and drained.
    pub fn run(&self, models: TierModels, config: WorkerConfig, rx: Receiver<ToWorker>) -> Result<(), String> {
        let settings = PipelineSettings { blend: config.blend / 100.0, selector: Selector::One };
        let pipeline = models.pipeline(settings).map_err(|e| e.to_string())?;
        let mut st = State {
            pipeline,
            tier: models.tier.clone(),
            tracker: Tracker::default(),
            tracks: Vec::new(),
            last_detect: None,
            last_frame_sent: None,
            snapshot: false,
            want_reference: false,
            source: None,
            config: config.clone(),
        };
        st.config.selector = String::new();
        st.apply(ToWorker::Settings {
            enabled: config.enabled,
            blend: config.blend,
            selector: config.selector,
            frame_rate: config.frame_rate,
        });
        // The watchdog is pinged from this loop, so a stuck pipeline stops
        // the pings and systemd restarts the daemon.
        let watchdog = self.notifier.watchdog_interval();
        let mut pinged = Instant::now();
        loop {
            while let Ok(msg) = rx.try_recv() {
                st.apply(msg);
            }
            self.beat.store(self.started.elapsed().as_millis() as u64, Ordering::Relaxed);
            if watchdog.is_some_and(|every| pinged.elapsed() >= every) {
                self.notifier.watchdog();
                pinged = Instant::now();
            }
            let Some(mut frame) = self.latest.take(Duration::from_millis(200)) else {
                if self.latest.is_closed() {
                    return Ok(());
                }
                continue;
            };
            if let Err(e) = self.process(&mut st, &mut frame) {
                log::error!("frame {}: {e}", frame.seq);
                self.outbox.push(Message::event(
                    self.topics.events(),
                    serde_json::json!({"event": "error", "stage": "pipeline", "message": e}).to_string(),
                ));
            }
            self.latest.recycle(frame);
        }
    }

    fn process(&self, st: &mut State, frame: &mut Frame) -> Result<(), String> {
        let start = Instant::now();
        let mut timings = StageTimings::default();
        let mut detected = false;
        let mut swapped = Vec::new();
        if st.config.enabled {
            let due = st.last_detect.is_none_or(|t| t.elapsed() >= st.config.detect_interval);
            if due {
                let t = Instant::now();
                let faces = st.pipeline.detector.detect(&frame.image).map_err(|e| e.to_string())?;
                timings.detect = t.elapsed();
                st.tracks = st.tracker.update(&faces);
                st.last_detect = Some(t);
                detected = true;
            }
            let faces: Vec<Face> = st.tracks.iter().map(|t| t.face.clone()).collect();
            if st.want_reference {
                if let Some(i) = largest(&faces) {
                    let reference =
                        st.pipeline.recognizer.embed(&frame.image, &faces[i].landmarks).map_err(|e| e.to_string())?;
                    st.pipeline.settings.selector = Selector::Reference { reference, max_distance: REFERENCE_DISTANCE };
                    st.want_reference = false;
                }
            }
            let (s, t) = st.pipeline.fuse(&mut frame.image, &faces).map_err(|e| e.to_string())?;
            swapped = s;
            timings = StageTimings {
                detect: timings.detect,
                inference: t.inference + if detected { st.pipeline.detector.last_inference } else { Duration::ZERO },
                ..t
            };
        }
        let pipeline_done = Instant::now();

        let frame_due = st.config.frames
            && st.config.frame_rate > 0.0
            && st.last_frame_sent.is_none_or(|t| t.elapsed().as_secs_f32() >= 1.0 / st.config.frame_rate);
        let mut encode = Duration::ZERO;
        if frame_due || st.snapshot {
            let t = Instant::now();
            let jpeg = encode_jpeg(&frame.image, if st.snapshot { 95 } else { st.config.jpeg_quality })?;
            encode = t.elapsed();
            if std::mem::take(&mut st.snapshot) {
                self.outbox.push(Message::event(self.topics.snapshot(), jpeg.clone()));
            }
            if frame_due {
                self.outbox.push_frame(self.topics.frame(), jpeg);
                st.last_frame_sent = Some(t);
            }
        }
        let total = start.elapsed();
        if st.config.enabled {
            let faces = st
                .tracks
                .iter()
                .enumerate()
                .map(|(i, t)| FaceOut {
                    id: t.id,
                    bbox: t.face.bbox,
                    score: t.face.score,
                    swapped: swapped.contains(&i),
                })
                .collect();
            let captured_ms = frame.captured.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_millis());
            let msg = FacesMessage {
                seq: frame.seq,
                captured_ms,
                detected,
                tier: &st.tier,
                faces,
                timings_ms: TimingsOut {
                    inference: ms(timings.inference),
                    detect: ms(timings.detect),
                    embed: ms(timings.embed),
                    swap: ms(timings.swap),
                    paste: ms(timings.paste),
                    enhance: ms(timings.enhance),
                    encode: ms(encode),
                    total: ms(total),
                },
            };
            if let Ok(json) = serde_json::to_vec(&msg) {
                self.outbox
                    .push(Message { qos: rumqttc::QoS::AtMostOnce, ..Message::event(self.topics.faces(), json) });
            }
        }
        let latency = frame.captured.elapsed().unwrap_or_default();
        let mut s = self.stats.lock().unwrap_or_else(|p| p.into_inner());
        s.record(&timings, pipeline_done - start, encode, latency, detected);
        s.tier.clone_from(&st.tier);
        Ok(())
    }
}
