//! The model manifest: which files exist, their SHA-256, what contract each
//! follows and how it is fed. Parsed strictly: an unknown key is an error
//! that names the file and the key.

mod contract;

use crate::infer::InputShape;
use crate::vision::{ChannelOrder, Normalization, Template};
pub use contract::{Contract, Kind};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The manifest compiled into the binary: the shared test models plus the
/// FaceFusion models that users download themselves.
pub const BUILTIN: &str = include_str!("../../models/manifest.toml");

/// Length of the identity vector every supported swapper takes as `source`.
pub const LATENT_LEN: usize = 512;

#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("cannot read manifest {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("manifest {path} is invalid: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("manifest {path}: model `{name}`: {message}")]
    Invalid { path: PathBuf, name: String, message: String },
}

/// One `[[model]]` table as written in the manifest.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawEntry {
    name: String,
    pub(crate) file: String,
    sha256: Option<String>,
    kind: Option<Kind>,
    contract: Contract,
    licence: String,
    url: Option<String>,
    input_size: Option<[u32; 2]>,
    #[serde(default)]
    resizable: bool,
    channels: Option<ChannelOrder>,
    mean: Option<[f32; 3]>,
    std: Option<[f32; 3]>,
    output_mean: Option<f32>,
    output_std: Option<f32>,
    template: Option<Template>,
    embedding_len: Option<usize>,
    pub(crate) emap: Option<String>,
    emap_sha256: Option<String>,
    emap_source: Option<String>,
    #[serde(default)]
    renormalize_latent: bool,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawManifest {
    #[serde(default)]
    pub(crate) model: Vec<RawEntry>,
}

/// A validated model entry, with every contract default filled in.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelEntry {
    pub name: String,
    /// The model file, resolved against the directory the manifest describes.
    pub file: PathBuf,
    /// Lower-case hex; `None` for files whose checksum the manifest cannot
    /// know (user-downloaded models not yet pinned).
    pub sha256: Option<String>,
    pub contract: Contract,
    pub licence: String,
    pub url: Option<String>,
    /// `[width, height]` the model is loaded for.
    pub input_size: [u32; 2],
    /// Whether `input_size` may be changed at load time (dynamic exports).
    pub resizable: bool,
    pub channels: ChannelOrder,
    pub norm: Normalization,
    pub output_mean: f32,
    pub output_std: f32,
    pub template: Option<Template>,
    /// Recognisers: values in the identity vector, checked when the model
    /// loads (the face bank and the swappers take 512).
    pub embedding_len: Option<usize>,
    /// inswapper's emap side file (safetensors, tensor `emap`).
    pub emap: Option<PathBuf>,
    /// Lower-case hex SHA-256 the side file must have, when pinned.
    pub emap_sha256: Option<String>,
    /// inswapper only: the float model whose graph holds this model's emap
    /// (quantisers rename and fold initializers, so an INT8 graph cannot be
    /// searched for it).
    pub emap_source: Option<String>,
    pub renormalize_latent: bool,
    /// The table as written, for writing the staged manifest.
    pub(crate) raw: RawEntry,
}

impl ModelEntry {
    pub fn kind(&self) -> Kind {
        self.contract.kind()
    }

    /// The fixed input shapes a model of this contract is loaded with.
    pub fn input_shapes(&self) -> Vec<InputShape> {
        let [w, h] = self.input_size.map(|v| v as usize);
        match (self.kind(), self.contract) {
            (Kind::Swapper, _) => {
                vec![InputShape::named("target", &[1, 3, h, w]), InputShape::named("source", &[1, LATENT_LEN])]
            }
            (_, Contract::Landmark68) => vec![InputShape::first(&[1, 1, h, w])],
            _ => vec![InputShape::first(&[1, 3, h, w])],
        }
    }

    /// This detector at the smallest input that holds a `frame`-sized
    /// picture at the scale [`Detector`](crate::face::Detector) letterboxes
    /// it to: the frame shrunk (never enlarged) to fit `input_size`, each side
    /// rounded up to a multiple of 32. A 640×480 camera gets 640×480 instead
    /// of a 640×640 letterbox, a quarter of the work less, at the same scale,
    /// so with the same faces. Fixed exports keep their size.
    pub fn fitted(&self, [fw, fh]: [u32; 2]) -> ModelEntry {
        let [dw, dh] = self.input_size;
        let scale = (dw as f32 / fw.max(1) as f32).min(dh as f32 / fh.max(1) as f32).min(1.0);
        let (w, h) = (((fw as f32 * scale) as u32).clamp(1, dw), ((fh as f32 * scale) as u32).clamp(1, dh));
        let size = [w.div_ceil(32) * 32, h.div_ceil(32) * 32].map(|v| v.max(32));
        match self.resized(size) {
            Ok(e) if self.resizable && size[0] <= dw && size[1] <= dh => e,
            _ => self.clone(),
        }
    }

    /// This entry at another input size, rounded up to a multiple of 32
    /// (which every detector family needs); only resizable exports can.
    pub fn resized(&self, [w, h]: [u32; 2]) -> Result<ModelEntry, String> {
        if !self.resizable && [w, h] != self.input_size {
            return Err(format!(
                "model `{}` has a fixed {:?} input; it cannot run at {w}x{h}",
                self.name, self.input_size
            ));
        }
        if !(32..=4096).contains(&w) || !(32..=4096).contains(&h) {
            return Err(format!("model `{}` cannot run at {w}x{h}: each side must be 32 to 4096", self.name));
        }
        Ok(ModelEntry { input_size: [w.div_ceil(32) * 32, h.div_ceil(32) * 32], ..self.clone() })
    }
}

/// Writes a manifest for staged copies: each entry as it was written, with
/// `file` (and `emap`) renamed to the staged file names and the checksum
/// that staging computed.
pub fn write_staged(entries: &[(&ModelEntry, String, Option<String>, String)]) -> String {
    let model = entries
        .iter()
        .map(|(e, file, emap, sha)| {
            let mut r = e.raw.clone();
            r.file = file.clone();
            r.emap = emap.clone();
            r.emap_source = None;
            r.sha256 = Some(sha.clone());
            r
        })
        .collect();
    let text = toml::to_string(&RawManifest { model }).unwrap_or_default();
    format!("# Written by `fusiond stage`: the models staged into this ramdisk.\n\n{text}")
}

/// Model entries in manifest order, their paths resolved against `dir`.
#[derive(Debug, Clone)]
pub struct Manifest {
    pub dir: PathBuf,
    pub entries: Vec<ModelEntry>,
}

/// An entry's sha256 is 64 hex digits, and its kind, when given, is its
/// contract's.
fn check_hash_and_kind(r: &RawEntry) -> Result<(), String> {
    for (key, hash) in [("sha256", &r.sha256), ("emap_sha256", &r.emap_sha256)] {
        if let Some(s) = hash {
            if s.len() != 64 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(format!("{key} `{s}` is not 64 hex digits"));
            }
        }
    }
    match r.kind {
        Some(kind) if kind != r.contract.kind() => {
            Err(format!("kind {kind:?} does not match contract {:?}, which is a {:?}", r.contract, r.contract.kind()))
        }
        _ => Ok(()),
    }
}

/// `file` and `emap` name files inside the manifest's directory: relative,
/// without `..`, since staging (as root) copies what they name.
fn check_paths(r: &RawEntry) -> Result<(), String> {
    for (key, path) in [("file", Some(&r.file)), ("emap", r.emap.as_ref())] {
        let Some(path) = path else { continue };
        let inside =
            !path.is_empty() && Path::new(path).components().all(|c| matches!(c, std::path::Component::Normal(_)));
        if !inside {
            return Err(format!(
                "{key} `{path}` must be a file name inside the manifest's directory (relative, no `..`): \
                 put the file there, or give its directory in models.dirs"
            ));
        }
    }
    Ok(())
}

impl Manifest {
    /// Parses manifest text. `origin` names the file in error messages; `dir`
    /// is where relative `file` paths point.
    pub fn parse(text: &str, origin: &Path, dir: &Path) -> Result<Manifest, ManifestError> {
        let raw: RawManifest = toml::from_str(text)
            .map_err(|e| ManifestError::Parse { path: origin.into(), message: e.to_string().trim().into() })?;
        let mut entries = Vec::with_capacity(raw.model.len());
        for r in raw.model {
            let invalid =
                |message: String| ManifestError::Invalid { path: origin.into(), name: r.name.clone(), message };
            if entries.iter().any(|e: &ModelEntry| e.name == r.name) {
                return Err(invalid("the name is used twice".into()));
            }
            check_hash_and_kind(&r).map_err(invalid)?;
            check_paths(&r).map_err(invalid)?;
            let (channels, norm, size) = r.contract.defaults();
            let input_size = r.input_size.unwrap_or(size);
            if input_size.iter().any(|&v| v == 0 || v > 4096) {
                return Err(invalid(format!("input_size {input_size:?} must be within 1..=4096")));
            }
            let std = r.std.unwrap_or(norm.std);
            if std.iter().any(|v| *v == 0.0 || !v.is_finite()) {
                return Err(invalid("std must be finite and non-zero".into()));
            }
            let (output_mean, output_std) = r.contract.default_output();
            let embedding_len = match (r.embedding_len, r.contract.default_embedding_len()) {
                (Some(_), None) => return Err(invalid("embedding_len is for recognisers only".into())),
                (Some(0), _) => return Err(invalid("embedding_len must be > 0".into())),
                (given, default) => given.or(default),
            };
            entries.push(ModelEntry {
                file: dir.join(&r.file),
                sha256: r.sha256.as_ref().map(|s| s.to_ascii_lowercase()),
                contract: r.contract,
                licence: r.licence.clone(),
                url: r.url.clone(),
                input_size,
                resizable: r.resizable,
                channels: r.channels.unwrap_or(channels),
                norm: Normalization { mean: r.mean.unwrap_or(norm.mean), std },
                output_mean: r.output_mean.unwrap_or(output_mean),
                output_std: r.output_std.unwrap_or(output_std),
                template: r.template.or(r.contract.default_template()),
                embedding_len,
                emap: r.emap.as_ref().map(|e| dir.join(e)),
                emap_sha256: r.emap_sha256.as_ref().map(|s| s.to_ascii_lowercase()),
                emap_source: r.emap_source.clone(),
                renormalize_latent: r.renormalize_latent,
                name: r.name.clone(),
                raw: r,
            });
        }
        Ok(Manifest { dir: dir.into(), entries })
    }

    /// Reads `dir/manifest.toml` when present, else applies the built-in
    /// manifest to `dir`.
    pub fn for_dir(dir: &Path) -> Result<Manifest, ManifestError> {
        let path = dir.join("manifest.toml");
        match std::fs::read_to_string(&path) {
            Ok(text) => Manifest::parse(&text, &path, dir),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Manifest::parse(BUILTIN, Path::new("<built-in manifest>"), dir)
            }
            Err(source) => Err(ManifestError::Read { path, source }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Manifest, ManifestError> {
        Manifest::parse(text, Path::new("m.toml"), Path::new("/models"))
    }

    #[test]
    fn builtin_manifest_parses() {
        let m = parse(BUILTIN).unwrap();
        assert!(m.entries.iter().any(|e| e.contract == Contract::Yunet));
        assert!(m.entries.iter().any(|e| e.contract == Contract::Inswapper));
    }

    #[test]
    fn files_outside_the_manifests_directory_are_refused() {
        let entry = |file: &str, emap: &str| {
            format!("[[model]]\nname='i'\nfile='{file}'\ncontract='inswapper'\nlicence='x'\n{emap}")
        };
        for (file, emap) in [
            ("/etc/shadow", ""),
            ("../../etc/shadow", ""),
            ("sub/../../x.onnx", ""),
            ("", ""),
            ("i.onnx", "emap='/root/.ssh/id_ed25519'"),
            ("i.onnx", "emap='../i.emap.safetensors'"),
        ] {
            let err = parse(&entry(file, emap)).unwrap_err().to_string();
            assert!(err.contains("inside the manifest's directory"), "{file} {emap}: {err}");
        }
        let m = parse(&entry("sub/i.onnx", "emap='sub/i.emap.safetensors'")).unwrap();
        assert_eq!(m.entries[0].file, Path::new("/models/sub/i.onnx"));
    }

    #[test]
    fn unknown_key_names_the_file_and_the_key() {
        let err = parse("[[model]]\nname='a'\nfile='a.onnx'\ncontract='yunet'\nlicence='MIT'\ncolour='x'\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("m.toml") && err.contains("colour"), "{err}");
    }

    #[test]
    fn contract_defaults_fill_in_normalisation() {
        let m = parse("[[model]]\nname='s'\nfile='s.onnx'\ncontract='scrfd'\nlicence='x'\n").unwrap();
        let e = &m.entries[0];
        assert_eq!(e.norm, Normalization::uniform(127.5, 128.0));
        assert_eq!(e.channels, ChannelOrder::Bgr);
        assert_eq!(e.input_size, [640, 640]);
    }

    #[test]
    fn a_kind_that_contradicts_the_contract_is_rejected() {
        let err =
            parse("[[model]]\nname='s'\nfile='s.onnx'\nkind='swapper'\ncontract='scrfd'\nlicence='x'\n").unwrap_err();
        assert!(err.to_string().contains("does not match contract"), "{err}");
    }

    /// The fitted size holds the frame at the scale a letterbox into the
    /// manifest's size gives it, on the binding side exactly.
    #[test]
    fn a_resizable_detector_fits_the_frame_and_a_fixed_one_keeps_its_size() {
        let m = parse("[[model]]\nname='s'\nfile='s.onnx'\ncontract='scrfd'\nlicence='x'\nresizable=true\n").unwrap();
        let e = &m.entries[0];
        let cases = [
            ([640, 480], [640, 480]),
            ([1280, 720], [640, 384]),
            ([1920, 1080], [640, 384]),
            ([720, 1280], [384, 640]),
            ([300, 200], [320, 224]),
            ([640, 640], [640, 640]),
            ([4000, 10], [640, 32]),
        ];
        for (frame, want) in cases {
            let fitted = e.fitted(frame);
            assert_eq!(fitted.input_size, want, "frame {frame:?}");
            let scale = |[w, h]: [u32; 2]| (w as f32 / frame[0] as f32).min(h as f32 / frame[1] as f32).min(1.0);
            assert_eq!(scale(fitted.input_size), scale(e.input_size), "frame {frame:?}");
        }
        let fixed = parse("[[model]]\nname='y'\nfile='y.onnx'\ncontract='yunet'\nlicence='x'\n").unwrap();
        assert_eq!(fixed.entries[0].fitted([640, 480]).input_size, [640, 640]);
    }

    #[test]
    fn bad_checksum_is_rejected() {
        let err =
            parse("[[model]]\nname='s'\nfile='s.onnx'\nsha256='abc'\ncontract='scrfd'\nlicence='x'\n").unwrap_err();
        assert!(err.to_string().contains("64 hex"), "{err}");
    }
}
