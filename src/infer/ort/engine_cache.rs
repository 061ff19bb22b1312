//! TensorRT's engines on disk, one folder per key. The key holds everything
//! that makes a built engine wrong for this box: the GPU and its compute
//! capability, the TensorRT, CUDA and ONNX Runtime versions, the model's
//! SHA-256, the precision and the input shapes. The folder's name is the
//! key's digest and the key itself is written beside the engines, so a
//! changed key builds anew in another folder and a folder whose key file
//! does not match (tampered, or cut short) is emptied before use. The
//! timing cache depends on the GPU and TensorRT alone and is shared.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::io;
use std::path::{Path, PathBuf};

const KEY_FILE: &str = "key.json";
/// The EP-context model TensorRT writes after a build and loads instead of
/// the model on later starts (the engine embedded).
const CONTEXT_MODEL: &str = "model_ctx.onnx";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineKey {
    pub gpu: String,
    pub compute_capability: String,
    pub tensorrt: String,
    pub cuda: String,
    pub onnxruntime: String,
    pub model_sha256: String,
    /// `fp32`, `fp16`, `int8`, `fp16+int8`.
    pub precision: String,
    /// `name:1x3x640x640`, one per input.
    pub inputs: Vec<String>,
}

fn hex16(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().take(8).map(|b| format!("{b:02x}")).collect()
}

impl EngineKey {
    /// The precision label of the TensorRT flags.
    pub fn precision(fp16: bool, int8: bool) -> String {
        match (fp16, int8) {
            (false, false) => "fp32".into(),
            (true, false) => "fp16".into(),
            (false, true) => "int8".into(),
            (true, true) => "fp16+int8".into(),
        }
    }

    fn json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// The folder name: 16 hex digits of the key's SHA-256.
    pub fn digest(&self) -> String {
        hex16(self.json().as_bytes())
    }

    /// The timing cache's folder name: GPU and TensorRT only.
    fn timing_digest(&self) -> String {
        hex16(format!("{}\n{}\n{}", self.gpu, self.compute_capability, self.tensorrt).as_bytes())
    }
}

/// One key's folder under the cache root.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineDir {
    pub engines: PathBuf,
    pub timing: PathBuf,
    /// Whether the folder was made (or emptied) now: nothing in it was built
    /// for this key yet.
    pub fresh: bool,
}

impl EngineDir {
    /// The folders for `key` under `root`, made when missing. A folder whose
    /// key file is absent or names another key is emptied first.
    pub fn prepare(root: &Path, key: &EngineKey) -> io::Result<EngineDir> {
        let engines = root.join("engines").join(key.digest());
        let timing = root.join("timing").join(key.timing_digest());
        let key_file = engines.join(KEY_FILE);
        let written: Option<EngineKey> = std::fs::read(&key_file).ok().and_then(|b| serde_json::from_slice(&b).ok());
        let fresh = written.as_ref() != Some(key);
        if fresh {
            if engines.exists() {
                log::warn!("engine cache {}: its key file does not match; building anew", engines.display());
                std::fs::remove_dir_all(&engines)?;
            }
            std::fs::create_dir_all(&engines)?;
            // The key goes in last, through a rename: a crash leaves a
            // folder without it, which the next start empties.
            let partial = engines.join(format!("{KEY_FILE}.partial"));
            std::fs::write(&partial, key.json())?;
            std::fs::rename(&partial, &key_file)?;
        }
        std::fs::create_dir_all(&timing)?;
        Ok(EngineDir { engines, timing, fresh })
    }

    /// Where the EP-context model is written and read.
    pub fn context_model(&self) -> PathBuf {
        self.engines.join(CONTEXT_MODEL)
    }

    /// The EP-context model of an earlier build, if one was written.
    pub fn built_context(&self) -> Option<PathBuf> {
        let path = self.context_model();
        let written = std::fs::metadata(&path).map(|m| m.len() > 0).unwrap_or(false);
        (!self.fresh && written).then_some(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> EngineKey {
        EngineKey {
            gpu: "NVIDIA Jetson AGX Orin (tegra234)".into(),
            compute_capability: "8.7".into(),
            tensorrt: "10.3.0".into(),
            cuda: "12.6.68".into(),
            onnxruntime: "1.20.0".into(),
            model_sha256: "ab".repeat(32),
            precision: EngineKey::precision(true, false),
            inputs: vec!["target:1x3x128x128".into(), "source:1x512".into()],
        }
    }

    #[test]
    fn every_field_of_the_key_changes_the_folder() {
        let base = key();
        let changes: [fn(&mut EngineKey); 8] = [
            |k| k.gpu = "NVIDIA H200".into(),
            |k| k.compute_capability = "9.0".into(),
            |k| k.tensorrt = "10.4.0".into(),
            |k| k.cuda = "12.8.0".into(),
            |k| k.onnxruntime = "1.21.0".into(),
            |k| k.model_sha256 = "cd".repeat(32),
            |k| k.precision = EngineKey::precision(false, false),
            |k| k.inputs[0] = "target:1x3x256x256".into(),
        ];
        for change in changes {
            let mut k = base.clone();
            change(&mut k);
            assert_ne!(k.digest(), base.digest(), "{k:?}");
        }
        assert_eq!(base.digest().len(), 16);
    }

    #[test]
    fn a_key_change_builds_anew_and_the_same_key_reuses_the_build() {
        let root = tempfile::tempdir().unwrap();
        let first = EngineDir::prepare(root.path(), &key()).unwrap();
        assert!(first.fresh && first.built_context().is_none());
        std::fs::write(first.context_model(), b"engine").unwrap();
        let again = EngineDir::prepare(root.path(), &key()).unwrap();
        assert!(!again.fresh);
        assert_eq!(again.built_context(), Some(first.context_model()));
        let mut newer = key();
        newer.tensorrt = "10.7.0".into();
        let other = EngineDir::prepare(root.path(), &newer).unwrap();
        assert!(other.fresh && other.engines != first.engines && other.timing != first.timing);
        assert!(other.built_context().is_none());
        let mut fp32 = key();
        fp32.precision = "fp32".into();
        assert_eq!(EngineDir::prepare(root.path(), &fp32).unwrap().timing, first.timing);
    }

    #[test]
    fn a_folder_whose_key_file_does_not_match_is_emptied() {
        let root = tempfile::tempdir().unwrap();
        let dir = EngineDir::prepare(root.path(), &key()).unwrap();
        std::fs::write(dir.context_model(), b"stale engine").unwrap();
        let mut other = key();
        other.gpu = "NVIDIA H200".into();
        std::fs::write(dir.engines.join(KEY_FILE), serde_json::to_string(&other).unwrap()).unwrap();
        let again = EngineDir::prepare(root.path(), &key()).unwrap();
        assert!(again.fresh && !again.context_model().exists());
        std::fs::write(again.context_model(), b"engine").unwrap();
        std::fs::remove_file(again.engines.join(KEY_FILE)).unwrap();
        assert!(EngineDir::prepare(root.path(), &key()).unwrap().built_context().is_none());
    }
}
