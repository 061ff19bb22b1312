//! The live page in a real browser: headless Chromium driven by Selenium
//! (tests/browser/live_page.py, in the venv tests/setup.sh makes): every
//! control round-trips to `/api/state`, the faces overlay matches MQTT's
//! `faces`, and the layout holds at 1280 and 390 px.

use crate::harness::{free_port, online, serial, write_config, Daemon, Mosquitto, Watcher, T};
use crate::http::state;
use std::time::{Duration, Instant};

#[test]
fn the_live_page_moves_and_every_control_round_trips() {
    let python = std::env::var("FUSIOND_PYTHON").unwrap_or_else(|_| {
        panic!(
            "FUSIOND_PYTHON is not set: run the tests through tests/run.sh, whose setup makes the venv with selenium"
        )
    });
    for needed in ["/usr/bin/chromium", "/usr/bin/chromedriver"] {
        assert!(std::path::Path::new(needed).exists(), "{needed} is missing: apt install chromium chromium-driver");
    }
    let _s = serial();
    let broker = Mosquitto::start(free_port());
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let config = write_config(dir.path(), broker.port, "page", &format!("\n[http]\nlisten = \"127.0.0.1:{port}\"\n"));
    let w = Watcher::start(broker.port, "fusiond/page");
    let d = Daemon::spawn(&config);
    online(&w);
    assert_eq!(state(port)["states"]["enabled"], "ON");

    let script = crate::util::repo("tests/browser/live_page.py");
    let url = format!("http://127.0.0.1:{port}/");
    let photo = crate::util::shared("images/fr_obama2.jpg");
    let shots = dir.path().join("screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let out = std::process::Command::new(&python).arg(script).arg(&url).arg(&photo).arg(&shots).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the browser run failed:\n{stderr}\n{}", d.log());
    let seen: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    println!("{seen:#}");
    assert_eq!(seen["natural_size"], serde_json::json!([640, 480]), "{seen}");
    assert_eq!(seen["screenshots_differ"], true, "the live view does not move: {seen}");
    assert_eq!((&seen["enabled_before"], &seen["enabled_after_click"]), (&true.into(), &"OFF".into()), "{seen}");
    assert_eq!(seen["tier"], "fast", "{seen}");
    assert_eq!(seen["keyboard"]["reached_enabled_by_tab"], true, "{seen}");
    assert_eq!(seen["keyboard"]["enabled_after_space"], "ON", "{seen}");

    let c = &seen["controls"];
    for (feature, want) in [
        ("selector", "many"),
        ("face_order", "left-right"),
        ("color_transfer", "rct"),
        ("blend", "63"),
        ("mask_blur", "0.55"),
        ("reference_distance", "0.7"),
        ("mask_padding", "5,10,15,20"),
        ("map", "alice=alice"),
        ("quality", "quality"),
        ("source_active", "alice"),
    ] {
        assert_eq!(c[feature], want, "{feature} did not round-trip: {c}");
    }
    assert_eq!(c["mouth_mask"], "OFF", "refused: the fast tier has no landmarker: {c}");
    assert!(c["mouth_mask_message"].as_str().unwrap().contains("landmark"), "{c}");
    assert!(c["preview_width"].as_u64().unwrap() > 0, "no preview of the chosen photo: {c}");
    assert_eq!(c["bank_after_add"], serde_json::json!(["alice"]), "{c}");
    assert_eq!(c["thumbnail_size"], serde_json::json!([96, 96]), "the bank's thumbnail: {c}");
    assert_eq!(c["bank_after_remove"], serde_json::json!([]), "{c}");
    let log = c["events_log"].as_str().unwrap();
    for event in ["source_set", "forgotten", "tier_changed"] {
        assert!(log.contains(event), "the events log lacks {event}: {log}");
    }
    assert!(seen["health"].as_str().unwrap().starts_with("online"), "{seen}");
    assert!(seen["models"].as_str().unwrap().contains("yunet_2023mar"), "{seen}");

    // The overlay drew the faces of one `faces` message, as MQTT carried it.
    let o = &seen["overlay"];
    let mut faces = w.all().into_iter().filter(|m| m.topic.ends_with("/faces")).map(|m| m.json());
    let drawn = faces.rfind(|f| f["seq"] == o["seq"]).unwrap_or_else(|| panic!("no faces message {o}"));
    let ids: Vec<String> = drawn["faces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| format!("{}{}", f["id"], if f["swapped"] == true { "s" } else { "" }))
        .collect();
    assert_eq!(o["ids"], ids.join(","), "the overlay differs from faces {drawn}");
    assert!(o["drawn"].as_u64().unwrap() > 0, "{o}");

    // Nothing wider than the window and no control over another, on a
    // desktop and on a phone.
    for width in ["1280", "390"] {
        let l = &seen["layout"][width];
        assert!(l["scroll_width"].as_u64() <= l["width"].as_u64(), "{width} px: the page scrolls sideways: {l}");
        assert_eq!(l["outside"], serde_json::json!([]), "{width} px: {l}");
        assert_eq!(l["overlaps"], serde_json::json!([]), "{width} px: {l}");
        assert!(shots.join(format!("page-{width}.png")).is_file());
    }
    let deadline = Instant::now() + *T;
    while state(port)["states"]["enabled"] != "ON" {
        assert!(Instant::now() < deadline, "the state did not settle: {}", state(port));
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_page_from_another_origin_changes_nothing_and_reads_nothing() {
    let python = std::env::var("FUSIOND_PYTHON").unwrap_or_else(|_| {
        panic!(
            "FUSIOND_PYTHON is not set: run the tests through tests/run.sh, whose setup makes the venv with selenium"
        )
    });
    let _s = serial();
    let broker = Mosquitto::start(free_port());
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let config = write_config(dir.path(), broker.port, "origin", &format!("\n[http]\nlisten = \"127.0.0.1:{port}\"\n"));
    let w = Watcher::start(broker.port, "fusiond/origin");
    let d = Daemon::spawn(&config);
    online(&w);
    let before = state(port);
    let from = w.count();

    let script = crate::util::repo("tests/browser/cross_origin.py");
    let out = std::process::Command::new(&python).arg(script).arg(format!("http://127.0.0.1:{port}")).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the browser run failed:\n{stderr}\n{}", d.log());
    let seen: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    println!("{seen:#}");
    let cross = &seen["cross_origin"];
    for read in ["read state", "read snapshot", "read snapshot pixels"] {
        assert!(cross[read].as_str().is_some_and(|r| r.starts_with("failed")), "{read}: {cross}");
    }
    for feature in fusiond::mqtt::topics::FEATURES {
        assert!(cross[format!("{feature} json")].as_str().is_some_and(|r| r.starts_with("failed")), "{cross}");
    }
    assert!(seen["rebound_page"].as_str().unwrap().contains("does not answer to"), "{seen}");
    let after = state(port);
    let mut changed = after["states"].clone();
    changed["blend"] = before["states"]["blend"].clone();
    assert_eq!(changed, before["states"], "only the own origin's blend may change");
    let events: Vec<_> =
        w.all()[from..].iter().filter(|m| m.topic.ends_with("/events")).map(|m| m.json()["event"].clone()).collect();
    assert!(!events.iter().any(|e| e == "reloaded"), "a cross-origin reload got through: {events:?}");
    assert_eq!(seen["own_origin"]["blend json"], 200, "the daemon's own page may command: {seen}");
    assert_eq!(after["states"]["blend"], "41", "{after}");
}
