//! fusiond: live face fusion for edge boxes.
//!
//! Data flows one way: [`catalog`] finds and verifies model files, [`infer`]
//! runs them behind an engine-neutral trait, [`vision`] does the pixel work
//! and [`face`] strings detect → align → embed → swap → paste together.
//! [`cli`] is wiring only.

pub mod capture;
pub mod catalog;
pub mod cli;
pub mod config;
pub mod control;
pub mod daemon;
pub mod face;
pub mod infer;
pub mod manifest;
pub mod mqtt;
pub mod npy;
pub mod stats;
pub mod store;
pub mod vision;
