//! ONNX Runtime against tract on the same real models and photos: the same
//! detections, embeddings and swaps; INT8 graphs; execution providers that
//! fail to register; zero-copy ORT-format models. Runs against the
//! libonnxruntime.so of the onnxruntime wheel that tests/setup.sh installs.

use crate::util::{contract_models, image, int8_models, psnr, shared, Models};
use fusiond::face::detect::iou;
use fusiond::face::{Face, SelectorMode};
use fusiond::infer::{
    Backend, EngineKind, Engines, InferenceSettings, OrtBackend, OrtSettings, Precision, ProviderKind, Tensor,
    TractBackend,
};
use fusiond::store::Loader;
use std::path::PathBuf;
use std::sync::Arc;

const PHOTOS: [&str; 5] =
    ["fr_obama.jpg", "fr_biden.jpg", "fr_two_people.jpg", "fr_obama_and_biden.jpg", "skimage_astronaut.png"];

/// The ONNX Runtime library: $FUSIOND_ORT_LIBRARY (tests/run.sh points it at
/// the wheel's), or the newest libonnxruntime.so.* in the test venv.
pub fn ort_library() -> PathBuf {
    if let Some(p) = std::env::var_os("FUSIOND_ORT_LIBRARY") {
        return PathBuf::from(p);
    }
    let python = std::env::var("FUSIOND_PYTHON").unwrap_or_else(|_| "python3".into());
    let out = std::process::Command::new(&python)
        .args(["-c", "import onnxruntime, glob, os; print(sorted(glob.glob(os.path.join(os.path.dirname(onnxruntime.__file__), 'capi', 'libonnxruntime.so*')))[-1])"])
        .output();
    match out {
        Ok(o) if o.status.success() => PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()),
        _ => panic!(
            "no ONNX Runtime library: set FUSIOND_ORT_LIBRARY to libonnxruntime.so, or FUSIOND_PYTHON to a python \
             with the onnxruntime wheel (tests/setup.sh installs one)"
        ),
    }
}

pub(crate) fn ort() -> Arc<OrtBackend> {
    Arc::new(OrtBackend::new(OrtSettings::cpu(ort_library(), 1)).expect("ONNX Runtime loads"))
}

fn catalogs() -> (Models, Models) {
    let dirs = [shared("models"), contract_models(), int8_models()];
    (Models::open(&dirs, Arc::new(TractBackend::default())), Models::open(&dirs, ort()))
}

/// The faces of `b` match those of `a`, one by one: box IoU, score and
/// landmarks (as a fraction of the box width) within the bounds given.
fn assert_same_faces(what: &str, fa: &[Face], fb: &[Face], (min_iou, max_score, max_landmark): (f32, f32, f32)) {
    assert_eq!(fa.len(), fb.len(), "{what}: {fa:?} vs {fb:?}");
    for f in fa {
        let g = fb.iter().max_by(|x, y| iou(&f.bbox, &x.bbox).total_cmp(&iou(&f.bbox, &y.bbox))).unwrap();
        let box_iou = iou(&f.bbox, &g.bbox);
        let width = f.bbox[2] - f.bbox[0];
        let lm = f
            .landmarks
            .iter()
            .zip(&g.landmarks)
            .map(|(p, q)| (p[0] - q[0]).hypot(p[1] - q[1]) / width)
            .fold(0.0, f32::max);
        assert!(box_iou >= min_iou, "{what}: box IoU {box_iou:.3} < {min_iou}");
        assert!((f.score - g.score).abs() <= max_score, "{what}: score {} vs {}", f.score, g.score);
        assert!(lm <= max_landmark, "{what}: landmarks differ by {lm:.3} of the box width");
    }
}

/// FP32 graphs agree closely. INT8 graphs do not compute the same thing on
/// both engines (ONNX Runtime runs integer kernels with requantised
/// activations, tract dequantises to f32), so they are held to the INT8
/// quality bar of tests/it/int8.rs instead.
#[test]
fn both_engines_find_the_same_faces_fp32_and_int8() {
    let (t, o) = catalogs();
    for name in ["yunet_2023mar", "scrfd_500m", "yunet_2023mar_int8", "scrfd_500m_int8"] {
        let bounds = if name.ends_with("_int8") { (0.9, 0.08, 0.06) } else { (0.97, 0.01, 0.01) };
        let mut a = t.detector(name, None).unwrap();
        let mut b = o.detector(name, None).unwrap();
        for photo in PHOTOS {
            let img = image(photo);
            let what = format!("{name} on {photo}, tract vs ort");
            assert_same_faces(&what, &a.detect(&img).unwrap(), &b.detect(&img).unwrap(), bounds);
        }
    }
}

/// `pipeline.fit_detector` on an export declared at one size: YuNet, declared
/// at 640x640, runs at each picture's aspect on both engines (on ONNX
/// Runtime once its input is declared again) and finds the faces the 640x640
/// letterbox finds. Only the activations the padding reached differ.
#[test]
fn a_fixed_export_fitted_to_the_frame_finds_the_letterboxed_faces_on_both_engines() {
    let (t, o) = catalogs();
    let mut pictures: Vec<String> = ["frame_001.jpg", "frame_030.jpg", "frame_060.jpg"]
        .iter()
        .map(|f| shared("camera/two_people_pan").join(f).display().to_string())
        .collect();
    pictures.extend(PHOTOS.iter().map(|p| shared("images").join(p).display().to_string()));
    for (engine, models) in [("tract", &t), ("ort", &o)] {
        let mut boxed = models.detector("yunet_2023mar", None).unwrap();
        for path in &pictures {
            let img = fusiond::cli::load_image(std::path::Path::new(path)).unwrap();
            let size = models.entry("yunet_2023mar").unwrap().fitted([img.width(), img.height()]).input_size;
            assert!(size[0] < 640 || size[1] < 640, "{path}: fitted to {size:?}");
            let mut fitted = models.detector("yunet_2023mar", Some(size)).unwrap();
            let what = format!("yunet_2023mar on {path} ({engine}), 640x640 vs {}x{}", size[0], size[1]);
            assert_same_faces(&what, &boxed.detect(&img).unwrap(), &fitted.detect(&img).unwrap(), (0.97, 0.01, 0.01));
        }
    }
}

#[test]
fn both_engines_give_the_same_embeddings_fp32_and_int8() {
    let (t, o) = catalogs();
    let mut det = t.detector("scrfd_500m", None).unwrap();
    for name in ["arcface_fr", "arcface_fr_int8"] {
        let mut a = t.recognizer(name);
        let mut b = o.recognizer(name);
        for photo in PHOTOS {
            let img = image(photo);
            for f in det.detect(&img).unwrap() {
                let cos = a.embed(&img, &f.landmarks).unwrap().cosine(&b.embed(&img, &f.landmarks).unwrap());
                // INT8: the quality bar of tests/it/int8.rs (see above).
                let floor = if name.ends_with("_int8") { 0.95 } else { 0.9999 };
                assert!(cos >= floor, "{name} on {photo}: tract vs ort cosine {cos:.5} < {floor}");
            }
        }
    }
}

#[test]
fn both_engines_swap_to_the_same_pixels_with_the_contract_models() {
    let (t, o) = catalogs();
    let target = image("fr_two_people.jpg");
    for swapper in ["identity_swapper", "latent_color_swapper", "identity_hyperswap"] {
        let mut frames = Vec::new();
        for c in [&t, &o] {
            let mut p = c.live(swapper, SelectorMode::Many);
            p.set_source(&image("fr_biden.jpg"), "biden").unwrap();
            let mut frame = target.clone();
            let report = p.process(&mut frame, std::time::Instant::now()).unwrap();
            assert_eq!(report.swapped.len(), 2, "{swapper}: {report:?}");
            frames.push(frame);
        }
        let db = psnr(&frames[0], &frames[1]);
        eprintln!("{swapper}: tract vs ort swapped frame PSNR {db:.1} dB");
        assert!(db >= 45.0, "{swapper}: tract and ort frames differ: PSNR {db:.1} dB < 45");
        assert_ne!(frames[0], target, "{swapper} changed nothing");
    }
}

/// A CPU-only ONNX Runtime cannot register TensorRT or CUDA. By default
/// (`cpu_fallback = false`) the load then fails, saying what to install:
/// the CPU never stands in for the GPU in silence. With `cpu_fallback` each
/// failure is kept on the model (for the log and `events`), the model runs
/// on the CPU, and the profiled run after warm-up, read from ONNX Runtime's
/// real profile, says so; `error_on_failure` turns the first failure into
/// a load error. An unknown GPU builds no engine cache.
#[test]
fn gpu_providers_that_fail_refuse_the_cpu_unless_cpu_fallback_is_set() {
    let tmp = tempfile::tempdir().unwrap();
    let mut config = InferenceSettings { engine: EngineKind::Ort, ..Default::default() };
    config.ort.library = ort_library();
    config.ort.providers = vec![ProviderKind::Tensorrt, ProviderKind::Cuda, ProviderKind::Cpu];
    config.ort.tensorrt.cache_dir = tmp.path().join("trt");
    let load = |config: &InferenceSettings| {
        let loader = Loader::open(&[shared("models")], Engines::from_settings(config).unwrap()).unwrap();
        let entry = loader.catalog().entry("arcface_fr").unwrap().clone();
        loader.load_with(&entry, &entry.input_shapes())
    };
    let err = load(&config).err().expect("no GPU provider: the load must fail").to_string();
    assert!(err.contains("no GPU execution provider registered") && err.contains("cpu_fallback"), "{err}");
    assert!(err.contains("tensorrt:") && err.contains("cuda:"), "each failure is named: {err}");

    config.ort.cpu_fallback = true;
    let placement = load(&config).unwrap().placement();
    let failed: Vec<&str> = placement.failed.iter().map(|f| f.provider.as_str()).collect();
    assert_eq!(failed, ["tensorrt", "cuda"], "{placement:?}");
    assert!(placement.failed.iter().all(|f| !f.error.is_empty()));
    assert_eq!(placement.providers, ["cpu"]);
    let ran = placement.proven_on.expect("a model with a GPU provider listed is profiled");
    assert!(ran.starts_with("cpu: ") && !ran.contains("cuda"), "{ran}");
    assert!(!tmp.path().join("trt").exists(), "no engine cache under an unknown GPU");

    config.ort.error_on_failure = true;
    let err = load(&config).err().expect("load must fail").to_string();
    assert!(err.contains("tensorrt") && err.contains("error_on_failure"), "{err}");
}

/// The CPU provider alone is not profiled, and no model on it says it was.
#[test]
fn a_model_on_the_cpu_provider_alone_is_not_profiled() {
    let (_, o) = catalogs();
    let entry = o.entry("arcface_fr").unwrap().clone();
    let model = o.0.load_with(&entry, &entry.input_shapes()).unwrap();
    assert_eq!(model.placement().proven_on, None);
}

/// An ORT-format model runs on the mapped bytes in place and gives the same
/// outputs as the ONNX file it was converted from.
#[test]
fn an_ort_format_model_is_used_in_place_and_matches_the_onnx_file() {
    let tmp = tempfile::tempdir().unwrap();
    let onnx = tmp.path().join("arcface.onnx");
    std::fs::copy(shared("models/arcface_fr_feature.onnx"), &onnx).unwrap();
    let python = std::env::var("FUSIOND_PYTHON").unwrap_or_else(|_| "python3".into());
    let out = std::process::Command::new(&python)
        .args(["-m", "onnxruntime.tools.convert_onnx_models_to_ort"])
        .arg(&onnx)
        .args(["--optimization_style", "Fixed"])
        .output()
        .expect("python runs");
    assert!(out.status.success(), "ORT conversion failed: {}", String::from_utf8_lossy(&out.stderr));
    let ort_file = tmp.path().join("arcface.ort");
    assert!(ort_file.is_file(), "converter wrote no {}", ort_file.display());

    let backend = ort();
    let shapes = [fusiond::infer::InputShape::first(&[1, 3, 112, 112])];
    let load = |path: &std::path::Path| {
        backend.load(Arc::new(std::fs::read(path).unwrap()), &shapes, Precision::Fp32).unwrap()
    };
    let (a, b) = (load(&onnx), load(&ort_file));
    assert!(!a.placement().zero_copy && b.placement().zero_copy);
    let input =
        Tensor::new(&[1, 3, 112, 112], (0..3 * 112 * 112).map(|i| ((i % 255) as f32 - 127.5) / 128.0).collect())
            .unwrap();
    let name = a.inputs()[0].name.clone();
    let run = |m: &Arc<dyn fusiond::infer::Model>| {
        m.session().unwrap().run(&[(&name, &input)]).unwrap().iter().next().unwrap().1.clone()
    };
    let (x, y) = (run(&a), run(&b));
    let max = x.data().iter().zip(y.data()).map(|(p, q)| (p - q).abs()).fold(0.0, f32::max);
    assert!(max < 1e-3, "ORT-format outputs differ by {max}");
}

/// Every thread gets a session of its own over one loaded model: three run
/// at once and agree.
#[test]
fn one_ort_model_serves_a_session_per_thread_at_once() {
    let backend = ort();
    let shapes = [fusiond::infer::InputShape::first(&[1, 3, 112, 112])];
    let bytes = Arc::new(std::fs::read(shared("models/arcface_fr_feature.onnx")).unwrap());
    let model = backend.load(bytes, &shapes, Precision::Fp32).unwrap();
    let input =
        Tensor::new(&[1, 3, 112, 112], (0..3 * 112 * 112).map(|i| ((i % 255) as f32 - 127.5) / 128.0).collect())
            .unwrap();
    let barrier = std::sync::Barrier::new(3);
    let outputs: Vec<Vec<f32>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..3)
            .map(|_| {
                let (model, input, barrier) = (&model, &input, &barrier);
                s.spawn(move || {
                    // All three sessions exist before any of them runs.
                    let mut session = model.session().unwrap();
                    barrier.wait();
                    session.run(&[("input", input)]).unwrap().iter().next().unwrap().1.data().to_vec()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(outputs[0].len(), 512);
    assert!(outputs.iter().all(|o| o == &outputs[0]));
}

#[test]
fn a_model_that_is_not_onnx_is_refused_with_a_clear_error() {
    let err = ort().load(Arc::new(b"not a model at all".to_vec()), &[], Precision::Fp32).err().unwrap().to_string();
    assert!(err.contains("cannot load model"), "{err}");
}

/// The daemon with models on both engines and a provider list that this
/// CPU-only ONNX Runtime cannot honour: `available` says `warming` while
/// TensorRT would build engines, each failed provider is reported on
/// `events` for the ONNX Runtime models (and not for the tract one), and the
/// frames are fused as on tract.
#[test]
fn the_daemon_runs_models_on_both_engines_and_reports_failed_providers() {
    use crate::harness::{free_port, serial, write_config, Daemon, Mosquitto, Watcher, T};
    let _s = serial();
    let broker = Mosquitto::start(free_port());
    let dir = tempfile::tempdir().unwrap();
    let extra = format!(
        r#"
[inference]
engine = "ort"
engines = {{ yunet_2023mar = "tract" }}

[inference.ort]
library = "{library}"
providers = ["tensorrt", "cuda", "cpu"]
cpu_fallback = true

[inference.ort.tensorrt]
cache_dir = "{dir}/trt"
"#,
        library = ort_library().display(),
        dir = dir.path().display()
    );
    let config = write_config(dir.path(), broker.port, "mixed", &extra);
    let w = Watcher::start(broker.port, "fusiond/mixed");
    let d = Daemon::spawn_env(&config, &[]);
    w.wait("available", *T, |m| m.payload == b"warming");
    w.wait("available", *T, |m| m.payload == b"online");
    for model in ["arcface_fr", "identity_swapper"] {
        for provider in ["tensorrt", "cuda"] {
            let e = w
                .wait("events", *T, |m| {
                    let j = m.json();
                    j["event"] == "provider_failed" && j["model"] == model && j["provider"] == provider
                })
                .json();
            assert_eq!(e["running_on"], serde_json::json!(["cpu"]), "{e}");
        }
    }
    w.wait("faces", *T, |m| m.json()["faces"].as_array().is_some_and(|f| f.len() == 2));
    let stats = w.wait("stats", *T, |m| m.json()["frames_processed"].as_u64().unwrap_or(0) > 0).json();
    let engines: Vec<(String, String)> = stats["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["name"].as_str().unwrap().to_string(), m["placement"]["engine"].as_str().unwrap().to_string()))
        .collect();
    let want = |n: &str, e: &str| (n.to_string(), e.to_string());
    // The last is the refiner: the detector again at pipeline.refine_size, on the detector's engine.
    let tract = |n: &str| want(n, "tract");
    assert_eq!(
        engines,
        [tract("yunet_2023mar"), want("arcface_fr", "ort"), want("identity_swapper", "ort"), tract("yunet_2023mar")]
    );
    assert!(
        !w.all_events().iter().any(|j| j["event"] == "provider_failed" && j["model"] == "yunet_2023mar"),
        "the tract model has no providers to fail"
    );
    let log = d.log();
    assert!(log.contains("execution provider tensorrt failed"), "the failure is loud in the log:\n{log}");
}

/// `fusiond warm` loads every tier's models on their engines, in a child
/// process. When the configured GPU providers cannot register, the models
/// fail to load (or, with `cpu_fallback`, load on the CPU and warm still
/// fails, since nothing was built for them); either way it says so with a
/// failing exit status, naming each failure.
#[test]
fn warm_fails_when_the_configured_providers_cannot_be_used() {
    let dir = tempfile::tempdir().unwrap();
    let warm = |providers: &str, more: &str| {
        let config = warm_config(dir.path(), providers, more);
        crate::util::fusiond_command().arg("warm").arg("--config").arg(config).output().unwrap()
    };
    let out = warm(r#"["cpu"]"#, "");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("identity_swapper") && text.contains("on ort [\"cpu\"]"), "{text}");

    let out = warm(r#"["tensorrt", "cpu"]"#, "");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!out.status.success(), "warm must fail: {stdout}");
    assert!(stdout.contains("FAILED") && stdout.contains("no GPU execution provider registered"), "{stdout}");
    assert!(stderr.contains("could not be loaded"), "{stderr}");

    let out = warm(r#"["tensorrt", "cpu"]"#, "cpu_fallback = true\n");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!out.status.success(), "warm must fail: {stdout}");
    assert!(stdout.contains("tensorrt FAILED"), "{stdout}");
    assert!(stderr.contains("fallback provider"), "{stderr}");
}

/// The daemon tests' config (its broker is never contacted by `warm`) on
/// ONNX Runtime with `providers` and more `[inference.ort]` keys.
fn warm_config(dir: &std::path::Path, providers: &str, more: &str) -> PathBuf {
    let extra = format!(
        "[inference]\nengine = \"ort\"\n[inference.ort]\nlibrary = \"{}\"\nproviders = {providers}\n{more}\
         [inference.ort.tensorrt]\ncache_dir = \"{}/trt\"\n",
        ort_library().display(),
        dir.display()
    );
    crate::harness::write_config(dir, 1, "warm", &extra)
}

/// An engine build that runs past `build_timeout_s` is stopped, tried again
/// `build_attempts` times in all, and then `warm` fails saying which key to
/// raise. (10 ms is less than the child needs to open ONNX Runtime.)
#[test]
fn warm_stops_a_build_that_runs_past_its_time_and_tries_again() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = warm_config(dir.path(), r#"["cpu"]"#, "");
    let limits = "[inference.ort.tensorrt]\nbuild_timeout_s = 0.01\nbuild_attempts = 3\n";
    let text = std::fs::read_to_string(&config).unwrap().replace("[inference.ort.tensorrt]\n", limits);
    config = dir.path().join("three.toml");
    std::fs::write(&config, text).unwrap();
    let t = std::time::Instant::now();
    let out = crate::util::fusiond_command().arg("warm").arg("--config").arg(&config).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert_eq!(stderr.matches("ran past inference.ort.tensorrt.build_timeout_s").count(), 3, "{stderr}");
    assert!(stderr.contains("no attempt of 3 finished") && stderr.contains("build_timeout_s"), "{stderr}");
    assert!(t.elapsed() < std::time::Duration::from_secs(20), "each attempt is stopped at its limit");
}

/// A tier whose swapper is put on CUDA by a CPU-only ONNX Runtime fails
/// loudly: asked for over MQTT, the daemon stays on the tier it runs with
/// the `degraded` event naming why, and /api/health answers 503. The CPU
/// does not stand in for the GPU.
#[test]
fn a_tier_on_a_gpu_that_is_not_there_fails_loudly_and_health_says_so() {
    use crate::harness::{free_port, serial, write_config, Daemon, Mosquitto, Watcher, T};
    let _s = serial();
    let broker = Mosquitto::start(free_port());
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let extra = format!(
        r#"
[[tier]]
name = "gpu"
models = ["yunet_2023mar", "arcface_fr", "known_emap"]

[http]
listen = "127.0.0.1:{port}"

[inference]
engine = "tract"
engines = {{ known_emap = "ort" }}

[inference.ort]
library = "{library}"
providers = ["cuda"]
"#,
        library = ort_library().display(),
    );
    let config = write_config(dir.path(), broker.port, "nogpu", &extra);
    let w = Watcher::start(broker.port, "fusiond/nogpu");
    let d = Daemon::spawn(&config);
    w.wait("available", *T, |m| m.payload == b"online");
    let from = w.count();
    w.send("quality", b"gpu".to_vec());
    let e = w.wait_from(from, "events", *T, |m| m.json()["event"] == "degraded").json();
    let reason = e["reason"].as_str().unwrap();
    assert_eq!(e["wanted"], "gpu", "{e}");
    assert!(reason.contains("known_emap") && reason.contains("no GPU execution provider registered"), "{e}");
    let (code, health) = crate::http::get(port, "GET", "/api/health");
    let health = String::from_utf8_lossy(&health);
    assert_eq!(code, 503, "{health}");
    assert!(health.contains("instead of `gpu`"), "{health}");
    assert!(d.log().contains("cpu_fallback"), "the log says how to accept the CPU:\n{}", d.log());
}

/// A library that is missing, is not ONNX Runtime, or is too old is an
/// error that says what to install, never a panic. The stubs are built
/// here: one without `OrtGetApiBase`, one whose API base reports 1.10.0
/// and gives no API (what an old library does for a newer version).
#[test]
fn a_missing_foreign_or_too_old_onnx_runtime_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let old = "#include <stddef.h>\n#include <stdint.h>\n\
        typedef struct { const void *(*GetApi)(uint32_t); const char *(*GetVersionString)(void); } OrtApiBase;\n\
        static const void *api(uint32_t v) { (void)v; return NULL; }\n\
        static const char *version(void) { return \"1.10.0\"; }\n\
        static const OrtApiBase base = { api, version };\n\
        const OrtApiBase *OrtGetApiBase(void) { return &base; }\n";
    let stubs = [("nosym", "int fusiond_stub(void) { return 0; }\n"), ("old", old)];
    for (name, source) in stubs {
        let c = dir.path().join(format!("{name}.c"));
        std::fs::write(&c, source).unwrap();
        let so = dir.path().join(format!("lib{name}.so"));
        let built = std::process::Command::new("cc").args(["-shared", "-fPIC", "-o"]).arg(&so).arg(&c).output();
        let built = built.unwrap_or_else(|e| panic!("cannot run cc ({e}): install gcc (build-essential)"));
        assert!(built.status.success(), "cc: {}", String::from_utf8_lossy(&built.stderr));
    }
    let cases = [
        (dir.path().join("libnosym.so"), "does not export `OrtGetApiBase`"),
        (dir.path().join("libold.so"), "got '1.10.0'"),
        (dir.path().join("libmissing.so"), "does not exist"),
    ];
    for (lib, says) in cases {
        let out = crate::util::fusiond_command()
            .arg("detect")
            .arg(shared("images/fr_obama.jpg"))
            .arg("--models")
            .arg(shared("models"))
            .args(["--detector", "scrfd_500m", "--engine", "ort", "--ort-library"])
            .arg(&lib)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{}: {stderr}", lib.display());
        assert!(stderr.contains(says) && stderr.contains("ONNX Runtime 1.17 or newer"), "{}: {stderr}", lib.display());
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

/// `auto`, the default, runs models on ONNX Runtime when its library loads,
/// and says so in each model's placement (which `stats` carries).
#[test]
fn auto_runs_on_onnx_runtime_when_its_library_loads() {
    let mut config = InferenceSettings::default();
    assert_eq!(config.engine, EngineKind::Auto);
    config.ort.library = ort_library();
    let engines = Engines::from_settings(&config).unwrap();
    assert_eq!(engines.describe(), "ort");
    let loader = Loader::open(&[shared("models")], engines).unwrap();
    let entry = loader.catalog().entry("arcface_fr").unwrap().clone();
    assert_eq!(loader.load_with(&entry, &entry.input_shapes()).unwrap().placement().engine, "ort");
}
