//! The signed C2PA manifest, read back by an independent verifier:
//! c2pa-python (the C2PA reference SDK's binding, from PyPI) through
//! `tests/c2pa/read.py`, on a chain made by `tests/c2pa/make-chain.sh`
//! (openssl). The chain's CA is in no trust list, so the verifier reports
//! the signer as untrusted: everything else (the claim's signature, the
//! data hash over the JPEG) must validate.

use crate::harness::{free_port, online, serial, write_config, Daemon, Mosquitto, Watcher, T};
use crate::util::{repo, shared};
use fusiond::mark::c2pa::{C2paSigner, TRAINED_ALGORITHMIC_MEDIA};
use fusiond::mark::C2paSettings;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The one failure the verifier may report: the test CA is not trusted.
const UNTRUSTED: &str = "signingCredential.untrusted";

fn python() -> String {
    std::env::var("FUSIOND_PYTHON").unwrap_or_else(|_| {
        panic!("FUSIOND_PYTHON is not set: run the tests through tests/run.sh, whose setup makes the venv with c2pa-python")
    })
}

/// A fresh CA and box certificate in `dir`: (`box.pem`, `box.key`).
pub fn chain(dir: &Path) -> (PathBuf, PathBuf) {
    let out = Command::new("bash").arg(repo("tests/c2pa/make-chain.sh")).arg(dir).output().unwrap();
    assert!(out.status.success(), "make-chain.sh (needs openssl): {}", String::from_utf8_lossy(&out.stderr));
    (dir.join("box.pem"), dir.join("box.key"))
}

/// What c2pa-python reads in each file, one JSON object per file.
fn read(files: &[&Path]) -> Vec<serde_json::Value> {
    let out = Command::new(python()).arg(repo("tests/c2pa/read.py")).args(files).output().unwrap();
    assert!(out.status.success(), "tests/c2pa/read.py: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// Asserts a manifest that validates but for the untrusted test CA, with
/// one `c2pa.created` action of `source_type`.
fn assert_signed(r: &serde_json::Value, source_type: &str) {
    assert_eq!(r["manifest"], true, "{r}");
    let failures: Vec<&str> = r["failures"].as_array().unwrap().iter().filter_map(|f| f.as_str()).collect();
    assert!(failures.iter().all(|f| *f == UNTRUSTED), "{r}");
    let successes = r["successes"].to_string();
    for code in ["claimSignature.validated", "assertion.dataHash.match"] {
        assert!(successes.contains(code), "{code} missing: {r}");
    }
    assert_eq!(r["actions"][0]["action"], "c2pa.created", "{r}");
    assert_eq!(r["actions"][0]["digitalSourceType"], source_type, "{r}");
    assert_eq!(r["common_name"], "fusiond test box", "{r}");
    assert_eq!(r["generator"][0], "fusiond", "{r}");
}

fn settings(cert: &Path, key: &Path) -> C2paSettings {
    C2paSettings {
        enabled: true,
        certificate: cert.display().to_string(),
        key: key.display().to_string(),
        ..Default::default()
    }
}

#[test]
fn a_signed_frame_validates_and_an_edited_one_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = chain(dir.path());
    let signer = C2paSigner::load(&settings(&cert, &key)).unwrap().unwrap();
    let photo = image::open(shared("images/fr_two_people.jpg")).unwrap().to_rgb8();
    let plain = fusiond::vision::encode_jpeg(&photo, 80).unwrap();
    let signed = signer.sign_jpeg(&plain, true).unwrap();
    let camera = signer.sign_jpeg(&plain, false).unwrap();
    let decoded = image::load_from_memory(&signed).unwrap().to_rgb8();
    assert_eq!(decoded.as_raw(), image::load_from_memory(&plain).unwrap().to_rgb8().as_raw(), "pixels kept");
    // One byte of the picture changed after signing: the hash must fail.
    let mut edited = signed.clone();
    let at = edited.len() - 200;
    edited[at] ^= 0x55;
    let files = [("signed.jpg", &signed), ("camera.jpg", &camera), ("edited.jpg", &edited), ("plain.jpg", &plain)];
    for (name, bytes) in files {
        std::fs::write(dir.path().join(name), bytes).unwrap();
    }
    let paths: Vec<PathBuf> = files.iter().map(|(n, _)| dir.path().join(n)).collect();
    let r = read(&paths.iter().map(|p| p.as_path()).collect::<Vec<_>>());
    println!("{}", r.iter().map(|v| v.to_string()).collect::<Vec<_>>().join("\n"));
    assert_signed(&r[0], TRAINED_ALGORITHMIC_MEDIA);
    assert_signed(&r[1], fusiond::mark::c2pa::DIGITAL_CAPTURE);
    assert!(r[2]["failures"].to_string().contains("assertion.dataHash.mismatch"), "{}", r[2]);
    assert_eq!(r[3]["manifest"], false, "{}", r[3]);
    println!("signed: {} bytes more than the plain JPEG", signed.len() - plain.len());
}

#[test]
fn a_key_that_cannot_be_read_or_does_not_match_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = chain(dir.path());
    let missing = dir.path().join("nowhere.key");
    let e = C2paSigner::load(&settings(&cert, &missing)).unwrap_err();
    assert!(e.contains("output.c2pa.key") && e.contains("nowhere.key"), "{e}");
    // The CA's key does not match the box's certificate.
    let e = C2paSigner::load(&settings(&cert, &dir.path().join("ca.key"))).unwrap_err();
    assert!(e.contains("ca.key"), "{e}");
    assert!(!e.contains("PRIVATE KEY"), "key material in the error: {e}");
    // A self-signed certificate: C2PA refuses it, at load.
    let e = C2paSigner::load(&settings(&dir.path().join("ca.pem"), &dir.path().join("ca.key"))).unwrap_err();
    assert!(e.contains("ca.pem"), "{e}");
    assert!(C2paSigner::load(&settings(&cert, &key)).is_ok());
}

/// A running daemon with the manifest on: its snapshot (HTTP and MQTT), a
/// frame on `<base>/frame` and a frame of the MJPEG stream validate, and a
/// config whose key is missing stops the start, naming the key.
#[test]
fn a_running_daemons_snapshot_frames_and_stream_carry_a_valid_manifest() {
    let _s = serial();
    let broker = Mosquitto::start(free_port());
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = chain(&dir.path().join("chain"));
    let port = free_port();
    let c2pa = |key: &Path| {
        format!(
            "\n[output.c2pa]\nenabled = true\ncertificate = \"{}\"\nkey = \"{}\"\n[http]\nlisten = \"127.0.0.1:{port}\"\n",
            cert.display(),
            key.display()
        )
    };
    let bad = write_config(dir.path(), broker.port, "c2pa", &c2pa(&dir.path().join("missing.key")));
    let out = crate::util::fusiond_command().args(["run", "--config"]).arg(&bad).output().unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && text.contains("output.c2pa.key") && text.contains("missing.key"), "{text}");

    let config = write_config(dir.path(), broker.port, "c2pa", &c2pa(&key));
    let w = Watcher::start(broker.port, "fusiond/c2pa");
    let d = Daemon::spawn(&config);
    online(&w);
    crate::http::healthy(port, &d);
    let (code, snapshot) = crate::http::get(port, "GET", "/snapshot.jpg");
    assert_eq!(code, 200);
    let frame = w.wait("frame", *T, |_| true).payload;
    let stream = stream_frame(port);
    let files = [("snapshot.jpg", snapshot), ("frame.jpg", frame), ("stream.jpg", stream)];
    for (name, bytes) in &files {
        std::fs::write(dir.path().join(name), bytes).unwrap();
    }
    let paths: Vec<PathBuf> = files.iter().map(|(n, _)| dir.path().join(n)).collect();
    for r in read(&paths.iter().map(|p| p.as_path()).collect::<Vec<_>>()) {
        println!("{r}");
        // The sample frames' faces are swapped: synthetic.
        assert_signed(&r, TRAINED_ALGORITHMIC_MEDIA);
    }
    let log = d.log();
    let key_text = std::fs::read_to_string(&key).unwrap();
    let key_line = key_text.lines().nth(1).unwrap();
    assert!(!log.contains(key_line) && !log.contains("PRIVATE KEY"), "key material in the log");
}

/// The first JPEG of `/stream.mjpeg`, cut by its part's Content-Length
/// (a manifest's binary may hold any byte pair, FF D9 included).
fn stream_frame(port: u16) -> Vec<u8> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(*T)).unwrap();
    write!(s, "GET /stream.mjpeg HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n").unwrap();
    let (mut buf, mut chunk, deadline) = (Vec::new(), [0u8; 65536], Instant::now() + *T);
    loop {
        assert!(Instant::now() < deadline, "no JPEG on the stream");
        let n = s.read(&mut chunk).unwrap();
        assert!(n > 0, "the stream ended");
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf).into_owned();
        let Some(at) = text.find("Content-Length: ") else { continue };
        let Some(end) = text[at..].find("\r\n\r\n") else { continue };
        let len: usize = text[at + 16..at + end].trim().parse().unwrap();
        // The lossy text keeps byte offsets up to the first non-UTF-8 byte,
        // and the part's headers are ASCII before it.
        let body = at + end + 4;
        if buf.len() >= body + len {
            return buf[body..body + len].to_vec();
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
