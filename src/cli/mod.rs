//! Command-line subcommands. Wiring only: each parses its flags into the
//! library's settings and calls it. The benchmarks are a binary of their
//! own (`benches/fusiond-bench`).

mod audit;
pub mod bounds;
mod cost;
mod detect;
mod run;
mod store;
mod swap;
mod tools;
mod verify;
mod warm;

use crate::face::{Detector, Enhancer, MaskSettings, Recognizer, Swapper};
use crate::infer::{EngineKind, Engines, InferenceSettings, Int8Activations, Precision, ProviderKind};
use crate::manifest::Kind;
use crate::store::{LoadedModel, Loader};
use anyhow::{Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use std::path::{Path, PathBuf};

/// The end of `--help`, and so of the Debian package's manual page.
const FILES: &str = "Files:
  /etc/fusiond/fusiond.toml   the configuration; /etc/fusiond/conf.d/*.toml is merged over it
  /var/lib/fusiond/models     the models (root-owned; `fusiond stage` copies them to the ramdisk)
  /run/fusiond/models         the tmpfs ramdisk the daemon loads the models from
  /var/lib/fusiond/state      the face bank and TensorRT's caches

Run `fusiond <command> --help` for a command's flags.";

/// Where models live when neither --models nor FUSIOND_MODELS says.
pub const DEFAULT_MODEL_DIR: &str = "/var/lib/fusiond/models";

#[derive(Debug, Parser)]
#[command(name = "fusiond", version, about = "Live face fusion for edge boxes", after_help = FILES)]
pub struct Cli {
    /// Log more (-v debug, -vv trace).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the daemon: camera -> fusion -> MQTT, until SIGTERM (SIGHUP rereads the config).
    Run(store::ConfigArgs),
    /// Detect faces in still images and print them.
    Detect(detect::Args),
    /// Swap the source face onto the faces of a target image.
    Swap(swap::Args),
    /// Run one model on .npy inputs and write its raw outputs as .npy.
    Infer(tools::InferArgs),
    /// Extract inswapper's emap from a float graph into its safetensors side file.
    Emap(tools::EmapArgs),
    /// Time each node of a model's plan on tract, summed by operator and by ONNX node.
    Profile(tools::ProfileArgs),
    /// Stage the configured tiers' models into the tmpfs ramdisk (run at boot, as root).
    /// Exit status: 0 every tier usable, 2 some, 1 none.
    Stage(store::StageArgs),
    /// Load and warm a tier as the daemon would, and print where the time and memory go.
    Load(store::LoadArgs),
    /// Validate a configuration without starting anything.
    CheckConfig(store::ConfigArgs),
    /// Load every tier's models on their configured engines once, in a child
    /// process under a time limit, so TensorRT engines are built and cached
    /// before the daemon's first start.
    Warm(warm::WarmArgs),
    /// Check the audit log: `fusiond audit verify FILE...` (0 whole, 1 broken, 2 unreadable).
    Audit(audit::AuditArgs),
    /// Say whether images or videos carry fusiond's invisible mark, with its
    /// box and hour. Exit status: 0 all marked, 1 some not, 2 an error.
    Verify(verify::VerifyArgs),
    /// Run one model or one live frame N times and nothing else (counted
    /// under qemu by benches/arm-cost.sh).
    #[command(hide = true)]
    Cost(cost::CostArgs),
}

/// Model directories and detector choice shared by the subcommands.
#[derive(Debug, Clone, clap::Args)]
pub struct ModelArgs {
    /// Model directory (repeatable; searched in order). Each uses its own
    /// manifest.toml or the built-in one. Default: $FUSIOND_MODELS
    /// (colon-separated), else /var/lib/fusiond/models.
    #[arg(long = "models", value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// Detector model name (default: the first one present).
    #[arg(long)]
    pub detector: Option<String>,
    /// Detector input size (resizable detectors only), e.g. 320 or 640x480.
    #[arg(long, value_parser = parse_size)]
    pub size: Option<[u32; 2]>,
    /// Detector score threshold.
    #[arg(long, default_value_t = 0.5)]
    pub score: f32,
    /// Recogniser model name (default: the first one present).
    #[arg(long)]
    pub recognizer: Option<String>,
    #[command(flatten)]
    pub engine: EngineArgs,
}

/// Inference engine choice for the one-shot commands.
#[derive(Debug, Clone, clap::Args)]
pub struct EngineArgs {
    /// Inference engine for every model.
    #[arg(long, value_enum, default_value_t = EngineChoice::Tract)]
    pub engine: EngineChoice,
    /// ONNX Runtime library (--engine ort). Default: $FUSIOND_ORT_LIBRARY, else
    /// the packaged config's inference.ort.library.
    #[arg(long, value_name = "PATH")]
    pub ort_library: Option<PathBuf>,
    /// Threads per model run (tract: per matrix product; ort: intra-op), 1 to 256.
    #[arg(long, default_value_t = 1, value_parser = parse_threads)]
    pub threads: usize,
    /// tract: run tract's own ops where fusiond has a one-pass kernel
    /// (inference.tract_fused_ops = false).
    #[arg(long)]
    pub tract_stock_ops: bool,
    /// tract: where an INT8 graph's activations are rounded to their 8-bit
    /// grids (inference.tract_int8_activations).
    #[arg(long, value_enum, default_value_t = Int8Activations::Auto)]
    pub int8_activations: Int8Activations,
    /// The float precision models run in (a tier's `precision`): fp16 runs
    /// on tract only, on its FP16 kernels where the CPU has FP16 arithmetic.
    #[arg(long, value_enum, default_value_t = Precision::Fp32)]
    pub precision: Precision,
    /// ONNX Runtime's execution providers in order of preference, e.g.
    /// `cuda` or `tensorrt,cuda` (inference.ort.providers; default cpu).
    /// With a GPU provider the CPU never stands in for it.
    #[arg(long, value_delimiter = ',', value_parser = parse_provider)]
    pub ort_providers: Vec<ProviderKind>,
    /// Let the CPU provider run what the GPU providers do not take
    /// (inference.ort.cpu_fallback).
    #[arg(long)]
    pub cpu_fallback: bool,
    /// TensorRT may build FP16 kernels, after the FP16 self-test
    /// (inference.ort.tensorrt.fp16).
    #[arg(long)]
    pub trt_fp16: bool,
    /// TensorRT's engine caches (inference.ort.tensorrt.cache_dir).
    #[arg(long, value_name = "DIR")]
    pub trt_cache: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EngineChoice {
    Tract,
    Ort,
    /// ONNX Runtime when the build has it and the library loads, else tract.
    Auto,
}

impl EngineArgs {
    pub fn inference(&self) -> InferenceSettings {
        let mut c = InferenceSettings {
            engine: match self.engine {
                EngineChoice::Tract => EngineKind::Tract,
                EngineChoice::Ort => EngineKind::Ort,
                EngineChoice::Auto => EngineKind::Auto,
            },
            tract_threads: self.threads.max(1),
            tract_fused_ops: !self.tract_stock_ops,
            tract_int8_activations: self.int8_activations,
            ..InferenceSettings::default()
        };
        c.ort.threads = self.threads.max(1);
        c.ort.library = ort_library(self.ort_library.as_deref());
        if !self.ort_providers.is_empty() {
            c.ort.providers = self.ort_providers.clone();
        }
        c.ort.tensorrt.fp16 = self.trt_fp16;
        c.ort.cpu_fallback = self.cpu_fallback;
        if let Some(dir) = &self.trt_cache {
            c.ort.tensorrt.cache_dir = dir.clone();
        }
        c
    }

    pub fn engines(&self) -> Result<Engines> {
        Ok(Engines::from_settings(&self.inference())?)
    }
}

/// `explicit`, else $FUSIOND_ORT_LIBRARY, else the configured default.
pub fn ort_library(explicit: Option<&Path>) -> PathBuf {
    explicit
        .map(Path::to_path_buf)
        .or_else(|| std::env::var_os("FUSIOND_ORT_LIBRARY").map(PathBuf::from))
        .unwrap_or_else(|| InferenceSettings::default().ort.library)
}

fn parse_provider(s: &str) -> Result<ProviderKind, String> {
    match s.trim() {
        "cpu" => Ok(ProviderKind::Cpu),
        "cuda" => Ok(ProviderKind::Cuda),
        "tensorrt" => Ok(ProviderKind::Tensorrt),
        other => Err(format!("`{other}` is not an execution provider: cpu, cuda or tensorrt")),
    }
}

fn parse_threads(s: &str) -> Result<usize, String> {
    let max = crate::infer::MAX_THREADS;
    match s.trim().parse::<usize>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!("`{s}` is not a thread count from 1 to {max}")),
    }
}

/// Where the one-shot commands cache what they read out of models (the
/// emap): $FUSIOND_CACHE_DIR, else $XDG_CACHE_HOME/fusiond, else
/// ~/.cache/fusiond.
fn user_cache_dir() -> Option<PathBuf> {
    let env = |name| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    env("FUSIOND_CACHE_DIR")
        .or_else(|| env("XDG_CACHE_HOME").map(|d| d.join("fusiond")))
        .or_else(|| env("HOME").map(|d| d.join(".cache/fusiond")))
}

fn parse_size(s: &str) -> Result<[u32; 2], String> {
    let parse = |v: &str| v.trim().parse::<u32>().map_err(|_| format!("`{s}` is not a size like 640 or 640x480"));
    match s.split_once('x') {
        Some((w, h)) => Ok([parse(w)?, parse(h)?]),
        None => parse(s).map(|v| [v, v]),
    }
}

impl ModelArgs {
    /// The model directories: --models, else $FUSIOND_MODELS, else the default.
    pub fn dirs(&self) -> Vec<PathBuf> {
        if !self.dirs.is_empty() {
            self.dirs.clone()
        } else if let Ok(env) = std::env::var("FUSIOND_MODELS") {
            std::env::split_paths(&env).collect()
        } else {
            vec![PathBuf::from(DEFAULT_MODEL_DIR)]
        }
    }

    pub fn loader(&self) -> Result<Loader> {
        let loader = Loader::open(&self.dirs(), self.engine.engines()?)?;
        Ok(loader.with_cache(user_cache_dir()).with_precision(self.engine.precision))
    }

    /// The detector model, at --size when given (resizable exports only).
    pub fn detector_model(&self, loader: &Loader) -> Result<LoadedModel> {
        let mut entry = loader.catalog().pick(self.detector.as_deref(), Kind::Detector)?.clone();
        if let Some(size) = self.size {
            entry = entry.resized(size).map_err(anyhow::Error::msg)?;
        }
        Ok(loader.load(&entry)?)
    }

    /// Unless --size is given, sets it to the detector fitted to a
    /// `frame`-sized picture, as the daemon fits it to its camera
    /// (`pipeline.fit_detector`; fixed exports keep their size).
    pub fn fit_detector(&mut self, loader: &Loader, frame: [u32; 2]) -> Result<()> {
        if self.size.is_none() {
            let entry = loader.catalog().pick(self.detector.as_deref(), Kind::Detector)?;
            self.size = Some(entry.fitted(frame).input_size);
        }
        Ok(())
    }

    pub fn detector(&self, loader: &Loader) -> Result<Detector> {
        if !(0.0..=1.0).contains(&self.score) {
            anyhow::bail!("--score {} is outside 0..1", self.score);
        }
        let m = self.detector_model(loader)?;
        let mut d = Detector::new(m.entry, &*m.model)?;
        d.settings.score_threshold = self.score;
        Ok(d)
    }

    /// The detector again at `size`×`size`, for refining tracks on crops
    /// (`pipeline.refine_size`).
    pub fn refiner(&self, loader: &Loader, size: u32) -> Result<Detector> {
        let main = loader.catalog().pick(self.detector.as_deref(), Kind::Detector)?;
        let m = loader.load(&main.resized([size, size]).map_err(anyhow::Error::msg)?)?;
        let mut d = Detector::new(m.entry, &*m.model)?;
        d.settings.score_threshold = self.score;
        Ok(d)
    }

    pub fn recognizer(&self, loader: &Loader) -> Result<Recognizer> {
        let m = loader.pick(self.recognizer.as_deref(), Kind::Recognizer)?;
        Ok(Recognizer::new(m.entry, &*m.model)?)
    }
}

pub fn swapper(loader: &Loader, name: Option<&str>) -> Result<Swapper> {
    let m = loader.pick(name, Kind::Swapper)?;
    Ok(Swapper::new(m.entry, &*m.model, m.emap, MaskSettings::default())?)
}

pub fn enhancer(loader: &Loader, name: &str) -> Result<Enhancer> {
    let m = loader.pick(Some(name), Kind::Enhancer)?;
    Ok(Enhancer::new(m.entry, &*m.model, MaskSettings::default())?)
}

pub fn load_image(path: &Path) -> Result<image::RgbImage> {
    let img = image::open(path).with_context(|| format!("cannot decode image {}", path.display()))?;
    Ok(img.to_rgb8())
}

pub fn save_image(img: &image::RgbImage, path: &Path) -> Result<()> {
    img.save(path).with_context(|| format!("cannot write image {}", path.display()))
}

/// Runs the command; the `u8` is the exit status when it succeeded.
pub fn run(cli: Cli) -> Result<u8> {
    // The one-shot commands load their models and run them once or twice:
    // their peak memory is what limits a small board, and the page faults
    // of mapping every big block on its own cost little over so few runs.
    if matches!(cli.command, Command::Detect(_) | Command::Swap(_) | Command::Infer(_)) {
        crate::procmem::map_big_blocks_on_their_own();
    }
    match cli.command {
        Command::Run(a) => run::run(a).map(|()| 0),
        Command::Detect(a) => detect::run(a).map(|()| 0),
        Command::Swap(a) => swap::run(a).map(|()| 0),
        Command::Infer(a) => tools::infer(a).map(|()| 0),
        Command::Profile(a) => tools::profile(a).map(|()| 0),
        Command::Emap(a) => tools::emap(a).map(|()| 0),
        Command::Stage(a) => store::stage_cmd(a),
        Command::Load(a) => store::load(a).map(|()| 0),
        Command::CheckConfig(a) => store::check_config(a).map(|()| 0),
        Command::Warm(a) => warm::warm(a).map(|()| 0),
        Command::Cost(a) => cost::cost(a).map(|()| 0),
        Command::Verify(a) => verify::verify(a),
        Command::Audit(a) => audit::audit(a),
    }
}
