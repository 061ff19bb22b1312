//! The model store: staging into a tmpfs ramdisk at boot ([`stage`]),
//! loading one model on its engine ([`Loader`]), the emap side files
//! ([`emap`]), and models by quality tier with a cache and fallback
//! ([`Store`]).

pub(crate) mod cache;
pub mod emap;
mod loader;
pub mod plan;
pub mod stage;
mod tiers;
pub mod tmpfs;

pub use loader::{LoadedModel, Loader, ModelTimings};
pub use stage::{stage, stage_with, StageReport};
pub use tiers::{Store, TierModels, TierOutcome};

use crate::catalog::CatalogError;
use crate::infer::InferError;
use std::path::PathBuf;

/// Why a model could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    #[error("model `{name}` ({path}): {source}")]
    Load { name: String, path: PathBuf, source: InferError },
    #[error("model `{model}`: {source}")]
    Infer { model: String, source: InferError },
    #[error("model `{model}`: {message}")]
    Contract { model: String, message: String },
    #[error("emap: {0}")]
    Emap(String),
    #[error("the model cache lock was poisoned by a panic; restart fusiond")]
    Poisoned,
}

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
