//! Reading the mark: each frame's luma, less its local mean (the picture
//! itself is the mark's noise), is folded onto one tile (pixel `(x, y)`
//! adds to `(x mod TILE, y mod TILE)`), over as many frames as given. A
//! crop only shifts the tile cyclically, so the reader tries every shift:
//! the 64 pixel offsets within a cell, then the 256 cell shifts. Each is
//! scored by its sync bits' correlation in units of its noise (`z`, about
//! a standard normal on an unmarked picture); the best decides, and its
//! payload bits are read from their signs.

use super::pattern::{layout, sync_signs, CELL, CELLS, GRID, PAYLOAD_BITS, SYNC_BITS, TILE};
use image::RgbImage;

/// The local mean's half window, in pixels (three cells across).
const HALF_WINDOW: usize = 12;

/// Added to the local spread (luma levels) before dividing by it, so flat
/// regions are not amplified past the mark's own size.
const FLAT_SPREAD: f64 = 3.0;
/// The largest whitened residual a pixel adds.
const CLIP: f64 = 2.0;

/// `z` at or above which a picture is called marked. The best of the
/// 16,384 shifts on an unmarked picture is about 4.
pub const MARKED_Z: f32 = 6.0;

/// Frames folded onto one tile.
pub struct Folded {
    acc: Vec<f32>,
    pub frames: usize,
}

/// What the reader found.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reading {
    /// The sync bits' correlation in noise units at the best shift.
    pub z: f32,
    pub payload: u32,
    /// The weakest payload bit's margin, in noise units.
    pub weakest_bit: f32,
}

impl Reading {
    pub fn marked(&self) -> bool {
        self.z >= MARKED_Z
    }
}

impl Default for Folded {
    fn default() -> Self {
        Folded { acc: vec![0.0; TILE * TILE], frames: 0 }
    }
}

impl Folded {
    /// Adds one frame.
    pub fn add(&mut self, img: &RgbImage) {
        let (w, h) = (img.width() as usize, img.height() as usize);
        if w == 0 || h == 0 {
            return;
        }
        let luma: Vec<f32> =
            img.pixels().map(|p| 0.299 * f32::from(p[0]) + 0.587 * f32::from(p[1]) + 0.114 * f32::from(p[2])).collect();
        // Integral images of luma and its square, a row and column of zeros first.
        let (mut sum, mut squares) = (vec![0f64; (w + 1) * (h + 1)], vec![0f64; (w + 1) * (h + 1)]);
        for y in 0..h {
            let (mut row, mut row2) = (0f64, 0f64);
            for x in 0..w {
                let v = f64::from(luma[y * w + x]);
                (row, row2) = (row + v, row2 + v * v);
                let (at, above) = ((y + 1) * (w + 1) + x + 1, y * (w + 1) + x + 1);
                (sum[at], squares[at]) = (sum[above] + row, squares[above] + row2);
            }
        }
        let window = |t: &[f64], x0: usize, x1: usize, y0: usize, y1: usize| {
            t[y1 * (w + 1) + x1] - t[y0 * (w + 1) + x1] - t[y1 * (w + 1) + x0] + t[y0 * (w + 1) + x0]
        };
        for y in 0..h {
            let (y0, y1) = (y.saturating_sub(HALF_WINDOW), (y + HALF_WINDOW).min(h));
            let acc_row = &mut self.acc[(y % TILE) * TILE..][..TILE];
            for x in 0..w {
                let (x0, x1) = (x.saturating_sub(HALF_WINDOW), (x + HALF_WINDOW).min(w));
                let n = ((y1 - y0) * (x1 - x0)) as f64;
                let mean = window(&sum, x0, x1, y0, y1) / n;
                let spread = (window(&squares, x0, x1, y0, y1) / n - mean * mean).max(0.0).sqrt();
                // Busy regions hide the mark under their own detail: their
                // residuals count for less (a whitening by the local spread).
                let r = (f64::from(luma[y * w + x]) - mean) / (spread + FLAT_SPREAD);
                acc_row[x % TILE] += r.clamp(-CLIP, CLIP) as f32;
            }
        }
        self.frames += 1;
    }

    /// The best shift's reading.
    pub fn read(&self) -> Reading {
        let (layout, sync) = (layout(), sync_signs());
        let sync_cells: f32 = layout.cells_of[..SYNC_BITS].iter().map(|&n| f32::from(n)).sum();
        let mut best = Reading { z: f32::MIN, payload: 0, weakest_bit: 0.0 };
        let mut cells = [0f32; CELLS];
        for oy in 0..CELL {
            for ox in 0..CELL {
                self.cell_sums(ox, oy, &mut cells);
                let mean = cells.iter().sum::<f32>() / CELLS as f32;
                cells.iter_mut().for_each(|c| *c -= mean);
                let sigma = (cells.iter().map(|c| c * c).sum::<f32>() / CELLS as f32).sqrt().max(1e-6);
                for sy in 0..GRID {
                    for sx in 0..GRID {
                        let bits = bit_sums(&cells, sx, sy);
                        let z = sync.iter().zip(&bits).map(|(s, v)| s * v).sum::<f32>() / (sigma * sync_cells.sqrt());
                        if z > best.z {
                            best = payload_of(&bits, z, sigma);
                        }
                    }
                }
            }
        }
        best
    }

    /// The folded tile's cell sums for cells starting at `(ox, oy)`.
    fn cell_sums(&self, ox: usize, oy: usize, out: &mut [f32; CELLS]) {
        out.fill(0.0);
        for ty in 0..TILE {
            let y = (ty + oy) % TILE;
            let row = &self.acc[y * TILE..][..TILE];
            for tx in 0..TILE {
                out[(ty / CELL) * GRID + tx / CELL] += row[(tx + ox) % TILE];
            }
        }
    }
}

/// Each bit's key-weighted sum, the tile's cell `(cx, cy)` read at the
/// folded cell `(cx + sx, cy + sy)`.
fn bit_sums(cells: &[f32; CELLS], sx: usize, sy: usize) -> [f32; SYNC_BITS + PAYLOAD_BITS] {
    let layout = layout();
    let mut bits = [0f32; SYNC_BITS + PAYLOAD_BITS];
    for cy in 0..GRID {
        let row = &cells[((cy + sy) % GRID) * GRID..][..GRID];
        for cx in 0..GRID {
            let c = cy * GRID + cx;
            bits[usize::from(layout.bit_of[c])] += layout.key[c] * row[(cx + sx) % GRID];
        }
    }
    bits
}

fn payload_of(bits: &[f32; SYNC_BITS + PAYLOAD_BITS], z: f32, sigma: f32) -> Reading {
    let layout = layout();
    let mut payload = 0u32;
    let mut weakest = f32::MAX;
    for (i, v) in bits[SYNC_BITS..].iter().enumerate() {
        payload = payload << 1 | u32::from(*v > 0.0);
        weakest = weakest.min(v.abs() / (sigma * f32::from(layout.cells_of[SYNC_BITS + i]).sqrt()));
    }
    Reading { z, payload, weakest_bit: weakest }
}
