use super::Frame;
use std::sync::{Condvar, Mutex};
use std::time::Duration;

#[derive(Default)]
struct Slot {
    frame: Option<Frame>,
    /// A spent buffer handed back by the consumer, for the producer to reuse.
    spare: Option<Frame>,
    dropped: u64,
    closed: bool,
}

/// A one-frame mailbox where the newest frame wins: capture never waits for
/// processing, a frame replaced before it was taken counts as dropped, and
/// memory stays bounded at three frames (being filled, waiting, processed).
#[derive(Default)]
pub struct LatestFrame {
    slot: Mutex<Slot>,
    ready: Condvar,
}

impl LatestFrame {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Publishes `frame` and returns a buffer to capture the next one into.
    pub fn publish(&self, frame: Frame) -> Frame {
        let mut s = self.lock();
        let replaced = s.frame.replace(frame);
        if replaced.is_some() {
            s.dropped += 1;
        }
        let recycled = replaced.or_else(|| s.spare.take());
        drop(s);
        self.ready.notify_one();
        recycled.unwrap_or_else(Frame::empty)
    }

    /// Waits up to `timeout` for a frame; `None` on timeout or once closed
    /// and drained.
    pub fn take(&self, timeout: Duration) -> Option<Frame> {
        let s = self.lock();
        let (mut s, _) = self
            .ready
            .wait_timeout_while(s, timeout, |s| s.frame.is_none() && !s.closed)
            .unwrap_or_else(|p| p.into_inner());
        s.frame.take()
    }

    /// Hands a processed frame's buffer back for reuse.
    pub fn recycle(&self, frame: Frame) {
        self.lock().spare = Some(frame);
    }

    /// Closed and drained: no frame will come any more.
    pub fn is_closed(&self) -> bool {
        let s = self.lock();
        s.closed && s.frame.is_none()
    }

    pub fn dropped(&self) -> u64 {
        self.lock().dropped
    }

    /// Wakes waiters; `take` returns `None` once the last frame is gone.
    pub fn close(&self) {
        self.lock().closed = true;
        self.ready.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(seq: u64) -> Frame {
        Frame { seq, ..Frame::empty() }
    }

    #[test]
    fn the_newest_frame_wins_and_replaced_frames_count_as_dropped() {
        let l = LatestFrame::new();
        l.publish(frame(1));
        let back = l.publish(frame(2));
        assert_eq!(back.seq, 1, "the replaced frame's buffer comes back for reuse");
        l.publish(frame(3));
        assert_eq!(l.dropped(), 2);
        assert_eq!(l.take(Duration::ZERO).unwrap().seq, 3);
        assert!(l.take(Duration::from_millis(1)).is_none());
    }

    #[test]
    fn recycled_buffers_return_to_the_producer() {
        let l = LatestFrame::new();
        l.publish(frame(1));
        let f = l.take(Duration::ZERO).unwrap();
        l.recycle(f);
        assert_eq!(l.publish(frame(2)).seq, 1);
        assert_eq!(l.dropped(), 0);
    }

    #[test]
    fn close_wakes_a_waiting_consumer() {
        let l = std::sync::Arc::new(LatestFrame::new());
        let waiter = {
            let l = l.clone();
            std::thread::spawn(move || l.take(Duration::from_secs(30)))
        };
        l.close();
        assert!(waiter.join().unwrap().is_none());
    }
}
