//! The SeaweedMQ engine (`--storage seaweedmq`): partitions live in SeaweedFS's message queue,
//! reached through the forwarder thread ([`ForwarderHandle`]). SeaweedMQ assigns the offsets:
//! the partition predicts them, and when SeaweedMQ's answer differs (another publisher, a
//! lost forward) the partition's cache gives way to reads from here. Others may publish, so
//! the offsets are learned from SeaweedMQ and refreshed by readers at the end of a partition.
//! Topics live in SeaweedMQ's catalog (`kafka/<topic>`), their Kafka config overrides on the
//! filer (`forwarder::topic_configs`); group offsets on the filer
//! ([`offsets`]). SeaweedMQ has no prefix deletion: DeleteRecords moves a logical log start
//! kept on the filer (`forwarder::log_start`), which [`PartitionStore::range`] reports as
//! the earliest offset, to this and every other Kelp node. Retention (retention.ms,
//! retention.bytes) moves it too, a whole flushed log file at a time, like Kafka's segments.
//!
//! Calls `forwarder/` for every SeaweedMQ request and `cluster/` for topic metadata.

pub mod offsets;

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use futures::future::{ready, LocalBoxFuture};

use super::{Batch, BatchOffsets, Durability, Engine, PartitionStore, Range, TopicInfo};
use crate::cluster::{Cluster, TopicMeta};
use crate::config::Config;
use crate::error::KelpError;
use crate::forwarder::filer_log::FlushedFile;
use crate::forwarder::ForwarderHandle;
use crate::group::OffsetStore;
use crate::log::retention::{delete_before, SealedSegment};
use crate::metrics::storage::{record, StorageOp};
use crate::record::batch::{first_offset_at_or_after, BatchHeader};

/// How often a fetch at the end of a partition asks SeaweedMQ whether another publisher
/// (the Go gateway, a native client) added records.
const REFRESH_EVERY: Duration = Duration::from_secs(1);

/// Bytes per FetchMessage while scanning for a timestamp below the cache.
const SCAN_BYTES: usize = 1 << 20;
/// Most FetchMessage calls one timestamp lookup makes.
const SCAN_CALLS: usize = 1000;

/// The SeaweedMQ engine.
pub struct SeaweedMqEngine {
    fwd: Arc<ForwarderHandle>,
    cluster: Arc<Cluster>,
    retention_every: Duration,
    records_every: Duration,
}

/// Starts the forwarder (which publishes SeaweedMQ's Kafka topics in the metadata).
pub fn start(config: Arc<Config>, shards: usize) -> anyhow::Result<super::Storage> {
    let cluster = Arc::new(Cluster::new(&config, shards));
    let retention_every = Duration::from_millis(config.retention_check_ms.max(10));
    let records_every = Duration::from_millis(config.seaweedmq_topic_refresh_ms.max(100));
    let fwd = crate::forwarder::start(config, cluster.clone()).context("cannot use SeaweedMQ")?;
    Ok(super::Storage {
        engine: Arc::new(SeaweedMqEngine {
            fwd,
            cluster: cluster.clone(),
            retention_every,
            records_every,
        }),
        cluster,
    })
}

/// One partition in SeaweedMQ.
pub struct SeaweedMqStore {
    fwd: Arc<ForwarderHandle>,
    cluster: Arc<Cluster>,
    topic: String,
    partition: i32,
}

/// SeaweedMQ's flushed log files as retention's segments: each from its first offset to
/// the next file's (or past its own last), its newest record older than the next file's
/// first (named to the second: before the end of that second). The last file's newest
/// record is unknown: it goes by size only. A file whose end cannot be told (no offsets
/// written, no successor with one) ends the list: nothing from there on is cut.
fn segments(files: &[FlushedFile]) -> Vec<SealedSegment> {
    let mut out = Vec::new();
    let mut base = 0;
    for (i, f) in files.iter().enumerate() {
        let next = files.get(i + 1);
        let Some(next_offset) = next
            .and_then(|n| n.offset_min)
            .or(f.offset_max.map(|m| m + 1))
        else {
            break;
        };
        let base_here = f.offset_min.unwrap_or(base);
        if next_offset <= base_here {
            break;
        }
        out.push(SealedSegment {
            base: base_here,
            next_offset,
            size: f.size,
            max_timestamp: next.and_then(|n| n.first_ms).map_or(-1, |ms| ms + 999),
        });
        base = next_offset;
    }
    out
}

impl PartitionStore for SeaweedMqStore {
    fn append(
        &self,
        batches: &[Batch],
        _durability: Durability,
        deadline: Instant,
    ) -> LocalBoxFuture<'_, Vec<BatchOffsets>> {
        let bytes: Vec<Bytes> = batches.iter().map(|(_, b)| b.clone()).collect();
        Box::pin(async move {
            let started = Instant::now();
            let out = self
                .fwd
                .publish(
                    &self.topic,
                    self.partition,
                    bytes,
                    deadline.saturating_duration_since(Instant::now()),
                )
                .await;
            record(
                StorageOp::SeaweedPublish,
                started.elapsed(),
                out.iter().all(Result::is_ok),
            );
            out
        })
    }

    fn persist(&self, _through: i64) -> LocalBoxFuture<'_, Result<(), KelpError>> {
        // SeaweedMQ acknowledges what it stored: acks=all asks nothing more of it.
        Box::pin(ready(Ok(())))
    }

    fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        end: i64,
    ) -> LocalBoxFuture<'_, Result<Vec<Bytes>, KelpError>> {
        Box::pin(async move {
            let started = Instant::now();
            let out = self
                .fwd
                .fetch(&self.topic, self.partition, offset, max_bytes, end)
                .await;
            record(StorageOp::SeaweedFetch, started.elapsed(), out.is_ok());
            out.map(|o| o.batches)
        })
    }

    fn find_timestamp(
        &self,
        ts: i64,
        from: i64,
        end: i64,
    ) -> LocalBoxFuture<'_, Result<Option<(i64, i64)>, KelpError>> {
        Box::pin(async move {
            let mut offset = from;
            for _ in 0..SCAN_CALLS {
                if offset >= end {
                    break;
                }
                let out = self
                    .fwd
                    .fetch(&self.topic, self.partition, offset, SCAN_BYTES, end)
                    .await?;
                if out.batches.is_empty() {
                    break;
                }
                for b in &out.batches {
                    if let Some((off, found)) = first_offset_at_or_after(b, ts) {
                        return Ok(Some((found, off)));
                    }
                    if let Ok(h) = BatchHeader::parse(b) {
                        offset = offset.max(h.last_offset() + 1);
                    }
                }
            }
            Ok(None)
        })
    }

    fn truncate_prefix(&self, offset: i64) -> LocalBoxFuture<'_, Result<(), KelpError>> {
        Box::pin(async move {
            self.fwd
                .set_log_start(&self.topic, self.partition, offset)
                .await
                .map(drop)
        })
    }

    fn keeps_evicted(&self) -> bool {
        true
    }

    fn retention_cut(&self, now_ms: i64) -> LocalBoxFuture<'_, Option<i64>> {
        Box::pin(async move {
            let meta = self.cluster.topic(&self.topic)?;
            let r = super::retention_of(&meta);
            if r.bytes < 0 && r.ms < 0 {
                return None;
            }
            let files = match self.fwd.flushed_files(&self.topic, self.partition).await {
                Ok(f) => f,
                Err(e) => {
                    tracing::debug!(topic = %self.topic, partition = self.partition, error = %e, "retention: log files not listed");
                    return None;
                }
            };
            let total = files.iter().map(|f| f.size).sum();
            delete_before(&segments(&files), total, r, now_ms)
        })
    }

    fn learns_offsets(&self) -> bool {
        true
    }

    fn reads_remote(&self) -> bool {
        true
    }

    fn load_transactions(
        &self,
    ) -> LocalBoxFuture<'_, Result<Option<crate::txn::checkpoint::TxnCheckpoint>, KelpError>> {
        Box::pin(self.fwd.load_txns(&self.topic, self.partition))
    }

    fn save_transactions(
        &self,
        cp: crate::txn::checkpoint::TxnCheckpoint,
    ) -> LocalBoxFuture<'_, Result<(), KelpError>> {
        Box::pin(async move { self.fwd.save_txns(&self.topic, self.partition, cp).await })
    }

    fn refresh_every(&self) -> Option<Duration> {
        Some(REFRESH_EVERY)
    }

    fn range(&self, deadline: Instant) -> LocalBoxFuture<'_, Result<Range, KelpError>> {
        Box::pin(async move {
            let (earliest, next) = self
                .fwd
                .range(&self.topic, self.partition, deadline)
                .await?;
            Ok(Range { earliest, next })
        })
    }
}

impl Engine for SeaweedMqEngine {
    fn describe_log_dir(
        &self,
        partitions: Vec<(String, i32)>,
    ) -> LocalBoxFuture<'_, super::LogDirInfo> {
        // The records are SeaweedMQ's, in its filer's topic directory: sizes not known here.
        Box::pin(futures::future::ready(super::LogDirInfo::elsewhere(
            "seaweedmq:/topics/kafka",
            partitions.len(),
        )))
    }

    fn open(&self, topic: &str, partition: i32, _meta: &TopicMeta) -> Rc<dyn PartitionStore> {
        Rc::new(SeaweedMqStore {
            fwd: self.fwd.clone(),
            cluster: self.cluster.clone(),
            topic: topic.to_string(),
            partition,
        })
    }

    fn offset_store(
        &self,
        shard: usize,
        shards: usize,
    ) -> LocalBoxFuture<'_, anyhow::Result<Rc<dyn OffsetStore>>> {
        Box::pin(async move {
            let owns = move |g: &str| crate::cluster::routing::group_owner(g, shards) == shard;
            let store = offsets::FilerOffsetStore::open(self.fwd.clone(), owns)
                .await
                .map_err(|e| anyhow::anyhow!("group offsets: {e}"))?;
            Ok(Rc::new(store) as Rc<dyn OffsetStore>)
        })
    }

    fn background(&self) -> super::Background {
        super::Background {
            retention_every: Some(self.retention_every),
            // SeaweedMQ keeps the records: nothing of its log is Kelp's to clean.
            clean_every: None,
            flush_every: None,
            // Other Kelp nodes change them too: re-read as often as the topics.
            records_every: Some(self.records_every),
        }
    }

    fn pipelines_produce(&self) -> bool {
        // An append may wait for SeaweedMQ's offsets before it is queued.
        false
    }

    fn lookup_topic<'a>(
        &'a self,
        name: &'a str,
    ) -> LocalBoxFuture<'a, Result<Option<TopicInfo>, KelpError>> {
        Box::pin(self.fwd.lookup_topic(name))
    }

    fn create_topic<'a>(
        &'a self,
        name: &'a str,
        partitions: i32,
        configs: &'a BTreeMap<String, String>,
    ) -> LocalBoxFuture<'a, Result<Option<TopicInfo>, KelpError>> {
        Box::pin(async move {
            self.fwd
                .create_topic(name, partitions, configs.clone())
                .await
                .map(Some)
        })
    }

    fn allocate_producer_ids(
        &self,
        n: i64,
    ) -> LocalBoxFuture<'_, Result<Option<std::ops::Range<i64>>, KelpError>> {
        Box::pin(async move { self.fwd.allocate_producer_ids(n).await.map(Some) })
    }

    fn set_topic_configs<'a>(
        &'a self,
        name: &'a str,
        configs: &'a BTreeMap<String, String>,
    ) -> LocalBoxFuture<'a, Result<(), KelpError>> {
        Box::pin(self.fwd.set_topic_configs(name, configs.clone()))
    }

    fn set_group_configs<'a>(
        &'a self,
        group: &'a str,
        configs: &'a BTreeMap<String, String>,
    ) -> LocalBoxFuture<'a, Result<(), KelpError>> {
        Box::pin(async move {
            let body = if configs.is_empty() {
                None
            } else {
                Some(crate::cluster::group_config::encode(group, configs)?)
            };
            self.put_record(crate::cluster::group_config::SPACE, group, body)
                .await
        })
    }

    fn add_partitions<'a>(
        &'a self,
        name: &'a str,
        from: i32,
        to: i32,
    ) -> LocalBoxFuture<'a, Result<(), KelpError>> {
        let _ = (name, from, to);
        // ConfigureTopic with another count starts a new generation of ranges whose
        // partitions begin empty at offset 0 (../shared/specs, 5.1): the topic's records
        // would be lost to Kafka readers, so it is refused rather than done.
        Box::pin(futures::future::ready(Err(KelpError::InvalidRequest(
            "SeaweedMQ storage cannot add partitions to an existing topic: SeaweedMQ \
             re-partitions a topic into a new, empty generation"
                .into(),
        ))))
    }

    fn delete_topic<'a>(&'a self, name: &'a str) -> LocalBoxFuture<'a, Result<(), KelpError>> {
        Box::pin(self.fwd.delete_topic(name))
    }

    fn records<'a>(
        &'a self,
        space: &'a str,
    ) -> LocalBoxFuture<'a, Result<crate::storage::Records, KelpError>> {
        Box::pin(async move {
            let files = self.fwd.records(space).await?;
            Ok(files
                .into_iter()
                .filter_map(|(name, body)| Some((super::record_key(&name)?, body)))
                .collect())
        })
    }

    fn put_record<'a>(
        &'a self,
        space: &'a str,
        key: &'a str,
        value: Option<Vec<u8>>,
    ) -> LocalBoxFuture<'a, Result<(), KelpError>> {
        Box::pin(async move {
            self.fwd
                .put_record(space, &super::record_file(key), value)
                .await
        })
    }

    fn register_metrics(&self, registry: &crate::metrics::Registry) {
        registry.register_forwarder(self.fwd.stats.clone());
        registry.set_storage_engine("seaweedmq");
    }

    fn shutdown(&self, limit: Duration) {
        self.fwd.drain(limit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(first_ms: i64, offsets: Option<(i64, i64)>, size: u64) -> FlushedFile {
        FlushedFile {
            first_ms: Some(first_ms),
            offset_min: offsets.map(|o| o.0),
            offset_max: offsets.map(|o| o.1),
            size,
        }
    }

    #[test]
    fn flushed_files_are_segments_that_end_where_the_next_begins() {
        // The first file (from offset 0) carries no offsets: the next one tells its end.
        let files = [
            file(1_000, None, 100),
            file(5_000, Some((10, 19)), 100),
            file(9_000, Some((20, 29)), 100),
        ];
        let segs = segments(&files);
        assert_eq!(
            segs.iter()
                .map(|s| (s.base, s.next_offset, s.max_timestamp))
                .collect::<Vec<_>>(),
            [(0, 10, 5_999), (10, 20, 9_999), (20, 30, -1)]
        );
        let r = |bytes, ms| crate::log::retention::Retention { bytes, ms };
        // By time: a file goes once the next one began before the cut-off.
        assert_eq!(delete_before(&segs, 300, r(-1, 1_000), 7_000), Some(10));
        assert_eq!(delete_before(&segs, 300, r(-1, 1_000), 20_000), Some(20));
        // By size: oldest files go while what is left is at least retention.bytes.
        assert_eq!(delete_before(&segs, 300, r(100, -1), 0), Some(20));
        // A lone first file has no known end: nothing is cut.
        assert!(segments(&files[..1]).is_empty());
    }
}
