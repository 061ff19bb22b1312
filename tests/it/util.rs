use fusiond::catalog::Catalog;
use fusiond::infer::TractBackend;
use fusiond::vision::RgbImage;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// `../shared` (or $FUSIOND_SHARED), checked to hold `rel`; panics with what
/// is missing and how to get it.
pub fn shared(rel: &str) -> PathBuf {
    let root = std::env::var_os("FUSIOND_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared"));
    let path = root.join(rel);
    assert!(
        path.exists(),
        "missing shared test data: {} does not exist. These tests need the project's shared/ folder \
         (real models and photos) beside the checkout, or FUSIOND_SHARED pointing at it.",
        path.display()
    );
    path
}

pub fn image(name: &str) -> RgbImage {
    let path = shared(&format!("images/{name}"));
    image::open(&path).unwrap_or_else(|e| panic!("cannot decode {}: {e}", path.display())).to_rgb8()
}

/// The contract models, generated once per test run into a temp dir (or taken
/// from $FUSIOND_CONTRACT_MODELS when .ci/run already built them).
pub fn contract_models() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        if let Some(dir) = std::env::var_os("FUSIOND_CONTRACT_MODELS") {
            let dir = PathBuf::from(dir);
            if dir.join("manifest.toml").is_file() {
                return dir;
            }
        }
        let dir = tempfile::tempdir().expect("temp dir").keep();
        let python = std::env::var("FUSIOND_PYTHON").unwrap_or_else(|_| "python3".into());
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/make_contract_models.py");
        let out = std::process::Command::new(&python).arg(&script).arg(&dir).output();
        match out {
            Ok(o) if o.status.success() => dir,
            Ok(o) => panic!(
                "{python} {} failed: {}\nThe swap tests need Python with numpy and onnx: run tests/setup.sh \
                 and set FUSIOND_PYTHON to its venv's python.",
                script.display(),
                String::from_utf8_lossy(&o.stderr)
            ),
            Err(e) => panic!("cannot run {python}: {e}; set FUSIOND_PYTHON to a python with numpy and onnx"),
        }
    })
    .clone()
}

pub fn catalog() -> Catalog {
    Catalog::open(&[shared("models"), contract_models()], Arc::new(TractBackend)).expect("catalog opens")
}

pub fn psnr(a: &[u8], b: &[u8]) -> f64 {
    assert_eq!(a.len(), b.len());
    let mse = a.iter().zip(b).map(|(x, y)| (*x as f64 - *y as f64).powi(2)).sum::<f64>() / a.len() as f64;
    if mse == 0.0 {
        f64::INFINITY
    } else {
        10.0 * (255.0f64 * 255.0 / mse).log10()
    }
}

/// The pixels of `img` inside the integer rectangle `[x1, y1, x2, y2)`.
pub fn region(img: &RgbImage, r: [u32; 4]) -> Vec<u8> {
    let mut out = Vec::new();
    for y in r[1]..r[3] {
        for x in r[0]..r[2] {
            out.extend_from_slice(&img.get_pixel(x, y).0);
        }
    }
    out
}
