//! `fusiond-bench gpu-frames`: a 640×480 camera frame end to end with the
//! swap, on the engine and providers given (a GPU's, as the GPU check runs
//! it), with one face and with four: the YUYV conversion, inference, the
//! pixel work around it (letterbox, align, paste-back) and the JPEG encode,
//! each frame in turn on one thread, as the daemon's worker runs them. The
//! CPU-side work (everything but inference) is the part a GPU cannot take.

use crate::live::{fit, H, W};
use anyhow::{anyhow, Context, Result};
use fusiond::cli::{load_image, swapper, ModelArgs};
use fusiond::face::{FusionPipeline, LivePipeline, LiveSettings, PipelineSettings, SelectorMode};
use fusiond::vision::{encode_jpeg, rgb_to_yuyv, yuyv_to_rgb, Resizer, RgbImage};
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    models: ModelArgs,
    /// Swapper model name.
    #[arg(long)]
    swapper: String,
    /// A photo with one face (resized to 640×480).
    #[arg(long)]
    one: PathBuf,
    /// Four photos of one face each: a 2×2 grid of them (320×240 each) is
    /// the four-face frame.
    #[arg(long, num_args = 4, required = true)]
    four: Vec<PathBuf>,
    /// Photo of the source identity.
    #[arg(long)]
    source: PathBuf,
    /// Timed frames per scenario, after one warm-up frame.
    #[arg(long, default_value_t = 50)]
    runs: usize,
    /// Write the medians as JSON here too.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// `photos` in a 2×2 grid, each resized to 320×240.
fn grid(photos: &[RgbImage]) -> RgbImage {
    let mut out = RgbImage::new(W, H);
    let mut tile = RgbImage::new(W / 2, H / 2);
    for (i, p) in photos.iter().enumerate().take(4) {
        Resizer::default().resize_into(p, &mut tile, W / 2, H / 2);
        let (x, y) = ((i as u32 % 2) * W / 2, (i as u32 / 2) * H / 2);
        image::imageops::replace(&mut out, &tile, i64::from(x), i64::from(y));
    }
    out
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Medians of one scenario, ms: yuyv, inference, pixelwork, jpeg, CPU side, end to end.
#[derive(Debug, serde::Serialize)]
struct Figures {
    scenario: String,
    faces: usize,
    yuyv: f64,
    inference: f64,
    pixelwork: f64,
    jpeg: f64,
    cpu_side: f64,
    e2e: f64,
    fps: f64,
}

fn scenario(pipeline: &mut LivePipeline, label: &str, scene: &RgbImage, runs: usize) -> Result<Figures> {
    let yuyv = rgb_to_yuyv(scene);
    let mut rgb = RgbImage::new(W, H);
    let mut cols: [Vec<f64>; 5] = Default::default();
    let mut faces = 0;
    for i in 0..=runs {
        let t0 = Instant::now();
        yuyv_to_rgb(&yuyv, &mut rgb)?;
        let t1 = Instant::now();
        let report = pipeline.process(&mut rgb, Instant::now())?;
        let t2 = Instant::now();
        encode_jpeg(&rgb, 80).map_err(|e| anyhow!(e))?;
        let t3 = Instant::now();
        if i == 0 {
            faces = report.faces.len();
            continue;
        }
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let inference = ms(report.timings.inference);
        let row = [ms(t1 - t0), inference, ms(t2 - t1) - inference, ms(t3 - t2), ms(t3 - t0)];
        for (c, v) in cols.iter_mut().zip(row) {
            c.push(v);
        }
    }
    let cpu_side: Vec<f64> = (0..runs).map(|i| cols[0][i] + cols[2][i] + cols[3][i]).collect();
    let [yuyv, inference, pixelwork, jpeg, e2e] = cols.map(median);
    Ok(Figures {
        scenario: label.into(),
        faces,
        yuyv,
        inference,
        pixelwork,
        jpeg,
        cpu_side: median(cpu_side),
        e2e,
        fps: 1e3 / e2e,
    })
}

pub fn run(mut args: Args) -> Result<()> {
    fusiond::cli::bounds::count("--runs", args.runs, 1, 100_000)?;
    let loader = args.models.loader()?;
    args.models.fit_detector(&loader, [W, H])?;
    let fusion = FusionPipeline::new(
        args.models.detector(&loader)?,
        args.models.recognizer(&loader)?,
        swapper(&loader, Some(&args.swapper))?,
        PipelineSettings::default(),
    );
    let mut pipeline = LivePipeline::new(fusion, LiveSettings::still(SelectorMode::Many));
    pipeline.set_source(&load_image(&args.source)?, "--source")?;
    println!(
        "fusiond-bench gpu-frames: {W}x{H}, swap with {} on {} (providers {:?}); {} frames per row, median ms",
        args.swapper,
        loader.engines().describe(),
        args.models.engine.inference().ort.providers,
        args.runs
    );
    println!(
        "  {:<16} {:>5} {:>7} {:>9} {:>9} {:>7} {:>8} {:>8} {:>7}",
        "scenario", "faces", "yuyv", "inference", "pixelwork", "jpeg", "cpu-side", "e2e", "fps"
    );
    let mut rows = Vec::new();
    let one = fit(&load_image(&args.one).with_context(|| format!("{}", args.one.display()))?);
    let photos = args
        .four
        .iter()
        .map(|p| load_image(p).with_context(|| format!("{}", p.display())))
        .collect::<Result<Vec<_>>>()?;
    let four = grid(&photos);
    for (label, scene) in [("1 face", one), ("4 faces", four)] {
        let f = scenario(&mut pipeline, label, &scene, args.runs)?;
        println!(
            "  {:<16} {:>5} {:>7.2} {:>9.2} {:>9.2} {:>7.2} {:>8.2} {:>8.2} {:>7.1}",
            f.scenario, f.faces, f.yuyv, f.inference, f.pixelwork, f.jpeg, f.cpu_side, f.e2e, f.fps
        );
        rows.push(f);
    }
    let ratio = rows[1].e2e / rows[0].e2e;
    println!("  4 faces / 1 face: {ratio:.2}x the frame time");
    println!("  cpu-side = yuyv + pixelwork + jpeg (everything but inference); e2e = the whole frame on one thread");
    if let Some(path) = &args.json {
        let doc = serde_json::json!({"engine": loader.engines().describe(), "rows": rows, "four_over_one": ratio});
        std::fs::write(path, doc.to_string()).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}
