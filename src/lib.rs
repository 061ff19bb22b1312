//! fusiond: live face fusion for edge boxes.
//!
//! The model path runs one way: [`manifest`] describes the models,
//! [`catalog`] finds and verifies their files, [`store`] loads them on the
//! engine [`infer`] gives each (staging, tiers, cache, emaps) and [`face`]
//! builds the stages over the loaded models: detect → track → select →
//! align → embed → swap → paste, driven frame by frame by
//! [`face::LivePipeline`]. [`vision`] does the pixel work.
//!
//! The live path: [`capture`] fills a latest-frame mailbox, the [`daemon`]'s
//! worker runs the live pipeline and publishes through [`mqtt`] (typed
//! payloads, one broker session), and its control loop applies commands
//! through the [`control`] state machine. [`config`] is read once into the
//! settings each loop needs. [`cli`] is wiring only.
//!
//! The CPU kernels and the tract ops over them are the workspace's other
//! crates: `fusiond-kernels` (crates/kernels: slices in, slices out, std
//! only, one CPU dispatch point) and `fusiond-tract-ops` (crates/tract-ops:
//! the tract ops and ONNX rewrites over them, and tract's version pin),
//! reached here as [`infer::tract_ops`].
//!
//! No `unsafe` code in this crate but in four named files, each of which
//! says why at its top: `procmem.rs` (glibc's allocator), `catalog.rs`
//! (model files' memory maps), `cli/run.rs` (signal handlers),
//! `vcam/ring.rs` (V4L2 output buffers).
#![deny(unsafe_code)]

pub mod audit;
pub mod backoff;
pub mod capture;
pub mod catalog;
pub mod cli;
pub mod config;
pub mod control;
pub mod credential;
pub mod daemon;
pub mod face;
pub mod http;
pub mod infer;
pub mod manifest;
pub mod mark;
pub mod mqtt;
pub mod npy;
pub mod procmem;
pub mod stats;
pub mod store;
pub mod vcam;
pub mod vision;
