//! Hostile senders against a running daemon: `curl` with a forged `Host`
//! (DNS rebinding) and a forged `Origin` (another web page), a flood of
//! large MQTT payloads, and limits that follow a reload.

use crate::harness::{free_port, online, serial, write_config, Daemon, Mosquitto, Watcher, T};
use crate::http::{healthy, request, state, OCTETS};
use std::process::Command;
use std::time::{Duration, Instant};

/// `curl` against the daemon: the status code it got.
fn curl(port: u16, path: &str, args: &[&str]) -> u16 {
    let out = Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "30"])
        .args(args)
        .arg(format!("http://127.0.0.1:{port}{path}"))
        .output()
        .expect("curl (apt install curl; tests/setup.sh installs it)");
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or(0)
}

#[test]
fn curl_with_a_forged_host_or_origin_or_a_form_body_is_refused_and_changes_nothing() {
    let _s = serial();
    let broker = Mosquitto::start(free_port());
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let extra = format!("\n[http]\nlisten = \"127.0.0.1:{port}\"\nallowed_origins = [\"http://ha.example:8123\"]\n");
    let config = write_config(dir.path(), broker.port, "hostile", &extra);
    let w = Watcher::start(broker.port, "fusiond/hostile");
    let d = Daemon::spawn(&config);
    online(&w);
    healthy(port, &d);
    let before = state(port);

    for path in ["/api/state", "/snapshot.jpg", "/", "/metrics"] {
        assert_eq!(curl(port, path, &["-H", "Host: rebound.example"]), 421, "a rebound name reads {path}");
    }
    assert_eq!(curl(port, "/api/state", &["-H", &format!("Host: localhost:{port}")]), 200);
    let json = ["-H", "Content-Type: application/json"];
    let post = |extra: &[&str], body: &str| {
        let args: Vec<&str> = extra.iter().copied().chain(["--data-binary", body]).collect();
        curl(port, "/api/blend", &args)
    };
    assert_eq!(post(&[json[0], json[1], "-H", "Origin: http://evil.example"], "37"), 403, "another origin");
    assert_eq!(post(&[json[0], json[1], "-H", "Origin: null"], "37"), 403, "a sandboxed page");
    assert_eq!(post(&[json[0], json[1], "-H", "Host: rebound.example"], "37"), 421);
    assert_eq!(post(&[], "37"), 415, "curl's default form body, as a cross-site form sends");
    assert_eq!(post(&["-H", "Content-Type: text/plain"], "37"), 415, "a no-cors fetch's body");
    assert_eq!(state(port)["states"], before["states"], "nothing changed");

    assert_eq!(post(&json, "37"), 200, "curl with a JSON body");
    assert_eq!(state(port)["states"]["blend"], "37");
    let page = format!("Origin: http://127.0.0.1:{port}");
    assert_eq!(post(&[json[0], json[1], "-H", &page], "38"), 200, "the page's own origin");
    assert_eq!(post(&[json[0], json[1], "-H", "Origin: http://ha.example:8123"], "39"), 200, "an allowed origin");
    assert_eq!(state(port)["states"]["blend"], "39", "{}", d.log());
}

/// The daemon's peak resident memory since the mark was reset, in KiB.
fn peak_rss_kb(d: &Daemon) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", d.child.id())).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// How much the peak resident memory may rise under the flood: 64 MiB,
/// eight payloads' worth. What the caps leave in flight is rumqttc's read
/// buffer (one packet at a time), one waiting source and one being checked,
/// plus the allocator's slack; before payloads were capped at submit the
/// inbox alone could hold 64 × 8 MiB = 512 MiB.
const FLOOD_RSS_BOUND_KB: u64 = 64 * 1024;

#[test]
fn sixty_four_large_payloads_at_once_are_refused_with_bounded_memory_and_limits_follow_a_reload() {
    let _s = serial();
    let broker = Mosquitto::start(free_port());
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let config =
        write_config(dir.path(), broker.port, "payloads", &format!("\n[http]\nlisten = \"127.0.0.1:{port}\"\n"));
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, text.replace("max_source_bytes = 300000", "max_source_bytes = 8388608")).unwrap();
    let w = Watcher::start(broker.port, "fusiond/payloads");
    let d = Daemon::spawn(&config);
    online(&w);
    healthy(port, &d);
    std::fs::write(format!("/proc/{}/clear_refs", d.child.id()), "5").expect("resetting the peak RSS (Linux >= 4.0)");
    let start_kb = peak_rss_kb(&d);

    let from = w.count();
    let features = ["blend", "enabled", "selector", "quality", "face_order", "mouth_mask", "reload", "source"];
    let big = vec![b'7'; 8 * 1024 * 1024 - 1024];
    for i in 0..64 {
        w.send(features[i % features.len()], big.clone());
    }
    let deadline = Instant::now() + *T;
    let errors = loop {
        let n = w.all()[from..].iter().filter(|m| m.topic.ends_with("/error")).count();
        if n >= 64 || Instant::now() > deadline {
            break n;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(errors, 64, "every payload is answered on error\n{}", d.log());
    let rise_kb = peak_rss_kb(&d).saturating_sub(start_kb);
    println!("flood: 64 payloads of 8 MiB, peak RSS {start_kb} KiB at the start, +{rise_kb} KiB under the flood");
    assert!(rise_kb < FLOOD_RSS_BOUND_KB, "peak RSS rose by {rise_kb} KiB (bound {FLOOD_RSS_BOUND_KB})");
    healthy(port, &d);
    assert_eq!(request(port, "POST", "/api/blend", OCTETS, b"42").0, 200, "still takes commands");

    // A source over the limit gets 413; a reload that raises the limit
    // moves HTTP's and MQTT's limits with it.
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, text.replace("max_source_bytes = 8388608", "max_source_bytes = 300000")).unwrap();
    d.signal(nix::sys::signal::Signal::SIGHUP);
    w.wait_from(from, "events", *T, |m| m.json()["event"] == "reloaded");
    let over = vec![0u8; 400_000];
    assert_eq!(request(port, "POST", "/api/source", OCTETS, &over).0, 413, "over the reloaded limit");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, text.replace("max_source_bytes = 300000", "max_source_bytes = 1000000")).unwrap();
    let reloaded = w.count();
    d.signal(nix::sys::signal::Signal::SIGHUP);
    w.wait_from(reloaded, "events", *T, |m| m.json()["event"] == "reloaded");
    let (code, body) = request(port, "POST", "/api/source", OCTETS, &over);
    assert_eq!(code, 400, "taken in and checked: {}", String::from_utf8_lossy(&body));
    // MQTT's packet limit moved too (the session reconnects to apply it):
    // a 1.5 MB source, over the old packet limit, arrives and is refused
    // with a reason.
    let deadline = Instant::now() + *T;
    let answered = loop {
        let sent = w.count();
        w.send("source", vec![0u8; 1_500_000]);
        let seen = (0..20).any(|_| {
            std::thread::sleep(Duration::from_millis(100));
            w.all()[sent..].iter().any(|m| m.topic.ends_with("/error") && m.text().contains("the limit is 1000000"))
        });
        if seen || Instant::now() > deadline {
            break seen;
        }
    };
    assert!(answered, "a source under the new limit arrives over MQTT\n{}", d.log());
}
