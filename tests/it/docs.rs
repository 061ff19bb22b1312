//! README.md and docs/*.md name only what exists: every `fusiond <command>`
//! they show (in backticks or in a code block) is one `fusiond --help`
//! lists, every config key they name in backticks (`pipeline.max_yaw_deg`,
//! `inference.ort.tensorrt.fp16`, a section such as `pipeline.smoothing`) is
//! one config/fusiond.toml has (it lists every key with its default, the
//! optional ones commented out), every HTTP endpoint (`/api/state`,
//! `/stream.mjpeg`) is one the router serves, and every MQTT topic
//! (`<base>/faces`, `<base>/blend/set`) is one the daemon uses.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const SECTIONS: [&str; 10] =
    ["models", "camera", "mqtt", "pipeline", "output", "http", "inference", "audit", "debug", "tier"];

/// File names, not keys (`audit.jsonl`).
const FILES: [&str; 8] = [".jsonl", ".json", ".toml", ".md", ".log", ".onnx", ".safetensors", ".conf"];

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn docs() -> Vec<(PathBuf, String)> {
    let mut paths = vec![repo().join("README.md")];
    let mut pages: Vec<PathBuf> = std::fs::read_dir(repo().join("docs")).unwrap().map(|e| e.unwrap().path()).collect();
    pages.sort();
    paths.extend(pages.into_iter().filter(|p| p.extension().is_some_and(|x| x == "md")));
    paths.into_iter().map(|p| (p.clone(), std::fs::read_to_string(&p).unwrap())).collect()
}

/// Every section and key of the packaged config, as dotted paths, the
/// commented-out ones (`# token_file = ...`) included.
fn config_keys() -> BTreeSet<String> {
    let text = std::fs::read_to_string(repo().join("config/fusiond.toml")).unwrap();
    let mut keys = BTreeSet::new();
    let mut section = String::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line.trim_matches(['[', ']']).to_string();
            let parts: Vec<&str> = section.split('.').collect();
            for n in 1..=parts.len() {
                keys.insert(parts[..n].join("."));
            }
            continue;
        }
        let bare = line.trim_start_matches('#').trim();
        let Some((key, _)) = bare.split_once(" = ") else { continue };
        if !key.is_empty() && key.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_') {
            keys.insert(if section.is_empty() { key.to_string() } else { format!("{section}.{key}") });
        }
    }
    keys
}

/// The spans between backticks on each line.
fn spans(text: &str) -> Vec<&str> {
    text.lines().flat_map(|l| l.split('`').skip(1).step_by(2)).collect()
}

/// Command lines of the fenced code blocks.
fn code_lines(text: &str) -> Vec<&str> {
    let mut inside = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            inside = !inside;
        } else if inside {
            out.push(line.trim().trim_start_matches("$ ").trim_start_matches("sudo "));
        }
    }
    out
}

fn commands() -> BTreeSet<String> {
    let out = crate::util::fusiond_command().arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout).to_string();
    let listed = help.split("Commands:").nth(1).and_then(|s| s.split("Options:").next()).unwrap_or_default();
    listed.lines().filter_map(|l| l.split_whitespace().next()).map(str::to_string).collect()
}

/// Whether `span` looks like an HTTP endpoint: under `/api/`, or a
/// top-level name the page and clients fetch (not a file system path).
fn endpoint(span: &str) -> bool {
    let plain = !span.contains(['<', ' ', '*', '{']);
    let top = span.matches('/').count() == 1 && [".jpg", ".mjpeg", ".js", ".css"].iter().any(|e| span.ends_with(e))
        || span == "/metrics";
    plain && span.starts_with('/') && (span.starts_with("/api/") || top)
}

/// Whether `<base>/leaf` is a topic the daemon publishes or reads.
fn topic(leaf: &str) -> bool {
    let parts: Vec<&str> = leaf.split('/').collect();
    let features = fusiond::mqtt::topics::FEATURES;
    match parts[..] {
        [one] => ["available", "frame", "snapshot", "faces", "stats", "events", "error"].contains(&one),
        [feature, "set" | "state"] => features.contains(&feature) || ["<feature>", "+", "camera"].contains(&feature),
        _ => false,
    }
}

fn wrong_endpoints_and_topics(name: &str, text: &str) -> Vec<String> {
    let mut wrong = Vec::new();
    for span in spans(text) {
        let path = span.split('?').next().unwrap_or(span);
        if endpoint(path)
            && ["GET", "POST"].iter().all(|m| fusiond::http::route(m, path) == fusiond::http::Route::NotFound)
        {
            wrong.push(format!("{name}: endpoint `{span}` is not one the HTTP server serves"));
        }
        if let Some(leaf) = span.strip_prefix("<base>/") {
            if !topic(leaf) {
                wrong.push(format!("{name}: topic `{span}` is not one the daemon uses"));
            }
        }
    }
    wrong
}

#[test]
fn the_docs_name_only_commands_keys_endpoints_and_topics_that_exist() {
    let (keys, commands) = (config_keys(), commands());
    assert!(keys.contains("pipeline.max_yaw_deg") && keys.contains("http.token_file"), "{keys:?}");
    assert!(commands.contains("run") && commands.contains("verify"), "{commands:?}");
    let mut wrong = Vec::new();
    for (path, text) in docs() {
        let name = path.strip_prefix(repo()).unwrap().display().to_string();
        for span in spans(&text) {
            let file = FILES.iter().any(|ext| span.ends_with(ext));
            let dotted = span.split('.').count() > 1
                && !file
                && span.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '.');
            if dotted && SECTIONS.contains(&span.split('.').next().unwrap()) && !keys.contains(span) {
                wrong.push(format!("{name}: config key `{span}` is not in config/fusiond.toml"));
            }
        }
        wrong.extend(wrong_endpoints_and_topics(&name, &text));
        let shown = spans(&text).into_iter().chain(code_lines(&text));
        for line in shown {
            let Some(rest) = line.strip_prefix("fusiond ") else { continue };
            let Some(word) = rest.split_whitespace().find(|w| !w.starts_with('-')) else { continue };
            if word.chars().all(|c| c.is_ascii_lowercase() || c == '-') && !commands.contains(word) {
                wrong.push(format!("{name}: `fusiond {word}` is not a command `fusiond --help` lists"));
            }
        }
    }
    assert!(wrong.is_empty(), "the docs name what does not exist:\n{}", wrong.join("\n"));
}

/// `docs/configuration.md` has one row per key of config/fusiond.toml, and
/// no row for a key the config lacks.
#[test]
fn the_configuration_page_names_every_key_once_and_no_other() {
    let keys = config_keys();
    let leaves: BTreeSet<&String> =
        keys.iter().filter(|k| !keys.iter().any(|o| o.starts_with(&format!("{k}.")))).collect();
    let page = std::fs::read_to_string(repo().join("docs/configuration.md")).unwrap();
    let rows: Vec<&str> = page.lines().filter_map(|l| l.strip_prefix("| `")?.split('`').next()).collect();
    let mut once = BTreeSet::new();
    let twice: Vec<&&str> = rows.iter().filter(|r| !once.insert(**r)).collect();
    assert!(twice.is_empty(), "docs/configuration.md lists these keys more than once: {twice:?}");
    let fix = "run `python3 tests/docs/configuration.py > docs/configuration.md`";
    let missing: Vec<&&String> = leaves.iter().filter(|k| !once.contains(k.as_str())).collect();
    assert!(missing.is_empty(), "docs/configuration.md lacks {missing:?}; {fix}");
    let unknown: Vec<&&str> = once.iter().filter(|r| !keys.contains(**r)).collect();
    assert!(unknown.is_empty(), "docs/configuration.md names keys config/fusiond.toml lacks: {unknown:?}; {fix}");
    assert!(rows.len() > 100, "{} rows", rows.len());
}
