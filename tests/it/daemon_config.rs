//! The daemon's config over its life: what a reload puts in force and what
//! it says needs a restart, the quality state after a tier falls back, and
//! the next tier preloaded in the background.

use crate::harness::{free_port, online, serial, write_config, Daemon, Mosquitto, Watcher, T};
use crate::util::{contract_models, shared};
use std::path::Path;

fn dropin(dir: &Path, name: &str, text: &str) {
    let d = dir.join("conf.d");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join(name), text).unwrap();
}

/// The next `n` faces messages.
fn next_faces(w: &Watcher, n: usize) -> Vec<serde_json::Value> {
    (0..n)
        .map(|_| {
            let from = w.count();
            w.wait_from(from, "faces", *T, |_| true).json()
        })
        .collect()
}

#[test]
fn a_reload_puts_pipeline_and_output_keys_in_force_and_names_those_that_need_a_restart() {
    let _s = serial();
    let broker = Mosquitto::start(free_port());
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), broker.port, "reload", "");
    dropin(dir.path(), "10-every-frame.toml", "[pipeline]\ndetect_interval_ms = 0\n");
    let w = Watcher::start(broker.port, "fusiond/reload");
    let d = Daemon::spawn(&config);
    online(&w);
    for f in next_faces(&w, 3) {
        assert_eq!(f["detected"], true, "detect_interval_ms = 0 detects on every frame: {f}");
    }
    w.wait("frame", *T, |_| true);

    let text = "[pipeline]\ndetect_interval_ms = 3600000\n[output]\nframes = false\n[mqtt]\nkeep_alive_s = 7\n";
    dropin(dir.path(), "20-reload.toml", text);
    let from = w.count();
    w.send("reload", b"".to_vec());
    let e = w.wait_from(from, "events", *T, |m| m.json()["event"] == "reloaded").json();
    // Frames already in flight at the reload may finish on the old keys.
    next_faces(&w, 2);
    let after = w.count();
    for f in next_faces(&w, 4) {
        assert_eq!(f["detected"], false, "the new detect_interval_ms is in force: {f}");
    }
    let frames = w.all()[after..].iter().filter(|m| m.topic.ends_with("/frame")).count();
    assert_eq!(frames, 0, "output.frames = false is in force after the reload");
    assert_eq!(e["restart_needed"], serde_json::json!(["mqtt.keep_alive_s"]), "{e}");
    let log = d.log();
    assert!(log.contains("next restart: mqtt.keep_alive_s"), "the log names the key:\n{log}");
}

/// A copy of a contract swapper with one byte flipped, under a manifest that
/// pins the original's SHA-256: a model that is present but corrupt.
fn corrupt_swapper(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let mut bytes = std::fs::read(contract_models().join("latent_color_swapper_128.onnx")).unwrap();
    let sha = fusiond::catalog::sha256_hex(&bytes);
    let last = bytes.len() - 100;
    bytes[last] ^= 0xff;
    std::fs::write(dir.join("corrupt_swapper.onnx"), bytes).unwrap();
    let manifest = format!(
        "[[model]]\nname = \"corrupt_swapper\"\nfile = \"corrupt_swapper.onnx\"\nsha256 = \"{sha}\"\n\
         contract = \"inswapper\"\nlicence = \"test\"\n"
    );
    std::fs::write(dir.join("manifest.toml"), manifest).unwrap();
}

#[test]
fn a_tier_that_falls_back_leaves_the_quality_state_naming_the_tier_that_runs() {
    let _s = serial();
    let broker = Mosquitto::start(free_port());
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad-models");
    corrupt_swapper(&bad);
    let broken = "[[tier]]\nname = \"broken\"\nmodels = [\"yunet_2023mar\", \"arcface_fr\", \"corrupt_swapper\"]\n";
    let port = free_port();
    let broken = format!("{broken}\n[http]\nlisten = \"127.0.0.1:{port}\"\n");
    let config = write_config(dir.path(), broker.port, "fallback", &broken);
    let dirs = [shared("models"), contract_models(), bad];
    let dirs: Vec<String> = dirs.iter().map(|d| format!("{:?}", d.display().to_string())).collect();
    dropin(dir.path(), "10-dirs.toml", &format!("[models]\ndirs = [{}]\n", dirs.join(", ")));
    let w = Watcher::start(broker.port, "fusiond/fallback");
    let _d = Daemon::spawn(&config);
    online(&w);

    let from = w.count();
    w.send("quality", b"broken".to_vec());
    let e = w.wait_from(from, "events", *T, |m| m.json()["event"] == "degraded").json();
    assert_eq!((e["wanted"].as_str(), e["tier"].as_str()), (Some("broken"), Some("quality")), "{e}");
    assert!(e["reason"].as_str().unwrap().contains("corrupt_swapper"), "{e}");
    w.wait_from(from, "events", *T, |m| m.json()["event"] == "tier_changed");
    let seen: Vec<(String, String)> = w.all()[from..].iter().map(|m| (m.topic.clone(), m.text())).collect();
    let state = seen.iter().position(|(t, p)| t.ends_with("/quality/state") && p == "quality");
    let changed = seen.iter().position(|(t, p)| t.ends_with("/events") && p.contains("tier_changed"));
    let order = state.zip(changed).map(|(s, c)| s < c);
    assert_eq!(order, Some(true), "the state names the running tier before tier_changed says so: {seen:?}");
    let (code, health) = crate::http::get(port, "GET", "/api/health");
    let health = String::from_utf8_lossy(&health);
    assert_eq!(code, 503, "a fallback is not healthy: {health}");
    assert!(health.contains("running tier `quality` instead of `broken`"), "{health}");
    // A newcomer reads the retained state: the tier that runs.
    let late = Watcher::start(broker.port, "fusiond/fallback");
    let state = late.wait("quality/state", *T, |m| m.retained);
    assert_eq!(state.text(), "quality", "the retained quality state names the tier that runs");
    let from = w.count();
    w.wait_from(from, "faces", *T, |m| m.json()["tier"] == "quality");
    w.send("quality", b"quality".to_vec());
    w.wait_from(from, "events", *T, |m| m.json()["event"] == "tier_changed");
    assert_eq!(crate::http::get(port, "GET", "/api/health").0, 200, "healthy again on the tier asked for");
}

#[test]
fn the_next_tier_is_loaded_in_the_background_once_ready_when_preload_next_is_set() {
    let _s = serial();
    let broker = Mosquitto::start(free_port());
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), broker.port, "preload", "");
    dropin(dir.path(), "10-preload.toml", "[models]\npreload_next = true\n");
    let w = Watcher::start(broker.port, "fusiond/preload");
    let _d = Daemon::spawn(&config);
    online(&w);
    // The quality tier adds latent_color_swapper to the fast tier's models.
    let stats = w.wait("stats", *T, |m| {
        m.json()["models_cached"].as_array().is_some_and(|c| c.iter().any(|n| n == "latent_color_swapper"))
    });
    assert_eq!(stats.json()["tier"], "fast", "preloading does not switch: {}", stats.text());
}
