//! The audit log of a running daemon: commands over MQTT and HTTP and a
//! SIGHUP each leave a chained line saying where they came from (never the
//! token); `fusiond audit verify` passes it, and names the line after a
//! hand edit.

use crate::harness::{free_port, online, serial, write_config, Daemon, Mosquitto, Watcher, T};
use crate::http::{healthy, request, OCTETS};
use std::time::Instant;

#[test]
fn changes_are_chained_with_their_sender_and_an_edit_is_named() {
    let _s = serial();
    let broker = Mosquitto::start(free_port());
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let log = dir.path().join("audit.jsonl");
    let extra = format!("\n[http]\nlisten = \"127.0.0.1:{port}\"\n[audit]\nfile = \"{}\"\n", log.display());
    let config = write_config(dir.path(), broker.port, "audited", &extra);
    let w = Watcher::start(broker.port, "fusiond/audited");
    let d = Daemon::spawn(&config);
    online(&w);
    healthy(port, &d);
    w.send("enabled", "OFF");
    w.wait("enabled/state", *T, |m| m.text() == "OFF");
    assert_eq!(request(port, "POST", "/api/selector", OCTETS, b"many").0, 200);
    assert_eq!(request(port, "POST", "/api/blend", OCTETS, b"30").0, 200, "not a change the log keeps");
    d.signal(nix::sys::signal::Signal::SIGHUP);
    let deadline = Instant::now() + *T;
    let text = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains("SIGHUP") || Instant::now() > deadline {
            break text;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    println!("{text}");
    let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let changes: Vec<&str> = lines.iter().map(|l| l["change"].as_str().unwrap()).collect();
    assert_eq!(changes, ["enabled", "selector", "reload"], "{text}\n{}", d.log());
    assert!(lines[0]["from"].as_str().unwrap().starts_with("mqtt broker 127.0.0.1:"), "{text}");
    assert!(lines[1]["from"].as_str().unwrap().starts_with("http peer 127.0.0.1:"), "{text}");
    assert_eq!(lines[2]["from"], "SIGHUP");

    let verify = |files: &[&std::path::Path]| {
        let out = crate::util::fusiond_command().args(["audit", "verify"]).args(files).output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stdout).to_string())
    };
    assert_eq!(verify(&[&log]).0, Some(0));
    drop(d);
    std::fs::write(&log, text.replacen("\"OFF\"", "\"ON\"", 1)).unwrap();
    let (code, said) = verify(&[&log]);
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("line 2"), "the line after the edited one: {said}");
    assert_eq!(verify(&[&dir.path().join("missing.jsonl")]).0, Some(2));
}
