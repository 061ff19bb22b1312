//! The invisible mark on every output frame: fusiond's frames are
//! synthetic, and the mark says so to any reader (`fusiond verify`) that
//! knows the layout, with the box that made them and the hour.
//!
//! - [`pattern`]: the layout (a tile of cells carrying 16 sync bits and a
//!   32-bit payload), no IO;
//! - [`detect`]: folding frames onto the tile and reading it back, no IO;
//! - [`c2pa`]: the signed C2PA manifest on published JPEGs;
//! - [`Marker`]: writes the mark into a frame in place (the worker, after
//!   the pipeline and before the one encode and the V4L2 output).
//!
//! The payload is the box (16 bits) and the hour (16 bits: hours since
//! [`EPOCH`], wrapping after about 7.5 years).

pub mod c2pa;
pub mod detect;
pub mod pattern;

pub use self::c2pa::{C2paSettings, SignedOutputs};

use image::RgbImage;
use serde::{Deserialize, Serialize};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// 2026-01-01T00:00:00Z, where the hour count starts.
pub const EPOCH: u64 = 1_767_225_600;

/// `[output.watermark]`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct WatermarkSettings {
    /// Write the invisible mark into every output frame.
    pub enabled: bool,
    /// The box's number in the mark, 0 to 65535; unset: derived from the
    /// device id.
    pub box_id: Option<u32>,
}

impl Default for WatermarkSettings {
    fn default() -> Self {
        WatermarkSettings { enabled: true, box_id: None }
    }
}

impl WatermarkSettings {
    pub fn validate(&self) -> Result<(), String> {
        match self.box_id {
            Some(id) if id > u32::from(u16::MAX) => Err(format!(
                "output.watermark.box_id {id} does not fit the mark's 16 bits; use 0 to 65535 or leave it unset"
            )),
            _ => Ok(()),
        }
    }

    /// The box number: `box_id`, else 16 bits of a hash of `device_id`.
    pub fn box_number(&self, device_id: &str) -> u16 {
        match self.box_id.and_then(|id| u16::try_from(id).ok()) {
            Some(id) => id,
            None => {
                let hash = device_id.bytes().fold(0x811c_9dc5u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193));
                (hash >> 16 ^ hash) as u16
            }
        }
    }
}

/// The payload of `box_number` at `at`.
pub fn payload(box_number: u16, at: SystemTime) -> u32 {
    let secs = at.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO).as_secs();
    let hour = (secs.saturating_sub(EPOCH) / 3600) as u16;
    u32::from(box_number) << 16 | u32::from(hour)
}

/// The box and the start of the hour (Unix seconds) in a payload; the hour
/// is the most recent one with that count at `now`.
pub fn decode(payload: u32, now: SystemTime) -> (u16, u64) {
    let now_hours = now.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO).as_secs().saturating_sub(EPOCH) / 3600;
    let hour = u64::from(payload & 0xffff);
    let wraps = now_hours.saturating_sub(hour) / 65536;
    ((payload >> 16) as u16, EPOCH + (hour + wraps * 65536) * 3600)
}

/// Writes the mark of one payload into frames, its rows of moves cached
/// for the frame width last seen.
pub struct Marker {
    box_number: u16,
    payload: u32,
    tile: Vec<i8>,
    /// `TILE` rows of moves for every byte of a frame row (R, G and B move
    /// alike, so only luma moves).
    rows: Vec<i8>,
    width: usize,
}

impl Marker {
    pub fn new(box_number: u16, at: SystemTime) -> Marker {
        let payload = payload(box_number, at);
        Marker { box_number, payload, tile: pattern::tile(payload), rows: Vec::new(), width: 0 }
    }

    pub fn box_number(&self) -> u16 {
        self.box_number
    }

    pub fn payload(&self) -> u32 {
        self.payload
    }

    /// Moves to the hour of `at` when it changed.
    pub fn at(&mut self, at: SystemTime) {
        let p = payload(self.box_number, at);
        if p != self.payload {
            *self = Marker::new(self.box_number, at);
        }
    }

    /// Marks `img` in place.
    pub fn mark(&mut self, img: &mut RgbImage) {
        use pattern::TILE;
        let w = img.width() as usize;
        if w != self.width {
            let tile = &self.tile;
            let rows: Vec<i8> =
                (0..TILE).flat_map(|ty| (0..w).flat_map(move |x| [tile[ty * TILE + x % TILE]; 3])).collect();
            (self.rows, self.width) = (rows, w);
        }
        if w == 0 {
            return;
        }
        for (y, row) in img.chunks_exact_mut(3 * w).enumerate() {
            let moves = &self.rows[(y % TILE) * 3 * w..][..3 * w];
            for (p, &m) in row.iter_mut().zip(moves) {
                *p = p.saturating_add_signed(m);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_holds_the_box_and_the_hour_and_a_box_id_must_fit() {
        let at = UNIX_EPOCH + Duration::from_secs(EPOCH + 7 * 3600 + 1234);
        let p = payload(0xBEEF, at);
        assert_eq!(decode(p, at), (0xBEEF, EPOCH + 7 * 3600));
        assert!(WatermarkSettings { box_id: Some(65536), ..Default::default() }
            .validate()
            .unwrap_err()
            .contains("16 bits"));
        let s = WatermarkSettings::default();
        assert!(s.validate().is_ok());
        assert_eq!(s.box_number("box1"), s.box_number("box1"));
        assert_ne!(s.box_number("box1"), s.box_number("box2"));
        assert_eq!(WatermarkSettings { box_id: Some(7), ..s }.box_number("box1"), 7);
    }

    #[test]
    fn a_marked_frame_reads_back_and_a_plain_one_does_not() {
        let at = UNIX_EPOCH + Duration::from_secs(EPOCH + 99 * 3600);
        let plain =
            RgbImage::from_fn(320, 240, |x, y| image::Rgb([(x / 3) as u8, (y / 2) as u8, ((x + y) % 200) as u8]));
        let mut marked = plain.clone();
        let mut m = Marker::new(0x1234, at);
        m.mark(&mut marked);
        let read = |img: &RgbImage| {
            let mut f = detect::Folded::default();
            f.add(img);
            f.read()
        };
        let r = read(&marked);
        assert!(r.marked() && r.payload == m.payload(), "{r:?}");
        assert!(!read(&plain).marked(), "{:?}", read(&plain));
    }
}
