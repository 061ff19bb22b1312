//! The broker side of `fusiond-bench live`: a real mosquitto on a free
//! loopback port and a subscriber that timestamps each arrival.

use anyhow::{Context, Result};
use rumqttc::{Client, Event, MqttOptions, Packet, QoS};
use std::path::PathBuf;
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

/// A received message: topic, payload, arrival time.
pub type Arrival = (String, Vec<u8>, Instant);

/// A mosquitto on a free loopback port for the run, killed on drop.
pub struct Mosquitto {
    child: std::process::Child,
    pub port: u16,
    _dir: PathBuf,
}

impl Mosquitto {
    pub fn start() -> Result<Mosquitto> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let dir = tempfile_dir()?;
        let conf = dir.join("mosquitto.conf");
        let text = format!(
            "user root\npersistence false\nmessage_size_limit 0\nlistener {port} 127.0.0.1\nallow_anonymous true\n"
        );
        std::fs::write(&conf, text)?;
        let child = std::process::Command::new("mosquitto")
            .arg("-c")
            .arg(&conf)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .context("cannot start mosquitto: install it (tests/setup.sh does)")?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            anyhow::ensure!(Instant::now() < deadline, "mosquitto did not listen on 127.0.0.1:{port}");
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(Mosquitto { child, port, _dir: dir })
    }
}

impl Drop for Mosquitto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A subscriber that reports each message's arrival.
pub fn subscribe(port: u16, filter: &str) -> Result<(Client, Receiver<Arrival>)> {
    let mut options = MqttOptions::new(format!("bench-{}", std::process::id()), "127.0.0.1", port);
    options.set_max_packet_size(16 << 20, 16 << 20);
    let (client, mut connection) = Client::new(options, 16);
    client.subscribe(filter, QoS::AtMostOnce)?;
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for event in connection.iter() {
            match event {
                Ok(Event::Incoming(Packet::Publish(p))) => {
                    if tx.send((p.topic, p.payload.to_vec(), Instant::now())).is_err() {
                        return;
                    }
                }
                Ok(_) => {}
                Err(_) => return,
            }
        }
    });
    Ok((client, rx))
}

/// A scratch folder for this run (mosquitto's config, the daemon's files).
pub fn tempfile_dir() -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("fusiond-bench-live-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
