//! INT8 weights read back out of the f32 weights they were dequantised to.

/// Symmetric INT8 weights: `values` row by row, one `scale` a row.
#[derive(Debug, Clone, PartialEq)]
pub struct Recovered {
    pub values: Vec<i8>,
    pub scale: Vec<f32>,
}

/// The INT8 weights that f32 weights `w`, `rows` rows of equal length,
/// were dequantised from by a symmetric per-row dequantiser: each value
/// `q × scale` in f32 of an integer `q` in −127..=127 and one scale per row.
/// The scale is the row's largest magnitude over its largest integer, or an
/// f32 step beside it, and it is kept only if it gives back every value of
/// the row exactly; `None` where none does.
pub fn recover(w: &[f32], rows: usize) -> Option<Recovered> {
    if rows == 0 || w.is_empty() || !w.len().is_multiple_of(rows) {
        return None;
    }
    let per = w.len() / rows;
    let mut q = Vec::with_capacity(w.len());
    let mut scale = Vec::with_capacity(rows);
    for row in w.chunks_exact(per) {
        let largest = row.iter().fold(0f32, |m, v| m.max(v.abs()));
        let exact = |s: f32| row.iter().all(|&v| (v / s).round().abs() <= 127.0 && (v / s).round() * s == v);
        // The largest is `m × scale` for the row's largest integer `m`:
        // 127 from a symmetric quantiser, less from others. A candidate
        // that is not the scale fails at the first value it misses.
        let candidates =
            (1..=127u8).rev().map(|m| largest / f32::from(m)).flat_map(|s| [s, s.next_up(), s.next_down()]);
        let s = match largest {
            0.0 => 1.0,
            _ => candidates.into_iter().find(|&s| s.is_normal() && exact(s))?,
        };
        q.extend(row.iter().map(|&v| (v / s).round() as i8));
        scale.push(s);
    }
    Some(Recovered { values: q, scale })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symmetric_weights_come_back_and_others_do_not() {
        let scales = [0.013f32, 0.5, 2.0e-3];
        let q: Vec<i8> = (0..3 * 9).map(|i| ((i * 37) % 255) as i8 / 2).collect();
        let mut w: Vec<f32> =
            q.chunks(9).zip(scales).flat_map(|(r, s)| r.iter().map(move |&v| f32::from(v) * s)).collect();
        let found = recover(&w, 3).expect("symmetric INT8 weights");
        let back: Vec<f32> = found
            .values
            .chunks(9)
            .zip(&found.scale)
            .flat_map(|(r, s)| r.iter().map(move |&v| f32::from(v) * s))
            .collect();
        assert_eq!(back, w, "the same f32 weights, to the bit");
        w[4] += 1e-4;
        assert_eq!(recover(&w, 3), None, "a value off the grid");
        assert_eq!(recover(&w, 0), None);
        assert_eq!(recover(&w[..26], 3), None, "rows of unequal length");
    }
}
