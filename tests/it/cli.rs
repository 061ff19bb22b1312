use crate::util::{contract_models, shared};
use std::path::Path;
use std::process::Output;

fn fusiond(args: &[&str]) -> Output {
    crate::util::fusiond_command().args(args).output().expect("fusiond runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

#[test]
fn detect_json_has_the_documented_shape() {
    let img = shared("images/fr_two_people.jpg");
    let models = shared("models");
    let out = fusiond(&["detect", p(&img), "--models", p(&models), "--json", "--embed"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["image"], p(&img));
    assert_eq!((v["width"].as_u64(), v["height"].as_u64()), (Some(1126), Some(661)));
    let faces = v["faces"].as_array().unwrap();
    assert_eq!(faces.len(), 2);
    for f in faces {
        assert_eq!(f["box"].as_array().unwrap().len(), 4);
        assert!(f["score"].as_f64().unwrap() > 0.5);
        assert_eq!(f["landmarks"].as_array().unwrap().len(), 5);
        let e: Vec<f64> = serde_json::from_value(f["embedding"].clone()).unwrap();
        assert_eq!(e.len(), 512);
        assert!((e.iter().map(|v| v * v).sum::<f64>() - 1.0).abs() < 1e-3);
    }
}

#[test]
fn detect_debug_writes_an_annotated_png() {
    let tmp = tempfile::tempdir().unwrap();
    let out_png = tmp.path().join("dbg.png");
    let img = shared("images/fr_obama.jpg");
    let out = fusiond(&["detect", p(&img), "--models", p(&shared("models")), "--debug", p(&out_png)]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("1 face(s)"));
    let drawn = image::open(&out_png).unwrap().to_rgb8();
    let orig = image::open(&img).unwrap().to_rgb8();
    assert_eq!(drawn.dimensions(), orig.dimensions());
    assert_ne!(drawn, orig);
}

#[test]
fn swap_writes_the_output_and_reports_the_faces() {
    let tmp = tempfile::tempdir().unwrap();
    let output = tmp.path().join("out.jpg");
    let cm = contract_models();
    let out = fusiond(&[
        "swap",
        "--source",
        p(&shared("images/fr_biden.jpg")),
        "--target",
        p(&shared("images/fr_two_people.jpg")),
        "--output",
        p(&output),
        "--models",
        p(&shared("models")),
        "--models",
        p(&cm),
        "--swapper",
        "latent_color_swapper",
        "--selector",
        "many",
        "--blend",
        "0.8",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("swapped 2 of 2 face(s)"));
    assert_eq!(image::open(&output).unwrap().width(), 1126);
}

/// A copy of the shared models in a temp dir, described by the built-in manifest.
fn copied_models() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    for f in ["face_detection_yunet_2023mar.onnx", "arcface_fr_feature.onnx"] {
        std::fs::copy(shared(&format!("models/{f}")), tmp.path().join(f)).unwrap();
    }
    tmp
}

#[test]
fn a_tampered_model_is_refused_with_both_hashes() {
    let tmp = copied_models();
    let path = tmp.path().join("face_detection_yunet_2023mar.onnx");
    let mut bytes = std::fs::read(&path).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&path, bytes).unwrap();
    let out = fusiond(&[
        "detect",
        p(&shared("images/fr_obama.jpg")),
        "--models",
        p(tmp.path()),
        "--detector",
        "yunet_2023mar",
    ]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("8f2383e4dd3cfbb4") && err.contains("corrupt or tampered"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "one-line error: {err}");
}

#[test]
fn a_missing_model_file_says_where_it_looked() {
    let tmp = tempfile::tempdir().unwrap();
    let out =
        fusiond(&["detect", p(&shared("images/fr_obama.jpg")), "--models", p(tmp.path()), "--detector", "scrfd_500m"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("scrfd_500m_bnkps.onnx") && err.contains("exists"), "{err}");
    let out = fusiond(&["detect", p(&shared("images/fr_obama.jpg")), "--models", p(tmp.path())]);
    assert!(stderr(&out).contains("no Detector model file is present"), "{}", stderr(&out));
}

#[test]
fn an_undecodable_image_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("broken.jpg");
    std::fs::write(&bad, b"\xff\xd8\xff\xe0 this is not a jpeg").unwrap();
    let out = fusiond(&["detect", p(&bad), "--models", p(&shared("models"))]);
    assert!(!out.status.success());
    let err = stderr(&out);
    // On ARM, tract may warn about CPU detection first; nothing else comes before the error.
    let at = err.find("error: cannot decode image").unwrap_or_else(|| panic!("no decode error in: {err}"));
    assert!(err[..at].lines().all(|l| l.starts_with("warn: ")), "{err}");
    assert!(err[at..].contains("broken.jpg"), "{err}");
}

#[test]
fn an_unknown_manifest_key_names_the_file_and_the_key() {
    let tmp = copied_models();
    let manifest = tmp.path().join("manifest.toml");
    std::fs::write(
        &manifest,
        "[[model]]\nname = \"d\"\nfile = \"x.onnx\"\ncontract = \"yunet\"\nlicence = \"MIT\"\nthreshold = 3\n",
    )
    .unwrap();
    let out = fusiond(&["detect", p(&shared("images/fr_obama.jpg")), "--models", p(tmp.path())]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("manifest.toml") && err.contains("threshold"), "{err}");
}

#[test]
fn infer_writes_raw_outputs_as_npy() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("in.npy");
    let t = fusiond::infer::Tensor::zeros(&[1, 3, 112, 112]);
    fusiond::npy::write(std::fs::File::create(&input).unwrap(), &t).unwrap();
    let arg = format!("input={}", p(&input));
    let out = fusiond(&[
        "infer",
        "arcface_fr",
        "--input",
        &arg,
        "--output-dir",
        p(tmp.path()),
        "--models",
        p(&shared("models")),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let emb = fusiond::npy::read(std::fs::File::open(tmp.path().join("output.npy")).unwrap()).unwrap();
    assert_eq!(emb.shape(), &[1, 512]);
}

#[test]
fn facefusion_hash_files_verify_models_without_a_sha256() {
    let tmp = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(shared("models/face_detection_yunet_2023mar.onnx")).unwrap();
    std::fs::write(tmp.path().join("yunet_2023_mar.onnx"), &bytes).unwrap();
    let hash = tmp.path().join("yunet_2023_mar.hash");
    let detect = || {
        let img = shared("images/fr_obama.jpg");
        fusiond(&["detect", p(&img), "--models", p(tmp.path()), "--detector", "yunet_2023_mar"])
    };
    // Unverified (no sha256 in the built-in manifest, no .hash): loads with a warning.
    let out = detect();
    assert!(out.status.success() && stderr(&out).contains("unverified"), "{}", stderr(&out));
    std::fs::write(&hash, format!("{:08x}\n", crc32fast::hash(&bytes))).unwrap();
    let out = detect();
    assert!(out.status.success() && !stderr(&out).contains("unverified"), "{}", stderr(&out));
    std::fs::write(&hash, "deadbeef").unwrap();
    let out = detect();
    assert!(!out.status.success());
    assert!(stderr(&out).contains("crc32") && stderr(&out).contains("deadbeef"), "{}", stderr(&out));
}

/// Zero and huge numeric flags are refused with a message, never a panic,
/// an abort or a hang (`--size 0` used to divide by zero inside tract,
/// `--size 100000` to abort on a 120 GB allocation, `--threads 100000` to
/// start that many threads).
#[test]
fn zero_and_huge_numeric_flags_are_refused_with_a_reason() {
    let cases: [(&[&str], &str); 7] = [
        (&["--size", "0"], "32 to 4096"),
        (&["--size", "100000"], "32 to 4096"),
        (&["--size", "640x0"], "32 to 4096"),
        (&["--threads", "0"], "1 to 256"),
        (&["--threads", "100000"], "1 to 256"),
        (&["--score", "2"], "outside 0..1"),
        (&["--score=-1"], "outside 0..1"),
    ];
    for (flags, says) in cases {
        let out = crate::util::fusiond_command()
            .arg("detect")
            .arg(shared("images/fr_obama.jpg"))
            .arg("--models")
            .arg(shared("models"))
            .args(["--detector", "scrfd_500m"])
            .args(flags)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(matches!(out.status.code(), Some(1 | 2)), "{flags:?}: {:?} {stderr}", out.status);
        assert!(stderr.contains(says) && !stderr.contains("panicked"), "{flags:?}: {stderr}");
    }
}

/// The Debian postinst starts the daemon only when `check-config` passes,
/// and prints its message otherwise: a missing model must fail it, naming
/// the model.
#[test]
fn check_config_passes_with_the_models_and_names_a_missing_one() {
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("fusiond.toml");
    let write = |dirs: &str| {
        let text = std::fs::read_to_string(crate::util::repo("config/fusiond.toml")).unwrap();
        std::fs::write(&config, format!("{text}\n")).unwrap();
        std::fs::create_dir_all(tmp.path().join("conf.d")).unwrap();
        let tier = "[[tier]]\nname = \"fast\"\nmodels = [\"yunet_2023mar\", \"arcface_fr\", \"identity_swapper\"]\n";
        let fragment = format!("[models]\ndirs = [{dirs}]\nstart_tier = \"fast\"\n\n{tier}");
        std::fs::write(tmp.path().join("conf.d/50-models.toml"), fragment).unwrap();
    };
    let (models, contract) = (shared("models"), contract_models());
    write(&format!("{:?}, {:?}", p(&models), p(&contract)));
    let out = fusiond(&["check-config", "--config", p(&config)]);
    assert!(out.status.success(), "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains(": ok ("), "{stdout}");
    assert!(!stdout.contains("TensorRT engines:"), "no TensorRT on tract: {stdout}");

    // The shared models' folder left out: YuNet is a model the built-in
    // manifest knows, but its file is not there.
    let empty = tmp.path().join("models");
    std::fs::create_dir_all(&empty).unwrap();
    write(&format!("{:?}, {:?}", p(&empty), p(&contract)));
    let out = fusiond(&["check-config", "--config", p(&config)]);
    assert!(!out.status.success());
    let missing = empty.join("face_detection_yunet_2023mar.onnx");
    assert!(
        stderr(&out).contains(&format!("`yunet_2023mar`, whose file {} does not exist", missing.display())),
        "{}",
        stderr(&out)
    );
}

/// `fusiond profile` times every node of tract's plan: the operators' shares
/// add up to the whole run, and the ONNX nodes are the graph's own names. It
/// also says how long the model took to load.
#[test]
fn profile_times_each_node_and_sums_them_by_op_and_onnx_node() {
    let out = fusiond(&["profile", "scrfd_500m", "--models", p(&shared("models")), "--runs", "2", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((v["engine"].as_str(), v["profile"]["runs"].as_u64()), (Some("tract"), Some(2)));
    let total = v["profile"]["total_ms"].as_f64().unwrap();
    assert!(total > 0.0);
    let load = v["load_ms"].as_f64().unwrap();
    assert!(load > 0.0 && load < 60_000.0, "load time {load} ms");
    let ops = v["profile"]["by_op"].as_array().unwrap();
    let sum: f64 = ops.iter().map(|o| o["percent"].as_f64().unwrap()).sum();
    assert!((sum - 100.0).abs() < 5.0, "operator shares add up to {sum} %");
    let nodes = v["profile"]["by_onnx_node"].as_array().unwrap();
    assert!(nodes.iter().all(|n| !n["name"].as_str().unwrap().contains('.')), "{nodes:?}");
    assert!(nodes.len() > 20, "SCRFD has more than 20 ONNX nodes with time: {}", nodes.len());
}
