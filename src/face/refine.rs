//! Finding tracked faces again between full detections: the detector at a
//! small input size on a crop around each track's predicted box
//! (`pipeline.refine_size`), so every track gets a fresh measurement on
//! every frame at a fraction of a full detection's cost.

use super::detect::iou;
use super::{Detector, Face, Result, Tracked};
use crate::vision::{warp_affine_into, Affine, RgbImage};
use std::time::Duration;

/// The crop and its mirror image, kept between frames so refinement
/// allocates nothing per frame.
#[derive(Debug, Default)]
pub struct CropBuffers {
    crop: RgbImage,
    mirrored: RgbImage,
}

/// `src` mirrored left to right into `dst` (same size).
fn mirror_into(src: &RgbImage, dst: &mut RgbImage) {
    let row = src.width() as usize * 3;
    for (s, d) in src.chunks_exact(row).zip(dst.chunks_exact_mut(row)) {
        for (sp, dp) in s.chunks_exact(3).zip(d.chunks_exact_mut(3).rev()) {
            dp.copy_from_slice(sp);
        }
    }
}

/// Each track's face found again by [`find_in_crop`]: a face that
/// [`agrees`] with the track's prediction refines it. Returns those faces,
/// the tracks whose crop held no face at all (gone or hidden), and the time
/// spent inside the engine.
pub fn refine(
    detector: &mut Detector,
    buffers: &mut CropBuffers,
    frame: &RgbImage,
    tracks: &[Tracked],
) -> Result<Refined> {
    let (mut found, mut empty) = (Vec::new(), Vec::new());
    let mut inference = Duration::ZERO;
    for track in tracks {
        let Some(find) = find_in_crop(detector, buffers, frame, &track.face.bbox)? else { continue };
        inference += find.inference;
        if !find.any {
            empty.push(track.id);
        }
        if let Some(face) = find.face.filter(|face| agrees(&track.face, face)) {
            found.push((track.id, face));
        }
    }
    Ok(Refined { found, empty, inference })
}

/// What [`find_in_crop`] saw.
pub struct CropFind {
    /// The face found, averaged with its mirror image's.
    pub face: Option<Face>,
    /// Whether the crop held any face at all.
    pub any: bool,
    /// Time inside the engine.
    pub inference: Duration,
}

/// The face in a crop twice `bbox`'s longer side, scaled to the detector's
/// (square) input, found there and on the crop's mirror image: the two are
/// averaged, which cancels much of the detector's left-right bias. The
/// detection that overlaps `bbox` most (IoU at least 0.3) wins. `None` for a
/// box under 4 px (its crop under 8 px).
pub fn find_in_crop(
    detector: &mut Detector,
    buffers: &mut CropBuffers,
    frame: &RgbImage,
    bbox: &[f32; 4],
) -> Result<Option<CropFind>> {
    let [w, h] = detector.entry().input_size;
    let side = w.min(h) as f32;
    let CropBuffers { crop, mirrored } = buffers;
    if crop.dimensions() != (side as u32, side as u32) {
        *crop = RgbImage::new(side as u32, side as u32);
        *mirrored = crop.clone();
    }
    let b = bbox;
    let box_side = 2.0 * (b[2] - b[0]).max(b[3] - b[1]);
    if box_side < 8.0 {
        return Ok(None);
    }
    let k = side / box_side;
    let (x0, y0) = ((b[0] + b[2] - box_side) / 2.0, (b[1] + b[3] - box_side) / 2.0);
    let to_crop = Affine([k, 0.0, -k * x0, 0.0, k, -k * y0]);
    let Some(back) = to_crop.invert() else { return Ok(None) };
    warp_affine_into(frame, &to_crop, crop);
    let faces = detector.detect(crop)?;
    let mut inference = detector.last_inference;
    let any = !faces.is_empty();
    let Some(face) = best_overlap(faces, &back, b, 0.3) else {
        return Ok(Some(CropFind { face: None, any, inference }));
    };
    mirror_into(crop, mirrored);
    let unmirror = Affine([-1.0, 0.0, side - 1.0, 0.0, 1.0, 0.0]);
    let mirror_faces = detector.detect(mirrored)?.into_iter().map(|f| unmirror_face(&f, &unmirror)).collect();
    inference += detector.last_inference;
    let face = match best_overlap(mirror_faces, &back, &face.bbox, 0.5) {
        Some(m) => average(&face, &m),
        None => face,
    };
    Ok(Some(CropFind { face: Some(face), any, inference }))
}

/// What [`refine`] found.
pub struct Refined {
    /// Each track found again, with its face.
    pub found: Vec<(u64, Face)>,
    /// Tracks whose crop held no face at all.
    pub empty: Vec<u64>,
    /// Time inside the engine.
    pub inference: Duration,
}

/// Tracks at the frame's edge whose crop held no face, looked for again by
/// a full detection of the frame: a face cut by the edge or leaving fast
/// is one a crop can miss while the full detector, which gives the births,
/// still finds it. A track with no detection that [`agrees`] with it has
/// left: it is not put out (nor swapped) until a detection finds it again.
pub fn recheck_at_edge(
    detector: &mut Detector,
    frame: &RgbImage,
    tracks: &[Tracked],
    empty: &[u64],
) -> Result<EdgeRecheck> {
    let (w, h) = (frame.width() as f32, frame.height() as f32);
    let at_edge = |b: &[f32; 4]| b[0] <= 0.0 || b[1] <= 0.0 || b[2] >= w - 1.0 || b[3] >= h - 1.0;
    let edge: Vec<&Tracked> = tracks.iter().filter(|k| empty.contains(&k.id) && at_edge(&k.face.bbox)).collect();
    let mut recheck = EdgeRecheck::default();
    if edge.is_empty() {
        return Ok(recheck);
    }
    let faces = detector.detect(frame)?;
    recheck.inference = detector.last_inference;
    for track in edge {
        let nearest = faces
            .iter()
            .filter(|f| agrees(&track.face, f))
            .min_by(|a, b| distance(&track.face, a).total_cmp(&distance(&track.face, b)));
        match nearest {
            Some(face) => recheck.found.push((track.id, face.clone())),
            None => recheck.left.push(track.id),
        }
    }
    Ok(recheck)
}

fn distance(track: &Face, face: &Face) -> f32 {
    super::track::box_distance(&track.bbox, &face.bbox, f32::INFINITY).unwrap_or(f32::INFINITY)
}

/// What [`recheck_at_edge`] found.
#[derive(Debug, Default)]
pub struct EdgeRecheck {
    /// Tracks the full detection found, with their faces.
    pub found: Vec<(u64, Face)>,
    /// Tracks it did not find: gone from the frame.
    pub left: Vec<u64>,
    /// Time inside the engine.
    pub inference: Duration,
}

/// Whether a refined face agrees with the track it refines: its box's
/// centre within a third of the track's box width of the track's, its
/// width within 1/1.5..1.5 of it. A face that does not is dropped and the
/// track keeps its prediction: a crop can hold a smaller false face, or a
/// turned head's half face.
fn agrees(track: &Face, face: &Face) -> bool {
    super::track::box_distance(&track.bbox, &face.bbox, 1.5).is_some_and(|d| d < 1.0 / 3.0)
}

/// Of faces found on a crop, the one that overlaps `bbox` (frame
/// coordinates) most, at least `min_iou`, in frame coordinates.
fn best_overlap(faces: Vec<Face>, back: &Affine, bbox: &[f32; 4], min_iou: f32) -> Option<Face> {
    faces
        .into_iter()
        .map(|f| map_face(&f, back))
        .map(|f| (iou(&f.bbox, bbox), f))
        .filter(|(o, _)| *o >= min_iou)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, f)| f)
}

/// A face found on a mirrored crop, on the crop itself: mirrored back, with
/// its left and right landmarks (eyes, mouth corners) swapped back.
fn unmirror_face(f: &Face, unmirror: &Affine) -> Face {
    let m = map_face(f, unmirror);
    let l = m.landmarks;
    Face { landmarks: [l[1], l[0], l[2], l[4], l[3]], ..m }
}

fn average(a: &Face, b: &Face) -> Face {
    let mid = |p: f32, q: f32| (p + q) / 2.0;
    Face {
        bbox: std::array::from_fn(|i| mid(a.bbox[i], b.bbox[i])),
        landmarks: std::array::from_fn(|i| {
            [mid(a.landmarks[i][0], b.landmarks[i][0]), mid(a.landmarks[i][1], b.landmarks[i][1])]
        }),
        score: a.score.min(b.score),
    }
}

/// Each detection takes the refined face it overlaps most (IoU at least
/// 0.3), each refined face at most once.
pub fn substitute(faces: &mut [Face], found: &[(u64, Face)]) {
    let mut used = vec![false; found.len()];
    for face in faces.iter_mut() {
        let best = found
            .iter()
            .enumerate()
            .filter(|(k, _)| !used[*k])
            .map(|(k, (_, f))| (k, iou(&f.bbox, &face.bbox)))
            .filter(|(_, o)| *o >= 0.3)
            .max_by(|a, b| a.1.total_cmp(&b.1));
        if let Some((k, _)) = best {
            used[k] = true;
            *face = found[k].1.clone();
        }
    }
}

/// `f` through `m` (its box the bounds of the mapped corners).
fn map_face(f: &Face, back: &Affine) -> Face {
    let [x0, y0, x1, y1] = f.bbox;
    let corners = [[x0, y0], [x1, y0], [x0, y1], [x1, y1]].map(|[x, y]| back.apply(x, y));
    let xs = corners.map(|c| c.0);
    let ys = corners.map(|c| c.1);
    let min = |v: [f32; 4]| v.into_iter().fold(f32::INFINITY, f32::min);
    let max = |v: [f32; 4]| v.into_iter().fold(f32::NEG_INFINITY, f32::max);
    Face {
        bbox: [min(xs), min(ys), max(xs), max(ys)],
        landmarks: f.landmarks.map(|[x, y]| back.apply(x, y).into()),
        score: f.score,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mirror_reverses_each_row() {
        let src = RgbImage::from_fn(3, 2, |x, y| image::Rgb([x as u8, y as u8, 9]));
        let mut dst = RgbImage::new(3, 2);
        mirror_into(&src, &mut dst);
        assert_eq!(dst, image::imageops::flip_horizontal(&src));
    }
}
