//! glibc malloc settings for a broker whose request buffers become cached batches.
//!
//! Every Produce request is read into a fresh buffer whose record batches then live in the
//! batch cache until evicted, so the shard threads allocate and free ~100 KiB-1 MiB blocks
//! all the time. By default glibc serves blocks past its (adaptive) mmap threshold with a
//! fresh mmap and hands freed memory at the top of a heap back to the kernel once more than
//! the trim threshold is free, so much of that memory comes back as new pages the kernel
//! must zero: `clear_page_erms` was the top symbol of the local-storage flame graph (12.9 %).
//! A fixed, high mmap threshold keeps such blocks in malloc's heaps for the next requests.
//! Measured with ProducerPerformance (700k x 1 KiB, acks=1, one partition, local storage, so
//! the owning core's 512 MiB cache evicts): the broker's minor page faults 169k -> 132k per
//! run (with a 1 GiB trim threshold then).
//!
//! What is freed must still go back, or RSS is not bounded by the memory model: with a 1 GiB
//! trim threshold and one arena per thread (shard threads, their I/O pools), every arena kept
//! its high-water mark, and a soak (perf/soak.sh, 2 x 128 MiB cache) grew to 606 MiB RSS in
//! 4 minutes with 256 MiB cached — ten 64 MiB arena heaps fully resident. With a 16 MiB trim
//! threshold and at most 4 arenas the same soak peaked at 334 MiB and stayed flat.

/// Blocks below this come from malloc's heaps (reused), larger ones are mmapped.
const MMAP_THRESHOLD: libc::c_int = 32 << 20;
/// Free memory at the top of a heap kept before any of it is given back to the kernel.
const TRIM_THRESHOLD: libc::c_int = 16 << 20;
/// Most malloc arenas: each keeps up to the trim threshold free, and blocks freed by another
/// thread go back to their own arena, so fewer arenas means less memory held idle.
const ARENA_MAX: libc::c_int = 4;

/// Applies the settings; call before the shard threads start. Errors are only logged: the
/// defaults still work, with more page faults and more memory held idle.
pub fn tune() {
    #[cfg(target_env = "gnu")]
    {
        // SAFETY: mallopt only changes allocator parameters; called before other threads run.
        let ok = unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
                && libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
                && libc::mallopt(libc::M_ARENA_MAX, ARENA_MAX) == 1
        };
        if !ok {
            tracing::warn!("mallopt refused the malloc thresholds; using glibc's defaults");
        }
    }
}
