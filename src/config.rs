//! Daemon configuration: a TOML file plus `conf.d/*.toml` fragments merged
//! over it in name order, validated into typed settings. Unknown keys are an
//! error that names the file and the key. Every key and its default is
//! documented in `config/fusiond.toml`.

use serde::Deserialize;
use std::path::{Path, PathBuf};

/// Where the daemon looks when no --config is given.
pub const DEFAULT_PATH: &str = "/etc/fusiond/fusiond.toml";

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("config {path} is invalid: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("config: {0}")]
    Invalid(String),
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ModelsConfig {
    /// Persistent model directories, searched in order.
    pub dirs: Vec<PathBuf>,
    /// tmpfs mount point that models are staged into and loaded from.
    pub ramdisk: PathBuf,
    /// Size limit of the tmpfs when `fusiond stage` mounts it.
    pub ramdisk_size_mib: u64,
    /// Tier the daemon starts in.
    pub start_tier: String,
    /// Load the next tier in the background once the start tier is ready.
    pub preload_next: bool,
    /// Loaded-model cache bounds.
    pub cache_max_models: usize,
    pub cache_max_mib: u64,
    /// Hash staged files again when loading them (staging already did).
    pub verify_on_load: bool,
}

impl Default for ModelsConfig {
    fn default() -> Self {
        ModelsConfig {
            dirs: vec![PathBuf::from("/var/lib/fusiond/models")],
            ramdisk: PathBuf::from("/run/fusiond/models"),
            ramdisk_size_mib: 1024,
            start_tier: "fast".into(),
            preload_next: false,
            cache_max_models: 8,
            cache_max_mib: 2048,
            verify_on_load: false,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TierConfig {
    pub name: String,
    /// Model names from the manifests; one per role (detector, recogniser,
    /// swapper, optional enhancer).
    pub models: Vec<String>,
}

/// Which camera the daemon reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SourceKind {
    /// The V4L2 device when it exists, else the sample frames.
    Auto,
    V4l2,
    Sequence,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CameraConfig {
    pub source: SourceKind,
    /// V4L2 device node or a stable /dev/v4l/by-id/... link.
    pub device: PathBuf,
    /// Pixel formats in order of preference (FourCC: MJPG, YUYV, NV12).
    pub formats: Vec<String>,
    pub width: u32,
    pub height: u32,
    pub fps: u32,
    /// Sample frame folders for the sequence source; the first that exists
    /// is used. Relative paths start at the working directory.
    pub samples: Vec<PathBuf>,
    /// Rate the sample frames are played at.
    pub samples_fps: f32,
    /// Reconnect backoff after the camera is lost: first and longest wait.
    pub reconnect_min_ms: u64,
    pub reconnect_max_ms: u64,
    /// A camera that delivers no frame for this long is treated as lost.
    pub stall_timeout_ms: u64,
}

impl Default for CameraConfig {
    fn default() -> Self {
        CameraConfig {
            source: SourceKind::Auto,
            device: PathBuf::from("/dev/video0"),
            formats: vec!["MJPG".into(), "YUYV".into(), "NV12".into()],
            width: 640,
            height: 480,
            fps: 30,
            samples: vec![
                PathBuf::from("/usr/share/fusiond/samples"),
                PathBuf::from("../shared/camera/two_people_pan"),
            ],
            samples_fps: 15.0,
            reconnect_min_ms: 250,
            reconnect_max_ms: 5000,
            stall_timeout_ms: 2000,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MqttConfig {
    /// Broker host; empty starts an embedded broker on 127.0.0.1:port.
    pub host: String,
    pub port: u16,
    /// Topics hang under `<prefix>/<device_id>`.
    pub prefix: String,
    /// Empty means the hostname.
    pub device_id: String,
    /// Empty means `fusiond-<device_id>`.
    pub client_id: String,
    pub username: String,
    /// File holding the password. A bare file name is looked up in
    /// $CREDENTIALS_DIRECTORY (systemd's LoadCredential=) first.
    pub password_file: String,
    pub tls: bool,
    /// PEM CA bundle for TLS; empty uses the system's roots.
    pub ca_file: PathBuf,
    pub keep_alive_s: u64,
    /// Longest wait between reconnect attempts (the backoff doubles up to it).
    pub reconnect_max_s: u64,
    /// Bound on queued outgoing messages; frames are dropped first.
    pub queue_messages: usize,
}

impl Default for MqttConfig {
    fn default() -> Self {
        MqttConfig {
            host: String::new(),
            port: 1883,
            prefix: "fusiond".into(),
            device_id: String::new(),
            client_id: String::new(),
            username: String::new(),
            password_file: String::new(),
            tls: false,
            ca_file: PathBuf::new(),
            keep_alive_s: 15,
            reconnect_max_s: 5,
            queue_messages: 256,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PipelineConfig {
    /// Run the detector at most this often; faces are tracked in between.
    pub detect_interval_ms: u64,
    /// Swap strength at start, 0..=100.
    pub blend: f32,
    /// `one`, `many` or `reference`.
    pub selector: String,
    /// Source identity at start: an image path or a face bank name; empty
    /// means none (frames are analysed, not swapped, until one is set).
    pub source: String,
    /// Where the face bank (face_bank.safetensors) is kept.
    pub state_dir: PathBuf,
    /// Source embeddings cached by image hash.
    pub source_cache: usize,
    /// Largest source image accepted over MQTT, in bytes and in pixels.
    pub max_source_bytes: usize,
    pub max_source_pixels: u64,
}

impl Default for PipelineConfig {
    fn default() -> Self {
        PipelineConfig {
            detect_interval_ms: 80,
            blend: 100.0,
            selector: "one".into(),
            source: String::new(),
            state_dir: PathBuf::from("/var/lib/fusiond/state"),
            source_cache: 16,
            max_source_bytes: 8 * 1024 * 1024,
            max_source_pixels: 24_000_000,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OutputConfig {
    /// Publish fused frames on `<base>/frame`.
    pub frames: bool,
    /// Frames per second on `<base>/frame` at start (0 is off).
    pub frame_rate: f32,
    /// Highest `frame_rate` a command may set.
    pub max_frame_rate: f32,
    /// JPEG quality 1..=100 of frames and snapshots.
    pub jpeg_quality: u8,
    /// Seconds between messages on `<base>/stats`.
    pub stats_interval_s: u64,
}

impl Default for OutputConfig {
    fn default() -> Self {
        OutputConfig { frames: true, frame_rate: 5.0, max_frame_rate: 30.0, jpeg_quality: 80, stats_interval_s: 10 }
    }
}

/// An inference engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    /// tract: pure Rust, in every build.
    Tract,
    /// ONNX Runtime, loaded at run time; needs a build with the `ort` feature.
    Ort,
}

/// An ONNX Runtime execution provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    Tensorrt,
    Cuda,
    Cpu,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct InferenceConfig {
    /// Engine of every model that `engines` does not name.
    pub engine: EngineKind,
    /// Engine per model name, overriding `engine`.
    pub engines: std::collections::BTreeMap<String, EngineKind>,
    /// tract: threads per matrix product (1 runs on the calling thread).
    pub tract_threads: usize,
    pub ort: OrtConfig,
}

impl Default for InferenceConfig {
    fn default() -> Self {
        InferenceConfig {
            engine: EngineKind::Tract,
            engines: Default::default(),
            tract_threads: 1,
            ort: Default::default(),
        }
    }
}

impl InferenceConfig {
    pub fn engine_for(&self, model: &str) -> EngineKind {
        self.engines.get(model).copied().unwrap_or(self.engine)
    }

    /// Whether any model runs on ONNX Runtime.
    pub fn uses_ort(&self) -> bool {
        self.engine == EngineKind::Ort || self.engines.values().any(|e| *e == EngineKind::Ort)
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OrtConfig {
    /// The ONNX Runtime shared library (1.17 or newer), loaded at start.
    pub library: PathBuf,
    /// Execution providers in order of preference; the CPU provider always
    /// runs what the others do not take.
    pub providers: Vec<ProviderKind>,
    /// A provider that fails to register fails the model load, instead of
    /// falling back to the next provider (always logged and reported).
    pub error_on_failure: bool,
    /// CPU provider: threads per model run.
    pub threads: usize,
    /// CPU provider: the arena allocator (faster, keeps peak memory).
    pub arena: bool,
    pub cuda: CudaConfig,
    pub tensorrt: TensorrtConfig,
}

impl Default for OrtConfig {
    fn default() -> Self {
        OrtConfig {
            library: PathBuf::from("/usr/lib/libonnxruntime.so"),
            providers: vec![ProviderKind::Cpu],
            error_on_failure: false,
            threads: 1,
            arena: true,
            cuda: CudaConfig::default(),
            tensorrt: TensorrtConfig::default(),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CudaConfig {
    pub device_id: i32,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TensorrtConfig {
    pub device_id: i32,
    pub fp16: bool,
    pub int8: bool,
    /// Engine and timing caches. Persistent storage (never the model
    /// ramdisk): building engines takes minutes on a Jetson.
    pub cache_dir: PathBuf,
    /// Builder workspace limit.
    pub max_workspace_mib: u64,
}

impl Default for TensorrtConfig {
    fn default() -> Self {
        TensorrtConfig {
            device_id: 0,
            fp16: true,
            int8: false,
            cache_dir: PathBuf::from("/var/lib/fusiond/state/tensorrt"),
            max_workspace_mib: 1024,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub models: ModelsConfig,
    /// Quality tiers, lowest first.
    pub tier: Vec<TierConfig>,
    pub camera: CameraConfig,
    pub mqtt: MqttConfig,
    pub pipeline: PipelineConfig,
    pub output: OutputConfig,
    pub inference: InferenceConfig,
    pub debug: DebugConfig,
}

/// Switches for tests; never set on a production box.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DebugConfig {
    /// Accept the `stall` command, which hangs the processing loop so the
    /// systemd watchdog fires.
    pub stall_command: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            models: ModelsConfig::default(),
            tier: vec![
                TierConfig {
                    name: "fast".into(),
                    models: vec!["scrfd_500m".into(), "arcface_fr".into(), "inswapper_128".into()],
                },
                TierConfig {
                    name: "quality".into(),
                    models: vec!["scrfd_500m".into(), "arcface_fr".into(), "inswapper_128".into(), "gfpgan_1.4".into()],
                },
            ],
            camera: CameraConfig::default(),
            mqtt: MqttConfig::default(),
            pipeline: PipelineConfig::default(),
            output: OutputConfig::default(),
            inference: InferenceConfig::default(),
            debug: DebugConfig::default(),
        }
    }
}

/// Merges `over` into `base`: tables key by key, everything else replaced.
fn merge(base: &mut toml::Value, over: toml::Value) {
    match (base, over) {
        (toml::Value::Table(b), toml::Value::Table(o)) => {
            for (k, v) in o {
                match b.get_mut(&k) {
                    Some(existing) => merge(existing, v),
                    None => {
                        b.insert(k, v);
                    }
                }
            }
        }
        (b, o) => *b = o,
    }
}

fn parse_fragment(text: &str, path: &Path) -> Result<toml::Value, ConfigError> {
    let err = |message: String| ConfigError::Parse { path: path.into(), message: message.trim().into() };
    // Checking each fragment on its own pins an unknown key to its file.
    toml::from_str::<Config>(text).map_err(|e| err(e.to_string()))?;
    toml::from_str::<toml::Value>(text).map_err(|e| err(e.to_string()))
}

impl Config {
    /// Parses one TOML text (for tests and `check-config`).
    pub fn parse(text: &str, origin: &Path) -> Result<Config, ConfigError> {
        let value = parse_fragment(text, origin)?;
        Config::from_value(value, origin)
    }

    /// Reads `path` (when it exists) and then `<dir of path>/conf.d/*.toml`.
    /// A missing main file means the built-in defaults.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let mut value = toml::Value::Table(Default::default());
        let read = |p: &Path| std::fs::read_to_string(p).map_err(|source| ConfigError::Read { path: p.into(), source });
        match read(path) {
            Ok(text) => merge(&mut value, parse_fragment(&text, path)?),
            Err(ConfigError::Read { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let dropins = path.parent().unwrap_or(Path::new(".")).join("conf.d");
        if let Ok(dir) = std::fs::read_dir(&dropins) {
            let mut files: Vec<PathBuf> = dir
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "toml"))
                .collect();
            files.sort();
            for f in files {
                merge(&mut value, parse_fragment(&read(&f)?, &f)?);
            }
        }
        Config::from_value(value, path)
    }

    fn from_value(value: toml::Value, origin: &Path) -> Result<Config, ConfigError> {
        let config: Config = value
            .try_into()
            .map_err(|e: toml::de::Error| ConfigError::Parse { path: origin.into(), message: e.to_string() })?;
        config.validate()?;
        Ok(config)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let m = &self.models;
        if self.tier.is_empty() {
            return Err(ConfigError::Invalid("at least one [[tier]] is needed".into()));
        }
        for (i, t) in self.tier.iter().enumerate() {
            if t.models.is_empty() {
                return Err(ConfigError::Invalid(format!("tier `{}` lists no models", t.name)));
            }
            if self.tier[..i].iter().any(|o| o.name == t.name) {
                return Err(ConfigError::Invalid(format!("tier `{}` is defined twice", t.name)));
            }
        }
        if self.tier_index(&m.start_tier).is_none() {
            return Err(ConfigError::Invalid(format!(
                "models.start_tier `{}` is not one of the tiers ({})",
                m.start_tier,
                self.tier.iter().map(|t| t.name.as_str()).collect::<Vec<_>>().join(", ")
            )));
        }
        if m.dirs.is_empty() {
            return Err(ConfigError::Invalid("models.dirs is empty; name the persistent model directory".into()));
        }
        if m.ramdisk_size_mib == 0 || m.cache_max_models == 0 || m.cache_max_mib == 0 {
            return Err(ConfigError::Invalid(
                "models.ramdisk_size_mib, cache_max_models and cache_max_mib must be > 0".into(),
            ));
        }
        let bad = |m: String| Err(ConfigError::Invalid(m));
        let c = &self.camera;
        if let Some(f) = c.formats.iter().find(|f| !matches!(f.as_str(), "MJPG" | "YUYV" | "NV12")) {
            return bad(format!("camera.formats: `{f}` is not one of MJPG, YUYV, NV12"));
        }
        if c.formats.is_empty() || c.width == 0 || c.height == 0 || c.width % 2 != 0 || c.fps == 0 {
            return bad("camera.formats must not be empty, width and height must be even and > 0, fps > 0".into());
        }
        if c.reconnect_min_ms == 0 || c.reconnect_max_ms < c.reconnect_min_ms || c.stall_timeout_ms == 0 {
            return bad("camera: need 0 < reconnect_min_ms <= reconnect_max_ms and stall_timeout_ms > 0".into());
        }
        if !(c.samples_fps > 0.0 && c.samples_fps <= 240.0) {
            return bad(format!("camera.samples_fps {} must be in (0, 240]", c.samples_fps));
        }
        let q = &self.mqtt;
        crate::mqtt::Topics::new(&q.prefix, if q.device_id.is_empty() { "x" } else { &q.device_id })
            .map_err(|e| ConfigError::Invalid(e.to_string()))?;
        if q.keep_alive_s < 5 || q.reconnect_max_s == 0 || q.queue_messages < 16 {
            return bad("mqtt: need keep_alive_s >= 5, reconnect_max_s > 0 and queue_messages >= 16".into());
        }
        let p = &self.pipeline;
        if !(0.0..=100.0).contains(&p.blend) || !matches!(p.selector.as_str(), "one" | "many" | "reference") {
            return bad("pipeline: blend must be in 0..=100 and selector one of one, many, reference".into());
        }
        if p.source_cache == 0 || p.max_source_bytes == 0 || p.max_source_pixels == 0 {
            return bad("pipeline: source_cache, max_source_bytes and max_source_pixels must be > 0".into());
        }
        let o = &self.output;
        if !(1..=100).contains(&o.jpeg_quality) || o.stats_interval_s == 0 {
            return bad("output: jpeg_quality must be in 1..=100 and stats_interval_s > 0".into());
        }
        if !(o.max_frame_rate > 0.0 && o.max_frame_rate <= 120.0 && (0.0..=o.max_frame_rate).contains(&o.frame_rate)) {
            return bad("output: need 0 < max_frame_rate <= 120 and 0 <= frame_rate <= max_frame_rate".into());
        }
        let i = &self.inference;
        if i.tract_threads == 0 || i.ort.threads == 0 {
            return bad("inference: tract_threads and ort.threads must be > 0".into());
        }
        if let Some(name) = i.engines.keys().find(|n| !self.all_models().contains(&n.as_str())) {
            return bad(format!("inference.engines names `{name}`, which no [[tier]] uses"));
        }
        if i.ort.providers.is_empty() {
            return bad("inference.ort.providers is empty; list at least \"cpu\"".into());
        }
        let cache = &i.ort.tensorrt.cache_dir;
        if i.ort.providers.contains(&ProviderKind::Tensorrt) && (!cache.is_absolute() || cache.starts_with(&m.ramdisk))
        {
            return bad(format!(
                "inference.ort.tensorrt.cache_dir {} must be an absolute path on persistent storage, not under the \
                 model ramdisk {}: engines take minutes to rebuild",
                cache.display(),
                m.ramdisk.display()
            ));
        }
        Ok(())
    }

    pub fn tier_index(&self, name: &str) -> Option<usize> {
        self.tier.iter().position(|t| t.name == name)
    }

    /// Every model named by any tier, in first-use order, without repeats.
    pub fn all_models(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for m in self.tier.iter().flat_map(|t| &t.models) {
            if !out.contains(&m.as_str()) {
                out.push(m);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_packaged_config_parses_and_matches_the_defaults() {
        let text = include_str!("../config/fusiond.toml");
        let c = Config::parse(text, Path::new("fusiond.toml")).unwrap();
        assert_eq!(c, Config::default());
    }

    #[test]
    fn an_unknown_key_names_the_file_and_the_key() {
        let err = Config::parse("[models]\nramdisk_size = 3\n", Path::new("/etc/x.toml")).unwrap_err().to_string();
        assert!(err.contains("/etc/x.toml") && err.contains("ramdisk_size"), "{err}");
    }

    #[test]
    fn a_start_tier_that_does_not_exist_is_refused() {
        let err = Config::parse("[models]\nstart_tier = \"turbo\"\n", Path::new("c.toml")).unwrap_err().to_string();
        assert!(err.contains("turbo") && err.contains("fast"), "{err}");
    }

    #[test]
    fn dropins_merge_over_the_main_file_in_name_order() {
        let tmp = tempfile::tempdir().unwrap();
        let main = tmp.path().join("fusiond.toml");
        std::fs::write(&main, "[models]\nramdisk_size_mib = 100\ncache_max_models = 3\n").unwrap();
        std::fs::create_dir(tmp.path().join("conf.d")).unwrap();
        std::fs::write(tmp.path().join("conf.d/20-b.toml"), "[models]\nramdisk_size_mib = 300\n").unwrap();
        std::fs::write(tmp.path().join("conf.d/10-a.toml"), "[models]\nramdisk_size_mib = 200\n").unwrap();
        let c = Config::load(&main).unwrap();
        assert_eq!(c.models.ramdisk_size_mib, 300);
        assert_eq!(c.models.cache_max_models, 3);
        std::fs::write(tmp.path().join("conf.d/30-bad.toml"), "[modles]\n").unwrap();
        let err = Config::load(&main).unwrap_err().to_string();
        assert!(err.contains("30-bad.toml") && err.contains("modles"), "{err}");
    }

    #[test]
    fn a_missing_main_file_means_defaults() {
        let c = Config::load(Path::new("/nonexistent/fusiond.toml")).unwrap();
        assert_eq!(c, Config::default());
    }
}
