//! `fusiond verify FILE...`: whether each image or video carries fusiond's
//! mark, with the payload (box and hour) and how sure the reader is. A
//! video is decoded by ffmpeg and up to `--frames` of its frames are folded
//! together. Exit status: 0 every file marked, 1 some not marked, 2 a file
//! could not be read.

use crate::mark::detect::{Folded, MARKED_Z};
use anyhow::{bail, Context, Result};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

#[derive(Debug, clap::Args)]
pub struct VerifyArgs {
    /// Images (JPEG, PNG, ...) or videos (anything ffmpeg reads).
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Most frames of a video read.
    #[arg(long, default_value_t = 30)]
    pub frames: usize,
}

pub fn verify(args: VerifyArgs) -> Result<u8> {
    super::bounds::count("--frames", args.frames, 1, 10_000)?;
    let mut status = 0;
    for file in &args.files {
        match fold(file, args.frames) {
            Ok(folded) => {
                let r = folded.read();
                let (box_number, hour) = crate::mark::decode(r.payload, std::time::SystemTime::now());
                let frames = folded.frames;
                if r.marked() {
                    let hour = humantime_hour(hour);
                    println!(
                        "{}: marked: box {box_number} (0x{box_number:04x}), hour {hour}; confidence z = {:.1} \
                         (threshold {MARKED_Z}), weakest bit {:.1}; {frames} frame(s)",
                        file.display(),
                        r.z,
                        r.weakest_bit
                    );
                } else {
                    println!(
                        "{}: not marked (best z = {:.1}, threshold {MARKED_Z}; {frames} frame(s))",
                        file.display(),
                        r.z
                    );
                    status = status.max(1);
                }
            }
            Err(e) => {
                eprintln!("{}: error: {e:#}", file.display());
                status = 2;
            }
        }
    }
    Ok(status)
}

/// `2026-12-05 17:00 UTC` from Unix seconds.
fn humantime_hour(secs: u64) -> String {
    let days = secs / 86_400;
    let hour = secs % 86_400 / 3600;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02} {hour:02}:00 UTC")
}

fn fold(file: &Path, frames: usize) -> Result<Folded> {
    let mut folded = Folded::default();
    if !file.exists() {
        bail!("no such file");
    }
    if let Ok(img) = image::open(file) {
        folded.add(&img.to_rgb8());
        return Ok(folded);
    }
    let (w, h) = video_size(file)?;
    let mut child = Command::new("ffmpeg")
        .args(["-v", "error", "-i"])
        .arg(file)
        .args(["-frames:v", &frames.to_string(), "-f", "rawvideo", "-pix_fmt", "rgb24", "-"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("cannot run ffmpeg to decode the video; apt install ffmpeg")?;
    let mut stdout = child.stdout.take().context("ffmpeg's output")?;
    let mut buf = vec![0u8; w * h * 3];
    while stdout.read_exact(&mut buf).is_ok() {
        let img = image::RgbImage::from_raw(w as u32, h as u32, buf.clone()).context("a frame")?;
        folded.add(&img);
    }
    let _ = child.wait();
    if folded.frames == 0 {
        bail!("ffmpeg decoded no frame; is it an image or a video?");
    }
    Ok(folded)
}

fn video_size(file: &Path) -> Result<(usize, usize)> {
    let out = Command::new("ffprobe")
        .args(["-v", "error", "-select_streams", "v:0", "-show_entries", "stream=width,height", "-of", "csv=p=0"])
        .arg(file)
        .output()
        .context("cannot run ffprobe to read the video; apt install ffmpeg")?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut parts = text.trim().split(',').map(|v| v.trim().parse::<usize>());
    match (parts.next(), parts.next()) {
        (Some(Ok(w)), Some(Ok(h))) if w > 0 && h > 0 && w * h <= 8192 * 8192 => Ok((w, h)),
        _ => bail!("not an image, and ffprobe finds no video stream in it"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn hours_are_civil_dates() {
        assert_eq!(super::humantime_hour(crate::mark::EPOCH + 3600 * 24 * 338 + 17 * 3600), "2026-12-05 17:00 UTC");
        assert_eq!(super::humantime_hour(0), "1970-01-01 00:00 UTC");
    }
}
