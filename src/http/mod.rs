//! The HTTP side (`[http]`): the live page, the API, health, Prometheus
//! metrics, snapshots and an MJPEG stream of the fused frames, served on
//! the server's own threads ([`wire`] frames requests under hard limits).
//! The worker hands each JPEG it encodes to the [`FrameHub`]; the control
//! loop hands every `stats` to [`HttpState`]. Nothing here blocks either.

pub mod feed;
pub mod guard;
mod handlers;
pub mod hub;
pub mod metrics;
mod routes;
mod server;
mod settings;
pub mod wire;

pub use handlers::Access;
pub use hub::FrameHub;
pub use routes::{route, Route};
pub use server::{respond, Answered, Options, Server};
pub use settings::HttpSettings;

use crate::control::{Inbox, Incoming};
use crate::mqtt::{CommandError, StatsMessage};
use std::collections::BTreeMap;
use std::sync::mpsc::sync_channel;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the handlers read: the frames, the newest stats and the daemon's
/// availability.
pub struct HttpState {
    pub hub: Arc<FrameHub>,
    /// `faces`, events and errors for `/api/events` and `/api/state`.
    pub feed: feed::Feed,
    status: Mutex<Status>,
    /// The control loop's command inbox, shared with MQTT.
    commands: Mutex<Option<Arc<Inbox>>>,
    /// The folder of the face bank's thumbnails, `<name>.jpg` each.
    bank_dir: Mutex<Option<std::path::PathBuf>>,
}

#[derive(Default)]
struct Status {
    available: String,
    /// What keeps the box from being healthy, by kind (`camera`, `tier`).
    problems: BTreeMap<&'static str, String>,
    stats: Option<StatsMessage>,
    /// Every feature's applied value, as on `<base>/<feature>/state`.
    states: BTreeMap<String, String>,
    choices: Choices,
}

/// The values the page's selects offer.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Choices {
    /// The configured tiers.
    pub quality: Vec<String>,
    pub selector: Vec<String>,
    pub face_order: Vec<String>,
}

/// `/api/state`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StateView {
    pub available: String,
    pub tier: Option<String>,
    /// Frames processed per second, from the newest `stats`.
    pub fps: Option<f64>,
    /// Faces in the newest processed frame.
    pub faces: usize,
    /// The face bank's names.
    pub bank: Vec<String>,
    pub states: BTreeMap<String, String>,
    pub choices: Choices,
    /// `/api/health`'s answer.
    pub health: Health,
    /// Capture to publish, median and 95th percentile, from the newest `stats`.
    pub latency_ms: Option<crate::stats::Percentiles>,
    /// The running tier's models and where each runs, from the newest `stats`.
    pub models: Vec<ModelView>,
    /// The recent events and errors, oldest first.
    pub events: Vec<feed::Logged>,
}

/// A loaded model on `/api/state`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ModelView {
    pub name: String,
    pub placement: crate::infer::Placement,
    pub file_bytes: u64,
}

/// Why a command sent over HTTP was not taken.
#[derive(Debug, Clone, PartialEq)]
pub enum CommandOutcome {
    Taken,
    /// Refused by the validator or the control state machine: HTTP 400.
    Refused(CommandError),
    /// The control loop's queue is full or gone: HTTP 503.
    Busy,
}

/// `/api/health`'s answer: 200 when online with nothing wrong, else 503
/// and why.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Health {
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl HttpState {
    pub fn new(stream_fps: f32) -> HttpState {
        let status = Status { available: "starting".into(), ..Status::default() };
        HttpState {
            hub: Arc::new(FrameHub::new(stream_fps)),
            feed: feed::Feed::default(),
            status: Mutex::new(status),
            commands: Mutex::new(None),
            bank_dir: Mutex::new(None),
        }
    }

    pub fn set_commands(&self, commands: Arc<Inbox>) {
        *self.commands.lock().unwrap_or_else(|p| p.into_inner()) = Some(commands);
    }

    /// The largest body a command for `feature` may carry: its payload cap
    /// (the inbox's, which a reload moves).
    pub fn max_body(&self, feature: &str) -> usize {
        let commands = self.commands.lock().unwrap_or_else(|p| p.into_inner());
        commands.as_ref().map_or(crate::mqtt::PayloadCaps::TEXT, |c| c.caps().of(feature))
    }

    pub fn set_bank_dir(&self, dir: std::path::PathBuf) {
        *self.bank_dir.lock().unwrap_or_else(|p| p.into_inner()) = Some(dir);
    }

    pub fn bank_dir(&self) -> Option<std::path::PathBuf> {
        self.bank_dir.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn set_choices(&self, choices: Choices) {
        self.lock().choices = choices;
    }

    pub fn set_state(&self, feature: &str, value: &str) {
        self.lock().states.insert(feature.to_string(), value.to_string());
    }

    pub fn state(&self) -> StateView {
        let s = self.lock();
        let source = s.states.get("source").and_then(|j| serde_json::from_str::<serde_json::Value>(j).ok());
        let bank = source
            .and_then(|v| v.get("bank").and_then(|b| b.as_array()).cloned())
            .map(|b| b.iter().filter_map(|n| n.as_str().map(String::from)).collect())
            .unwrap_or_default();
        StateView {
            available: s.available.clone(),
            tier: s.stats.as_ref().map(|t| t.tier.clone()),
            fps: s.stats.as_ref().map(|t| t.processed_fps),
            faces: self.hub.counters.faces_in_view.load(std::sync::atomic::Ordering::Relaxed),
            bank,
            states: s.states.clone(),
            choices: s.choices.clone(),
            health: Self::health_of(&s),
            latency_ms: s.stats.as_ref().and_then(|t| t.latency_ms.capture_to_publish),
            models: (s.stats.iter().flat_map(|t| &t.models))
                .map(|m| ModelView { name: m.name.clone(), placement: m.placement.clone(), file_bytes: m.file_bytes })
                .collect(),
            events: self.feed.recent(),
        }
    }

    /// Sends `feature` with `payload` down the same path as an MQTT
    /// command and waits up to `wait` for the control loop's verdict.
    pub fn command(
        &self,
        feature: &str,
        payload: Vec<u8>,
        from: crate::control::Sender,
        wait: Duration,
    ) -> CommandOutcome {
        let Some(tx) = self.commands.lock().unwrap_or_else(|p| p.into_inner()).clone() else {
            return CommandOutcome::Busy;
        };
        let (reply, verdict) = sync_channel(1);
        let incoming = Incoming { feature: feature.to_string(), payload: payload.into(), reply: Some(reply), from };
        if !tx.submit(incoming) {
            return CommandOutcome::Busy;
        }
        match verdict.recv_timeout(wait) {
            Ok(Ok(())) => CommandOutcome::Taken,
            Ok(Err(e)) => CommandOutcome::Refused(e),
            Err(_) => CommandOutcome::Busy,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Status> {
        self.status.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What `<base>/available` says (`starting`, `warming`, `online`, ...).
    pub fn set_available(&self, available: &str) {
        self.lock().available = available.to_string();
    }

    /// Something of `kind` that keeps the box from being healthy while it
    /// lasts (the camera lost, a lower tier running); `None` clears it.
    pub fn set_problem(&self, kind: &'static str, problem: Option<String>) {
        match problem {
            Some(p) => self.lock().problems.insert(kind, p),
            None => self.lock().problems.remove(kind),
        };
    }

    pub fn set_stats(&self, stats: &StatsMessage) {
        self.lock().stats = Some(stats.clone());
    }

    pub fn health(&self) -> (bool, Health) {
        let health = Self::health_of(&self.lock());
        (health.reason.is_none(), health)
    }

    fn health_of(s: &Status) -> Health {
        let problems = s.problems.values().cloned().collect::<Vec<_>>();
        let ok = s.available == "online" && problems.is_empty();
        let reason = match ok {
            true => None,
            false if problems.is_empty() => Some(format!("the daemon is {}", s.available)),
            false => Some(problems.join("; ")),
        };
        Health { status: s.available.clone(), reason }
    }

    pub fn metrics(&self) -> String {
        let stats = self.lock().stats.clone();
        metrics::render(stats.as_ref(), &self.hub.counters, self.hub.clients())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn healthy_only_online_with_nothing_wrong() {
        let s = HttpState::new(10.0);
        assert!(!s.health().0);
        assert_eq!(s.health().1.reason.as_deref(), Some("the daemon is starting"));
        s.set_available("online");
        assert_eq!(s.health(), (true, Health { status: "online".into(), reason: None }));
        s.set_problem("camera", Some("camera lost: /dev/video0".into()));
        s.set_problem("tier", Some("running tier `fast` instead of `quality`".into()));
        let (ok, h) = s.health();
        assert!(!ok);
        assert_eq!(h.reason.as_deref(), Some("camera lost: /dev/video0; running tier `fast` instead of `quality`"));
        s.set_problem("camera", None);
        s.set_problem("tier", None);
        assert!(s.health().0);
    }
}
