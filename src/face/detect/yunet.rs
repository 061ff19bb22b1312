//! YuNet: 12 outputs, cls/obj/bbox/kps for strides 8, 16, 32; one anchor per
//! cell at (col·s, row·s); score = cls·obj.

use super::per_anchor;
use crate::face::Face;
use crate::infer::Tensor;

pub(super) fn decode(outs: &[&Tensor], w: usize, h: usize, thr: f32, faces: &mut Vec<Face>) -> Result<(), String> {
    if outs.len() != 12 {
        return Err(format!("{} outputs where YuNet has 12", outs.len()));
    }
    for (i, stride) in [8usize, 16, 32].into_iter().enumerate() {
        let (cols, rows) = (w / stride, h / stride);
        let n = cols * rows;
        let (cls, obj, bbox, kps) = (outs[i], outs[3 + i], outs[6 + i], outs[9 + i]);
        for (t, want, what) in [(cls, 1, "cls"), (obj, 1, "obj"), (bbox, 4, "bbox"), (kps, 10, "kps")] {
            if per_anchor(t, n, what)? != want {
                return Err(format!("{what} at stride {stride} with {} values; expected {}", t.len(), n * want));
            }
        }
        let s = stride as f32;
        for a in 0..n {
            let score = cls.data()[a].clamp(0.0, 1.0) * obj.data()[a].clamp(0.0, 1.0);
            if score <= thr {
                continue;
            }
            let (ax, ay) = ((a % cols) as f32 * s, (a / cols) as f32 * s);
            let d = &bbox.data()[a * 4..a * 4 + 4];
            let (cx, cy) = (d[0] * s + ax, d[1] * s + ay);
            let (bw, bh) = (d[2].exp() * s, d[3].exp() * s);
            let k = &kps.data()[a * 10..a * 10 + 10];
            let landmarks = std::array::from_fn(|j| [k[2 * j] * s + ax, k[2 * j + 1] * s + ay]);
            faces.push(Face { bbox: [cx - bw / 2.0, cy - bh / 2.0, cx + bw / 2.0, cy + bh / 2.0], score, landmarks });
        }
    }
    Ok(())
}
