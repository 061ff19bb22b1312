use super::{load_image, save_image, ModelArgs};
use crate::vision::{draw_circle, draw_rect};
use anyhow::Result;
use serde::Serialize;
use std::path::{Path, PathBuf};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Images to analyse.
    #[arg(required = true)]
    images: Vec<PathBuf>,
    #[command(flatten)]
    models: ModelArgs,
    /// Add each face's L2-normalised identity embedding.
    #[arg(long)]
    embed: bool,
    /// Print one JSON object per image instead of a summary line.
    #[arg(long)]
    json: bool,
    /// Write a copy with boxes and landmarks drawn (PNG). With several
    /// images, the image's stem is appended to the name.
    #[arg(long, value_name = "OUT.png")]
    debug: Option<PathBuf>,
}

#[derive(Serialize)]
struct FaceJson<'a> {
    #[serde(rename = "box")]
    bbox: [f32; 4],
    score: f32,
    landmarks: [[f32; 2]; 5],
    #[serde(skip_serializing_if = "Option::is_none")]
    embedding: Option<&'a [f32]>,
}

#[derive(Serialize)]
struct ImageJson<'a> {
    image: String,
    width: u32,
    height: u32,
    faces: Vec<FaceJson<'a>>,
}

const LANDMARK_COLOURS: [[u8; 3]; 5] = [[255, 0, 0], [0, 0, 255], [0, 255, 0], [255, 0, 255], [0, 255, 255]];

fn debug_path(out: &Path, image: &Path, many: bool) -> PathBuf {
    if !many {
        return out.to_path_buf();
    }
    let stem = out.file_stem().unwrap_or_default().to_string_lossy();
    let img = image.file_stem().unwrap_or_default().to_string_lossy();
    out.with_file_name(format!("{stem}_{img}.png"))
}

pub fn run(args: Args) -> Result<()> {
    // One run per face or image: a warm-up run would be one more.
    let loader = args.models.loader()?.without_warm_up();
    let mut detector = args.models.detector(&loader)?;
    let mut recognizer = if args.embed { Some(args.models.recognizer(&loader)?) } else { None };
    // Loaded: from here the buffers of one image serve the next.
    crate::procmem::keep_blocks_in_the_heap();
    for path in &args.images {
        let img = load_image(path)?;
        let faces = detector.detect(&img)?;
        let embeddings = match recognizer.as_mut() {
            Some(r) => faces.iter().map(|f| r.embed(&img, &f.landmarks)).collect::<Result<Vec<_>, _>>()?,
            None => Vec::new(),
        };
        if args.json {
            let faces = faces
                .iter()
                .enumerate()
                .map(|(i, f)| FaceJson {
                    bbox: f.bbox,
                    score: f.score,
                    landmarks: f.landmarks,
                    embedding: embeddings.get(i).map(|e| e.normed.as_slice()),
                })
                .collect();
            let out = ImageJson { image: path.display().to_string(), width: img.width(), height: img.height(), faces };
            println!("{}", serde_json::to_string(&out)?);
        } else {
            let boxes: Vec<String> = faces
                .iter()
                .map(|f| {
                    format!("[{:.0},{:.0},{:.0},{:.0}] {:.2}", f.bbox[0], f.bbox[1], f.bbox[2], f.bbox[3], f.score)
                })
                .collect();
            println!("{}: {} face(s) {}", path.display(), faces.len(), boxes.join(" "));
        }
        if let Some(out) = &args.debug {
            let mut canvas = img.clone();
            let thick = (img.width().max(img.height()) / 400).max(1) as i32;
            for f in &faces {
                draw_rect(&mut canvas, f.bbox, [0, 255, 0], thick);
                for (p, colour) in f.landmarks.iter().zip(LANDMARK_COLOURS) {
                    draw_circle(&mut canvas, p[0], p[1], thick + 2, colour);
                }
            }
            save_image(&canvas, &debug_path(out, path, args.images.len() > 1))?;
        }
    }
    Ok(())
}
