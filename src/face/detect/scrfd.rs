//! insightface SCRFD / RetinaFace: 9 outputs, scores, box distances and point
//! offsets for strides 8, 16, 32; two anchors per cell at (col·s, row·s).

use super::per_anchor;
use crate::face::Face;
use crate::infer::Tensor;

const ANCHORS_PER_CELL: usize = 2;

pub(super) fn decode(outs: &[&Tensor], w: usize, h: usize, thr: f32, faces: &mut Vec<Face>) -> Result<(), String> {
    if outs.len() != 9 {
        return Err(format!("{} outputs where SCRFD with keypoints has 9", outs.len()));
    }
    for (i, stride) in [8usize, 16, 32].into_iter().enumerate() {
        let cols = w / stride;
        let n = cols * (h / stride) * ANCHORS_PER_CELL;
        let (scores, bbox, kps) = (outs[i], outs[3 + i], outs[6 + i]);
        for (t, want, what) in [(scores, 1, "score"), (bbox, 4, "bbox"), (kps, 10, "kps")] {
            if per_anchor(t, n, what)? != want {
                return Err(format!("{what} at stride {stride} with {} values; expected {}", t.len(), n * want));
            }
        }
        let s = stride as f32;
        for a in 0..n {
            let score = scores.data()[a];
            if score <= thr {
                continue;
            }
            let cell = a / ANCHORS_PER_CELL;
            let (ax, ay) = ((cell % cols) as f32 * s, (cell / cols) as f32 * s);
            let d = &bbox.data()[a * 4..a * 4 + 4];
            let k = &kps.data()[a * 10..a * 10 + 10];
            let landmarks = std::array::from_fn(|j| [ax + k[2 * j] * s, ay + k[2 * j + 1] * s]);
            faces.push(Face { bbox: [ax - d[0] * s, ay - d[1] * s, ax + d[2] * s, ay + d[3] * s], score, landmarks });
        }
    }
    Ok(())
}
