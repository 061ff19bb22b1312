//! The virtual camera: fused frames written to a V4L2 output device
//! (v4l2loopback), so that OBS, browsers and video-call apps see a camera.
//! The worker offers each fused frame to a one-slot hand-off (the newest
//! wins, a replaced one is counted) and never waits; this module's owner
//! loop converts and writes it, and reopens a lost device with backoff.

mod device;
mod ring;
mod settings;

pub use device::V4l2Sink;
pub use settings::VcamSettings;

use crate::backoff::Backoff;
use crate::vision::RgbImage;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// Why the output device could not take a frame.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SinkError {
    #[error("cannot open V4L2 output {path}: {message}; is v4l2loopback loaded and output.v4l2.device right?")]
    Open { path: String, message: String },
    #[error("V4L2 output {0}")]
    Write(String),
}

/// An open output device at one frame size.
pub trait FrameSink: Send {
    fn name(&self) -> String;
    fn size(&self) -> (u32, u32);
    fn write(&mut self, frame: &RgbImage) -> Result<(), SinkError>;
}

/// Opens the device for frames of a size; called again after every loss.
pub type SinkFactory = Box<dyn FnMut(u32, u32) -> Result<Box<dyn FrameSink>, SinkError> + Send>;

#[derive(Debug, Clone, PartialEq)]
pub enum VcamEvent {
    Lost { reason: String },
    Back { after: Duration, attempts: u32 },
}

#[derive(Default)]
struct Slot {
    frame: Option<RgbImage>,
    /// A buffer the loop gave back, reused for the next offer.
    spare: Option<RgbImage>,
    closed: bool,
}

/// The worker → output hand-off and its counters.
#[derive(Default)]
pub struct Vcam {
    slot: Mutex<Slot>,
    ready: Condvar,
    /// Frames replaced before the output took them.
    pub dropped: AtomicU64,
    pub written: AtomicU64,
    pub lost: AtomicBool,
}

impl Vcam {
    fn lock(&self) -> std::sync::MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Copies `image` into the slot, replacing a frame not yet taken.
    pub fn offer(&self, image: &RgbImage) {
        let mut s = self.lock();
        let mut buf = s.spare.take().unwrap_or_default();
        if buf.dimensions() == image.dimensions() {
            buf.copy_from_slice(image);
        } else {
            buf = image.clone();
        }
        if let Some(old) = s.frame.replace(buf) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            s.spare = Some(old);
        }
        drop(s);
        self.ready.notify_one();
    }

    /// Ends the owner loop once the slot is empty.
    pub fn close(&self) {
        self.lock().closed = true;
        self.ready.notify_all();
    }

    /// The next frame, or `None` after `timeout` or once closed.
    fn take(&self, timeout: Duration) -> Option<RgbImage> {
        let mut s = self.lock();
        if s.frame.is_none() && !s.closed {
            s = self.ready.wait_timeout(s, timeout).unwrap_or_else(|p| p.into_inner()).0;
        }
        s.frame.take()
    }

    fn give_back(&self, frame: RgbImage) {
        self.lock().spare = Some(frame);
    }

    fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// The owner loop of the output device: until closed.
    pub fn run(&self, mut open: SinkFactory, mut backoff: Backoff, mut emit: impl FnMut(VcamEvent)) {
        let mut sink: Option<Box<dyn FrameSink>> = None;
        let mut retry_at = Instant::now();
        while !self.is_closed() {
            let Some(frame) = self.take(Duration::from_millis(200)) else { continue };
            let now = Instant::now();
            if sink.as_ref().is_some_and(|s| s.size() != frame.dimensions()) {
                sink = None;
            }
            if sink.is_none() && now >= retry_at {
                match open(frame.width(), frame.height()) {
                    Ok(s) => sink = Some(s),
                    Err(e) => retry_at = now + self.failed(&mut backoff, e, &mut emit),
                }
            }
            if let Some(s) = sink.as_mut() {
                match s.write(&frame) {
                    Ok(()) => self.wrote(&mut backoff, s.name(), &mut emit),
                    Err(e) => {
                        sink = None;
                        retry_at = now + self.failed(&mut backoff, e, &mut emit);
                    }
                }
            }
            self.give_back(frame);
        }
    }

    fn wrote(&self, backoff: &mut Backoff, name: String, emit: &mut impl FnMut(VcamEvent)) {
        self.written.fetch_add(1, Ordering::Relaxed);
        if let Some((after, attempts)) = backoff.recover(Instant::now()) {
            log::info!("v4l2 output: {name} back after {after:?} ({attempts} attempts)");
            self.lost.store(false, Ordering::Relaxed);
            emit(VcamEvent::Back { after, attempts });
        } else if self.written.load(Ordering::Relaxed) == 1 {
            log::info!("v4l2 output: writing fused frames to {name}");
        }
    }

    fn failed(&self, backoff: &mut Backoff, e: SinkError, emit: &mut impl FnMut(VcamEvent)) -> Duration {
        let (wait, first) = backoff.fail(Instant::now());
        if first {
            log::warn!("{e}; retrying with backoff");
            self.lost.store(true, Ordering::Relaxed);
            emit(VcamEvent::Lost { reason: e.to_string() });
        }
        wait
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
