//! The face bank: named source identities kept as one safetensors file of
//! raw 512-d embeddings (one F32 tensor per name) in the state directory.
//! Writes go to a temporary file renamed over the old one, so a crash or a
//! full disk never leaves a half-written bank.

use crate::face::Embedding;
use crate::manifest::LATENT_LEN;
use safetensors::{tensor::TensorView, Dtype, SafeTensors};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Names beyond this are refused, so commands cannot grow the file forever.
pub const MAX_IDENTITIES: usize = 1000;

#[derive(Debug, thiserror::Error)]
pub enum BankError {
    #[error("face bank {path}: {message}; delete or restore it")]
    Corrupt { path: PathBuf, message: String },
    #[error("face bank {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("face bank is full ({MAX_IDENTITIES} identities); remove some first")]
    Full,
    #[error("no identity named `{0}` in the face bank")]
    Unknown(String),
    #[error("the face bank keeps {LATENT_LEN}-d identities; this recogniser gave {0} values")]
    Length(usize),
}

/// The folder of the bank's thumbnails under the state directory `dir`;
/// `name`'s is `<name>.jpg` there (the HTTP side serves them).
pub fn thumbnail_dir(dir: &Path) -> PathBuf {
    dir.join("bank-thumbnails")
}

pub struct FaceBank {
    path: PathBuf,
    entries: BTreeMap<String, Vec<f32>>,
}

impl FaceBank {
    pub const FILE: &'static str = "face_bank.safetensors";

    /// Opens `<dir>/face_bank.safetensors`; a missing file is an empty bank.
    pub fn open(dir: &Path) -> Result<FaceBank, BankError> {
        let path = dir.join(Self::FILE);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(FaceBank { path, entries: BTreeMap::new() })
            }
            Err(source) => return Err(BankError::Io { path, source }),
        };
        FaceBank::parse(path, &bytes)
    }

    /// The bank in `bytes`, a safetensors file of F32 `[512]` tensors; `path`
    /// is where it is saved to and what errors name.
    pub fn parse(path: PathBuf, bytes: &[u8]) -> Result<FaceBank, BankError> {
        let corrupt = |message: String| BankError::Corrupt { path: path.clone(), message };
        let st = SafeTensors::deserialize(bytes).map_err(|e| corrupt(e.to_string()))?;
        let mut entries = BTreeMap::new();
        for (name, view) in st.tensors() {
            if view.dtype() != Dtype::F32 || view.shape() != [LATENT_LEN] {
                return Err(corrupt(format!("`{name}` is {:?} {:?}, not F32 [512]", view.dtype(), view.shape())));
            }
            let v: Vec<f32> =
                view.data().chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
            entries.insert(name, v);
        }
        Ok(FaceBank { path, entries })
    }

    pub fn names(&self) -> Vec<String> {
        self.entries.keys().cloned().collect()
    }

    pub fn get(&self, name: &str) -> Result<Embedding, BankError> {
        self.entries.get(name).map(|v| Embedding::from_raw(v.clone())).ok_or_else(|| BankError::Unknown(name.into()))
    }

    /// Adds or replaces `name` and saves the bank.
    pub fn insert(&mut self, name: &str, embedding: &Embedding) -> Result<(), BankError> {
        if embedding.raw.len() != LATENT_LEN {
            return Err(BankError::Length(embedding.raw.len()));
        }
        if !self.entries.contains_key(name) && self.entries.len() >= MAX_IDENTITIES {
            return Err(BankError::Full);
        }
        let previous = self.entries.insert(name.to_string(), embedding.raw.clone());
        let saved = self.save();
        if saved.is_err() {
            // Memory and disk stay in agreement.
            match previous {
                Some(p) => self.entries.insert(name.to_string(), p),
                None => self.entries.remove(name),
            };
        }
        saved
    }

    /// Removes `name` (and its thumbnail) and saves the bank.
    pub fn remove(&mut self, name: &str) -> Result<(), BankError> {
        let previous = self.entries.remove(name).ok_or_else(|| BankError::Unknown(name.into()))?;
        let saved = self.save();
        match saved {
            Ok(()) => {
                let _ = std::fs::remove_file(self.thumbnail_path(name));
            }
            Err(_) => {
                self.entries.insert(name.to_string(), previous);
            }
        }
        saved
    }

    /// Where `name`'s thumbnail (a JPEG of the face it was saved from) is
    /// kept: `<dir>/bank-thumbnails/<name>.jpg`. Names hold no `/`.
    pub fn thumbnail_path(&self, name: &str) -> PathBuf {
        thumbnail_dir(self.path.parent().unwrap_or(Path::new("."))).join(format!("{name}.jpg"))
    }

    /// Keeps `jpeg` as `name`'s thumbnail, written whole.
    pub fn set_thumbnail(&self, name: &str, jpeg: &[u8]) -> Result<(), BankError> {
        let path = self.thumbnail_path(name);
        let io = |source| BankError::Io { path: path.clone(), source };
        std::fs::create_dir_all(path.parent().unwrap_or(Path::new("."))).map_err(io)?;
        let tmp = path.with_extension("jpg.tmp");
        std::fs::write(&tmp, jpeg).map_err(io)?;
        std::fs::rename(&tmp, &path).map_err(io)
    }

    fn save(&self) -> Result<(), BankError> {
        let io = |source| BankError::Io { path: self.path.clone(), source };
        let bytes: Vec<(String, Vec<u8>)> =
            self.entries.iter().map(|(n, v)| (n.clone(), v.iter().flat_map(|x| x.to_le_bytes()).collect())).collect();
        let corrupt =
            |e: safetensors::SafeTensorError| BankError::Corrupt { path: self.path.clone(), message: e.to_string() };
        let views = bytes
            .iter()
            .map(|(n, b)| TensorView::new(Dtype::F32, vec![LATENT_LEN], b).map(|v| (n.as_str(), v)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(corrupt)?;
        let data = safetensors::serialize(views, None).map_err(corrupt)?;
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let tmp = self.path.with_extension("safetensors.tmp");
        std::fs::write(&tmp, data).map_err(io)?;
        std::fs::rename(&tmp, &self.path).map_err(io)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn emb(seed: f32) -> Embedding {
        Embedding::from_raw((0..512).map(|i| (i as f32 * seed).sin()).collect())
    }

    #[test]
    fn identities_survive_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let mut bank = FaceBank::open(dir.path()).unwrap();
        bank.insert("alice", &emb(0.1)).unwrap();
        bank.insert("bob", &emb(0.2)).unwrap();
        let again = FaceBank::open(dir.path()).unwrap();
        assert_eq!(again.names(), ["alice", "bob"]);
        assert_eq!(again.get("alice").unwrap().raw, emb(0.1).raw);
        assert!(matches!(again.get("carol"), Err(BankError::Unknown(_))));
        let mut again = again;
        again.remove("alice").unwrap();
        assert!(matches!(again.remove("alice"), Err(BankError::Unknown(_))));
        assert_eq!(FaceBank::open(dir.path()).unwrap().names(), ["bob"], "removed on disk too");
    }

    #[test]
    fn an_identity_of_another_length_is_refused_and_the_bank_is_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let mut bank = FaceBank::open(dir.path()).unwrap();
        let short = Embedding::from_raw(vec![0.5; 128]);
        assert!(bank.insert("alice", &short).unwrap_err().to_string().contains("128"));
        assert!(bank.names().is_empty());
    }

    #[test]
    fn a_corrupt_bank_is_reported_not_loaded() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(FaceBank::FILE), b"not safetensors").unwrap();
        let err = FaceBank::open(dir.path()).err().unwrap().to_string();
        assert!(err.contains("delete or restore"), "{err}");
    }
}
