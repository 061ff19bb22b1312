//! Sharing an op's output rows among tract's threads.

use std::ops::Range;
use tract_linalg::multithread::{current_tract_executor, Executor};

/// The least work, in multiply-adds, worth a share of its own on another
/// thread. Handing a share over costs time even with the pool's workers awake
/// (the daemon's `tract_pool::run`), and nodes with less work than this ran
/// slower shared than on one thread (tuning: crates/tract-ops/README.md). The
/// unit tests share any work, so that each op's shares are tested on small
/// inputs.
#[cfg(not(test))]
const MIN_SHARE_WORK: usize = 2 << 20;
#[cfg(test)]
const MIN_SHARE_WORK: usize = 1;

/// How many shares `rows` rows of `total` multiply-adds make on `threads`
/// threads: one a thread, none under `least` work, at least one row each.
fn share_count(threads: usize, rows: usize, total: usize, least: usize) -> usize {
    threads.min(total / least.max(1)).clamp(1, rows.max(1))
}

/// Runs `job` on shares of the output rows of `y`, planes of `rows` ×
/// `width` values that take `work` multiply-adds each: each call gets a
/// range of rows and, for every plane, the slice that holds them. With
/// tract's thread pool set, the shares run on its threads, one share a
/// thread and none smaller than [`MIN_SHARE_WORK`].
pub fn share_rows<F>(y: &mut [f32], (rows, width): (usize, usize), work: usize, job: F)
where
    F: Fn(Range<usize>, Vec<&mut [f32]>) + Sync,
{
    if rows * width == 0 {
        return;
    }
    let threads = match current_tract_executor() {
        Executor::MultiThread(pool) => Some(pool),
        _ => None,
    };
    let total = y.len().saturating_mul(work);
    let count = threads.as_ref().map_or(1, |p| share_count(p.current_num_threads(), rows, total, MIN_SHARE_WORK));
    let per_share = rows.div_ceil(count);
    let ranges: Vec<Range<usize>> = (0..rows).step_by(per_share).map(|a| a..(a + per_share).min(rows)).collect();
    let mut shares: Vec<Vec<&mut [f32]>> = ranges.iter().map(|_| Vec::new()).collect();
    for plane in y.chunks_exact_mut(rows * width) {
        let mut rest = plane;
        for (range, share) in ranges.iter().zip(&mut shares) {
            let (head, tail) = rest.split_at_mut(range.len() * width);
            share.push(head);
            rest = tail;
        }
    }
    let (jobs, job) = (ranges.into_iter().zip(shares), &job);
    match threads {
        Some(pool) if jobs.len() > 1 => pool.scope(|s| {
            for (range, share) in jobs {
                s.spawn(move |_| job(range, share));
            }
        }),
        _ => jobs.for_each(|(range, share)| job(range, share)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tract_linalg::multithread::multithread_tract_scope;

    #[test]
    fn work_is_shared_one_share_a_thread_but_never_in_shares_too_small_to_pay() {
        let least = 2 << 20;
        assert_eq!(share_count(2, 20, 1 << 20, least), 1, "half the least work stays on one thread");
        assert_eq!(share_count(2, 20, 4 << 20, least), 2, "twice the least: a share a thread");
        assert_eq!(share_count(4, 20, 5 << 20, least), 2, "two shares' worth on four threads");
        assert_eq!(share_count(4, 3, 64 << 20, least), 3, "no more shares than rows");
        assert_eq!(share_count(1, 20, 64 << 20, least), 1);
        assert_eq!(share_count(2, 0, 0, least), 1);
    }

    #[test]
    fn every_row_of_every_plane_goes_to_exactly_one_share() {
        let (planes, rows, width) = (3, 7, 5);
        let mut y = vec![0f32; planes * rows * width];
        multithread_tract_scope(Executor::multithread(3), || {
            share_rows(&mut y, (rows, width), 1, |range, share| {
                assert_eq!(share.len(), planes);
                for plane in share {
                    assert_eq!(plane.len(), range.len() * width);
                    plane.iter_mut().for_each(|v| *v += 1.0 + range.start as f32);
                }
            })
        });
        let starts = [0., 0., 0., 3., 3., 3., 6.];
        for plane in y.chunks_exact(rows * width) {
            for (row, start) in plane.chunks_exact(width).zip(starts) {
                assert!(row.iter().all(|v| *v == 1.0 + start), "{row:?}");
            }
        }
    }
}
