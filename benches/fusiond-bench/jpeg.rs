//! JPEG encoding side by side, in one run: fusiond's encoder (libjpeg-turbo
//! through `vision::encode_jpeg`), the pure-Rust `jpeg-encoder` it replaced,
//! and OpenCV's `cv2.imencode` (the reference FaceFusion users have), at the
//! same quality and the same 4:2:0 subsampling, on the same pixels.
//!
//! The three take turns in rounds, so that a noisy neighbour slows all three
//! alike; each round's figure is the median of `--runs` encodes, and the
//! ratios are taken per round before their median is printed.

use anyhow::{anyhow, bail, Context, Result};
use fusiond::vision::{encode_jpeg, RgbImage};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Photos or camera frames to encode (decoded once, then encoded).
    #[arg(long = "image", required = true)]
    images: Vec<PathBuf>,
    #[arg(long, default_value_t = 80)]
    quality: u8,
    /// Encodes per round and encoder.
    #[arg(long, default_value_t = 50)]
    runs: u32,
    #[arg(long, default_value_t = 5)]
    rounds: u32,
    /// The Python with OpenCV (the venv tests/setup.sh makes).
    #[arg(long)]
    python: PathBuf,
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(serde::Serialize)]
struct Row {
    image: String,
    width: u32,
    height: u32,
    /// Per round: median ms of fusiond, jpeg-encoder, OpenCV.
    rounds: Vec<[f64; 3]>,
    /// Output bytes of each (same order).
    bytes: [usize; 3],
}

pub fn run(args: Args) -> Result<()> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/jpeg_reference.py");
    println!(
        "  {:<22} {:>9} {:>9} {:>12} {:>8} {:>10} {:>10}",
        "image (q, 4:2:0)", "fusiond", "OpenCV", "jpeg-encoder", "ratio", "old ratio", "bytes f/o"
    );
    let mut rows = Vec::new();
    for path in &args.images {
        let img = image::open(path).with_context(|| format!("cannot read {}", path.display()))?.to_rgb8();
        let mut row = Row {
            image: path.file_name().unwrap_or_default().to_string_lossy().into_owned(),
            width: img.width(),
            height: img.height(),
            rounds: Vec::new(),
            bytes: [0; 3],
        };
        for _ in 0..args.rounds {
            let (ours, ours_len) = time(args.runs, || encode_jpeg(&img, args.quality).map_err(|e| anyhow!(e)))?;
            let (old, old_len) = time(args.runs, || jpeg_encoder_420(&img, args.quality))?;
            let (cv, cv_len) = opencv(&args.python, &script, path, args.quality, args.runs)?;
            row.rounds.push([ours, old, cv]);
            row.bytes = [ours_len, old_len, cv_len];
        }
        print_row(&row, args.quality);
        rows.push(row);
    }
    if let Some(p) = &args.json {
        std::fs::write(p, serde_json::to_vec_pretty(&rows)?)
            .with_context(|| format!("cannot write {}", p.display()))?;
    }
    Ok(())
}

fn print_row(row: &Row, quality: u8) {
    let col = |k: usize| median(row.rounds.iter().map(|r| r[k]).collect());
    let ratio = |k: usize| median(row.rounds.iter().map(|r| r[k] / r[2]).collect());
    let label = format!("{} {}x{} q{quality}", row.image, row.width, row.height);
    println!(
        "  {label:<22} {:>6.3} ms {:>6.3} ms {:>9.3} ms {:>7.2}x {:>9.2}x {:>4.2}",
        col(0),
        col(2),
        col(1),
        ratio(0),
        ratio(1),
        row.bytes[0] as f64 / row.bytes[2] as f64
    );
}

fn jpeg_encoder_420(img: &RgbImage, quality: u8) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(img.len() / 8);
    let mut e = jpeg_encoder::Encoder::new(&mut out, quality);
    e.set_sampling_factor(jpeg_encoder::SamplingFactor::F_2_2);
    e.encode(img.as_raw(), img.width() as u16, img.height() as u16, jpeg_encoder::ColorType::Rgb)?;
    Ok(out)
}

/// The median ms of `runs` calls, and the last output's length.
fn time(runs: u32, mut encode: impl FnMut() -> Result<Vec<u8>>) -> Result<(f64, usize)> {
    let mut len = encode()?.len();
    let mut ms = Vec::new();
    for _ in 0..runs {
        let start = Instant::now();
        len = std::hint::black_box(encode()?).len();
        ms.push(start.elapsed().as_secs_f64() * 1e3);
    }
    Ok((median(ms), len))
}

fn opencv(python: &Path, script: &Path, image: &Path, quality: u8, runs: u32) -> Result<(f64, usize)> {
    let out = Command::new(python)
        .arg(script)
        .args([image.as_os_str(), quality.to_string().as_ref(), runs.to_string().as_ref()])
        .output()
        .with_context(|| format!("cannot run {}", python.display()))?;
    if !out.status.success() {
        bail!("{} failed: {}", script.display(), String::from_utf8_lossy(&out.stderr));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut it = text.split_whitespace();
    let ms = it.next().and_then(|v| v.parse().ok());
    let len = it.next().and_then(|v| v.parse().ok());
    ms.zip(len).ok_or_else(|| anyhow!("{} printed {text:?}, not \"<ms> <bytes>\"", script.display()))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
