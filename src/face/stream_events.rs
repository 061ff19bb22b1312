//! What happened to the stream scorer's persons' ids and swaps, frame by
//! frame: id switches, dropouts, fades and flips
//! ([`super::stream_score`]'s persons and their outputs). Pure arithmetic.

use super::stream_score::StreamFrame;

/// Times a person's id changed between two of their frames at most `gap`
/// frames apart.
pub(super) fn id_switches(frames: &[StreamFrame], outs: &[Option<usize>], gap: usize) -> usize {
    let mut last: Option<(usize, u64)> = None;
    let mut switches = 0;
    for (t, o) in outs.iter().enumerate() {
        let Some(o) = o else { continue };
        let id = frames[t].output[*o].track;
        if last.is_some_and(|(at, was)| was != id && t - at <= gap) {
            switches += 1;
        }
        last = Some((t, id));
    }
    switches
}

/// Dropouts and fades of one person: after the person was first swapped,
/// a frame where the reference sees them and their output is neither
/// swapped nor fading, and no other person is swapped or fading, is a
/// dropout.
pub(super) fn dropouts(frames: &[StreamFrame], refs: &[Option<usize>], outs: &[Option<usize>]) -> (usize, usize) {
    let (mut was_swapped, mut drops, mut fades) = (false, 0, 0);
    for (t, f) in frames.iter().enumerate() {
        let mine = outs[t].map(|o| &f.output[o]);
        if mine.is_some_and(|o| o.fading) {
            fades += 1;
        }
        if mine.is_some_and(|o| o.swapped || o.fading) {
            was_swapped = true;
            continue;
        }
        let other_swapped = f.output.iter().any(|o| o.swapped || o.fading);
        if was_swapped && refs[t].is_some() && !other_swapped {
            drops += 1;
        }
    }
    (drops, fades)
}

/// Times the swapped person changed while the one swapped before was still
/// in the reference's view.
#[allow(clippy::needless_range_loop)] // `t` indexes every person's frames
pub(super) fn flips(frames: &[StreamFrame], persons: &[Vec<Option<usize>>], outs: &[Vec<Option<usize>>]) -> usize {
    let swapped = |t: usize| {
        (0..persons.len())
            .find(|k| outs[*k][t].is_some_and(|o| frames[t].output[o].swapped || frames[t].output[o].fading))
    };
    let (mut flips, mut last): (usize, Option<usize>) = (0, None);
    for t in 0..frames.len() {
        let now = swapped(t);
        if let (Some(before), Some(now)) = (last, now) {
            if before != now && persons[before][t].is_some() {
                flips += 1;
            }
        }
        last = now.or(last);
    }
    flips
}
