//! `fusiond warm`: load every tier's models on their configured engines
//! once, so TensorRT's engines, timing caches and EP-context models exist
//! before the daemon's first start. The loading runs in a child process
//! (`warm --in-process`) under a time limit: an engine build that crashes
//! or hangs ends that child, not the install, and gets another attempt.

use super::store::ConfigArgs;
use crate::infer::Engines;
use crate::store::Store;
use anyhow::{bail, Context, Result};
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};

#[derive(Debug, clap::Args)]
pub struct WarmArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Load the models in this process, with no time limit (what the child
    /// that `warm` starts runs).
    #[arg(long)]
    pub in_process: bool,
}

/// How one attempt ended.
#[derive(Debug, PartialEq)]
enum Attempt {
    Exited(ExitStatus),
    TimedOut,
}

pub fn warm(args: WarmArgs) -> Result<()> {
    if args.in_process {
        return load_all(&args.config);
    }
    let config = args.config.load()?;
    let t = &config.inference.ort.tensorrt;
    let limit = Duration::from_secs_f64(t.build_timeout_s);
    for attempt in 1..=t.build_attempts {
        let started = Instant::now();
        let outcome = attempt_once(&args, limit)?;
        let took = started.elapsed().as_secs_f64();
        match outcome {
            Attempt::Exited(s) if s.success() => {
                println!("warm: done in {took:.1} s");
                return Ok(());
            }
            // A load that fails says why and fails again the same way.
            Attempt::Exited(s) if s.code().is_some() => bail!("warm failed ({s}); see the messages above"),
            Attempt::Exited(s) => eprintln!("warm: attempt {attempt} crashed after {took:.1} s ({s})"),
            Attempt::TimedOut => eprintln!(
                "warm: attempt {attempt} ran past inference.ort.tensorrt.build_timeout_s = {} s and was stopped",
                t.build_timeout_s
            ),
        }
    }
    bail!(
        "warm: no attempt of {} finished; raise inference.ort.tensorrt.build_timeout_s or build_attempts, or see \
         docs/engines.md",
        t.build_attempts
    )
}

/// One child `fusiond warm --in-process`, stopped at `limit`.
fn attempt_once(args: &WarmArgs, limit: Duration) -> Result<Attempt> {
    let exe = std::env::current_exe().context("cannot find this fusiond's executable to start the warm child")?;
    let mut child = Command::new(exe)
        .arg("warm")
        .arg("--in-process")
        .arg("--config")
        .arg(&args.config.config)
        .spawn()
        .context("cannot start the warm child process")?;
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().context("cannot wait for the warm child")? {
            return Ok(Attempt::Exited(status));
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(Attempt::TimedOut);
        }
        std::thread::sleep(Duration::from_millis(20).min(limit));
    }
}

/// Loads every model of every tier on its engine and prints where it runs.
fn load_all(args: &ConfigArgs) -> Result<()> {
    let config = args.load()?;
    let store = Store::open(&config, Engines::from_settings(&config.inference)?)?;
    let mut failed = 0;
    let mut fell_back = 0;
    for name in config.all_models() {
        let t = Instant::now();
        match store.model(name) {
            Ok(m) => {
                let p = m.model.placement();
                fell_back += usize::from(!p.failed.is_empty());
                println!(
                    "  {name:<24} {:>8.1} s  on {} {:?}{}{}",
                    t.elapsed().as_secs_f64(),
                    p.engine,
                    p.providers,
                    p.proven_on.map(|s| format!(" (proven: {s})")).unwrap_or_default(),
                    p.failed.iter().map(|f| format!("; {} FAILED: {}", f.provider, f.error)).collect::<String>()
                );
            }
            Err(e) => {
                failed += 1;
                println!("  {name:<24} FAILED: {e}");
            }
        }
    }
    if config.inference.builds_engines() {
        println!("TensorRT caches: {}", config.inference.ort.tensorrt.cache_dir.display());
    }
    anyhow::ensure!(failed == 0, "{failed} model(s) could not be loaded");
    anyhow::ensure!(
        fell_back == 0,
        "{fell_back} model(s) run on a fallback provider: the configured providers above failed, so nothing was \
         built for them; fix the ONNX Runtime install or inference.ort.providers"
    );
    Ok(())
}
