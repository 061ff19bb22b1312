//! The V4L2 output's owner thread (`output.v4l2`): opens the device with
//! the frames' size, writes each fused frame the worker offers, and turns
//! losses and recoveries into events.

use crate::backoff::Backoff;
use crate::config::{Config, SourceKind};
use crate::mqtt::{Event, Outbox, Topics};
use crate::vcam::{FrameSink, SinkFactory, V4l2Sink, Vcam, VcamEvent};
use anyhow::Result;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// The output thread, when `output.v4l2.enabled`.
pub struct Output {
    pub vcam: Arc<Vcam>,
    thread: JoinHandle<()>,
}

impl Output {
    pub fn start(config: &Config, outbox: Arc<Outbox>, topics: Topics) -> Result<Option<Output>> {
        let s = config.output.v4l2.clone();
        if !s.enabled {
            return Ok(None);
        }
        // The rate readers are told: the camera's.
        let fps = match config.camera.source {
            SourceKind::V4l2 => config.camera.fps,
            SourceKind::Auto if config.camera.device.exists() => config.camera.fps,
            _ => config.camera.samples_fps.round() as u32,
        };
        let backoff = Backoff::new(Duration::from_millis(s.reopen_min_ms), Duration::from_millis(s.reopen_max_ms));
        let open: SinkFactory =
            Box::new(move |w, h| V4l2Sink::open(&s, w, h, fps).map(|d| Box::new(d) as Box<dyn FrameSink>));
        let vcam = Arc::new(Vcam::default());
        let v = vcam.clone();
        let thread = std::thread::Builder::new().name("v4l2-out".into()).spawn(move || {
            v.run(open, backoff, |e| {
                let event = match e {
                    VcamEvent::Lost { reason } => Event::V4l2OutLost { reason },
                    VcamEvent::Back { after, attempts } => {
                        Event::V4l2OutBack { after_ms: after.as_millis() as u64, attempts }
                    }
                };
                outbox.push(event.message(&topics));
            })
        })?;
        Ok(Some(Output { vcam, thread }))
    }

    /// Lets the thread finish the frame in hand and waits for it.
    pub fn stop(self) {
        self.vcam.close();
        let _ = self.thread.join();
    }
}
