//! Per-partition offsets and size, and consumer group committed offsets and lag.
//!
//! The owning shard keeps one [`PartitionGauges`] per partition it owns, registered in its
//! [`super::ShardStats`], and stores into it where the partition changes (appends, retention,
//! DeleteRecords, compaction, eviction); a deleted topic or a partition that moved away
//! leaves the map. The coordinator shard of a group mirrors its committed offsets into
//! [`GroupOffsets`]. A scrape reads both and computes lag (high watermark − committed,
//! never negative); it never asks a shard anything. Calls nothing.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use super::render::header;
use super::ShardStats;

/// One partition's offsets and log size, written by its owning shard.
#[derive(Debug)]
pub struct PartitionGauges {
    /// The high watermark.
    pub high_watermark: AtomicI64,
    /// The log start offset.
    pub log_start_offset: AtomicI64,
    /// Bytes of the partition's log (-1: the engine cannot tell cheaply, the series is left
    /// out).
    pub log_size_bytes: AtomicI64,
}

impl Default for PartitionGauges {
    fn default() -> Self {
        PartitionGauges {
            high_watermark: AtomicI64::new(0),
            log_start_offset: AtomicI64::new(0),
            log_size_bytes: AtomicI64::new(-1),
        }
    }
}

impl PartitionGauges {
    /// Stores the partition's figures; `size` None: unknown.
    pub fn set(&self, high_watermark: i64, log_start_offset: i64, size: Option<u64>) {
        self.high_watermark.store(high_watermark, Ordering::Relaxed);
        self.log_start_offset
            .store(log_start_offset, Ordering::Relaxed);
        let size = size.map_or(-1, |s| i64::try_from(s).unwrap_or(i64::MAX));
        self.log_size_bytes.store(size, Ordering::Relaxed);
    }

    /// Whether the stored offsets are these.
    pub fn shows(&self, high_watermark: i64, log_start_offset: i64) -> bool {
        self.high_watermark.load(Ordering::Relaxed) == high_watermark
            && self.log_start_offset.load(Ordering::Relaxed) == log_start_offset
    }
}

/// (topic, partition).
type Tp = (String, i32);

/// The partitions one shard owns, by (topic, partition).
#[derive(Debug, Default)]
pub struct OwnedPartitions(Mutex<HashMap<Tp, Arc<PartitionGauges>>>);

impl OwnedPartitions {
    /// Publishes a partition's gauges (replacing any of the same partition).
    pub fn add(&self, topic: &str, partition: i32, gauges: Arc<PartitionGauges>) {
        if let Ok(mut m) = self.0.lock() {
            m.insert((topic.to_string(), partition), gauges);
        }
    }

    /// Removes the partitions `gone` says go.
    pub fn remove_where(&self, gone: impl Fn(&str, i32) -> bool) {
        if let Ok(mut m) = self.0.lock() {
            m.retain(|(t, p), _| !gone(t, *p));
        }
    }

    fn snapshot(&self) -> Vec<(Tp, Arc<PartitionGauges>)> {
        self.0
            .lock()
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default()
    }
}

/// The committed offsets of the groups one shard coordinates: group → (topic, partition) →
/// offset. Share groups' state is not here.
#[derive(Debug, Default)]
pub struct GroupOffsets(Mutex<BTreeMap<String, BTreeMap<Tp, i64>>>);

impl GroupOffsets {
    /// Records committed offsets of `group`.
    pub fn set(&self, group: &str, offsets: impl IntoIterator<Item = (Tp, i64)>) {
        if let Ok(mut m) = self.0.lock() {
            let g = m.entry(group.to_string()).or_default();
            g.extend(offsets);
            if g.is_empty() {
                m.remove(group);
            }
        }
    }

    /// Replaces every offset of `group` (read again from the store).
    pub fn replace(&self, group: &str, offsets: impl IntoIterator<Item = (Tp, i64)>) {
        self.remove_group(group);
        self.set(group, offsets);
    }

    /// Forgets some partitions of `group`.
    pub fn remove(&self, group: &str, partitions: &[Tp]) {
        if let Ok(mut m) = self.0.lock() {
            if let Some(g) = m.get_mut(group) {
                for tp in partitions {
                    g.remove(tp);
                }
                if g.is_empty() {
                    m.remove(group);
                }
            }
        }
    }

    /// Forgets `group`.
    pub fn remove_group(&self, group: &str) {
        if let Ok(mut m) = self.0.lock() {
            m.remove(group);
        }
    }

    fn snapshot(&self) -> Vec<(String, Tp, i64)> {
        self.0
            .lock()
            .map(|m| {
                m.iter()
                    .flat_map(|(g, offs)| offs.iter().map(|(tp, o)| (g.clone(), tp.clone(), *o)))
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// A group's lag on a partition: how far its committed offset is behind the high
/// watermark, never negative (a commit may run ahead of a truncated log).
pub fn lag(high_watermark: i64, committed: i64) -> i64 {
    high_watermark.saturating_sub(committed).max(0)
}

/// Label value escaping (Prometheus text format: backslash, quote, newline).
pub fn escape(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

/// Which gauge of a partition a family shows.
type Field = fn(&PartitionGauges) -> &AtomicI64;

/// Renders the partition gauges and the groups' committed offsets and lag.
pub fn render(out: &mut String, shards: &[Arc<ShardStats>]) {
    let mut parts: Vec<(Tp, Arc<PartitionGauges>)> = shards
        .iter()
        .flat_map(|s| s.partitions.snapshot())
        .collect();
    parts.sort_by(|a, b| a.0.cmp(&b.0));
    let load = |a: &AtomicI64| a.load(Ordering::Relaxed);
    let families: [(&str, &str, Field); 3] = [
        (
            "kelp_partition_high_watermark",
            "Offset after the last record stored and readable, per partition this node owns.",
            |g| &g.high_watermark,
        ),
        (
            "kelp_partition_log_start_offset",
            "First offset still readable, per partition this node owns.",
            |g| &g.log_start_offset,
        ),
        (
            "kelp_partition_log_size_bytes",
            "Bytes of the partition's log: segment files on disk (local), batches held (memory); not reported for seaweedmq.",
            |g| &g.log_size_bytes,
        ),
    ];
    for (name, help, field) in families {
        header(out, name, "gauge", help);
        for ((t, p), g) in &parts {
            let v = load(field(g));
            if v < 0 && name == "kelp_partition_log_size_bytes" {
                continue;
            }
            let _ = writeln!(
                out,
                "{name}{{topic=\"{}\",partition=\"{p}\"}} {v}",
                escape(t)
            );
        }
    }
    let hw: HashMap<&Tp, i64> = parts
        .iter()
        .map(|(k, g)| (k, load(&g.high_watermark)))
        .collect();
    let mut committed: Vec<(String, Tp, i64)> = shards
        .iter()
        .flat_map(|s| s.group_offsets.snapshot())
        .collect();
    committed.sort();
    header(
        out,
        "kelp_consumer_group_committed_offset",
        "gauge",
        "Offset a consumer group committed (the next it will read), per partition.",
    );
    for (g, (t, p), o) in &committed {
        let _ = writeln!(
            out,
            "kelp_consumer_group_committed_offset{{group=\"{}\",topic=\"{}\",partition=\"{p}\"}} {o}",
            escape(g),
            escape(t)
        );
    }
    header(
        out,
        "kelp_consumer_group_lag",
        "gauge",
        "High watermark minus the group's committed offset (never negative), for partitions this node owns.",
    );
    for (g, tp, o) in &committed {
        if let Some(&h) = hw.get(tp) {
            let _ = writeln!(
                out,
                "kelp_consumer_group_lag{{group=\"{}\",topic=\"{}\",partition=\"{}\"}} {}",
                escape(g),
                escape(&tp.0),
                tp.1,
                lag(h, *o)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lag_is_the_distance_to_the_high_watermark_never_negative() {
        assert_eq!(lag(100, 40), 60);
        assert_eq!(lag(100, 100), 0);
        assert_eq!(lag(10, 40), 0);
    }

    #[test]
    fn partitions_and_groups_render_and_leave() {
        let s = Arc::new(ShardStats::new(0, 0));
        let g = Arc::new(PartitionGauges::default());
        g.set(100, 10, Some(4096));
        s.partitions.add("t", 0, g.clone());
        let unknown = Arc::new(PartitionGauges::default());
        unknown.set(7, 0, None);
        s.partitions.add("u\"x", 1, unknown);
        s.group_offsets.set("g", [(("t".to_string(), 0), 40)]);
        s.group_offsets.set("g", [(("gone".to_string(), 0), 3)]);
        let shards = vec![s.clone()];
        let mut out = String::new();
        render(&mut out, &shards);
        assert!(out.contains("kelp_partition_high_watermark{topic=\"t\",partition=\"0\"} 100\n"));
        assert!(out.contains("kelp_partition_log_start_offset{topic=\"t\",partition=\"0\"} 10\n"));
        assert!(out.contains("kelp_partition_log_size_bytes{topic=\"t\",partition=\"0\"} 4096\n"));
        assert!(out.contains("kelp_partition_high_watermark{topic=\"u\\\"x\",partition=\"1\"} 7\n"));
        assert!(!out.contains("kelp_partition_log_size_bytes{topic=\"u"));
        assert!(out.contains(
            "kelp_consumer_group_committed_offset{group=\"g\",topic=\"t\",partition=\"0\"} 40\n"
        ));
        assert!(
            out.contains("kelp_consumer_group_lag{group=\"g\",topic=\"t\",partition=\"0\"} 60\n")
        );
        // No high watermark known here: the committed offset shows, the lag does not.
        assert!(out.contains("kelp_consumer_group_committed_offset{group=\"g\",topic=\"gone\""));
        assert!(!out.contains("kelp_consumer_group_lag{group=\"g\",topic=\"gone\""));
        s.partitions.remove_where(|t, _| t == "t");
        s.group_offsets.remove("g", &[("gone".to_string(), 0)]);
        s.group_offsets.remove_group("g");
        let mut out = String::new();
        render(&mut out, &shards);
        assert!(!out.contains("topic=\"t\""));
        assert!(!out.contains("group=\"g\""));
    }
}
