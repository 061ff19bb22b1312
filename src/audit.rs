//! The audit log (`[audit]`): one JSON line per change of source, face
//! bank, tier, `enabled` or selector, and per reload, saying where it came
//! from. Each line carries the SHA-256 of the line before it (64 zeros for
//! the first line ever), so an edit, a removal or a reordering breaks the
//! chain at the first line touched; `fusiond audit verify FILE...` names it.
//! When the file passes `max_bytes` it is renamed to `<file>.1` (replacing
//! an older one) and the chain carries on in a new file.

use serde::{Deserialize, Serialize};
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

/// The `prev` of the first line ever written.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// `[audit]`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuditSettings {
    /// Keep the audit log.
    pub enabled: bool,
    /// The log file; unset: `audit.jsonl` in `pipeline.state_dir`.
    pub file: Option<PathBuf>,
    /// Size past which the file is rotated to `<file>.1`.
    pub max_bytes: u64,
}

impl Default for AuditSettings {
    fn default() -> Self {
        AuditSettings { enabled: true, file: None, max_bytes: 4 * 1024 * 1024 }
    }
}

impl AuditSettings {
    pub fn validate(&self) -> Result<(), String> {
        match self.max_bytes >= 4096 {
            true => Ok(()),
            false => Err(format!("audit.max_bytes {} is too small; use 4096 or more", self.max_bytes)),
        }
    }
}

/// One line.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    pub seq: u64,
    /// Unix seconds.
    pub at: u64,
    /// `source`, `bank`, `quality`, `enabled`, `selector` or `reload`.
    pub change: String,
    pub value: String,
    /// Who asked: `mqtt ...`, `http peer ... token ...`, `SIGHUP`.
    pub from: String,
    /// SHA-256 (hex) of the previous line, without its newline.
    pub prev: String,
}

#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("audit log {path}: {source}; check the directory exists and is writable, or set audit.file")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path} line {line}: {reason}")]
    Broken { path: PathBuf, line: usize, reason: String },
}

fn hash(line: &str) -> String {
    crate::catalog::sha256_hex(line.as_bytes())
}

/// The log being written.
pub struct AuditLog {
    path: PathBuf,
    max_bytes: u64,
    prev: String,
    seq: u64,
}

impl AuditLog {
    /// Opens `path`, carrying the chain on from its last line (or from
    /// `<path>.1`'s, right after a rotation).
    pub fn open(path: &Path, max_bytes: u64) -> Result<AuditLog, AuditError> {
        let io = |source| AuditError::Io { path: path.to_path_buf(), source };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let mut log = AuditLog { path: path.to_path_buf(), max_bytes, prev: GENESIS.into(), seq: 0 };
        for candidate in [rotated(path), path.to_path_buf()] {
            if let Some(last) = last_line(&candidate).map_err(io)? {
                let entry: Entry = serde_json::from_str(&last).map_err(|e| AuditError::Broken {
                    path: candidate.clone(),
                    line: 0,
                    reason: format!("the last line is not an audit entry ({e}); move the file aside"),
                })?;
                (log.prev, log.seq) = (hash(&last), entry.seq + 1);
            }
        }
        Ok(log)
    }

    /// Appends one entry.
    pub fn append(&mut self, change: &str, value: &str, from: &str) -> Result<(), AuditError> {
        let io = |source| AuditError::Io { path: self.path.clone(), source };
        if std::fs::metadata(&self.path).is_ok_and(|m| m.len() >= self.max_bytes) {
            std::fs::rename(&self.path, rotated(&self.path)).map_err(io)?;
        }
        let at = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let entry = Entry {
            seq: self.seq,
            at,
            change: change.into(),
            value: value.into(),
            from: from.into(),
            prev: self.prev.clone(),
        };
        let line = serde_json::to_string(&entry).unwrap_or_default();
        let mut file = std::fs::OpenOptions::new().create(true).append(true).open(&self.path).map_err(io)?;
        file.write_all(format!("{line}\n").as_bytes()).map_err(io)?;
        (self.prev, self.seq) = (hash(&line), self.seq + 1);
        Ok(())
    }
}

/// What an applied command changes, as the log records it: nothing for
/// features the log does not keep; an image as its size and SHA-256, and a
/// named image (`name\n<image>`) as a face bank entry too.
pub fn changes(feature: &str, payload: &[u8]) -> Vec<(&'static str, String)> {
    let text = || String::from_utf8_lossy(payload).trim().chars().take(256).collect::<String>();
    match feature {
        "enabled" => vec![("enabled", text())],
        "selector" => vec![("selector", text())],
        "quality" => vec![("tier", text())],
        "reload" => vec![("reload", String::new())],
        "forget" => vec![("bank", format!("removed {}", text()))],
        "source" => {
            let image =
                |b: &[u8]| format!("image of {} bytes, sha256 {}", b.len(), &crate::catalog::sha256_hex(b)[..16]);
            match payload.iter().position(|&b| b == b'\n').filter(|&i| i <= 64) {
                Some(i) if image::guess_format(&payload[i + 1..]).is_ok() => {
                    let name = String::from_utf8_lossy(&payload[..i]).trim().to_string();
                    let value = image(&payload[i + 1..]);
                    vec![("bank", format!("{name}: {value}")), ("source", format!("{name}: {value}"))]
                }
                _ if image::guess_format(payload).is_ok() => vec![("source", image(payload))],
                _ => vec![("source", text())],
            }
        }
        _ => Vec::new(),
    }
}

fn rotated(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(".1");
    PathBuf::from(p)
}

fn last_line(path: &Path) -> std::io::Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(text.lines().rfind(|l| !l.trim().is_empty()).map(String::from)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Checks the chain through `files` in order (a rotated file first): the
/// number of lines, or the first bad line. The first line's `prev` is
/// taken as it is (the chain may have started in a file no longer kept).
pub fn verify(files: &[PathBuf]) -> Result<usize, AuditError> {
    let (mut prev, mut seq, mut count) = (None::<String>, None::<u64>, 0);
    for path in files {
        let file = std::fs::File::open(path).map_err(|source| AuditError::Io { path: path.clone(), source })?;
        for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
            let broken = |reason: String| AuditError::Broken { path: path.clone(), line: i + 1, reason };
            let line = line.map_err(|e| broken(e.to_string()))?;
            let entry: Entry = serde_json::from_str(&line).map_err(|e| broken(format!("not an audit entry: {e}")))?;
            if let Some(p) = &prev {
                if &entry.prev != p {
                    return Err(broken("its prev is not the SHA-256 of the line before: this line or the one before was changed, removed or moved".into()));
                }
            }
            if seq.is_some_and(|s| entry.seq != s + 1) {
                return Err(broken(format!("seq {} does not follow {}", entry.seq, seq.unwrap_or(0))));
            }
            (prev, seq, count) = (Some(hash(&line)), Some(entry.seq), count + 1);
        }
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chain_holds_across_rotation_and_an_edit_names_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let mut log = AuditLog::open(&path, 4096).unwrap();
        for i in 0..60 {
            log.append("enabled", if i % 2 == 0 { "OFF" } else { "ON" }, "http peer 127.0.0.1:5000, no token").unwrap();
        }
        let mut log = AuditLog::open(&path, 4096).unwrap();
        log.append("reload", "", "SIGHUP").unwrap();
        let files = [rotated(&path), path.clone()];
        assert!(files[0].exists(), "rotated past 4096 bytes");
        let kept: usize = files.iter().map(|f| std::fs::read_to_string(f).unwrap().lines().count()).sum();
        assert!(kept < 61, "the oldest lines went with an earlier .1");
        assert_eq!(verify(&files).unwrap(), kept);
        let last = std::fs::read_to_string(&path).unwrap();
        assert!(last.lines().last().unwrap().contains("\"SIGHUP\""), "reopened, the chain went on");
        let text = std::fs::read_to_string(&path).unwrap();
        let edited = text.replacen("\"OFF\"", "\"ON\"", 1);
        std::fs::write(&path, &edited).unwrap();
        let first_off = text.lines().position(|l| l.contains("\"OFF\"")).unwrap();
        match verify(&files) {
            Err(AuditError::Broken { line, .. }) => assert_eq!(line, first_off + 2, "the line after the edit"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn commands_become_changes_and_images_only_their_hash() {
        assert_eq!(changes("blend", b"40"), []);
        assert_eq!(changes("quality", b"fast\n"), [("tier", "fast".to_string())]);
        let mut png = Vec::new();
        image::RgbImage::new(2, 2).write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png).unwrap();
        let plain = changes("source", &png);
        assert!(
            plain.len() == 1 && plain[0].1.starts_with(&format!("image of {} bytes, sha256 ", png.len())),
            "{plain:?}"
        );
        let named = changes("source", &[b"alice\n".as_slice(), &png].concat());
        assert_eq!(named.iter().map(|c| c.0).collect::<Vec<_>>(), ["bank", "source"]);
        assert!(named[0].1.starts_with("alice: image of"), "{named:?}");
        assert_eq!(changes("source", b"alice,bob"), [("source", "alice,bob".to_string())]);
    }
}
