//! Prometheus text exposition (format 0.0.4) of the registry: the per-core families here,
//! the others from their own modules.

use std::fmt::Write;
use std::sync::atomic::Ordering;

use super::{ForwarderStats, Kind, Registry};

/// Writes a family's HELP and TYPE lines.
pub fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// A per-shard family: name, type, help, and how to read one shard's value.
type Family = (
    &'static str,
    &'static str,
    &'static str,
    fn(&super::ShardStats) -> String,
);

/// Renders every metric of every shard.
pub fn render(reg: &Registry) -> String {
    let shards = reg.shards();
    let mut out = String::with_capacity(4096);
    let labels = |s: &super::ShardStats| format!("shard=\"{}\",core=\"{}\"", s.shard, s.core);

    // One sample per shard of a plain gauge or counter.
    let families: [Family; 6] = [
        (
            "kelp_connections",
            "gauge",
            "Open client connections per core.",
            |s| s.connections.load(Ordering::Relaxed).to_string(),
        ),
        (
            "kelp_cache_bytes",
            "gauge",
            "Bytes held by the per-core batch cache.",
            |s| s.cache_bytes.load(Ordering::Relaxed).to_string(),
        ),
        (
            "kelp_produce_bytes_total",
            "counter",
            "Produce request bytes received (whole frames).",
            |s| s.produce_bytes.load(Ordering::Relaxed).to_string(),
        ),
        (
            "kelp_fetch_bytes_total",
            "counter",
            "Fetch response bytes, counted as each response goes to the socket.",
            |s| s.fetch_bytes.load(Ordering::Relaxed).to_string(),
        ),
        (
            "kelp_forwarded_items_total",
            "counter",
            "Partition items of requests this core handed to the owning core (cross-core hops).",
            |s| s.forwarded_items.load(Ordering::Relaxed).to_string(),
        ),
        (
            "kelp_remote_reads_expired_total",
            "counter",
            "Reads below the cache from a remote store (SeaweedMQ) that a Fetch stopped waiting for at --remote-fetch-max-wait-ms.",
            |s| s.remote_reads_expired.load(Ordering::Relaxed).to_string(),
        ),
    ];
    for (name, kind, help, value) in families {
        header(&mut out, name, kind, help);
        for s in &shards {
            let _ = writeln!(out, "{name}{{{}}} {}", labels(s), value(s));
        }
    }
    header(
        &mut out,
        "kelp_requests_total",
        "counter",
        "Requests served, by kind.",
    );
    for s in &shards {
        for k in Kind::ALL {
            let _ = writeln!(
                out,
                "kelp_requests_total{{{},kind=\"{}\"}} {}",
                labels(s),
                k.label(),
                s.requests[k as usize].load(Ordering::Relaxed)
            );
        }
    }
    header(
        &mut out,
        "kelp_request_latency_seconds",
        "summary",
        "Request latency from frame read to response ready to send, by kind.",
    );
    for s in &shards {
        let hists = s.latency_snapshot();
        for (k, h) in Kind::ALL.iter().zip(hists.iter()) {
            let l = format!("{},kind=\"{}\"", labels(s), k.label());
            for q in [0.5, 0.99, 0.999] {
                let v = if h.is_empty() {
                    0.0
                } else {
                    h.value_at_quantile(q) as f64 / 1e6
                };
                let _ = writeln!(
                    out,
                    "kelp_request_latency_seconds{{{l},quantile=\"{q}\"}} {v}"
                );
            }
            let sum = h.mean() * h.len() as f64 / 1e6;
            let _ = writeln!(out, "kelp_request_latency_seconds_sum{{{l}}} {sum}");
            let _ = writeln!(out, "kelp_request_latency_seconds_count{{{l}}} {}", h.len());
        }
    }
    if let Some(gauge) = reg.request_memory() {
        let (held, limit) = gauge();
        for (name, help, v) in [
            (
                "kelp_request_memory_bytes",
                "Bytes of request buffers held from the broker-wide budget (being read or handled).",
                held,
            ),
            (
                "kelp_request_memory_limit_bytes",
                "The broker-wide request memory budget (--queued-max-request-bytes).",
                limit,
            ),
        ] {
            header(&mut out, name, "gauge", help);
            let _ = writeln!(out, "{name} {v}");
        }
    }
    if let Some(f) = reg.forwarder() {
        render_forwarder(&mut out, &f);
    }
    let now = super::health::mono_ms();
    super::health::render(&mut out, reg, now);
    super::process::render(&mut out, reg.start_time_s(), reg.data_dir().as_deref());
    let per_api: Vec<_> = shards.iter().map(|s| &s.requests_by_api).collect();
    super::errors::render_requests(&mut out, &per_api);
    super::errors::render_errors(&mut out);
    if let Some(engine) = reg.storage_engine() {
        let stats: Vec<_> = shards.iter().map(|s| &*s.storage).collect();
        super::storage::render(&mut out, engine, &stats);
    }
    super::partitions::render(&mut out, &shards);
    out
}

/// The SeaweedMQ forwarder's queue depth and counters.
fn render_forwarder(out: &mut String, f: &ForwarderStats) {
    let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    let gauges = [
        (
            "kelp_forwarder_queue_depth",
            "Commands from shards waiting for the SeaweedMQ forwarder.",
            f.queued.load(Ordering::Relaxed),
        ),
        (
            "kelp_forwarder_inflight_bytes",
            "Bytes of produced batches forwarded to SeaweedMQ and not yet acknowledged.",
            f.inflight_bytes.load(Ordering::Relaxed),
        ),
        (
            "kelp_forwarder_live_nodes",
            "Kelp nodes holding a lease over this SeaweedMQ, this one included.",
            f.live_nodes.load(Ordering::Relaxed),
        ),
    ];
    for (name, help, v) in gauges {
        header(out, name, "gauge", help);
        let _ = writeln!(out, "{name} {v}");
    }
    let counters = [
        (
            "kelp_forwarder_published_records_total",
            "Records SeaweedMQ acknowledged.",
            load(&f.published_records),
        ),
        (
            "kelp_forwarder_stream_errors_total",
            "Publish streams that broke or could not open.",
            load(&f.publish_errors),
        ),
        (
            "kelp_forwarder_streams_opened_total",
            "Publish streams opened to SeaweedMQ partition leaders.",
            load(&f.streams_opened),
        ),
        (
            "kelp_forwarder_fetch_requests_total",
            "FetchMessage reads below the cache.",
            load(&f.fetch_requests),
        ),
    ];
    for (name, help, v) in counters {
        header(out, name, "counter", help);
        let _ = writeln!(out, "{name} {v}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::ShardStats;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn renders_every_family() {
        let reg = Registry::default();
        let s = Arc::new(ShardStats::new(0, 3));
        s.record(Kind::Produce, Duration::from_micros(250));
        s.produce_bytes.fetch_add(100, Ordering::Relaxed);
        reg.register(s);
        let text = render(&reg);
        assert!(text.contains("kelp_produce_bytes_total{shard=\"0\",core=\"3\"} 100"));
        assert!(text.contains("kelp_requests_total{shard=\"0\",core=\"3\",kind=\"produce\"} 1"));
        assert!(text.contains(
            "kelp_request_latency_seconds_count{shard=\"0\",core=\"3\",kind=\"produce\"} 1"
        ));
        assert!(!text.contains("kelp_forwarder"));
        let f = Arc::new(ForwarderStats::default());
        f.queued.store(3, Ordering::Relaxed);
        reg.register_forwarder(f);
        assert!(render(&reg).contains("kelp_forwarder_queue_depth 3"));
    }
}
