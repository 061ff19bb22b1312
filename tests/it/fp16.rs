//! FP16 (`[[tier]] precision = "fp16"`, `--precision fp16`) against FP32,
//! both on tract, on the shared photos, under the gates FP16 is offered
//! with: boxes at an IoU of 0.9 or more, landmarks within 5 % of the face,
//! embeddings at a cosine of 0.99 or more, swapped frames at 40 dB or more.

use crate::util::{contract_models, image, psnr, shared, Models};
use fusiond::face::detect::iou;
use fusiond::face::SelectorMode;
use fusiond::infer::{Precision, TractBackend};
use std::sync::Arc;

const PHOTOS: [&str; 5] =
    ["fr_obama.jpg", "fr_biden.jpg", "fr_two_people.jpg", "fr_obama_and_biden.jpg", "skimage_astronaut.png"];

fn both() -> (Models, Models) {
    let open = || Models::open(&[shared("models"), contract_models()], Arc::new(TractBackend::default()));
    (open(), open().at(Precision::Fp16))
}

#[test]
fn fp16_detectors_find_the_faces_of_fp32() {
    let (fp32, fp16) = both();
    for name in ["yunet_2023mar", "scrfd_500m"] {
        let (mut a, mut b) = (fp32.detector(name, None).unwrap(), fp16.detector(name, None).unwrap());
        for photo in PHOTOS {
            let img = image(photo);
            let (fa, fb) = (a.detect(&img).unwrap(), b.detect(&img).unwrap());
            assert_eq!(fa.len(), fb.len(), "{name} on {photo}: fp32 {fa:?} vs fp16 {fb:?}");
            for f in &fa {
                let g = fb.iter().max_by(|x, y| iou(&f.bbox, &x.bbox).total_cmp(&iou(&f.bbox, &y.bbox))).unwrap();
                let size = (f.bbox[2] - f.bbox[0]).hypot(f.bbox[3] - f.bbox[1]);
                let worst = f
                    .landmarks
                    .iter()
                    .zip(&g.landmarks)
                    .map(|(p, q)| (p[0] - q[0]).hypot(p[1] - q[1]))
                    .fold(0f32, f32::max);
                assert!(iou(&f.bbox, &g.bbox) >= 0.9, "{name} on {photo}: FP16 box {:?} against {:?}", g.bbox, f.bbox);
                assert!(worst <= 0.05 * size, "{name} on {photo}: an FP16 landmark {worst:.2} px from FP32's");
            }
        }
    }
}

#[test]
fn fp16_embeddings_stay_within_a_cosine_of_0_99() {
    let (fp32, fp16) = both();
    let mut det = fp32.detector("scrfd_500m", None).unwrap();
    let (mut a, mut b) = (fp32.recognizer("arcface_fr"), fp16.recognizer("arcface_fr"));
    let (mut seen, mut worst) = (0, 1f32);
    for photo in PHOTOS {
        let img = image(photo);
        for f in det.detect(&img).unwrap() {
            let cos = a.embed(&img, &f.landmarks).unwrap().cosine(&b.embed(&img, &f.landmarks).unwrap());
            assert!(cos >= 0.99, "{photo}: FP16 embedding cosine {cos:.4} < 0.99");
            (seen, worst) = (seen + 1, worst.min(cos));
        }
    }
    eprintln!("arcface_fr: FP16 against FP32, the lowest cosine of {seen} faces {worst:.5}");
    assert!(seen >= 5, "only {seen} faces embedded");
}

#[test]
fn fp16_swaps_to_the_pixels_of_fp32() {
    let (fp32, fp16) = both();
    let target = image("fr_two_people.jpg");
    let mut frames = Vec::new();
    for c in [&fp32, &fp16] {
        let mut p = c.live("latent_color_swapper", SelectorMode::Many);
        p.set_source(&image("fr_biden.jpg"), "biden").unwrap();
        let mut frame = target.clone();
        let report = p.process(&mut frame, std::time::Instant::now()).unwrap();
        assert_eq!(report.swapped.len(), 2, "{report:?}");
        frames.push(frame);
    }
    let db = psnr(&frames[0], &frames[1]);
    eprintln!("latent_color_swapper: FP32 vs FP16 swapped frame PSNR {db:.1} dB");
    assert!(db >= 40.0, "FP16 swapped frame PSNR {db:.1} dB < 40 against FP32");
    assert_ne!(frames[0], target, "the swapper changed nothing");
}

/// A tier at `precision = "fp16"` beside one at fp32 over the same models:
/// each loads its own variants (cached apart) and the FP16 tier swaps.
#[test]
fn a_tier_at_fp16_loads_its_own_variants_and_swaps() {
    let state = tempfile::tempdir().unwrap();
    let text = format!(
        "[models]\ndirs = [{:?}, {:?}]\nramdisk = {:?}\nstart_tier = \"half\"\n\
         [pipeline]\nstate_dir = {:?}\nrefine_size = 0\n\
         [[tier]]\nname = \"full\"\nmodels = [\"scrfd_500m\", \"arcface_fr\", \"latent_color_swapper\"]\n\
         [[tier]]\nname = \"half\"\nprecision = \"fp16\"\nmodels = [\"scrfd_500m\", \"arcface_fr\", \"latent_color_swapper\"]\n",
        shared("models"),
        contract_models(),
        state.path().join("ramdisk"),
        state.path(),
    );
    let config = fusiond::config::Config::parse(&text, std::path::Path::new("test.toml")).unwrap();
    assert_eq!(config.tier[1].precision, Precision::Fp16);
    let store = fusiond::store::Store::open(&config, Arc::new(TractBackend::default())).unwrap();
    let (full, half) = (store.tier("full").unwrap(), store.tier("half").unwrap());
    assert!(!Arc::ptr_eq(&full.recognizer, &half.recognizer), "the FP16 tier reused the FP32 recogniser");
    let cached = store.cached();
    for name in ["arcface_fr", "arcface_fr:fp16", "latent_color_swapper:fp16"] {
        assert!(cached.iter().any(|c| c == name), "{name} not cached apart: {cached:?}");
    }
    let fusion = fusiond::daemon::fusion_pipeline(&half).unwrap();
    let mut p = fusiond::face::LivePipeline::new(fusion, fusiond::face::LiveSettings::still(SelectorMode::Many));
    p.set_source(&image("fr_biden.jpg"), "source").unwrap();
    let mut frame = image("fr_two_people.jpg");
    assert_eq!(p.process(&mut frame, std::time::Instant::now()).unwrap().swapped.len(), 2);

    let bad = text.replace("precision = \"fp16\"", "precision = \"fp8\"");
    let err = fusiond::config::Config::parse(&bad, std::path::Path::new("test.toml")).unwrap_err().to_string();
    assert!(err.contains("precision") && err.contains("fp16"), "{err}");
}

/// ONNX Runtime does not take a tract precision: it says what to set instead.
#[cfg(feature = "ort")]
#[test]
fn onnx_runtime_refuses_fp16_and_names_tensorrts_setting() {
    use fusiond::infer::{Backend, InputShape};
    let bytes = Arc::new(std::fs::read(shared("models/arcface_fr_feature.onnx")).unwrap());
    let shapes = [InputShape::first(&[1, 3, 112, 112])];
    let err = crate::engines::ort().load(bytes, &shapes, Precision::Fp16).err().unwrap().to_string();
    assert!(err.contains("fp16") && err.contains("inference.ort.tensorrt.fp16"), "{err}");
}
