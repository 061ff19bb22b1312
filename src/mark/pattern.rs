//! The mark's layout: a tile of 16 × 16 cells of 8 × 8 pixels, repeated
//! over the frame from its top-left corner. Each cell carries one chip of
//! one of 48 bits (16 fixed sync bits, then the 32-bit payload): the cell's
//! luma moves up or down by about 2.4 levels, the sign the bit's value
//! times the cell's key (±1). Cells are dealt to bits by a fixed shuffle,
//! so each bit's 5 or 6 cells are spread over the tile. A whole cell moves
//! together: its mean (a JPEG block's DC, and what scaling keeps) carries
//! the chip.

use std::sync::OnceLock;

/// Pixels per cell side.
pub const CELL: usize = 8;
/// Cells per tile side.
pub const GRID: usize = 16;
/// Pixels per tile side.
pub const TILE: usize = CELL * GRID;
pub const CELLS: usize = GRID * GRID;
pub const SYNC_BITS: usize = 16;
pub const PAYLOAD_BITS: usize = 32;
pub const BITS: usize = SYNC_BITS + PAYLOAD_BITS;
/// The sync bits, most significant first: eight ones, eight zeros.
const SYNC: u16 = 0xB38C;

/// 8 × 8 ordered dither: a pixel moves by 3 levels where its entry is
/// below [`THREES`], else by 2 (a cell's mean move is 2.44 levels, its mean
/// squared move 6.2: PSNR 40.2 dB before clipping).
const BAYER: [[u8; CELL]; CELL] = [
    [0, 32, 8, 40, 2, 34, 10, 42],
    [48, 16, 56, 24, 50, 18, 58, 26],
    [12, 44, 4, 36, 14, 46, 6, 38],
    [60, 28, 52, 20, 62, 30, 54, 22],
    [3, 35, 11, 43, 1, 33, 9, 41],
    [51, 19, 59, 27, 49, 17, 57, 25],
    [15, 47, 7, 39, 13, 45, 5, 37],
    [63, 31, 55, 23, 61, 29, 53, 21],
];
const THREES: u8 = 28;

/// Each cell's key and bit.
pub struct Layout {
    pub key: [f32; CELLS],
    pub bit_of: [u8; CELLS],
    /// Cells per bit.
    pub cells_of: [u8; BITS],
}

/// The one layout (fixed: a reader must find what any box wrote).
pub fn layout() -> &'static Layout {
    static LAYOUT: OnceLock<Layout> = OnceLock::new();
    LAYOUT.get_or_init(|| {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let key = std::array::from_fn(|_| if next() & 1 == 1 { 1.0 } else { -1.0 });
        let mut order: [usize; CELLS] = std::array::from_fn(|i| i);
        for i in (1..CELLS).rev() {
            order.swap(i, (next() % (i as u64 + 1)) as usize);
        }
        let (mut bit_of, mut cells_of) = ([0u8; CELLS], [0u8; BITS]);
        for (i, &cell) in order.iter().enumerate() {
            bit_of[cell] = (i % BITS) as u8;
            cells_of[i % BITS] += 1;
        }
        Layout { key, bit_of, cells_of }
    })
}

/// The 48 bits a payload is written as: the sync bits, then the payload's,
/// most significant first.
pub fn bits(payload: u32) -> [bool; BITS] {
    std::array::from_fn(|i| match i < SYNC_BITS {
        true => SYNC >> (SYNC_BITS - 1 - i) & 1 == 1,
        false => payload >> (BITS - 1 - i) & 1 == 1,
    })
}

/// The sync bits as signs (+1 for a one).
pub fn sync_signs() -> [f32; SYNC_BITS] {
    let b = bits(0);
    std::array::from_fn(|i| if b[i] { 1.0 } else { -1.0 })
}

/// The luma moves of one tile for `payload`, row by row (`TILE × TILE`).
pub fn tile(payload: u32) -> Vec<i8> {
    let (layout, bits) = (layout(), bits(payload));
    let mut out = vec![0i8; TILE * TILE];
    for cy in 0..GRID {
        for cx in 0..GRID {
            let c = cy * GRID + cx;
            let up = (layout.key[c] > 0.0) == bits[usize::from(layout.bit_of[c])];
            for (py, dither) in BAYER.iter().enumerate() {
                for (px, &d) in dither.iter().enumerate() {
                    let size = if d < THREES { 3 } else { 2 };
                    out[(cy * CELL + py) * TILE + cx * CELL + px] = if up { size } else { -size };
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bit_gets_five_or_six_cells_and_the_keys_balance() {
        let l = layout();
        assert!(l.cells_of.iter().all(|&n| n == 5 || n == 6), "{:?}", l.cells_of);
        assert_eq!(l.cells_of.iter().map(|&n| usize::from(n)).sum::<usize>(), CELLS);
        let ups = l.key.iter().filter(|&&k| k > 0.0).count();
        assert!((100..=156).contains(&ups), "{ups} of 256 keys are +1");
        assert_eq!(sync_signs().iter().filter(|&&s| s > 0.0).count(), 8);
    }

    #[test]
    fn a_tile_moves_each_cell_as_one_and_stays_within_40_db() {
        let t = tile(0xDEAD_BEEF);
        let mse = t.iter().map(|&d| f64::from(d) * f64::from(d)).sum::<f64>() / t.len() as f64;
        assert!(10.0 * (255.0f64 * 255.0 / mse).log10() >= 40.0, "MSE {mse}");
        let cell_sign = |cy: usize, cx: usize| t[cy * CELL * TILE + cx * CELL].signum();
        for (py, px) in [(0, 0), (3, 5), (7, 7)] {
            assert_eq!(t[(CELL + py) * TILE + 2 * CELL + px].signum(), cell_sign(1, 2));
        }
        assert_ne!(tile(0xDEAD_BEEF), tile(0xDEAD_BEEE), "the payload is in the tile");
    }
}
