//! This process's resident memory, read from `/proc/self/status`: what the
//! stats, the model loader and the benchmarks report. Zero where it cannot
//! be read (not Linux, or no procfs).

/// Resident and peak resident memory of this process, in bytes.
pub fn rss() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |key: &str| {
        status
            .lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn resident_memory_is_read_and_the_peak_is_at_least_the_current() {
        let (now, peak) = super::rss();
        assert!(now > 0, "VmRSS not read");
        assert!(peak >= now, "VmHWM {peak} below VmRSS {now}");
    }
}
