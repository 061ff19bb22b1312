//! How large a command's payload may be, per feature: checked when a
//! command is submitted (`control::Inbox`), before an HTTP body is read, and
//! as MQTT's packet limit. `source` takes up to `pipeline.max_source_bytes`
//! (an image), every other feature [`PayloadCaps::TEXT`] bytes. One value
//! shared by MQTT, HTTP and the inbox, so a reload that changes
//! `pipeline.max_source_bytes` moves every limit at once.

use std::sync::atomic::{AtomicUsize, Ordering};

#[derive(Debug)]
pub struct PayloadCaps {
    source: AtomicUsize,
}

impl PayloadCaps {
    /// The largest payload of every feature but `source`.
    pub const TEXT: usize = 256;

    pub fn new(max_source_bytes: usize) -> PayloadCaps {
        PayloadCaps { source: AtomicUsize::new(max_source_bytes) }
    }

    /// Sets `pipeline.max_source_bytes` (a reload).
    pub fn set_source(&self, max_source_bytes: usize) {
        self.source.store(max_source_bytes, Ordering::Relaxed);
    }

    /// The largest payload `feature` takes.
    pub fn of(&self, feature: &str) -> usize {
        match feature {
            "source" => self.source.load(Ordering::Relaxed),
            _ => Self::TEXT,
        }
    }

    /// The largest MQTT packet taken: twice the largest payload plus room
    /// for the topic, so that an image a little over the limit still
    /// arrives and is refused with a reason instead of cutting the session.
    pub fn packet(&self) -> usize {
        self.of("source").max(Self::TEXT).saturating_mul(2).saturating_add(64 * 1024)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_follows_the_setting_and_the_rest_stay_small() {
        let caps = PayloadCaps::new(1000);
        assert_eq!((caps.of("source"), caps.of("blend"), caps.of("reload")), (1000, 256, 256));
        assert_eq!(caps.packet(), 2000 + 65536);
        caps.set_source(5000);
        assert_eq!((caps.of("source"), caps.packet()), (5000, 10000 + 65536));
    }
}
