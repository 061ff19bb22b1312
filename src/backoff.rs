//! Reopening a lost device (the camera, the V4L2 output) with doubling
//! backoff: plain state, no IO.

use std::time::{Duration, Instant};

#[derive(Debug)]
pub struct Backoff {
    min: Duration,
    max: Duration,
    wait: Duration,
    lost_since: Option<Instant>,
    attempts: u32,
}

impl Backoff {
    pub fn new(min: Duration, max: Duration) -> Backoff {
        Backoff { min, max: max.max(min), wait: min, lost_since: None, attempts: 0 }
    }

    pub fn is_lost(&self) -> bool {
        self.lost_since.is_some()
    }

    /// A failure at `now`: how long to wait before the next attempt, and
    /// whether this one began the loss (report it once).
    pub fn fail(&mut self, now: Instant) -> (Duration, bool) {
        let first = self.lost_since.is_none();
        if first {
            self.lost_since = Some(now);
            self.wait = self.min;
            self.attempts = 0;
        }
        let wait = self.wait;
        self.wait = (self.wait * 2).min(self.max);
        self.attempts += 1;
        (wait, first)
    }

    /// A success at `now`: how long the loss lasted and the attempts it
    /// took, when there was one.
    pub fn recover(&mut self, now: Instant) -> Option<(Duration, u32)> {
        let since = self.lost_since.take()?;
        Some((now.saturating_duration_since(since), self.attempts))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_to_the_maximum_reports_once_and_starts_over_after_recovery() {
        let ms = Duration::from_millis;
        let mut b = Backoff::new(ms(100), ms(400));
        let t = Instant::now();
        let waits: Vec<_> = (0..4).map(|_| b.fail(t)).collect();
        assert_eq!(waits, [(ms(100), true), (ms(200), false), (ms(400), false), (ms(400), false)]);
        assert!(b.is_lost());
        assert_eq!(b.recover(t + ms(900)), Some((ms(900), 4)));
        assert_eq!(b.recover(t + ms(900)), None, "nothing to recover from");
        assert_eq!(b.fail(t), (ms(100), true));
    }
}
