//! aarch64's vector kernels (NEON with the Armv8.2 dot product), each
//! entered only after its feature check in [`crate::cpu`] and held to the
//! plain loop of the module that dispatches to it.
//!
//! - [`dot_tile`]: [`crate::gemm_int8`]'s tile on `sdot`;
//! - [`to_integers`]: [`crate::gemm_int8`]'s packing of f32 patches to the
//!   grid's integers;
//! - [`f32_to_f16`], [`f16_to_f32`]: [`crate::half`]'s conversions.

mod dot;
mod half;

pub(crate) use dot::{dot_tile, to_integers};
pub(crate) use half::{f16_to_f32, f32_to_f16};
