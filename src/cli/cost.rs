//! `fusiond cost` (hidden): one model, or one 640×480 frame through the
//! whole live path, run `--runs` times after one warm-up run, and nothing
//! else. It is the program `benches/arm-cost.sh` counts the instructions of
//! under qemu-user, on the shipping binary itself: the difference between
//! two run counts is the cost of one run, free of loading and planning.

use super::{load_image, swapper, ModelArgs};
use crate::face::{
    FusionPipeline, LivePipeline, LiveSettings, PipelineSettings, SelectorMode, SmoothSettings, StickySettings,
};
use crate::infer::InputShape;
use crate::infer::Tensor;
use crate::vision::{Resizer, RgbImage};
use anyhow::{Context, Result};
use std::path::PathBuf;

/// The live frame's size, a V4L2 camera's usual 640×480.
const FRAME: [u32; 2] = [640, 480];
/// The camera's frame period, 30 frames a second.
const FRAME_PERIOD: std::time::Duration = std::time::Duration::from_micros(33_333);

#[derive(Debug, clap::Args)]
pub struct CostArgs {
    #[command(subcommand)]
    what: What,
}

#[derive(Debug, clap::Subcommand)]
enum What {
    /// One model at its manifest input size, on fixed pseudo-random inputs.
    Model {
        /// Model name from the manifest.
        model: String,
        /// Runs after the warm-up run.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(0..=10_000))]
        runs: u32,
        #[command(flatten)]
        models: ModelArgs,
    },
    /// One frame through detect, landmarks, tracking, align, identity, swap
    /// and paste-back, every face swapped.
    Frame {
        /// The frame (resized to 640×480).
        #[arg(long)]
        frame: PathBuf,
        /// Photo of the source identity.
        #[arg(long)]
        source: PathBuf,
        /// Swapper model name (default: the first one present).
        #[arg(long)]
        swapper: Option<String>,
        /// Frames after the warm-up one.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(0..=10_000))]
        runs: u32,
        #[command(flatten)]
        models: ModelArgs,
    },
}

pub fn cost(args: CostArgs) -> Result<()> {
    match args.what {
        What::Model { model, runs, models } => model_runs(&models, &model, runs),
        What::Frame { frame, source, swapper, runs, mut models } => {
            frame_runs(&mut models, &frame, &source, swapper.as_deref(), runs)
        }
    }
}

fn model_runs(args: &ModelArgs, name: &str, runs: u32) -> Result<()> {
    let loader = args.loader()?;
    let entry = loader.catalog().entry(name)?;
    let shapes: Vec<InputShape> = entry.input_shapes();
    let model = loader.load_with(entry, &shapes)?;
    // Fixed pseudo-random inputs: a model's cost does not depend on the
    // values, and every configuration sees the same ones.
    let feed = super::tools::filler_inputs(model.inputs());
    let refs: Vec<(&str, &Tensor)> = feed.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let mut session = model.session()?;
    for _ in 0..=runs {
        session.run(&refs).with_context(|| format!("{name} failed to run"))?;
    }
    let out = serde_json::json!({"model": name, "runs": runs, "placement": model.placement(),
        "kernels": model.kernels()});
    println!("{out}");
    Ok(())
}

fn frame_runs(
    args: &mut ModelArgs,
    frame: &std::path::Path,
    source: &std::path::Path,
    swap: Option<&str>,
    runs: u32,
) -> Result<()> {
    let loader = args.loader()?;
    args.fit_detector(&loader, FRAME)?;
    let fusion = FusionPipeline::new(
        args.detector(&loader)?,
        args.recognizer(&loader)?,
        swapper(&loader, swap)?,
        PipelineSettings::default(),
    );
    let mut pipeline = LivePipeline::new(fusion, LiveSettings::still(SelectorMode::Many));
    pipeline.set_source(&load_image(source)?, "--source")?;
    pipeline.set_tracking(SmoothSettings::default(), StickySettings::default());
    let picture = load_image(frame)?;
    let mut fitted = RgbImage::new(FRAME[0], FRAME[1]);
    Resizer::default().resize_into(&picture, &mut fitted, FRAME[0], FRAME[1]);
    // The pipeline's clock advances a camera's frame period a frame, not
    // with the wall: emulated, a frame takes seconds, and what the pipeline
    // does next (tracking, holds, identity refreshes) must not depend on
    // how fast the emulator ran.
    let start = std::time::Instant::now();
    let mut faces = 0;
    for i in 0..=runs {
        let mut rgb = fitted.clone();
        let now = start + FRAME_PERIOD * i;
        let report = pipeline.process(&mut rgb, now).context("the frame failed")?;
        faces = report.faces.len();
    }
    let out = serde_json::json!({"frame": frame, "faces": faces, "runs": runs,
        "engine": loader.engines().describe()});
    println!("{out}");
    Ok(())
}
