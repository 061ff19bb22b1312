//! Which provider options the loaded ONNX Runtime knows. An option key that
//! the library does not know makes the provider's registration fail as a
//! whole, so the options fusiond would set are filtered by the version of
//! the library that was opened, and each one left out is named in the log.

use std::fmt;
use std::path::Path;

/// An ONNX Runtime release, `major.minor.patch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct OrtVersion(pub u32, pub u32, pub u32);

impl OrtVersion {
    /// The oldest library fusiond opens: what the `ort` crate needs
    /// without an `api-N` feature. Options of that release are kept when
    /// the version cannot be read.
    pub const FLOOR: OrtVersion = OrtVersion(1, 17, 0);

    /// `1.31.1`, `1.17` (patch 0), or `None`.
    pub fn parse(text: &str) -> Option<OrtVersion> {
        let mut parts = text.trim().split('.').map(|p| p.parse::<u32>().ok());
        let major = parts.next()??;
        let minor = parts.next()??;
        let patch = parts.next().unwrap_or(Some(0))?;
        Some(OrtVersion(major, minor, patch))
    }

    /// The version of the library at `path`: from the file the path
    /// resolves to (`libonnxruntime.so.1.31.1`), else from the build
    /// information the library reports (`git-branch=rel-1.19.0`).
    pub fn of_library(path: &Path, build_info: &str) -> Option<OrtVersion> {
        let resolved = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        let from_name = resolved
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.split_once(".so."))
            .and_then(|(_, v)| OrtVersion::parse(v));
        from_name.or_else(|| {
            let branch = build_info.split("git-branch=").nth(1)?;
            let branch = branch.split([',', ' ']).next()?;
            OrtVersion::parse(branch.strip_prefix("rel-")?)
        })
    }
}

impl fmt::Display for OrtVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

/// The TensorRT provider options fusiond sets, with the release that
/// introduced each key.
const TENSORRT_KEYS: &[(&str, OrtVersion)] = &[
    ("device_id", OrtVersion(1, 14, 0)),
    ("trt_fp16_enable", OrtVersion(1, 14, 0)),
    ("trt_int8_enable", OrtVersion(1, 14, 0)),
    ("trt_max_workspace_size", OrtVersion(1, 14, 0)),
    ("trt_engine_cache_enable", OrtVersion(1, 14, 0)),
    ("trt_engine_cache_path", OrtVersion(1, 14, 0)),
    ("trt_timing_cache_enable", OrtVersion(1, 14, 0)),
    ("trt_profile_min_shapes", OrtVersion(1, 15, 0)),
    ("trt_profile_opt_shapes", OrtVersion(1, 15, 0)),
    ("trt_profile_max_shapes", OrtVersion(1, 15, 0)),
    ("trt_timing_cache_path", OrtVersion(1, 16, 0)),
    ("trt_dump_ep_context_model", OrtVersion(1, 17, 0)),
    ("trt_ep_context_file_path", OrtVersion(1, 17, 0)),
    ("trt_ep_context_embed_mode", OrtVersion(1, 17, 0)),
    ("trt_engine_hw_compatible", OrtVersion(1, 18, 0)),
];

/// The CUDA provider options fusiond sets.
const CUDA_KEYS: &[(&str, OrtVersion)] = &[("device_id", OrtVersion(1, 14, 0))];

/// Options of one provider, in the order they are set.
pub type Options = Vec<(&'static str, String)>;

/// `wanted` split into the options `version` knows and the keys it does
/// not (each logged by the caller). A key missing from `table` is left out
/// too: fusiond passes on no option whose release it does not know.
fn known(table: &[(&str, OrtVersion)], version: OrtVersion, wanted: Options) -> (Options, Vec<&'static str>) {
    let mut kept = Vec::new();
    let mut dropped = Vec::new();
    for (key, value) in wanted {
        match table.iter().find(|(k, _)| *k == key) {
            Some((_, since)) if *since <= version => kept.push((key, value)),
            _ => dropped.push(key),
        }
    }
    (kept, dropped)
}

/// The TensorRT options `version` knows, and the keys left out.
pub fn tensorrt(version: OrtVersion, wanted: Options) -> (Options, Vec<&'static str>) {
    known(TENSORRT_KEYS, version, wanted)
}

/// The CUDA options `version` knows, and the keys left out.
pub fn cuda(version: OrtVersion, wanted: Options) -> (Options, Vec<&'static str>) {
    known(CUDA_KEYS, version, wanted)
}

/// Whether `version` writes and reads EP-context models from TensorRT.
pub fn has_ep_context(version: OrtVersion) -> bool {
    version >= OrtVersion(1, 17, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_from_text_file_names_and_build_info() {
        assert_eq!(OrtVersion::parse("1.31.1"), Some(OrtVersion(1, 31, 1)));
        assert_eq!(OrtVersion::parse("1.17"), Some(OrtVersion(1, 17, 0)));
        assert_eq!(OrtVersion::parse("one.two"), None);
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("libonnxruntime.so.1.18.2");
        std::fs::write(&real, b"").unwrap();
        let link = dir.path().join("libonnxruntime.so");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        assert_eq!(OrtVersion::of_library(&link, ""), Some(OrtVersion(1, 18, 2)));
        let plain = dir.path().join("plain.so");
        let info = "ORT Build Info: git-branch=rel-1.19.0, git-commit-id=26250ae, build type=Release";
        assert_eq!(OrtVersion::of_library(&plain, info), Some(OrtVersion(1, 19, 0)));
        assert_eq!(OrtVersion::of_library(&plain, "git-branch=main, x"), None);
    }

    #[test]
    fn options_newer_than_the_library_are_left_out_and_named() {
        let wanted: Options = vec![
            ("trt_fp16_enable", "1".into()),
            ("trt_timing_cache_path", "/c".into()),
            ("trt_dump_ep_context_model", "1".into()),
            ("trt_engine_hw_compatible", "0".into()),
        ];
        let (kept, dropped) = tensorrt(OrtVersion(1, 16, 3), wanted.clone());
        assert_eq!(kept.iter().map(|(k, _)| *k).collect::<Vec<_>>(), ["trt_fp16_enable", "trt_timing_cache_path"]);
        assert_eq!(dropped, ["trt_dump_ep_context_model", "trt_engine_hw_compatible"]);
        let (kept, dropped) = tensorrt(OrtVersion(1, 31, 1), wanted);
        assert_eq!(kept.len(), 4);
        assert!(dropped.is_empty());
        assert!(!has_ep_context(OrtVersion(1, 16, 0)) && has_ep_context(OrtVersion(1, 17, 0)));
    }

    #[test]
    fn a_key_without_a_release_is_never_passed_on() {
        let (kept, dropped) = cuda(OrtVersion(1, 31, 0), vec![("device_id", "0".into()), ("made_up", "1".into())]);
        assert_eq!(kept, vec![("device_id", "0".to_string())]);
        assert_eq!(dropped, ["made_up"]);
    }
}
