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
