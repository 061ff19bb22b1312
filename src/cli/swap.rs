use super::{load_image, save_image, selector, swapper, ModelArgs, SelectorMode};
use crate::face::{Enhancer, FusionPipeline, PipelineSettings};
use anyhow::{ensure, Result};
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Photo whose (largest) face is swapped in.
    #[arg(long)]
    source: PathBuf,
    /// Photo whose faces are replaced.
    #[arg(long)]
    target: PathBuf,
    /// Where to write the result (format from the extension).
    #[arg(long)]
    output: PathBuf,
    #[command(flatten)]
    models: ModelArgs,
    /// Swapper model name (default: the first one present).
    #[arg(long)]
    swapper: Option<String>,
    /// Enhancer model to run on every swapped face (GFPGAN contract).
    #[arg(long)]
    enhancer: Option<String>,
    /// Mix of swapped (1) and original (0) face.
    #[arg(long, default_value_t = 1.0)]
    blend: f32,
    /// Which target faces to swap.
    #[arg(long, value_enum, default_value_t = SelectorMode::One)]
    selector: SelectorMode,
    /// Photo of the person to replace (for --selector reference).
    #[arg(long)]
    reference: Option<PathBuf>,
    /// Largest face distance, (1 - cosine)/2, that counts as the reference person.
    #[arg(long, default_value_t = 0.3)]
    reference_distance: f32,
}

pub fn run(args: Args) -> Result<()> {
    ensure!((0.0..=1.0).contains(&args.blend), "--blend {} is outside 0..1", args.blend);
    let catalog = args.models.catalog()?;
    let mut detector = args.models.detector(&catalog)?;
    let mut recognizer = args.models.recognizer(&catalog)?;
    let swapper = swapper(&catalog, args.swapper.as_deref())?;
    let selector =
        selector(args.selector, args.reference.as_deref(), args.reference_distance, &mut detector, &mut recognizer)?;
    let mut pipeline =
        FusionPipeline::new(detector, recognizer, swapper, PipelineSettings { blend: args.blend, selector });
    if let Some(name) = &args.enhancer {
        pipeline.enhancer = Some(Enhancer::load(&catalog, Some(name))?);
    }
    let source = load_image(&args.source)?;
    pipeline.set_source(&source, &args.source.display().to_string())?;
    let mut frame = load_image(&args.target)?;
    let report = pipeline.process(&mut frame)?;
    save_image(&frame, &args.output)?;
    println!(
        "{}: swapped {} of {} face(s) with {} -> {} ({:.1} ms)",
        args.target.display(),
        report.swapped.len(),
        report.faces.len(),
        pipeline.swapper.entry().name,
        args.output.display(),
        report.timings.total.as_secs_f64() * 1e3
    );
    Ok(())
}
