//! The V4L2 output device: the format negotiated once per open, then
//! memory-mapped output buffers, streamed (`VIDIOC_STREAMON`) and filled in
//! turn, a frame each ([`super::ring`]).
//!
//! Not `write()`: v4l2loopback (0.12, Debian bookworm's) counts a writer
//! that never streamed as no writer, so with `exclusive_caps=1` the node
//! never offers output again after it closes, and a restarted daemon could
//! not reopen its own virtual camera (the VM test saw it).

use super::ring::Ring;
use super::{FrameSink, SinkError, VcamSettings};
use crate::vision::{encode_jpeg, rgb_to_yuyv_into, RgbImage};
use v4l::video::output::Parameters;
use v4l::video::Output;
use v4l::{Device, Format, FourCC};

/// Output buffers asked for; v4l2loopback grants at most its
/// `max_buffers` (2 unless the module is loaded with more).
const BUFFERS: u32 = 4;

pub struct V4l2Sink {
    /// Dropped first: it stops the stream and unmaps the buffers.
    ring: Ring,
    _device: Device,
    path: String,
    fourcc: [u8; 4],
    size: (u32, u32),
    jpeg_quality: u8,
    /// The converted frame, reused.
    buf: Vec<u8>,
}

impl V4l2Sink {
    /// Opens `s.device` for `width` x `height` frames at `fps`, in the first
    /// of `s.formats` the device takes.
    pub fn open(s: &VcamSettings, width: u32, height: u32, fps: u32) -> Result<V4l2Sink, SinkError> {
        let path = s.device.display().to_string();
        let open_err =
            |what: &str, e: std::io::Error| SinkError::Open { path: path.clone(), message: format!("{what}: {e}") };
        let device = Device::with_path(&s.device).map_err(|e| open_err("open", e))?;
        let caps = device.query_caps().map_err(|e| open_err("query capabilities", e))?;
        if !caps.capabilities.contains(v4l::capability::Flags::VIDEO_OUTPUT) {
            let message = format!("{} ({}) is not a video output device", caps.card, caps.driver);
            return Err(SinkError::Open { path, message });
        }
        let fourcc = s
            .formats
            .iter()
            .filter_map(|f| <[u8; 4]>::try_from(f.as_bytes()).ok())
            .find(|f| {
                let asked = Format::new(width, height, FourCC::new(f));
                device
                    .set_format(&asked)
                    .is_ok_and(|got| got.fourcc.repr == *f && (got.width, got.height) == (width, height))
            })
            .ok_or_else(|| SinkError::Open {
                path: path.clone(),
                message: format!("takes none of {:?} at {width}x{height}", s.formats),
            })?;
        // The rate is advisory (v4l2loopback reports it to readers).
        if let Err(e) = device.set_params(&Parameters::with_fps(fps.max(1))) {
            log::debug!("v4l2 output {path}: cannot set {fps} fps: {e}");
        }
        log::info!(
            "v4l2 output: {path} ({}) at {width}x{height} {} {fps} fps",
            caps.card,
            String::from_utf8_lossy(&fourcc)
        );
        let ring = Ring::new(device.handle().fd(), BUFFERS).map_err(|e| open_err("map output buffers", e))?;
        log::debug!("v4l2 output {path}: {} buffers of {} bytes", ring.len(), ring.room());
        Ok(V4l2Sink {
            ring,
            _device: device,
            path,
            fourcc,
            size: (width, height),
            jpeg_quality: s.jpeg_quality,
            buf: Vec::new(),
        })
    }
}

impl FrameSink for V4l2Sink {
    fn name(&self) -> String {
        self.path.clone()
    }

    fn size(&self) -> (u32, u32) {
        self.size
    }

    fn write(&mut self, frame: &RgbImage) -> Result<(), SinkError> {
        match &self.fourcc {
            b"MJPG" => self.buf = encode_jpeg(frame, self.jpeg_quality).map_err(SinkError::Write)?,
            _ => rgb_to_yuyv_into(frame, &mut self.buf),
        }
        self.ring.write(&self.buf).map_err(|e| SinkError::Write(format!("{}: {e}", self.path)))?;
        Ok(())
    }
}
