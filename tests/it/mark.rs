//! The invisible mark on real pictures: marked at 640×480, then put through
//! JPEG at quality 50, a rescale to half size and back, H.264 at CRF 28
//! (ffmpeg's libx264) and a 10 % crop; every payload bit must come back in
//! ≥ 95 % of the cases, the PSNR stays ≥ 40 dB, and unmarked pictures (the
//! shared photos, camera frames and video frames) are called marked in
//! ≤ 1 % of the cases.

use crate::util::shared;
use fusiond::mark::detect::{Folded, Reading};
use fusiond::mark::Marker;
use image::imageops::{crop_imm, resize, FilterType};
use image::RgbImage;
use std::process::Command;
use std::time::{Duration, UNIX_EPOCH};

const PHOTOS: [&str; 8] = [
    "fr_biden.jpg",
    "fr_obama.jpg",
    "fr_obama2.jpg",
    "fr_obama_and_biden.jpg",
    "fr_two_people.jpg",
    "pexels-sam-lion-5709614.jpg",
    "pexels_blazeface_Test3.jpg",
    "skimage_astronaut.png",
];

fn photo(name: &str) -> RgbImage {
    let img = image::open(shared(&format!("images/{name}"))).unwrap().to_rgb8();
    resize(&img, 640, 480, FilterType::Triangle)
}

fn read(img: &RgbImage) -> Reading {
    let mut f = Folded::default();
    f.add(img);
    f.read()
}

fn jpeg(img: &RgbImage, quality: u8) -> RgbImage {
    let mut out = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, quality).encode_image(img).unwrap();
    image::load_from_memory(&out).unwrap().to_rgb8()
}

/// One frame through libx264 at CRF 28 and back.
fn h264(img: &RgbImage, dir: &std::path::Path) -> RgbImage {
    let (png, mp4, back) = (dir.join("in.png"), dir.join("out.mp4"), dir.join("back.png"));
    img.save(&png).unwrap();
    let run = |args: &[&str]| {
        let out = Command::new("ffmpeg")
            .args(["-v", "error", "-y"])
            .args(args)
            .output()
            .expect("ffmpeg (apt install ffmpeg)");
        assert!(out.status.success(), "ffmpeg: {}", String::from_utf8_lossy(&out.stderr));
    };
    let p = |p: &std::path::Path| p.to_str().unwrap().to_string();
    run(&[
        "-loop",
        "1",
        "-i",
        &p(&png),
        "-frames:v",
        "5",
        "-c:v",
        "libx264",
        "-crf",
        "28",
        "-pix_fmt",
        "yuv420p",
        &p(&mp4),
    ]);
    run(&["-i", &p(&mp4), "-frames:v", "1", &p(&back)]);
    image::open(&back).unwrap().to_rgb8()
}

fn psnr(a: &RgbImage, b: &RgbImage) -> f64 {
    let mse = a.as_raw().iter().zip(b.as_raw()).map(|(&x, &y)| (f64::from(x) - f64::from(y)).powi(2)).sum::<f64>()
        / a.as_raw().len() as f64;
    10.0 * (255.0 * 255.0 / mse).log10()
}

#[test]
fn the_mark_survives_jpeg_rescale_h264_and_crop_at_40_db() {
    let dir = tempfile::tempdir().unwrap();
    let at = UNIX_EPOCH + Duration::from_secs(fusiond::mark::EPOCH + 8000 * 3600);
    let mut marker = Marker::new(0xA5C3, at);
    let attacks = ["none", "jpeg q50", "half and back", "h264 crf28", "crop 10%"];
    let mut right = [0usize; 5];
    let mut total = 0;
    for name in PHOTOS {
        let plain = photo(name);
        let mut marked = plain.clone();
        marker.mark(&mut marked);
        let db = psnr(&plain, &marked);
        assert!(db >= 40.0, "{name}: PSNR {db:.2} dB");
        let attacked = [
            marked.clone(),
            jpeg(&marked, 50),
            resize(&resize(&marked, 320, 240, FilterType::Triangle), 640, 480, FilterType::Triangle),
            h264(&marked, dir.path()),
            crop_imm(&marked, 37, 29, 576, 432).to_image(),
        ];
        let mut line = format!("{name:32} {db:5.2} dB");
        for (i, img) in attacked.iter().enumerate() {
            let r = read(img);
            let bits = 32 - (r.payload ^ marker.payload()).count_ones() as usize;
            right[i] += if r.marked() { bits } else { 0 };
            line += &format!("  {}: z {:5.1} bits {bits:2}", attacks[i], r.z);
        }
        total += 32;
        println!("{line}");
    }
    for (i, attack) in attacks.iter().enumerate() {
        let accuracy = right[i] as f64 / total as f64;
        println!("{attack:14} bit accuracy {:.1} %", 100.0 * accuracy);
        assert!(accuracy >= 0.95, "{attack}: bit accuracy {:.1} % (goal 95 %)", 100.0 * accuracy);
    }
}

#[test]
fn unmarked_photos_and_frames_are_not_called_marked() {
    let mut pictures: Vec<(String, RgbImage)> = PHOTOS.iter().map(|n| (n.to_string(), photo(n))).collect();
    let camera = shared("camera/two_people_pan");
    let mut frames: Vec<_> = std::fs::read_dir(&camera).unwrap().map(|e| e.unwrap().path()).collect();
    frames.sort();
    for f in frames {
        pictures.push((f.display().to_string(), image::open(&f).unwrap().to_rgb8()));
    }
    let dir = tempfile::tempdir().unwrap();
    for clip in ["foreman-cif.mkv", "franck-talking.mp4", "hamilton-whitehouse.mp4"] {
        let pattern = dir.path().join(format!("{clip}-%03d.png"));
        let out = Command::new("ffmpeg")
            .args(["-v", "error", "-i"])
            .arg(shared(&format!("video/{clip}")))
            .args(["-vf", "fps=2", "-frames:v", "20"])
            .arg(&pattern)
            .output()
            .expect("ffmpeg");
        assert!(out.status.success(), "{clip}: {}", String::from_utf8_lossy(&out.stderr));
    }
    for f in std::fs::read_dir(dir.path()).unwrap() {
        let f = f.unwrap().path();
        pictures.push((f.display().to_string(), image::open(&f).unwrap().to_rgb8()));
    }
    let mut called = Vec::new();
    let mut top = 0f32;
    for (name, img) in &pictures {
        let r = read(img);
        top = top.max(r.z);
        if r.marked() {
            called.push(format!("{name} (z {:.1})", r.z));
        }
    }
    println!("unmarked: {} pictures, {} called marked, highest z {top:.2}", pictures.len(), called.len());
    assert!(called.len() * 100 <= pictures.len(), "false positives: {called:?}");
}

/// `fusiond verify`'s exit status and its output.
fn verify(files: &[&std::path::Path]) -> (i32, String) {
    let out = crate::util::fusiond_command().arg("verify").args(files).output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn a_running_daemons_labelled_snapshot_and_stream_verify_as_marked_and_a_box_id_must_fit() {
    use crate::harness::{free_port, online, serial, write_config, Daemon, Mosquitto, Watcher};
    let _s = serial();
    let broker = Mosquitto::start(free_port());
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let extra = format!("\nlabel = true\n[output.watermark]\nbox_id = 4242\n[http]\nlisten = \"127.0.0.1:{port}\"\n");
    let config = write_config(dir.path(), broker.port, "marked", &extra);
    let w = Watcher::start(broker.port, "fusiond/marked");
    let d = Daemon::spawn(&config);
    online(&w);
    crate::http::healthy(port, &d);
    let (code, jpeg) = crate::http::get(port, "GET", "/snapshot.jpg");
    assert_eq!(code, 200);
    let snapshot = dir.path().join("snapshot.jpg");
    std::fs::write(&snapshot, &jpeg).unwrap();
    let shot = image::load_from_memory(&jpeg).unwrap().to_rgb8();
    let corner = shot.get_pixel(shot.width() - 14, shot.height() - 12);
    assert!(corner.0.iter().all(|&v| v < 90), "the dark badge in the corner: {corner:?}");
    // The MJPEG stream re-encoded as H.264 at CRF 28, as an NVR would keep it.
    let clip = dir.path().join("stream.mp4");
    let out = Command::new("ffmpeg")
        .args(["-v", "error", "-y", "-f", "mpjpeg", "-i", &format!("http://127.0.0.1:{port}/stream.mjpeg")])
        .args(["-frames:v", "15", "-c:v", "libx264", "-crf", "28", "-pix_fmt", "yuv420p"])
        .arg(&clip)
        .output()
        .unwrap();
    assert!(out.status.success(), "ffmpeg: {}", String::from_utf8_lossy(&out.stderr));
    for marked in [&snapshot, &clip] {
        let (status, text) = verify(&[marked]);
        println!("{text}");
        assert_eq!(status, 0, "{text}");
        assert!(text.contains("marked: box 4242"), "{text}");
    }
    let plain = shared("images/fr_obama.jpg");
    let (status, text) = verify(&[&plain]);
    assert_eq!(status, 1, "{text}");
    let junk = dir.path().join("junk.bin");
    std::fs::write(&junk, b"not a picture").unwrap();
    let (status, text) = verify(&[&snapshot, &junk]);
    assert_eq!(status, 2, "{text}");
    drop(d);

    let bad = write_config(dir.path(), broker.port, "marked", "\n[output.watermark]\nbox_id = 70000\n");
    let out = crate::util::fusiond_command().args(["check-config", "--config"]).arg(&bad).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("16 bits"), "{stderr}");
}
