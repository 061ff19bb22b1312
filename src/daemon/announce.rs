//! What a camera event means to the outside: a log line, the systemd
//! status, an event on `<base>/events`, the retained camera state and the
//! HTTP health.

use super::camera::CameraEvent;
use super::notify::Notifier;
use crate::http::HttpState;
use crate::mqtt::{Event, Message, Outbox, Stage, Topics};

pub fn camera_event(event: &CameraEvent, outbox: &Outbox, topics: &Topics, notifier: &Notifier, http: &HttpState) {
    let (state, out) = match event {
        CameraEvent::Lost { reason } => {
            log::warn!("camera lost: {reason}");
            notifier.status(&format!("degraded: camera lost: {reason}"));
            http.set_problem("camera", Some(format!("camera lost: {reason}")));
            (Some("camera_lost"), Event::CameraLost { reason: reason.clone() })
        }
        CameraEvent::Back { after, attempts } => {
            log::info!("camera back after {after:?} ({attempts} attempts)");
            notifier.status("running");
            http.set_problem("camera", None);
            let after_ms = after.as_millis() as u64;
            (Some("streaming"), Event::CameraBack { after_ms, attempts: *attempts })
        }
        CameraEvent::BadFrames { reason } => {
            log::warn!("camera: {reason}");
            (None, Event::Error { stage: Stage::Camera, message: reason.clone() })
        }
    };
    outbox.push(out.message(topics));
    if let Some(state) = state {
        outbox.push(Message::retained(topics.state("camera"), state));
    }
}
