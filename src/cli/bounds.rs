//! Bounds for numeric flags (the benchmarks' above all): zero runs, a zero
//! frame rate or a size past memory would divide by zero, loop for ever or
//! abort, so each is refused up front with the range it must be in.

use anyhow::{ensure, Result};

/// A count (runs, frames, threads) in `lo..=hi`.
pub fn count(flag: &str, v: usize, lo: usize, hi: usize) -> Result<()> {
    ensure!((lo..=hi).contains(&v), "{flag} {v} must be {lo} to {hi}");
    Ok(())
}

/// A finite real in `lo..=hi`; with `above`, `lo` itself is refused.
pub fn real(flag: &str, v: f64, lo: f64, hi: f64, above: bool) -> Result<()> {
    let low_ok = if above { v > lo } else { v >= lo };
    let range = if above { format!("above {lo}, up to {hi}") } else { format!("{lo} to {hi}") };
    ensure!(v.is_finite() && low_ok && v <= hi, "{flag} {v} must be {range}");
    Ok(())
}

/// The refiner's input size: 0 (off) or 32 to 1024.
pub fn refine_size(v: u32) -> Result<()> {
    ensure!(v == 0 || (32..=1024).contains(&v), "--refine-size {v} must be 0 or 32 to 1024");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_huge_and_non_finite_values_are_refused() {
        assert!(count("--runs", 0, 1, 100).is_err() && count("--runs", 101, 1, 100).is_err());
        assert!(count("--runs", 1, 1, 100).is_ok());
        assert!(real("--fps", 0.0, 0.0, 240.0, true).is_err() && real("--fps", f64::NAN, 0.0, 240.0, true).is_err());
        assert!(real("--beta", 0.0, 0.0, 10.0, false).is_ok() && real("--beta", 1e9, 0.0, 10.0, false).is_err());
        assert!(refine_size(16).is_err() && refine_size(0).is_ok() && refine_size(224).is_ok());
    }
}
