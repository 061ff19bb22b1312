//! `fusiond stage`: copy the configured tiers' models into the ramdisk,
//! hashing while copying, and write the staged manifest, index and `.ready`
//! marker the daemon loads from.

use super::emap;
use super::plan::{plan, StagedIndex, Wanted};
use super::{tmpfs, StageError};
use crate::catalog::Catalog;
use crate::config::Config;
use crate::manifest::{self, Contract, ModelEntry};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub const INDEX: &str = "staged.json";
pub const READY: &str = ".ready";
const EMAP_BYTES: u64 = 512 * 512 * 4 + 4096;

/// One staged model as recorded in the index.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StagedFile {
    pub file: String,
    pub sha256: String,
    pub size: u64,
    pub emap: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TierStatus {
    pub name: String,
    pub usable: bool,
    pub reason: Option<String>,
}

/// What happened to one file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileReport {
    pub name: String,
    pub action: String,
    pub bytes: u64,
    pub copy_mb_s: Option<f64>,
    pub hash_mb_s: Option<f64>,
    pub error: Option<String>,
}

/// The staged index (`staged.json`): what is on the ramdisk and which tiers
/// are usable, plus this run's report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StageReport {
    pub files: std::collections::BTreeMap<String, StagedFile>,
    pub tiers: Vec<TierStatus>,
    pub report: Vec<FileReport>,
    pub total_ms: f64,
    pub bytes_copied: u64,
}

impl StageReport {
    /// 0 when every tier is usable, 2 when only some are, 1 when none is.
    pub fn exit_code(&self) -> u8 {
        match self.tiers.iter().filter(|t| t.usable).count() {
            n if n == self.tiers.len() => 0,
            0 => 1,
            _ => 2,
        }
    }

    pub fn read(ramdisk: &Path) -> Option<StageReport> {
        let text = std::fs::read_to_string(ramdisk.join(INDEX)).ok()?;
        serde_json::from_str(&text).ok()
    }
}

struct Copied {
    sha256: String,
    copy: Duration,
    hash: Duration,
}

fn mb_s(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / 1e6 / d.as_secs_f64().max(1e-9)
}

/// Streams `src` to `dst` through a temporary name, hashing as it goes, and
/// renames it into place only when the hash is right.
/// What a copy must hash to: the manifest's SHA-256, or else a FaceFusion
/// `.hash` file's CRC-32 (8 hex digits).
#[derive(Clone, Copy)]
enum Expect<'a> {
    Nothing,
    Sha256(&'a str),
    Crc32(&'a str),
}

fn copy_verified(src: &Path, dst: &Path, expected: Expect) -> Result<Copied, StageError> {
    let name = dst.file_name().unwrap_or_default().to_string_lossy();
    let tmp = dst.with_file_name(format!(".{name}.partial"));
    let result = copy_into(src, &tmp, dst, expected);
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

fn copy_into(src: &Path, tmp: &Path, dst: &Path, expected: Expect) -> Result<Copied, StageError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source: std::io::Error| StageError::from_io(path, source)
    };
    let mut input = std::fs::File::open(src).map_err(io(src))?;
    let mut output = std::fs::File::create(tmp).map_err(io(dst))?;
    let (mut hasher, mut crc, mut buf) = (Sha256::new(), crc32fast::Hasher::new(), vec![0u8; 1 << 20]);
    let (mut copy, mut hash) = (Duration::ZERO, Duration::ZERO);
    loop {
        let t = Instant::now();
        let n = input.read(&mut buf).map_err(io(src))?;
        if n == 0 {
            break;
        }
        let read = t.elapsed();
        hasher.update(&buf[..n]);
        crc.update(&buf[..n]);
        let hashed = t.elapsed();
        output.write_all(&buf[..n]).map_err(io(dst))?;
        copy += read + (t.elapsed() - hashed);
        hash += hashed - read;
    }
    let sha256: String = hasher.finalize().iter().map(|b| format!("{b:02x}")).collect();
    let (algorithm, want, actual) = match expected {
        Expect::Nothing => ("", "", String::new()),
        Expect::Sha256(want) => ("sha256", want, sha256.clone()),
        Expect::Crc32(want) => ("crc32 (FaceFusion .hash)", want, format!("{:08x}", crc.finalize())),
    };
    if want != actual {
        return Err(StageError::Checksum { path: src.into(), algorithm, expected: want.into(), actual });
    }
    std::fs::rename(tmp, dst).map_err(io(dst))?;
    Ok(Copied { sha256, copy, hash })
}

fn staged_name(entry: &ModelEntry) -> String {
    entry.file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| entry.name.clone())
}

/// The side file for a staged inswapper: copied when the persistent dir has
/// one, else extracted from the float graph (the model's `emap_source`, or
/// the model itself).
fn stage_emap(catalog: &Catalog, entry: &ModelEntry, ramdisk: &Path) -> Result<String, StageError> {
    let name = Path::new(&staged_name(entry)).with_extension("emap.safetensors");
    let name = name.to_string_lossy().into_owned();
    let dst = ramdisk.join(&name);
    let side = emap::side_file(entry);
    if side.is_file() {
        copy_verified(&side, &dst, Expect::Nothing)?;
        return Ok(name);
    }
    let as_stage = |e: super::StoreError| StageError::Emap { model: entry.name.clone(), message: e.to_string() };
    let emap = emap::from_graph(catalog, entry).map_err(as_stage)?;
    emap::write_emap(&dst, &emap).map_err(as_stage)?;
    Ok(name)
}

fn wanted(catalog: &Catalog, models: &[String]) -> Result<Vec<Wanted>, String> {
    models
        .iter()
        .map(|name| {
            let e = catalog.entry(name).map_err(|e| e.to_string())?;
            let meta = std::fs::metadata(&e.file)
                .map_err(|err| format!("model `{name}`: {} is missing or unreadable: {err}", e.file.display()))?;
            let side = if e.contract == Contract::Inswapper { EMAP_BYTES } else { 0 };
            Ok(Wanted { name: name.clone(), size: meta.len(), extra: side, sha256: e.sha256.clone() })
        })
        .collect()
}

/// The SHA-256 of the file at `path`, streamed.
fn sha256_file(path: &Path) -> std::io::Result<String> {
    let (mut file, mut hasher, mut buf) = (std::fs::File::open(path)?, Sha256::new(), vec![0u8; 1 << 20]);
    loop {
        match file.read(&mut buf)? {
            0 => break,
            n => hasher.update(&buf[..n]),
        }
    }
    Ok(hasher.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// What is on the ramdisk already, so a second run keeps it. A staged file
/// is trusted by the hash the index recorded when it was copied, as long as
/// it has the recorded size and its emap is there; with `verify` it is
/// hashed again, and one that no longer matches is deleted at once and
/// copied anew, so that a copy that then fails (a full ramdisk, a source
/// gone) cannot leave it there for the daemon to load.
fn still_staged(ramdisk: &Path, previous: &StageReport, verify: bool) -> StagedIndex {
    previous
        .files
        .iter()
        .filter(|(name, f)| {
            let path = ramdisk.join(&f.file);
            let there = std::fs::metadata(&path).is_ok_and(|m| m.len() == f.size)
                && f.emap.as_ref().is_none_or(|e| ramdisk.join(e).is_file());
            let intact = !verify || sha256_file(&path).is_ok_and(|h| h == f.sha256);
            if there && !intact {
                log::warn!("staged `{name}` ({}) no longer matches its recorded SHA-256; copying it again", f.file);
                let _ = std::fs::remove_file(&path);
            }
            there && intact
        })
        .map(|(n, f)| (n.clone(), (f.sha256.clone(), f.size)))
        .collect()
}

impl FileReport {
    fn kept(name: &str) -> FileReport {
        FileReport { name: name.into(), action: "kept".into(), bytes: 0, copy_mb_s: None, hash_mb_s: None, error: None }
    }

    fn failed(name: &str, error: String) -> FileReport {
        FileReport { error: Some(error), action: "failed".into(), ..FileReport::kept(name) }
    }
}

/// Copies model `name` (and its emap) into the ramdisk, hashing as it
/// goes, and records the outcome in `out`; returns the error, if any.
fn stage_one(catalog: &Catalog, name: &str, ramdisk: &Path, out: &mut StageReport) -> Result<(), String> {
    let entry = catalog.entry(name).map_err(|e| e.to_string())?;
    let file = staged_name(entry);
    let crc = std::fs::read_to_string(entry.file.with_extension("hash")).map(|t| t.trim().to_ascii_lowercase());
    let expect = match (&entry.sha256, &crc) {
        (Some(sha), _) => Expect::Sha256(sha),
        (None, Ok(crc)) => Expect::Crc32(crc),
        (None, Err(_)) => Expect::Nothing,
    };
    let copied = copy_verified(&entry.file, &ramdisk.join(&file), expect).and_then(|c| {
        let emap = match entry.contract {
            Contract::Inswapper => Some(stage_emap(catalog, entry, ramdisk)?),
            _ => None,
        };
        Ok((c, emap))
    });
    let (c, emap) = copied.map_err(|e| e.to_string())?;
    if matches!(expect, Expect::Nothing) {
        log::warn!("model `{name}`: no sha256 in its manifest and no .hash file; staged unverified as {}", c.sha256);
    }
    let size = std::fs::metadata(&entry.file).map(|m| m.len()).unwrap_or(0);
    out.bytes_copied += size;
    out.report.push(FileReport {
        name: name.into(),
        action: "copied".into(),
        bytes: size,
        copy_mb_s: Some(mb_s(size, c.copy)),
        hash_mb_s: Some(mb_s(size, c.hash)),
        error: None,
    });
    out.files.insert(name.into(), StagedFile { file, sha256: c.sha256, size, emap });
    Ok(())
}

/// Stages the configured tiers into the ramdisk, keeping what is staged
/// already by its recorded hash and size (see [`stage_with`]).
pub fn stage(config: &Config, catalog: &Catalog) -> Result<StageReport, StageError> {
    stage_with(config, catalog, false)
}

/// Stages the configured tiers into the ramdisk; with `verify`, files
/// already staged are hashed again before they are kept. Errors about one
/// file make the tiers that need it unusable; only a ramdisk that cannot be
/// used at all is an `Err`.
pub fn stage_with(config: &Config, catalog: &Catalog, verify: bool) -> Result<StageReport, StageError> {
    let start = Instant::now();
    let ramdisk = &config.models.ramdisk;
    tmpfs::ensure(ramdisk, config.models.ramdisk_size_mib)?;
    let previous = StageReport::read(ramdisk).unwrap_or_default();
    let tiers: Vec<(String, Result<Vec<Wanted>, String>)> =
        config.tier.iter().map(|t| (t.name.clone(), wanted(catalog, &t.models))).collect();
    let (free, _) = tmpfs::space(ramdisk)?;
    let plans = plan(&tiers, &still_staged(ramdisk, &previous, verify), free);

    let mut out = StageReport::default();
    let mut failed: Vec<(String, String)> = Vec::new();
    for p in &plans {
        for name in &p.keep {
            out.files.insert(name.clone(), previous.files[name].clone());
            let kept = FileReport::kept(name);
            out.report.push(if verify { FileReport { action: "verified".into(), ..kept } } else { kept });
        }
        for name in &p.copy {
            if let Err(e) = stage_one(catalog, name, ramdisk, &mut out) {
                log::error!("staging `{name}` failed: {e}");
                out.report.push(FileReport::failed(name, e.clone()));
                failed.push((name.clone(), e));
            }
        }
    }
    for (t, p) in config.tier.iter().zip(&plans) {
        let broken = t.models.iter().find_map(|m| failed.iter().find(|(n, _)| n == m));
        let reason = p.refused.clone().or_else(|| broken.map(|(n, e)| format!("model `{n}`: {e}")));
        out.tiers.push(TierStatus { name: t.name.clone(), usable: reason.is_none(), reason });
    }
    out.total_ms = start.elapsed().as_secs_f64() * 1e3;
    write_outputs(catalog, ramdisk, &out)?;
    Ok(out)
}

fn write_outputs(catalog: &Catalog, ramdisk: &Path, out: &StageReport) -> Result<(), StageError> {
    let entries: Vec<_> = out
        .files
        .iter()
        .filter_map(|(name, f)| {
            let e = catalog.entry(name).ok()?;
            Some((e, f.file.clone(), f.emap.clone(), f.sha256.clone()))
        })
        .collect();
    let write = |name: &str, text: String| {
        let path: PathBuf = ramdisk.join(name);
        let tmp = ramdisk.join(format!(".{name}.partial"));
        std::fs::write(&tmp, text)
            .and_then(|()| std::fs::rename(&tmp, &path))
            .map_err(|e| StageError::from_io(path.clone(), e))
    };
    let _ = std::fs::remove_file(ramdisk.join(READY));
    write("manifest.toml", manifest::write_staged(&entries))?;
    write(INDEX, serde_json::to_string_pretty(out).unwrap_or_default())?;
    let ready = serde_json::json!({
        "total_ms": out.total_ms,
        "bytes_copied": out.bytes_copied,
        "files": out.report,
        "tiers": out.tiers,
    });
    write(READY, ready.to_string())
}
