//! Frame sources behind one narrow trait, and the latest-frame-wins hand-off
//! between capture and processing.

pub mod buffer;
mod fake;
mod latest;
mod mjpeg;
pub mod pan;
mod sequence;
mod v4l2;

pub use fake::{Fault, FaultySource};
pub use latest::LatestFrame;
pub use sequence::SequenceSource;
pub use v4l2::V4l2Source;

use crate::vision::RgbImage;
use std::time::SystemTime;

/// One captured frame. Buffers are recycled between capture and processing,
/// so a steady stream allocates nothing per frame.
#[derive(Debug, Clone)]
pub struct Frame {
    pub image: RgbImage,
    /// Capture sequence number, from 0, counting every frame the source gave.
    pub seq: u64,
    pub captured: SystemTime,
}

impl Frame {
    pub fn empty() -> Frame {
        Frame { image: RgbImage::new(0, 0), seq: 0, captured: SystemTime::UNIX_EPOCH }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// The device is gone (unplugged, ENODEV): reopen with backoff.
    #[error("camera {0} is gone; check the cable, fusiond reconnects by itself")]
    Disconnected(String),
    /// No frame yet (EAGAIN); try again.
    #[error("no frame available yet")]
    WouldBlock,
    /// The device delivers something we cannot convert.
    #[error("camera {source_name} sends an unusable frame: {message}; set camera.formats to one it supports")]
    Format { source_name: String, message: String },
    /// No frame within the source's deadline.
    #[error("camera {0} stalled: no frame within the deadline")]
    Stalled(String),
    #[error("camera {path}: {message}")]
    Open { path: String, message: String },
}

/// A camera, or something that looks like one.
pub trait FrameSource: Send {
    /// Human-readable name for logs and events.
    fn name(&self) -> String;
    /// Blocks until the next frame and writes it into `frame`, reusing its
    /// buffer when the size matches.
    fn next_frame(&mut self, frame: &mut Frame) -> Result<(), CaptureError>;
}
