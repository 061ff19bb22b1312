use super::{enhancer, load_image, save_image, swapper, ModelArgs};
use crate::face::{
    largest_identity, Blend, FusionPipeline, LivePipeline, LiveSettings, PipelineSettings, SelectorMode,
};
use anyhow::{Context, Result};
use std::path::PathBuf;
use std::time::Instant;

fn parse_selector(s: &str) -> Result<SelectorMode, String> {
    SelectorMode::parse(s).ok_or_else(|| format!("`{s}` is not one, many or reference"))
}

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
    #[arg(long, value_parser = parse_selector, default_value = "one")]
    selector: SelectorMode,
    /// Photo of the person to replace (for --selector reference).
    #[arg(long)]
    reference: Option<PathBuf>,
    /// Largest face distance, (1 - cosine)/2, that counts as the reference person.
    #[arg(long, default_value_t = 0.3)]
    reference_distance: f32,
}

pub fn run(args: Args) -> Result<()> {
    let blend = Blend::new(args.blend * 100.0).with_context(|| format!("--blend {} is outside 0..1", args.blend))?;
    // One run per face or image: a warm-up run would be one more.
    let loader = args.models.loader()?.without_warm_up();
    let mut fusion = FusionPipeline::new(
        args.models.detector(&loader)?,
        args.models.recognizer(&loader)?,
        swapper(&loader, args.swapper.as_deref())?,
        PipelineSettings::default(),
    );
    if let Some(name) = &args.enhancer {
        fusion.enhancer = Some(enhancer(&loader, name)?);
    }
    let reference = match (args.selector, &args.reference) {
        (SelectorMode::Reference, None) => anyhow::bail!("--selector reference needs --reference IMAGE"),
        (SelectorMode::Reference, Some(path)) => {
            let label = path.display().to_string();
            Some(largest_identity(&mut fusion.detector, &mut fusion.recognizer, &load_image(path)?, &label)?)
        }
        _ => None,
    };
    // A still image: detect on its one frame.
    let settings = LiveSettings { blend, ..LiveSettings::still(args.selector) };
    let mut pipeline = LivePipeline::new(fusion, settings);
    if let Some(r) = reference {
        pipeline.lock_reference(r, args.reference_distance);
    }
    let source = load_image(&args.source)?;
    pipeline.set_source(&source, &args.source.display().to_string())?;
    let mut frame = load_image(&args.target)?;
    let report = pipeline.process(&mut frame, Instant::now())?;
    save_image(&frame, &args.output)?;
    println!(
        "{}: swapped {} of {} face(s) with {} -> {} ({:.1} ms)",
        args.target.display(),
        report.swapped.len(),
        report.faces.len(),
        pipeline.fusion().swapper.entry().name,
        args.output.display(),
        report.timings.total.as_secs_f64() * 1e3
    );
    Ok(())
}
