//! The rows a [`super::PointwiseDepthwise`] thread keeps between steps.

use super::MARGIN;
use std::ops::Range;

/// The pointwise rows a thread keeps from one step to the next, in slots of
/// a row for each plane: as f32, and as integers (each row followed by its
/// [`MARGIN`] of the pad) where the depthwise half runs on them; and the
/// rows that stand for those past the plane's edges.
pub struct Held {
    pub w: usize,
    pub mid: Vec<f32>,
    pub stride: usize,
    pub ints: Vec<u8>,
    pub istride: usize,
    pub zeros: Vec<f32>,
    pub pads: Vec<u8>,
    /// Scratch of the integer pointwise half.
    pub words: Vec<i32>,
}

impl Held {
    /// `slots` rows of `w` values for each of `co` planes: integers where
    /// their `pad` is given, f32 where `floats`.
    pub fn new(co: usize, slots: usize, w: usize, (pad, floats): (Option<u8>, bool)) -> Held {
        let (stride, pitch) = (if floats { slots * w } else { 0 }, w + MARGIN);
        let istride = if pad.is_some() { slots * pitch } else { 0 };
        let pad = pad.unwrap_or(0);
        let (mid, ints) = (vec![0f32; co * stride], vec![pad; co * istride]);
        Held { w, mid, stride, ints, istride, zeros: vec![0f32; w], pads: vec![pad; pitch], words: vec![] }
    }

    /// Moves the rows in slots `from` to the first slots: only those the
    /// depthwise half reads, the integers where there are any (the f32 rows
    /// are then the pointwise tiles' output only, converted as soon as
    /// written), else the f32 rows.
    pub fn keep(&mut self, from: Range<usize>) {
        let (w, pitch) = (self.w, self.w + MARGIN);
        if self.istride > 0 {
            for plane in self.ints.chunks_exact_mut(self.istride) {
                plane.copy_within(from.start * pitch..from.end * pitch, 0);
            }
        } else {
            for plane in self.mid.chunks_exact_mut(self.stride) {
                plane.copy_within(from.start * w..from.end * w, 0);
            }
        }
    }

    pub fn mid_row(&self, c: usize, slot: usize) -> &[f32] {
        &self.mid[c * self.stride + slot * self.w..][..self.w]
    }

    pub fn ints_row(&self, c: usize, slot: usize) -> &[u8] {
        let pitch = self.w + MARGIN;
        &self.ints[c * self.istride + slot * pitch..][..pitch]
    }
}
