//! systemd's notify protocol (through libsystemd): STATUS for each phase,
//! READY once models are warm and the camera is open, WATCHDOG from the
//! processing loop, STOPPING on shutdown. Without NOTIFY_SOCKET every call
//! is a no-op, so the daemon runs the same outside systemd.

use std::time::Duration;

#[derive(Debug, Clone, Copy)]
pub struct Notifier {
    enabled: bool,
}

impl Notifier {
    pub fn from_env() -> Notifier {
        Notifier { enabled: std::env::var_os("NOTIFY_SOCKET").is_some() }
    }

    fn send(&self, key: &str, value: &str) {
        if !self.enabled {
            return;
        }
        if let Err(e) = systemd::daemon::notify([(key, value)].iter()) {
            log::warn!("sd_notify {key}: {e}");
        }
    }

    pub fn status(&self, status: &str) {
        log::debug!("status: {status}");
        self.send(systemd::daemon::STATE_STATUS, status);
    }

    pub fn ready(&self) {
        self.send(systemd::daemon::STATE_READY, "1");
    }

    pub fn stopping(&self) {
        self.send(systemd::daemon::STATE_STOPPING, "1");
    }

    pub fn watchdog(&self) {
        self.send(systemd::daemon::STATE_WATCHDOG, "1");
    }

    /// How often to ping: half of WatchdogSec=, when systemd set one for
    /// this process.
    pub fn watchdog_interval(&self) -> Option<Duration> {
        if !self.enabled {
            return None;
        }
        match systemd::daemon::watchdog_enabled() {
            Ok(usec) if usec > 0 => Some(Duration::from_micros(usec / 2)),
            _ => None,
        }
    }
}
