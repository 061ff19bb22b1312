//! The model store: staging into a tmpfs ramdisk at boot ([`stage`]), and
//! loading, warming and caching models by quality tier ([`Store`]).

pub(crate) mod cache;
mod loader;
pub mod plan;
pub mod stage;
pub mod tmpfs;

pub use loader::{rss as loader_rss, LoadedModel, ModelTimings, Store, TierModels, TierOutcome};
pub use stage::{stage, StageReport};

use crate::catalog::CatalogError;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum StageError {
    #[error("ramdisk {path}: {message}")]
    Ramdisk { path: PathBuf, message: String },
    #[error("ramdisk full while writing {path}: {message}; raise models.ramdisk_size_mib or stage fewer tiers")]
    Full { path: PathBuf, message: String },
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error(
        "{path} has {algorithm} {actual} but {expected} is expected; the file is corrupt or tampered with, replace it"
    )]
    Checksum { path: PathBuf, algorithm: &'static str, expected: String, actual: String },
    #[error("model `{model}`: emap: {message}")]
    Emap { model: String, message: String },
    #[error(transparent)]
    Catalog(CatalogError),
}

impl StageError {
    fn from_io(path: PathBuf, source: std::io::Error) -> StageError {
        if source.raw_os_error() == Some(nix::errno::Errno::ENOSPC as i32) {
            StageError::Full { path, message: source.to_string() }
        } else {
            StageError::Io { path, source }
        }
    }
}
