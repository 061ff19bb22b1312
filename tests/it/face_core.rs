use crate::util::{catalog, contract_models, image, psnr, region, shared, Models};
use fusiond::face::{Embedding, Face, LivePipeline, SelectorMode};
use fusiond::infer::{InputShape, Tensor};
use fusiond::npy;
use fusiond::vision::{paste_region, warp_affine_into, Affine, RgbImage, Template};
use std::time::Instant;

const DETECTORS: [&str; 3] = ["yunet_2023mar", "yunet_n_dynamic", "scrfd_500m"];
const EXPECTED: [(&str, usize); 5] = [
    ("fr_obama.jpg", 1),
    ("fr_two_people.jpg", 2),
    ("fr_obama_and_biden.jpg", 3),
    ("pexels_blazeface_Test3.jpg", 3),
    ("skimage_astronaut.png", 1),
];

fn assert_plausible_landmarks(f: &Face, what: &str) {
    let [x1, y1, x2, y2] = f.bbox;
    for p in f.landmarks {
        assert!(
            p[0] >= x1 && p[0] <= x2 && p[1] >= y1 && p[1] <= y2,
            "{what}: landmark {p:?} outside box {:?}",
            f.bbox
        );
    }
    let [le, re, nose, lm, rm] = f.landmarks;
    assert!(le[0] < re[0], "{what}: left eye {le:?} is not left of right eye {re:?}");
    assert!(lm[0] < rm[0], "{what}: mouth corners out of order");
    assert!(lm[1] > nose[1] && rm[1] > nose[1], "{what}: mouth is not below the nose");
    assert!(nose[1] > le[1].min(re[1]), "{what}: nose is not below the eyes");
}

#[test]
fn every_shared_detector_finds_every_face_with_ordered_landmarks() {
    let catalog = catalog();
    for name in DETECTORS {
        let mut det = catalog.detector(name, None).unwrap();
        for (img, want) in EXPECTED {
            let faces = det.detect(&image(img)).unwrap();
            assert_eq!(faces.len(), want, "{name} on {img}: {faces:?}");
            for f in &faces {
                assert_plausible_landmarks(f, &format!("{name} on {img}"));
            }
        }
    }
}

#[test]
fn resizable_detectors_run_at_other_sizes_and_fixed_ones_refuse() {
    let catalog = catalog();
    let mut det = catalog.detector("scrfd_500m", Some([320, 320])).unwrap();
    assert_eq!(det.entry().input_size, [320, 320]);
    assert_eq!(det.detect(&image("fr_two_people.jpg")).unwrap().len(), 2);
    let mut det = catalog.detector("yunet_n_dynamic", Some([480, 352])).unwrap();
    assert_eq!(det.detect(&image("fr_obama.jpg")).unwrap().len(), 1);
    let err = catalog.detector("yolo_face_planted", Some([320, 320])).err().unwrap();
    assert!(err.to_string().contains("cannot run at 320x320"), "{err}");
}

#[test]
fn yolo_face_rows_are_decoded_thresholded_suppressed_and_rescaled() {
    let catalog = catalog();
    let mut det = catalog.detector("yolo_face_planted", None).unwrap();
    // 1280x960 letterboxes at scale 0.5, so input coordinates double.
    let faces = det.detect(&RgbImage::new(1280, 960)).unwrap();
    assert_eq!(faces.len(), 2, "{faces:?}");
    assert_eq!(faces[0].score, 0.9);
    assert_eq!(faces[0].bbox, [540.0, 360.0, 740.0, 600.0]);
    assert_eq!(faces[0].landmarks[0], [600.0, 440.0]);
    assert_eq!(faces[1].bbox, [140.0, 140.0, 260.0, 260.0]);
    assert_plausible_landmarks(&faces[0], "planted face");
}

fn identity(catalog: &Models, img: &str) -> Embedding {
    let mut det = catalog.detector("scrfd_500m", None).unwrap();
    let mut rec = catalog.recognizer("arcface_fr");
    let frame = image(img);
    let faces = det.detect(&frame).unwrap();
    rec.embed(&frame, &faces[0].landmarks).unwrap()
}

#[test]
fn recogniser_tells_the_same_person_from_a_different_one() {
    let catalog = catalog();
    let obama = identity(&catalog, "fr_obama.jpg");
    let obama2 = identity(&catalog, "fr_obama2.jpg");
    let biden = identity(&catalog, "fr_biden.jpg");
    assert_eq!(obama.raw.len(), 512);
    let norm: f32 = obama.normed.iter().map(|v| v * v).sum::<f32>().sqrt();
    assert!((norm - 1.0).abs() < 1e-4);
    assert!(obama.cosine(&obama2) > 0.5, "same person: {}", obama.cosine(&obama2));
    assert!(obama.cosine(&biden) < 0.3, "different people: {}", obama.cosine(&biden));
}

fn pipeline(catalog: &Models, swapper: &str, selector: SelectorMode) -> LivePipeline {
    catalog.live(swapper, selector)
}

fn aligned_at(frame: &RgbImage, landmarks: &[[f32; 2]; 5], size: u32) -> (Affine, RgbImage) {
    let m = Template::Arcface128.align(landmarks, size).unwrap();
    let mut crop = RgbImage::new(size, size);
    warp_affine_into(frame, &m, &mut crop);
    (m, crop)
}

/// Asserts every pixel outside the paste regions of `faces` (swapped at
/// `size` on arcface_128) is unchanged.
fn assert_untouched_outside_at(before: &RgbImage, after: &RgbImage, faces: &[&Face], size: u32) {
    let regions: Vec<[u32; 4]> = faces
        .iter()
        .map(|f| {
            let m = aligned_at(before, &f.landmarks, size).0;
            paste_region(&m, size, size, before.width(), before.height()).unwrap()
        })
        .collect();
    for (x, y, px) in after.enumerate_pixels() {
        let inside = regions.iter().any(|r| x >= r[0] && x < r[2] && y >= r[1] && y < r[3]);
        if !inside {
            assert_eq!(px, before.get_pixel(x, y), "pixel ({x}, {y}) outside the paste boxes changed");
        }
    }
}

fn assert_untouched_outside(before: &RgbImage, after: &RgbImage, faces: &[&Face]) {
    assert_untouched_outside_at(before, after, faces, 128)
}

#[test]
fn identity_swap_round_trips_alignment_inverse_warp_and_mask() {
    let catalog = catalog();
    for (swapper, size) in [("identity_swapper", 128), ("identity_hyperswap", 256)] {
        identity_round_trip(&catalog, swapper, size);
    }
}

fn identity_round_trip(catalog: &Models, swapper: &str, size: u32) {
    let mut p = pipeline(catalog, swapper, SelectorMode::Many);
    p.set_source(&image("fr_obama2.jpg"), "source").unwrap();
    for target in ["fr_two_people.jpg", "fr_obama_and_biden.jpg", "pexels_blazeface_Test3.jpg"] {
        let before = image(target);
        let mut after = before.clone();
        let report = p.process(&mut after, Instant::now()).unwrap();
        assert_eq!(report.swapped.len(), report.faces.len());
        for f in &report.faces {
            let (_, want) = aligned_at(&before, &f.landmarks, size);
            let (_, got) = aligned_at(&after, &f.landmarks, size);
            let crop_psnr = psnr(&want, &got);
            let b = f.bbox.map(|v| v.max(0.0) as u32);
            let r = [b[0], b[1], b[2].min(before.width()), b[3].min(before.height())];
            let box_psnr = psnr(&region(&before, r), &region(&after, r));
            eprintln!("{swapper} on {target}: re-aligned crop {crop_psnr:.1} dB, face box {box_psnr:.1} dB");
            assert!(crop_psnr >= 35.0, "{swapper} on {target}: re-aligned crop PSNR {crop_psnr:.1} dB < 35");
            assert!(box_psnr >= 28.0, "{swapper} on {target}: face box PSNR {box_psnr:.1} dB < 28");
        }
        let faces: Vec<&Face> = report.faces.iter().collect();
        assert_untouched_outside_at(&before, &after, &faces, size);
    }
}

#[test]
fn one_model_serves_a_session_per_thread() {
    let catalog = catalog();
    let entry = catalog.entry("arcface_fr").unwrap();
    let model = catalog.0.load_with(entry, &[InputShape::first(&[1, 3, 112, 112])]).unwrap();
    let data = (0..3 * 112 * 112).map(|i| (i % 255) as f32 / 128.0 - 1.0).collect();
    let input = Tensor::new(&[1, 3, 112, 112], data).unwrap();
    let outputs: Vec<Vec<f32>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..3)
            .map(|_| {
                let (model, input) = (&model, &input);
                s.spawn(move || {
                    let mut session = model.session().unwrap();
                    session.run(&[("input", input)]).unwrap().get("output").unwrap().data().to_vec()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(outputs[0].len(), 512);
    assert!(outputs.iter().all(|o| o == &outputs[0]));
}

#[test]
fn source_latent_flows_through_emap_into_the_swapped_pixels() {
    let catalog = catalog();
    let target = image("fr_two_people.jpg");
    let mut outputs = Vec::new();
    for source in ["fr_obama.jpg", "fr_biden.jpg"] {
        let mut p = pipeline(&catalog, "latent_color_swapper", SelectorMode::One);
        p.set_source(&image(source), source).unwrap();
        let mut frame = target.clone();
        let report = p.process(&mut frame, Instant::now()).unwrap();
        assert_eq!(report.swapped.len(), 1);
        let face = &report.faces[report.swapped[0]];
        assert_untouched_outside(&target, &frame, &[face]);
        assert_ne!(frame, target, "the swap changed nothing");
        outputs.push(frame);
    }
    assert_ne!(outputs[0], outputs[1], "a different source gave the same output");
}

#[test]
fn inswapper_latent_matches_numpy_with_and_without_renormalisation() {
    let catalog = catalog();
    let dir = contract_models();
    let load = |n: &str| npy::read(std::fs::File::open(dir.join(n)).unwrap()).unwrap();
    let raw = load("known_emap_embedding.npy");
    let embedding = Embedding::from_raw(raw.data().to_vec());
    for (name, expected) in
        [("known_emap", "known_emap_latent_plain.npy"), ("known_emap_renorm", "known_emap_latent_renorm.npy")]
    {
        let want = load(expected);
        let swapper = catalog.swapper(name);
        let got = swapper.latent(&embedding).unwrap();
        assert_eq!(got.shape(), want.shape());
        let err = got.data().iter().zip(want.data()).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        assert!(err < 1e-5, "{name}: latent differs from NumPy by {err}");

        // What enters the graph is that latent: the model echoes `source`.
        let entry = catalog.entry(name).unwrap();
        let model = catalog
            .0
            .load_with(entry, &[InputShape::named("target", &[1, 3, 128, 128]), InputShape::named("source", &[1, 512])])
            .unwrap();
        let target = Tensor::zeros(&[1, 3, 128, 128]);
        let out = model.session().unwrap().run(&[("target", &target), ("source", &got)]).unwrap();
        assert_eq!(out.get("source_echo").unwrap().data(), got.data());
    }
}

#[test]
fn swapped_frames_differ_only_where_faces_are_selected_by_reference() {
    let catalog = catalog();
    let obama = identity(&catalog, "fr_obama.jpg");
    let mut p = pipeline(&catalog, "latent_color_swapper", SelectorMode::One);
    p.lock_reference(obama, 0.3);
    p.set_source(&image("fr_biden.jpg"), "source").unwrap();
    let before = image("fr_obama_and_biden.jpg");
    let mut after = before.clone();
    let report = p.process(&mut after, Instant::now()).unwrap();
    assert_eq!(report.swapped.len(), 1, "only Obama is swapped: {:?}", report.faces);
    let swapped = &report.faces[report.swapped[0]];
    assert_untouched_outside(&before, &after, &[swapped]);
    // The swapped face is Obama's: the one the recogniser matches.
    let mut rec = catalog.recognizer("arcface_fr");
    let e = rec.embed(&before, &swapped.landmarks).unwrap();
    assert!(e.cosine(&identity(&catalog, "fr_obama2.jpg")) > 0.5);
    let _ = shared("images/fr_obama2.jpg");
}

/// The inverting enhancer returns the face's colour negative, so inside
/// the mask the frame must become 0.2 × before + 0.8 × (255 − before), and
/// outside the paste box nothing may change.
#[test]
fn the_enhancer_blends_at_80_percent_inside_its_paste_region_only() {
    let catalog = catalog();
    let mut enhancer = catalog.enhancer("inverting_enhancer");
    assert_eq!(enhancer.blend, 0.8);
    let mut det = catalog.detector("scrfd_500m", None).unwrap();
    let before = image("fr_two_people.jpg");
    let face = det.detect(&before).unwrap().remove(0);
    let mut after = before.clone();
    enhancer.enhance(&mut after, &face.landmarks).unwrap();
    let m = Template::Ffhq512.align(&face.landmarks, 512).unwrap();
    let r = paste_region(&m, 512, 512, before.width(), before.height()).unwrap();
    for (x, y, px) in after.enumerate_pixels() {
        if !(x >= r[0] && x < r[2] && y >= r[1] && y < r[3]) {
            assert_eq!(px, before.get_pixel(x, y), "pixel ({x}, {y}) outside the enhancer's paste box changed");
        }
    }
    // The middle half of the face box lies where the box mask is 1.
    let b = face.bbox;
    let (w, h) = (b[2] - b[0], b[3] - b[1]);
    let (x0, y0, x1, y1) =
        ((b[0] + w / 4.0) as u32, (b[1] + h / 4.0) as u32, (b[2] - w / 4.0) as u32, (b[3] - h / 4.0) as u32);
    // after − before = blend × (255 − 2 × before) where the mask is 1: the
    // least-squares blend over the region, and how far the pixels sit from it.
    let (mut num, mut den, mut moved, mut n) = (0.0f64, 0.0f64, 0.0f64, 0.0f64);
    let mut pairs = Vec::new();
    for y in y0..y1 {
        for x in x0..x1 {
            for c in 0..3 {
                let (was, is) = (before.get_pixel(x, y)[c] as f64, after.get_pixel(x, y)[c] as f64);
                let (d, g) = (is - was, 255.0 - 2.0 * was);
                (num, den, moved, n) = (num + d * g, den + g * g, moved + d.abs(), n + 1.0);
                pairs.push((d, g));
            }
        }
    }
    let blend = num / den;
    let off = pairs.iter().map(|(d, g)| (d - 0.8 * g).abs()).sum::<f64>() / n;
    eprintln!("enhancer: blend {blend:.3} from the pixels, {off:.2} levels off 0.8 on average, moved {:.1}", moved / n);
    assert!(moved / n > 20.0, "the enhancer changed the face by only {:.1} levels on average", moved / n);
    assert!((blend - 0.8).abs() < 0.03, "the pixels say the enhancer was blended at {blend:.3}, not 0.8");
    assert!(off < 4.0, "the face is {off:.2} levels from 0.2 x before + 0.8 x enhanced on average");
}

/// RCT moves the swapped face's Lab mean and deviation (over the face
/// region of the mask) onto the original face's; without it the
/// colour-painting swapper's colours stay.
#[test]
fn colour_transfer_moves_the_swapped_face_to_the_original_colours() {
    use fusiond::face::ColorTransfer;
    use fusiond::vision::lab_stats;
    let catalog = catalog();
    let target = image("fr_two_people.jpg");
    let mut det = catalog.detector("scrfd_500m", None).unwrap();
    let mut rec = catalog.recognizer("arcface_fr");
    let face = det.detect(&target).unwrap()[0].clone();
    let source = rec.embed(&image("fr_obama.jpg"), &det.detect(&image("fr_obama.jpg")).unwrap()[0].landmarks).unwrap();
    let mut swapper = catalog.swapper("latent_color_swapper");
    let latent = swapper.latent(&source).unwrap();
    let mut gaps = Vec::new();
    for mode in [ColorTransfer::None, ColorTransfer::Rct] {
        swapper.color_transfer = mode;
        swapper.run(&target, &face.landmarks, &latent).unwrap();
        let (out, original, mask) = swapper.last_crops();
        let core: Vec<f32> = mask.iter().map(|&m| if m > 0.9 { 1.0 } else { 0.0 }).collect();
        let ((mo, so), (mt, st)) = (lab_stats(out, &core), lab_stats(original, &core));
        let gap = (0..3).map(|c| (mo[c] - mt[c]).abs().max((so[c] - st[c]).abs())).fold(0.0, f32::max);
        eprintln!("{mode}: Lab mean {mo:?} std {so:?} vs original {mt:?} {st:?}: worst gap {gap:.2}");
        gaps.push(gap);
    }
    assert!(gaps[1] < 2.0, "with rct the face takes the original's colours: gap {:.2}", gaps[1]);
    assert!(gaps[0] > 5.0, "without it the swapper's colours stay: gap {:.2}", gaps[0]);
}

/// The mouth mask keeps the person's own mouth: inside the lip line
/// (eroded a little) the output equals the input, while the rest of the
/// face changes.
#[test]
fn the_mouth_mask_keeps_the_original_mouth_and_swaps_the_rest_of_the_face() {
    use fusiond::face::{in_polygon, FusionPipeline, LiveSettings, MouthSettings, PipelineSettings};
    let catalog = catalog();
    for photo in ["fr_obama.jpg", "pexels-sam-lion-5709614.jpg"] {
        let before = image(photo);
        let mut fusion = FusionPipeline::new(
            catalog.detector("scrfd_500m", None).unwrap(),
            catalog.recognizer("arcface_fr"),
            catalog.swapper("latent_color_swapper"),
            PipelineSettings::default(),
        );
        fusion.landmarker = Some(catalog.landmarker("landmark68_fr"));
        let mouth = MouthSettings { enabled: true, ..MouthSettings::default() };
        let mut live = LivePipeline::new(fusion, LiveSettings { mouth, ..LiveSettings::still(SelectorMode::One) });
        live.set_source(&image("fr_biden.jpg"), "source").unwrap();
        let mut after = before.clone();
        let report = live.process(&mut after, Instant::now()).unwrap();
        assert_eq!(report.swapped.len(), 1);
        assert!(report.timings.mouth.as_nanos() > 0, "the mouth mask is timed");
        let face = &report.faces[report.swapped[0]];
        let lips = catalog.landmarker("landmark68_fr").mouth(&before, face.bbox).unwrap();
        let c = lips.iter().fold([0.0, 0.0], |a, q| [a[0] + q[0] / 12.0, a[1] + q[1] / 12.0]);
        let scaled = |k: f32| lips.map(|q| [c[0] + (q[0] - c[0]) * k, c[1] + (q[1] - c[1]) * k]);
        let (eroded, grown) = (scaled(0.7), scaled(1.6));
        let (mut kept, mut changed, mut n_in, mut n_out) = (0usize, 0.0f64, 0usize, 0usize);
        let b = face.bbox.map(|v| v.max(0.0) as u32);
        for y in b[1]..b[3].min(before.height()) {
            for x in b[0]..b[2].min(before.width()) {
                let (px, py) = (x as f32, y as f32);
                if in_polygon(&eroded, px, py) {
                    n_in += 1;
                    kept += usize::from(before.get_pixel(x, y) == after.get_pixel(x, y));
                } else if !in_polygon(&grown, px, py) {
                    n_out += 1;
                    let (p, q) = (before.get_pixel(x, y), after.get_pixel(x, y));
                    changed += (0..3).map(|k| (p[k] as f64 - q[k] as f64).abs()).sum::<f64>() / 3.0;
                }
            }
        }
        let changed = changed / n_out.max(1) as f64;
        eprintln!("{photo}: {kept} of {n_in} mouth pixels kept, the rest of the face moved {changed:.1} levels");
        assert!(n_in > 50, "{photo}: the lip polygon is too small ({n_in} px)");
        assert_eq!(kept, n_in, "{photo}: inside the lip line the output equals the input");
        assert!(changed > 8.0, "{photo}: the rest of the face was not swapped ({changed:.1})");
    }
}
