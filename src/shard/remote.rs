//! The shard's partition and topic operations when SeaweedMQ stores the data
//! (`--storage seaweedmq`): appends forwarded to SeaweedMQ and answered with its offsets,
//! cold reads and timestamp lookups below the cache through FetchMessage, offsets learned
//! from GetPartitionRangeInfo, and topics created, found and deleted in SeaweedMQ.
//!
//! Runs on the owning shard. Calls `partition/` (its [`crate::partition::remote`] half) for
//! state and the [`ForwarderHandle`] for SeaweedMQ; never holds a partition borrow across an
//! await.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::ops::{ColdBudget, OffsetsItem, OffsetsOut, ProduceOut, ReadItem, ReadResult};
use super::Shard;
use crate::cluster::TopicMeta;
use crate::error::KelpError;
use crate::forwarder::ForwarderHandle;
use crate::partition::remote::Reserved;
use crate::partition::{timestamp, ReadOut};
use crate::record::batch::{first_offset_at_or_after, BatchHeader};
use crate::record::ValidatedBatches;

/// How often a fetch at the end of a partition asks SeaweedMQ whether another publisher
/// (the Go gateway, a native client) added records.
const REMOTE_REFRESH: Duration = Duration::from_secs(1);

/// How long a Fetch or ListOffsets waits for SeaweedMQ's offsets of a partition that needs
/// them (after a timed-out produce, a restart) while its leader cannot answer, before
/// KAFKA_STORAGE_ERROR. Neither request has a timeout of its own to use (Fetch's max wait
/// belongs to the API layer); 500 ms is the clients' default fetch max wait. Java and
/// librdkafka consumers take KAFKA_STORAGE_ERROR as "leader unavailable": they refresh the
/// metadata and back off, where an unexpected code (REQUEST_TIMED_OUT) would fail the Java
/// consumer's poll.
const READ_SYNC_WAIT: Duration = Duration::from_millis(500);
/// How long the periodic check for others' records (see [`REMOTE_REFRESH`]) may hold up a
/// fetch at the end of a partition; a failed check is ignored.
const REFRESH_WAIT: Duration = Duration::from_millis(250);

/// Bytes per FetchMessage while scanning for a timestamp below the cache.
const SCAN_BYTES: usize = 1 << 20;
/// Most FetchMessage calls one timestamp lookup makes.
const SCAN_CALLS: usize = 1000;

impl Shard {
    fn fwd(&self) -> Result<&Arc<ForwarderHandle>, KelpError> {
        self.forwarder
            .as_ref()
            .ok_or_else(|| KelpError::Storage("no SeaweedMQ forwarder".into()))
    }

    /// Learns a partition's offsets from SeaweedMQ when they are unknown (or, with
    /// `stale_after`, older than that). While the leader cannot answer, the forwarder retries
    /// until `deadline`, then this fails with [`KelpError::StorageUnavailable`].
    async fn sync_remote(
        &self,
        topic: &str,
        partition: i32,
        stale_after: Option<Duration>,
        deadline: Instant,
    ) -> Result<(), KelpError> {
        if !self.with_partition(topic, partition, |p| p.needs_sync(stale_after))? {
            return Ok(());
        }
        let (earliest, hwm) = self.fwd()?.range(topic, partition, deadline).await?;
        let freed = self.with_partition(topic, partition, |p| p.sync_remote(earliest, hwm))?;
        self.set_cached(self.cached_bytes.get().saturating_sub(freed));
        Ok(())
    }

    /// Forwards batches to SeaweedMQ and answers with the offsets it assigned.
    pub async fn append_remote(
        &self,
        topic: &str,
        partition: i32,
        batches: ValidatedBatches,
        timeout: Duration,
    ) -> ProduceOut {
        let deadline = Instant::now() + timeout;
        // The produce's own timeout bounds every wait, the offset lookup included: while the
        // leader cannot answer (stopped, moving) the lookup is retried until the deadline, and
        // the produce then answers REQUEST_TIMED_OUT, which producers retry after their
        // backoff. Nothing was sent, so nothing is acknowledged.
        crate::deadline::until(self.sync_remote(topic, partition, None, deadline), deadline)
            .await
            .unwrap_or(Err(KelpError::RequestTimedOut))
            .map_err(KelpError::timed_out_if_transient)?;
        let (ticket, bytes) = match self.with_partition(topic, partition, |p| {
            p.reserve_remote(batches).map(|r| (r, p.log_start_offset()))
        })?? {
            (Reserved::Duplicate(original), log_start) => return Ok((original, log_start)),
            (Reserved::Forward { ticket, batches }, _) => (ticket, batches),
        };
        let outcome = self
            .fwd()?
            .publish(
                topic,
                partition,
                bytes,
                deadline.saturating_duration_since(Instant::now()),
            )
            .await;
        let first = outcome.first().cloned();
        let failure = outcome.iter().find_map(|r| r.clone().err());
        let (done, log_start) = self.with_partition(topic, partition, |p| {
            (p.resolve_remote(ticket, outcome), p.log_start_offset())
        })?;
        self.set_cached(self.cached_bytes.get().saturating_sub(done.freed));
        self.cached(topic, partition, done.added);
        if let Some(e) = failure {
            tracing::warn!(topic, partition, error = %e, "produce to SeaweedMQ failed: not acknowledged");
            return Err(e);
        }
        match first {
            Some(Ok((base, _))) => Ok((base, log_start)),
            _ => Err(KelpError::InvalidRecord("no record batch")),
        }
    }

    /// The offset sync before a read (Fetch, ListOffsets): bounded by READ_SYNC_WAIT, since
    /// reads carry no deadline of their own here.
    async fn sync_for_read(&self, topic: &str, partition: i32) -> Result<(), KelpError> {
        self.sync_remote(topic, partition, None, Instant::now() + READ_SYNC_WAIT)
            .await
    }

    /// Reads from the cache, or from SeaweedMQ for offsets older than the cache.
    pub async fn read_remote(&self, it: ReadItem, cold_budget: Rc<ColdBudget>) -> ReadResult {
        self.sync_for_read(&it.topic, it.partition).await?;
        let at_end =
            self.with_partition(&it.topic, it.partition, |p| it.offset >= p.high_watermark())?;
        if at_end {
            // Records others published show up within REMOTE_REFRESH; a failed check only
            // means the answer comes from what Kelp knows.
            if let Err(e) = self
                .sync_remote(
                    &it.topic,
                    it.partition,
                    Some(REMOTE_REFRESH),
                    Instant::now() + REFRESH_WAIT,
                )
                .await
            {
                tracing::debug!(topic = %it.topic, partition = it.partition, error = %e, "offset refresh failed");
            }
        }
        let cold = self.with_partition(&it.topic, it.partition, |p| {
            p.remote_cold(it.offset)
                .then(|| (p.high_watermark(), p.log_start_offset()))
        })?;
        let Some((hw, log_start)) = cold else {
            return self
                .with_partition(&it.topic, it.partition, |p| p.read(it.offset, it.max_bytes))?;
        };
        let share = cold_budget.take(it.max_bytes);
        if share == 0 {
            return Ok(ReadOut::empty(hw, log_start));
        }
        let out = self
            .fwd()?
            .fetch(&it.topic, it.partition, it.offset, share, hw)
            .await;
        let used = out
            .as_ref()
            .map_or(0, |o| o.batches.iter().map(|b| b.len()).sum());
        cold_budget.give_back(share.saturating_sub(used));
        let out = out?;
        Ok(ReadOut {
            bytes: out.batches.iter().map(|b| b.len()).sum(),
            batches: out.batches,
            high_watermark: hw,
            log_start_offset: log_start,
        })
    }

    /// ListOffsets: special timestamps from the offsets; real ones from the cache when it
    /// covers the log, else by scanning SeaweedMQ from the log start.
    pub async fn list_offset_remote(&self, it: OffsetsItem) -> OffsetsOut {
        self.sync_for_read(&it.topic, it.partition).await?;
        let (found, cache_start, log_start, hw) =
            self.with_partition(&it.topic, it.partition, |p| {
                (
                    p.offset_for_timestamp(it.timestamp),
                    p.cache_start(),
                    p.log_start_offset(),
                    p.high_watermark(),
                )
            })?;
        let covered = cache_start.is_some_and(|c| c <= log_start) || log_start >= hw;
        if it.timestamp < 0 && it.timestamp != timestamp::MAX_TIMESTAMP || covered {
            return Ok(found);
        }
        if it.timestamp == timestamp::MAX_TIMESTAMP {
            // SeaweedMQ keeps no per-partition max timestamp: the cache's answer stands.
            return Ok(found);
        }
        let end = cache_start.unwrap_or(hw).min(hw);
        let mut offset = log_start;
        for _ in 0..SCAN_CALLS {
            if offset >= end {
                break;
            }
            let out = self
                .fwd()?
                .fetch(&it.topic, it.partition, offset, SCAN_BYTES, end)
                .await?;
            if out.batches.is_empty() {
                break;
            }
            for b in &out.batches {
                if let Some((off, ts)) = first_offset_at_or_after(b, it.timestamp) {
                    return Ok((ts, off));
                }
                if let Ok(h) = BatchHeader::parse(b) {
                    offset = offset.max(h.last_offset() + 1);
                }
            }
        }
        Ok(found)
    }

    /// The topic, from the metadata or from SeaweedMQ; created when `allow` and the broker
    /// allow it and it is missing. `Ok(None)`: unknown and not created.
    pub async fn topic_or_create(
        &self,
        name: &str,
        allow: bool,
    ) -> Result<Option<Arc<TopicMeta>>, KelpError> {
        let Some(fwd) = &self.forwarder else {
            return self.cluster.get_or_auto_create(name, allow);
        };
        if let Some(t) = self.cluster.topic(name) {
            return Ok(Some(t));
        }
        if crate::cluster::validate_topic_name(name).is_err() {
            return self.cluster.get_or_auto_create(name, allow);
        }
        if let Some(info) = fwd.lookup_topic(name).await? {
            return Ok(Some(self.cluster.adopt_topic(
                &info.name,
                info.id,
                info.partitions,
            )));
        }
        if !(allow && self.cluster.auto_create) {
            return Ok(None);
        }
        match self
            .create_topic(name, -1, -1, BTreeMap::new(), false)
            .await
        {
            Ok(t) => Ok(Some(t)),
            Err(KelpError::TopicAlreadyExists) => Ok(self.cluster.topic(name)),
            Err(e) => Err(e),
        }
    }

    /// CreateTopics: every check first, then the topic in SeaweedMQ (when it stores the data),
    /// then the metadata.
    pub async fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        replication_factor: i16,
        configs: BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<Arc<TopicMeta>, KelpError> {
        let Some(fwd) = &self.forwarder else {
            return self.cluster.create_topic(
                name,
                partitions,
                replication_factor,
                configs,
                validate_only,
            );
        };
        let checked = self.cluster.create_topic(
            name,
            partitions,
            replication_factor,
            configs.clone(),
            true,
        )?;
        if validate_only {
            return Ok(checked);
        }
        let info = fwd.create_topic(name, checked.partitions).await?;
        self.cluster
            .create_topic_with_id(name, info.id, info.partitions, configs)
    }

    /// DeleteTopics: removes the topic from SeaweedMQ (when it stores the data), then from
    /// the metadata.
    pub async fn delete_topic(&self, name: &str) -> Result<Arc<TopicMeta>, KelpError> {
        if let Some(fwd) = &self.forwarder {
            self.cluster
                .topic(name)
                .ok_or(KelpError::UnknownTopicOrPartition)?;
            fwd.delete_topic(name).await?;
        }
        self.cluster.delete_topic(name)
    }
}
