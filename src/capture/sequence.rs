use super::{CaptureError, Frame, FrameSource};
use crate::vision::RgbImage;
use image::ImageDecoder;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

/// A folder of JPEG/PNG frames played in name order, looped, at a fixed rate:
/// the demo's camera when none is attached, and the tests' camera.
pub struct SequenceSource {
    dir: PathBuf,
    files: Vec<PathBuf>,
    next: usize,
    seq: u64,
    period: Option<Duration>,
    due: Option<Instant>,
    /// The encoded file, reused between frames.
    bytes: Vec<u8>,
}

impl SequenceSource {
    /// `fps` of 0 delivers frames as fast as they are asked for.
    pub fn open(dir: &Path, fps: f32) -> Result<SequenceSource, CaptureError> {
        let open_err = |message: String| CaptureError::Open { path: dir.display().to_string(), message };
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(|e| open_err(e.to_string()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| matches!(x.to_str(), Some("jpg" | "jpeg" | "png"))))
            .collect();
        files.sort();
        if files.is_empty() {
            return Err(open_err("holds no .jpg or .png frames".into()));
        }
        let period = (fps > 0.0).then(|| Duration::from_secs_f32(1.0 / fps));
        Ok(SequenceSource { dir: dir.into(), files, next: 0, seq: 0, period, due: None, bytes: Vec::new() })
    }
}

impl FrameSource for SequenceSource {
    fn name(&self) -> String {
        format!("sequence:{}", self.dir.display())
    }

    fn next_frame(&mut self, frame: &mut Frame) -> Result<(), CaptureError> {
        if let Some(period) = self.period {
            let now = Instant::now();
            let due = self.due.unwrap_or(now);
            if due > now {
                std::thread::sleep(due - now);
            }
            // Late frames do not bunch up: the schedule restarts from now.
            self.due = Some(due.max(now) + period);
        }
        let path = self.files[self.next].clone();
        self.next = (self.next + 1) % self.files.len();
        let format_err = |e: &dyn std::fmt::Display| CaptureError::Format {
            source_name: format!("sequence:{}", self.dir.display()),
            message: format!("{}: {e}", path.display()),
        };
        self.bytes.clear();
        std::fs::File::open(&path).and_then(|mut f| f.read_to_end(&mut self.bytes)).map_err(|e| format_err(&e))?;
        decode_into(&self.bytes, &mut frame.image).map_err(|e| format_err(&e))?;
        frame.seq = self.seq;
        frame.captured = SystemTime::now();
        self.seq += 1;
        Ok(())
    }
}

/// Decodes an RGB JPEG straight into `dst`'s buffer (reallocated only when
/// the size changes); other formats go through `image`'s generic path.
fn decode_into(bytes: &[u8], dst: &mut RgbImage) -> image::ImageResult<()> {
    if let Ok(decoder) = image::codecs::jpeg::JpegDecoder::new(std::io::Cursor::new(bytes)) {
        if decoder.color_type() == image::ColorType::Rgb8 {
            let (w, h) = decoder.dimensions();
            if dst.dimensions() != (w, h) {
                *dst = RgbImage::new(w, h);
            }
            return decoder.read_image(dst);
        }
    }
    *dst = image::load_from_memory(bytes)?.to_rgb8();
    Ok(())
}
