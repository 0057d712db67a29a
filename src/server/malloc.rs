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
//! threshold and at most 4 arenas the same soak peaked at 334 MiB in 4 minutes — but within
//! the hour a second arena (the one the I/O threads' cold-read buffers come from) held
//! 301 MB of heaps with 5 MB in use: glibc gives a non-main arena's memory back only from the
//! top of its newest heap, never from free chunks between live ones (malloc_stats of the
//! soaking broker). So a thread gives that memory back explicitly: every [`TRIM_EVERY`],
//! when malloc holds more than [`TRIM_WHEN_FREE`] free, `malloc_trim(0)`, which returns
//! the free pages of every arena to the kernel.
//!
//! How often matters where shards have arenas of their own (more than one arena): when a
//! busy producer's connection moves to another core, the old core's arena fills with free
//! memory at the rate of its ingest (~250 MB/s measured) until the trimmer's next turn;
//! every second bounds that excess by one second of ingest.

/// Blocks below this come from malloc's heaps (reused), larger ones are mmapped.
const MMAP_THRESHOLD: libc::c_int = 32 << 20;
/// Free memory at the top of a heap kept before any of it is given back to the kernel.
const TRIM_THRESHOLD: libc::c_int = 16 << 20;
/// Most malloc arenas: each keeps up to the trim threshold free, and blocks freed by another
/// thread go back to their own arena, so fewer arenas means less memory held idle.
const ARENA_MAX: libc::c_int = 4;
/// Up to this many shard cores share one arena (see [`arenas_for`]).
const ONE_ARENA_UP_TO: usize = 4;

/// Arenas for `shards` shard cores. A frame is freed into the arena of the thread that
/// allocated it, and only that arena reuses it: when a busy producer's connection moves to
/// another core, the old core's arena fills with the evicted frames' free memory while the
/// new core's grows (measured on 2 cores: 525 MB free in one arena, as much grown in the
/// other, peak RSS up to 2.0 GB for a 1 GiB cache, and twice the broker CPU per GB while
/// it lasts: 6.8 vs 3.4 s/GB, the new arena's fresh pages faulting in). With one arena the
/// freed frames serve the new core at once (0 of 4 moved runs grew). One arena serialises
/// the shards' large allocations on its lock, which a few cores do not feel (2 cores: no
/// CPU difference measured); with more cores than [`ONE_ARENA_UP_TO`], [`ARENA_MAX`] as
/// before, and the trimmer bounds the excess.
fn arenas_for(shards: usize) -> libc::c_int {
    if shards <= ONE_ARENA_UP_TO {
        1
    } else {
        ARENA_MAX
    }
}

/// Applies the settings for `shards` shard cores; call before any other thread exists: glibc
/// fixes its arena limit the first time a second thread allocates, and ignores a later
/// `M_ARENA_MAX`.
/// Errors are only logged: the defaults still work, with more page faults and more memory
/// held idle.
pub fn tune(shards: usize) {
    #[cfg(target_env = "gnu")]
    {
        // SAFETY: mallopt only changes allocator parameters; called before other threads run.
        let ok = unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
                && libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
                && libc::mallopt(libc::M_ARENA_MAX, arenas_for(shards)) == 1
        };
        if !ok {
            tracing::warn!("mallopt refused the malloc thresholds; using glibc's defaults");
        }
    }
}

/// How often free memory is checked.
pub const TRIM_EVERY: std::time::Duration = std::time::Duration::from_secs(1);
/// Free bytes kept in malloc's arenas before they are given back.
pub const TRIM_WHEN_FREE: usize = 64 << 20;

/// Starts the thread that gives malloc's free memory back to the kernel. It lives as long as
/// the process and takes no lock of Kelp's.
pub fn start_trimmer() {
    #[cfg(target_env = "gnu")]
    {
        let spawned = std::thread::Builder::new()
            .name("kelp-malloc-trim".into())
            .spawn(|| loop {
                std::thread::sleep(TRIM_EVERY);
                // SAFETY: mallinfo2 and malloc_trim only read and adjust malloc's own state,
                // under its locks; both are safe to call from any thread at any time.
                let free = unsafe { libc::mallinfo2() }.fordblks;
                if free > TRIM_WHEN_FREE {
                    // SAFETY: as above.
                    unsafe { libc::malloc_trim(0) };
                    tracing::debug!(free, "gave malloc's free memory back");
                }
            });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "no malloc trim thread: freed memory stays resident");
        }
    }
}
