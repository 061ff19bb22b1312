//! `fusiond-bench models`: each model on each engine (tract, ONNX Runtime
//! CPU), FP32 against its INT8 QDQ twin (`<name>_int8`), 1 thread against 2,
//! side by side with the ratios. Every row runs in a fresh child process, so
//! load time and resident memory are that configuration's alone.

use anyhow::{bail, Context, Result};
use fusiond::catalog::Catalog;
use fusiond::cli::bounds as flags;
use fusiond::cli::{ort_library, EngineArgs, EngineChoice};
use fusiond::infer::Tensor;
use fusiond::procmem::rss as loader_rss;
use fusiond::store::Loader;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

const DEFAULT_MODELS: [&str; 4] = ["yunet_2023mar", "scrfd_500m", "arcface_fr", "inswapper_bench"];

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Model directory (repeatable), e.g. ../shared/models and the INT8 output of models/quantize.
    #[arg(long = "models", value_name = "DIR", required = true)]
    dirs: Vec<PathBuf>,
    /// Models to time (default: yunet_2023mar scrfd_500m arcface_fr inswapper_bench, those present).
    #[arg(long = "model", value_name = "NAME")]
    names: Vec<String>,
    /// Timed runs per row, after one warm-up run.
    #[arg(long, default_value_t = 20)]
    runs: usize,
    /// Timed runs for a row whose warm-up run took over a second (the
    /// inswapper-size model runs for seconds on a small CPU).
    #[arg(long, default_value_t = 3)]
    heavy_runs: usize,
    /// Thread counts to compare (each row's --threads).
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    compare_threads: Vec<usize>,
    /// Write the rows as JSON here too.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Also run each tract row with fusiond's kernels capped at these
    /// `FUSIOND_CPU` tiers (`avx2`: an Intel N100's set), beside the widest;
    /// such a row's engine is `tract-<tier>` and its `x tract` is the
    /// widest tier's median over its own.
    #[arg(long, value_delimiter = ',')]
    cpu_tiers: Vec<String>,
    #[command(flatten)]
    engine: EngineArgs,
    /// Internal: time one model in this process and print one JSON row.
    #[arg(long, hide = true)]
    child: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Row {
    model: String,
    engine: String,
    threads: usize,
    input: String,
    file_mb: f64,
    load_ms: f64,
    first_ms: f64,
    median_ms: f64,
    p90_ms: f64,
    rss_mb: f64,
    rss_model_mb: f64,
    peak_mb: f64,
    zero_copy: bool,
    runs: usize,
}

/// Deterministic inputs in [0, 1): the models' cost does not depend on the values.
fn inputs(shapes: &[(String, Vec<usize>)]) -> Vec<(String, Tensor)> {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    shapes
        .iter()
        .map(|(name, shape)| {
            let data = (0..shape.iter().product::<usize>())
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    (state >> 40) as f32 / (1u64 << 24) as f32
                })
                .collect();
            (name.clone(), Tensor::new(shape, data).expect("length matches"))
        })
        .collect()
}

fn child(args: &Args, name: &str) -> Result<Row> {
    let mb = |b: u64| b as f64 / 1e6;
    let (rss_start, _) = loader_rss();
    let mut catalog = Catalog::open(&args.dirs)?;
    // Hashing is the store's cost, not the engine's.
    catalog.set_verify(false);
    let entry = catalog.entry(name)?.clone();
    let loader = Loader::new(catalog, args.engine.engines()?);
    let t = Instant::now();
    let model = loader.load_with(&entry, &entry.input_shapes())?;
    let load_ms = t.elapsed().as_secs_f64() * 1e3;
    let shapes: Vec<(String, Vec<usize>)> = model.inputs().iter().map(|i| (i.name.clone(), i.shape.clone())).collect();
    let feed = inputs(&shapes);
    let refs: Vec<(&str, &Tensor)> = feed.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let mut session = model.session()?;
    let t = Instant::now();
    session.run(&refs)?;
    let first_ms = t.elapsed().as_secs_f64() * 1e3;
    let runs = if first_ms > 1000.0 { args.heavy_runs } else { args.runs };
    // Reserved before the runs: a block kept from one run to the next can
    // split a freed activation's place in the heap (see `NodeTime`).
    let mut times: Vec<f64> = Vec::with_capacity(runs.max(1));
    for _ in 0..runs.max(1) {
        let t = Instant::now();
        session.run(&refs)?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    let (rss, peak) = loader_rss();
    let input = shapes
        .iter()
        .map(|(_, s)| s.iter().map(usize::to_string).collect::<Vec<_>>().join("x"))
        .collect::<Vec<_>>()
        .join("+");
    Ok(Row {
        model: name.into(),
        engine: model.placement().engine.into(),
        threads: args.engine.threads,
        input,
        file_mb: std::fs::metadata(&entry.file).map_or(0.0, |m| mb(m.len())),
        load_ms,
        first_ms,
        median_ms: times[times.len() / 2],
        p90_ms: times[(times.len() * 9 / 10).min(times.len() - 1)],
        rss_mb: mb(rss),
        rss_model_mb: mb(rss.saturating_sub(rss_start)),
        peak_mb: mb(peak),
        zero_copy: model.placement().zero_copy,
        runs: times.len(),
    })
}

fn spawn(args: &Args, name: &str, engine: EngineChoice, threads: usize, tier: Option<&str>) -> Result<Row> {
    let exe = std::env::current_exe().context("cannot find this executable to run the benchmark rows")?;
    let mut cmd = Command::new(exe);
    if let Some(tier) = tier {
        cmd.env("FUSIOND_CPU", tier);
    }
    cmd.arg("models").arg("--child").arg(name).arg("--runs").arg(args.runs.to_string());
    cmd.arg("--heavy-runs").arg(args.heavy_runs.to_string());
    for d in &args.dirs {
        cmd.arg("--models").arg(d);
    }
    cmd.arg("--engine").arg(if engine == EngineChoice::Ort { "ort" } else { "tract" });
    cmd.arg("--threads").arg(threads.to_string());
    cmd.arg("--ort-library").arg(ort_library(args.engine.ort_library.as_deref()));
    if args.engine.tract_stock_ops {
        cmd.arg("--tract-stock-ops");
    }
    let out = cmd.output().context("cannot run a benchmark row")?;
    if !out.status.success() {
        bail!("{}", String::from_utf8_lossy(&out.stderr).trim());
    }
    let line = String::from_utf8_lossy(&out.stdout);
    let mut row: Row = serde_json::from_str(line.trim()).with_context(|| format!("unreadable row: {line}"))?;
    if let Some(tier) = tier {
        row.engine = format!("{}-{tier}", row.engine);
    }
    Ok(row)
}

fn check(args: &Args) -> Result<()> {
    flags::count("--runs", args.runs, 1, 100_000)?;
    flags::count("--heavy-runs", args.heavy_runs, 1, 100_000)?;
    flags::count("--compare-threads (how many)", args.compare_threads.len(), 1, 16)?;
    for tier in &args.cpu_tiers {
        if !matches!(tier.as_str(), "scalar" | "avx2" | "avx512" | "neon" | "dotprod") {
            bail!("--cpu-tiers: {tier} is not scalar, avx2, avx512, neon or dotprod");
        }
    }
    for &t in &args.compare_threads {
        flags::count("--compare-threads", t, 1, fusiond::infer::MAX_THREADS)?;
    }
    Ok(())
}

pub fn run(args: Args) -> Result<()> {
    check(&args)?;
    if let Some(name) = &args.child {
        println!("{}", serde_json::to_string(&child(&args, name)?)?);
        return Ok(());
    }
    let catalog = Catalog::open(&args.dirs)?;
    let present = |n: &str| catalog.entry(n).is_ok_and(|e| e.file.is_file());
    let names: Vec<String> = match args.names.is_empty() {
        true => DEFAULT_MODELS.iter().map(|s| s.to_string()).collect(),
        false => args.names.clone(),
    };
    let library = ort_library(args.engine.ort_library.as_deref());
    let mut engines = vec![EngineChoice::Tract];
    if cfg!(feature = "ort") && library.is_file() {
        engines.push(EngineChoice::Ort);
    } else {
        println!(
            "ONNX Runtime rows skipped: {}",
            match cfg!(feature = "ort") {
                true => format!("no library at {} (pass --ort-library)", library.display()),
                false => "this build has no `ort` feature".into(),
            }
        );
    }
    println!(
        "fusiond-bench models: {} runs per row ({} when a run takes over 1 s) after one warm-up, each row in a fresh \
         process; ONNX Runtime: {}",
        args.runs,
        args.heavy_runs,
        library.display()
    );
    println!(
        "  {:<18} {:<4} {:<10} {:>3} {:>8} {:>8} {:>9} {:>8} {:>7} {:>7} {:>8} {:>8} {:>7}",
        "model",
        "prec",
        "eng",
        "thr",
        "load ms",
        "1st ms",
        "median ms",
        "p90 ms",
        "rss MB",
        "+model",
        "x tract",
        "x int8",
        "x 2thr"
    );
    let mut rows: Vec<(String, &'static str, Row)> = Vec::new();
    for base in &names {
        // `<name>_ort`: the FP32 model in ORT format, which ONNX Runtime runs
        // from the mapped file in place (zero copy); ONNX Runtime only.
        for (variant, prec) in
            [(base.clone(), "fp32"), (format!("{base}_int8"), "int8"), (format!("{base}_ort"), "ortf")]
        {
            if !present(&variant) {
                if prec != "ortf" {
                    println!("  {variant:<18} not present in {:?}; skipped", args.dirs);
                }
                continue;
            }
            for &engine in &engines {
                if prec == "ortf" && engine != EngineChoice::Ort {
                    continue;
                }
                let tiers = match engine {
                    EngineChoice::Tract => args.cpu_tiers.iter().map(|t| Some(t.as_str())).collect(),
                    _ => vec![],
                };
                for &threads in &args.compare_threads {
                    for tier in std::iter::once(None).chain(tiers.iter().copied()) {
                        match spawn(&args, &variant, engine, threads, tier) {
                            Ok(row) => {
                                rows.push((base.clone(), prec, row));
                                print_row(&rows, rows.len() - 1);
                            }
                            Err(e) => println!("  {variant:<18} {prec:<4} {engine:?} {threads}: FAILED: {e:#}"),
                        }
                    }
                }
            }
        }
    }
    println!("  x tract: tract's median / this row's (same model, precision, threads)");
    if !args.cpu_tiers.is_empty() {
        println!("  tract-<tier>: tract with fusiond's kernels capped at FUSIOND_CPU=<tier>; its x tract is the");
        println!("    widest tier's median / this row's (under 1.00x: the capped tier is slower)");
    }
    println!("  x int8:  the FP32 row's median / this INT8 row's (same engine, threads)");
    println!("  x 2thr:  the 1-thread row's median / this row's (same model, precision, engine)");
    println!("  rss MB: whole process after load and runs; +model: added by loading and running the model");
    println!("  ortf: the FP32 model converted to ORT format, run from the mapped file in place (zero copy)");
    if let Some(path) = &args.json {
        let v: Vec<_> = rows.iter().map(|(b, p, r)| serde_json::json!({"base": b, "precision": p, "row": r})).collect();
        std::fs::write(path, serde_json::to_string_pretty(&v)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

fn print_row(rows: &[(String, &'static str, Row)], i: usize) {
    let (base, prec, r) = &rows[i];
    let find = |prec: &str, engine: &str, threads: usize| {
        rows.iter()
            .find(|(b, p, o)| b == base && *p == prec && o.engine == engine && o.threads == threads)
            .map(|(_, _, o)| o.median_ms)
    };
    let ratio = |other: Option<f64>, show: bool| match other {
        Some(o) if show => format!("{:.2}x", o / r.median_ms),
        _ => "".into(),
    };
    let vs_tract = ratio(find(prec, "tract", r.threads), r.engine != "tract");
    let vs_fp32 = ratio(find("fp32", &r.engine, r.threads), *prec == "int8");
    let rss_vs_fp32 = rows
        .iter()
        .find(|(b, p, o)| b == base && *p == "fp32" && o.engine == r.engine && o.threads == r.threads)
        .filter(|_| *prec == "ortf")
        .map(|(_, _, o)| format!("  rss {:.2}x of the ONNX file's", r.rss_mb / o.rss_mb))
        .unwrap_or_default();
    let vs_one = ratio(find(prec, &r.engine, 1), r.threads > 1);
    let label = match *prec {
        "int8" => format!("{base}_int8"),
        "ortf" => format!("{base}_ort"),
        _ => base.clone(),
    };
    println!(
        "  {:<18} {:<4} {:<10} {:>3} {:>8.1} {:>8.1} {:>9.2} {:>8.2} {:>7.1} {:>7.1} {:>8} {:>8} {:>7}{}",
        label,
        prec,
        r.engine,
        r.threads,
        r.load_ms,
        r.first_ms,
        r.median_ms,
        r.p90_ms,
        r.rss_mb,
        r.rss_model_mb,
        vs_tract,
        vs_fp32,
        vs_one,
        if r.zero_copy { format!("  zero-copy{rss_vs_fp32}") } else { String::new() }
    );
}
