//! Capture on the shared camera-like sequence, with injected faults and the
//! latest-frame-wins hand-off.

use crate::util::shared;
use fusiond::capture::{CaptureError, Fault, FaultySource, Frame, FrameSource, LatestFrame, SequenceSource};
use std::sync::Arc;
use std::time::Duration;

#[test]
fn the_sequence_source_plays_all_frames_in_order_and_loops() {
    let mut src = SequenceSource::open(&shared("camera/two_people_pan"), 0.0).unwrap();
    let mut frame = Frame::empty();
    let mut first = None;
    for i in 0..61 {
        src.next_frame(&mut frame).unwrap();
        assert_eq!(frame.seq, i);
        assert_eq!(frame.image.dimensions(), (640, 480));
        if i == 0 {
            first = Some(frame.image.clone());
        }
    }
    assert_eq!(Some(frame.image), first, "frame 61 is frame 1 again");
}

#[test]
fn a_missing_or_empty_folder_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let err = SequenceSource::open(tmp.path(), 15.0).err().unwrap().to_string();
    assert!(err.contains("no .jpg or .png frames"), "{err}");
    assert!(SequenceSource::open(&tmp.path().join("nope"), 15.0).is_err());
}

#[test]
fn injected_faults_surface_in_order_and_frames_resume() {
    let seq = SequenceSource::open(&shared("camera/two_people_pan"), 0.0).unwrap();
    let script =
        [Some(Fault::Disconnect), Some(Fault::WouldBlock), None, Some(Fault::WrongFormat), Some(Fault::Stall), None];
    let mut src = FaultySource::new(seq, script);
    let mut frame = Frame::empty();
    assert!(matches!(src.next_frame(&mut frame), Err(CaptureError::Disconnected(_))));
    assert!(matches!(src.next_frame(&mut frame), Err(CaptureError::WouldBlock)));
    src.next_frame(&mut frame).unwrap();
    assert_eq!(frame.seq, 0);
    let err = src.next_frame(&mut frame).unwrap_err();
    assert!(err.to_string().contains("camera.formats"), "{err}");
    assert!(matches!(src.next_frame(&mut frame), Err(CaptureError::Stalled(_))));
    src.next_frame(&mut frame).unwrap();
    assert_eq!(frame.seq, 1, "faults consume no frames");
}

#[test]
fn a_slow_consumer_always_gets_the_newest_frame_and_drops_are_counted() {
    let latest = Arc::new(LatestFrame::new());
    let (first_taken, wait_first) = std::sync::mpsc::channel::<()>();
    let producer = {
        let latest = latest.clone();
        std::thread::spawn(move || {
            let mut src = SequenceSource::open(&shared("camera/two_people_pan"), 0.0).unwrap();
            let mut buf = Frame::empty();
            for i in 0..60 {
                src.next_frame(&mut buf).unwrap();
                buf = latest.publish(buf);
                if i == 0 {
                    wait_first.recv().unwrap();
                }
            }
            latest.close();
        })
    };
    // Processing is "slow": one frame is taken, then capture runs to the end
    // before the next take.
    let first = latest.take(Duration::from_secs(30)).expect("a first frame");
    assert_eq!(first.seq, 0);
    first_taken.send(()).unwrap();
    latest.recycle(first.clone());
    producer.join().unwrap();
    let last = latest.take(Duration::from_secs(30)).expect("the newest frame");
    assert!(last.seq > first.seq);
    assert_eq!(last.seq, 59, "the newest frame wins");
    assert!(latest.take(Duration::ZERO).is_none(), "closed and drained");
    assert_eq!(latest.dropped(), 58, "every frame not processed is counted as dropped");
}
