//! aarch64's vector kernels (NEON with the Armv8.2 dot product), each
//! entered only after its feature check in [`crate::cpu`] and held to the
//! plain loop of the module that dispatches to it.
//!
//! - [`dot_tile`]: [`crate::gemm_int8`]'s tile on `sdot`;
//! - [`to_integers`]: [`crate::gemm_int8`]'s packing of f32 patches to the
//!   grid's integers.

mod dot;

pub(crate) use dot::{dot_tile, to_integers};
