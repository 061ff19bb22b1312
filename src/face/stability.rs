//! How steady the faces of a stream are, measured against known geometry:
//! each frame's landmarks are mapped back through the frame's known
//! photo → frame transform, where the faces stand still, and compared with
//! the persons' positions there. Figures are in % of each person's
//! inter-ocular distance (IOD) in the photo. Pure arithmetic, no IO.

use super::smooth::{centre, iod};
use super::{LivePipeline, Result};
use crate::vision::{Affine, RgbImage};
use std::time::{Duration, Instant};

/// One face as the pipeline put it out on one frame.
#[derive(Debug, Clone, PartialEq)]
pub struct Observed {
    pub track: u64,
    /// Frame coordinates.
    pub landmarks: [[f32; 2]; 5],
    pub detected: bool,
    pub swapped: bool,
}

/// One frame: its photo → frame map, whether it is in the fast segment, and
/// the faces put out on it.
#[derive(Debug, Clone)]
pub struct FrameRecord {
    pub to_frame: Affine,
    pub fast: bool,
    pub faces: Vec<Observed>,
}

/// One person's figures over a run.
#[derive(Debug, Clone, PartialEq)]
pub struct PersonReport {
    /// Frames the person was seen on.
    pub frames: usize,
    /// RMS frame-to-frame step of the landmarks, % IOD.
    pub step: f32,
    /// RMS distance from the person's mean position over the run, % IOD.
    pub spread: f32,
    /// RMS distance from the true position, on frames with a detection and
    /// on frames without one (None when every frame had one), % IOD.
    pub error_detected: f32,
    pub error_tracked: Option<f32>,
    /// How many frames behind the truth the landmarks run in the fast
    /// segment (least squares along the motion); None without one.
    pub lag_frames: Option<f32>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub persons: Vec<PersonReport>,
    /// Times the swapped person changed while the one swapped before was
    /// still in view.
    pub flips: usize,
}

type Points = [[f32; 2]; 5];

/// Runs `live` over `frames` (image, photo → frame map, fast segment) as a
/// camera at `fps` would deliver them, on a simulated clock, and records
/// what it put out.
pub fn record(
    live: &mut LivePipeline,
    frames: impl IntoIterator<Item = Result<(RgbImage, Affine, bool)>>,
    fps: f32,
) -> Result<Vec<FrameRecord>> {
    let start = Instant::now();
    let mut out = Vec::new();
    for (i, frame) in frames.into_iter().enumerate() {
        let (mut img, to_frame, fast) = frame?;
        let now = start + Duration::from_secs_f64(i as f64 / fps as f64);
        let r = live.process(&mut img, now)?;
        let faces = (0..r.faces.len())
            .map(|k| Observed {
                track: r.ids[k],
                landmarks: r.faces[k].landmarks,
                detected: r.detected,
                swapped: r.swapped.contains(&k),
            })
            .collect();
        out.push(FrameRecord { to_frame, fast, faces });
    }
    Ok(out)
}

fn map(a: &Affine, p: &Points) -> Points {
    p.map(|[x, y]| {
        let (u, v) = a.apply(x, y);
        [u, v]
    })
}

fn dist2(a: &Points, b: &Points) -> f32 {
    a.iter().zip(b).map(|(p, q)| (p[0] - q[0]).powi(2) + (p[1] - q[1]).powi(2)).sum::<f32>() / 5.0
}

/// Every face of `records` in photo coordinates, frame by frame.
fn in_photo(records: &[FrameRecord]) -> Vec<Vec<Points>> {
    let back = |r: &FrameRecord| r.to_frame.invert().unwrap_or(Affine::IDENTITY);
    records.iter().map(|r| r.faces.iter().map(|f| map(&back(r), &f.landmarks)).collect()).collect()
}

/// The persons of a run, by where their faces stand in the photo: mean
/// landmarks of the faces that gather within half an IOD, kept when seen on
/// at least half the frames (a false detection is not a person). Meant for
/// raw detections on every frame.
pub fn persons(records: &[FrameRecord]) -> Vec<Points> {
    let mut groups: Vec<(Points, usize)> = Vec::new();
    for frame in in_photo(records) {
        for p in frame {
            let c = centre(&p);
            let near = groups.iter_mut().find(|(sum, n)| {
                let mean = sum.map(|[x, y]| [x / *n as f32, y / *n as f32]);
                let m = centre(&mean);
                (m[0] - c[0]).hypot(m[1] - c[1]) < 0.5 * iod(&mean)
            });
            match near {
                Some((sum, n)) => {
                    for (s, q) in sum.iter_mut().zip(&p) {
                        s[0] += q[0];
                        s[1] += q[1];
                    }
                    *n += 1;
                }
                None => groups.push((p, 1)),
            }
        }
    }
    let keep = records.len().div_ceil(2);
    groups.into_iter().filter(|(_, n)| *n >= keep).map(|(s, n)| s.map(|[x, y]| [x / n as f32, y / n as f32])).collect()
}

/// The person a face (photo coordinates) belongs to: the nearest within
/// one IOD.
fn person_of(p: &Points, truth: &[Points]) -> Option<usize> {
    let c = centre(p);
    truth
        .iter()
        .enumerate()
        .map(|(i, t)| (i, centre(t), iod(t)))
        .filter(|(_, m, s)| (m[0] - c[0]).hypot(m[1] - c[1]) < *s)
        .min_by(|a, b| {
            let d = |m: [f32; 2]| (m[0] - c[0]).hypot(m[1] - c[1]);
            d(a.1).total_cmp(&d(b.1))
        })
        .map(|(i, _, _)| i)
}

fn rms_pct(sum: f32, n: usize, scale: f32) -> f32 {
    if n == 0 {
        0.0
    } else {
        100.0 * (sum / n as f32).sqrt() / scale
    }
}

/// The figures of `records` against the persons' true photo positions.
pub fn evaluate(records: &[FrameRecord], truth: &[Points]) -> Report {
    let photo = in_photo(records);
    // Per frame: each person's face (photo coordinates) and its observation.
    let seen: Vec<Vec<Option<(Points, &Observed)>>> = photo
        .iter()
        .zip(records)
        .map(|(faces, r)| {
            let mut by_person = vec![None; truth.len()];
            for (p, o) in faces.iter().zip(&r.faces) {
                if let Some(k) = person_of(p, truth) {
                    by_person[k].get_or_insert((*p, o));
                }
            }
            by_person
        })
        .collect();
    let persons = (0..truth.len()).map(|k| person_report(k, &truth[k], records, &seen)).collect();
    Report { persons, flips: flips(&seen) }
}

fn person_report(
    k: usize,
    truth: &Points,
    records: &[FrameRecord],
    seen: &[Vec<Option<(Points, &Observed)>>],
) -> PersonReport {
    let scale = iod(truth);
    let present: Vec<(usize, Points, bool)> =
        seen.iter().enumerate().filter_map(|(t, f)| f[k].map(|(p, o)| (t, p, o.detected))).collect();
    let (mut step, mut steps) = (0.0, 0);
    for w in present.windows(2) {
        if w[1].0 == w[0].0 + 1 {
            step += dist2(&w[0].1, &w[1].1);
            steps += 1;
        }
    }
    let n = present.len().max(1) as f32;
    let mut mean = [[0.0f32; 2]; 5];
    for (_, p, _) in &present {
        for (m, q) in mean.iter_mut().zip(p) {
            m[0] += q[0] / n;
            m[1] += q[1] / n;
        }
    }
    let spread: f32 = present.iter().map(|(_, p, _)| dist2(p, &mean)).sum();
    let err = |detected: bool| {
        let e: Vec<f32> = present.iter().filter(|x| x.2 == detected).map(|(_, p, _)| dist2(p, truth)).collect();
        (!e.is_empty()).then(|| rms_pct(e.iter().sum(), e.len(), scale))
    };
    PersonReport {
        frames: present.len(),
        step: rms_pct(step, steps, scale),
        spread: rms_pct(spread, present.len(), scale),
        error_detected: err(true).unwrap_or(0.0),
        error_tracked: err(false),
        lag_frames: lag(k, truth, records, seen),
    }
}

/// Least-squares lag in the fast segment, in frame coordinates: the error
/// along the true motion, in units of one frame's motion.
fn lag(k: usize, truth: &Points, records: &[FrameRecord], seen: &[Vec<Option<(Points, &Observed)>>]) -> Option<f32> {
    let (mut ev, mut vv) = (0.0f32, 0.0f32);
    for t in 1..records.len() {
        let (Some((_, o)), true) = (seen[t][k], records[t].fast) else { continue };
        let now = map(&records[t].to_frame, truth);
        let before = map(&records[t - 1].to_frame, truth);
        for ((p, q), b) in o.landmarks.iter().zip(&now).zip(&before) {
            let (e, v) = ([p[0] - q[0], p[1] - q[1]], [q[0] - b[0], q[1] - b[1]]);
            ev += e[0] * v[0] + e[1] * v[1];
            vv += v[0] * v[0] + v[1] * v[1];
        }
    }
    (vv > 0.0).then(|| -ev / vv)
}

fn flips(seen: &[Vec<Option<(Points, &Observed)>>]) -> usize {
    let swapped = |f: &Vec<Option<(Points, &Observed)>>| f.iter().position(|x| x.is_some_and(|(_, o)| o.swapped));
    let mut flips = 0;
    let mut last: Option<usize> = None;
    for f in seen {
        let now = swapped(f);
        if let (Some(before), Some(now)) = (last, now) {
            if before != now && f[before].is_some() {
                flips += 1;
            }
        }
        last = now.or(last);
    }
    flips
}

/// Flips on a stream without known geometry (a real camera sequence):
/// persons are told apart by their left-to-right order, on frames where as
/// many faces are seen as on most frames.
pub fn flips_by_order(records: &[FrameRecord]) -> usize {
    let mut counts = std::collections::BTreeMap::new();
    for r in records {
        *counts.entry(r.faces.len()).or_insert(0usize) += 1;
    }
    let Some((&usual, _)) = counts.iter().max_by_key(|(_, n)| **n) else { return 0 };
    let mut flips = 0;
    let mut last: Option<usize> = None;
    for r in records.iter().filter(|r| r.faces.len() == usual) {
        let mut order: Vec<&Observed> = r.faces.iter().collect();
        order.sort_by(|a, b| centre(&a.landmarks)[0].total_cmp(&centre(&b.landmarks)[0]));
        let now = order.iter().position(|o| o.swapped);
        if let (Some(before), Some(now)) = (last, now) {
            flips += usize::from(before != now);
        }
        last = now.or(last);
    }
    flips
}

#[cfg(test)]
mod tests {
    use super::*;

    fn face(x: f32, y: f32) -> Points {
        [[x - 20.0, y], [x + 20.0, y], [x, y + 15.0], [x - 15.0, y + 30.0], [x + 15.0, y + 30.0]]
    }

    fn obs(track: u64, lm: Points, swapped: bool) -> Observed {
        Observed { track, landmarks: lm, detected: true, swapped }
    }

    /// Two people at (100, 100) and (300, 100) in the photo; frames shift
    /// the photo right by `t` pixels per frame.
    fn records(jitter: &[f32], swap_first: &[bool]) -> Vec<FrameRecord> {
        jitter
            .iter()
            .zip(swap_first)
            .enumerate()
            .map(|(t, (j, s))| {
                let to_frame = Affine([1.0, 0.0, t as f32, 0.0, 1.0, 0.0]);
                let a = face(100.0 + t as f32 + j, 100.0);
                let b = face(300.0 + t as f32, 100.0);
                FrameRecord { to_frame, fast: false, faces: vec![obs(1, a, *s), obs(2, b, !*s)] }
            })
            .collect()
    }

    #[test]
    fn still_faces_under_a_moving_view_have_no_step_and_jitter_is_measured_in_iod() {
        let r = records(&[0.0, 4.0, 0.0, 4.0], &[true; 4]);
        let truth = persons(&r);
        assert_eq!(truth.len(), 2);
        let rep = evaluate(&r, &truth);
        // Person order follows first appearance; the jittered one is first.
        assert!((rep.persons[0].step - 10.0).abs() < 1e-3, "4 px of 40 px IOD: {:?}", rep.persons[0]);
        assert!(rep.persons[1].step.abs() < 1e-3 && rep.persons[1].spread.abs() < 1e-3);
        assert_eq!(rep.flips, 0);
    }

    #[test]
    fn a_flip_counts_only_while_the_previous_person_is_in_view() {
        let r = records(&[0.0; 4], &[true, false, true, true]);
        assert_eq!(evaluate(&r, &persons(&r)).flips, 2);
    }
}
