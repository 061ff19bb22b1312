//! This process's memory: its resident size, read from `/proc/self/status`
//! (what the stats, the model loader and the benchmarks report; zero where it
//! cannot be read), and the one place that tunes glibc's allocator.
#![allow(unsafe_code)] // one of the daemon's named unsafe files: it calls glibc's allocator tunables (mallopt, malloc_trim, mallinfo).

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

/// The highest mmap threshold glibc accepts: half its largest non-main
/// heap, 32 MiB on 64-bit targets and 512 KiB on 32-bit ones (armv7),
/// where `mallopt` refuses anything above.
const GLIBC_MMAP_THRESHOLD_MAX: usize = if cfg!(target_pointer_width = "64") { 32 << 20 } else { 512 << 10 };

/// `bytes`, or glibc's ceiling for an mmap threshold where that is lower.
const fn within_glibc(bytes: usize) -> usize {
    if bytes < GLIBC_MMAP_THRESHOLD_MAX {
        bytes
    } else {
        GLIBC_MMAP_THRESHOLD_MAX
    }
}

/// Blocks under this size come from the heap after [`tune_allocator`]:
/// above the largest activation of the shared detectors at 640×640 (16
/// channels at 320×320, 6.5 MB), so that each frame's activations reuse
/// the last frame's freed blocks instead of new pages. On 32-bit targets
/// glibc caps it at 512 KiB, the ceiling its own sliding threshold climbs
/// to anyway.
pub const HEAP_BLOCKS_UNDER: usize = within_glibc(16 << 20);

/// The free top of the heap glibc keeps after [`tune_allocator`]: room for
/// a detector's activations in flight.
pub const TRIM_THRESHOLD: usize = 32 << 20;

/// Tunes glibc's malloc for a process that runs the same models frame after
/// frame; call before any thread starts.
///
/// - Arenas are capped at [`ARENAS`] unless `MALLOC_ARENA_MAX` is set.
/// - Blocks under [`HEAP_BLOCKS_UNDER`] come from the heap and up to
///   [`TRIM_THRESHOLD`] of its free top stays resident. glibc's own sliding
///   threshold let every run of YuNet on tract map fresh pages for some of
///   its activations: about 7,000 page faults a run with fusiond's kernels,
///   which allocate each output, and 57 ms a run against 44 ms with these
///   two values (`perf stat -e page-faults fusiond profile yunet_2023mar`,
///   BENCHMARKS.md, "Pointwise convolutions").
///
/// The one-shot commands then map big blocks on their own
/// ([`map_big_blocks_on_their_own`]), for the peak of a big model's load.
pub fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt changes a tunable of the allocator; no other thread
    // allocates yet.
    unsafe {
        use nix::libc::{mallopt, M_ARENA_MAX, M_MMAP_THRESHOLD, M_TRIM_THRESHOLD};
        if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
            mallopt(M_ARENA_MAX, ARENAS);
        }
        mallopt(M_MMAP_THRESHOLD, HEAP_BLOCKS_UNDER as i32);
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD as i32);
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
/// [`map_big_blocks_on_their_own`] (512 KiB on 32-bit targets, glibc's
/// ceiling there).
pub const MMAP_THRESHOLD: usize = within_glibc(1 << 20);

/// Called by the one-shot commands (`detect`, `swap`, `infer`) before they
/// load anything: every block from [`MMAP_THRESHOLD`] up is then mapped on
/// its own, so that a freed copy of weights (the protobuf's, tract's
/// transients) or a convolution's scratch goes back to the kernel at once
/// instead of staying in the heap. The 554 MB swapper's one-shot peak fell
/// from 1.41x its file to 1.30x (BENCHMARKS.md, "Loading a big model on
/// tract"). The daemon does not do this: running YuNet with this threshold
/// took 139-142 ms against 99-103 ms with glibc's own (page faults on every
/// activation); it keeps [`tune_allocator`]'s.
pub fn map_big_blocks_on_their_own() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt changes a tunable under the allocator's own lock.
    unsafe {
        nix::libc::mallopt(nix::libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD as i32);
        // glibc's own default, which [`tune_allocator`] raised.
        nix::libc::mallopt(nix::libc::M_TRIM_THRESHOLD, 128 << 10);
    }
}

/// Called by the one-shot commands once their models are loaded, before
/// they run them on image after image: [`tune_allocator`]'s thresholds
/// again, so each image's buffers (the detector's input and activations,
/// the decoded picture) are reused from the heap instead of mapped and
/// unmapped, and faulted in afresh, for every image.
pub fn keep_blocks_in_the_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt changes a tunable under the allocator's own lock.
    unsafe {
        nix::libc::mallopt(nix::libc::M_MMAP_THRESHOLD, HEAP_BLOCKS_UNDER as i32);
        nix::libc::mallopt(nix::libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD as i32);
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

    /// The bytes glibc has mapped for blocks on their own (0 elsewhere).
    fn mapped_bytes() -> usize {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        // SAFETY: mallinfo only reads the allocator's own counters.
        #[allow(deprecated)]
        return usize::try_from(unsafe { nix::libc::mallinfo() }.hblkhd).unwrap_or(0);
        #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
        0
    }

    #[test]
    fn blocks_come_from_the_heap_after_tuning_and_big_ones_are_mapped_for_a_one_shot_load() {
        // One test, since both set the process's thresholds. A mapped block
        // starts its page after glibc's two-word header.
        let mapped = |b: &[u8]| b.as_ptr() as usize % 4096 == 2 * std::mem::size_of::<usize>();
        let gnu = cfg!(all(target_os = "linux", target_env = "gnu"));
        super::tune_allocator();
        let before = mapped_bytes();
        // 8 MiB on 64-bit targets, 256 KiB on 32-bit ones.
        let size = super::HEAP_BLOCKS_UNDER / 2;
        let activation = vec![1u8; size];
        if gnu {
            // Both, so that neither another test's mapping nor a heap block
            // that happens to sit two words into a page can mislead.
            let grew = mapped_bytes() >= before + size;
            assert!(!(mapped(&activation) && grew), "a block of {size} bytes mapped after tuning");
        }
        drop(activation);
        super::map_big_blocks_on_their_own();
        // Bigger than the freed block, which glibc would hand out again
        // before it maps anything.
        let before = mapped_bytes();
        let block = vec![1u8; 10 << 20];
        if gnu {
            let grew = mapped_bytes() >= before + (10 << 20);
            assert!(mapped(&block) || grew, "a 10 MiB block not mapped on its own");
        }
    }
}
