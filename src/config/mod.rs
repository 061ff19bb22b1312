//! Daemon configuration: a TOML file plus `conf.d/*.toml` fragments merged
//! over it in name order, then validated section by section. Unknown keys
//! are an error that names the file and the key. Every key and its default
//! is documented in `config/fusiond.toml`. The `[inference]` section is the
//! engines' own settings type; the daemon turns the rest into what its
//! threads need (`daemon::DaemonSettings`).

mod output;
mod sections;

pub use output::OutputConfig;
pub use sections::{CameraConfig, DebugConfig, ModelsConfig, MqttConfig, PipelineConfig, SourceKind, TierConfig};

use crate::http::HttpSettings;
use crate::infer::{InferenceSettings, ProviderKind};
use serde::{Deserialize, Serialize};
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

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub models: ModelsConfig,
    /// Quality tiers, lowest first.
    pub tier: Vec<TierConfig>,
    pub camera: CameraConfig,
    pub mqtt: MqttConfig,
    pub pipeline: PipelineConfig,
    pub output: OutputConfig,
    pub http: HttpSettings,
    pub inference: InferenceSettings,
    pub debug: DebugConfig,
    pub audit: crate::audit::AuditSettings,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            models: ModelsConfig::default(),
            tier: vec![
                TierConfig {
                    name: "fast".into(),
                    models: vec!["scrfd_500m".into(), "arcface_fr".into(), "inswapper_128".into()],
                    precision: Default::default(),
                },
                TierConfig {
                    name: "quality".into(),
                    models: vec!["scrfd_500m".into(), "arcface_fr".into(), "inswapper_128".into(), "gfpgan_1.4".into()],
                    precision: Default::default(),
                },
            ],
            camera: CameraConfig::default(),
            mqtt: MqttConfig::default(),
            pipeline: PipelineConfig::default(),
            output: OutputConfig::default(),
            http: HttpSettings::default(),
            inference: InferenceSettings::default(),
            debug: DebugConfig::default(),
            audit: Default::default(),
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

/// Appends the dotted keys under `at` whose values differ; tables are
/// compared key by key, everything else (arrays included) as a whole.
fn diff(at: &str, a: &toml::Value, b: &toml::Value, out: &mut Vec<String>) {
    let key = |k: &str| if at.is_empty() { k.to_string() } else { format!("{at}.{k}") };
    match (a, b) {
        (toml::Value::Table(x), toml::Value::Table(y)) => {
            for k in x.keys().chain(y.keys().filter(|k| !x.contains_key(*k))) {
                match (x.get(k), y.get(k)) {
                    (Some(va), Some(vb)) => diff(&key(k), va, vb, out),
                    _ => out.push(key(k)),
                }
            }
        }
        _ if a != b => out.push(at.to_string()),
        _ => {}
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
        let read = |p: &Path| std::fs::read_to_string(p).map_err(|source| ConfigError::Read { path: p.into(), source });
        let mut layers = Vec::new();
        match read(path) {
            Ok(text) => layers.push((path.to_path_buf(), text)),
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
                let text = read(&f)?;
                layers.push((f, text));
            }
        }
        Config::layered(&layers, path)
    }

    /// The config that `layers` (file, text) give when each is merged over
    /// the ones before it, as [`Config::load`] reads them; `origin` names
    /// the whole in errors that no single layer caused.
    pub fn layered(layers: &[(PathBuf, String)], origin: &Path) -> Result<Config, ConfigError> {
        let mut value = toml::Value::Table(Default::default());
        for (path, text) in layers {
            merge(&mut value, parse_fragment(text, path)?);
        }
        Config::from_value(value, origin)
    }

    fn from_value(value: toml::Value, origin: &Path) -> Result<Config, ConfigError> {
        let config: Config = value
            .try_into()
            .map_err(|e: toml::de::Error| ConfigError::Parse { path: origin.into(), message: e.to_string() })?;
        config.validate()?;
        Ok(config)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        self.validate_tiers().map_err(ConfigError::Invalid)?;
        let sections = [
            self.models.validate(),
            self.camera.validate(),
            self.mqtt.validate(),
            self.pipeline.validate(),
            self.output.validate(),
            self.http.validate(),
            self.inference.validate(),
            self.validate_engines(),
            self.audit.validate(),
        ];
        sections.into_iter().collect::<Result<(), String>>().map_err(ConfigError::Invalid)
    }

    fn validate_tiers(&self) -> Result<(), String> {
        if self.tier.is_empty() {
            return Err("at least one [[tier]] is needed".into());
        }
        for (i, t) in self.tier.iter().enumerate() {
            if t.models.is_empty() {
                return Err(format!("tier `{}` lists no models", t.name));
            }
            if self.tier[..i].iter().any(|o| o.name == t.name) {
                return Err(format!("tier `{}` is defined twice", t.name));
            }
        }
        if self.tier_index(&self.models.start_tier).is_none() {
            return Err(format!(
                "models.start_tier `{}` is not one of the tiers ({})",
                self.models.start_tier,
                self.tier.iter().map(|t| t.name.as_str()).collect::<Vec<_>>().join(", ")
            ));
        }
        Ok(())
    }

    /// The `[inference]` checks that need the tiers and the ramdisk.
    fn validate_engines(&self) -> Result<(), String> {
        let i = &self.inference;
        if let Some(name) = i.engines.keys().find(|n| !self.all_models().contains(&n.as_str())) {
            return Err(format!("inference.engines names `{name}`, which no [[tier]] uses"));
        }
        let cache = &i.ort.tensorrt.cache_dir;
        let ramdisk = &self.models.ramdisk;
        if i.ort.providers.contains(&ProviderKind::Tensorrt) && (!cache.is_absolute() || cache.starts_with(ramdisk)) {
            return Err(format!(
                "inference.ort.tensorrt.cache_dir {} must be an absolute path on persistent storage, not under the \
                 model ramdisk {}: engines take minutes to rebuild",
                cache.display(),
                ramdisk.display()
            ));
        }
        Ok(())
    }

    /// Dotted names of the keys whose values differ between `self` and
    /// `other` (`mqtt.port`, `tier`), sorted.
    pub fn changed_keys(&self, other: &Config) -> Vec<String> {
        let as_value = |c: &Config| toml::Value::try_from(c).unwrap_or(toml::Value::Table(Default::default()));
        let mut out = Vec::new();
        diff("", &as_value(self), &as_value(other), &mut out);
        out.sort();
        out
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
        let text = include_str!("../../config/fusiond.toml");
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
    fn changed_keys_name_every_difference_by_its_dotted_path() {
        let a = Config::default();
        let b =
            Config::parse("[mqtt]\nport = 1884\nhost = \"broker\"\n[output]\njpeg_quality = 50\n", Path::new("c.toml"))
                .unwrap();
        assert_eq!(a.changed_keys(&b), ["mqtt.host", "mqtt.port", "output.jpeg_quality"]);
        assert!(a.changed_keys(&a.clone()).is_empty());
    }

    #[test]
    fn an_empty_string_where_a_key_can_be_left_out_is_refused() {
        let err = Config::parse("[mqtt]\nhost = \"\"\n", Path::new("c.toml")).unwrap_err().to_string();
        assert!(err.contains("mqtt.host") && err.contains("leave the key out"), "{err}");
        let err = Config::parse("[pipeline]\nselector = \"all\"\n", Path::new("c.toml")).unwrap_err().to_string();
        assert!(err.contains("all"), "{err}");
    }

    #[test]
    fn a_missing_main_file_means_defaults() {
        let c = Config::load(Path::new("/nonexistent/fusiond.toml")).unwrap();
        assert_eq!(c, Config::default());
    }
}
