//! systemd integration without booting systemd: the units checked by
//! systemd-analyze against a root holding the binary, sysusers/tmpfiles
//! applied to a scratch root, and the notify protocol read from a real
//! NOTIFY_SOCKET the test binds.

use crate::harness::{free_port, serial, slow, write_config, Daemon, Mosquitto, Watcher, T};
use crate::util::repo;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn tool(name: &str) -> PathBuf {
    for dir in ["/usr/bin", "/bin", "/usr/sbin"] {
        let p = Path::new(dir).join(name);
        if p.exists() {
            return p;
        }
    }
    panic!("{name} is missing: install the `systemd` package (tests/setup.sh does)");
}

/// A scratch root with the host's stock units, the fusiond binary at
/// /usr/bin/fusiond and fusiond's units beside the stock ones.
fn unit_root() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    std::fs::create_dir_all(r.join("usr/bin")).unwrap();
    std::fs::create_dir_all(r.join("usr/lib/systemd")).unwrap();
    std::os::unix::fs::symlink("usr/bin", r.join("bin")).unwrap();
    let status = Command::new("cp").arg("-a").arg("/usr/lib/systemd/system").arg(r.join("usr/lib/systemd/")).status();
    assert!(status.unwrap().success(), "cannot copy the host's units");
    std::fs::copy(env!("CARGO_BIN_EXE_fusiond"), r.join("usr/bin/fusiond")).unwrap();
    std::fs::copy("/usr/bin/kill", r.join("usr/bin/kill")).unwrap();
    for unit in ["fusiond.service", "fusiond-stage.service"] {
        std::fs::copy(repo(&format!("systemd/{unit}")), r.join("usr/lib/systemd/system").join(unit)).unwrap();
    }
    root
}

/// `systemd-analyze verify` of `units` in `root`. It exits 0 on unknown keys
/// and bad values and only prints, so any output is a failure.
fn assert_verify_clean(root: &Path, units: &[PathBuf]) {
    let out = Command::new(tool("systemd-analyze"))
        .arg("verify")
        .arg(format!("--root={}", root.display()))
        .args(units)
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && text.trim().is_empty(), "systemd-analyze verify:\n{text}");
}

/// `systemd-analyze security` of `unit` in `root`, offline: its report.
fn security_report(root: &Path, unit: &Path) -> String {
    let out = Command::new(tool("systemd-analyze"))
        .args(["security", "--offline=yes", "--no-pager"])
        .arg(format!("--root={}", root.display()))
        .arg(unit)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn units_verify_clean_and_score_low_exposure() {
    let root = unit_root();
    let r = root.path();
    let units: Vec<PathBuf> =
        ["fusiond.service", "fusiond-stage.service"].iter().map(|u| r.join("usr/lib/systemd/system").join(u)).collect();
    assert_verify_clean(r, &units);
    let text = security_report(r, &units[0]);
    let score: f32 = text
        .lines()
        .find_map(|l| l.split("Overall exposure level for fusiond.service:").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no exposure score in:\n{text}"));
    println!("systemd-analyze security fusiond.service: exposure {score}");
    assert!(score <= 2.0, "exposure {score} is above 2.0:\n{text}");
}

/// The GPU drop-in (systemd/fusiond-gpu.conf) merges into the unit cleanly:
/// GPU device nodes, JIT-able memory, a longer start for engine builds.
#[test]
fn the_gpu_drop_in_verifies_clean_and_opens_what_cuda_needs() {
    let root = unit_root();
    let r = root.path();
    let dropins = r.join("etc/systemd/system/fusiond.service.d");
    std::fs::create_dir_all(&dropins).unwrap();
    std::fs::copy(repo("systemd/fusiond-gpu.conf"), dropins.join("gpu.conf")).unwrap();
    let unit = r.join("usr/lib/systemd/system/fusiond.service");
    assert_verify_clean(r, std::slice::from_ref(&unit));
    let text = security_report(r, &unit);
    assert!(
        text.lines().any(|l| l.contains("MemoryDenyWriteExecute=") && l.trim_start().starts_with('✗')),
        "the drop-in must lift MemoryDenyWriteExecute:\n{text}"
    );
}

#[test]
fn sysusers_and_tmpfiles_apply_to_a_root() {
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    std::fs::create_dir_all(r.join("etc")).unwrap();
    std::fs::write(r.join("etc/group"), "root:x:0:\nvideo:x:44:\n").unwrap();
    std::fs::write(r.join("etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n").unwrap();
    let out = Command::new(tool("systemd-sysusers"))
        .arg(format!("--root={}", r.display()))
        .arg(repo("systemd/fusiond.sysusers"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let passwd = std::fs::read_to_string(r.join("etc/passwd")).unwrap();
    let group = std::fs::read_to_string(r.join("etc/group")).unwrap();
    assert!(passwd.lines().any(|l| l.starts_with("fusiond:")), "{passwd}");
    assert!(group.lines().any(|l| l.starts_with("video:") && l.ends_with("fusiond")), "{group}");

    let out = Command::new(tool("systemd-tmpfiles"))
        .arg(format!("--root={}", r.display()))
        .arg("--create")
        .arg(repo("systemd/fusiond.tmpfiles"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for p in ["run/fusiond", "var/lib/fusiond/models", "var/lib/fusiond/state", "etc/fusiond/conf.d"] {
        assert!(r.join(p).is_dir(), "{p} not created");
    }
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    // The state directory is the daemon user's, as StateDirectory= makes it.
    let uid: u32 =
        passwd.lines().find(|l| l.starts_with("fusiond:")).unwrap().split(':').nth(2).unwrap().parse().unwrap();
    assert_eq!(std::fs::metadata(r.join("var/lib/fusiond/state")).unwrap().uid(), uid);
    for secret in ["etc/fusiond/mqtt-password", "etc/fusiond/http-token"] {
        let mode = std::fs::metadata(r.join(secret)).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{secret}");
    }
}

/// Datagrams received on a NOTIFY_SOCKET, with arrival times.
struct NotifySocket {
    path: PathBuf,
    got: Arc<Mutex<Vec<(String, Instant)>>>,
}

impl NotifySocket {
    fn bind(dir: &Path) -> NotifySocket {
        let path = dir.join("notify.sock");
        let socket = UnixDatagram::bind(&path).unwrap();
        let got = Arc::new(Mutex::new(Vec::new()));
        let g = got.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = socket.recv(&mut buf) {
                let text = String::from_utf8_lossy(&buf[..n]).into_owned();
                g.lock().unwrap().push((text, Instant::now()));
            }
        });
        NotifySocket { path, got }
    }

    fn all(&self) -> Vec<(String, Instant)> {
        self.got.lock().unwrap().clone()
    }

    fn wait(&self, what: &str) -> Instant {
        let deadline = Instant::now() + *T;
        loop {
            if let Some((_, at)) = self.all().into_iter().find(|(m, _)| m == what) {
                return at;
            }
            assert!(Instant::now() < deadline, "no {what}; got {:?}", self.all());
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The watchdog interval the notify tests give the daemon (WatchdogSec=),
/// scaled under emulation like every timing below. The processing loop pings
/// every half interval, between frames, so the worst gap is half an interval
/// plus one frame, and the gap check (< 0.9 interval) holds while a frame
/// takes under 0.4 of it: 1.2 s natively (a frame takes ~0.1 s) and 12 s
/// under qemu-aarch64 (x10), where with other tests and a busy core beside
/// it the worst gap measured 18.5 s of 30, i.e. frames of ~3.5 s, and a 1 s
/// interval (4 s of frame budget) failed.
const WATCHDOG: Duration = Duration::from_secs(3);

fn spawn_notified(dir: &Path, port: u16, device: &str, extra: &str) -> (NotifySocket, Daemon) {
    let config = write_config(dir, port, device, extra);
    let socket = NotifySocket::bind(dir);
    let usec = slow(WATCHDOG).as_micros().to_string();
    let daemon = Daemon::spawn_env(&config, &[("NOTIFY_SOCKET", &socket.path), ("WATCHDOG_USEC", Path::new(&usec))]);
    (socket, daemon)
}

#[test]
fn notify_says_status_ready_watchdog_and_stopping_in_order() {
    let _s = serial();
    let broker = Mosquitto::start(free_port());
    let dir = tempfile::tempdir().unwrap();
    let (socket, mut daemon) = spawn_notified(dir.path(), broker.port, "notify", "");
    let ready = socket.wait("READY=1");
    std::thread::sleep(slow(WATCHDOG * 5 / 2));
    daemon.signal(nix::sys::signal::Signal::SIGTERM);
    let stopping = socket.wait("STOPPING=1");
    assert!(daemon.child.wait().unwrap().success(), "{}", daemon.log());
    let all = socket.all();
    let index = |what: &str| all.iter().position(|(m, _)| m.starts_with(what)).unwrap_or(usize::MAX);
    let order = [
        index("STATUS=checking staging"),
        index("STATUS=loading and warming tier fast"),
        index("STATUS=waiting for the camera"),
        index("READY=1"),
        index("STATUS=running tier fast"),
        index("STOPPING=1"),
    ];
    assert!(order.windows(2).all(|w| w[0] < w[1] && w[1] != usize::MAX), "{order:?} in {all:?}");
    // A ping every half interval from the processing loop.
    let pings: Vec<Instant> =
        all.iter().filter(|(m, at)| m == "WATCHDOG=1" && *at > ready && *at < stopping).map(|(_, at)| *at).collect();
    assert!(pings.len() >= 3, "{} pings in {:?}", pings.len(), stopping - ready);
    let worst = pings.windows(2).map(|w| w[1] - w[0]).max().unwrap();
    println!("watchdog: {} pings in {:?}, worst gap {worst:?} of {:?}", pings.len(), stopping - ready, slow(WATCHDOG));
    assert!(worst < slow(WATCHDOG * 9 / 10), "a gap of {worst:?} between pings");
}

#[test]
fn a_stalled_pipeline_stops_the_watchdog_pings() {
    let _s = serial();
    let broker = Mosquitto::start(free_port());
    let dir = tempfile::tempdir().unwrap();
    let w = Watcher::start(broker.port, "fusiond/stall");
    let (socket, daemon) = spawn_notified(dir.path(), broker.port, "stall", "[debug]\nstall_command = true\n");
    socket.wait("READY=1");
    std::thread::sleep(slow(WATCHDOG * 3 / 2));
    let pings = |after: Instant| socket.all().iter().filter(|(m, at)| m == "WATCHDOG=1" && *at > after).count();
    assert!(pings(Instant::now() - slow(WATCHDOG)) >= 1, "pings before the stall");
    w.send("stall", b"now".to_vec());
    std::thread::sleep(slow(WATCHDOG));
    let stalled = Instant::now();
    std::thread::sleep(slow(WATCHDOG * 3));
    assert_eq!(pings(stalled), 0, "pings went on after the stall; log:\n{}", daemon.log());
    drop(daemon);

    // Without debug.stall_command the command is refused.
    let dir = tempfile::tempdir().unwrap();
    let w = Watcher::start(broker.port, "fusiond/nostall");
    let config = write_config(dir.path(), broker.port, "nostall", "");
    let _d = Daemon::spawn_env(&config, &[]);
    w.wait("available", *T, |m| m.payload == b"online");
    w.send("stall", b"now".to_vec());
    w.wait("error", *T, |m| m.json()["command"] == "stall");
}
