//! Rolling latency percentiles for the stats the daemon publishes: a fixed
//! ring of the most recent samples, so memory stays bounded however long it
//! runs.

use std::time::Duration;

#[derive(Debug, Clone)]
pub struct LatencyWindow {
    samples: Vec<f32>,
    next: usize,
    filled: bool,
    scratch: Vec<f32>,
}

/// p50 and p95 in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Percentiles {
    pub p50_ms: f32,
    pub p95_ms: f32,
}

impl LatencyWindow {
    /// Keeps the last `capacity` samples (at least one).
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        LatencyWindow { samples: vec![0.0; capacity], next: 0, filled: false, scratch: Vec::with_capacity(capacity) }
    }

    pub fn record(&mut self, d: Duration) {
        self.samples[self.next] = d.as_secs_f32() * 1e3;
        self.next = (self.next + 1) % self.samples.len();
        self.filled |= self.next == 0;
    }

    pub fn len(&self) -> usize {
        if self.filled {
            self.samples.len()
        } else {
            self.next
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Nearest-rank percentiles of the samples in the window; `None` when
    /// empty.
    pub fn percentiles(&mut self) -> Option<Percentiles> {
        let n = self.len();
        if n == 0 {
            return None;
        }
        self.scratch.clear();
        self.scratch.extend_from_slice(&self.samples[..n]);
        self.scratch.sort_by(f32::total_cmp);
        let rank = |p: f32| self.scratch[((p * n as f32).ceil() as usize).clamp(1, n) - 1];
        Some(Percentiles { p50_ms: rank(0.5), p95_ms: rank(0.95) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_one_to_a_hundred_ms() {
        let mut w = LatencyWindow::new(100);
        assert!(w.percentiles().is_none());
        for ms in (1..=100).rev() {
            w.record(Duration::from_millis(ms));
        }
        let p = w.percentiles().unwrap();
        assert!((p.p50_ms - 50.0).abs() < 1e-3 && (p.p95_ms - 95.0).abs() < 1e-3, "{p:?}");
    }

    #[test]
    fn the_window_forgets_old_samples() {
        let mut w = LatencyWindow::new(4);
        for ms in [500, 500, 500, 500, 1, 2, 3, 4] {
            w.record(Duration::from_millis(ms));
        }
        assert_eq!(w.len(), 4);
        assert_eq!(w.percentiles().unwrap().p95_ms, 4.0);
    }
}
