//! fusiond's benchmarks, a binary of their own over the library (run with
//! `cargo bench --bench fusiond-bench -- <command> ...`, which builds the
//! edge profile): per-stage latency on a photo, the end-to-end cost of a
//! live frame, and per-model latency, load time and memory side by side.
//! They print figures; nothing here asserts a speed.

mod broker;
mod clock;
mod figures;
mod gpu_frames;
mod gpu_models;
mod jpeg;
mod live;
mod mark;
mod models;
mod outputs;
mod stability;
mod stages;
mod stream;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(name = "fusiond-bench", about = "fusiond's benchmarks")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Per-stage latency (median of N runs) on a real photo.
    Stages(stages::Args),
    /// End-to-end cost of a 640x480 frame (0/1/2 faces, detect-only and swap): per stage, then live.
    Live(live::Args),
    /// Per-model latency, load time and memory: tract vs ONNX Runtime, FP32 vs INT8, 1 vs 2 threads.
    Models(models::Args),
    /// How steady the faces of a stream are, on synthetic pans with known geometry.
    Stability(stability::Args),
    /// Real clips and pans through the daemon's live pipeline against detection on every frame, person by person.
    Stream(stream::Args),
    /// The core clock, measured with a chain of dependent adds (the roofline's peak).
    Clock(clock::Args),
    /// Each model on tract, ONNX Runtime's CPU and its GPU providers: load, second start, runs, agreement.
    GpuModels(gpu_models::Args),
    /// A 640x480 frame with the swap on the given providers, one face and four: per stage and fps.
    GpuFrames(gpu_frames::Args),
    /// The invisible mark's and the C2PA manifest's cost per frame beside the JPEG encode, at three sizes.
    Mark(mark::Args),
    /// JPEG encoding: fusiond's libjpeg-turbo, the pure-Rust jpeg-encoder and OpenCV, in turns.
    Jpeg(jpeg::Args),
}

fn main() -> ExitCode {
    // The daemon's allocator settings, so that the figures are the daemon's.
    fusiond::procmem::tune_allocator();
    // `cargo bench` appends `--bench` to a harness-less bench's arguments.
    let args = std::env::args().filter(|a| a != "--bench");
    let cli = Cli::parse_from(args);
    let result = match cli.command {
        Command::Stages(a) => stages::run(a),
        Command::Live(a) => live::run(a),
        Command::Models(a) => models::run(a),
        Command::Stability(a) => stability::run(a),
        Command::Stream(a) => stream::run(a),
        Command::Clock(a) => clock::run(a),
        Command::Jpeg(a) => jpeg::run(a),
        Command::Mark(a) => mark::run(a),
        Command::GpuModels(a) => gpu_models::run(a),
        Command::GpuFrames(a) => gpu_frames::run(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
