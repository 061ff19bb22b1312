//! The test harness of the daemon tests: a real mosquitto on a free
//! loopback port, an MQTT client that records everything under a base
//! topic, the config writer and `fusiond run` as a child process.

use crate::util::{contract_models, shared};
use rumqttc::{Client, Event, MqttOptions, Packet, QoS};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Daemons are CPU-heavy; on a 2-core box they run one at a time.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A real mosquitto on 127.0.0.1:`port`, killed on drop.
pub struct Mosquitto {
    child: Child,
    pub port: u16,
    _dir: tempfile::TempDir,
}

impl Mosquitto {
    pub fn start(port: u16) -> Mosquitto {
        Self::start_with(port, "allow_anonymous true\n")
    }

    /// `extra` is appended to the listener's configuration.
    pub fn start_with(port: u16, extra: &str) -> Mosquitto {
        let dir = tempfile::tempdir().unwrap();
        let conf = dir.path().join("mosquitto.conf");
        std::fs::write(
            &conf,
            format!("user root\npersistence false\nmessage_size_limit 0\nlistener {port} 127.0.0.1\n{extra}"),
        )
        .unwrap();
        let child = Command::new("mosquitto")
            .arg("-c")
            .arg(&conf)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start mosquitto ({e}): install it (tests/setup.sh does: apt install mosquitto)")
            });
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "mosquitto did not listen on {port}");
            std::thread::sleep(Duration::from_millis(20));
        }
        Mosquitto { child, port, _dir: dir }
    }
}

impl Drop for Mosquitto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[derive(Clone, Debug)]
pub struct Msg {
    pub topic: String,
    pub payload: Vec<u8>,
    /// Delivered from the broker's retained store at subscription time.
    pub retained: bool,
    pub at: Instant,
}

impl Msg {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.payload).into_owned()
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.payload)
            .unwrap_or_else(|e| panic!("{}: not JSON ({e}): {}", self.topic, self.text()))
    }
}

/// A real MQTT client subscribed to everything under the device's base.
pub struct Watcher {
    client: Client,
    seen: Arc<Mutex<Vec<Msg>>>,
    base: String,
}

impl Watcher {
    pub fn start(port: u16, base: &str) -> Watcher {
        let mut options = MqttOptions::new(format!("watcher-{}", free_port()), "127.0.0.1", port);
        options.set_max_packet_size(64 << 20, 64 << 20).set_keep_alive(Duration::from_secs(5));
        let (client, mut connection) = Client::new(options, 64);
        client.subscribe(format!("{base}/#"), QoS::AtLeastOnce).unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        std::thread::spawn(move || {
            for event in connection.iter() {
                match event {
                    Ok(Event::Incoming(Packet::Publish(p))) => {
                        let m =
                            Msg { topic: p.topic, payload: p.payload.to_vec(), retained: p.retain, at: Instant::now() };
                        s.lock().unwrap().push(m);
                    }
                    Ok(_) => {}
                    Err(_) => std::thread::sleep(Duration::from_millis(100)),
                }
            }
        });
        Watcher { client, seen, base: base.into() }
    }

    /// Publishes on any topic (retained when `retain`).
    pub fn publish(&self, topic: &str, payload: impl Into<Vec<u8>>, retain: bool) {
        self.client.publish(topic, QoS::AtLeastOnce, retain, payload).unwrap();
    }

    pub fn send(&self, feature: &str, payload: impl Into<Vec<u8>>) {
        self.client.publish(format!("{}/{feature}/set", self.base), QoS::AtLeastOnce, false, payload).unwrap();
    }

    pub fn all(&self) -> Vec<Msg> {
        self.seen.lock().unwrap().clone()
    }

    /// Every `events` message so far, as JSON.
    pub fn all_events(&self) -> Vec<serde_json::Value> {
        let topic = format!("{}/events", self.base);
        self.all().iter().filter(|m| m.topic == topic).map(Msg::json).collect()
    }

    pub fn count(&self) -> usize {
        self.seen.lock().unwrap().len()
    }

    /// The first message after index `from` on `<base>/<leaf>` that `pred`
    /// accepts; panics with what did arrive after `timeout`.
    pub fn wait_from(&self, from: usize, leaf: &str, timeout: Duration, pred: impl Fn(&Msg) -> bool) -> Msg {
        let topic = format!("{}/{leaf}", self.base);
        let deadline = Instant::now() + timeout;
        loop {
            let found = {
                let seen = self.seen.lock().unwrap();
                seen[from.min(seen.len())..].iter().find(|m| m.topic == topic && pred(m)).cloned()
            };
            if let Some(m) = found {
                return m;
            }
            if Instant::now() > deadline {
                let got: Vec<String> = self.all()[from..]
                    .iter()
                    .filter(|m| !m.topic.ends_with("/frame"))
                    .map(|m| format!("{} {}", m.topic, m.text().chars().take(160).collect::<String>()))
                    .collect();
                panic!("no matching message on {topic} within {timeout:?}; got:\n{}", got.join("\n"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn wait(&self, leaf: &str, timeout: Duration, pred: impl Fn(&Msg) -> bool) -> Msg {
        self.wait_from(0, leaf, timeout, pred)
    }
}

/// `d` times $FUSIOND_TEST_SLOWDOWN: under emulation (tests/cross/run.sh
/// sets it) the daemon runs about ten times slower, so timings a test
/// imposes or expects scale with it.
pub fn slow(d: Duration) -> Duration {
    static SLOWDOWN: std::sync::LazyLock<u32> = std::sync::LazyLock::new(|| {
        std::env::var("FUSIOND_TEST_SLOWDOWN").ok().and_then(|v| v.parse::<u32>().ok()).unwrap_or(1).max(1)
    });
    d * *SLOWDOWN
}

/// How long a test waits for an expected message.
pub static T: std::sync::LazyLock<Duration> = std::sync::LazyLock::new(|| slow(Duration::from_secs(60)));

/// A config for the daemon in `dir`: shared detector and recogniser, a
/// contract swapper, the shared camera frames, and the given broker port.
pub fn write_config(dir: &Path, port: u16, device: &str, extra: &str) -> PathBuf {
    let models = shared("models");
    let samples = shared("camera/two_people_pan");
    let source = shared("images/fr_obama.jpg");
    let text = format!(
        r#"
[models]
dirs = ["{models}", "{contract}"]
ramdisk = "{dir}/ramdisk"

[[tier]]
name = "fast"
models = ["yunet_2023mar", "arcface_fr", "identity_swapper"]

[[tier]]
name = "quality"
models = ["yunet_2023mar", "arcface_fr", "latent_color_swapper"]

[camera]
source = "sequence"
samples = ["{samples}"]
samples_fps = 10.0
reconnect_min_ms = 100
reconnect_max_ms = 400

[mqtt]
host = "127.0.0.1"
port = {port}
device_id = "{device}"
keep_alive_s = 5
reconnect_max_s = 2

[pipeline]
source = "{source}"
state_dir = "{dir}/state"
max_source_bytes = 300000

[output]
frame_rate = 5.0
stats_interval_s = 1
{extra}
"#,
        models = models.display(),
        contract = contract_models().display(),
        dir = dir.display(),
        samples = samples.display(),
        source = source.display(),
    );
    let path = dir.join("fusiond.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// `fusiond run` as a child process, killed on drop; its log is kept.
pub struct Daemon {
    pub child: Child,
    log: PathBuf,
}

impl Daemon {
    pub fn spawn(config: &Path) -> Daemon {
        Self::spawn_env(config, &[])
    }

    pub fn spawn_env(config: &Path, env: &[(&str, &Path)]) -> Daemon {
        let log = config.with_file_name("daemon.log");
        let child = crate::util::fusiond_command()
            .args(["run", "--config"])
            .arg(config)
            .envs(env.iter().map(|(k, v)| (*k, *v)))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        Daemon { child, log }
    }

    /// Peak RSS over the next `frames` published frames. Resident memory
    /// swings by a frame's working set as each frame is processed, and under
    /// emulation a sample may land anywhere in that swing, so no sample is a
    /// baseline. The kernel's high-water mark is reset (`clear_refs` 5,
    /// Linux >= 4.0) and read back after the frames: the same window before
    /// and after compares like with like.
    pub fn peak_rss_kb_over_frames(&self, w: &Watcher, frames: usize) -> u64 {
        let pid = self.child.id();
        std::fs::write(format!("/proc/{pid}/clear_refs"), "5")
            .expect("resetting the peak RSS needs /proc/PID/clear_refs (Linux >= 4.0, CONFIG_PROC_PAGE_MONITOR)");
        for _ in 0..frames {
            let from = w.count();
            w.wait_from(from, "faces", *T, |_| true);
        }
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    pub fn signal(&self, sig: nix::sys::signal::Signal) {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.child.id() as i32), sig).unwrap();
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn online(w: &Watcher) -> Msg {
    w.wait("available", *T, |m| m.payload == b"online")
}
