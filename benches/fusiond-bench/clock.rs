//! The core clock, measured: a chain of dependent integer adds, each of
//! which waits for the one before and so takes exactly one cycle on every
//! x86-64 and ARMv8 core. Cycles per second are then adds per second. The
//! roofline (benches/report.py) takes its peak from this, not from the
//! nominal clock /proc/cpuinfo reports.

use std::time::Instant;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Timed chains (each 100 million adds); the result is their median.
    #[arg(long, default_value_t = 9, value_parser = clap::value_parser!(u32).range(1..=1000))]
    runs: u32,
}

/// Runs `blocks` blocks of 100 dependent adds on one register. The addend
/// is a register, not an immediate: newer cores (Intel's Golden Cove and
/// after) fold chains of adds of an immediate at register renaming and run
/// them faster than one a cycle.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn chain(blocks: u64) -> u64 {
    let mut x: u64 = 1;
    let y: u64 = std::hint::black_box(3);
    for _ in 0..blocks {
        // SAFETY: register arithmetic only; no memory, stack or flags the
        // compiler relies on.
        unsafe {
            #[cfg(target_arch = "x86_64")]
            std::arch::asm!(".rept 100", "add {x}, {y}", ".endr", x = inout(reg) x, y = in(reg) y, options(nomem, nostack));
            #[cfg(target_arch = "aarch64")]
            std::arch::asm!(".rept 100", "add {x}, {x}, {y}", ".endr", x = inout(reg) x, y = in(reg) y, options(nomem, nostack));
        }
    }
    x
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn chain(_: u64) -> u64 {
    0
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if !cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
        anyhow::bail!("the clock is measured on x86_64 and aarch64 only; set BENCH_PEAK_MHZ instead");
    }
    const BLOCKS: u64 = 1_000_000;
    std::hint::black_box(chain(BLOCKS / 10));
    let mut mhz: Vec<f64> = (0..args.runs)
        .map(|_| {
            let start = Instant::now();
            std::hint::black_box(chain(std::hint::black_box(BLOCKS)));
            (BLOCKS * 100) as f64 / start.elapsed().as_secs_f64() / 1e6
        })
        .collect();
    mhz.sort_by(f64::total_cmp);
    println!(
        "clock: {:.0} MHz (median of {} chains of 100M dependent adds on one core; min {:.0}, max {:.0})",
        mhz[mhz.len() / 2],
        mhz.len(),
        mhz[0],
        mhz[mhz.len() - 1]
    );
    Ok(())
}
