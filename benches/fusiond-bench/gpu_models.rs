//! `fusiond-bench gpu-models`: each model on tract, on ONNX Runtime's CPU
//! provider and on each GPU provider and precision asked for, side by side:
//! load time (a GPU row is started twice, so the second start shows what
//! the engine caches save), first and median run, and how closely its
//! outputs agree with tract's on a crop of a real photo. Every start is a
//! fresh child process.

use anyhow::{bail, Context, Result};
use fusiond::catalog::Catalog;
use fusiond::cli::{load_image, ort_library, EngineArgs};
use fusiond::infer::agreement::{self, Bounds};
use fusiond::infer::{Outputs, Tensor};
use fusiond::store::Loader;
use fusiond::vision::{pack_nchw, Resizer, RgbImage};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Model directory (repeatable).
    #[arg(long = "models", value_name = "DIR", required = true)]
    dirs: Vec<PathBuf>,
    /// Models to time.
    #[arg(long = "model", value_name = "NAME", required = true)]
    names: Vec<String>,
    /// Rows besides tract: ort-cpu, cuda, cuda-fallback (the CPU may run
    /// what CUDA does not take), tensorrt, tensorrt-fp16.
    #[arg(long, value_delimiter = ',', default_value = "ort-cpu,cuda,tensorrt,tensorrt-fp16")]
    rows: Vec<String>,
    /// A photo with a face: image inputs are made from it (the whole photo
    /// for a detector, a crop of its middle for a face model).
    #[arg(long)]
    photo: PathBuf,
    /// Threads of the CPU rows (tract, ort-cpu).
    #[arg(long, default_value_t = 1)]
    cpu_threads: usize,
    /// Timed runs per row after the first.
    #[arg(long, default_value_t = 20)]
    runs: usize,
    /// Timed runs of the CPU rows (default: --runs): an inswapper-size
    /// model takes seconds a run there.
    #[arg(long)]
    cpu_runs: Option<usize>,
    /// The library (--ort-library, with the GPU providers) and TensorRT's
    /// engine caches (--trt-cache, kept between the two starts of a row);
    /// the engine flags themselves are set per row.
    #[command(flatten)]
    engine: EngineArgs,
    /// Write the rows as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Internal: one row (`model:row:start`) in this process; outputs to this file.
    #[arg(long, hide = true, num_args = 2)]
    child: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Row {
    model: String,
    row: String,
    start: u32,
    providers: Vec<String>,
    proven_on: Option<String>,
    failed: Vec<String>,
    load_ms: f64,
    first_ms: f64,
    median_ms: f64,
    #[serde(default)]
    agreement: Option<String>,
}

/// An image input made from `photo`: resized whole for a large input (a
/// detector), the middle of it for a small one (a face model).
fn image_input(photo: &RgbImage, entry: &fusiond::manifest::ModelEntry, shape: &[usize]) -> Tensor {
    let (h, w) = (shape[2] as u32, shape[3] as u32);
    let source = if w <= 256 {
        let side = photo.width().min(photo.height()) / 2;
        let (x, y) = (photo.width() / 2 - side / 2, (photo.height() * 2 / 5).saturating_sub(side / 2));
        image::imageops::crop_imm(photo, x, y, side, side).to_image()
    } else {
        photo.clone()
    };
    let mut resized = RgbImage::new(w, h);
    Resizer::default().resize_into(&source, &mut resized, w, h);
    let mut data = vec![0.0; shape.iter().product()];
    pack_nchw(&resized, entry.channels, &entry.norm, &mut data);
    Tensor::new(shape, data).expect("length matches")
}

/// A unit vector for any other input (a swapper's identity latent).
fn latent(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<f32> = (0..n).map(|i| (i as f32 * 0.61 + 0.3).sin()).collect();
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    Tensor::new(shape, v.into_iter().map(|x| x / norm).collect()).expect("length matches")
}

fn engine_flags(cmd: &mut Command, row: &str, args: &Args) {
    let (engine, providers, fp16) = match row {
        "tract" => ("tract", "cpu", false),
        "ort-cpu" => ("ort", "cpu", false),
        "cuda" => ("ort", "cuda", false),
        "cuda-fallback" => ("ort", "cuda", false),
        "tensorrt" => ("ort", "tensorrt", false),
        _ => ("ort", "tensorrt", true), // tensorrt-fp16
    };
    cmd.args(["--engine", engine, "--ort-providers", providers]);
    cmd.arg("--ort-library").arg(ort_library(args.engine.ort_library.as_deref()));
    if let Some(cache) = &args.engine.trt_cache {
        cmd.arg("--trt-cache").arg(cache);
    }
    if fp16 {
        cmd.arg("--trt-fp16");
    }
    if row.ends_with("fallback") {
        cmd.arg("--cpu-fallback");
    }
    if row == "tract" || row == "ort-cpu" {
        cmd.arg("--threads").arg(args.cpu_threads.to_string());
    }
}

fn child(args: &Args) -> Result<()> {
    let (spec, out) = (&args.child[0], PathBuf::from(&args.child[1]));
    let mut parts = spec.splitn(3, ':');
    let (model, row, start) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""), parts.next().unwrap_or("1"));
    let mut catalog = Catalog::open(&args.dirs)?;
    catalog.set_verify(false);
    let entry = catalog.entry(model)?.clone();
    let loader = Loader::new(catalog, args.engine.engines()?);
    let t = Instant::now();
    let loaded = loader.load_with(&entry, &entry.input_shapes())?;
    let load_ms = t.elapsed().as_secs_f64() * 1e3;
    let photo = load_image(&args.photo)?;
    let feed: Vec<(String, Tensor)> = loaded
        .inputs()
        .iter()
        .map(|i| {
            let t = if i.shape.len() == 4 { image_input(&photo, &entry, &i.shape) } else { latent(&i.shape) };
            (i.name.clone(), t)
        })
        .collect();
    let refs: Vec<(&str, &Tensor)> = feed.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let mut session = loaded.session()?;
    let t = Instant::now();
    let outputs = session.run(&refs)?;
    let first_ms = t.elapsed().as_secs_f64() * 1e3;
    let mut times: Vec<f64> = (0..args.runs.max(1))
        .map(|_| {
            let t = Instant::now();
            session.run(&refs).map(|_| t.elapsed().as_secs_f64() * 1e3)
        })
        .collect::<Result<_, _>>()?;
    times.sort_by(f64::total_cmp);
    let saved: Vec<(String, Vec<usize>, Vec<f32>)> =
        outputs.iter().map(|(n, t)| (n.to_string(), t.shape().to_vec(), t.data().to_vec())).collect();
    std::fs::write(&out, serde_json::to_vec(&saved)?)?;
    let p = loaded.placement();
    let row = Row {
        model: model.into(),
        row: row.into(),
        start: start.parse().unwrap_or(1),
        providers: p.providers,
        proven_on: p.proven_on,
        failed: p.failed.iter().map(|f| format!("{}: {}", f.provider, f.error)).collect(),
        load_ms,
        first_ms,
        median_ms: times[times.len() / 2],
        agreement: None,
    };
    println!("{}", serde_json::to_string(&row)?);
    Ok(())
}

fn read_outputs(path: &Path) -> Result<Outputs> {
    let saved: Vec<(String, Vec<usize>, Vec<f32>)> = serde_json::from_slice(&std::fs::read(path)?)?;
    let names: Arc<[String]> = saved.iter().map(|s| s.0.clone()).collect();
    let tensors = saved.into_iter().map(|(_, s, d)| Tensor::new(&s, d).context("bad output")).collect::<Result<_>>()?;
    Ok(Outputs::new(names, tensors))
}

fn spawn(args: &Args, model: &str, row: &str, start: u32, out: &Path) -> Result<Row> {
    let exe = std::env::current_exe().context("cannot find this executable")?;
    let mut cmd = Command::new(exe);
    cmd.arg("gpu-models").arg("--child").arg(format!("{model}:{row}:{start}")).arg(out);
    let cpu = row == "tract" || row == "ort-cpu";
    let runs = if cpu { args.cpu_runs.unwrap_or(args.runs) } else { args.runs };
    cmd.arg("--photo").arg(&args.photo).arg("--runs").arg(runs.to_string());
    cmd.arg("--model").arg(model);
    for d in &args.dirs {
        cmd.arg("--models").arg(d);
    }
    engine_flags(&mut cmd, row, args);
    let run = cmd.output().context("cannot run a row")?;
    if !run.status.success() {
        bail!("{}", String::from_utf8_lossy(&run.stderr).trim().lines().last().unwrap_or("no message"));
    }
    let line = String::from_utf8_lossy(&run.stdout);
    serde_json::from_str(line.trim().lines().last().unwrap_or("")).with_context(|| format!("unreadable row: {line}"))
}

pub fn run(args: Args) -> Result<()> {
    if !args.child.is_empty() {
        return child(&args);
    }
    let known = ["ort-cpu", "cuda", "cuda-fallback", "tensorrt", "tensorrt-fp16", ""];
    if let Some(r) = args.rows.iter().find(|r| !known.contains(&r.as_str())) {
        bail!("--rows: `{r}` is not one of ort-cpu, cuda, cuda-fallback, tensorrt, tensorrt-fp16");
    }
    if args.engine.trt_cache.is_none() && args.rows.iter().any(|r| r.starts_with("tensorrt")) {
        bail!("--trt-cache DIR is needed for the TensorRT rows");
    }
    let work = tempfile::tempdir()?;
    let mut rows: Vec<Row> = Vec::new();
    println!("fusiond-bench gpu-models: {} runs per row; agreement with tract on {}", args.runs, args.photo.display());
    println!(
        "  {:<16} {:<13} {:>2} {:>9} {:>8} {:>9} {:>8}  agreement / providers",
        "model", "row", "#", "load ms", "1st ms", "median ms", "x tract"
    );
    for model in &args.names {
        let reference = work.path().join(format!("{model}-tract.json"));
        let mut tract_ms = None;
        let asked = args.rows.iter().map(String::as_str).filter(|r| !r.is_empty());
        for row in std::iter::once("tract").chain(asked) {
            let starts = if row == "tract" || row == "ort-cpu" { 1 } else { 2 };
            for start in 1..=starts {
                let out = work.path().join(format!("{model}-{row}.json"));
                match spawn(&args, model, row, start, &out) {
                    Ok(mut r) => {
                        if row == "tract" {
                            tract_ms = Some(r.median_ms);
                        } else {
                            let bounds = if row.ends_with("fp16") { Bounds::FP16 } else { Bounds::FP32 };
                            let verdict = agreement::judge(&read_outputs(&reference)?, &read_outputs(&out)?, bounds);
                            r.agreement = Some(verdict.unwrap_or_else(|e| format!("DISAGREES: {e}")));
                        }
                        print_row(&r, tract_ms);
                        rows.push(r);
                    }
                    Err(e) => println!("  {model:<16} {row:<13} {start:>2} FAILED: {e:#}"),
                }
            }
        }
    }
    println!("  #: the start (2: the same row again, with the engine caches of the first)");
    println!("  agreement: with tract's outputs; FP32 rows within {:?}, FP16 within {:?}", Bounds::FP32, Bounds::FP16);
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&rows)?)?;
    }
    Ok(())
}

fn print_row(r: &Row, tract_ms: Option<f64>) {
    let ratio = tract_ms.filter(|_| r.row != "tract").map(|t| format!("{:.1}x", t / r.median_ms)).unwrap_or_default();
    println!(
        "  {:<16} {:<13} {:>2} {:>9.1} {:>8.2} {:>9.3} {:>8}  {} {:?}{}{}",
        r.model,
        r.row,
        r.start,
        r.load_ms,
        r.first_ms,
        r.median_ms,
        ratio,
        r.agreement.as_deref().unwrap_or("reference"),
        r.providers,
        r.proven_on.as_ref().map(|p| format!(" proven: {p}")).unwrap_or_default(),
        r.failed.iter().map(|f| format!("; {f}")).collect::<String>()
    );
}
