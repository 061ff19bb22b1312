//! `fusiond-bench live`: what a 640×480 camera frame costs end to end, with
//! 0, 1 and 2 faces, detector-only and with the swap. Part one times the
//! still-frame work per stage (YUYV conversion, inference, the pixel work
//! around it, JPEG, the HTTP stream and V4L2 output hand-offs, publishing
//! through a real broker); part two runs the
//! real daemon on an emulated 30 fps YUYV camera and reads its stats.

use crate::broker::{subscribe, tempfile_dir, Mosquitto};
use crate::figures::{cpu_seconds, Cols};
use crate::outputs::Outputs;
use anyhow::{anyhow, Context, Result};
use fusiond::capture::{CaptureError, Frame, FrameSource};
use fusiond::cli::bounds as flags;
use fusiond::cli::{load_image, swapper, EngineArgs, ModelArgs, DEFAULT_MODEL_DIR};
use fusiond::daemon::{self, Signals};
use fusiond::face::{
    FusionPipeline, LivePipeline, LiveSettings, PipelineSettings, SelectorMode, SmoothSettings, StickySettings,
};
use fusiond::infer::EngineKind;
use fusiond::mqtt::{Link, LinkSettings, Outbox, Topics};
use fusiond::vision::{encode_jpeg, rgb_to_yuyv, yuyv_to_rgb, Resizer, RgbImage};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    models: ModelArgs,
    /// Swapper model name.
    #[arg(long)]
    swapper: String,
    /// A 640×480 frame with two faces.
    #[arg(long)]
    two: PathBuf,
    /// A photo with one face (resized to 640×480).
    #[arg(long)]
    one: PathBuf,
    /// Photo of the source identity.
    #[arg(long)]
    source: PathBuf,
    /// Timed still-frame runs per scenario.
    #[arg(long, default_value_t = 20)]
    runs: usize,
    /// Seconds of live daemon per scenario (0 skips part two).
    #[arg(long, default_value_t = 6)]
    seconds: u64,
    /// Emulated camera rate for part two.
    #[arg(long, default_value_t = 30.0)]
    camera_fps: f32,
    /// Input size of the refiner row (the detector again on a crop around
    /// each face between full detections, `pipeline.refine_size`); 0 leaves
    /// the row out.
    #[arg(long, default_value_t = 224)]
    refine_size: u32,
    /// The V4L2 output device of the swap+outputs rows (a v4l2loopback
    /// node); without it frames are converted and written to /dev/null.
    #[arg(long)]
    v4l2_device: Option<PathBuf>,
    /// Write part one's medians as JSON here too.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// The camera frame both live benchmarks time.
pub const W: u32 = 640;
pub const H: u32 = 480;

/// `img` resized to the W×H frame.
pub fn fit(img: &RgbImage) -> RgbImage {
    let mut out = RgbImage::new(W, H);
    Resizer::default().resize_into(img, &mut out, W, H);
    out
}

/// A camera that sends the same YUYV picture at a fixed rate; each frame is
/// converted as a V4L2 YUYV frame is.
struct YuyvCamera {
    yuyv: Arc<Vec<u8>>,
    period: Duration,
    due: Option<Instant>,
}

impl FrameSource for YuyvCamera {
    fn name(&self) -> String {
        "emulated-yuyv".into()
    }

    fn next_frame(&mut self, frame: &mut Frame) -> Result<(), CaptureError> {
        let now = Instant::now();
        let due = self.due.unwrap_or(now);
        if due > now {
            std::thread::sleep(due - now);
        }
        self.due = Some(due.max(now) + self.period);
        if frame.image.dimensions() != (W, H) {
            frame.image = RgbImage::new(W, H);
        }
        yuyv_to_rgb(&self.yuyv, &mut frame.image)
            .map_err(|e| CaptureError::Format { source_name: self.name(), message: e.to_string() })?;
        frame.captured = SystemTime::now();
        Ok(())
    }
}

/// Refuses flag values that would divide by zero, never end or exhaust
/// memory, saying which flag and what it takes.
fn check(args: &Args) -> Result<()> {
    flags::count("--runs", args.runs, 1, 100_000)?;
    flags::count("--seconds", usize::try_from(args.seconds).unwrap_or(usize::MAX), 0, 3600)?;
    flags::real("--camera-fps", args.camera_fps.into(), 0.0, 240.0, true)?;
    flags::refine_size(args.refine_size)
}

pub fn run(mut args: Args) -> Result<()> {
    check(&args)?;
    let loader = args.models.loader()?;
    args.models.fit_detector(&loader, [W, H])?;
    let fusion = FusionPipeline::new(
        args.models.detector(&loader)?,
        args.models.recognizer(&loader)?,
        swapper(&loader, Some(&args.swapper))?,
        PipelineSettings::default(),
    );
    // Part one is still frames: the detector runs on every one.
    let mut pipeline = LivePipeline::new(fusion, LiveSettings::still(SelectorMode::Many));
    let source = load_image(&args.source)?;
    pipeline.set_source(&source, "--source")?;
    let source_embedding = pipeline.fusion().source().cloned().context("source set")?;
    let two = fit(&load_image(&args.two)?);
    let one = fit(&load_image(&args.one)?);
    let zero = RgbImage::from_fn(W, H, |x, y| image::Rgb([(x / 3) as u8, (y / 2) as u8, 128]));
    let scenes = [("0 faces", &zero), ("1 face", &one), ("2 faces", &two)];

    let broker = Mosquitto::start()?;
    let port = broker.port;
    let topics = Topics::new("bench", "live")?;
    let (_sub, arrivals) = subscribe(port, &topics.frame())?;
    let settings = LinkSettings {
        host: "127.0.0.1".into(),
        port,
        client_id: "bench-publisher".into(),
        keep_alive: Duration::from_secs(15),
        credentials: None,
        tls: None,
        caps: Arc::new(fusiond::mqtt::PayloadCaps::new(1 << 19)),
        reconnect_max: Duration::from_secs(1),
        client_queue: 16,
        ha_status: None,
    };
    let outbox = Arc::new(Outbox::new(64));
    let link = Link::start(&settings, topics.clone(), outbox.clone(), |_, _| {}).map_err(|e| anyhow!(e))?;
    std::thread::sleep(Duration::from_millis(300));

    println!(
        "fusiond-bench live: {W}x{H}, detector {} at {}x{}, swapper {}, backend {}; {} runs per row, median ms",
        pipeline.fusion().detector.entry().name,
        pipeline.fusion().detector.entry().input_size[0],
        pipeline.fusion().detector.entry().input_size[1],
        args.swapper,
        loader.engines().describe(),
        args.runs
    );
    println!("part 1: one frame through every stage (detection on every frame; mosquitto on loopback)");
    println!(
        "  {:<38} {:>7} {:>9} {:>9} {:>7} {:>7} {:>8} {:>9} {:>9} {:>8}",
        "scenario", "yuyv", "inference", "pixelwork", "jpeg", "outputs", "publish", "non-infer", "e2e", "e2e p95"
    );
    let outputs = Outputs::start(args.v4l2_device.clone())?;
    let mut rgb = RgbImage::new(W, H);
    let mut json_rows = Vec::new();
    for (label, scene) in scenes {
        let yuyv = rgb_to_yuyv(scene);
        // The third row runs the live smoothing and sticky selection on top
        // of the swap, to show what they add to the pixel work.
        // The fourth refines every face on a crop with no full detection
        // after the first frame: the cost of a frame between detections.
        // The swap row alternates frames without and with the live outputs
        // (the HTTP stream with one client reading, the V4L2 output): its
        // "swap+outputs" row is what they add to the worker, paired frame
        // by frame against the same drift of this shared machine.
        let mut modes = vec![("detect", false, false), ("swap", true, false), ("swap+smooth", true, true)];
        // A detector with a fixed input (YuNet's 640x640 export) cannot
        // refine on a crop; the row is then left out, saying why.
        let mut refiner = match args.refine_size {
            0 => None,
            size => args.models.refiner(&loader, size).map_err(|e| println!("  (no refine row: {e:#})")).ok(),
        };
        if refiner.is_some() {
            modes.push(("swap+smooth+refine", true, true));
        }
        for (mode, swap, smooth) in modes {
            let refine = mode.ends_with("refine");
            pipeline.fusion_mut().refiner = if refine { refiner.take() } else { None };
            pipeline.set_detect_interval(if refine { Duration::from_secs(3600) } else { Duration::ZERO });
            if swap {
                pipeline.set_source_embedding(source_embedding.clone())?;
            } else {
                pipeline.clear_source();
            }
            let tracking = if smooth { SmoothSettings::default() } else { SmoothSettings::OFF };
            pipeline.set_tracking(tracking, StickySettings::default());
            let paired = mode == "swap";
            let mut cols: [Cols; 2] = Default::default();
            let mut faces = 0;
            for i in 0..=args.runs * if paired { 2 } else { 1 } {
                let on = paired && i % 2 == 0;
                let t0 = Instant::now();
                yuyv_to_rgb(&yuyv, &mut rgb)?;
                let t1 = Instant::now();
                let report = pipeline.process(&mut rgb, Instant::now())?;
                let t2 = Instant::now();
                let jpeg = encode_jpeg(&rgb, 80).map_err(|e| anyhow!(e))?;
                let t3 = Instant::now();
                if on {
                    outputs.feed(Arc::new(jpeg.clone()), &rgb);
                }
                let t4 = Instant::now();
                outbox.push_frame(topics.frame(), jpeg);
                let (_, _, arrived) = arrivals.recv_timeout(Duration::from_secs(5)).context("frame not delivered")?;
                if i == 0 {
                    faces = report.faces.len();
                    continue; // warm-up
                }
                let ms = |d: Duration| d.as_secs_f64() * 1e3;
                let inference = ms(report.timings.inference);
                let c = [t1 - t0, Duration::ZERO, t2 - t1, t3 - t2, t4 - t3, arrived - t4, arrived - t0].map(ms);
                cols[usize::from(on)].push([c[0], inference, c[2] - inference, c[3], c[4], c[5], c[6]]);
            }
            let row = cols[0].report(&format!("{label} ({faces} found), {mode}"));
            json_rows.push(serde_json::json!({"scenario": label, "faces": faces, "mode": mode, "ms": row}));
            if paired {
                let with = cols[1].report(&format!("{label} ({faces} found), swap+outputs"));
                json_rows
                    .push(serde_json::json!({"scenario": label, "faces": faces, "mode": "swap+outputs", "ms": with}));
                let (off, on) = (row["non_infer"], with["non_infer"]);
                println!("  {:<38} non-infer {:+.2} ms ({:.2}x)", "  outputs on vs off", on - off, on / off);
            }
        }
    }
    println!("  pixelwork = letterbox, pack, decode, NMS, align, paste-back (pipeline time outside the engine)");
    println!("  outputs = the frame handed to the V4L2 output and the JPEG to the HTTP stream (swap+outputs rows:");
    println!("            every other frame of the swap row, so both rows see the same drift)");
    println!("  non-infer = yuyv + pixelwork + jpeg + outputs + publish");
    let (written, replaced) = outputs.vcam_counts();
    println!(
        "  outputs: V4L2 output on {}: {written} frames written, {replaced} replaced unwritten \
         (its RGB to YUYV conversion, on its own thread: {:.2} ms a frame); the stream client read {} KB",
        outputs.device,
        Outputs::yuyv_ms(&rgb),
        outputs.streamed.load(std::sync::atomic::Ordering::Relaxed) / 1024
    );
    drop(outputs);
    if let Some(path) = &args.json {
        let detector = pipeline.fusion().detector.entry();
        let doc = serde_json::json!({"engine": loader.engines().describe(), "detector": detector.name,
            "detector_size": detector.input_size, "rows": json_rows});
        std::fs::write(path, doc.to_string()).with_context(|| format!("cannot write {}", path.display()))?;
    }
    if !link.shutdown(Duration::from_secs(2)) {
        eprintln!("live: the MQTT session did not end within 2 s");
    }

    if args.seconds > 0 {
        let names =
            [pipeline.fusion().detector.entry().name.clone(), pipeline.fusion().recognizer.entry().name.clone()];
        drop(pipeline);
        live(&args, &scenes, port, &names)?;
    }
    drop(broker);
    Ok(())
}

/// The `[inference]` section that puts the daemon on the engine of `--engine`.
fn inference_toml(e: &EngineArgs) -> String {
    let c = e.inference();
    let engine = match c.engine {
        EngineKind::Tract => "tract",
        EngineKind::Ort => "ort",
        EngineKind::Auto => "auto",
    };
    format!(
        "[inference]\nengine = \"{engine}\"\ntract_threads = {}\ntract_fused_ops = {}\n[inference.ort]\nlibrary = {:?}\nthreads = {}\n",
        c.tract_threads,
        c.tract_fused_ops,
        c.ort.library.display().to_string(),
        c.ort.threads
    )
}

/// Part two: the real daemon on an emulated camera, per scenario.
fn live(args: &Args, scenes: &[(&str, &RgbImage); 3], port: u16, names: &[String; 2]) -> Result<()> {
    println!(
        "part 2: the daemon on an emulated {} fps YUYV camera, {} s per row (detect every 80 ms, frames at 5 fps)",
        args.camera_fps, args.seconds
    );
    println!(
        "  {:<18} {:>8} {:>8} {:>9} {:>11} {:>11} {:>6} {:>8}",
        "scenario", "capture", "process", "dropped", "latency p50", "latency p95", "cpu %", "rss MB"
    );
    let dir = tempfile_dir()?;
    let dirs: Vec<String> = args.models.dirs.iter().map(|d| format!("{:?}", d.display().to_string())).collect();
    let models_dirs = if dirs.is_empty() {
        std::env::var("FUSIOND_MODELS")
            .map(|e| std::env::split_paths(&e).map(|d| format!("{:?}", d.display().to_string())).collect::<Vec<_>>())
            .unwrap_or_else(|_| vec![format!("{:?}", DEFAULT_MODEL_DIR)])
    } else {
        dirs
    };
    let [detector, recognizer] = names;
    for (label, scene) in scenes {
        let yuyv = Arc::new(rgb_to_yuyv(scene));
        for swap in [false, true] {
            let config = dir.join("fusiond.toml");
            let source = match swap {
                true => format!("source = {:?}\n", args.source.display().to_string()),
                false => String::new(),
            };
            std::fs::write(
                &config,
                format!(
                    "[models]\ndirs = [{}]\nramdisk = {:?}\n[[tier]]\nname = \"fast\"\nmodels = [{:?}, {:?}, {:?}]\n\
                     [mqtt]\nhost = \"127.0.0.1\"\nport = {port}\ndevice_id = \"live\"\nprefix = \"bench\"\n\
                     [pipeline]\n{source}state_dir = {:?}\nselector = \"many\"\nmax_source_bytes = 67108864\n\
                     [output]\nstats_interval_s = {}\n{}",
                    models_dirs.join(", "),
                    dir.join("ramdisk").display().to_string(),
                    detector,
                    recognizer,
                    args.swapper,
                    dir.display().to_string(),
                    args.seconds,
                    inference_toml(&args.models.engine)
                ),
            )?;
            let (_sub, stats) = subscribe(port, "bench/live/stats")?;
            let stop = Arc::new(AtomicBool::new(false));
            let camera =
                YuyvCamera { yuyv: yuyv.clone(), period: Duration::from_secs_f32(1.0 / args.camera_fps), due: None };
            let cell = Mutex::new(Some(camera));
            let factory: daemon::SourceFactory = Box::new(move || {
                cell.lock()
                    .ok()
                    .and_then(|mut c| c.take())
                    .map(|c| Box::new(c) as Box<dyn FrameSource>)
                    .ok_or_else(|| CaptureError::Disconnected("emulated".into()))
            });
            let s = stop.clone();
            let cpu0 = cpu_seconds();
            let t0 = Instant::now();
            let handle = std::thread::spawn(move || {
                let reload = AtomicBool::new(false);
                daemon::run(&config, Some(factory), &Signals { stop: &s, reload: &reload })
            });
            // The first stats come ~2 s in (after warm-up); the second
            // covers a full interval of steady state.
            let mut last = None;
            let deadline = Instant::now() + Duration::from_secs(args.seconds * 2 + 30);
            while Instant::now() < deadline {
                if let Ok((_, payload, _)) = stats.recv_timeout(Duration::from_millis(200)) {
                    let v: serde_json::Value = serde_json::from_slice(&payload)?;
                    let steady = last.is_some();
                    last = Some(v);
                    if steady {
                        break;
                    }
                }
            }
            let wall = t0.elapsed().as_secs_f64();
            let cpu = (cpu_seconds() - cpu0) / wall * 100.0;
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            handle.join().map_err(|_| anyhow!("the daemon panicked"))??;
            let v = last.context("no stats from the daemon")?;
            let f = |k: &str| v[k].as_f64().unwrap_or(f64::NAN);
            let lat = &v["latency_ms"]["capture_to_publish"];
            let captured = f("frames_captured");
            println!(
                "  {:<18} {:>8.1} {:>8.1} {:>8.0}% {:>11.1} {:>11.1} {:>6.0} {:>8.1}",
                format!("{label}, {}", if swap { "swap" } else { "detect" }),
                f("capture_fps"),
                f("processed_fps"),
                f("dropped_frames") / captured.max(1.0) * 100.0,
                lat["p50_ms"].as_f64().unwrap_or(f64::NAN),
                lat["p95_ms"].as_f64().unwrap_or(f64::NAN),
                cpu,
                f("rss_bytes") / 1e6
            );
        }
    }
    println!("  dropped = frames the camera delivered that were replaced before processing (newest frame wins)");
    println!("  latency = capture to the frame's outputs being queued for MQTT; cpu % of one core, whole process");
    Ok(())
}
