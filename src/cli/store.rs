use crate::catalog::Catalog;
use crate::config::{Config, DEFAULT_PATH};
use crate::infer::Engines;
use crate::store::{stage_with, Store};
use anyhow::{Context, Result};
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct ConfigArgs {
    /// Configuration file; conf.d/*.toml beside it is merged over it.
    #[arg(long, default_value = DEFAULT_PATH)]
    pub config: PathBuf,
}

impl ConfigArgs {
    pub fn load(&self) -> Result<Config> {
        Ok(Config::load(&self.config)?)
    }
}

#[derive(Debug, clap::Args)]
pub struct StageArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Hash the files already staged again, instead of trusting the hash
    /// recorded when they were copied (and their size); a file that no
    /// longer matches is copied anew.
    #[arg(long)]
    pub verify: bool,
}

#[derive(Debug, clap::Args)]
pub struct LoadArgs {
    #[command(flatten)]
    config: ConfigArgs,
    /// Tier to load (default: models.start_tier).
    #[arg(long)]
    tier: Option<String>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

pub fn check_config(args: ConfigArgs) -> Result<()> {
    let config = args.load()?;
    let catalog = Catalog::open(&config.models.dirs)?;
    for name in config.all_models() {
        let entry = catalog.entry(name).with_context(|| format!("a tier names model `{name}`"))?;
        anyhow::ensure!(
            entry.file.is_file(),
            "a tier names model `{name}`, whose file {} does not exist; put it there or add its folder to models.dirs",
            entry.file.display()
        );
    }
    // Loads the ONNX Runtime library when a model runs on it.
    let engines = Engines::from_settings(&config.inference)?;
    println!(
        "{}: ok ({} tier(s): {}; engine {})",
        args.config.display(),
        config.tier.len(),
        config.all_models().join(", "),
        engines.describe()
    );
    // The package's postinst runs `fusiond warm` before the first start
    // when it sees this line (`auto` may have fallen back to tract).
    if config.inference.builds_engines() && engines.runs_on("ort") {
        println!(
            "TensorRT engines: built at load and cached in {} (`fusiond warm` builds them ahead)",
            config.inference.ort.tensorrt.cache_dir.display()
        );
    }
    Ok(())
}

/// Stages and returns the process exit code (0 all tiers usable, 2 some, 1 none).
pub fn stage_cmd(args: StageArgs) -> Result<u8> {
    let config = args.config.load()?;
    let catalog = Catalog::open(&config.models.dirs)?;
    let report = stage_with(&config, &catalog, args.verify)?;
    for f in &report.report {
        match (&f.error, f.copy_mb_s, f.hash_mb_s) {
            (Some(e), _, _) => println!("  {:<24} FAILED: {e}", f.name),
            (None, Some(c), Some(h)) => println!(
                "  {:<24} copied {:>8.1} MB  copy {c:>7.0} MB/s  hash {h:>7.0} MB/s",
                f.name,
                f.bytes as f64 / 1e6
            ),
            _ if f.action == "verified" => println!("  {:<24} kept (hashed again: it matches)", f.name),
            _ => println!(
                "  {:<24} {} (staged already: the recorded hash and size; --verify hashes it again)",
                f.name, f.action
            ),
        }
    }
    for t in &report.tiers {
        match &t.reason {
            None => println!("tier {}: usable", t.name),
            Some(r) => println!("tier {}: UNUSABLE: {r}", t.name),
        }
    }
    let secs = report.total_ms / 1e3;
    println!(
        "staged into {}: {:.1} MB copied in {:.0} ms ({:.0} MB/s overall)",
        config.models.ramdisk.display(),
        report.bytes_copied as f64 / 1e6,
        report.total_ms,
        report.bytes_copied as f64 / 1e6 / secs.max(1e-9)
    );
    Ok(report.exit_code())
}

/// Seconds since this process started, from /proc (10 ms resolution).
fn since_process_start() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let after_comm = &stat[stat.rfind(')')? + 2..];
    let start_ticks: f64 = after_comm.split_whitespace().nth(19)?.parse().ok()?;
    let uptime: f64 = std::fs::read_to_string("/proc/uptime").ok()?.split_whitespace().next()?.parse().ok()?;
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK).ok()??;
    Some(uptime - start_ticks / hz as f64)
}

pub fn load(args: LoadArgs) -> Result<()> {
    let config = args.config.load()?;
    let store = Store::open(&config, Engines::from_settings(&config.inference)?)?;
    let tier = args.tier.clone().unwrap_or_else(|| config.models.start_tier.clone());
    let (models, degraded) = store.activate(&tier).map_err(anyhow::Error::msg)?.into_parts();
    let ready_s = since_process_start();
    let (rss, peak) = crate::procmem::rss();
    if args.json {
        let per_model: Vec<_> = models
            .all()
            .iter()
            .map(|m| serde_json::json!({"name": m.entry.name, "timings": m.timings, "placement": m.model.placement()}))
            .collect();
        let out = serde_json::json!({
            "tier": models.tier, "degraded": degraded, "ready_s": ready_s,
            "rss_bytes": rss, "peak_rss_bytes": peak, "models": per_model,
        });
        println!("{out}");
        return Ok(());
    }
    for m in models.all() {
        let t = &m.timings;
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        println!(
            "  {:<22} {:<5} {:>7.1} MB  map {:>6.1}  parse {:>6.1}  optimise {:>7.1}  plan {:>6.1}  warm-up {:>7.1} ms  rss +{:.1} MB",
            m.entry.name,
            m.model.placement().engine,
            t.file_bytes as f64 / 1e6,
            ms(t.map),
            ms(t.backend.parse),
            ms(t.backend.optimize),
            ms(t.backend.plan),
            ms(t.warmup),
            t.rss_delta_bytes as f64 / 1e6
        );
    }
    if let Some(reason) = &degraded {
        println!("DEGRADED: running tier {} instead of {tier}: {reason}", models.tier);
    }
    println!(
        "tier {} ready {} after process start; rss {:.1} MB, peak {:.1} MB",
        models.tier,
        ready_s.map_or("?".into(), |s| format!("{:.0} ms", s * 1e3)),
        rss as f64 / 1e6,
        peak as f64 / 1e6
    );
    Ok(())
}
