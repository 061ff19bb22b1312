//! fusiond's CPU kernels: the loops behind fusiond's tract ops
//! (`crates/tract-ops`), on plain slices, with no tract and nothing but std.
//!
//! - [`cpu`] is the one dispatch point: every vector path asks
//!   [`cpu::has`], and `FUSIOND_CPU` caps the tier for tests and
//!   comparisons.
//! - Each kernel's vector code sits beside its plain loop, which is the
//!   scalar reference its tests compare with (to the bit where the kernel
//!   says so, otherwise within the tolerance it states).
//! - Per architecture: `x86_64` paths (AVX2, AVX-512, VNNI) sit beside
//!   their plain loops; `aarch64/` holds the integer product's tile on the
//!   Armv8.2 dot product (`sdot`), its NEON packing and the NEON f32/f16
//!   conversions ([`half`]). Elsewhere on ARM
//!   the plain loops run, compiled for the target's baseline (NEON on
//!   aarch64), wherever the ARM cost model chose them over tract's own op
//!   (the repository's README.md).
//! - The block sizes and thresholds that came from measurements are listed,
//!   with the CPU and date of each, in this crate's README.md.

#[cfg(target_arch = "aarch64")]
mod aarch64;
pub mod cpu;
pub mod depthwise;
pub mod depthwise_int8;
pub mod gather;
pub mod gemm;
pub mod gemm_int8;
pub mod gemm_int8_tile;
pub mod gemm_tile;
pub mod half;
pub mod int8;
pub mod pointwise;
pub mod pointwise_int8;
pub mod prelu;
pub mod quant;

/// Test values in [-1, 1], a different run of them for each seed (for the
/// tests here and in crates/tract-ops).
#[doc(hidden)]
pub fn test_values(n: usize, seed: u32) -> Vec<f32> {
    (0..n as u32)
        .map(|i| ((i.wrapping_mul(2654435761).wrapping_add(seed) >> 16) % 2001) as f32 / 1000.0 - 1.0)
        .collect()
}
