//! INT8 (QDQ) models from models/quantize against their FP32 originals, both
//! on tract, on the shared photos.

use crate::util::{image, int8_models, shared, Models};
use fusiond::face::detect::iou;
use fusiond::infer::TractBackend;
use std::sync::Arc;

const PHOTOS: [&str; 6] = [
    "fr_obama.jpg",
    "fr_obama2.jpg",
    "fr_biden.jpg",
    "fr_two_people.jpg",
    "fr_obama_and_biden.jpg",
    "skimage_astronaut.png",
];

fn catalog() -> Models {
    Models::open(&[shared("models"), int8_models()], Arc::new(TractBackend::default()))
}

#[test]
fn int8_detectors_find_the_same_faces_as_fp32() {
    let c = catalog();
    for name in ["yunet_2023mar", "yunet_n_dynamic", "scrfd_500m"] {
        let mut fp32 = c.detector(name, None).unwrap();
        let mut int8 = c.detector(&format!("{name}_int8"), None).unwrap();
        for photo in PHOTOS {
            let img = image(photo);
            let (a, b) = (fp32.detect(&img).unwrap(), int8.detect(&img).unwrap());
            assert_eq!(a.len(), b.len(), "{name} on {photo}: fp32 {a:?} vs int8 {b:?}");
            for f in &a {
                let best = b.iter().map(|g| iou(&f.bbox, &g.bbox)).fold(0.0, f32::max);
                assert!(best >= 0.9, "{name} on {photo}: INT8 box IoU {best:.3} < 0.9");
            }
        }
    }
}

#[test]
fn int8_embeddings_stay_close_to_fp32() {
    let c = catalog();
    let mut det = c.detector("scrfd_500m", None).unwrap();
    let mut fp32 = c.recognizer("arcface_fr");
    let mut int8 = c.recognizer("arcface_fr_int8");
    for photo in PHOTOS {
        let img = image(photo);
        for f in det.detect(&img).unwrap() {
            let cos = fp32.embed(&img, &f.landmarks).unwrap().cosine(&int8.embed(&img, &f.landmarks).unwrap());
            assert!(cos >= 0.95, "{photo}: INT8 embedding cosine {cos:.4} < 0.95");
        }
    }
}
