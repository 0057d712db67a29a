//! glibc malloc settings for a broker whose request buffers become cached batches.
//!
//! Every Produce request is read into a fresh buffer whose record batches then live in the
//! batch cache until evicted, so the shard threads allocate and free ~100 KiB-1 MiB blocks
//! all the time. By default glibc serves blocks past its (adaptive) mmap threshold with a
//! fresh mmap and hands freed memory at the top of a heap back to the kernel once more than
//! the trim threshold is free, so much of that memory comes back as new pages the kernel
//! must zero: `clear_page_erms` was the top symbol of the local-storage flame graph (12.9 %).
//! Fixed, high thresholds keep freed memory for the next requests instead. Memory is
//! bounded by the cache budget (`--cache-bytes-per-core`) either way; RSS just stays at its
//! high-water mark. Measured with ProducerPerformance (700k x 1 KiB, acks=1, one partition,
//! local storage, so the owning core's 512 MiB cache evicts): the broker's minor page faults
//! 169k -> 132k per run. Where the cache never fills (the first ~512 MiB per core) every
//! page is new and nothing changes (180k faults either way with 8 partitions). On runs this
//! short the broker's CPU per GB moved within the machine's noise (1.79, 1.83 -> 1.87, 1.67
//! CPU-s/GB); the saving grows with uptime, once every core's cache is full and evicting.

/// Blocks below this come from malloc's heaps (reused), larger ones are mmapped.
const MMAP_THRESHOLD: libc::c_int = 32 << 20;
/// Free memory at the top of a heap kept before any of it is given back to the kernel.
const TRIM_THRESHOLD: libc::c_int = 1 << 30;

/// Applies the settings; call before the shard threads start. Errors are only logged: the
/// defaults still work, just with more page faults.
pub fn tune() {
    #[cfg(target_env = "gnu")]
    {
        // SAFETY: mallopt only changes allocator parameters; called before other threads run.
        let ok = unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
                && libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
        };
        if !ok {
            tracing::warn!("mallopt refused the malloc thresholds; using glibc's defaults");
        }
    }
}
