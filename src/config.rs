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

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub models: ModelsConfig,
    /// Quality tiers, lowest first.
    pub tier: Vec<TierConfig>,
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
