//! The control loop's command inbox, shared by MQTT and HTTP. It is bounded
//! and never silent: a command that does not fit is refused as busy, and
//! the slow commands coalesce. At most one `reload` waits (a newer one adds
//! nothing), and the newest `source` replaces a waiting one, which is
//! refused as superseded. So a flood of slow commands cannot push the cheap
//! ones out. A payload over its feature's cap ([`PayloadCaps`]: 256 bytes,
//! or `pipeline.max_source_bytes` for `source`) is refused as it is
//! submitted, so what waits is bounded too: `capacity` small payloads and
//! one source. Commands leave in the order they came. Refusals go back
//! through the command's `reply` (HTTP) and to `on_refused` (the MQTT
//! `error` topic); the inbox itself does no IO.

use super::Incoming;
use crate::mqtt::{CommandError, PayloadCaps};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

type OnRefused = Box<dyn Fn(&CommandError) + Send + Sync>;

#[derive(Default)]
struct Waiting {
    /// Cheap commands, each with its arrival number.
    queue: VecDeque<(u64, Incoming)>,
    reload: Option<(u64, Incoming)>,
    source: Option<(u64, Incoming)>,
    next: u64,
}

pub struct Inbox {
    waiting: Mutex<Waiting>,
    ready: Condvar,
    capacity: usize,
    caps: Arc<PayloadCaps>,
    on_refused: OnRefused,
    busy: AtomicU64,
    coalesced: AtomicU64,
}

impl Inbox {
    /// Room for `capacity` cheap commands besides one reload and one
    /// source, each within `caps`.
    pub fn new(capacity: usize, caps: Arc<PayloadCaps>, on_refused: OnRefused) -> Inbox {
        Inbox {
            waiting: Mutex::default(),
            ready: Condvar::new(),
            capacity,
            caps,
            on_refused,
            busy: AtomicU64::new(0),
            coalesced: AtomicU64::new(0),
        }
    }

    /// The payload caps every submitted command is held to.
    pub fn caps(&self) -> &Arc<PayloadCaps> {
        &self.caps
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Waiting> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Commands refused because the queue was full.
    pub fn busy(&self) -> u64 {
        self.busy.load(Ordering::Relaxed)
    }

    /// `reload` and `source` commands a newer one of the same kind
    /// replaced (or, for reload, made needless).
    pub fn coalesced(&self) -> u64 {
        self.coalesced.load(Ordering::Relaxed)
    }

    fn refuse(&self, c: Incoming, reason: &str) {
        let e = CommandError { command: c.feature.chars().take(64).collect(), reason: reason.into() };
        if let Some(reply) = &c.reply {
            let _ = reply.try_send(Err(e.clone()));
        }
        (self.on_refused)(&e);
    }

    /// Takes `c` for the control loop (true), or refuses it at once
    /// (false; answered, never dropped silently).
    pub fn submit(&self, c: Incoming) -> bool {
        let cap = self.caps.of(&c.feature);
        if c.payload.len() > cap {
            let what = if c.feature == "source" { " (pipeline.max_source_bytes)" } else { "" };
            let reason = format!("the payload is {} bytes; the limit is {cap}{what}", c.payload.len());
            self.refuse(c, &reason);
            return false;
        }
        let mut w = self.lock();
        let n = w.next;
        w.next += 1;
        let (replaced, refused) = match c.feature.as_str() {
            "reload" if w.reload.is_some() => (None, Some((c, "a reload is already waiting; it rereads everything"))),
            "reload" => {
                w.reload = Some((n, c));
                (None, None)
            }
            "source" => (w.source.replace((n, c)).map(|(_, old)| old), None),
            _ if w.queue.len() >= self.capacity => {
                (None, Some((c, "busy: the command queue is full; send it again in a moment")))
            }
            _ => {
                w.queue.push_back((n, c));
                (None, None)
            }
        };
        drop(w);
        self.ready.notify_one();
        if let Some(old) = replaced {
            self.coalesced.fetch_add(1, Ordering::Relaxed);
            self.refuse(old, "superseded by a newer source command");
        }
        let taken = refused.is_none();
        if let Some((c, reason)) = refused {
            let counter = if c.feature == "reload" { &self.coalesced } else { &self.busy };
            counter.fetch_add(1, Ordering::Relaxed);
            self.refuse(c, reason);
        }
        taken
    }

    /// Whether no command waits.
    pub fn is_empty(&self) -> bool {
        let w = self.lock();
        w.queue.is_empty() && w.reload.is_none() && w.source.is_none()
    }

    /// The oldest waiting command, waiting up to `timeout` for one.
    pub fn recv_timeout(&self, timeout: Duration) -> Option<Incoming> {
        let mut w = self.lock();
        if w.queue.is_empty() && w.reload.is_none() && w.source.is_none() {
            w = self.ready.wait_timeout(w, timeout).unwrap_or_else(|p| p.into_inner()).0;
        }
        let order = |slot: &Option<(u64, Incoming)>| slot.as_ref().map_or(u64::MAX, |(n, _)| *n);
        let (q, r, s) = (w.queue.front().map_or(u64::MAX, |(n, _)| *n), order(&w.reload), order(&w.source));
        let first = q.min(r).min(s);
        if first == u64::MAX {
            return None;
        }
        let taken = if first == q {
            w.queue.pop_front()
        } else if first == r {
            w.reload.take()
        } else {
            w.source.take()
        };
        taken.map(|(_, c)| c)
    }
}

#[cfg(test)]
#[path = "inbox_tests.rs"]
mod tests;
