//! The live page in a real browser: headless Chromium driven by Selenium
//! (tests/browser/live_page.py, in the venv tests/setup.sh makes).

use crate::harness::{free_port, online, serial, write_config, Daemon, Mosquitto, Watcher, T};
use crate::http::state;
use std::time::{Duration, Instant};

#[test]
fn the_live_page_moves_and_its_switch_changes_the_state() {
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
    let out = std::process::Command::new(&python).arg(script).arg(&url).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the browser run failed:\n{stderr}\n{}", d.log());
    let seen: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(seen["natural_size"], serde_json::json!([640, 480]), "{seen}");
    assert_eq!(seen["screenshots_differ"], true, "the live view does not move: {seen}");
    assert_eq!(seen["enabled_before"], true, "{seen}");
    assert_eq!(seen["tier"], "fast", "{seen}");

    let deadline = Instant::now() + *T;
    while state(port)["states"]["enabled"] != "OFF" {
        assert!(Instant::now() < deadline, "the click did not switch the swap off: {}", state(port));
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
