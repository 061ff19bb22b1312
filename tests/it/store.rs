//! Staging into a real tmpfs (these tests mount one, so they run as root, as
//! CI does) and tiered loading from it, including every kind of bad input.

use crate::util::{contract_models, image, shared};
use fusiond::config::Config;
use fusiond::face::{LivePipeline, SelectorMode};
use fusiond::infer::TractBackend;
use fusiond::store::{stage, StageReport, Store, TierOutcome};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A temp dir with a tmpfs mounted on its `ramdisk/` by staging, unmounted
/// when dropped.
struct Ramdisk {
    dir: tempfile::TempDir,
}

impl Ramdisk {
    fn new() -> Ramdisk {
        assert!(nix::unistd::geteuid().is_root(), "the store tests mount a real tmpfs and must run as root (CI does)");
        Ramdisk { dir: tempfile::tempdir().unwrap() }
    }

    fn path(&self) -> PathBuf {
        self.dir.path().join("ramdisk")
    }

    /// A persistent model dir of its own, for tampered copies.
    fn bad_models(&self) -> PathBuf {
        let p = self.dir.path().join("bad");
        std::fs::create_dir_all(&p).unwrap();
        p
    }
}

impl Drop for Ramdisk {
    fn drop(&mut self) {
        let _ = nix::mount::umount(&self.path());
    }
}

fn config(rd: &Ramdisk, size_mib: u64, extra_dirs: &[&Path], tiers: &[(&str, &[&str])]) -> Config {
    let mut dirs = vec![format!("{:?}", shared("models")), format!("{:?}", contract_models())];
    dirs.extend(extra_dirs.iter().map(|d| format!("{d:?}")));
    let mut text = format!(
        "[models]\ndirs = [{}]\nramdisk = {:?}\nramdisk_size_mib = {size_mib}\nstart_tier = {:?}\n",
        dirs.join(", "),
        rd.path(),
        tiers.last().unwrap().0
    );
    for (name, models) in tiers {
        text.push_str(&format!("[[tier]]\nname = {name:?}\nmodels = {models:?}\n"));
    }
    Config::parse(&text, Path::new("test.toml")).unwrap()
}

fn catalog(c: &Config) -> fusiond::catalog::Catalog {
    fusiond::catalog::Catalog::open(&c.models.dirs).unwrap()
}

/// The daemon's pipeline over `models`, detecting on every frame.
fn live(models: &fusiond::store::TierModels) -> LivePipeline {
    let fusion = fusiond::daemon::fusion_pipeline(models).unwrap();
    LivePipeline::new(fusion, fusiond::face::LiveSettings::still(SelectorMode::Many))
}

const FAST: (&str, &[&str]) = ("fast", &["scrfd_500m", "arcface_fr", "latent_color_swapper"]);

#[test]
fn staging_verifies_into_tmpfs_and_a_second_run_copies_nothing() {
    let rd = Ramdisk::new();
    let c = config(&rd, 64, &[], &[FAST]);
    let first = stage(&c, &catalog(&c)).unwrap();
    assert!(fusiond::store::tmpfs::is_tmpfs(&rd.path()).unwrap());
    assert!(fusiond::store::tmpfs::is_mount_point(&rd.path()).unwrap());
    assert_eq!(first.exit_code(), 0);
    assert!(first.bytes_copied > 8_000_000);
    assert!(first.report.iter().all(|f| f.action == "copied" && f.copy_mb_s.unwrap() > 0.0));
    for f in ["scrfd_500m_bnkps.onnx", "latent_color_swapper_128.emap.safetensors", "manifest.toml", ".ready"] {
        assert!(rd.path().join(f).is_file(), "{f} was not staged");
    }
    let sha = fusiond::catalog::sha256_hex(&std::fs::read(rd.path().join("arcface_fr_feature.onnx")).unwrap());
    assert_eq!(sha, "87aacdfe57510db2af90c0251df680e8eec88f122ee94712121d09bcaaaf3581");
    let second = stage(&c, &catalog(&c)).unwrap();
    assert_eq!(second.bytes_copied, 0);
    assert!(second.report.iter().all(|f| f.action == "kept"));
    assert_eq!(StageReport::read(&rd.path()).unwrap().files.len(), 3);

    // A staged file changed in place, at the same size: a plain run trusts
    // the recorded hash and keeps it; --verify hashes it, finds it changed
    // and copies it again.
    let staged = rd.path().join("arcface_fr_feature.onnx");
    let mut bytes = std::fs::read(&staged).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&staged, &bytes).unwrap();
    let trusted = stage(&c, &catalog(&c)).unwrap();
    assert!(trusted.report.iter().all(|f| f.action == "kept"), "{:?}", trusted.report);
    let verified = fusiond::store::stage_with(&c, &catalog(&c), true).unwrap();
    let actions: Vec<_> = verified.report.iter().map(|f| (f.name.as_str(), f.action.as_str())).collect();
    assert!(actions.contains(&("arcface_fr", "copied")), "{actions:?}");
    assert_eq!(actions.iter().filter(|(_, a)| *a == "verified").count(), 2, "{actions:?}");
    let sha = fusiond::catalog::sha256_hex(&std::fs::read(&staged).unwrap());
    assert_eq!(sha, "87aacdfe57510db2af90c0251df680e8eec88f122ee94712121d09bcaaaf3581", "copied back intact");
}

#[test]
fn a_tampered_staged_file_that_cannot_be_copied_again_is_not_left_to_load() {
    let rd = Ramdisk::new();
    let own = tempfile::tempdir().unwrap();
    for f in ["arcface_fr_feature.onnx", "scrfd_500m_bnkps.onnx"] {
        std::fs::copy(shared("models").join(f), own.path().join(f)).unwrap();
    }
    let mut c = config(&rd, 64, &[], &[FAST]);
    c.models.dirs = vec![own.path().to_path_buf(), contract_models()];
    assert_eq!(stage(&c, &catalog(&c)).unwrap().exit_code(), 0);
    let staged = rd.path().join("arcface_fr_feature.onnx");
    let mut bytes = std::fs::read(&staged).unwrap();
    bytes[100] ^= 0xff;
    std::fs::write(&staged, &bytes).unwrap();
    // The original goes away, so the copy back fails.
    std::fs::remove_file(own.path().join("arcface_fr_feature.onnx")).unwrap();
    let report = fusiond::store::stage_with(&c, &catalog(&c), true).unwrap();
    assert_ne!(report.exit_code(), 0, "{:?}", report.tiers);
    assert!(!staged.exists(), "the tampered copy must not stay on the ramdisk");
    let store = Store::open(&c, Arc::new(TractBackend::default())).unwrap();
    assert!(!matches!(store.activate("fast"), Ok(TierOutcome::Ready(_))), "a tier without its recogniser");
}

#[test]
fn the_store_loads_warms_and_runs_a_staged_tier() {
    let rd = Ramdisk::new();
    let c = config(&rd, 64, &[], &[FAST]);
    stage(&c, &catalog(&c)).unwrap();
    let store = Store::open(&c, Arc::new(TractBackend::default())).unwrap();
    let TierOutcome::Ready(models) = store.activate("fast").unwrap() else { panic!("fast tier degraded") };
    for m in models.all() {
        assert!(m.entry.file.starts_with(rd.path()), "{} loaded from outside the ramdisk", m.entry.name);
        assert!(m.timings.warmup.as_nanos() > 0 && m.timings.backend.optimize.as_nanos() > 0);
    }
    // The tier's three models and its detector again at the default
    // pipeline.refine_size.
    assert_eq!(store.cached().len(), 4, "{:?}", store.cached());
    let again = store.tier("fast").unwrap();
    assert!(Arc::ptr_eq(&again.detector, &models.detector), "a second request reuses the cached model");
    let mut p = live(&models);
    p.set_source(&image("fr_biden.jpg"), "source").unwrap();
    let mut frame = image("fr_two_people.jpg");
    assert_eq!(p.process(&mut frame, std::time::Instant::now()).unwrap().swapped.len(), 2);
}

/// Copies `src` into `dir` as `name`, applies `damage`, and writes a
/// manifest entry `name` with `sha` (the original's unless given).
fn bad_model(dir: &Path, name: &str, src: &Path, contract: &str, sha: Option<&str>, damage: impl Fn(&mut Vec<u8>)) {
    let mut bytes = std::fs::read(src).unwrap();
    let good_sha = fusiond::catalog::sha256_hex(&bytes);
    damage(&mut bytes);
    let file = format!("{name}.onnx");
    std::fs::write(dir.join(&file), &bytes).unwrap();
    let entry = format!(
        "[[model]]\nname = {name:?}\nfile = {file:?}\nsha256 = {:?}\ncontract = {contract:?}\nlicence = \"test\"\n\n",
        sha.unwrap_or(&good_sha)
    );
    let manifest = dir.join("manifest.toml");
    let mut text = std::fs::read_to_string(&manifest).unwrap_or_default();
    text.push_str(&entry);
    std::fs::write(manifest, text).unwrap();
}

#[test]
fn a_tier_with_an_enhancer_runs_it_on_every_swapped_face() {
    let rd = Ramdisk::new();
    let quality: (&str, &[&str]) =
        ("quality", &["scrfd_500m", "arcface_fr", "latent_color_swapper", "inverting_enhancer"]);
    let c = config(&rd, 64, &[], &[FAST, quality]);
    stage(&c, &catalog(&c)).unwrap();
    let store = Store::open(&c, Arc::new(TractBackend::default())).unwrap();
    let TierOutcome::Ready(models) = store.activate("quality").unwrap() else { panic!("quality degraded") };
    assert_eq!(models.enhancer.as_ref().unwrap().entry.name, "inverting_enhancer");
    assert_eq!(models.all().len(), 5, "four models and the refiner");
    // The same frame through the tier below (no enhancer) and this one: the
    // inverting enhancer must have changed each swapped face, and nothing
    // far from the faces.
    let mut frames = Vec::new();
    for tier in ["fast", "quality"] {
        let mut p = live(&store.tier(tier).unwrap());
        p.set_source(&image("fr_biden.jpg"), "source").unwrap();
        let mut frame = image("fr_two_people.jpg");
        let report = p.process(&mut frame, std::time::Instant::now()).unwrap();
        assert_eq!(report.swapped.len(), 2, "{tier}: {report:?}");
        assert_eq!(report.timings.enhance.is_zero(), tier == "fast", "{tier}: {report:?}");
        frames.push((frame, report.faces));
    }
    let ((plain, faces), (enhanced, _)) = (&frames[0], &frames[1]);
    let diff = |b: [f32; 4]| {
        let (x0, y0, x1, y1) = (b[0].max(0.0) as u32, b[1].max(0.0) as u32, b[2] as u32, b[3] as u32);
        let (mut sum, mut n) = (0u64, 0u64);
        for y in y0..y1.min(plain.height()) {
            for x in x0..x1.min(plain.width()) {
                let (p, q) = (plain.get_pixel(x, y).0, enhanced.get_pixel(x, y).0);
                sum += p.iter().zip(q).map(|(a, b)| a.abs_diff(b) as u64).sum::<u64>();
                n += 3;
            }
        }
        sum as f64 / n.max(1) as f64
    };
    for f in faces {
        let d = diff(f.bbox);
        assert!(d > 20.0, "face at {:?}: the enhancer changed it by {d:.1} levels on average", f.bbox);
    }
    assert!(diff([0.0, 0.0, 20.0, 20.0]) < 1.0, "the corner far from the faces changed");
}

#[test]
fn the_next_tier_preloads_in_the_background_when_configured() {
    let rd = Ramdisk::new();
    let mut c = config(&rd, 64, &[], &[FAST, ("quality", &["yunet_2023mar", "arcface_fr", "identity_swapper"])]);
    c.models.start_tier = "fast".into();
    c.models.preload_next = true;
    stage(&c, &catalog(&c)).unwrap();
    let store = Arc::new(Store::open(&c, Arc::new(TractBackend::default())).unwrap());
    assert!(matches!(store.activate("fast"), Ok(TierOutcome::Ready(_))));
    store.preload_next("fast").expect("a preload thread").join().unwrap();
    let cached = store.cached();
    // The camera's 640x480 frame fits the detector (pipeline.fit_detector).
    assert!(cached.contains(&"yunet_2023mar@640x480".to_string()), "{cached:?}");
    assert!(cached.contains(&"identity_swapper".to_string()), "{cached:?}");
    c.models.preload_next = false;
    let store = Arc::new(Store::open(&c, Arc::new(TractBackend::default())).unwrap());
    assert!(store.preload_next("fast").is_none());
}

#[test]
fn corrupt_models_disable_only_their_tier_and_name_the_file() {
    let rd = Ramdisk::new();
    let bad = rd.bad_models();
    let arcface = shared("models/arcface_fr_feature.onnx");
    bad_model(&bad, "bitflip", &arcface, "arcface", None, |b| {
        let i = b.len() / 3;
        b[i] ^= 0x10;
    });
    bad_model(&bad, "truncated", &arcface, "arcface", None, |b| b.truncate(b.len() / 2));
    bad_model(&bad, "wronghash", &arcface, "arcface", Some(&"ab".repeat(32)), |_| {});
    let tiers: [(&str, &[&str]); 5] = [
        FAST,
        ("t_bitflip", &["scrfd_500m", "bitflip", "latent_color_swapper"]),
        ("t_truncated", &["scrfd_500m", "truncated", "latent_color_swapper"]),
        ("t_wronghash", &["scrfd_500m", "wronghash", "latent_color_swapper"]),
        ("t_missing", &["scrfd_500m", "arcface_w600k_r50", "latent_color_swapper"]),
    ];
    let c = config(&rd, 64, &[&bad], &tiers);
    let report = stage(&c, &catalog(&c)).unwrap();
    assert_eq!(report.exit_code(), 2, "some tiers usable");
    assert!(report.tiers[0].usable);
    for (t, file) in
        report.tiers[1..].iter().zip(["bitflip.onnx", "truncated.onnx", "wronghash.onnx", "arcface_w600k_r50.onnx"])
    {
        let why = t.reason.as_deref().unwrap_or_else(|| panic!("tier {} should be unusable", t.name));
        assert!(why.contains(file), "tier {}: {why}", t.name);
    }
    let why = report.tiers[1].reason.as_deref().unwrap();
    assert!(why.contains("corrupt or tampered"), "{why}");
    assert!(!rd.path().join("bitflip.onnx").exists() && !rd.path().join(".bitflip.onnx.partial").exists());
    // The daemon side: asked for a broken tier, it runs the one below.
    let store = Store::open(&c, Arc::new(TractBackend::default())).unwrap();
    match store.activate("t_bitflip").unwrap() {
        TierOutcome::Degraded { models, reason, .. } => {
            assert_eq!(models.tier, "fast");
            assert!(reason.contains("t_bitflip"), "{reason}");
        }
        TierOutcome::Ready(_) => panic!("a tier with a corrupt model loaded"),
    }
}

#[test]
fn a_file_that_is_not_onnx_fails_at_load_and_the_tier_below_runs() {
    let rd = Ramdisk::new();
    let bad = rd.bad_models();
    bad_model(&bad, "notonnx", &shared("models/SHA256SUMS"), "arcface", None, |_| {});
    let c = config(&rd, 64, &[&bad], &[FAST, ("quality", &["scrfd_500m", "notonnx", "latent_color_swapper"])]);
    assert_eq!(stage(&c, &catalog(&c)).unwrap().exit_code(), 0, "its hash is right, so it stages");
    let store = Store::open(&c, Arc::new(TractBackend::default())).unwrap();
    let Ok(TierOutcome::Degraded { models, reason, .. }) = store.activate("quality") else { panic!("not degraded") };
    assert_eq!(models.tier, "fast");
    assert!(reason.contains("notonnx") && reason.contains("cannot load model"), "{reason}");
}

#[test]
fn a_full_tmpfs_refuses_what_does_not_fit_with_the_sizes() {
    let rd = Ramdisk::new();
    let c = config(&rd, 8, &[], &[("small", &["yunet_2023mar", "arcface_fr", "identity_swapper"]), FAST]);
    // Mount it, then fill most of it.
    fusiond::store::tmpfs::ensure(&rd.path(), 8).unwrap();
    std::fs::write(rd.path().join("filler"), vec![0u8; 500_000]).unwrap();
    let report = stage(&c, &catalog(&c)).unwrap();
    assert_eq!(report.exit_code(), 2);
    assert!(report.tiers[0].usable, "{:?}", report.tiers[0]);
    let why = report.tiers[1].reason.as_deref().unwrap();
    assert!(why.contains("MB more on the ramdisk but only") && why.contains("ramdisk_size_mib"), "{why}");
    assert!(!rd.path().join("scrfd_500m_bnkps.onnx").exists());
}

#[test]
fn a_directory_on_another_tmpfs_gets_a_size_limited_tmpfs_of_its_own() {
    // Like /run/fusiond/models on /run: already on a tmpfs, but not one
    // with the ramdisk's size limit.
    let rd = Ramdisk::new();
    assert!(fusiond::store::tmpfs::ensure(&rd.path(), 16).unwrap(), "the outer tmpfs is mounted");
    let inner = rd.path().join("models");
    let mounted = fusiond::store::tmpfs::ensure(&inner, 4).unwrap();
    let (_, total) = fusiond::store::tmpfs::space(&inner).unwrap();
    let _ = nix::mount::umount(&inner);
    assert!(mounted, "a directory on a tmpfs must get its own mount");
    assert_eq!(total, 4 * 1024 * 1024, "the inner tmpfs has its own size limit");
}

fn hostile_safetensors(header_len: u64, header: &str) -> Vec<u8> {
    let mut b = header_len.to_le_bytes().to_vec();
    b.extend_from_slice(header.as_bytes());
    b.extend_from_slice(&[0u8; 64]);
    b
}

#[test]
fn hostile_safetensors_side_files_are_rejected_without_panicking() {
    let tmp = tempfile::tempdir().unwrap();
    let cases = [
        ("overflow", hostile_safetensors(u64::MAX, "{}")),
        (
            "out_of_range",
            hostile_safetensors(80, r#"{"emap":{"dtype":"F32","shape":[512,512],"data_offsets":[0,1048576]}}"#),
        ),
        ("bad_shape", hostile_safetensors(72, r#"{"emap":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}      "#)),
        ("empty", vec![]),
    ];
    for (name, bytes) in cases {
        let path = tmp.path().join(format!("{name}.emap.safetensors"));
        std::fs::write(&path, bytes).unwrap();
        let err = fusiond::store::emap::read_emap(&path).unwrap_err().to_string();
        assert!(err.contains(&format!("{name}.emap.safetensors")), "{name}: {err}");
    }
    // Staged next to a swapper, a hostile side file fails that tier only.
    let rd = Ramdisk::new();
    let bad = rd.bad_models();
    let src = contract_models().join("latent_color_swapper_128.onnx");
    bad_model(&bad, "hostile_swapper", &src, "inswapper", None, |_| {});
    std::fs::write(bad.join("hostile_swapper.emap.safetensors"), hostile_safetensors(u64::MAX, "{}")).unwrap();
    let c = config(&rd, 64, &[&bad], &[FAST, ("quality", &["scrfd_500m", "arcface_fr", "hostile_swapper"])]);
    stage(&c, &catalog(&c)).unwrap();
    let store = Store::open(&c, Arc::new(TractBackend::default())).unwrap();
    let Ok(TierOutcome::Degraded { reason, .. }) = store.activate("quality") else { panic!("not degraded") };
    assert!(reason.contains("hostile_swapper"), "{reason}");
}

#[test]
fn facefusion_hash_files_verify_staging_of_models_without_a_sha256() {
    let rd = Ramdisk::new();
    let bad = rd.bad_models();
    let bytes = std::fs::read(shared("models/arcface_fr_feature.onnx")).unwrap();
    let mut manifest = String::new();
    for (name, crc) in [("ff_good", format!("{:08x}", crc32fast::hash(&bytes))), ("ff_bad", "0badc0de".to_string())] {
        std::fs::write(bad.join(format!("{name}.onnx")), &bytes).unwrap();
        std::fs::write(bad.join(format!("{name}.hash")), crc).unwrap();
        manifest.push_str(&format!(
            "[[model]]\nname = {name:?}\nfile = \"{name}.onnx\"\ncontract = \"arcface\"\nlicence = \"test\"\n\n"
        ));
    }
    std::fs::write(bad.join("manifest.toml"), manifest).unwrap();
    let tiers: [(&str, &[&str]); 2] = [
        ("good", &["scrfd_500m", "ff_good", "latent_color_swapper"]),
        ("bad", &["scrfd_500m", "ff_bad", "latent_color_swapper"]),
    ];
    let c = config(&rd, 64, &[&bad], &tiers);
    let report = stage(&c, &catalog(&c)).unwrap();
    assert!(report.tiers[0].usable, "{:?}", report.tiers[0]);
    let why = report.tiers[1].reason.as_deref().unwrap();
    assert!(why.contains("crc32") && why.contains("0badc0de") && why.contains("ff_bad.onnx"), "{why}");
}

#[test]
fn a_recogniser_whose_embedding_is_not_512_long_is_refused_when_it_loads() {
    let loader = fusiond::store::Loader::open(&[contract_models()], Arc::new(TractBackend::default())).unwrap();
    let err = loader.pick(Some("short_recognizer"), fusiond::manifest::Kind::Recognizer).err().unwrap().to_string();
    assert!(err.contains("short_recognizer") && err.contains("128 values") && err.contains("512"), "{err}");
}

/// `pipeline.refine_size` loads the tier's detector a second time at that
/// size (cached under its own key); a tier with a fixed-size detector
/// loads without one (its tracks are predicted).
#[test]
fn refine_size_loads_the_detector_again_at_the_small_size() {
    let rd = Ramdisk::new();
    let tiers: [(&str, &[&str]); 2] = [
        ("fixed", &["yolo_face_planted", "arcface_fr", "latent_color_swapper"]),
        ("dynamic", &["yunet_n_dynamic", "arcface_fr", "latent_color_swapper"]),
    ];
    let mut c = config(&rd, 64, &[], &tiers);
    c.pipeline.refine_size = 160;
    let store = Store::open(&c, Arc::new(TractBackend::default())).unwrap();
    let models = store.tier("dynamic").unwrap();
    let refiner = models.refiner.as_ref().expect("a refiner at 160");
    assert_eq!((refiner.entry.name.as_str(), refiner.entry.input_size), ("yunet_n_dynamic", [160, 160]));
    assert_eq!(models.detector.entry.input_size, [640, 480], "the full detector is fitted to the camera");
    assert!(store.cached().iter().any(|n| n == "yunet_n_dynamic@160x160"), "{:?}", store.cached());
    let fixed = store.tier("fixed").unwrap();
    assert!(fixed.refiner.is_none(), "a fixed-input detector is not refined");
    assert_eq!(fixed.detector.entry.input_size, [640, 640], "nor fitted");
}

/// `pipeline.fit_detector` runs a resizable detector at the camera's aspect:
/// 1280x720 shrinks into 640x640 as 640x360, rounded up to 640x384; off,
/// the manifest's size.
#[test]
fn the_tier_detector_fits_the_camera_frame_unless_told_not_to() {
    let rd = Ramdisk::new();
    let tiers: [(&str, &[&str]); 1] = [("t", &["yunet_2023mar", "arcface_fr", "latent_color_swapper"])];
    let mut c = config(&rd, 64, &[], &tiers);
    (c.camera.width, c.camera.height, c.pipeline.refine_size) = (1280, 720, 0);
    let store = Store::open(&c, Arc::new(TractBackend::default())).unwrap();
    assert_eq!(store.tier("t").unwrap().detector.entry.input_size, [640, 384]);
    c.pipeline.fit_detector = false;
    let store = Store::open(&c, Arc::new(TractBackend::default())).unwrap();
    assert_eq!(store.tier("t").unwrap().detector.entry.input_size, [640, 640]);
}
