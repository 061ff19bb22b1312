//! The invisible mark's and the C2PA manifest's cost per frame, beside the
//! one JPEG encode every published frame already takes, in turns on the
//! same pixels: a real camera frame scaled to 320×240, 640×480 and
//! 1280×720. The manifest is signed with ES256 by a throwaway chain from
//! `tests/c2pa/make-chain.sh` (openssl), made in a temporary folder.

use anyhow::{anyhow, Context, Result};
use fusiond::mark::c2pa::C2paSigner;
use fusiond::mark::{C2paSettings, Marker};
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
    /// Frames signed per round (signing is slower than the mark).
    #[arg(long, default_value_t = 10)]
    signs: u32,
}

pub fn run(args: Args) -> Result<()> {
    fusiond::cli::bounds::count("--runs", args.runs as usize, 1, 100_000)?;
    fusiond::cli::bounds::count("--rounds", args.rounds as usize, 1, 1000)?;
    fusiond::cli::bounds::count("--signs", args.signs as usize, 1, 100_000)?;
    let img = image::open(&args.image).with_context(|| format!("cannot read {}", args.image.display()))?.to_rgb8();
    let mut marker = Marker::new(0x1234, SystemTime::now());
    let chain = tempfile::tempdir()?;
    let signer = match cfg!(feature = "c2pa") {
        true => Some(c2pa_signer(chain.path())?),
        false => {
            println!("  (no C2PA columns: this build has no `c2pa` feature; run with --features c2pa)");
            None
        }
    };
    println!(
        "  {:<10} {:>8} {:>12} {:>8} {:>10} {:>9} {:>12}",
        "frame", "mark ms", "JPEG q80 ms", "C2PA ms", "mark/JPEG", "C2PA/JPEG", "C2PA bytes"
    );
    for (w, h) in [(320, 240), (640, 480), (1280, 720)] {
        let frame = resize(&img, w, h, FilterType::Triangle);
        let jpeg = encode_jpeg(&frame, 80).map_err(|e| anyhow!(e))?;
        let (mut marks, mut encodes, mut signs, mut added) = (Vec::new(), Vec::new(), Vec::new(), 0);
        for _ in 0..args.rounds {
            let mut f = frame.clone();
            marks.push(per_frame(args.runs, || marker.mark(&mut f)));
            encodes.push(per_frame(args.runs, || drop(encode_jpeg(&frame, 80))));
            if let Some(signer) = &signer {
                signs.push(per_frame(args.signs, || {
                    added = signer.sign_jpeg(&jpeg, true).map_or(0, |s| s.len() - jpeg.len());
                }));
            }
        }
        let (m, e) = (median(marks), median(encodes));
        let c = if signs.is_empty() { f64::NAN } else { median(signs) };
        anyhow::ensure!(signer.is_none() || added > 0, "C2PA signing failed");
        println!(
            "  {:<10} {m:>8.3} {e:>12.3} {c:>8.3} {:>9.2}× {:>8.2}× {added:>12}",
            format!("{w}×{h}"),
            m / e,
            c / e
        );
    }
    Ok(())
}

/// Milliseconds per call of `f`, over `runs` calls.
fn per_frame(runs: u32, mut f: impl FnMut()) -> f64 {
    let t = Instant::now();
    for _ in 0..runs {
        f();
    }
    t.elapsed().as_secs_f64() * 1000.0 / f64::from(runs)
}

/// A signer with a fresh throwaway chain in `dir`.
fn c2pa_signer(dir: &std::path::Path) -> Result<C2paSigner> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/c2pa/make-chain.sh");
    let out = std::process::Command::new("bash").arg(script).arg(dir).output().context("running make-chain.sh")?;
    anyhow::ensure!(out.status.success(), "make-chain.sh (needs openssl): {}", String::from_utf8_lossy(&out.stderr));
    let path = |f: &str| dir.join(f).display().to_string();
    let settings =
        C2paSettings { enabled: true, certificate: path("box.pem"), key: path("box.key"), ..Default::default() };
    C2paSigner::load(&settings).map_err(|e| anyhow!(e))?.context("the C2PA signer is off")
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
