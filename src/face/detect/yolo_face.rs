//! yolo_face: one output of 20-value rows (cx, cy, w, h, score, then 5 × (x,
//! y, visibility)), exported either as [1, 20, N] or as [1, N, 20].

use crate::face::Face;
use crate::infer::Tensor;

const ROW: usize = 20;

pub(super) fn decode(outs: &[&Tensor], thr: f32, faces: &mut Vec<Face>) -> Result<(), String> {
    let t = outs.first().ok_or("no outputs")?;
    let (n, transposed) = match t.shape() {
        [.., ROW, n] => (*n, true),
        [.., n, ROW] => (*n, false),
        _ => return Err(format!("an output of shape {:?}; yolo_face has [1, 20, N]", t.shape())),
    };
    let data = t.data();
    let at = |row: usize, k: usize| {
        if transposed {
            data[k * n + row]
        } else {
            data[row * ROW + k]
        }
    };
    for r in 0..n {
        let score = at(r, 4);
        if score <= thr {
            continue;
        }
        let (cx, cy, w, h) = (at(r, 0), at(r, 1), at(r, 2), at(r, 3));
        let landmarks = std::array::from_fn(|j| [at(r, 5 + 3 * j), at(r, 6 + 3 * j)]);
        faces.push(Face { bbox: [cx - w / 2.0, cy - h / 2.0, cx + w / 2.0, cy + h / 2.0], score, landmarks });
    }
    Ok(())
}
