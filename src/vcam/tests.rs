//! The owner loop against a fake device (the hardware is the only fake).

use super::*;
use std::sync::{Arc, Mutex as StdMutex};

/// What the fake device saw, shared with the test.
#[derive(Default)]
struct Seen {
    opens: Vec<(u32, u32)>,
    frames: Vec<u8>,
}

struct FakeSink {
    size: (u32, u32),
    seen: Arc<StdMutex<Seen>>,
    /// Writes that succeed before the device "unplugs".
    writes_left: usize,
}

impl FrameSink for FakeSink {
    fn name(&self) -> String {
        "fake".into()
    }
    fn size(&self) -> (u32, u32) {
        self.size
    }
    fn write(&mut self, frame: &RgbImage) -> Result<(), SinkError> {
        if self.writes_left == 0 {
            return Err(SinkError::Write("fake: No such device".into()));
        }
        self.writes_left -= 1;
        self.seen.lock().unwrap().frames.push(frame.get_pixel(0, 0)[0]);
        Ok(())
    }
}

/// A device that fails to open `fail_opens` times, then takes
/// `writes_per_open` frames per open.
fn factory(seen: Arc<StdMutex<Seen>>, mut fail_opens: usize, writes_per_open: usize) -> SinkFactory {
    Box::new(move |w, h| {
        if fail_opens > 0 {
            fail_opens -= 1;
            return Err(SinkError::Open { path: "fake".into(), message: "No such file or directory".into() });
        }
        seen.lock().unwrap().opens.push((w, h));
        Ok(Box::new(FakeSink { size: (w, h), seen: seen.clone(), writes_left: writes_per_open }) as Box<dyn FrameSink>)
    })
}

fn frame(w: u32, value: u8) -> RgbImage {
    RgbImage::from_pixel(w, 2, image::Rgb([value, 0, 0]))
}

/// Offers `frames` one at a time, each once the loop has taken the last.
fn feed(vcam: &Vcam, frames: &[RgbImage]) {
    for f in frames {
        vcam.offer(f);
        while vcam.lock().frame.is_some() {
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(15));
    }
}

fn run(vcam: &Arc<Vcam>, open: SinkFactory) -> std::thread::JoinHandle<Vec<VcamEvent>> {
    let v = vcam.clone();
    std::thread::spawn(move || {
        let mut events = Vec::new();
        v.run(open, Backoff::new(Duration::from_millis(10), Duration::from_millis(40)), |e| events.push(e));
        events
    })
}

#[test]
fn frames_are_written_in_order_and_a_new_size_reopens_the_device() {
    let seen = Arc::new(StdMutex::new(Seen::default()));
    let vcam = Arc::new(Vcam::default());
    let owner = run(&vcam, factory(seen.clone(), 0, usize::MAX));
    feed(&vcam, &[frame(4, 1), frame(4, 2), frame(6, 3)]);
    vcam.close();
    assert!(owner.join().unwrap().is_empty(), "no loss");
    let seen = seen.lock().unwrap();
    assert_eq!(seen.frames, [1, 2, 3]);
    assert_eq!(seen.opens, [(4, 2), (6, 2)]);
    assert_eq!(vcam.written.load(Ordering::Relaxed), 3);
}

#[test]
fn a_missing_then_unplugged_device_is_reported_once_per_loss_and_reopened_with_backoff() {
    let seen = Arc::new(StdMutex::new(Seen::default()));
    let vcam = Arc::new(Vcam::default());
    // Two failed opens, then 2 frames per open: the third write unplugs it.
    let owner = run(&vcam, factory(seen.clone(), 2, 2));
    let frames: Vec<_> = (0..40).map(|i| frame(4, i)).collect();
    feed(&vcam, &frames);
    vcam.close();
    let events = owner.join().unwrap();
    let lost = events.iter().filter(|e| matches!(e, VcamEvent::Lost { .. })).count();
    let back = events.iter().filter(|e| matches!(e, VcamEvent::Back { .. })).count();
    assert!(lost >= 2 && (lost == back || lost == back + 1), "{events:?}");
    match &events[0] {
        VcamEvent::Lost { reason } => assert!(reason.contains("v4l2loopback"), "{reason}"),
        e => panic!("first event {e:?}"),
    }
    assert!(matches!(events[1], VcamEvent::Back { attempts: 2, .. }), "two failed opens: {events:?}");
    let seen = seen.lock().unwrap();
    assert!(seen.opens.len() >= 2, "reopened after the unplug: {:?}", seen.opens);
    assert!(seen.frames.windows(2).all(|w| w[0] < w[1]), "in order: {:?}", seen.frames);
}

#[test]
fn offering_never_waits_for_the_device_and_replaced_frames_are_counted() {
    let vcam = Vcam::default();
    let started = Instant::now();
    for i in 0..100 {
        vcam.offer(&frame(640, i));
    }
    assert!(started.elapsed() < Duration::from_secs(1), "{:?}", started.elapsed());
    assert_eq!(vcam.dropped.load(Ordering::Relaxed), 99, "nobody took them: all but the newest replaced");
    assert_eq!(vcam.take(Duration::ZERO).unwrap().get_pixel(0, 0)[0], 99, "the newest wins");
}
