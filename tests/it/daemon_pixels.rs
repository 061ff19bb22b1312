//! What the daemon publishes, looked at pixel by pixel: a camera that shows
//! the same frame over and over, so every published frame can be compared
//! with its input. The colour-painting contract swapper changes the swapped
//! face and nothing far from it; `blend`, `mask_padding`, `enabled` and
//! `frame_rate` do what they say.

use crate::harness::{free_port, online, serial, slow, write_config, Daemon, Mosquitto, Watcher, T};
use crate::util::shared;
use image::RgbImage;
use std::time::{Duration, Instant};

/// Mean absolute difference per channel over the pixels `keep` selects.
fn mad(a: &RgbImage, b: &RgbImage, keep: impl Fn(u32, u32) -> bool) -> f64 {
    let (mut sum, mut n) = (0u64, 0u64);
    for (x, y, p) in a.enumerate_pixels() {
        if keep(x, y) {
            let q = b.get_pixel(x, y);
            sum += (0..3).map(|c| (p[c] as i64 - q[c] as i64).unsigned_abs()).sum::<u64>();
            n += 3;
        }
    }
    sum as f64 / n.max(1) as f64
}

/// `b` grown by `k` times its size on each side.
fn grown(b: [f32; 4], k: f32) -> [f32; 4] {
    let (w, h) = (b[2] - b[0], b[3] - b[1]);
    [b[0] - k * w, b[1] - k * h, b[2] + k * w, b[3] + k * h]
}

fn inside(b: [f32; 4], x: u32, y: u32) -> bool {
    let (x, y) = (x as f32, y as f32);
    x >= b[0] && x < b[2] && y >= b[1] && y < b[3]
}

fn next_frame(w: &Watcher) -> RgbImage {
    // The frame in flight when a command lands may predate it: take the second.
    let mut img = None;
    for _ in 0..2 {
        let from = w.count();
        let m = w.wait_from(from, "frame", *T, |_| true);
        img = Some(image::load_from_memory(&m.payload).expect("frames are JPEG").to_rgb8());
    }
    img.unwrap()
}

fn applied(w: &Watcher, feature: &str, value: &str) {
    let from = w.count();
    w.send(feature, value.as_bytes().to_vec());
    w.wait_from(from, &format!("{feature}/state"), *T, |m| m.text() == value);
}

#[test]
fn the_swap_changes_the_swapped_face_only_and_blend_mask_enabled_and_frame_rate_do_what_they_say() {
    let _s = serial();
    let broker = Mosquitto::start(free_port());
    let dir = tempfile::tempdir().unwrap();
    let still = dir.path().join("still");
    std::fs::create_dir(&still).unwrap();
    std::fs::copy(shared("camera/two_people_pan/frame_030.jpg"), still.join("frame.jpg")).unwrap();
    let input = image::open(still.join("frame.jpg")).unwrap().to_rgb8();
    // The invisible mark moves every pixel by 2 to 3 levels on purpose
    // (tests/it/mark.rs checks it); here only the pipeline's changes count.
    let config = write_config(dir.path(), broker.port, "pixels", "\n[output.watermark]\nenabled = false\n");
    let d = dir.path().join("conf.d");
    std::fs::create_dir(&d).unwrap();
    // One tier, with the colour-painting swapper and a landmarker (for the
    // mouth mask).
    let dropin = format!(
        "[models]\nstart_tier = \"quality\"\n[camera]\nsamples = [{:?}]\n[[tier]]\nname = \"quality\"\n\
         models = [\"yunet_2023mar\", \"arcface_fr\", \"latent_color_swapper\", \"landmark68_fr\"]\n",
        still.display().to_string()
    );
    std::fs::write(d.join("10-still.toml"), dropin).unwrap();
    let w = Watcher::start(broker.port, "fusiond/pixels");
    let _d = Daemon::spawn(&config);
    online(&w);

    let faces = w.wait("faces", *T, |m| m.json()["faces"].as_array().is_some_and(|f| f.len() == 2)).json();
    let boxes: Vec<[f32; 4]> =
        faces["faces"].as_array().unwrap().iter().map(|f| serde_json::from_value(f["box"].clone()).unwrap()).collect();
    let swapped: Vec<[f32; 4]> = faces["faces"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["swapped"] == true)
        .map(|f| serde_json::from_value(f["box"].clone()).unwrap())
        .collect();
    assert_eq!(swapped.len(), 1, "selector one swaps one face: {faces}");
    let core = grown(swapped[0], -0.25);
    let far = |x, y| boxes.iter().all(|b| !inside(grown(*b, 1.0), x, y));

    let b = swapped[0];
    let (bw, bh) = (b[2] - b[0], b[3] - b[1]);
    let mouth = [b[0] + 0.3 * bw, b[1] + 0.72 * bh, b[0] + 0.7 * bw, b[1] + 0.88 * bh];
    let out = next_frame(&w);
    let (face, background) = (mad(&out, &input, |x, y| inside(core, x, y)), mad(&out, &input, far));
    let mouth_swapped = mad(&out, &input, |x, y| inside(mouth, x, y));
    eprintln!("swapped: face {face:.1}, background {background:.2} levels");
    assert!(face > 8.0, "the swapped face did not change: {face:.1}");
    assert!(background < 3.0, "the background changed: {background:.2}");

    applied(&w, "blend", "0");
    let face = mad(&next_frame(&w), &input, |x, y| inside(core, x, y));
    assert!(face < 3.0, "blend 0 leaves the face as it was: {face:.1}");
    applied(&w, "blend", "100");
    let face = mad(&next_frame(&w), &input, |x, y| inside(core, x, y));
    assert!(face > 8.0, "blend 100 swaps again: {face:.1}");
    // A mask padded away on every side pastes nothing.
    applied(&w, "mask_padding", "100,100,100,100");
    let face = mad(&next_frame(&w), &input, |x, y| inside(core, x, y));
    assert!(face < 3.0, "mask_padding 100 pastes nothing: {face:.1}");
    applied(&w, "mask_padding", "0,0,0,0");

    // The mouth mask keeps the mouth: the face changes less, and it is timed.
    applied(&w, "mouth_mask", "ON");
    let from = w.count();
    let timed = w.wait_from(from, "faces", *T, |m| m.json()["timings_ms"]["mouth"].as_f64().is_some_and(|t| t > 0.0));
    assert!(timed.json()["faces"].as_array().unwrap().iter().any(|f| f["swapped"] == true));
    let kept = mad(&next_frame(&w), &input, |x, y| inside(mouth, x, y));
    eprintln!("mouth area: {mouth_swapped:.1} levels swapped, {kept:.1} with the mouth mask");
    assert!(kept < 0.8 * mouth_swapped, "the mouth is kept: {kept:.1} vs {mouth_swapped:.1} levels");
    applied(&w, "mouth_mask", "OFF");

    applied(&w, "enabled", "OFF");
    let all = mad(&next_frame(&w), &input, |_, _| true);
    assert!(all < 3.0, "OFF passes frames through: {all:.2}");
    let from = w.count();
    std::thread::sleep(slow(Duration::from_millis(1500)));
    assert!(!w.all()[from..].iter().any(|m| m.topic.ends_with("/faces")), "OFF stops faces");
    applied(&w, "enabled", "ON");

    applied(&w, "frame_rate", "2");
    next_frame(&w);
    let from = w.count();
    let start = Instant::now();
    std::thread::sleep(slow(Duration::from_secs(4)));
    let secs = start.elapsed().as_secs_f64();
    let window = &w.all()[from..];
    let frames = window.iter().filter(|m| m.topic.ends_with("/frame")).count() as f64;
    // One faces message per processed frame: a box slower than 2 fps (or
    // emulation) publishes every frame it processes.
    let processed = window.iter().filter(|m| m.topic.ends_with("/faces")).count() as f64;
    let expected = (2.0 * secs).min(processed);
    eprintln!("frame_rate 2: {frames} frames, {processed} processed in {secs:.1} s");
    assert!(frames / secs <= 2.6, "frame_rate 2 published {:.2} frames/s", frames / secs);
    assert!(frames >= 0.7 * expected - 1.0, "frame_rate 2 published {frames} frames of {expected:.1} expected");
}
