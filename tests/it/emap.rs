//! inswapper's emap: side files, and the cache of emaps read out of graphs.

use crate::util::{catalog, contract_models};
use fusiond::infer::{Tensor, TractBackend};
use fusiond::store::emap::{self, extract_emap, read_emap, write_emap};
use fusiond::store::Loader;

#[test]
fn emap_side_file_round_trips_and_matches_the_graph() {
    let catalog = catalog();
    let entry = catalog.entry("known_emap").unwrap();
    let from_graph = extract_emap(&catalog.0.catalog().open_file(entry).unwrap()).unwrap();
    assert_eq!(from_graph.shape(), &[512, 512]);
    let tmp = tempfile::tempdir().unwrap();
    let side = tmp.path().join("known.emap.safetensors");
    write_emap(&side, &from_graph).unwrap();
    assert_eq!(read_emap(&side).unwrap(), from_graph);
    std::fs::write(&side, b"not safetensors").unwrap();
    assert!(read_emap(&side).unwrap_err().to_string().contains("fusiond emap"));
}

/// An emap read out of a graph (no side file) is cached by the float
/// model's SHA-256, and the next load takes the cached copy, not the graph.
#[test]
fn an_emap_read_from_the_graph_is_cached_by_the_models_sha256() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let loader = Loader::open(&[contract_models()], std::sync::Arc::new(TractBackend::default()))
        .unwrap()
        .with_cache(Some(cache.clone()));
    let entry = loader.catalog().entry("known_emap").unwrap().clone();
    assert!(!emap::side_file(&entry).exists(), "the contract models have no side files");
    let first = loader.load(&entry).unwrap().emap.unwrap();
    let path = emap::cache_path(&cache, entry.sha256.as_deref().unwrap());
    assert_eq!(read_emap(&path).unwrap(), first);

    let doubled = Tensor::new(first.shape(), first.data().iter().map(|v| v * 2.0).collect()).unwrap();
    write_emap(&path, &doubled).unwrap();
    assert_eq!(loader.load(&entry).unwrap().emap.unwrap(), doubled, "the cache is read, not the graph");

    // A broken cache file is read around and replaced by the graph's emap.
    std::fs::write(&path, b"not safetensors").unwrap();
    assert_eq!(loader.load(&entry).unwrap().emap.unwrap(), first);
    assert_eq!(read_emap(&path).unwrap(), first);
}

/// A quantised graph's last initializer is not the emap: the error says
/// where the emap comes from instead (the float model, or a side file).
#[test]
fn a_quantised_graph_names_where_its_emap_comes_from() {
    let file = crate::util::int8_models().join("arcface_fr_feature_int8.onnx");
    let bytes = std::fs::read(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let err = extract_emap(&bytes).unwrap_err().to_string();
    assert!(err.contains("`emap_source`") && err.contains("fusiond emap"), "{err}");
}

/// A side file the manifest pins with `emap_sha256` is checked before it is
/// read: a swapped-in emap (another face for every source) is refused,
/// naming both hashes.
#[test]
fn a_pinned_emap_side_file_that_does_not_match_is_refused() {
    let contract = contract_models();
    let catalog = catalog();
    let known = catalog.entry("known_emap").unwrap();
    let from_graph = extract_emap(&catalog.0.catalog().open_file(known).unwrap()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(contract.join("known_emap_swapper_128.onnx"), dir.path().join("pinned.onnx")).unwrap();
    let side = dir.path().join("pinned.emap.safetensors");
    write_emap(&side, &from_graph).unwrap();
    let sha = |p: &std::path::Path| fusiond::catalog::sha256_hex(&std::fs::read(p).unwrap());
    let manifest = format!(
        "[[model]]\nname = \"pinned\"\nfile = \"pinned.onnx\"\nsha256 = {:?}\ncontract = \"inswapper\"\n\
         licence = \"test\"\nemap_sha256 = {:?}\n",
        sha(&dir.path().join("pinned.onnx")),
        sha(&side)
    );
    std::fs::write(dir.path().join("manifest.toml"), manifest).unwrap();
    let loader = Loader::open(&[dir.path().to_path_buf()], std::sync::Arc::new(TractBackend::default())).unwrap();
    let entry = loader.catalog().entry("pinned").unwrap().clone();
    assert_eq!(loader.load(&entry).unwrap().emap.unwrap(), from_graph);
    let doubled = Tensor::new(from_graph.shape(), from_graph.data().iter().map(|v| v * 2.0).collect()).unwrap();
    write_emap(&side, &doubled).unwrap();
    let err = loader.load(&entry).err().unwrap().to_string();
    assert!(err.contains("emap_sha256") && err.contains(&sha(&side)), "{err}");
}
