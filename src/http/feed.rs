//! What the live page watches besides the frames: the newest `faces`
//! message and the recent `event` and `error` messages, as they go out on
//! MQTT (the outbox hands each to [`Feed::offer`]). `/api/events` streams
//! them as server-sent events; `/api/state` carries the recent ones.
//! Offering never waits on a reader: a reader that falls behind skips to
//! the newest faces and to the events still kept.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Events and errors kept for `/api/state` and for readers that fall behind.
pub const KEPT: usize = 50;

/// One `event` or `error` message.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Logged {
    pub seq: u64,
    /// `event` or `error`.
    pub kind: &'static str,
    /// Milliseconds since the Unix epoch, when the daemon sent it.
    pub at_ms: u128,
    /// The message's JSON, as on MQTT.
    pub payload: serde_json::Value,
}

/// What a reader gets next.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    Faces(Arc<String>),
    Logged(Logged),
}

#[derive(Default)]
struct Slot {
    faces: Option<Arc<String>>,
    faces_seq: u64,
    logged: VecDeque<Logged>,
    logged_seq: u64,
    closed: bool,
}

/// A reader's place: the last faces and the last event it got.
#[derive(Debug, Clone, Copy, Default)]
pub struct Cursor {
    faces: u64,
    logged: u64,
}

/// The topics the feed takes from the outbox.
#[derive(Debug, Clone)]
pub struct FeedTopics {
    pub faces: String,
    pub event: String,
    pub error: String,
}

pub struct Feed {
    slot: Mutex<Slot>,
    ready: Condvar,
}

impl Default for Feed {
    fn default() -> Self {
        Feed { slot: Mutex::default(), ready: Condvar::new() }
    }
}

impl Feed {
    fn lock(&self) -> std::sync::MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes a message bound for MQTT when it is `faces`, `event` or
    /// `error`; any other is ignored.
    pub fn offer(&self, topics: &FeedTopics, topic: &str, payload: &[u8]) {
        let kind = match topic {
            t if t == topics.faces => None,
            t if t == topics.event => Some("event"),
            t if t == topics.error => Some("error"),
            _ => return,
        };
        let mut s = self.lock();
        match kind {
            None => {
                s.faces = Some(Arc::new(String::from_utf8_lossy(payload).into_owned()));
                s.faces_seq += 1;
            }
            Some(kind) => {
                let payload = serde_json::from_slice(payload)
                    .unwrap_or_else(|_| serde_json::Value::String(String::from_utf8_lossy(payload).into_owned()));
                s.logged_seq += 1;
                let at_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis());
                let logged = Logged { seq: s.logged_seq, kind, at_ms, payload };
                if s.logged.len() == KEPT {
                    s.logged.pop_front();
                }
                s.logged.push_back(logged);
            }
        }
        drop(s);
        self.ready.notify_all();
    }

    /// The kept events and errors, oldest first.
    pub fn recent(&self) -> Vec<Logged> {
        self.lock().logged.iter().cloned().collect()
    }

    /// A cursor at the feed's present: the next items are new ones.
    pub fn now(&self) -> Cursor {
        let s = self.lock();
        Cursor { faces: s.faces_seq, logged: s.logged_seq }
    }

    /// The next item after `at`, events first, waiting up to `timeout`;
    /// `None` on a timeout or when closed.
    pub fn next(&self, at: &mut Cursor, timeout: Duration) -> Option<Item> {
        let deadline = Instant::now() + timeout;
        let mut s = self.lock();
        loop {
            if s.closed {
                return None;
            }
            if let Some(l) = s.logged.iter().find(|l| l.seq > at.logged) {
                at.logged = l.seq;
                return Some(Item::Logged(l.clone()));
            }
            at.logged = s.logged_seq;
            if s.faces_seq > at.faces {
                at.faces = s.faces_seq;
                return s.faces.clone().map(Item::Faces);
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            s = self.ready.wait_timeout(s, left).unwrap_or_else(|p| p.into_inner()).0;
        }
    }

    /// Wakes every reader for good (the daemon stops).
    pub fn close(&self) {
        self.lock().closed = true;
        self.ready.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topics() -> FeedTopics {
        FeedTopics { faces: "b/faces".into(), event: "b/event".into(), error: "b/error".into() }
    }

    #[test]
    fn readers_get_events_in_order_then_the_newest_faces_and_the_kept_events_are_bounded() {
        let (feed, t) = (Feed::default(), topics());
        let mut at = feed.now();
        feed.offer(&t, "b/faces", b"{\"seq\":1}");
        feed.offer(&t, "b/faces", b"{\"seq\":2}");
        feed.offer(&t, "b/event", b"{\"event\":\"reloaded\"}");
        feed.offer(&t, "b/error", b"not json");
        feed.offer(&t, "b/stats", b"{}");
        let next = |at: &mut Cursor| feed.next(at, Duration::from_millis(10));
        match next(&mut at) {
            Some(Item::Logged(l)) => assert_eq!((l.kind, l.payload["event"].as_str()), ("event", Some("reloaded"))),
            other => panic!("{other:?}"),
        }
        match next(&mut at) {
            Some(Item::Logged(l)) => assert_eq!((l.kind, l.payload.as_str()), ("error", Some("not json"))),
            other => panic!("{other:?}"),
        }
        assert_eq!(next(&mut at), Some(Item::Faces(Arc::new("{\"seq\":2}".into()))), "only the newest faces");
        assert_eq!(next(&mut at), None, "nothing new: a timeout");
        for i in 0..2 * KEPT {
            feed.offer(&t, "b/event", format!("{{\"n\":{i}}}").as_bytes());
        }
        let recent = feed.recent();
        assert_eq!(recent.len(), KEPT);
        assert_eq!(recent[0].payload["n"], KEPT as u64, "the oldest dropped first");
        feed.close();
        assert_eq!(feed.next(&mut Cursor::default(), Duration::from_secs(5)), None, "closed: at once");
    }
}
