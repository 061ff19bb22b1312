//! The processing owner loop: always the newest frame through the
//! [`LivePipeline`], and the frame's outputs (faces JSON, rate-limited JPEG,
//! snapshots) into the outbox. It never waits on MQTT, and it takes the
//! control loop's changes from the [`Mailbox`] between frames.

use super::mailbox::{Mailbox, Pending};
use super::settings::WorkerConfig;
use super::stages::fusion_pipeline;
use super::stats::WorkerStats;
use crate::capture::{Frame, LatestFrame};
use crate::control::Settings;
use crate::face::{FrameReport, LivePipeline, MouthSettings, StageTimings};
use crate::http::FrameHub;
use crate::mark::c2pa::C2paSigner;
use crate::mark::Marker;
use crate::mqtt::{Event, FaceOut, FacesMessage, Message, Outbox, Stage, TimingsOut, Topics};
use crate::store::TierModels;
use crate::vcam::Vcam;
use crate::vision::{encode_jpeg, RgbImage};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

fn ms(d: Duration) -> f32 {
    d.as_secs_f32() * 1e3
}

pub struct Worker<'a> {
    pub latest: &'a LatestFrame,
    pub outbox: &'a Outbox,
    pub topics: &'a Topics,
    pub stats: &'a Mutex<WorkerStats>,
    pub mailbox: &'a Mailbox,
    pub notifier: super::notify::Notifier,
    /// The HTTP stream and snapshots share this encode.
    pub hub: &'a FrameHub,
    /// The V4L2 output takes the raw fused frames.
    pub vcam: Option<&'a Vcam>,
    /// Signs the JPEGs of the outputs `[output.c2pa]` names.
    pub c2pa: Option<&'a C2paSigner>,
}

struct State {
    live: LivePipeline,
    tier: String,
    config: WorkerConfig,
    enabled: bool,
    /// Frames per second on `frame`; 0 is off.
    frame_rate: f32,
    last_frame_sent: Option<Instant>,
    snapshot: bool,
    /// Writes the mark when `config.mark` asks for one.
    marker: Option<Marker>,
}

impl State {
    fn new(models: &TierModels, config: WorkerConfig, settings: &Settings) -> Result<State, String> {
        let live = super::stages::live_settings(&config, settings);
        Ok(State {
            live: LivePipeline::new(fusion_pipeline(models).map_err(|e| e.to_string())?, live),
            tier: models.tier.clone(),
            enabled: settings.enabled,
            frame_rate: settings.frame_rate,
            config,
            last_frame_sent: None,
            snapshot: false,
            marker: None,
        })
    }

    /// Applies what the control loop posted: models first, so a source
    /// posted with them is set on the new swapper.
    fn apply(&mut self, p: Pending) {
        if let Some(models) = p.models {
            match fusion_pipeline(&models)
                .map_err(|e| e.to_string())
                .and_then(|f| self.live.replace_stages(f).map_err(|e| format!("cannot use the source identity: {e}")))
            {
                Ok(()) => {
                    self.tier.clone_from(&models.tier);
                    log::info!("worker: running tier `{}`", self.tier);
                }
                Err(e) => log::error!("tier `{}`: cannot build the pipeline: {e}", models.tier),
            }
        }
        match p.source {
            Some(Some(e)) => {
                if let Err(err) = self.live.set_source_embedding(e) {
                    log::error!("cannot use the source identity: {err}");
                }
            }
            Some(None) => self.live.clear_source(),
            None => {}
        }
        if let Some(pairs) = p.mappings {
            if let Err(e) = self.live.set_mappings(pairs) {
                log::error!("cannot use the mapping: {e}");
            }
        }
        if let Some(s) = p.settings {
            self.enabled = s.enabled;
            self.frame_rate = s.frame_rate;
            self.live.set_blend(s.blend);
            self.live.set_selector(s.selector);
            self.live.set_mask(s.mask);
            self.live.set_face_order(s.face_order);
            self.live.set_color_transfer(s.color_transfer);
            let c = &self.config;
            self.live.set_mouth(MouthSettings { enabled: s.mouth_mask, grow: c.mouth_grow, feather: c.mouth_feather });
            self.live.set_reference_distance(s.reference_distance);
        }
        if let Some(c) = p.config {
            self.live.set_detect_interval(c.detect_interval);
            self.live.set_max_yaw(c.max_yaw_deg);
            self.live.set_tracking(c.smoothing, c.sticky);
            let on = self.live.settings().mouth.enabled;
            self.live.set_mouth(MouthSettings { enabled: on, grow: c.mouth_grow, feather: c.mouth_feather });
            self.config = c;
        }
        self.snapshot |= p.snapshot;
        // A deliberate panic, so that the journal's panic record can be
        // checked (debug.stall_command only).
        assert!(!p.panic, "panic command: a deliberate panic in the processing loop");
        if p.stall {
            log::warn!("stall command: the processing loop stops; the watchdog should restart the daemon");
            loop {
                std::thread::sleep(Duration::from_secs(3600));
            }
        }
    }
}

/// Labels and marks the frame every output gets (MQTT, HTTP, V4L2) as the
/// config asks: the visible badge, then the invisible mark of the box
/// number and the current hour.
fn mark(st: &mut State, image: &mut RgbImage) {
    if st.config.label {
        crate::vision::draw_label(image);
    }
    let Some(box_number) = st.config.mark else { return };
    let now = std::time::SystemTime::now();
    let marker = match &mut st.marker {
        Some(m) if m.box_number() == box_number => m,
        other => other.insert(Marker::new(box_number, now)),
    };
    marker.at(now);
    marker.mark(image);
}

impl Worker<'_> {
    /// Runs until the latest-frame mailbox is closed and drained.
    pub fn run(&self, models: TierModels, config: WorkerConfig, settings: &Settings) -> Result<(), String> {
        let mut st = State::new(&models, config, settings)?;
        // The watchdog is pinged from this loop, so a stuck pipeline stops
        // the pings and systemd restarts the daemon.
        let watchdog = self.notifier.watchdog_interval();
        let mut pinged = Instant::now();
        loop {
            st.apply(self.mailbox.take());
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
                self.outbox.push(Event::Error { stage: Stage::Pipeline, message: e }.message(self.topics));
            }
            self.latest.recycle(frame);
        }
    }

    fn process(&self, st: &mut State, frame: &mut Frame) -> Result<(), String> {
        let start = Instant::now();
        let report = match st.enabled {
            true => Some(st.live.process(&mut frame.image, start).map_err(|e| e.to_string())?),
            false => None,
        };
        mark(st, &mut frame.image);
        let pipeline_done = Instant::now();
        if let Some(v) = self.vcam {
            v.offer(&frame.image);
        }
        let synthetic = report.as_ref().is_some_and(|r| !r.swapped.is_empty());
        let encode = self.publish_frame(st, &frame.image, synthetic)?;
        let timings = report.as_ref().map(|r| r.timings).unwrap_or_default();
        let detected = report.as_ref().is_some_and(|r| r.detected);
        let faces = report.as_ref().map_or(0, |r| r.faces.len());
        self.hub.counters.faces_in_view.store(faces, std::sync::atomic::Ordering::Relaxed);
        if let Some(r) = &report {
            self.outbox.push(faces_message(frame, r, &st.tier, encode, start.elapsed()).message(self.topics));
        }
        let latency = frame.captured.elapsed().unwrap_or_default();
        let mut s = self.stats.lock().unwrap_or_else(|p| p.into_inner());
        s.record(&timings, pipeline_done - start, encode, latency, detected);
        s.tier.clone_from(&st.tier);
        Ok(())
    }

    /// Encodes the frame once when MQTT's `frame` or the HTTP stream is
    /// due, or a snapshot was asked for, signs it when an output due wants
    /// the C2PA manifest, and hands the bytes to each; returns the time the
    /// encode and the signature took. An output that wants a signature
    /// never gets the frame unsigned.
    fn publish_frame(&self, st: &mut State, image: &RgbImage, synthetic: bool) -> Result<Duration, String> {
        let now = Instant::now();
        let frame_due = st.config.frames
            && st.frame_rate > 0.0
            && st.last_frame_sent.is_none_or(|t| now.saturating_duration_since(t).as_secs_f32() >= 1.0 / st.frame_rate);
        let stream_due = self.hub.stream_due(now);
        let http_snapshot = self.hub.snapshot_wanted();
        let snapshot = st.snapshot || http_snapshot;
        if !frame_due && !stream_due && !snapshot {
            return Ok(Duration::ZERO);
        }
        let t = Instant::now();
        let quality = if snapshot { 95 } else { st.config.jpeg_quality };
        let plain = Arc::new(encode_jpeg(image, quality)?);
        let out = self.sign(plain, synthetic, snapshot, frame_due);
        let encode = t.elapsed();
        if std::mem::take(&mut st.snapshot) {
            if let Some(jpeg) = &out.snapshot {
                self.outbox.push(Message::event(self.topics.snapshot(), jpeg.to_vec()));
            }
        }
        if let Some(jpeg) = out.snapshot.clone().filter(|_| http_snapshot) {
            self.hub.publish_snapshot(jpeg);
        }
        if let Some(jpeg) = out.frame.filter(|_| frame_due) {
            self.outbox.push_frame(self.topics.frame(), jpeg.to_vec());
            st.last_frame_sent = Some(t);
        }
        if let Some(jpeg) = out.stream {
            self.hub.publish(jpeg);
        }
        Ok(encode)
    }

    /// The JPEG each output gets: the plain one, or the signed one where
    /// `[output.c2pa]` asks for it (`None` there when signing failed).
    fn sign(&self, plain: Arc<Vec<u8>>, synthetic: bool, snapshot: bool, frame_due: bool) -> Outputs {
        let Some(signer) = self.c2pa else {
            return Outputs { snapshot: Some(plain.clone()), frame: Some(plain.clone()), stream: Some(plain) };
        };
        let wants = signer.outputs();
        let signed = if wants.stream || (snapshot && wants.snapshots) || (frame_due && wants.frames) {
            match signer.sign_jpeg(&plain, synthetic) {
                Ok(jpeg) => Some(Arc::new(jpeg)),
                Err(e) => {
                    log::error!("{e}; the outputs that want a C2PA manifest skip this frame");
                    self.outbox.push(Event::Error { stage: Stage::Pipeline, message: e }.message(self.topics));
                    None
                }
            }
        } else {
            None
        };
        let pick = |want: bool| if want { signed.clone() } else { Some(plain.clone()) };
        Outputs { snapshot: pick(wants.snapshots), frame: pick(wants.frames), stream: pick(wants.stream) }
    }
}

/// One frame's JPEG for each output; `None` skips the output.
struct Outputs {
    snapshot: Option<Arc<Vec<u8>>>,
    frame: Option<Arc<Vec<u8>>>,
    stream: Option<Arc<Vec<u8>>>,
}

fn faces_message<'a>(
    frame: &Frame,
    r: &FrameReport,
    tier: &'a str,
    encode: Duration,
    total: Duration,
) -> FacesMessage<'a> {
    let faces = r
        .faces
        .iter()
        .zip(r.ids.iter().zip(&r.ages))
        .enumerate()
        .map(|(i, (f, (id, age)))| {
            let (yaw, pitch) = crate::face::pose::yaw_pitch(&f.landmarks);
            FaceOut {
                id: *id,
                bbox: f.bbox,
                score: f.score,
                landmarks: f.landmarks,
                age: *age,
                swapped: r.swapped.contains(&i),
                fading: r.fading.contains(&i),
                yaw: (yaw * 10.0).round() / 10.0,
                pitch: (pitch * 10.0).round() / 10.0,
            }
        })
        .collect();
    let t: &StageTimings = &r.timings;
    FacesMessage {
        seq: frame.seq,
        captured_ms: frame.captured.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_millis()),
        detected: r.detected,
        tier,
        faces,
        timings_ms: TimingsOut {
            inference: ms(t.inference),
            detect: ms(t.detect),
            embed: ms(t.embed),
            swap: ms(t.swap),
            paste: ms(t.paste),
            enhance: ms(t.enhance),
            color: ms(t.color),
            mouth: ms(t.mouth),
            encode: ms(encode),
            total: ms(total),
        },
    }
}
