//! inswapper's emap: the `[512, 512]` matrix that turns an ArcFace identity
//! into the swapper's latent. It lives in a safetensors side file beside the
//! model (`<stem>.emap.safetensors`, tensor `emap`), written by `fusiond emap`
//! or by staging; without one it is read from the float graph, whose last
//! initializer it is, once: the copy read is cached under the loader's cache
//! folder as `emap-<the float model's SHA-256>.safetensors`, so a changed
//! model is never paired with an old emap.

use super::StoreError;
use crate::catalog::Catalog;
use crate::infer::{onnx, Tensor};
use crate::manifest::{ModelEntry, LATENT_LEN};
use std::path::{Path, PathBuf};

const EMAP_TENSOR: &str = "emap";

/// Default side-file path for `model`: `<stem>.emap.safetensors` beside it.
pub fn emap_path(model: &Path) -> PathBuf {
    model.with_extension("emap.safetensors")
}

/// The side file `entry` names, or the default one beside its model.
pub fn side_file(entry: &ModelEntry) -> PathBuf {
    entry.emap.clone().unwrap_or_else(|| emap_path(&entry.file))
}

/// Reads insightface's emap from a float inswapper graph (its last
/// initializer), checked to be `[512, 512]`.
pub fn extract_emap(onnx_bytes: &[u8]) -> Result<Tensor, StoreError> {
    let err = StoreError::Emap;
    let (name, t) = onnx::last_initializer(onnx_bytes).map_err(|e| err(e.to_string()))?;
    match t.shape() {
        [a, b] if a == b => Ok(t),
        s => Err(err(format!(
            "the last initializer `{name}` has shape {s:?}, not a square emap{}",
            onnx::NOT_A_FLOAT_GRAPH
        ))),
    }
}

/// Writes a side file whole: into a temporary file beside it, then renamed,
/// so a reader never sees half of one.
pub fn write_emap(path: &Path, emap: &Tensor) -> Result<(), StoreError> {
    let err = StoreError::Emap;
    let bytes: Vec<u8> = emap.data().iter().flat_map(|v| v.to_le_bytes()).collect();
    let view = safetensors::tensor::TensorView::new(safetensors::Dtype::F32, emap.shape().to_vec(), &bytes)
        .map_err(|e| err(e.to_string()))?;
    let data = safetensors::serialize([(EMAP_TENSOR, view)], None).map_err(|e| err(e.to_string()))?;
    let cannot = |e: std::io::Error| err(format!("cannot write {}: {e}", path.display()));
    let partial = path.with_extension(format!("partial.{}", std::process::id()));
    std::fs::write(&partial, data).map_err(cannot)?;
    std::fs::rename(&partial, path).map_err(|e| {
        let _ = std::fs::remove_file(&partial);
        cannot(e)
    })
}

/// Where the emap read from the float model with SHA-256 `sha256` is cached.
pub fn cache_path(dir: &Path, sha256: &str) -> PathBuf {
    dir.join(format!("emap-{sha256}.safetensors"))
}

/// Reads a side file, checked to hold one `[rows, 512]` F32 tensor.
pub fn read_emap(path: &Path) -> Result<Tensor, StoreError> {
    let err = |m: String| StoreError::Emap(format!("{}: {m}; regenerate it with `fusiond emap`", path.display()));
    // A side file holds one small matrix (1 MiB for inswapper's): read, not mapped.
    let bytes = std::fs::read(path).map_err(|e| err(e.to_string()))?;
    parse_emap(&bytes).map_err(err)
}

/// The emap in a side file's bytes.
pub fn parse_emap(bytes: &[u8]) -> Result<Tensor, String> {
    let st = safetensors::SafeTensors::deserialize(bytes).map_err(|e| e.to_string())?;
    let view = st.tensor(EMAP_TENSOR).map_err(|e| e.to_string())?;
    if view.dtype() != safetensors::Dtype::F32 {
        return Err(format!("tensor `emap` is {:?}, not F32", view.dtype()));
    }
    if view.shape().len() != 2 || view.shape()[1] != LATENT_LEN {
        return Err(format!("tensor `emap` has shape {:?}, not [rows, {LATENT_LEN}]", view.shape()));
    }
    let data = view.data().chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
    Tensor::new(view.shape(), data).ok_or_else(|| "tensor `emap` has a bad length".into())
}

/// The emap for `entry`: its side file when present, else the copy cached
/// under `cache` for its float model's SHA-256, else read from the float
/// graph (`emap_source`, or the model itself) and cached there. A float
/// model the manifest has no SHA-256 for is read every time.
///
/// `mapped` is `entry`'s own file, already mapped and checked by the
/// loader: when the emap is in that graph it is read from those bytes, so
/// the file is neither mapped nor hashed a second time.
pub fn load_emap(
    catalog: &Catalog,
    entry: &ModelEntry,
    cache: Option<&Path>,
    mapped: &[u8],
) -> Result<Tensor, StoreError> {
    let side = side_file(entry);
    if side.is_file() {
        check_side_file(entry, &side)?;
        return read_emap(&side);
    }
    let cached = match (cache, &float_entry(catalog, entry)?.sha256) {
        (Some(dir), Some(sha256)) => Some(cache_path(dir, sha256)),
        _ => None,
    };
    if let Some(path) = cached.as_deref().filter(|p| p.is_file()) {
        match read_emap(path) {
            Ok(emap) => return Ok(emap),
            Err(e) => log::warn!("model `{}`: the cached emap is unusable ({e}); reading the graph again", entry.name),
        }
    }
    log::info!(
        "model `{}`: no emap side file at {}; reading it from the graph{}",
        entry.name,
        side.display(),
        match &cached {
            Some(path) => format!(" and caching it in {}", path.display()),
            None => format!(" (pin its sha256 in the manifest to cache it, or run `fusiond emap {}`)", entry.name),
        }
    );
    let emap = match entry.emap_source {
        None => in_graph(entry, mapped)?,
        Some(_) => from_graph(catalog, entry)?,
    };
    if let Some(path) = cached {
        let written = std::fs::create_dir_all(path.parent().unwrap_or(Path::new(".")))
            .map_err(|e| StoreError::Emap(format!("cannot create {}: {e}", path.display())))
            .and_then(|()| write_emap(&path, &emap));
        if let Err(e) = written {
            log::warn!("model `{}`: the emap is not cached: {e}", entry.name);
        }
    }
    Ok(emap)
}

/// A side file the manifest pins (`emap_sha256`) must hash to it: the
/// emap turns every source identity into the swapper's latent, so a
/// swapped-in file would paste another face.
fn check_side_file(entry: &ModelEntry, side: &Path) -> Result<(), StoreError> {
    let Some(want) = &entry.emap_sha256 else { return Ok(()) };
    let bytes = std::fs::read(side).map_err(|e| StoreError::Emap(format!("{}: {e}", side.display())))?;
    let got = crate::catalog::sha256_hex(&bytes);
    if &got != want {
        return Err(StoreError::Emap(format!(
            "model `{}`: {} has SHA-256 {got}, not the manifest's emap_sha256 {want}; put back the side file \
             it was pinned with, or regenerate it with `fusiond emap {}` and pin the new hash",
            entry.name,
            side.display(),
            entry.name
        )));
    }
    Ok(())
}

/// The model whose graph holds `entry`'s emap.
fn float_entry<'a>(catalog: &'a Catalog, entry: &'a ModelEntry) -> Result<&'a ModelEntry, StoreError> {
    Ok(match &entry.emap_source {
        Some(source) => catalog.entry(source)?,
        None => entry,
    })
}

/// The emap read from `entry`'s float graph: its `emap_source` (quantisers
/// rename and fold initializers, so an INT8 graph cannot be searched), or
/// the model itself.
pub fn from_graph(catalog: &Catalog, entry: &ModelEntry) -> Result<Tensor, StoreError> {
    let float = float_entry(catalog, entry)?;
    in_graph(entry, &catalog.open_file(float)?)
}

/// The emap in `graph`, the bytes of `entry`'s float model.
fn in_graph(entry: &ModelEntry, graph: &[u8]) -> Result<Tensor, StoreError> {
    extract_emap(graph).map_err(|e| match e {
        StoreError::Emap(m) => StoreError::Emap(format!("model `{}`: {m}", entry.name)),
        other => other,
    })
}
