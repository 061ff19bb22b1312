//! The hand-off from the control loop to the worker: one slot per kind of
//! change, the newest replacing one not yet taken. Posting never blocks
//! (the lock is held only to swap a slot), so a flood of commands cannot
//! stall the control loop, and the worker applies what is current once per
//! frame. Replaced changes are counted.

use super::settings::WorkerConfig;
use crate::control::Settings;
use crate::face::Embedding;
use crate::store::TierModels;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Everything posted since the worker last looked.
#[derive(Default)]
pub struct Pending {
    pub models: Option<TierModels>,
    /// The identity to swap in; `Some(None)` stops swapping.
    pub source: Option<Option<Embedding>>,
    pub settings: Option<Settings>,
    /// Per-person mapping: `from` identities and the `to` they take.
    pub mappings: Option<Vec<(Embedding, Embedding)>>,
    pub config: Option<WorkerConfig>,
    pub snapshot: bool,
    /// Hang the worker (watchdog tests).
    pub stall: bool,
    /// Panic in the worker (journald tests).
    pub panic: bool,
}

#[derive(Default)]
pub struct Mailbox {
    pending: Mutex<Pending>,
    coalesced: AtomicU64,
}

impl Mailbox {
    fn post(&self, f: impl FnOnce(&mut Pending) -> bool) {
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        if f(&mut p) {
            self.coalesced.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn models(&self, m: TierModels) {
        self.post(|p| p.models.replace(m).is_some())
    }

    pub fn source(&self, s: Option<Embedding>) {
        self.post(|p| p.source.replace(s).is_some())
    }

    pub fn mappings(&self, pairs: Vec<(Embedding, Embedding)>) {
        self.post(|p| p.mappings.replace(pairs).is_some())
    }

    pub fn settings(&self, s: &Settings) {
        self.post(|p| p.settings.replace(s.clone()).is_some())
    }

    pub fn config(&self, c: WorkerConfig) {
        self.post(|p| p.config.replace(c).is_some())
    }

    pub fn snapshot(&self) {
        self.post(|p| std::mem::replace(&mut p.snapshot, true))
    }

    pub fn stall(&self) {
        self.post(|p| std::mem::replace(&mut p.stall, true))
    }

    pub fn panic(&self) {
        self.post(|p| std::mem::replace(&mut p.panic, true))
    }

    /// Takes everything posted, leaving the slots empty.
    pub fn take(&self) -> Pending {
        std::mem::take(&mut *self.pending.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Changes replaced before the worker took them.
    pub fn coalesced(&self) -> u64 {
        self.coalesced.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::face::{Blend, SelectorMode};

    fn settings(blend: f32) -> Settings {
        Settings {
            enabled: true,
            quality: "fast".into(),
            blend: Blend::new(blend).unwrap(),
            selector: SelectorMode::One,
            face_order: crate::face::FaceOrder::LargeSmall,
            frame_rate: 5.0,
            mask: Default::default(),
            color_transfer: Default::default(),
            mouth_mask: false,
            reference_distance: 0.3,
            map: None,
            source: None,
        }
    }

    #[test]
    fn a_flood_of_settings_never_blocks_and_the_newest_wins() {
        let mailbox = Mailbox::default();
        for i in 0..100_000 {
            mailbox.settings(&settings((i % 101) as f32));
        }
        mailbox.snapshot();
        mailbox.snapshot();
        let p = mailbox.take();
        assert_eq!(p.settings.unwrap().blend.percent(), (99_999 % 101) as f32);
        assert!(p.snapshot && !p.stall && p.models.is_none());
        assert_eq!(mailbox.coalesced(), 99_999 + 1);
        let again = mailbox.take();
        assert!(again.settings.is_none() && !again.snapshot, "taking empties the slots");
    }
}
