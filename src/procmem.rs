//! This process's memory: its resident size, read from `/proc/self/status`
//! (what the stats, the model loader and the benchmarks report; zero where it
//! cannot be read), and the one place that tunes glibc's allocator.

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

/// The malloc arenas this process's threads share, unless `MALLOC_ARENA_MAX`
/// says otherwise: the control and worker threads each get one.
pub const ARENAS: i32 = 2;

/// Caps glibc's malloc arenas at [`ARENAS`]; call before any thread starts.
pub fn cap_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: mallopt changes a tunable of the allocator; no other
        // thread allocates yet.
        unsafe {
            nix::libc::mallopt(nix::libc::M_ARENA_MAX, ARENAS);
        }
    }
}

/// Free bytes the malloc arenas hold (glibc only; elsewhere 0, so never
/// trimmed).
pub fn free_heap() -> usize {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // mallinfo, not mallinfo2 (glibc 2.33): the packages run on
        // glibc 2.31. Its int counters wrap past 2 GiB, far above what
        // this daemon frees between two checks.
        // SAFETY: mallinfo only reads the allocator's own counters.
        #[allow(deprecated)]
        let info = unsafe { nix::libc::mallinfo() };
        usize::try_from(info.fordblks).unwrap_or(usize::MAX)
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    0
}

/// Returns the free memory of every malloc arena to the kernel (glibc only;
/// elsewhere nothing to do).
pub fn release_free_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks and trims the allocator's own free lists.
    unsafe {
        nix::libc::malloc_trim(0);
    }
}

/// Blocks this big or bigger are mapped on their own after
/// [`map_big_blocks_on_their_own`].
pub const MMAP_THRESHOLD: usize = 1 << 20;

/// Called by the one-shot commands (`detect`, `swap`, `infer`) before they
/// load anything: every block from [`MMAP_THRESHOLD`] up is then mapped on
/// its own, so that a freed copy of weights (the protobuf's, tract's
/// transients) or a convolution's scratch goes back to the kernel at once
/// instead of staying in the heap. The 554 MB swapper's one-shot peak fell
/// from 1.41x its file to 1.30x (BENCHMARKS.md, "Loading a big model on
/// tract"). The daemon does not do this: running YuNet with this threshold
/// took 139-142 ms against 99-103 ms with glibc's own, which raises the
/// threshold to the largest block freed so far (page faults on every
/// activation otherwise).
pub fn map_big_blocks_on_their_own() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt changes a tunable under the allocator's own lock.
    unsafe {
        nix::libc::mallopt(nix::libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD as i32);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn resident_memory_is_read_and_the_peak_is_at_least_the_current() {
        let (now, peak) = super::rss();
        assert!(now > 0, "VmRSS not read");
        assert!(peak >= now, "VmHWM {peak} below VmRSS {now}");
    }

    #[test]
    fn free_heap_counts_what_was_freed_into_the_arena() {
        // 1024 blocks of 64 KiB, under glibc's mmap threshold, land in the
        // heap; one allocated after them keeps the top of the heap, so
        // freed they stay free in the arena until a trim.
        let blocks: Vec<Vec<u8>> = (0..1024).map(|i| vec![(i % 250 + 1) as u8; 64 << 10]).collect();
        let kept = blocks[1023].clone();
        drop(blocks);
        let free = super::free_heap();
        super::release_free_heap();
        if cfg!(all(target_os = "linux", target_env = "gnu")) {
            assert!(free >= 32 << 20, "free heap {free} bytes after freeing 64 MiB");
        }
        assert_eq!(kept[0], (1023 % 250 + 1) as u8);
    }

    #[test]
    fn big_blocks_are_mapped_on_their_own() {
        // Freeing a mapped 8 MiB block raises glibc's own threshold to 8 MiB,
        // under which a 2 MiB block would come from the heap.
        drop(vec![1u8; 8 << 20]);
        super::map_big_blocks_on_their_own();
        // A mapped block starts its page after glibc's two-word header.
        let block = vec![1u8; 2 * super::MMAP_THRESHOLD];
        if cfg!(all(target_os = "linux", target_env = "gnu")) {
            assert_eq!(block.as_ptr() as usize % 4096, 2 * std::mem::size_of::<usize>(), "not mapped on its own");
        }
    }
}
