//! `fusiond-bench stages`: the median latency of each stage on one photo
//! (detect, align + embed, swap, paste-back, and the whole frame).

use anyhow::{Context, Result};
use fusiond::cli::bounds as flags;
use fusiond::cli::{load_image, swapper, ModelArgs};
use fusiond::face::{ColorTransfer, FusionPipeline, LivePipeline, LiveSettings, PipelineSettings, SelectorMode};
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Photo to process (its largest face is the target).
    #[arg(long)]
    image: PathBuf,
    /// Photo of the source identity (default: the same photo).
    #[arg(long)]
    source: Option<PathBuf>,
    #[command(flatten)]
    models: ModelArgs,
    /// Swapper model name (default: the first one present).
    #[arg(long)]
    swapper: Option<String>,
    /// Timed runs per stage, after one warm-up run.
    #[arg(long, default_value_t = 10)]
    runs: usize,
    /// FLOPs of one swap, in GFLOP, to report the achieved GFLOP/s.
    #[arg(long)]
    swap_gflop: Option<f64>,
}

fn median_ms(runs: usize, mut f: impl FnMut() -> Result<Duration>) -> Result<[f64; 3]> {
    f()?;
    let mut v: Vec<f64> = (0..runs.max(1)).map(|_| f().map(|d| d.as_secs_f64() * 1e3)).collect::<Result<_>>()?;
    v.sort_by(f64::total_cmp);
    Ok([v[v.len() / 2], v[0], v[v.len() - 1]])
}

fn timed(f: impl FnOnce() -> Result<()>) -> Result<Duration> {
    let s = Instant::now();
    f()?;
    Ok(s.elapsed())
}

pub fn run(args: Args) -> Result<()> {
    flags::count("--runs", args.runs, 1, 100_000)?;
    if let Some(g) = args.swap_gflop {
        flags::real("--swap-gflop", g, 0.0, 1e6, true)?;
    }
    let loader = args.models.loader()?;
    let detector = args.models.detector(&loader)?;
    let recognizer = args.models.recognizer(&loader)?;
    let swapper = swapper(&loader, args.swapper.as_deref())?;
    let mut p = FusionPipeline::new(detector, recognizer, swapper, PipelineSettings::default());
    let image = load_image(&args.image)?;
    let source = match &args.source {
        Some(s) => load_image(s)?,
        None => image.clone(),
    };
    p.set_source(&source, "the source photo")?;
    let faces = p.detector.detect(&image)?;
    let face = fusiond::face::largest(&faces).map(|i| faces[i].clone()).context("no face in --image")?;
    let latent = p.swapper.latent(p.source().context("source is set")?)?;
    let mut scratch = image.clone();

    let [dw, dh] = p.detector.entry().input_size;
    println!(
        "fusiond-bench stages: {} ({}x{}), backend {}, {} runs, median [min..max] ms",
        args.image.display(),
        image.width(),
        image.height(),
        loader.engines().describe(),
        args.runs
    );
    let mut rows = Vec::new();
    let det_label = format!("detect {} @{dw}x{dh}", p.detector.entry().name);
    rows.push((det_label, median_ms(args.runs, || timed(|| p.detector.detect(&image).map(drop).map_err(Into::into)))?));
    let rec_label = format!("align+embed {}", p.recognizer.entry().name);
    rows.push((
        rec_label,
        median_ms(args.runs, || timed(|| p.recognizer.embed(&image, &face.landmarks).map(drop).map_err(Into::into)))?,
    ));
    let swap = median_ms(args.runs, || {
        timed(|| p.swapper.run(&image, &face.landmarks, &latent).map(drop).map_err(Into::into))
    })?;
    rows.push((format!("swap {}", p.swapper.entry().name), swap));
    p.swapper.color_transfer = ColorTransfer::Rct;
    let color = median_ms(args.runs, || {
        p.swapper.run(&image, &face.landmarks, &latent)?;
        Ok(p.swapper.last_color)
    })?;
    p.swapper.color_transfer = ColorTransfer::None;
    rows.push(("colour transfer (rct)".to_string(), color));
    let to_crop = p.swapper.run(&image, &face.landmarks, &latent)?;
    rows.push((
        "paste-back".to_string(),
        median_ms(args.runs, || {
            scratch.copy_from_slice(&image);
            timed(|| {
                p.swapper.paste(&mut scratch, &to_crop, 1.0);
                Ok(())
            })
        })?,
    ));
    let mut live = LivePipeline::new(p, LiveSettings::still(SelectorMode::One));
    rows.push((
        "whole frame".to_string(),
        median_ms(args.runs, || {
            scratch.copy_from_slice(&image);
            timed(|| live.process(&mut scratch, Instant::now()).map(drop).map_err(Into::into))
        })?,
    ));
    for (label, [med, min, max]) in &rows {
        println!("  {label:<40} {med:>9.2}  [{min:.2}..{max:.2}]");
    }
    if let Some(g) = args.swap_gflop {
        println!("  swap throughput: {:.1} GFLOP/s ({g} GFLOP per swap)", g / (swap[0] / 1e3));
    }
    Ok(())
}
