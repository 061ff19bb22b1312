//! The capture owner loop and its health state machine. Capture never waits
//! for processing: each frame goes into the latest-frame mailbox. A lost
//! camera is reopened with doubling backoff, without restarting anything.

use crate::backoff::Backoff;
use crate::capture::{CaptureError, Frame, FrameSource, LatestFrame};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Opens the camera; called again after every loss.
pub type SourceFactory = Box<dyn FnMut() -> Result<Box<dyn FrameSource>, CaptureError> + Send>;

/// A change worth telling the world about.
#[derive(Debug, Clone, PartialEq)]
pub enum CameraEvent {
    Lost {
        reason: String,
    },
    Back {
        after: Duration,
        attempts: u32,
    },
    /// Frames the source could not convert (reported once per run of them).
    BadFrames {
        reason: String,
    },
}

/// What the loop does after an error.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Action {
    /// Ask again shortly (EAGAIN, one bad frame).
    Retry,
    /// Close the source and reopen it after the wait.
    Reopen(Duration),
}

/// Consecutive unconvertible frames after which the camera is reopened
/// (renegotiating the format).
const BAD_FRAMES_BEFORE_REOPEN: u32 = 10;

/// The camera's health, without IO.
#[derive(Debug)]
pub struct Health {
    backoff: Backoff,
    bad_frames: u32,
}

impl Health {
    pub fn new(min: Duration, max: Duration) -> Health {
        Health { backoff: Backoff::new(min, max), bad_frames: 0 }
    }

    pub fn is_lost(&self) -> bool {
        self.backoff.is_lost()
    }

    fn lose(&mut self, reason: String, now: Instant, events: &mut Vec<CameraEvent>) -> Action {
        let (wait, first) = self.backoff.fail(now);
        if first {
            events.push(CameraEvent::Lost { reason });
        }
        Action::Reopen(wait)
    }

    pub fn on_frame(&mut self, now: Instant, events: &mut Vec<CameraEvent>) {
        self.bad_frames = 0;
        if let Some((after, attempts)) = self.backoff.recover(now) {
            events.push(CameraEvent::Back { after, attempts });
        }
    }

    pub fn on_error(&mut self, err: &CaptureError, now: Instant, events: &mut Vec<CameraEvent>) -> Action {
        match err {
            CaptureError::WouldBlock => Action::Retry,
            CaptureError::Format { .. } => {
                self.bad_frames += 1;
                if self.bad_frames == 1 {
                    events.push(CameraEvent::BadFrames { reason: err.to_string() });
                }
                if self.bad_frames >= BAD_FRAMES_BEFORE_REOPEN {
                    self.bad_frames = 0;
                    return self.lose(err.to_string(), now, events);
                }
                Action::Retry
            }
            CaptureError::Disconnected(_) | CaptureError::Stalled(_) | CaptureError::Open { .. } => {
                self.lose(err.to_string(), now, events)
            }
        }
    }
}

/// Counters the stats read.
#[derive(Debug, Default)]
pub struct CaptureCounters {
    pub frames: AtomicU64,
    pub lost: AtomicBool,
    /// An `unplug` command waiting for the camera thread: milliseconds.
    unplug_ms: AtomicU64,
}

impl CaptureCounters {
    /// Asks the camera thread to fail as if unplugged for `d`.
    pub fn unplug(&self, d: Duration) {
        self.unplug_ms.store(d.as_millis().clamp(1, u64::MAX as u128) as u64, Ordering::Relaxed);
    }
}

/// The unplug fault: while it lasts, the open source is gone and opening
/// fails, exactly as a pulled USB camera does.
#[derive(Default)]
struct Unplugged {
    until: Option<Instant>,
}

impl Unplugged {
    fn check(&mut self, counters: &CaptureCounters, now: Instant) -> Option<CaptureError> {
        let asked = counters.unplug_ms.swap(0, Ordering::Relaxed);
        if asked > 0 {
            self.until = Some(now + Duration::from_millis(asked));
        }
        match self.until {
            Some(t) if now < t => Some(CaptureError::Disconnected("(pulled by the unplug debug command)".into())),
            _ => {
                self.until = None;
                None
            }
        }
    }
}

/// Runs until `stop`; closes the mailbox when it ends.
pub fn capture_loop(
    mut open: SourceFactory,
    latest: &LatestFrame,
    mut health: Health,
    counters: &CaptureCounters,
    stop: &AtomicBool,
    mut emit: impl FnMut(CameraEvent),
) {
    let mut source: Option<Box<dyn FrameSource>> = None;
    let mut frame = Frame::empty();
    let mut seq = 0u64;
    let mut events = Vec::new();
    let mut unplugged = Unplugged::default();
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        let result = match (unplugged.check(counters, now), source.as_mut()) {
            (Some(gone), _) => Err(gone),
            (None, Some(s)) => s.next_frame(&mut frame),
            (None, None) => match open() {
                Ok(s) => {
                    log::info!("camera: opened {}", s.name());
                    source = Some(s);
                    continue;
                }
                Err(e) => Err(e),
            },
        };
        let action = match result {
            Ok(()) => {
                health.on_frame(now, &mut events);
                frame.seq = seq;
                seq += 1;
                counters.frames.fetch_add(1, Ordering::Relaxed);
                frame = latest.publish(std::mem::replace(&mut frame, Frame::empty()));
                None
            }
            Err(e) => Some(health.on_error(&e, now, &mut events)),
        };
        counters.lost.store(health.is_lost(), Ordering::Relaxed);
        for e in events.drain(..) {
            emit(e);
        }
        match action {
            None => {}
            Some(Action::Retry) => std::thread::sleep(Duration::from_millis(5)),
            Some(Action::Reopen(wait)) => {
                source = None;
                sleep_unless(stop, wait);
            }
        }
    }
    latest.close();
}

/// Sleeps `d`, or less when `stop` is set meanwhile.
pub fn sleep_unless(stop: &AtomicBool, d: Duration) {
    let end = Instant::now() + d;
    while !stop.load(Ordering::Relaxed) && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(20).min(end.saturating_duration_since(Instant::now())));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn health() -> Health {
        Health::new(Duration::from_millis(100), Duration::from_millis(400))
    }

    #[test]
    fn a_disconnect_is_reported_once_and_retried_with_doubling_backoff() {
        let mut h = health();
        let mut ev = Vec::new();
        let t = Instant::now();
        let gone = CaptureError::Disconnected("cam".into());
        let waits: Vec<Action> = (0..4).map(|_| h.on_error(&gone, t, &mut ev)).collect();
        assert_eq!(
            waits,
            [100, 200, 400, 400].map(|ms| Action::Reopen(Duration::from_millis(ms))),
            "doubling up to the maximum"
        );
        assert_eq!(ev.len(), 1, "one camera_lost event: {ev:?}");
        assert!(h.is_lost());
        h.on_frame(t + Duration::from_secs(1), &mut ev);
        assert_eq!(ev[1], CameraEvent::Back { after: Duration::from_secs(1), attempts: 4 });
        assert!(!h.is_lost());
        // A second loss starts the backoff again from the minimum.
        assert_eq!(h.on_error(&gone, t, &mut ev), Action::Reopen(Duration::from_millis(100)));
    }

    #[test]
    fn an_unplug_fails_the_camera_for_its_time_then_lets_it_open() {
        let counters = CaptureCounters::default();
        let mut u = Unplugged::default();
        let t = Instant::now();
        assert!(u.check(&counters, t).is_none(), "nothing asked");
        counters.unplug(Duration::from_secs(2));
        assert!(matches!(u.check(&counters, t), Some(CaptureError::Disconnected(_))));
        assert!(u.check(&counters, t + Duration::from_millis(1999)).is_some(), "still unplugged");
        assert!(u.check(&counters, t + Duration::from_secs(2)).is_none(), "plugged back");
        assert!(u.check(&counters, t + Duration::from_secs(3)).is_none());
    }

    #[test]
    fn eagain_retries_and_bad_frames_reopen_only_when_persistent() {
        let mut h = health();
        let mut ev = Vec::new();
        let t = Instant::now();
        assert_eq!(h.on_error(&CaptureError::WouldBlock, t, &mut ev), Action::Retry);
        let bad = CaptureError::Format { source_name: "cam".into(), message: "RGGB".into() };
        for _ in 0..BAD_FRAMES_BEFORE_REOPEN - 1 {
            assert_eq!(h.on_error(&bad, t, &mut ev), Action::Retry);
        }
        assert!(matches!(h.on_error(&bad, t, &mut ev), Action::Reopen(_)));
        assert!(matches!(ev.as_slice(), [CameraEvent::BadFrames { .. }, CameraEvent::Lost { .. }]), "{ev:?}");
    }
}
