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

use crate::mqtt::StatsMessage;
use std::sync::{Arc, Mutex};

/// What the handlers read: the frames, the newest stats and the daemon's
/// availability.
pub struct HttpState {
    pub hub: Arc<FrameHub>,
    status: Mutex<Status>,
}

#[derive(Default)]
struct Status {
    available: String,
    problem: Option<String>,
    stats: Option<StatsMessage>,
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
        HttpState { hub: Arc::new(FrameHub::new(stream_fps)), status: Mutex::new(status) }
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
        let s = HttpState::new(10.0);
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
