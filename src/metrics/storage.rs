//! Storage engine latencies and failures: `kelp_storage_latency_seconds{engine,op}` (a
//! Prometheus histogram) and `kelp_storage_errors_total{engine,op}`.
//!
//! Each shard owns one [`StorageStats`] of relaxed atomic buckets and makes it its thread's
//! current one ([`set_current`]); engine code running on that thread records with
//! [`record`] where it does the work, without a handle passed down and without a lock. A
//! scrape sums the shards. Calls nothing.

use std::cell::RefCell;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::render::header;

/// An engine operation with a histogram of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StorageOp {
    /// local: a write round of batches into the segment files.
    LocalAppend = 0,
    /// local: an fdatasync of the active segment.
    LocalSync = 1,
    /// local: a read below the cache.
    LocalRead = 2,
    /// seaweedmq: a publish, from the shard handing batches over to SeaweedMQ's ack.
    SeaweedPublish = 3,
    /// seaweedmq: a read below the cache (FetchMessage).
    SeaweedFetch = 4,
}

impl StorageOp {
    /// Every op, in slot order.
    pub const ALL: [StorageOp; 5] = [
        StorageOp::LocalAppend,
        StorageOp::LocalSync,
        StorageOp::LocalRead,
        StorageOp::SeaweedPublish,
        StorageOp::SeaweedFetch,
    ];

    /// (engine, op) label values.
    pub fn labels(self) -> (&'static str, &'static str) {
        match self {
            StorageOp::LocalAppend => ("local", "append"),
            StorageOp::LocalSync => ("local", "sync"),
            StorageOp::LocalRead => ("local", "read"),
            StorageOp::SeaweedPublish => ("seaweedmq", "publish"),
            StorageOp::SeaweedFetch => ("seaweedmq", "fetch"),
        }
    }
}

/// Upper bounds of the histogram buckets, in seconds (100 µs to 10 s; +Inf follows).
pub const BUCKETS: [f64; 16] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];

/// One op's counts on one shard.
#[derive(Debug, Default)]
struct OpStats {
    /// Per bucket, not cumulative (the scrape adds them up); the last is +Inf.
    buckets: [AtomicU64; BUCKETS.len() + 1],
    sum_ns: AtomicU64,
    count: AtomicU64,
    errors: AtomicU64,
}

/// One shard's storage latencies and failures.
#[derive(Debug, Default)]
pub struct StorageStats {
    ops: [OpStats; 5],
}

impl StorageStats {
    /// Records one operation that took `elapsed` and failed unless `ok`.
    pub fn record(&self, op: StorageOp, elapsed: Duration, ok: bool) {
        let o = &self.ops[op as usize];
        let secs = elapsed.as_secs_f64();
        let slot = BUCKETS
            .iter()
            .position(|&b| secs <= b)
            .unwrap_or(BUCKETS.len());
        o.buckets[slot].fetch_add(1, Ordering::Relaxed);
        let ns = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        o.sum_ns.fetch_add(ns, Ordering::Relaxed);
        o.count.fetch_add(1, Ordering::Relaxed);
        if !ok {
            o.errors.fetch_add(1, Ordering::Relaxed);
        }
    }
}

thread_local! {
    static CURRENT: RefCell<Option<Arc<StorageStats>>> = const { RefCell::new(None) };
}

/// Makes `stats` the ones [`record`] adds to on this thread (a shard's, on its core).
pub fn set_current(stats: Arc<StorageStats>) {
    CURRENT.with(|c| *c.borrow_mut() = Some(stats));
}

/// Records one operation in this thread's stats (none on a thread without: tools, tests).
pub fn record(op: StorageOp, elapsed: Duration, ok: bool) {
    CURRENT.with(|c| {
        if let Some(s) = c.borrow().as_ref() {
            s.record(op, elapsed, ok);
        }
    });
}

/// Renders the histograms and error counters of `engine`'s ops, summed over `shards`.
pub fn render(out: &mut String, engine: &str, shards: &[&StorageStats]) {
    let ops: Vec<StorageOp> = StorageOp::ALL
        .into_iter()
        .filter(|op| op.labels().0 == engine)
        .collect();
    if ops.is_empty() {
        return;
    }
    let sum = |op: StorageOp, f: &dyn Fn(&OpStats) -> u64| -> u64 {
        shards.iter().map(|s| f(&s.ops[op as usize])).sum()
    };
    header(
        out,
        "kelp_storage_latency_seconds",
        "histogram",
        "Storage engine operation latency: local append (write round), sync (fdatasync), read (below the cache); seaweedmq publish (round trip to the ack), fetch.",
    );
    for &op in &ops {
        let (e, o) = op.labels();
        let mut cumulative = 0;
        for (i, bound) in BUCKETS
            .iter()
            .map(|b| b.to_string())
            .chain(["+Inf".to_string()])
            .enumerate()
        {
            cumulative += sum(op, &|s| s.buckets[i].load(Ordering::Relaxed));
            let _ = writeln!(
                out,
                "kelp_storage_latency_seconds_bucket{{engine=\"{e}\",op=\"{o}\",le=\"{bound}\"}} {cumulative}"
            );
        }
        let secs = sum(op, &|s| s.sum_ns.load(Ordering::Relaxed)) as f64 / 1e9;
        let _ = writeln!(
            out,
            "kelp_storage_latency_seconds_sum{{engine=\"{e}\",op=\"{o}\"}} {secs}"
        );
        let _ = writeln!(
            out,
            "kelp_storage_latency_seconds_count{{engine=\"{e}\",op=\"{o}\"}} {}",
            sum(op, &|s| s.count.load(Ordering::Relaxed))
        );
    }
    header(
        out,
        "kelp_storage_errors_total",
        "counter",
        "Storage engine operations that failed (writes, syncs, publishes, reads).",
    );
    for &op in &ops {
        let (e, o) = op.labels();
        let _ = writeln!(
            out,
            "kelp_storage_errors_total{{engine=\"{e}\",op=\"{o}\"}} {}",
            sum(op, &|s| s.errors.load(Ordering::Relaxed))
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_are_cumulative_and_summed_over_shards() {
        let (a, b) = (StorageStats::default(), StorageStats::default());
        a.record(StorageOp::LocalSync, Duration::from_micros(50), true);
        a.record(StorageOp::LocalSync, Duration::from_millis(3), true);
        b.record(StorageOp::LocalSync, Duration::from_secs(20), false);
        b.record(StorageOp::SeaweedPublish, Duration::from_millis(1), true);
        let mut out = String::new();
        render(&mut out, "local", &[&a, &b]);
        let has = |s: &str| assert!(out.contains(s), "missing {s} in\n{out}");
        has("kelp_storage_latency_seconds_bucket{engine=\"local\",op=\"sync\",le=\"0.0001\"} 1\n");
        has("kelp_storage_latency_seconds_bucket{engine=\"local\",op=\"sync\",le=\"0.0025\"} 1\n");
        has("kelp_storage_latency_seconds_bucket{engine=\"local\",op=\"sync\",le=\"0.005\"} 2\n");
        has("kelp_storage_latency_seconds_bucket{engine=\"local\",op=\"sync\",le=\"10\"} 2\n");
        has("kelp_storage_latency_seconds_bucket{engine=\"local\",op=\"sync\",le=\"+Inf\"} 3\n");
        has("kelp_storage_latency_seconds_count{engine=\"local\",op=\"sync\"} 3\n");
        has("kelp_storage_latency_seconds_sum{engine=\"local\",op=\"sync\"} 20.00305\n");
        has("kelp_storage_errors_total{engine=\"local\",op=\"sync\"} 1\n");
        has("kelp_storage_latency_seconds_count{engine=\"local\",op=\"append\"} 0\n");
        assert!(!out.contains("engine=\"seaweedmq\""));
        let mut none = String::new();
        render(&mut none, "memory", &[&a]);
        assert!(none.is_empty());
    }

    #[test]
    fn record_goes_to_this_threads_stats() {
        record(StorageOp::LocalRead, Duration::from_millis(1), true);
        let s = Arc::new(StorageStats::default());
        set_current(s.clone());
        record(StorageOp::LocalRead, Duration::from_millis(1), true);
        assert_eq!(
            s.ops[StorageOp::LocalRead as usize]
                .count
                .load(Ordering::Relaxed),
            1
        );
    }
}
