//! The bounded queue between the daemon and the MQTT publisher. Pushing
//! never blocks: a full queue drops the oldest message, and only the newest
//! frame waits.

use rumqttc::QoS;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};

/// One message to publish.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub topic: String,
    pub payload: Vec<u8>,
    pub qos: QoS,
    pub retain: bool,
}

impl Message {
    /// QoS 1, not retained: events, errors, stats, faces.
    pub fn event(topic: String, payload: impl Into<Vec<u8>>) -> Message {
        Message { topic, payload: payload.into(), qos: QoS::AtLeastOnce, retain: false }
    }

    /// QoS 0, not retained: per-frame messages that the next one replaces.
    pub fn volatile(topic: String, payload: impl Into<Vec<u8>>) -> Message {
        Message { topic, payload: payload.into(), qos: QoS::AtMostOnce, retain: false }
    }

    /// QoS 1, retained: states and availability.
    pub fn retained(topic: String, payload: impl Into<Vec<u8>>) -> Message {
        Message { topic, payload: payload.into(), qos: QoS::AtLeastOnce, retain: true }
    }
}

pub(super) enum Next {
    Connected,
    Message(Message),
    Frame(Message),
    Closed,
}

#[derive(Default)]
struct Lanes {
    messages: VecDeque<Message>,
    /// Only the newest frame waits; an older one is dropped.
    frame: Option<Message>,
    connected: bool,
    closed: bool,
}

/// Counters of what the session dropped or did.
#[derive(Debug, Default)]
pub struct LinkCounters {
    pub dropped_frames: AtomicU64,
    pub dropped_messages: AtomicU64,
    pub connects: AtomicU64,
    pub connected: AtomicBool,
}

/// The bounded queue between the daemon and the publisher. Pushing never
/// blocks: a full queue drops the oldest message, and a frame waiting when
/// the next arrives is dropped.
pub struct Outbox {
    lanes: Mutex<Lanes>,
    ready: Condvar,
    capacity: usize,
    pub counters: LinkCounters,
    /// Sees every message pushed (frames aside), e.g. the live page's feed.
    observer: OnceLock<Observer>,
}

type Observer = Box<dyn Fn(&Message) + Send + Sync>;

impl Outbox {
    pub fn new(capacity: usize) -> Outbox {
        Outbox {
            lanes: Mutex::default(),
            ready: Condvar::new(),
            capacity: capacity.max(1),
            counters: Default::default(),
            observer: OnceLock::new(),
        }
    }

    /// Has `f` see every message pushed from now on (not frames); it must
    /// not block. Only the first observer set is kept.
    pub fn observe(&self, f: impl Fn(&Message) + Send + Sync + 'static) {
        let _ = self.observer.set(Box::new(f));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Lanes> {
        self.lanes.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn push(&self, message: Message) {
        if let Some(f) = self.observer.get() {
            f(&message);
        }
        let mut l = self.lock();
        if l.messages.len() >= self.capacity {
            l.messages.pop_front();
            self.counters.dropped_messages.fetch_add(1, Ordering::Relaxed);
        }
        l.messages.push_back(message);
        drop(l);
        self.ready.notify_one();
    }

    /// Queues a frame (QoS 0), replacing one still waiting.
    pub fn push_frame(&self, topic: String, jpeg: Vec<u8>) {
        let m = Message::volatile(topic, jpeg);
        if self.lock().frame.replace(m).is_some() {
            self.counters.dropped_frames.fetch_add(1, Ordering::Relaxed);
        }
        self.ready.notify_one();
    }

    /// Makes the publisher resubscribe and republish every retained
    /// message, as after a reconnect.
    pub(super) fn connected(&self) {
        self.lock().connected = true;
        self.ready.notify_one();
    }

    /// Lets the publisher finish what is queued and stop.
    pub fn close(&self) {
        self.lock().closed = true;
        self.ready.notify_all();
    }

    /// Messages queued, frames not counted.
    pub fn len(&self) -> usize {
        self.lock().messages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The reconnect marker first, then messages in order, then the frame.
    pub(super) fn next(&self) -> Next {
        let mut l = self.lock();
        loop {
            if std::mem::take(&mut l.connected) {
                return Next::Connected;
            }
            if let Some(m) = l.messages.pop_front() {
                return Next::Message(m);
            }
            if let Some(f) = l.frame.take() {
                return Next::Frame(f);
            }
            if l.closed {
                return Next::Closed;
            }
            l = self.ready.wait(l).unwrap_or_else(|p| p.into_inner());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(n: u8) -> Message {
        Message::event("t".into(), vec![n])
    }

    #[test]
    fn a_full_outbox_drops_the_oldest_message_and_never_blocks() {
        let o = Outbox::new(2);
        for n in 0..5 {
            o.push(msg(n));
        }
        assert_eq!(o.counters.dropped_messages.load(Ordering::Relaxed), 3);
        assert!(matches!(o.next(), Next::Message(m) if m.payload == [3]));
    }

    #[test]
    fn messages_go_before_frames_and_only_the_newest_frame_waits() {
        let o = Outbox::new(8);
        o.push_frame("f".into(), vec![1]);
        o.push_frame("f".into(), vec![2]);
        o.push(msg(9));
        o.connected();
        assert!(matches!(o.next(), Next::Connected));
        assert!(matches!(o.next(), Next::Message(m) if m.payload == [9]));
        assert!(matches!(o.next(), Next::Frame(f) if f.payload == [2]));
        assert_eq!(o.counters.dropped_frames.load(Ordering::Relaxed), 1);
        o.close();
        assert!(matches!(o.next(), Next::Closed));
    }
}
