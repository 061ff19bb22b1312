//! Handing freed heap back to the kernel once the slow commands are done.
//! A reload frees a whole model set and a source photo its decoded pixels,
//! but glibc keeps what was freed in its arenas: after a flood of them RSS
//! stayed at the flood's peak (+23 % in the 2-minute soak) instead of
//! returning to its settled value. `malloc_trim`
//! ([`crate::procmem::release_free_heap`]) returns the free pages of every
//! arena. It runs on the control thread, when no command has waited
//! for [`QUIET`] after the last slow one, so that the worker has dropped the
//! models it ran before; it is a plan without IO, so the timing is tested.
//!
//! A trim after slow work misses what is freed later: the worker drops the
//! old models when it next takes a frame, a preload ends on its own thread,
//! and glibc keeps a free top of heap up to its trim threshold resident
//! ([`crate::procmem::tune_allocator`]). So between slow commands the allocator's free memory is also read every
//! [`CHECK_EVERY`], and handed back when it exceeds [`SLACK`].
//!
//! Arenas are also capped at two ([`crate::procmem::tune_allocator`]): glibc gives each new thread (every
//! HTTP connection has one) an arena of its own, up to eight per core, and
//! memory freed in one is never reused by the others. With the trim alone
//! the soak's settled RSS still crept up 6 % over four floods; with both it
//! stayed within 3 %.

use std::time::{Duration, Instant};

/// How long after the last slow command the trim waits.
pub const QUIET: Duration = Duration::from_secs(2);

/// How often the allocator's free memory is read between slow commands.
pub const CHECK_EVERY: Duration = Duration::from_secs(2);

/// Free heap the allocator may keep: what glibc keeps on its own for the
/// next frame's activations ([`crate::procmem::TRIM_THRESHOLD`]); trimming
/// below it would only make the next frame fault its pages back in.
pub const SLACK: usize = crate::procmem::TRIM_THRESHOLD;

#[derive(Debug, Default)]
pub struct Trim {
    due: Option<Instant>,
    next_check: Option<Instant>,
    /// Trims done, for the stats.
    pub done: u64,
}

impl Trim {
    /// A slow command (reload, source, tier switch) ran at `now`.
    pub fn after_slow_work(&mut self, now: Instant) {
        self.due = Some(now + QUIET);
    }

    /// The inbox was idle at `now`: whether to trim now (then done).
    pub fn due(&mut self, now: Instant) -> bool {
        match self.due {
            Some(t) if now >= t => {
                self.due = None;
                self.done += 1;
                true
            }
            _ => false,
        }
    }

    /// The inbox was idle at `now` and no trim was due: whether to read the
    /// allocator's free memory now (once every [`CHECK_EVERY`]).
    pub fn check(&mut self, now: Instant) -> bool {
        match self.next_check {
            Some(t) if now < t => false,
            _ => {
                self.next_check = Some(now + CHECK_EVERY);
                true
            }
        }
    }

    /// The allocator held `free` bytes at a check: whether to hand them back.
    pub fn too_much_free(&mut self, free: usize) -> bool {
        let trim = free > SLACK;
        self.done += u64::from(trim);
        trim
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trim_waits_for_quiet_after_the_last_slow_command() {
        let mut t = Trim::default();
        let start = Instant::now();
        assert!(!t.due(start), "nothing slow ran");
        t.after_slow_work(start);
        assert!(!t.due(start + QUIET / 2));
        t.after_slow_work(start + QUIET / 2);
        assert!(!t.due(start + QUIET), "a later slow command moves the trim");
        assert!(t.due(start + QUIET * 2));
        assert!(!t.due(start + QUIET * 3), "once per quiet spell");
        assert_eq!(t.done, 1);
    }

    #[test]
    fn between_slow_commands_free_heap_over_the_slack_is_handed_back() {
        let mut t = Trim::default();
        let start = Instant::now();
        assert!(t.check(start), "the first idle tick reads the allocator");
        assert!(!t.check(start + CHECK_EVERY / 2));
        assert!(t.check(start + CHECK_EVERY));
        assert!(!t.too_much_free(SLACK), "the slack itself is kept");
        assert!(t.too_much_free(SLACK + 1));
        assert_eq!(t.done, 1);
    }
}
