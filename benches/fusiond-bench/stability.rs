//! `fusiond-bench stability`: how steady the faces of a stream are, on
//! synthetic pans of still photos where the truth is known (see
//! `capture::pan`), side by side for raw detection on every frame, the old
//! behaviour (detection every `--detect-interval-ms`, faces held in between,
//! the largest face swapped), and smoothing with and without prediction.

use anyhow::{Context, Result};
use fusiond::capture::pan::{Pan, Segment};
use fusiond::cli::bounds as flags;
use fusiond::cli::{load_image, swapper, ModelArgs};
use fusiond::face::stability::{evaluate, flips_by_order, persons, record, FrameRecord, Report};
use fusiond::face::{
    FusionPipeline, LivePipeline, LiveSettings, PipelineSettings, SelectorMode, SmoothSettings, StickySettings,
};
use fusiond::store::Loader;
use fusiond::vision::{Affine, RgbImage};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    models: ModelArgs,
    /// Swapper model name (a contract swapper is enough: only the choice of face matters).
    #[arg(long)]
    swapper: String,
    /// Photo of the source identity.
    #[arg(long)]
    source: PathBuf,
    /// Still photos to pan across (repeatable).
    #[arg(long = "photo", required = true)]
    photos: Vec<PathBuf>,
    /// Real camera frames (a folder of JPEGs, e.g. ../shared/camera/two_people_pan): flips only.
    #[arg(long)]
    camera: Option<PathBuf>,
    /// Frames of slow zoom and pan; the fast pan and the hold follow.
    #[arg(long, default_value_t = 90)]
    slow: usize,
    #[arg(long, default_value_t = 12)]
    fast: usize,
    /// The camera's frame rate.
    #[arg(long, default_value_t = 15.0)]
    fps: f32,
    #[arg(long, default_value_t = 80)]
    detect_interval_ms: u64,
    /// Smoothing of (c) and (d) (pipeline.smoothing): cutoff floor, Hz.
    #[arg(long)]
    min_cutoff_hz: Option<f32>,
    /// Smoothing: cutoff rise beyond the jitter, Hz per IOD/s.
    #[arg(long)]
    beta: Option<f32>,
    /// Smoothing: the detector's jitter, IOD.
    #[arg(long)]
    jitter_iod: Option<f32>,
    /// Adds (e): between full detections, the same detector at this input
    /// size on a crop around each track instead of prediction alone (a
    /// resizable detector: yunet_n_dynamic, scrfd_500m). 0 leaves it out.
    #[arg(long, default_value_t = 0)]
    refine_size: u32,
}

impl Args {
    fn smoothing(&self) -> SmoothSettings {
        let d = SmoothSettings::default();
        SmoothSettings {
            min_cutoff_hz: self.min_cutoff_hz.unwrap_or(d.min_cutoff_hz),
            beta: self.beta.unwrap_or(d.beta),
            jitter_iod: self.jitter_iod.unwrap_or(d.jitter_iod),
            ..d
        }
    }
}

/// The modes compared, in table order.
fn modes(every: Duration, smoothing: SmoothSettings) -> [(&'static str, LiveSettings); 4] {
    let base = LiveSettings {
        detect_interval: every,
        sticky: StickySettings { margin: 0.0, hold: Duration::ZERO },
        ..LiveSettings::still(SelectorMode::One)
    };
    let smooth = LiveSettings { smoothing, sticky: StickySettings::default(), ..base };
    [
        ("(a) raw, every frame", LiveSettings { detect_interval: Duration::ZERO, ..base }),
        ("(b) old: held, largest", base),
        ("(c) smoothed + predicted", smooth),
        (
            "(d) smoothed, held",
            LiveSettings { smoothing: SmoothSettings { predict: false, ..smooth.smoothing }, ..smooth },
        ),
    ]
}

fn live(args: &Args, loader: &Loader, source: &RgbImage, settings: LiveSettings) -> Result<LivePipeline> {
    let fusion = FusionPipeline::new(
        args.models.detector(loader)?,
        args.models.recognizer(loader)?,
        swapper(loader, Some(&args.swapper))?,
        PipelineSettings::default(),
    );
    let mut live = LivePipeline::new(fusion, settings);
    live.set_source(source, "--source")?;
    Ok(live)
}

fn mean(v: impl Iterator<Item = f32>) -> f32 {
    let (s, n) = v.fold((0.0, 0), |(s, n), x| (s + x, n + 1));
    if n == 0 {
        f32::NAN
    } else {
        s / n as f32
    }
}

struct Row {
    mode: &'static str,
    report: Report,
}

fn print_rows(rows: &[Row]) {
    println!(
        "  {:<26} {:>7} {:>7} {:>9} {:>9} {:>9} {:>7} {:>6} {:>8} {:>8}",
        "mode", "step", "spread", "err det", "err trk", "trk/det", "lag fr", "flips", "step/a", "spread/a"
    );
    let raw = &rows[0].report;
    let step = |r: &Report| mean(r.persons.iter().map(|p| p.step));
    let spread = |r: &Report| mean(r.persons.iter().map(|p| p.spread));
    for row in rows {
        let r = &row.report;
        let det = mean(r.persons.iter().map(|p| p.error_detected));
        let trk = mean(r.persons.iter().filter_map(|p| p.error_tracked));
        let lag = mean(r.persons.iter().filter_map(|p| p.lag_frames));
        println!(
            "  {:<26} {:>7.1} {:>7.1} {:>9.1} {:>9.1} {:>9.2} {:>7.2} {:>6} {:>8.2} {:>8.2}",
            row.mode,
            step(r),
            spread(r),
            det,
            trk,
            trk / det,
            lag,
            r.flips,
            step(r) / step(raw),
            spread(r) / spread(raw)
        );
    }
}

fn pan_frames(pan: &Pan) -> Result<Vec<(RgbImage, Affine, bool)>> {
    (0..pan.plan.len())
        .map(|i| {
            let (img, to_frame) = pan.frame(i)?;
            Ok((img, to_frame, pan.plan.transforms[i].1 == Segment::Fast))
        })
        .collect()
}

fn run_modes(
    args: &Args,
    loader: &Loader,
    source: &RgbImage,
    frames: &[(RgbImage, Affine, bool)],
) -> Result<Vec<(&'static str, Vec<FrameRecord>)>> {
    let every = Duration::from_millis(args.detect_interval_ms);
    let mut runs = modes(every, args.smoothing())
        .into_iter()
        .map(|(name, settings)| {
            let mut p = live(args, loader, source, settings)?;
            Ok((name, record(&mut p, frames.iter().cloned().map(Ok), args.fps)?))
        })
        .collect::<Result<Vec<_>>>()?;
    if args.refine_size > 0 {
        let settings = modes(every, args.smoothing())[2].1;
        let mut p = live(args, loader, source, settings)?;
        p.fusion_mut().refiner = Some(args.models.refiner(loader, args.refine_size)?);
        runs.push(("(e) smoothed + refined", record(&mut p, frames.iter().cloned().map(Ok), args.fps)?));
    }
    Ok(runs)
}

fn check(args: &Args) -> Result<()> {
    flags::count("--slow", args.slow, 1, 100_000)?;
    flags::count("--fast", args.fast, 1, 100_000)?;
    flags::real("--fps", args.fps.into(), 0.0, 240.0, true)?;
    flags::count("--detect-interval-ms", usize::try_from(args.detect_interval_ms).unwrap_or(usize::MAX), 0, 60_000)?;
    let smoothing = [
        ("--min-cutoff-hz", args.min_cutoff_hz, true),
        ("--beta", args.beta, false),
        ("--jitter-iod", args.jitter_iod, true),
    ];
    for (flag, v, above) in smoothing {
        if let Some(v) = v {
            flags::real(flag, v.into(), 0.0, 1000.0, above)?;
        }
    }
    flags::refine_size(args.refine_size)
}

pub fn run(args: Args) -> Result<()> {
    check(&args)?;
    let loader = args.models.loader()?;
    let source = load_image(&args.source)?;
    println!(
        "fusiond-bench stability: {} fps camera, detection every {} ms in (b)-(d), {} slow + {} fast + {} still \
         frames per pan; figures in % of each person's inter-ocular distance (IOD), mean over persons",
        args.fps,
        args.detect_interval_ms,
        args.slow,
        args.fast,
        args.slow / 2
    );
    for photo in &args.photos {
        let pan = Pan::new(load_image(photo)?, args.slow, args.fast);
        let frames = pan_frames(&pan)?;
        let runs = run_modes(&args, &loader, &source, &frames)?;
        let truth = persons(&runs[0].1);

        println!("pan of {} ({} persons, {} frames)", photo.display(), truth.len(), frames.len());
        let rows: Vec<Row> =
            runs.iter().map(|(mode, records)| Row { mode, report: evaluate(records, &truth) }).collect();
        print_rows(&rows);
    }
    if let Some(dir) = &args.camera {
        camera_flips(&args, &loader, &source, dir)?;
    }
    println!("  step: RMS frame-to-frame step of the landmarks; spread: RMS distance from the person's mean position");
    println!("  err det / err trk: RMS error against the true position on frames with / without a detection");
    println!("  lag fr: frames behind the truth in the fast pan; flips: swapped person changed while the previous was in view");
    Ok(())
}

/// Flips on a real camera sequence (no known geometry: persons by order).
fn camera_flips(args: &Args, loader: &Loader, source: &RgbImage, dir: &std::path::Path) -> Result<()> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jpg"))
        .collect();
    paths.sort();
    let frames: Vec<(RgbImage, Affine, bool)> =
        paths.iter().map(|p| Ok((load_image(p)?, Affine::IDENTITY, false))).collect::<Result<_>>()?;
    println!("{} ({} frames): flips", dir.display(), frames.len());
    for (mode, records) in run_modes(args, loader, source, &frames)? {
        println!("  {mode:<26} {:>6}", flips_by_order(&records));
    }
    Ok(())
}
