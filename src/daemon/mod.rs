//! The live daemon: capture → pipeline → publish, one owner loop per
//! external resource and bounded hand-offs between them.
//!
//! - the camera thread owns the [`FrameSource`](crate::capture::FrameSource)
//!   and fills the latest-frame mailbox (the newest frame wins; replaced
//!   frames count as dropped);
//! - the worker thread owns the [`LivePipeline`](crate::face::LivePipeline)
//!   and queues its outputs;
//! - the MQTT [`Link`] owns the broker session (publisher + connection);
//! - this thread runs the [`ControlLoop`](control_loop::ControlLoop): it owns
//!   the models, the face bank and the control state machine, and posts
//!   changes to the worker through a [`Mailbox`](mailbox::Mailbox) that
//!   never blocks.
//!
//! [`run`] goes through four phases: start (config, models, control),
//! wait for the first frame (then READY), serve, drain.

mod announce;
pub mod bank;
mod camera;
mod control_loop;
mod counters;
mod mailbox;
mod memory;
mod notify;
mod settings;
mod sources;
mod stages;
mod stats;
mod vcam;
mod worker;

pub use camera::{CameraEvent, Health, SourceFactory};
pub use notify::Notifier;
pub use settings::DaemonSettings;
pub use stages::{fusion_pipeline, live_settings};

use crate::capture::LatestFrame;
use crate::config::Config;
use crate::control::Control;
use crate::control::{Inbox, Incoming};
use crate::http::feed::FeedTopics;
use crate::http::wire::Limits;
use crate::http::{HttpSettings, HttpState, Options, Server};
use crate::infer::Engines;
use crate::mark::c2pa::C2paSigner;
use crate::mqtt::{CommandError, Event, Link, Message, Outbox, Stage};
use crate::store::cache::Cache;
use crate::store::Store;
use crate::vcam::Vcam;
use anyhow::{anyhow, Result};
use bank::FaceBank;
use control_loop::ControlLoop;
use counters::Counters;
use mailbox::Mailbox;
use stages::Identifier;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use worker::Worker;

/// Cheap commands waiting for the control loop (besides one reload and one
/// source); more are refused as busy, on `error`.
const COMMAND_QUEUE: usize = 64;

/// Process-level flags the daemon obeys (set from signal handlers).
pub struct Signals<'a> {
    /// SIGTERM/SIGINT: drain and exit.
    pub stop: &'a AtomicBool,
    /// SIGHUP: reread the config and models.
    pub reload: &'a AtomicBool,
}

/// What the connected phases share.
struct Session<'a> {
    config_path: &'a Path,
    settings: DaemonSettings,
    outbox: Arc<Outbox>,
    /// Commands from MQTT and HTTP, for the control loop.
    inbox: Arc<Inbox>,
    signals: &'a Signals<'a>,
    notifier: Notifier,
    started: Instant,
    /// What the HTTP handlers read (kept current even with `http.enabled`
    /// off, so nothing else needs to know).
    http: Arc<HttpState>,
    /// The V4L2 output's hand-off, when `output.v4l2.enabled`.
    vcam: Option<Arc<Vcam>>,
    /// The C2PA signer, when `output.c2pa.enabled`.
    c2pa: Option<Arc<C2paSigner>>,
}

/// Runs the daemon until `signals.stop`. `source` replaces the configured
/// camera (tests inject faults through it).
pub fn run(config_path: &Path, source: Option<SourceFactory>, signals: &Signals) -> Result<()> {
    let started = Instant::now();
    let config = Config::load(config_path)?;
    let settings = DaemonSettings::from_config(&config)?;
    // Before anything is published: with the manifest on, a key that
    // cannot be read stops the start rather than publish unsigned frames.
    let c2pa = C2paSigner::load(&config.output.c2pa).map_err(|e| anyhow!(e))?.map(Arc::new);
    let open_camera = match source {
        Some(s) => s,
        None => settings.camera_factory()?,
    };
    let topics = settings.topics.clone();
    let outbox = Arc::new(Outbox::new(settings.queue_messages));
    outbox.push(Message::retained(topics.available(), "starting"));
    let (errors, error_topics) = (outbox.clone(), topics.clone());
    let on_refused = Box::new(move |e: &CommandError| errors.push(e.message(&error_topics)));
    let inbox = Arc::new(Inbox::new(COMMAND_QUEUE, settings.link.caps.clone(), on_refused));
    let http = Arc::new(HttpState::new(config.http.stream_fps));
    http.set_commands(inbox.clone());
    let feed_topics = FeedTopics { faces: topics.faces(), event: topics.events(), error: topics.error() };
    let tap = http.clone();
    outbox.observe(move |m| tap.feed.offer(&feed_topics, &m.topic, &m.payload));
    http.set_choices(settings::choices(&config));
    http.set_bank_dir(bank::thumbnail_dir(&config.pipeline.state_dir));
    let link = start_link(&settings, &outbox, &inbox)?;
    let notifier = Notifier::from_env();
    let server = start_http(&config.http, &http)?;
    let output = vcam::Output::start(&config, outbox.clone(), topics.clone())?;
    let session = Session {
        config_path,
        settings,
        outbox: outbox.clone(),
        inbox,
        signals,
        notifier,
        started,
        http: http.clone(),
        vcam: output.as_ref().map(|o| o.vcam.clone()),
        c2pa,
    };
    let result = run_connected(session, config, open_camera);
    http.hub.close();
    http.feed.close();
    drop(server);
    if let Some(o) = output {
        o.stop();
    }
    if let Err(e) = &result {
        outbox.push(Event::Error { stage: Stage::Startup, message: format!("{e:#}") }.message(&topics));
    }
    outbox.push(Message::retained(topics.available(), "stopped"));
    if !link.shutdown(Duration::from_secs(3)) {
        log::warn!("mqtt: the session did not end within 3 s; the broker will mark the daemon offline");
    }
    result
}

/// The MQTT session, its commands handed to `inbox`.
fn start_link(settings: &DaemonSettings, outbox: &Arc<Outbox>, inbox: &Arc<Inbox>) -> Result<Link> {
    let (topics, link) = (&settings.topics, &settings.link);
    // MQTT 3.1.1 does not tell a subscriber who published: the broker and
    // the topic are what the audit log can say.
    let from = crate::control::Sender {
        who: format!("mqtt broker {}:{}, topic {}/<feature>/set", link.host, link.port, topics.base()),
        authenticated: link.credentials.is_some(),
    };
    let commands = inbox.clone();
    let started = Link::start(link, topics.clone(), outbox.clone(), move |feature, payload| {
        commands.submit(Incoming { feature: feature.to_string(), payload, reply: None, from: from.clone() });
    })
    .map_err(|e| anyhow!("mqtt: {e}"))?;
    log::info!("mqtt: topics under {}/, broker {}:{}", topics.base(), link.host, link.port);
    Ok(started)
}

/// The HTTP server when `http.enabled`; one that cannot listen is logged
/// and the daemon runs without it, but a token file that cannot be read
/// stops the start (serving without it would drop the protection).
fn start_http(settings: &HttpSettings, state: &Arc<HttpState>) -> Result<Option<Server>> {
    if !settings.enabled {
        return Ok(None);
    }
    let addr = settings.addr().map_err(|e| anyhow!(e))?;
    let token = settings.token().map_err(|e| anyhow!("{e}; fusiond does not serve HTTP beyond loopback without it"))?;
    let options = Options {
        max_clients: settings.max_clients,
        token,
        limits: Limits::new(),
        hostname: settings::hostname(),
        allowed_hosts: settings.allowed_hosts.clone(),
        allowed_origins: settings.allowed_origins.clone(),
    };
    let started = Server::start(addr, options, state.clone());
    Ok(started.map_err(|e| log::error!("{e}; the daemon runs without HTTP")).ok())
}

/// The audit log `[audit]` asks for; one that cannot be opened is logged
/// as an error and the daemon runs without it.
fn open_audit(config: &Config) -> Option<crate::audit::AuditLog> {
    let a = &config.audit;
    let path = a.file.clone().unwrap_or_else(|| config.pipeline.state_dir.join("audit.jsonl"));
    let opened = a.enabled.then(|| crate::audit::AuditLog::open(&path, a.max_bytes));
    match opened? {
        Ok(log) => {
            log::info!("audit log: {}", path.display());
            Some(log)
        }
        Err(e) => {
            log::error!("{e}; running without an audit log");
            None
        }
    }
}

fn run_connected(s: Session, config: Config, open_camera: SourceFactory) -> Result<()> {
    let latest = Arc::new(LatestFrame::new());
    let (mut ctl, degraded) = start(&s, config, latest.clone())?;
    let stop_capture = Arc::new(AtomicBool::new(false));
    let camera = spawn_camera(&s, &ctl, open_camera, stop_capture.clone())?;
    let worker = spawn_worker(&s, &ctl)?;
    for effect in ctl.control.retained() {
        ctl.apply(vec![effect]);
    }
    wait_for_first_frame(&s, &ctl, &worker);
    announce_ready(&s, &ctl, degraded.as_deref());
    ctl.store.preload_next(&ctl.models.tier);
    let worker_ended = ctl.serve(&s.inbox, &worker);
    s.notifier.stopping();
    log::info!("stopping: closing the camera and draining the pipeline");
    stop_capture.store(true, Ordering::Relaxed);
    let _ = camera.join();
    drop(ctl);
    match (worker.join(), worker_ended) {
        (Ok(Err(e)), _) => Err(anyhow!("the pipeline stopped: {e}")),
        (Err(_), _) => Err(anyhow!("the pipeline stopped unexpectedly")),
        (Ok(Ok(())), true) => Err(anyhow!("the pipeline stopped unexpectedly")),
        (Ok(Ok(())), false) => Ok(()),
    }
}

/// Phase 1: engines, store and the start tier, the face bank, the control
/// state machine and the start source. Returns why the tier that runs is
/// not the start tier, if it is not.
/// Says what the start waits for: TensorRT builds an engine per model on
/// first use (minutes on a Jetson) unless `fusiond warm` or an earlier start
/// cached it.
fn announce_loading(s: &Session, builds_engines: bool, tier: &str) {
    if builds_engines {
        s.outbox.push(Message::retained(s.settings.topics.available(), "warming"));
        s.notifier.status(&format!("building or loading TensorRT engines for tier {tier}"));
    } else {
        s.notifier.status(&format!("loading and warming tier {tier}"));
    }
}

fn start<'a>(s: &Session<'a>, config: Config, latest: Arc<LatestFrame>) -> Result<(ControlLoop<'a>, Option<String>)> {
    s.outbox.push(s.settings.discovery.clone());
    s.notifier.status("checking staging");
    let engines = Engines::from_settings(&config.inference)?;
    let store = Arc::new(Store::open(&config, engines.clone())?);
    let start_tier = config.models.start_tier.clone();
    log::info!("loading tier `{start_tier}` on {}", engines.describe());
    announce_loading(s, config.inference.builds_engines(), &start_tier);
    let (models, degraded) = store.activate(&start_tier).map_err(|e| anyhow!("no tier can load: {e}"))?.into_parts();
    let bank = FaceBank::open(&config.pipeline.state_dir)
        .map_err(|e| log::error!("{e}; named sources are unavailable until it is fixed"))
        .ok();
    let mut control = s.settings.control.clone();
    control.quality.clone_from(&models.tier);
    let mailbox = Arc::new(Mailbox::default());
    let mut ctl = ControlLoop {
        config_path: s.config_path.to_path_buf(),
        topics: s.settings.topics.clone(),
        outbox: s.outbox.clone(),
        control: Control::new(control, s.settings.limits.clone()),
        identifier: Identifier::new(&models)?,
        bank,
        sources: Cache::new(config.pipeline.source_cache, u64::MAX),
        counters: Counters::new(
            s.started,
            latest,
            mailbox.clone(),
            s.inbox.clone(),
            s.http.hub.clone(),
            s.vcam.clone(),
        ),
        mailbox,
        stats_interval: s.settings.stats_interval,
        signals: s.signals,
        active_source: None,
        active_images: 0,
        reported_providers: Default::default(),
        http: s.http.clone(),
        audit: open_audit(&config),
        gate: control_loop::source_gate(&config).map_err(|e| anyhow!(e))?,
        caps: s.inbox.caps().clone(),
        refused: None,
        trim: Default::default(),
        store,
        models,
        config,
    };
    ctl.report_providers();
    ctl.check_mouth();
    ctl.degraded(&start_tier, degraded.clone());
    // The worker and the camera start once the start source is known, so
    // no frame is processed without it.
    ctl.initial_source();
    Ok((ctl, degraded))
}

fn spawn_camera(
    s: &Session,
    ctl: &ControlLoop,
    open_camera: SourceFactory,
    stop: Arc<AtomicBool>,
) -> Result<JoinHandle<()>> {
    let (latest, counters) = (ctl.counters.latest.clone(), ctl.counters.capture.clone());
    let (outbox, topics, notifier, health) =
        (s.outbox.clone(), s.settings.topics.clone(), s.notifier, s.settings.health());
    let http = s.http.clone();
    let thread = std::thread::Builder::new().name("camera".into()).spawn(move || {
        camera::capture_loop(open_camera, &latest, health, &counters, &stop, |event| {
            announce::camera_event(&event, &outbox, &topics, &notifier, &http)
        })
    })?;
    Ok(thread)
}

fn spawn_worker(s: &Session, ctl: &ControlLoop) -> Result<JoinHandle<Result<(), String>>> {
    let (latest, stats, mailbox) = (ctl.counters.latest.clone(), ctl.counters.worker.clone(), ctl.mailbox.clone());
    let (outbox, topics, notifier) = (s.outbox.clone(), s.settings.topics.clone(), s.notifier);
    let (models, config, settings) = (ctl.models.clone(), s.settings.worker.clone(), ctl.control.settings().clone());
    let (hub, vcam, c2pa) = (s.http.hub.clone(), s.vcam.clone(), s.c2pa.clone());
    let thread = std::thread::Builder::new().name("worker".into()).spawn(move || {
        let w = Worker {
            latest: &latest,
            outbox: &outbox,
            topics: &topics,
            stats: &stats,
            mailbox: &mailbox,
            notifier,
            hub: &hub,
            vcam: vcam.as_deref(),
            c2pa: c2pa.as_deref(),
        };
        let result = w.run(models, config, &settings);
        // A worker that cannot run stops capture too: nothing would use it.
        latest.close();
        result
    })?;
    Ok(thread)
}

/// Phase 2: ready means models warm and the camera delivering.
fn wait_for_first_frame(s: &Session, ctl: &ControlLoop, worker: &JoinHandle<Result<(), String>>) {
    s.notifier.status("waiting for the camera");
    let frames = &ctl.counters.capture.frames;
    while frames.load(Ordering::Relaxed) == 0 && !s.signals.stop.load(Ordering::Relaxed) && !worker.is_finished() {
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn announce_ready(s: &Session, ctl: &ControlLoop, degraded: Option<&str>) {
    let topics = &s.settings.topics;
    s.outbox.push(Message::retained(topics.state("camera"), "streaming"));
    s.outbox.push(Message::retained(topics.available(), "online"));
    s.http.set_available("online");
    s.notifier.ready();
    let tier = &ctl.models.tier;
    s.notifier.status(&match degraded {
        Some(reason) => format!("degraded: running tier {tier} ({reason})"),
        None => format!("running tier {tier}"),
    });
    log::info!("ready: tier `{tier}`, {:.0} ms after start", s.started.elapsed().as_secs_f64() * 1e3);
}
