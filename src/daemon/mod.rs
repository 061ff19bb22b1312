//! The live daemon: capture → pipeline → publish, one owner loop per
//! external resource and bounded hand-offs between them.
//!
//! - the camera thread owns the [`FrameSource`] and fills the latest-frame
//!   mailbox (the newest frame wins; replaced frames count as dropped);
//! - the worker thread owns the fusion pipeline and queues its outputs;
//! - the MQTT [`Link`] owns the broker session (publisher + connection);
//! - this thread (the control loop) owns the models, the face bank and the
//!   [`Control`] state machine: commands in, effects out, stats on a timer.

pub mod bank;
mod camera;
mod notify;
mod stats;
mod worker;

pub use camera::{CameraEvent, Health, SourceFactory};
pub use notify::Notifier;
pub use worker::encode_jpeg;

use crate::capture::{FrameSource, LatestFrame, SequenceSource, V4l2Settings, V4l2Source};
use crate::config::{CameraConfig, Config, SourceKind};
use crate::control::{Control, Effect, Settings};
use crate::face::{largest_identity, Detector, Embedding, Recognizer};
use crate::infer::Engines;
use crate::mqtt::{Broker, CommandError, CommandLimits, Link, LinkSettings, Message, Outbox, SourceCommand, Topics};
use crate::store::cache::Cache;
use crate::store::{Store, TierModels, TierOutcome};
use anyhow::{anyhow, Context, Result};
use bank::FaceBank;
use bytes::Bytes;
use camera::CaptureCounters;
use stats::{Rate, WorkerStats};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use worker::{ToWorker, Worker, WorkerConfig};

/// Commands waiting for the control loop; more are dropped (and counted).
const COMMAND_QUEUE: usize = 64;

/// Process-level flags the daemon obeys (set from signal handlers).
pub struct Signals<'a> {
    /// SIGTERM/SIGINT: drain and exit.
    pub stop: &'a AtomicBool,
    /// SIGHUP: reread the config and models.
    pub reload: &'a AtomicBool,
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().replace(['/', '+', '#'], "_"))
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "fusiond".into())
}

/// The camera the config asks for: the V4L2 device, or the sample frames
/// when `auto` finds no device.
pub fn camera_factory(cam: &CameraConfig) -> Result<SourceFactory> {
    let use_v4l2 = match cam.source {
        SourceKind::V4l2 => true,
        SourceKind::Sequence => false,
        SourceKind::Auto => cam.device.exists(),
    };
    if use_v4l2 {
        let settings = V4l2Settings {
            device: cam.device.clone(),
            formats: cam.formats.clone(),
            width: cam.width,
            height: cam.height,
            fps: cam.fps,
            timeout: Duration::from_millis(cam.stall_timeout_ms),
        };
        return Ok(Box::new(move || V4l2Source::open(&settings).map(|s| Box::new(s) as Box<dyn FrameSource>)));
    }
    let dir = cam.samples.iter().find(|d| d.is_dir()).cloned().ok_or_else(|| {
        anyhow!(
            "no camera at {} and none of camera.samples exists ({}); attach a camera or name a folder of JPEG frames",
            cam.device.display(),
            cam.samples.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
        )
    })?;
    if cam.source == SourceKind::Auto {
        log::info!("no camera at {}: playing the sample frames in {}", cam.device.display(), dir.display());
    }
    let fps = cam.samples_fps;
    Ok(Box::new(move || SequenceSource::open(&dir, fps).map(|s| Box::new(s) as Box<dyn FrameSource>)))
}

fn read_password(file: &str) -> Result<String> {
    let bare = !file.contains('/');
    let path = match std::env::var_os("CREDENTIALS_DIRECTORY") {
        Some(dir) if bare && Path::new(&dir).join(file).is_file() => Path::new(&dir).join(file),
        _ => PathBuf::from(file),
    };
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!("mqtt.password_file {}: cannot read it; check the path or LoadCredential=", path.display())
    })?;
    Ok(text.trim_end_matches(['\n', '\r']).to_string())
}

/// The session settings the config asks for, and the embedded broker when
/// no broker is configured.
fn link_settings(config: &Config, device_id: &str) -> Result<(LinkSettings, Option<Broker>)> {
    let m = &config.mqtt;
    let (host, port, broker) = if m.host.is_empty() {
        let broker = Broker::start(([127, 0, 0, 1], m.port).into()).with_context(|| {
            format!("no mqtt.host is configured and the embedded broker cannot listen on 127.0.0.1:{}; set mqtt.host to your broker or free the port", m.port)
        })?;
        log::info!("no mqtt.host configured: started the embedded MQTT broker on {}", broker.addr());
        ("127.0.0.1".to_string(), broker.addr().port(), Some(broker))
    } else {
        (m.host.clone(), m.port, None)
    };
    let credentials = match (m.username.is_empty(), m.password_file.is_empty()) {
        (true, true) => None,
        (false, true) => Some((m.username.clone(), String::new())),
        (_, false) => Some((m.username.clone(), read_password(&m.password_file)?)),
    };
    let tls_ca = match (m.tls, m.ca_file.as_os_str().is_empty()) {
        (false, _) => None,
        (true, true) => Some(Vec::new()),
        (true, false) => {
            Some(std::fs::read(&m.ca_file).with_context(|| format!("mqtt.ca_file {}", m.ca_file.display()))?)
        }
    };
    let settings = LinkSettings {
        host,
        port,
        client_id: if m.client_id.is_empty() { format!("fusiond-{device_id}") } else { m.client_id.clone() },
        keep_alive: Duration::from_secs(m.keep_alive_s),
        credentials,
        tls_ca,
        // Twice the image limit: an oversized source image still arrives and
        // is refused with a reason, instead of cutting the connection.
        max_incoming: config.pipeline.max_source_bytes.saturating_mul(2).saturating_add(64 * 1024),
        reconnect_max: Duration::from_secs(m.reconnect_max_s),
        client_queue: 64,
    };
    Ok((settings, broker))
}

/// Detector and recogniser sessions for computing source identities off
/// the worker's thread.
struct Identifier {
    detector: Detector,
    recognizer: Recognizer,
}

impl Identifier {
    fn new(models: &TierModels) -> Result<Identifier> {
        Ok(Identifier {
            detector: Detector::new(models.detector.entry.clone(), &*models.detector.model)?,
            recognizer: Recognizer::new(models.recognizer.entry.clone(), &*models.recognizer.model)?,
        })
    }
}

enum Incoming {
    Command(String, Bytes),
}

/// Everything the control loop owns.
struct ControlLoop<'a> {
    config_path: PathBuf,
    config: Config,
    topics: Topics,
    outbox: Arc<Outbox>,
    control: Control,
    store: Store,
    models: TierModels,
    identifier: Identifier,
    bank: Option<FaceBank>,
    sources: Cache<Embedding>,
    to_worker: SyncSender<ToWorker>,
    /// The active source's label, for the source state.
    active_source: Option<String>,
    /// Models whose failed execution providers were already reported.
    reported_providers: std::collections::HashSet<String>,
    signals: &'a Signals<'a>,
}

fn json(v: serde_json::Value) -> Vec<u8> {
    v.to_string().into_bytes()
}

impl ControlLoop<'_> {
    fn event(&self, v: serde_json::Value) {
        self.outbox.push(Message::event(self.topics.events(), json(v)));
    }

    /// Every execution provider that the config asked for and that could
    /// not be used, once per loaded model: loud in the log and on `events`,
    /// because a silent fall back to the CPU is the failure users miss.
    fn report_providers(&mut self) {
        for m in self.models.all() {
            let placement = m.model.placement();
            if placement.failed.is_empty() || !self.reported_providers.insert(m.entry.name.clone()) {
                continue;
            }
            for f in &placement.failed {
                log::error!(
                    "model `{}`: execution provider {} failed: {}; running on {:?} instead",
                    m.entry.name,
                    f.provider,
                    f.error,
                    placement.providers
                );
                self.event(serde_json::json!({
                    "event": "provider_failed",
                    "model": m.entry.name,
                    "provider": f.provider,
                    "error": f.error,
                    "running_on": placement.providers,
                }));
            }
        }
    }

    fn refuse(&self, command: &str, reason: String) {
        let e = CommandError { command: command.into(), reason };
        log::warn!("{e}");
        self.outbox.push(Message::event(self.topics.error(), json(serde_json::to_value(&e).unwrap_or_default())));
    }

    fn source_state(&self) -> String {
        let bank = self.bank.as_ref().map(|b| b.names()).unwrap_or_default();
        serde_json::json!({"active": self.active_source, "bank": bank}).to_string()
    }

    fn apply(&mut self, effects: Vec<Effect>) {
        for effect in effects {
            match effect {
                Effect::State { feature, value } => {
                    self.outbox.push(Message::retained(self.topics.state(feature), value));
                }
                Effect::Error(e) => self.refuse(&e.command, e.reason),
                Effect::Reconfigure => {
                    let s = self.control.settings();
                    let _ = self.to_worker.send(ToWorker::Settings {
                        enabled: s.enabled,
                        blend: s.blend,
                        selector: s.selector.clone(),
                        frame_rate: s.frame_rate,
                    });
                }
                Effect::Snapshot => {
                    let _ = self.to_worker.send(ToWorker::Snapshot);
                }
                Effect::SetSource(src) => self.set_source(src),
                Effect::SwitchTier(tier) => self.switch_tier(&tier, "quality"),
                Effect::Reload => self.reload(),
                Effect::Stall => {
                    let _ = self.to_worker.send(ToWorker::Stall);
                }
            }
        }
    }

    /// Computes (or recalls) the identity, tells the worker, and updates the
    /// source state; a failure is refused and changes nothing.
    fn set_source(&mut self, src: SourceCommand) {
        let (label, embedding, cached) = match src {
            SourceCommand::Named(name) => match self.bank.as_ref().map(|b| b.get(&name)) {
                Some(Ok(e)) => (name, e, true),
                Some(Err(e)) => return self.refuse("source", e.to_string()),
                None => return self.refuse("source", "the face bank is unavailable; see the log".into()),
            },
            SourceCommand::Image { name, bytes, .. } => {
                let hash = crate::catalog::sha256_hex(&bytes);
                let (embedding, cached) = match self.sources.get(&hash) {
                    Some(e) => ((*e).clone(), true),
                    None => {
                        let img = match image::load_from_memory(&bytes) {
                            Ok(i) => i.to_rgb8(),
                            Err(e) => return self.refuse("source", format!("the image cannot be decoded: {e}")),
                        };
                        let id = &mut self.identifier;
                        match largest_identity(&mut id.detector, &mut id.recognizer, &img, "the source image") {
                            Ok(e) => {
                                self.sources.insert(&hash, Arc::new(e.clone()), 1);
                                (e, false)
                            }
                            Err(e) => return self.refuse("source", e.to_string()),
                        }
                    }
                };
                if let Some(name) = &name {
                    match self.bank.as_mut().map(|b| b.insert(name, &embedding)) {
                        Some(Ok(())) => {}
                        Some(Err(e)) => return self.refuse("source", e.to_string()),
                        None => return self.refuse("source", "the face bank is unavailable; see the log".into()),
                    }
                }
                (name.unwrap_or_else(|| format!("image:{}", &hash[..12])), embedding, cached)
            }
        };
        let _ = self.to_worker.send(ToWorker::Source(Some(embedding)));
        self.active_source = Some(label.clone());
        let state = self.source_state();
        let effect = self.control.source_set(&state);
        self.apply(vec![effect]);
        self.event(serde_json::json!({"event": "source_set", "source": label, "cached": cached}));
    }

    fn switch_tier(&mut self, tier: &str, command: &str) {
        let before = self.models.tier.clone();
        match self.store.activate(tier) {
            Ok(outcome) => {
                let (models, degraded) = match outcome {
                    TierOutcome::Ready(m) => (m, None),
                    TierOutcome::Degraded { models, reason, .. } => (models, Some(reason)),
                };
                match Identifier::new(&models) {
                    Ok(id) => self.identifier = id,
                    Err(e) => return self.refuse(command, e.to_string()),
                }
                self.models = models.clone();
                self.report_providers();
                let _ = self.to_worker.send(ToWorker::Models(models.clone()));
                if let Some(reason) = &degraded {
                    self.event(
                        serde_json::json!({"event": "degraded", "wanted": tier, "tier": models.tier, "reason": reason}),
                    );
                }
                self.event(serde_json::json!({"event": "tier_changed", "from": before, "tier": models.tier}));
                if models.tier != tier {
                    let effect = self.control.tier_in_use(&models.tier);
                    self.apply(vec![effect]);
                }
            }
            Err(reason) => {
                self.refuse(command, format!("tier `{tier}` cannot load: {reason}"));
                let effect = self.control.tier_in_use(&before);
                self.apply(vec![effect]);
            }
        }
    }

    /// Rereads the config and reloads the models; a bad config is refused
    /// and the daemon carries on with the old one.
    fn reload(&mut self) {
        let config = match Config::load(&self.config_path) {
            Ok(c) => c,
            Err(e) => return self.refuse("reload", format!("{e}; still running on the previous configuration")),
        };
        if config.camera != self.config.camera || config.mqtt != self.config.mqtt {
            log::warn!("reload: [camera] and [mqtt] changes take effect at the next restart");
        }
        let store = match Engines::from_config(&config.inference)
            .map_err(|e| e.to_string())
            .and_then(|engines| Store::open(&config, engines).map_err(|e| e.to_string()))
        {
            Ok(s) => s,
            Err(e) => return self.refuse("reload", format!("{e}; still running on the previous models")),
        };
        let limits = limits(&config);
        self.control.set_limits(limits);
        self.store = store;
        self.config = config;
        let tier = self.control.settings().quality.clone();
        let tier = if self.config.tier_index(&tier).is_some() { tier } else { self.config.models.start_tier.clone() };
        self.switch_tier(&tier, "reload");
        self.event(serde_json::json!({"event": "reloaded", "config": self.config_path}));
    }

    fn check_signals(&mut self) {
        if self.signals.reload.swap(false, Ordering::Relaxed) {
            log::info!("SIGHUP: rereading {}", self.config_path.display());
            self.reload();
        }
    }
}

fn limits(config: &Config) -> CommandLimits {
    CommandLimits {
        max_image_bytes: config.pipeline.max_source_bytes,
        max_image_pixels: config.pipeline.max_source_pixels,
        tiers: config.tier.iter().map(|t| t.name.clone()).collect(),
        max_frame_rate: config.output.max_frame_rate,
        allow_stall: config.debug.stall_command,
    }
}

/// Shared counters, folded into `<base>/stats`.
struct Counters {
    started: Instant,
    capture: Arc<CaptureCounters>,
    latest: Arc<LatestFrame>,
    worker: Arc<Mutex<WorkerStats>>,
    dropped_commands: Arc<AtomicU64>,
    capture_rate: Rate,
    process_rate: Rate,
    models: serde_json::Value,
}

impl Counters {
    fn stats(&mut self, outbox: &Outbox) -> serde_json::Value {
        let captured = self.capture.frames.load(Ordering::Relaxed);
        let (processed, detections, tier, latency) = {
            let mut w = self.worker.lock().unwrap_or_else(|p| p.into_inner());
            (w.processed, w.detections, w.tier.clone(), w.latencies())
        };
        let (rss, peak) = crate::store::loader_rss();
        let c = &outbox.counters;
        serde_json::json!({
            "version": env!("CARGO_PKG_VERSION"),
            "uptime_s": self.started.elapsed().as_secs(),
            "tier": tier,
            "camera": if self.capture.lost.load(Ordering::Relaxed) { "camera_lost" } else { "streaming" },
            "capture_fps": self.capture_rate.update(captured),
            "processed_fps": self.process_rate.update(processed),
            "frames_captured": captured,
            "frames_processed": processed,
            "detections": detections,
            "dropped_frames": self.latest.dropped(),
            "dropped_publish_frames": c.dropped_frames.load(Ordering::Relaxed),
            "dropped_messages": c.dropped_messages.load(Ordering::Relaxed),
            "dropped_commands": self.dropped_commands.load(Ordering::Relaxed),
            "mqtt_connects": c.connects.load(Ordering::Relaxed),
            "latency_ms": latency,
            "rss_bytes": rss,
            "peak_rss_bytes": peak,
            "models": self.models,
        })
    }
}

/// Whether loading runs TensorRT's engine builder.
fn builds_engines(config: &Config) -> bool {
    config.inference.uses_ort() && config.inference.ort.providers.contains(&crate::config::ProviderKind::Tensorrt)
}

/// Each model's load phases in milliseconds, and its memory cost.
fn model_phases(models: &TierModels) -> serde_json::Value {
    let ms = |d: Duration| (d.as_secs_f64() * 1e4).round() / 10.0;
    let phases = |m: &&Arc<crate::store::LoadedModel>| {
        let t = &m.timings;
        serde_json::json!({
            "name": m.entry.name,
            "map_ms": ms(t.map),
            "parse_ms": ms(t.backend.parse),
            "optimize_ms": ms(t.backend.optimize),
            "plan_ms": ms(t.backend.plan),
            "warmup_ms": ms(t.warmup),
            "file_bytes": t.file_bytes,
            "rss_delta_bytes": t.rss_delta_bytes,
            "placement": m.model.placement(),
        })
    };
    models.all().iter().map(phases).collect()
}

/// Runs the daemon until `signals.stop`. `source` replaces the configured
/// camera (tests inject faults through it).
pub fn run(config_path: &Path, source: Option<SourceFactory>, signals: &Signals) -> Result<()> {
    let config = Config::load(config_path)?;
    let device_id = if config.mqtt.device_id.is_empty() { hostname() } else { config.mqtt.device_id.clone() };
    let topics = Topics::new(&config.mqtt.prefix, &device_id)?;
    let open_camera = match source {
        Some(s) => s,
        None => camera_factory(&config.camera)?,
    };
    let (link_settings, broker) = link_settings(&config, &device_id)?;
    let outbox = Arc::new(Outbox::new(config.mqtt.queue_messages));
    outbox.push(Message::retained(topics.available(), "starting"));
    let (cmd_tx, cmd_rx) = sync_channel::<Incoming>(COMMAND_QUEUE);
    let dropped_commands = Arc::new(AtomicU64::new(0));
    let dropped = dropped_commands.clone();
    let link = Link::start(&link_settings, topics.clone(), outbox.clone(), move |feature, payload| {
        if cmd_tx.try_send(Incoming::Command(feature.to_string(), payload)).is_err() {
            dropped.fetch_add(1, Ordering::Relaxed);
        }
    })
    .map_err(|e| anyhow!("mqtt: {e}"))?;
    log::info!("mqtt: topics under {}/, broker {}:{}", topics.base(), link_settings.host, link_settings.port);

    let result = run_connected(config_path, config, &topics, &outbox, open_camera, cmd_rx, dropped_commands, signals);
    if let Err(e) = &result {
        outbox.push(Message::event(
            topics.events(),
            json(serde_json::json!({"event": "error", "stage": "startup", "message": format!("{e:#}")})),
        ));
    }
    outbox.push(Message::retained(topics.available(), "stopped"));
    link.shutdown(Duration::from_secs(3));
    drop(broker);
    result
}

#[allow(clippy::too_many_arguments)]
fn run_connected(
    config_path: &Path,
    config: Config,
    topics: &Topics,
    outbox: &Arc<Outbox>,
    open_camera: SourceFactory,
    cmd_rx: Receiver<Incoming>,
    dropped_commands: Arc<AtomicU64>,
    signals: &Signals,
) -> Result<()> {
    let started = Instant::now();
    let notifier = Notifier::from_env();
    notifier.status("checking staging");
    let engines = Engines::from_config(&config.inference)?;
    let store = Store::open(&config, engines.clone())?;
    let start_tier = config.models.start_tier.clone();
    log::info!("loading tier `{start_tier}` on {}", engines.describe());
    if builds_engines(&config) {
        // TensorRT builds an engine per model on first use (minutes on a
        // Jetson) unless `fusiond warm` or an earlier start cached it.
        outbox.push(Message::retained(topics.available(), "warming"));
        notifier.status(&format!("building or loading TensorRT engines for tier {start_tier}"));
    } else {
        notifier.status(&format!("loading and warming tier {start_tier}"));
    }
    let (models, degraded) = match store.activate(&start_tier).map_err(|e| anyhow!("no tier can load: {e}"))? {
        TierOutcome::Ready(m) => (m, None),
        TierOutcome::Degraded { models, reason, .. } => (models, Some(reason)),
    };
    let identifier = Identifier::new(&models)?;
    let bank = match FaceBank::open(&config.pipeline.state_dir) {
        Ok(b) => Some(b),
        Err(e) => {
            log::error!("{e}; named sources are unavailable until it is fixed");
            None
        }
    };

    let settings = Settings {
        enabled: true,
        quality: models.tier.clone(),
        blend: config.pipeline.blend,
        selector: config.pipeline.selector.clone(),
        frame_rate: if config.output.frames { config.output.frame_rate } else { 0.0 },
        source: None,
    };
    let worker_config = WorkerConfig {
        detect_interval: Duration::from_millis(config.pipeline.detect_interval_ms),
        jpeg_quality: config.output.jpeg_quality,
        frames: config.output.frames,
        frame_rate: settings.frame_rate,
        enabled: settings.enabled,
        blend: settings.blend,
        selector: settings.selector.clone(),
    };

    let latest = Arc::new(LatestFrame::new());
    let capture_counters = Arc::new(CaptureCounters::default());
    let worker_stats = Arc::new(Mutex::new(WorkerStats::default()));
    let beat = Arc::new(AtomicU64::new(0));
    let stop_capture = Arc::new(AtomicBool::new(false));
    let (to_worker, worker_rx) = sync_channel::<ToWorker>(16);

    let mut counters = Counters {
        started,
        capture: capture_counters.clone(),
        latest: latest.clone(),
        worker: worker_stats.clone(),
        dropped_commands,
        capture_rate: Rate::default(),
        process_rate: Rate::default(),
        models: model_phases(&models),
    };
    let mut ctl = ControlLoop {
        config_path: config_path.to_path_buf(),
        topics: topics.clone(),
        outbox: outbox.clone(),
        control: Control::new(settings, limits(&config)),
        store,
        identifier,
        bank,
        sources: Cache::new(config.pipeline.source_cache, u64::MAX),
        to_worker,
        active_source: None,
        reported_providers: Default::default(),
        signals,
        models,
        config,
    };
    ctl.report_providers();
    let degraded_reason = degraded.clone();
    if let Some(reason) = degraded {
        ctl.event(
            serde_json::json!({"event": "degraded", "wanted": start_tier, "tier": ctl.models.tier, "reason": reason}),
        );
    }
    let initial = ctl.config.pipeline.source.clone();
    if !initial.is_empty() {
        match std::fs::read(&initial) {
            Ok(bytes) => match crate::mqtt::parse("source", &bytes, &limits(&ctl.config)) {
                Ok(crate::mqtt::Command::Source(src)) => ctl.set_source(src),
                Ok(_) => {}
                Err(e) => ctl.refuse("source", format!("pipeline.source {initial}: {}", e.reason)),
            },
            Err(_) => ctl.set_source(SourceCommand::Named(initial)),
        }
    }
    // The worker and the camera start once the start source is known, so
    // no frame is processed without it.
    let camera = {
        let (latest, counters, stop, outbox, topics) =
            (latest.clone(), capture_counters.clone(), stop_capture.clone(), outbox.clone(), topics.clone());
        let health = Health::new(
            Duration::from_millis(ctl.config.camera.reconnect_min_ms),
            Duration::from_millis(ctl.config.camera.reconnect_max_ms),
        );
        std::thread::Builder::new().name("camera".into()).spawn(move || {
            camera::capture_loop(open_camera, &latest, health, &counters, &stop, |event| {
                let (state, body) = match &event {
                    CameraEvent::Lost { reason } => {
                        log::warn!("camera lost: {reason}");
                        notifier.status(&format!("degraded: camera lost: {reason}"));
                        (Some("camera_lost"), serde_json::json!({"event": "camera_lost", "reason": reason}))
                    }
                    CameraEvent::Back { after, attempts } => {
                        log::info!("camera back after {after:?} ({attempts} attempts)");
                        notifier.status("running");
                        let ms = after.as_millis() as u64;
                        (
                            Some("streaming"),
                            serde_json::json!({"event": "camera_back", "after_ms": ms, "attempts": attempts}),
                        )
                    }
                    CameraEvent::BadFrames { reason } => {
                        log::warn!("camera: {reason}");
                        (None, serde_json::json!({"event": "error", "stage": "camera", "message": reason}))
                    }
                };
                outbox.push(Message::event(topics.events(), json(body)));
                if let Some(state) = state {
                    outbox.push(Message::retained(topics.state("camera"), state));
                }
            })
        })?
    };

    let worker = {
        let (latest, outbox, topics, stats, beat, models) =
            (latest.clone(), outbox.clone(), topics.clone(), worker_stats.clone(), beat.clone(), ctl.models.clone());
        std::thread::Builder::new().name("worker".into()).spawn(move || {
            let w = Worker {
                latest: &latest,
                outbox: &outbox,
                topics: &topics,
                stats: &stats,
                beat: &beat,
                started,
                notifier,
            };
            let result = w.run(models, worker_config, worker_rx);
            // A worker that cannot run stops capture too: nothing would use it.
            latest.close();
            result
        })?
    };

    for effect in ctl.control.retained() {
        ctl.apply(vec![effect]);
    }
    // Ready means models warm and the camera delivering.
    notifier.status("waiting for the camera");
    while capture_counters.frames.load(Ordering::Relaxed) == 0 && !signals.stop.load(Ordering::Relaxed) {
        if worker.is_finished() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    outbox.push(Message::retained(topics.state("camera"), "streaming"));
    outbox.push(Message::retained(topics.available(), "online"));
    notifier.ready();
    notifier.status(&match &degraded_reason {
        Some(reason) => format!("degraded: running tier {} ({reason})", ctl.models.tier),
        None => format!("running tier {}", ctl.models.tier),
    });
    log::info!("ready: tier `{}`, {:.0} ms after start", ctl.models.tier, started.elapsed().as_secs_f64() * 1e3);

    let stats_every = Duration::from_secs(ctl.config.output.stats_interval_s);
    let mut next_stats = Instant::now() + stats_every.min(Duration::from_secs(2));
    let mut worker = Some(worker);
    let mut worker_failed = None;
    while !signals.stop.load(Ordering::Relaxed) {
        match cmd_rx.recv_timeout(Duration::from_millis(100)) {
            Ok(Incoming::Command(feature, payload)) => {
                let effects = ctl.control.handle(&feature, &payload);
                ctl.apply(effects);
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        ctl.check_signals();
        if Instant::now() >= next_stats {
            next_stats = Instant::now() + stats_every;
            counters.models = model_phases(&ctl.models);
            let stats = counters.stats(outbox);
            outbox.push(Message::event(topics.stats(), json(stats)));
        }
        if worker.as_ref().is_some_and(|w| w.is_finished()) {
            worker_failed = Some(match worker.take().map(|w| w.join()) {
                Some(Ok(Err(e))) => anyhow!("the pipeline stopped: {e}"),
                _ => anyhow!("the pipeline stopped unexpectedly"),
            });
            break;
        }
    }
    notifier.stopping();
    log::info!("stopping: closing the camera and draining the pipeline");
    stop_capture.store(true, Ordering::Relaxed);
    let _ = camera.join();
    drop(ctl);
    if let Some(w) = worker {
        let _ = w.join();
    }
    if let Some(e) = worker_failed {
        return Err(e);
    }
    Ok(())
}
