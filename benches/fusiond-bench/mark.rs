//! The invisible mark's cost per frame, beside the one JPEG encode every
//! published frame already takes, in turns on the same pixels: a real
//! camera frame scaled to 320×240, 640×480 and 1280×720.

use anyhow::{anyhow, Context, Result};
use fusiond::mark::Marker;
use fusiond::vision::encode_jpeg;
use image::imageops::{resize, FilterType};
use std::path::PathBuf;
use std::time::{Instant, SystemTime};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A camera frame or photo.
    #[arg(long)]
    image: PathBuf,
    /// Frames per round and task.
    #[arg(long, default_value_t = 50)]
    runs: u32,
    #[arg(long, default_value_t = 5)]
    rounds: u32,
}

pub fn run(args: Args) -> Result<()> {
    fusiond::cli::bounds::count("--runs", args.runs as usize, 1, 100_000)?;
    fusiond::cli::bounds::count("--rounds", args.rounds as usize, 1, 1000)?;
    let img = image::open(&args.image).with_context(|| format!("cannot read {}", args.image.display()))?.to_rgb8();
    let mut marker = Marker::new(0x1234, SystemTime::now());
    println!("  {:<10} {:>10} {:>14} {:>12}", "frame", "mark ms", "JPEG q80 ms", "mark/JPEG");
    for (w, h) in [(320, 240), (640, 480), (1280, 720)] {
        let frame = resize(&img, w, h, FilterType::Triangle);
        let (mut marks, mut encodes) = (Vec::new(), Vec::new());
        for _ in 0..args.rounds {
            let mut f = frame.clone();
            let t = Instant::now();
            for _ in 0..args.runs {
                marker.mark(&mut f);
            }
            marks.push(t.elapsed().as_secs_f64() * 1000.0 / f64::from(args.runs));
            let t = Instant::now();
            for _ in 0..args.runs {
                encode_jpeg(&frame, 80).map_err(|e| anyhow!(e))?;
            }
            encodes.push(t.elapsed().as_secs_f64() * 1000.0 / f64::from(args.runs));
        }
        let (m, e) = (median(marks), median(encodes));
        println!("  {:<10} {m:>10.3} {e:>14.3} {:>11.2}×", format!("{w}×{h}"), m / e);
    }
    Ok(())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
