//! Finds model files through one or more manifests, memory-maps them and
//! verifies their SHA-256. It needs no inference engine: loading is the
//! store's job.
#![allow(unsafe_code)] // one of the daemon's named unsafe files: it maps model files (memmap2) and drops their pages (madvise).

use crate::manifest::{Kind, Manifest, ManifestError, ModelEntry};
use memmap2::Mmap;
use sha2::{Digest, Sha256};
use std::fs::File;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    #[error("no model named `{name}` in the manifests; known models: {known}")]
    Unknown { name: String, known: String },
    #[error("model `{name}` is a {actual:?}, not a {wanted:?}")]
    WrongKind { name: String, wanted: Kind, actual: Kind },
    #[error("no {kind:?} model file is present in {dirs}; put one there or pass --models DIR")]
    NoneAvailable { kind: Kind, dirs: String },
    #[error("model `{name}`: cannot read {path}: {source}; check that the file exists and is readable")]
    Io { name: String, path: PathBuf, source: std::io::Error },
    #[error("model `{name}`: {path} has {algorithm} {actual} but {expected} is expected; the file is corrupt or tampered with, replace it")]
    Checksum { name: String, path: PathBuf, algorithm: &'static str, expected: String, actual: String },
}

/// A read-only mapping of a verified model file.
pub struct ModelFile {
    pub path: PathBuf,
    map: Mmap,
}

impl AsRef<[u8]> for ModelFile {
    fn as_ref(&self) -> &[u8] {
        &self.map
    }
}

impl ModelFile {
    /// Hands the pages of `range` back to the kernel; the file keeps them.
    pub fn release_pages(&self, range: std::ops::Range<usize>) {
        let Some(len) = range.end.checked_sub(range.start).filter(|&l| l > 0) else { return };
        // SAFETY: the mapping is read-only and never written, so dropping
        // its pages loses nothing: a later read faults them in from the file.
        // A failure only leaves the pages resident.
        #[cfg(unix)]
        let _ = unsafe { self.map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, range.start, len) };
    }
}

impl std::ops::Deref for ModelFile {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.map
    }
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// FaceFusion ships `<model stem>.hash` beside each model: the file's CRC-32
/// as 8 hex digits. Checked when the manifest has no SHA-256 for the model.
fn check_facefusion_hash(entry: &ModelEntry, path: &std::path::Path, bytes: &[u8]) -> Result<(), CatalogError> {
    let hash_path = path.with_extension("hash");
    let Ok(text) = std::fs::read_to_string(&hash_path) else {
        log::warn!(
            "model `{}`: no sha256 in the manifest and no .hash file; loading {} unverified",
            entry.name,
            path.display()
        );
        return Ok(());
    };
    let expected = text.trim().to_ascii_lowercase();
    let actual = format!("{:08x}", crc32fast::hash(bytes));
    if expected != actual {
        return Err(CatalogError::Checksum {
            name: entry.name.clone(),
            path: path.into(),
            algorithm: "crc32 (FaceFusion .hash)",
            expected,
            actual,
        });
    }
    Ok(())
}

/// The manifests of every model directory, searched in order.
pub struct Catalog {
    manifests: Vec<Manifest>,
    verify: bool,
}

impl Catalog {
    pub fn open(dirs: &[PathBuf]) -> Result<Catalog, CatalogError> {
        let manifests = dirs.iter().map(|d| Manifest::for_dir(d)).collect::<Result<_, _>>()?;
        Ok(Catalog { manifests, verify: true })
    }

    /// Whether [`Catalog::open_file`] hashes files (default on). Staged
    /// files were verified while they were copied.
    pub fn set_verify(&mut self, verify: bool) {
        self.verify = verify;
    }

    fn entries(&self) -> impl Iterator<Item = (&Manifest, &ModelEntry)> {
        self.manifests.iter().flat_map(|m| m.entries.iter().map(move |e| (m, e)))
    }

    /// The entry named `name`; the first manifest that has it wins.
    pub fn entry(&self, name: &str) -> Result<&ModelEntry, CatalogError> {
        self.entries().find(|(_, e)| e.name == name).map(|(_, e)| e).ok_or_else(|| CatalogError::Unknown {
            name: name.into(),
            known: self.entries().map(|(_, e)| e.name.as_str()).collect::<Vec<_>>().join(", "),
        })
    }

    /// `name` when given (checked to be of `kind`), else the first entry of
    /// `kind` whose file is present.
    pub fn pick(&self, name: Option<&str>, kind: Kind) -> Result<&ModelEntry, CatalogError> {
        if let Some(name) = name {
            let e = self.entry(name)?;
            return match e.kind() == kind {
                true => Ok(e),
                false => Err(CatalogError::WrongKind { name: name.into(), wanted: kind, actual: e.kind() }),
            };
        }
        self.entries().find(|(_, e)| e.kind() == kind && e.file.is_file()).map(|(_, e)| e).ok_or_else(|| {
            CatalogError::NoneAvailable {
                kind,
                dirs: self.manifests.iter().map(|m| m.dir.display().to_string()).collect::<Vec<_>>().join(", "),
            }
        })
    }

    /// Maps `entry`'s file and checks it against the manifest's SHA-256, or,
    /// for entries without one, against a FaceFusion `<stem>.hash` file
    /// (CRC-32, 8 hex digits) beside it when there is one.
    pub fn open_file(&self, entry: &ModelEntry) -> Result<ModelFile, CatalogError> {
        let path = entry.file.clone();
        let io = |source| CatalogError::Io { name: entry.name.clone(), path: path.clone(), source };
        let file = File::open(&path).map_err(io)?;
        // SAFETY: model files are read-only inputs; the mapping is only read,
        // and a file truncated underneath us is a deployment fault that the
        // checksum below would not hide.
        let map = unsafe { Mmap::map(&file) }.map_err(io)?;
        match &entry.sha256 {
            Some(_) if !self.verify => {}
            Some(expected) => {
                let actual = sha256_hex(&map);
                if &actual != expected {
                    return Err(CatalogError::Checksum {
                        name: entry.name.clone(),
                        path,
                        algorithm: "sha256",
                        expected: expected.clone(),
                        actual,
                    });
                }
            }
            None => check_facefusion_hash(entry, &path, &map)?,
        }
        Ok(ModelFile { path, map })
    }
}
