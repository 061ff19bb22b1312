//! The HTTP side (`[http]`): health, Prometheus metrics, snapshots and an
//! MJPEG stream of the fused frames, served by `tiny_http` on its own
//! threads. The worker hands each JPEG it encodes to the [`FrameHub`]; the
//! control loop hands every `stats` to [`HttpState`]. Nothing here blocks
//! either of them.

pub mod hub;
pub mod metrics;
mod routes;
mod server;
mod settings;

pub use hub::FrameHub;
pub use routes::{route, Route};
pub use server::Server;
pub use settings::HttpSettings;

use crate::control::Incoming;
use crate::mqtt::{CommandError, StatsMessage};
use std::collections::BTreeMap;
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the handlers read: the frames, the newest stats and the daemon's
/// availability.
pub struct HttpState {
    pub hub: Arc<FrameHub>,
    status: Mutex<Status>,
    /// The control loop's command queue, shared with MQTT.
    commands: Mutex<Option<SyncSender<Incoming>>>,
    /// Largest command body (`pipeline.max_source_bytes`: a source image).
    pub max_body: usize,
}

#[derive(Default)]
struct Status {
    available: String,
    problem: Option<String>,
    stats: Option<StatsMessage>,
    /// Every feature's applied value, as on `<base>/<feature>/state`.
    states: BTreeMap<String, String>,
}

/// `/api/state`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StateView {
    pub available: String,
    pub tier: Option<String>,
    pub states: BTreeMap<String, String>,
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
    pub fn new(stream_fps: f32, max_body: usize) -> HttpState {
        let status = Status { available: "starting".into(), ..Status::default() };
        HttpState {
            hub: Arc::new(FrameHub::new(stream_fps)),
            status: Mutex::new(status),
            commands: Mutex::new(None),
            max_body,
        }
    }

    pub fn set_commands(&self, commands: SyncSender<Incoming>) {
        *self.commands.lock().unwrap_or_else(|p| p.into_inner()) = Some(commands);
    }

    pub fn set_state(&self, feature: &str, value: &str) {
        self.lock().states.insert(feature.to_string(), value.to_string());
    }

    pub fn state(&self) -> StateView {
        let s = self.lock();
        StateView {
            available: s.available.clone(),
            tier: s.stats.as_ref().map(|t| t.tier.clone()),
            states: s.states.clone(),
        }
    }

    /// Sends `feature` with `payload` down the same path as an MQTT
    /// command and waits up to `wait` for the control loop's verdict.
    pub fn command(&self, feature: &str, payload: Vec<u8>, wait: Duration) -> CommandOutcome {
        let Some(tx) = self.commands.lock().unwrap_or_else(|p| p.into_inner()).clone() else {
            return CommandOutcome::Busy;
        };
        let (reply, verdict) = sync_channel(1);
        let incoming = Incoming { feature: feature.to_string(), payload: payload.into(), reply: Some(reply) };
        if tx.try_send(incoming).is_err() {
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

    /// Something that keeps the box from being healthy while it lasts (the
    /// camera lost); `None` clears it.
    pub fn set_problem(&self, problem: Option<String>) {
        self.lock().problem = problem;
    }

    pub fn set_stats(&self, stats: &StatsMessage) {
        self.lock().stats = Some(stats.clone());
    }

    pub fn health(&self) -> (bool, Health) {
        let s = self.lock();
        let ok = s.available == "online" && s.problem.is_none();
        let reason = match (&s.problem, ok) {
            (Some(p), _) => Some(p.clone()),
            (None, false) => Some(format!("the daemon is {}", s.available)),
            (None, true) => None,
        };
        (ok, Health { status: s.available.clone(), reason })
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
        let s = HttpState::new(10.0, 1024);
        assert!(!s.health().0);
        assert_eq!(s.health().1.reason.as_deref(), Some("the daemon is starting"));
        s.set_available("online");
        assert_eq!(s.health(), (true, Health { status: "online".into(), reason: None }));
        s.set_problem(Some("camera lost: /dev/video0".into()));
        assert!(!s.health().0);
        s.set_problem(None);
        assert!(s.health().0);
    }
}
