//! The live outputs for `fusiond-bench live`'s `swap+outputs` rows: the
//! real HTTP server with one `/stream.mjpeg` client reading on loopback,
//! and the V4L2 output's hand-off and owner thread. The output device is
//! `--v4l2-device` when given (a v4l2loopback node); without one (no
//! loopback module on this machine) the owner thread converts each frame to
//! YUYV as it would for the device and writes it to /dev/null.

use anyhow::{anyhow, Result};
use fusiond::backoff::Backoff;
use fusiond::http::wire::Limits;
use fusiond::http::{HttpState, Options, Server};
use fusiond::vcam::{FrameSink, SinkError, SinkFactory, V4l2Sink, Vcam, VcamSettings};
use fusiond::vision::{rgb_to_yuyv_into, RgbImage};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

struct DevNull {
    file: std::fs::File,
    size: (u32, u32),
    buf: Vec<u8>,
}

impl FrameSink for DevNull {
    fn name(&self) -> String {
        "/dev/null (YUYV)".into()
    }
    fn size(&self) -> (u32, u32) {
        self.size
    }
    fn write(&mut self, frame: &RgbImage) -> Result<(), SinkError> {
        rgb_to_yuyv_into(frame, &mut self.buf);
        self.file.write_all(&self.buf).map_err(|e| SinkError::Write(e.to_string()))
    }
}

pub struct Outputs {
    pub state: Arc<HttpState>,
    server: Option<Server>,
    vcam: Arc<Vcam>,
    vcam_thread: Option<JoinHandle<()>>,
    client: Option<JoinHandle<()>>,
    /// Bytes the stream client read.
    pub streamed: Arc<AtomicU64>,
    pub device: String,
}

impl Outputs {
    pub fn start(device: Option<PathBuf>) -> Result<Outputs> {
        let state = Arc::new(HttpState::new(60.0));
        let options = Options {
            max_clients: 4,
            token: None,
            limits: Limits::new(),
            hostname: "bench".into(),
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
        };
        let server = Server::start("127.0.0.1:0".parse()?, options, state.clone()).map_err(|e| anyhow!(e))?;
        let mut conn = TcpStream::connect(server.addr)?;
        conn.write_all(b"GET /stream.mjpeg HTTP/1.1\r\nHost: bench\r\n\r\n")?;
        let streamed = Arc::new(AtomicU64::new(0));
        let count = streamed.clone();
        let client = std::thread::spawn(move || {
            let mut buf = vec![0u8; 1 << 16];
            while let Ok(n @ 1..) = conn.read(&mut buf) {
                count.fetch_add(n as u64, Ordering::Relaxed);
            }
        });
        while state.hub.clients() == 0 {
            std::thread::sleep(Duration::from_millis(5));
        }
        let shown = device.as_ref().map_or("/dev/null (no --v4l2-device)".to_string(), |d| d.display().to_string());
        let open: SinkFactory = match device {
            Some(path) => {
                let s = VcamSettings { enabled: true, device: path, ..VcamSettings::default() };
                Box::new(move |w, h| V4l2Sink::open(&s, w, h, 30).map(|d| Box::new(d) as Box<dyn FrameSink>))
            }
            None => Box::new(|w, h| {
                let file = std::fs::OpenOptions::new()
                    .write(true)
                    .open("/dev/null")
                    .map_err(|e| SinkError::Open { path: "/dev/null".into(), message: e.to_string() })?;
                Ok(Box::new(DevNull { file, size: (w, h), buf: Vec::new() }) as Box<dyn FrameSink>)
            }),
        };
        let vcam = Arc::new(Vcam::default());
        let v = vcam.clone();
        let backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(5));
        let vcam_thread = std::thread::spawn(move || v.run(open, backoff, |e| eprintln!("v4l2 output: {e:?}")));
        Ok(Outputs {
            state,
            server: Some(server),
            vcam,
            vcam_thread: Some(vcam_thread),
            client: Some(client),
            streamed,
            device: shown,
        })
    }

    /// What the worker does with a fused frame for these outputs.
    pub fn feed(&self, jpeg: Arc<Vec<u8>>, rgb: &RgbImage) {
        self.vcam.offer(rgb);
        self.state.hub.publish(jpeg);
    }

    /// Median time of the output thread's RGB to YUYV conversion of `rgb`.
    pub fn yuyv_ms(rgb: &RgbImage) -> f64 {
        let mut buf = Vec::new();
        let mut t: Vec<f64> = (0..50)
            .map(|_| {
                let t0 = std::time::Instant::now();
                rgb_to_yuyv_into(rgb, &mut buf);
                t0.elapsed().as_secs_f64() * 1e3
            })
            .collect();
        t.sort_by(f64::total_cmp);
        t[t.len() / 2]
    }

    /// Frames written to the device and replaced unwritten.
    pub fn vcam_counts(&self) -> (u64, u64) {
        (self.vcam.written.load(Ordering::Relaxed), self.vcam.dropped.load(Ordering::Relaxed))
    }
}

impl Drop for Outputs {
    fn drop(&mut self) {
        self.vcam.close();
        self.state.hub.close();
        self.server.take();
        for t in [self.vcam_thread.take(), self.client.take()].into_iter().flatten() {
            let _ = t.join();
        }
    }
}
