//! The HTTP side of a running daemon, with real clients: ffmpeg reads the
//! MJPEG stream, promtool checks the metrics, and plain HTTP requests get
//! health, snapshots and clear refusals.

use crate::harness::{free_port, online, serial, write_config, Daemon, Mosquitto, Watcher, T};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

/// One HTTP/1.0 request without a body; the status code and the body.
pub fn get(port: u16, method: &str, path: &str) -> (u16, Vec<u8>) {
    send(port, method, path, b"")
}

/// The Content-Type a command carries here: one a web form cannot send.
pub const OCTETS: &str = "Content-Type: application/octet-stream\r\n";

/// One HTTP/1.0 request with `body` (a command's Content-Type).
fn send(port: u16, method: &str, path: &str, body: &[u8]) -> (u16, Vec<u8>) {
    request(port, method, path, OCTETS, body)
}

/// One HTTP/1.0 request with extra header lines (each ending in CRLF).
pub fn request(port: u16, method: &str, path: &str, headers: &str, body: &[u8]) -> (u16, Vec<u8>) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(*T)).unwrap();
    let head =
        format!("{method} {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n{headers}Content-Length: {}\r\n\r\n", body.len());
    s.write_all(head.as_bytes()).unwrap();
    // A refused oversized body may close the connection before it is all sent.
    let _ = s.write_all(body);
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("a header block");
    let head = String::from_utf8_lossy(&raw[..split]).to_string();
    let code = head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or_else(|| panic!("status line: {head}"));
    (code, raw[split + 4..].to_vec())
}

pub fn state(port: u16) -> serde_json::Value {
    let (code, body) = get(port, "GET", "/api/state");
    assert_eq!(code, 200);
    serde_json::from_slice(&body).unwrap()
}

/// Waits for `/api/health` to answer 200.
pub fn healthy(port: u16, d: &Daemon) {
    let deadline = Instant::now() + *T;
    let health = loop {
        let (code, body) = get(port, "GET", "/api/health");
        if code == 200 || Instant::now() > deadline {
            break (code, body);
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(health.0, 200, "{}\n{}", String::from_utf8_lossy(&health.1), d.log());
}

fn is_jpeg_640x480(bytes: &[u8]) -> bool {
    image::load_from_memory(bytes).is_ok_and(|i| (i.width(), i.height()) == (640, 480))
}

fn tool(name: &str) -> Command {
    let found = Command::new("sh").arg("-c").arg(format!("command -v {name}")).output().unwrap();
    assert!(found.status.success(), "{name} is missing: tests/setup.sh installs it (apt install ffmpeg prometheus)");
    Command::new(name)
}

#[test]
fn health_metrics_snapshot_and_an_mjpeg_stream_that_ffmpeg_reads() {
    let _s = serial();
    let broker = Mosquitto::start(free_port());
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let extra = format!("\n[http]\nlisten = \"127.0.0.1:{port}\"\nstream_fps = 10.0\n");
    let config = write_config(dir.path(), broker.port, "web", &extra);
    let w = Watcher::start(broker.port, "fusiond/web");
    let d = Daemon::spawn(&config);
    online(&w);
    healthy(port, &d);
    let v: serde_json::Value = serde_json::from_slice(&get(port, "GET", "/api/health").1).unwrap();
    assert_eq!(v["status"], "online");
    let (code, page) = get(port, "GET", "/");
    assert!(code == 200 && String::from_utf8_lossy(&page).contains("/stream.mjpeg"), "the live page");

    let out = dir.path().join("frames");
    std::fs::create_dir_all(&out).unwrap();
    let url = format!("http://127.0.0.1:{port}/stream.mjpeg");
    let ffmpeg = tool("ffmpeg")
        .args(["-loglevel", "error", "-y", "-f", "mpjpeg", "-i", &url, "-frames:v", "10", "-c", "copy"])
        .arg(out.join("out%d.jpg"))
        .output()
        .unwrap();
    assert!(ffmpeg.status.success(), "ffmpeg: {}", String::from_utf8_lossy(&ffmpeg.stderr));
    for i in 1..=10 {
        let bytes = std::fs::read(out.join(format!("out{i}.jpg"))).unwrap();
        assert!(is_jpeg_640x480(&bytes), "frame {i} is not a 640x480 JPEG ({} bytes)", bytes.len());
    }
    assert!(std::fs::metadata(out.join("out11.jpg")).is_err(), "ffmpeg stopped at 10");

    let (code, snapshot) = get(port, "GET", "/snapshot.jpg");
    assert_eq!(code, 200);
    assert!(is_jpeg_640x480(&snapshot));

    let stats = w.wait("stats", *T, |_| true).json();
    assert!(stats["http_dropped_frames"].is_u64() && stats["http_stream_clients"].is_u64(), "{stats}");
    std::thread::sleep(Duration::from_millis(1500));
    let (code, metrics) = get(port, "GET", "/metrics");
    assert_eq!(code, 200);
    let text = String::from_utf8(metrics).unwrap();
    for name in ["fusiond_frames_processed_total", "fusiond_http_stream_frames_sent_total", "fusiond_model_info"] {
        assert!(text.contains(name), "{name} missing:\n{text}");
    }
    let mut check = tool("promtool").args(["check", "metrics"]).stdin(std::process::Stdio::piped()).spawn().unwrap();
    check.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let checked = check.wait_with_output().unwrap();
    assert!(checked.status.success(), "promtool check metrics failed:\n{text}");

    // Commands: the same validator and control path as MQTT.
    let (code, body) = send(port, "POST", "/api/blend", b"40");
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    let (_, state) = get(port, "GET", "/api/state");
    let state: serde_json::Value = serde_json::from_slice(&state).unwrap();
    assert_eq!(state["states"]["blend"], "40", "{state}");
    assert_eq!(state["available"], "online");
    let from = w.count();
    let (code, body) = send(port, "POST", "/api/blend", b"500");
    assert_eq!(code, 400);
    let refused: serde_json::Value = serde_json::from_slice(&body).unwrap();
    let on_mqtt = w.wait_from(from, "error", *T, |_| true).json();
    assert_eq!(refused, on_mqtt, "HTTP and MQTT give the same reason");
    assert_eq!(refused["command"], "blend");
    let (_, state) = get(port, "GET", "/api/state");
    let state: serde_json::Value = serde_json::from_slice(&state).unwrap();
    assert_eq!(state["states"]["blend"], "40", "a refused command changes nothing");
    assert_eq!(send(port, "POST", "/api/nosuch", b"1").0, 404);
    assert_eq!(get(port, "GET", "/api/blend").0, 405);
    assert_eq!(send(port, "POST", "/api/source", &vec![0u8; 700_000]).0, 413, "over pipeline.max_source_bytes");

    assert_eq!(get(port, "GET", "/nothing/here").0, 404);
    assert_eq!(get(port, "POST", "/snapshot.jpg").0, 405);
    assert_eq!(get(port, "GET", "/api/health").0, 200, "the daemon still serves after all that");
}

/// A PNG whose header is honest and whose pixels are zeros: 25 megapixels
/// in a few kilobytes.
fn decompression_bomb() -> Vec<u8> {
    use image::ImageEncoder;
    let side = 5000u32;
    let zeros = vec![0u8; (side * side) as usize];
    let mut png = Vec::new();
    let encoder = image::codecs::png::PngEncoder::new_with_quality(
        &mut png,
        image::codecs::png::CompressionType::Fast,
        image::codecs::png::FilterType::NoFilter,
    );
    encoder.write_image(&zeros, side, side, image::ExtendedColorType::L8).unwrap();
    png
}

#[test]
fn a_token_guards_commands_the_bank_is_listed_and_a_decompression_bomb_changes_nothing() {
    let _s = serial();
    let broker = Mosquitto::start(free_port());
    let dir = tempfile::tempdir().unwrap();
    let creds = dir.path().join("credentials");
    std::fs::create_dir_all(&creds).unwrap();
    let token = "fusiond-test-token-0123456789";
    std::fs::write(creds.join("http-token"), format!("{token}\n")).unwrap();
    let port = free_port();
    let extra = format!("\n[http]\nlisten = \"127.0.0.1:{port}\"\ntoken_file = \"http-token\"\n");
    let config = write_config(dir.path(), broker.port, "token", &extra);
    let w = Watcher::start(broker.port, "fusiond/token");
    let d = Daemon::spawn_env(&config, &[("CREDENTIALS_DIRECTORY", &creds)]);
    online(&w);
    healthy(port, &d);
    let before = state(port);
    assert_eq!(before["states"]["enabled"], "ON", "{before}");
    assert_eq!(before["choices"]["quality"], serde_json::json!(["fast", "quality"]), "{before}");

    for auth in ["", "Authorization: Bearer not-the-token\r\n"] {
        let (code, body) = request(port, "POST", "/api/enabled", &format!("{OCTETS}{auth}"), b"OFF");
        assert_eq!(code, 401, "{auth}: {}", String::from_utf8_lossy(&body));
    }
    assert_eq!(state(port)["states"], before["states"], "a refused request changes nothing");

    let bearer = format!("{OCTETS}Authorization: Bearer {token}\r\n");
    let bomb = decompression_bomb();
    assert!(bomb.len() < 300_000, "the bomb fits pipeline.max_source_bytes ({} bytes)", bomb.len());
    let (code, body) = request(port, "POST", "/api/source", &bearer, &bomb);
    let refused: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(code, 400, "{refused}");
    assert!(refused["reason"].as_str().unwrap().contains("pixels"), "{refused}");
    assert_eq!(state(port)["states"], before["states"], "the bomb changed nothing");

    let mut named = b"obama2\n".to_vec();
    named.extend(std::fs::read(crate::util::shared("images/fr_obama2.jpg")).unwrap());
    let (code, body) = request(port, "POST", "/api/source", &bearer, &named);
    assert_eq!(code, 200, "{}\n{}", String::from_utf8_lossy(&body), d.log());
    let after = state(port);
    assert!(after["bank"].as_array().unwrap().iter().any(|n| n == "obama2"), "{after}");
    let (code, _) = request(port, "POST", "/api/enabled", &bearer, b"OFF");
    assert_eq!(code, 200);
    assert_eq!(state(port)["states"]["enabled"], "OFF");
}

#[test]
fn an_address_beyond_loopback_needs_a_token_file_that_can_be_read() {
    let dir = tempfile::tempdir().unwrap();
    for (extra, says) in [
        ("\n[http]\nlisten = \"0.0.0.0:18080\"\n", "http.token_file"),
        ("\n[http]\nlisten = \"0.0.0.0:18080\"\ntoken_file = \"/nonexistent/token\"\n", "cannot read it"),
    ] {
        let config = write_config(dir.path(), free_port(), "open", extra);
        let out = crate::util::fusiond_command().args(["run", "--config"]).arg(&config).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && stderr.contains(says), "{says}: {stderr}");
    }
}
