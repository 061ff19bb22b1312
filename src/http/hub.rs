//! The hand-off from the worker's one encoder to the HTTP clients: the
//! newest JPEG and a sequence number, under a condvar. The worker never
//! waits on it; each stream client reads the newest frame when it is ready
//! for one, so a slow client skips frames (counted) and slows no one.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

#[derive(Default)]
struct Slot {
    jpeg: Option<Arc<Vec<u8>>>,
    published: Option<Instant>,
    seq: u64,
    snapshot: Option<Arc<Vec<u8>>>,
    snapshot_seq: u64,
    want_snapshot: bool,
    closed: bool,
}

/// Counters `stats` and `/metrics` report.
#[derive(Debug, Default)]
pub struct HubCounters {
    /// Frames a stream client never sent because a newer one replaced it.
    pub dropped_frames: AtomicU64,
    pub frames_sent: AtomicU64,
    /// Faces in the newest processed frame (the worker sets it).
    pub faces_in_view: AtomicUsize,
}

pub struct FrameHub {
    slot: Mutex<Slot>,
    ready: Condvar,
    clients: AtomicUsize,
    /// Minimum time between stream frames (`http.stream_fps`).
    every: Duration,
    last: Mutex<Option<Instant>>,
    pub counters: HubCounters,
}

impl FrameHub {
    pub fn new(stream_fps: f32) -> FrameHub {
        FrameHub {
            slot: Mutex::default(),
            ready: Condvar::new(),
            clients: AtomicUsize::new(0),
            every: Duration::from_nanos((1e9 / f64::from(stream_fps.max(0.1))).round() as u64),
            last: Mutex::new(None),
            counters: HubCounters::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the worker should encode this frame for the stream: a client
    /// is watching and `http.stream_fps` allows another frame.
    pub fn stream_due(&self, now: Instant) -> bool {
        if self.clients.load(Ordering::Relaxed) == 0 {
            return false;
        }
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        let due = last.is_none_or(|t| now.saturating_duration_since(t) >= self.every);
        if due {
            *last = Some(now);
        }
        due
    }

    /// Whether an HTTP client waits for a snapshot-quality frame.
    pub fn snapshot_wanted(&self) -> bool {
        self.lock().want_snapshot
    }

    /// A frame the worker encoded (for MQTT, the stream or both).
    pub fn publish(&self, jpeg: Arc<Vec<u8>>) {
        let mut s = self.lock();
        s.jpeg = Some(jpeg);
        s.published = Some(Instant::now());
        s.seq += 1;
        drop(s);
        self.ready.notify_all();
    }

    /// A snapshot-quality frame for the clients that asked for one.
    pub fn publish_snapshot(&self, jpeg: Arc<Vec<u8>>) {
        let mut s = self.lock();
        s.snapshot = Some(jpeg);
        s.snapshot_seq += 1;
        s.want_snapshot = false;
        drop(s);
        self.ready.notify_all();
    }

    /// Wakes every waiting client for good (the daemon stops).
    pub fn close(&self) {
        self.lock().closed = true;
        self.ready.notify_all();
    }

    pub fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// The first frame after `seen`, waiting up to `timeout`; `None` on a
    /// timeout or when closed. Frames between `seen` and it are counted as
    /// dropped for this client.
    pub fn next_after(&self, seen: u64, timeout: Duration) -> Option<(u64, Arc<Vec<u8>>)> {
        let deadline = Instant::now() + timeout;
        let mut s = self.lock();
        while s.seq <= seen && !s.closed {
            let left = deadline.checked_duration_since(Instant::now())?;
            s = self.ready.wait_timeout(s, left).unwrap_or_else(|p| p.into_inner()).0;
        }
        if s.closed {
            return None;
        }
        if seen > 0 && s.seq > seen + 1 {
            self.counters.dropped_frames.fetch_add(s.seq - seen - 1, Ordering::Relaxed);
        }
        self.counters.frames_sent.fetch_add(1, Ordering::Relaxed);
        Some((s.seq, s.jpeg.clone()?))
    }

    /// Asks the worker for a snapshot-quality frame and waits up to
    /// `timeout` for it; a box too slow for that (a frame takes longer)
    /// gets the newest frame encoded within `fresh` instead.
    pub fn snapshot(&self, timeout: Duration, fresh: Duration) -> Option<Arc<Vec<u8>>> {
        let deadline = Instant::now() + timeout;
        let mut s = self.lock();
        let seen = s.snapshot_seq;
        s.want_snapshot = true;
        while s.snapshot_seq == seen && !s.closed {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else { break };
            s = self.ready.wait_timeout(s, left).unwrap_or_else(|p| p.into_inner()).0;
        }
        if s.snapshot_seq != seen {
            return s.snapshot.clone();
        }
        s.jpeg.clone().filter(|_| s.published.is_some_and(|t| t.elapsed() <= fresh))
    }

    /// A stream client for as long as the guard lives.
    pub fn watch(self: &Arc<Self>) -> Watching {
        self.clients.fetch_add(1, Ordering::Relaxed);
        Watching(self.clone())
    }

    pub fn clients(&self) -> usize {
        self.clients.load(Ordering::Relaxed)
    }
}

pub struct Watching(Arc<FrameHub>);

impl Drop for Watching {
    fn drop(&mut self) {
        self.0.clients.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slow_client_gets_the_newest_frame_and_the_skipped_ones_are_counted() {
        let hub = Arc::new(FrameHub::new(10.0));
        let _w = hub.watch();
        hub.publish(Arc::new(vec![1]));
        let (seq, f) = hub.next_after(0, Duration::from_millis(10)).unwrap();
        assert_eq!((seq, f.as_slice()), (1, &[1u8][..]));
        for n in 2..=5 {
            hub.publish(Arc::new(vec![n]));
        }
        let (seq, f) = hub.next_after(seq, Duration::from_millis(10)).unwrap();
        assert_eq!((seq, f.as_slice()), (5, &[5u8][..]));
        assert_eq!(hub.counters.dropped_frames.load(Ordering::Relaxed), 3);
        assert!(hub.next_after(seq, Duration::from_millis(10)).is_none(), "no new frame: a timeout");
    }

    #[test]
    fn the_stream_is_due_only_while_watched_and_at_its_rate() {
        let hub = Arc::new(FrameHub::new(10.0));
        let t = Instant::now();
        assert!(!hub.stream_due(t), "nobody watches");
        let w = hub.watch();
        assert!(hub.stream_due(t));
        assert!(!hub.stream_due(t + Duration::from_millis(50)));
        assert!(hub.stream_due(t + Duration::from_millis(100)));
        drop(w);
        assert_eq!(hub.clients(), 0);
    }

    #[test]
    fn a_snapshot_request_is_answered_by_the_next_snapshot_frame() {
        let hub = Arc::new(FrameHub::new(10.0));
        let h = hub.clone();
        let asker = std::thread::spawn(move || h.snapshot(Duration::from_secs(5), Duration::ZERO));
        while !hub.snapshot_wanted() {
            std::thread::sleep(Duration::from_millis(1));
        }
        hub.publish_snapshot(Arc::new(vec![9]));
        assert_eq!(asker.join().unwrap().unwrap().as_slice(), &[9]);
        assert!(!hub.snapshot_wanted());
    }

    #[test]
    fn a_snapshot_nobody_answers_falls_back_to_a_fresh_frame_or_nothing() {
        let hub = FrameHub::new(10.0);
        assert!(hub.snapshot(Duration::from_millis(10), Duration::from_secs(10)).is_none(), "no frame at all");
        hub.publish(Arc::new(vec![7]));
        let got = hub.snapshot(Duration::from_millis(10), Duration::from_secs(10)).unwrap();
        assert_eq!(got.as_slice(), &[7]);
        std::thread::sleep(Duration::from_millis(20));
        assert!(hub.snapshot(Duration::from_millis(10), Duration::from_millis(5)).is_none(), "too old");
    }
}
