//! Integration tests, all in one binary: real models and photos from
//! ../shared, and contract models built by models/make_contract_models.py.

mod audit;
mod browser;
#[cfg(feature = "c2pa")]
mod c2pa;
mod capture;
mod cli;
mod conv_graph;
mod cost;
mod daemon;
mod daemon_config;
mod daemon_pixels;
mod discovery;
mod docs;
mod emap;
#[cfg(feature = "ort")]
mod engines;
mod face_core;
mod flood;
mod fp16;
mod harness;
mod hostile;
mod http;
mod int8;
mod link;
mod mark;
mod mtls;
mod stability;
mod store;
mod stream;
mod systemd;
mod tract_ops;
mod util;
