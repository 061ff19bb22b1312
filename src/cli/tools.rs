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
