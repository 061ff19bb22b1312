use super::ModelArgs;
use crate::infer::InputShape;
use crate::npy;
use crate::store::emap;
use anyhow::{Context, Result};
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct InferArgs {
    /// Model name from the manifest.
    model: String,
    /// NAME=FILE.npy for each input (float32); the model is planned for
    /// these shapes.
    #[arg(long = "input", value_name = "NAME=FILE", required = true)]
    inputs: Vec<String>,
    /// Directory for one <output>.npy per model output.
    #[arg(long)]
    output_dir: PathBuf,
    #[command(flatten)]
    models: ModelArgs,
}

#[derive(Debug, clap::Args)]
pub struct EmapArgs {
    /// inswapper model name from the manifest (float graph).
    model: String,
    /// Side file to write (default: <model stem>.emap.safetensors beside it).
    #[arg(long)]
    output: Option<PathBuf>,
    #[command(flatten)]
    models: ModelArgs,
}

#[derive(Debug, clap::Args)]
pub struct ProfileArgs {
    /// Model name from the manifest; it is loaded at its manifest input size.
    model: String,
    /// Profiled runs (after one plain warm-up run); each node's time is the
    /// median over them.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    runs: u32,
    /// Rows of the by-node table.
    #[arg(long, default_value_t = 15)]
    top: usize,
    /// Print the whole profile as JSON instead.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    models: ModelArgs,
}

/// Inputs of `shapes` filled with a fixed pseudo-random sequence in [0, 1).
pub(super) fn filler_inputs(specs: &[crate::infer::InputSpec]) -> Vec<(String, crate::infer::Tensor)> {
    let mut x: u32 = 0x9e37_79b9;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        (x >> 8) as f32 / (1u32 << 24) as f32
    };
    specs
        .iter()
        .map(|s| {
            let data = (0..s.shape.iter().product::<usize>()).map(|_| next()).collect();
            (s.name.clone(), crate::infer::Tensor::new(&s.shape, data).expect("length from the shape"))
        })
        .collect()
}

/// Profiles one model on its engine: each node of the plan timed over
/// `--runs` runs, summed by operator and by ONNX node.
pub fn profile(args: ProfileArgs) -> Result<()> {
    let loader = args.models.loader()?;
    let entry = loader.catalog().entry(&args.model)?;
    let model = loader.load_with(entry, &entry.input_shapes())?;
    let phases = model.load_phases();
    // Parse, optimise and plan (no hash check): how long until it can run.
    let load_ms = (phases.parse + phases.optimize + phases.plan).as_secs_f64() * 1e3;
    let inputs = filler_inputs(model.inputs());
    let refs: Vec<(&str, &crate::infer::Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let mut session = model.session()?;
    let start = std::time::Instant::now();
    session.run(&refs)?;
    let plain_ms = start.elapsed().as_secs_f64() * 1e3;
    let mut runs = Vec::new();
    for _ in 0..args.runs {
        match session.profile(&refs)? {
            Some(times) => runs.push(times),
            None => anyhow::bail!(
                "the {} engine does not time its nodes; profile ONNX Runtime with benches/ort_profile.py",
                model.placement().engine
            ),
        }
    }
    let p = crate::infer::profile::summarize(&runs);
    if args.json {
        let shapes: Vec<_> =
            model.inputs().iter().map(|i| serde_json::json!({"name": i.name, "shape": i.shape})).collect();
        println!(
            "{}",
            serde_json::json!({"model": entry.name, "file": entry.file, "engine": model.placement().engine,
            "threads": args.models.engine.threads, "inputs": shapes, "load_ms": load_ms, "warm_up_ms": plain_ms,
            "profile": p})
        );
        return Ok(());
    }
    let shapes: Vec<String> = model.inputs().iter().map(|i| format!("{} {:?}", i.name, i.shape)).collect();
    println!(
        "{} on {}, {} thread(s), {}: loaded in {:.1} ms, {} profiled runs, median total {:.2} ms",
        entry.name,
        model.placement().engine,
        args.models.engine.threads,
        shapes.join(", "),
        load_ms,
        p.runs,
        p.total_ms
    );
    print_shares("operator", &p.by_op, usize::MAX);
    print_shares("ONNX node", &p.by_onnx_node, args.top);
    Ok(())
}

fn print_shares(what: &str, shares: &[crate::infer::profile::Share], top: usize) {
    println!("  {:<40} {:<24} {:>5} {:>9} {:>6}", format!("by {what}"), "op", "nodes", "ms", "%");
    for s in shares.iter().take(top) {
        println!("  {:<40} {:<24} {:>5} {:>9.3} {:>6.1}", s.name, s.op, s.nodes, s.ms, s.percent);
    }
}

fn safe_name(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect()
}

pub fn infer(args: InferArgs) -> Result<()> {
    let loader = args.models.loader()?;
    let entry = loader.catalog().entry(&args.model)?;
    let mut named = Vec::new();
    for spec in &args.inputs {
        let (name, path) = spec.split_once('=').with_context(|| format!("--input `{spec}` is not NAME=FILE.npy"))?;
        let file = std::fs::File::open(path).with_context(|| format!("cannot open {path}"))?;
        let tensor = npy::read(std::io::BufReader::new(file)).with_context(|| format!("cannot read {path}"))?;
        named.push((name.to_string(), tensor));
    }
    let shapes: Vec<InputShape> = named.iter().map(|(n, t)| InputShape::named(n, t.shape())).collect();
    let model = loader.load_with(entry, &shapes)?;
    let mut session = model.session()?;
    let refs: Vec<(&str, &crate::infer::Tensor)> = named.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let outputs = session.run(&refs)?;
    std::fs::create_dir_all(&args.output_dir)
        .with_context(|| format!("cannot create {}", args.output_dir.display()))?;
    for (name, tensor) in outputs.iter() {
        let path = args.output_dir.join(format!("{}.npy", safe_name(name)));
        let file = std::fs::File::create(&path).with_context(|| format!("cannot write {}", path.display()))?;
        npy::write(std::io::BufWriter::new(file), tensor)?;
        println!("{name} {:?} -> {}", tensor.shape(), path.display());
    }
    Ok(())
}

pub fn emap(args: EmapArgs) -> Result<()> {
    let catalog = crate::catalog::Catalog::open(&args.models.dirs())?;
    let entry = catalog.entry(&args.model)?;
    let emap = emap::extract_emap(&catalog.open_file(entry)?)?;
    let out = args.output.unwrap_or_else(|| emap::side_file(entry));
    emap::write_emap(&out, &emap)?;
    println!("{}: emap {:?} -> {}", entry.name, emap.shape(), out.display());
    Ok(())
}
