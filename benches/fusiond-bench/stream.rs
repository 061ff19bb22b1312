//! `fusiond-bench stream`: the stream scorer. Plays real clips (folders of
//! frames, e.g. extracted from ../shared/video by benches/stream.sh) and
//! synthetic pans of photos through the daemon's live pipeline, with the
//! daemon's default settings, at the clip's frame rate on a simulated
//! clock, beside detection on every frame (a live tool without tracking)
//! and an accuracy reference (the truth: `AccuracyReference`), and prints
//! one row per person (`fusiond::face::stream_score`).

use anyhow::{Context, Result};
use fusiond::capture::pan::Pan;
use fusiond::cli::{load_image, swapper, ModelArgs};
use fusiond::config::Config;
use fusiond::daemon::{live_settings, DaemonSettings};
use fusiond::face::stream_record::{record, AccuracyReference};
use fusiond::face::stream_score::{score, StreamReport};
use fusiond::face::{FusionPipeline, LivePipeline, PipelineSettings};
use fusiond::store::Loader;
use fusiond::vision::{Affine, RgbImage};
use std::path::{Path, PathBuf};

const FRAME: [u32; 2] = [640, 480];

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    models: ModelArgs,
    /// Swapper model name (a contract swapper is enough: the scorer looks at which face is swapped).
    #[arg(long)]
    swapper: String,
    /// Photo of the source identity.
    #[arg(long)]
    source: PathBuf,
    /// A folder of a clip's frames, 640x480 (repeatable), played at --fps.
    #[arg(long = "clip")]
    clips: Vec<PathBuf>,
    /// The clips' frame rate (one per --clip, in order; the last repeats).
    #[arg(long = "fps", default_values_t = [30.0])]
    fps: Vec<f32>,
    /// A still photo to pan across at 30 fps (repeatable): the truth is known.
    #[arg(long = "pan")]
    pans: Vec<PathBuf>,
    /// At most this many frames of each clip.
    #[arg(long, default_value_t = 300)]
    frames: usize,
    /// Writes every report as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Overrides pipeline.smoothing.min_cutoff_hz (to tune it).
    #[arg(long)]
    min_cutoff_hz: Option<f32>,
    /// Overrides pipeline.smoothing.beta.
    #[arg(long)]
    beta: Option<f32>,
    /// Overrides pipeline.smoothing.jitter_iod.
    #[arg(long)]
    jitter_iod: Option<f32>,
    /// Overrides pipeline.refine_size.
    #[arg(long)]
    refine_size: Option<u32>,
    /// The accuracy reference's crop input, px: each detected face found
    /// again on a crop twice its box scaled to this size, and on its mirror.
    #[arg(long, default_value_t = 448)]
    truth_size: u32,
}

/// The accuracy reference (`AccuracyReference`): the detector fitted to the
/// frame, then at --truth-size on each face's crop.
fn accuracy(args: &Args, loader: &Loader) -> Result<AccuracyReference> {
    let mut models = args.models.clone();
    models.fit_detector(loader, FRAME)?;
    Ok(AccuracyReference::new(models.detector(loader)?, models.refiner(loader, args.truth_size)?))
}

fn pipeline(args: &Args, loader: &Loader, source: &RgbImage) -> Result<LivePipeline> {
    let mut config = Config::default();
    let s = &mut config.pipeline.smoothing;
    s.min_cutoff_hz = args.min_cutoff_hz.unwrap_or(s.min_cutoff_hz);
    s.beta = args.beta.unwrap_or(s.beta);
    s.jitter_iod = args.jitter_iod.unwrap_or(s.jitter_iod);
    config.pipeline.refine_size = args.refine_size.unwrap_or(config.pipeline.refine_size);
    let daemon = DaemonSettings::from_config(&config)?;
    let mut models = args.models.clone();
    models.fit_detector(loader, FRAME)?;
    let mut fusion = FusionPipeline::new(
        models.detector(loader)?,
        models.recognizer(loader)?,
        swapper(loader, Some(&args.swapper))?,
        PipelineSettings::default(),
    );
    let entry = loader.catalog().pick(args.models.detector.as_deref(), fusiond::manifest::Kind::Detector)?;
    if entry.resizable && config.pipeline.refine_size > 0 {
        fusion.refiner = Some(models.refiner(loader, config.pipeline.refine_size)?);
    }
    let mut live = LivePipeline::new(fusion, live_settings(&daemon.worker, &daemon.control));
    live.set_source(source, "--source")?;
    Ok(live)
}

fn frames_of(dir: &Path, limit: usize) -> Result<Vec<PathBuf>> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jpg" || x == "png"))
        .collect();
    paths.sort();
    paths.truncate(limit);
    anyhow::ensure!(!paths.is_empty(), "{} holds no .jpg or .png frames", dir.display());
    Ok(paths)
}

fn run_clip(args: &Args, loader: &Loader, source: &RgbImage, dir: &Path, fps: f32) -> Result<StreamReport> {
    let paths = frames_of(dir, args.frames)?;
    let mut live = pipeline(args, loader, source)?;
    let mut reference = args.models.detector(loader)?;
    let mut truth = accuracy(args, loader)?;
    let frames = paths.iter().map(|p| {
        let img = load_image(p).map_err(|e| fusiond::face::FaceError::NoFace(e.to_string()))?;
        let faces = truth.faces(&img)?;
        Ok((img, faces))
    });
    let recorded = record(&mut live, &mut reference, frames, fps)?;
    Ok(score(&recorded, fps))
}

/// A pan: the truth is the accuracy reference on the photo itself, at its
/// own resolution (each face's crop at --truth-size), mapped into each frame.
fn run_pan(args: &Args, loader: &Loader, source: &RgbImage, photo: &Path) -> Result<StreamReport> {
    let photo = load_image(photo)?;
    let truth = accuracy(args, loader)?.faces(&photo)?;
    let pan = Pan::new(photo, 120, 24);
    let frames: Vec<(RgbImage, Vec<[[f32; 2]; 5]>)> = (0..pan.plan.len())
        .map(|i| {
            let (img, to_frame) = pan.frame(i)?;
            Ok((img, truth.iter().map(|p| p.map(|[x, y]| apply(&to_frame, x, y))).collect()))
        })
        .collect::<Result<_>>()?;
    let mut live = pipeline(args, loader, source)?;
    let mut reference = args.models.detector(loader)?;
    let recorded = record(&mut live, &mut reference, frames.into_iter().map(Ok), 30.0)?;
    Ok(score(&recorded, 30.0))
}

fn apply(a: &Affine, x: f32, y: f32) -> [f32; 2] {
    let (u, v) = a.apply(x, y);
    [u, v]
}

fn print_report(name: &str, r: &StreamReport) {
    println!("{name}: {} persons, {} flips", r.persons.len(), r.flips);
    println!(
        "  {:>6} {:>6} {:>8} {:>8} {:>7} {:>9} {:>8} {:>8} {:>4} {:>4} {:>6} {:>5} {:>5} {:>4}",
        "IOD px",
        "frames",
        "jitter",
        "ref jit",
        "ratio",
        "truth jit",
        "err",
        "ref err",
        "ids",
        "sw",
        "cover",
        "drops",
        "fades",
        "lag"
    );
    for p in &r.persons {
        let opt = |v: Option<f32>| v.map_or("–".into(), |v| format!("{v:.1}"));
        println!(
            "  {:>6.1} {:>6} {:>8.2} {:>8.2} {:>6.2}× {:>9} {:>8} {:>8} {:>4} {:>4} {:>5.0}% {:>5} {:>5} {:>4}",
            p.iod_px,
            p.frames,
            p.jitter,
            p.jitter_reference,
            p.jitter_ratio(),
            p.jitter_truth.map_or("–".into(), |v| format!("{v:.2}")),
            opt(p.error),
            opt(p.error_reference),
            p.ids,
            p.id_switches,
            100.0 * p.coverage,
            p.dropouts,
            p.fades,
            p.lag_frames
        );
    }
}

pub fn run(args: Args) -> Result<()> {
    anyhow::ensure!(!args.clips.is_empty() || !args.pans.is_empty(), "give at least one --clip or --pan");
    let loader = args.models.loader()?;
    let source = load_image(&args.source)?;
    println!(
        "fusiond-bench stream: the daemon's live pipeline (its default settings) against detection on every frame \
         (ref) and the accuracy reference (truth); jitter and error in % of each person's IOD"
    );
    let mut all = Vec::new();
    for (i, clip) in args.clips.iter().enumerate() {
        let fps = *args.fps.get(i).or(args.fps.last()).unwrap_or(&30.0);
        let r = run_clip(&args, &loader, &source, clip, fps)?;
        print_report(&format!("{} ({fps} fps)", clip.display()), &r);
        all.push((clip.display().to_string(), r));
    }
    for photo in &args.pans {
        let r = run_pan(&args, &loader, &source, photo)?;
        print_report(&format!("pan of {}", photo.display()), &r);
        all.push((format!("pan:{}", photo.display()), r));
    }
    println!("  jitter: RMS second difference of the landmarks; ratio: against detection on every frame (ref)");
    println!(
        "  truth: the accuracy reference, each detected face found again on a crop at {} px and on its mirror, averaged \
         (pans: once, on the photo at its own resolution, mapped into each frame)",
        args.truth_size
    );
    println!("  truth jit: the truth's own jitter; err: RMS distance from the truth");
    println!("  ids: track ids the person got; sw: id changes within 0.5 s");
    println!("  cover: frames put out");
    println!("  drops: frames in view, swapped before, swapped no longer; lag: frames behind detection");
    if let Some(path) = &args.json {
        let map: serde_json::Map<String, serde_json::Value> =
            all.into_iter().map(|(k, r)| (k, serde_json::to_value(r).unwrap_or_default())).collect();
        std::fs::write(path, serde_json::to_string_pretty(&map)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
