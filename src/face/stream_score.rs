//! How a stream's faces behave person by person, on real video where no
//! geometry is known: the pipeline's output on each frame is set beside a
//! reference made on the same frame (detection on every frame, the live
//! tool without tracking), and, on synthetic pans, beside the truth. Pure
//! arithmetic, no IO: `fusiond-bench stream` and the stream tests feed it.
//!
//! Persons are the reference's faces linked frame to frame (nearest
//! centroid within half an IOD, across gaps of up to `GAP_S`); an output
//! face belongs to the person whose reference it lies within half an IOD
//! of. Figures are in % of the person's inter-ocular distance (IOD) on
//! that frame.

use super::smooth::{centre, iod};
use super::stream_events::{dropouts, flips, id_switches};

type Points = [[f32; 2]; 5];

/// Gaps in the reference a person is linked across, seconds.
pub const GAP_S: f32 = 0.5;
/// Shortest presence, in frames, that makes a person (not a false detection).
pub const MIN_FRAMES: usize = 8;

/// One face the pipeline put out.
#[derive(Debug, Clone, PartialEq)]
pub struct OutFace {
    pub track: u64,
    pub landmarks: Points,
    pub swapped: bool,
    /// Being faded out (a turned head), not dropped.
    pub fading: bool,
}

/// One frame: the reference's faces, the pipeline's, and the truth where
/// the geometry is known (else empty).
#[derive(Debug, Clone, Default)]
pub struct StreamFrame {
    pub reference: Vec<Points>,
    pub output: Vec<OutFace>,
    pub truth: Vec<Points>,
}

/// One person's row.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PersonRow {
    /// Median IOD over the frames the reference saw the person on, px.
    pub iod_px: f32,
    /// Frames the reference saw the person on.
    pub frames: usize,
    /// RMS second difference of the landmarks, % IOD: the pipeline's and
    /// the reference's over the same frame triples.
    pub jitter: f32,
    pub jitter_reference: f32,
    /// RMS distance from the truth, % IOD: the pipeline's and the
    /// reference's (None without geometry).
    pub error: Option<f32>,
    pub error_reference: Option<f32>,
    /// The truth's own RMS second difference, % IOD, over the frame
    /// triples it and the reference cover: the motion, and the truth's
    /// noise, that no smoothing should take away (None without a truth).
    pub jitter_truth: Option<f32>,
    /// Track ids the pipeline gave the person.
    pub ids: usize,
    /// Times the person's id changed between two of their frames less
    /// than [`GAP_S`] apart (an id given again after a longer gap, when the
    /// person was not detectable, is not a switch).
    pub id_switches: usize,
    /// Share of the reference's frames the pipeline also put the person out on.
    pub coverage: f32,
    /// Frames the person was in view, had been swapped before, and was not
    /// swapped, faded or replaced by another person (that is a flip).
    pub dropouts: usize,
    /// Frames the person's swap was being faded (a turned head).
    pub fades: usize,
    /// The shift, in frames, that best aligns the pipeline's landmarks with
    /// the reference's (positive: the pipeline runs behind).
    pub lag_frames: i32,
}

impl PersonRow {
    /// Jitter against the reference's (1.0 where the reference has none).
    pub fn jitter_ratio(&self) -> f32 {
        if self.jitter_reference > 0.0 {
            self.jitter / self.jitter_reference
        } else {
            1.0
        }
    }
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StreamReport {
    pub persons: Vec<PersonRow>,
    /// Times the swapped person changed while the one swapped before was
    /// still in view.
    pub flips: usize,
}

fn apart(a: &Points, b: &Points) -> f32 {
    let (p, q) = (centre(a), centre(b));
    (p[0] - q[0]).hypot(p[1] - q[1])
}

fn dist2(a: &Points, b: &Points) -> f32 {
    a.iter().zip(b).map(|(p, q)| (p[0] - q[0]).powi(2) + (p[1] - q[1]).powi(2)).sum::<f32>() / 5.0
}

/// Per person, per frame: the index of the reference face, or None.
fn link_persons(frames: &[StreamFrame], fps: f32) -> Vec<Vec<Option<usize>>> {
    let gap = (GAP_S * fps).ceil() as usize + 1;
    // (last frame seen, last points, per-frame indices)
    let mut persons: Vec<(usize, Points, Vec<Option<usize>>)> = Vec::new();
    for (t, f) in frames.iter().enumerate() {
        let mut pairs: Vec<(f32, usize, usize)> = Vec::new();
        for (k, (last_t, last, _)) in persons.iter().enumerate() {
            if t - last_t > gap {
                continue;
            }
            for (d, r) in f.reference.iter().enumerate() {
                let d_px = apart(last, r);
                if d_px < 0.5 * iod(last).max(iod(r)) {
                    pairs.push((d_px, k, d));
                }
            }
        }
        pairs.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut taken = vec![false; f.reference.len()];
        let mut linked = vec![false; persons.len()];
        for (_, k, d) in pairs {
            if !taken[d] && !linked[k] {
                (taken[d], linked[k]) = (true, true);
                persons[k].0 = t;
                persons[k].1 = f.reference[d];
                persons[k].2[t] = Some(d);
            }
        }
        for d in (0..f.reference.len()).filter(|d| !taken[*d]) {
            let mut seen = vec![None; frames.len()];
            seen[t] = Some(d);
            persons.push((t, f.reference[d], seen));
        }
    }
    persons.into_iter().map(|p| p.2).filter(|s| s.iter().flatten().count() >= MIN_FRAMES).collect()
}

/// Per person, per frame: the output face within half an IOD of the
/// person's reference (the nearest).
fn outputs_of(frames: &[StreamFrame], persons: &[Vec<Option<usize>>]) -> Vec<Vec<Option<usize>>> {
    persons
        .iter()
        .map(|seen| {
            seen.iter()
                .zip(frames)
                .map(|(r, f)| {
                    let r = &f.reference[(*r)?];
                    let near = f.output.iter().enumerate().map(|(o, out)| (o, apart(r, &out.landmarks)));
                    near.filter(|(_, d)| *d < 0.5 * iod(r)).min_by(|a, b| a.1.total_cmp(&b.1)).map(|(o, _)| o)
                })
                .collect()
        })
        .collect()
}

/// Scores `frames` (played at `fps`).
pub fn score(frames: &[StreamFrame], fps: f32) -> StreamReport {
    let persons = link_persons(frames, fps);
    let outs = outputs_of(frames, &persons);
    let gap = (GAP_S * fps).ceil() as usize;
    let rows = persons
        .iter()
        .zip(&outs)
        .map(|(refs, outs)| PersonRow { id_switches: id_switches(frames, outs, gap), ..person_row(frames, refs, outs) })
        .collect();
    StreamReport { persons: rows, flips: flips(frames, &persons, &outs) }
}

fn person_row(frames: &[StreamFrame], refs: &[Option<usize>], outs: &[Option<usize>]) -> PersonRow {
    let reference = |t: usize| refs[t].map(|d| &frames[t].reference[d]);
    let output = |t: usize| outs[t].map(|o| &frames[t].output[o]);
    let mut iods: Vec<f32> = (0..frames.len()).filter_map(|t| reference(t).map(iod)).collect();
    iods.sort_by(f32::total_cmp);
    let seen = iods.len();
    let truth = |t: usize| reference(t).and_then(|r| truth_of(&frames[t], r));
    let jitter_truth =
        (0..frames.len()).any(|t| truth(t).is_some()).then(|| jitter(frames.len(), &reference, &truth).0);
    let (jitter, jitter_reference) = jitter(frames.len(), &reference, &|t| output(t).map(|o| &o.landmarks));
    let (error, error_reference) = errors(frames, refs, outs);
    let mut ids: Vec<u64> = (0..frames.len()).filter_map(|t| output(t).map(|o| o.track)).collect();
    ids.sort_unstable();
    ids.dedup();
    let covered = (0..frames.len()).filter(|t| reference(*t).is_some() && output(*t).is_some()).count();
    let (dropouts, fades) = dropouts(frames, refs, outs);
    PersonRow {
        iod_px: iods.get(seen / 2).copied().unwrap_or(0.0),
        frames: seen,
        jitter,
        jitter_reference,
        error,
        error_reference,
        jitter_truth,
        ids: ids.len(),
        id_switches: 0,
        coverage: covered as f32 / seen.max(1) as f32,
        dropouts,
        fades,
        lag_frames: lag(frames.len(), &reference, &|t| output(t).map(|o| &o.landmarks)),
    }
}

/// RMS second difference, % IOD, of the output and of the reference over
/// the frame triples both cover.
fn jitter<'a>(
    n: usize,
    reference: &dyn Fn(usize) -> Option<&'a Points>,
    output: &dyn Fn(usize) -> Option<&'a Points>,
) -> (f32, f32) {
    let second = |p: [&Points; 3], scale: f32| {
        let d: f32 =
            (0..5).map(|i| (0..2).map(|j| (p[2][i][j] - 2.0 * p[1][i][j] + p[0][i][j]).powi(2)).sum::<f32>()).sum();
        d / 5.0 / (scale * scale)
    };
    let (mut out, mut refs, mut count) = (0.0, 0.0, 0usize);
    for t in 2..n {
        let (Some(r0), Some(r1), Some(r2)) = (reference(t - 2), reference(t - 1), reference(t)) else { continue };
        let (Some(o0), Some(o1), Some(o2)) = (output(t - 2), output(t - 1), output(t)) else { continue };
        let scale = iod(r1).max(1.0);
        out += second([o0, o1, o2], scale);
        refs += second([r0, r1, r2], scale);
        count += 1;
    }
    let rms = |s: f32| if count == 0 { 0.0 } else { 100.0 * (s / count as f32).sqrt() };
    (rms(out), rms(refs))
}

/// RMS distance from the truth of the output and of the reference, on the
/// frames where the truth has the person (the truth face nearest the
/// reference's, within half an IOD).
fn errors(frames: &[StreamFrame], refs: &[Option<usize>], outs: &[Option<usize>]) -> (Option<f32>, Option<f32>) {
    let (mut out, mut reference, mut n) = (0.0, 0.0, 0usize);
    for (t, f) in frames.iter().enumerate() {
        let (Some(r), Some(o)) = (refs[t], outs[t]) else { continue };
        let r = &f.reference[r];
        let Some(truth) = truth_of(f, r) else { continue };
        let scale = iod(truth).max(1.0).powi(2);
        out += dist2(&f.output[o].landmarks, truth) / scale;
        reference += dist2(r, truth) / scale;
        n += 1;
    }
    let rms = |s: f32| (n > 0).then(|| 100.0 * (s / n as f32).sqrt());
    (rms(out), rms(reference))
}

/// The truth face of `f` nearest the reference's `r`, within half an IOD.
fn truth_of<'a>(f: &'a StreamFrame, r: &Points) -> Option<&'a Points> {
    f.truth.iter().filter(|g| apart(g, r) < 0.5 * iod(g)).min_by(|a, b| apart(a, r).total_cmp(&apart(b, r)))
}

/// The shift in -5..=5 frames with the least mean distance between the
/// output at t and the reference at t - shift.
fn lag<'a>(
    n: usize,
    reference: &dyn Fn(usize) -> Option<&'a Points>,
    output: &dyn Fn(usize) -> Option<&'a Points>,
) -> i32 {
    let cost = |shift: i32| {
        let at = |t: i32| usize::try_from(t - shift).ok().filter(|s| *s < n);
        let pairs = (0..n as i32).filter_map(|t| Some((output(t as usize)?, reference(at(t)?)?)));
        let (sum, count) =
            pairs.fold((0.0, 0usize), |(s, c), (o, r)| (s + dist2(o, r) / iod(r).max(1.0).powi(2), c + 1));
        if count == 0 {
            f32::INFINITY
        } else {
            sum / count as f32
        }
    };
    (-5..=5).min_by(|a, b| cost(*a).total_cmp(&cost(*b)).then(a.abs().cmp(&b.abs()))).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn face(x: f32) -> Points {
        [[x - 20.0, 100.0], [x + 20.0, 100.0], [x, 115.0], [x - 15.0, 130.0], [x + 15.0, 130.0]]
    }

    fn out(track: u64, x: f32, swapped: bool) -> OutFace {
        OutFace { track, landmarks: face(x), swapped, fading: false }
    }

    /// A face moving right 2 px a frame, its reference jittered by ±2 px.
    fn moving(n: usize, output: impl Fn(usize) -> Vec<OutFace>) -> Vec<StreamFrame> {
        (0..n)
            .map(|t| {
                let jitter = if t % 2 == 0 { 2.0 } else { -2.0 };
                StreamFrame { reference: vec![face(100.0 + 2.0 * t as f32 + jitter)], output: output(t), truth: vec![] }
            })
            .collect()
    }

    #[test]
    fn a_steady_output_has_less_jitter_than_a_jittered_reference_and_no_lag() {
        let frames = moving(30, |t| vec![out(1, 100.0 + 2.0 * t as f32, true)]);
        let r = score(&frames, 30.0);
        assert_eq!(r.persons.len(), 1);
        let p = &r.persons[0];
        assert!(p.jitter < 1e-3 && p.jitter_reference > 10.0, "{p:?}");
        assert_eq!((p.ids, p.lag_frames, p.dropouts, r.flips), (1, 0, 0, 0));
        assert!((p.coverage - 1.0).abs() < 1e-6 && (p.iod_px - 40.0).abs() < 1e-3);
        assert_eq!((p.error, p.jitter_truth), (None, None), "no truth, no error");
    }

    #[test]
    fn errors_and_the_truths_own_jitter_are_measured_against_the_truth() {
        let mut frames = moving(30, |t| vec![out(1, 100.0 + 2.0 * t as f32, true)]);
        for (t, f) in frames.iter_mut().enumerate() {
            f.truth = vec![face(100.0 + 2.0 * t as f32), face(400.0)];
        }
        let p = &score(&frames, 30.0).persons[0];
        // The reference is 2 px off on every landmark: 5 % of a 40 px IOD.
        let close = |v: Option<f32>, want: f32| v.is_some_and(|v| (v - want).abs() < 1e-3);
        assert!(close(p.error, 0.0) && close(p.error_reference, 5.0) && close(p.jitter_truth, 0.0), "{p:?}");
    }

    #[test]
    fn a_late_output_shows_its_lag_and_new_ids_and_dropouts_are_counted() {
        let frames = moving(30, |t| {
            let id = if t < 15 { 1 } else { 2 };
            vec![out(id, 100.0 + 2.0 * t.saturating_sub(3) as f32, !(20..23).contains(&t))]
        });
        let p = &score(&frames, 30.0).persons[0];
        assert_eq!((p.lag_frames, p.ids, p.id_switches, p.dropouts), (3, 2, 1, 3), "{p:?}");
    }

    #[test]
    fn a_swap_that_moves_to_another_person_in_view_is_a_flip() {
        let frames: Vec<StreamFrame> = (0..20)
            .map(|t| StreamFrame {
                reference: vec![face(100.0), face(300.0)],
                output: vec![out(1, 100.0, t < 10), out(2, 300.0, t >= 10)],
                truth: vec![],
            })
            .collect();
        let r = score(&frames, 30.0);
        assert_eq!((r.persons.len(), r.flips), (2, 1));
        assert_eq!(r.persons[0].dropouts, 0, "a flip is not a dropout");
    }
}
