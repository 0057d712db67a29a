//! The shard's partition operations that may wait for the store behind the cache: appends
//! (reserve → store → settle in order → persist for acks=all), reads below the cache,
//! timestamp lookups, DeleteRecords, start-up recovery, retention and the periodic flush.
//!
//! Runs on the owning shard only. Calls `partition/` for state and the partitions'
//! [`crate::storage::PartitionStore`]s for everything stored; never holds a borrow of the
//! partition map across an await, and never asks which engine runs.

use crate::partition::txn::Transactions;
use crate::record::control::control_type;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use super::ops::{
    Appended, ColdBudget, OffsetsItem, OffsetsOut, ProduceItem, ProduceOut, ReadItem, ReadResult,
};
use super::Shard;
use crate::error::KelpError;
use crate::partition::producer_state::ProducerStates;
use crate::partition::settle::Reserved;
use crate::partition::{Partition, ReadOut};
use crate::storage::Durability;

/// How long a Fetch or ListOffsets waits for the offsets of a partition whose store keeps
/// them (SeaweedMQ, after a timed-out produce or a restart) while the store cannot answer,
/// before KAFKA_STORAGE_ERROR. Neither request has a timeout of its own to use (Fetch's max
/// wait belongs to the API layer); 500 ms is the clients' default fetch max wait. Java and
/// librdkafka consumers take KAFKA_STORAGE_ERROR as "leader unavailable": they refresh the
/// metadata and back off, where an unexpected code (REQUEST_TIMED_OUT) would fail the Java
/// consumer's poll.
const READ_SYNC_WAIT: Duration = Duration::from_millis(500);
/// How long the periodic check for others' records may hold up a fetch at the end of a
/// partition; a failed check is ignored.
const REFRESH_WAIT: Duration = Duration::from_millis(250);

impl Shard {
    /// Learns a partition's offsets from its store when the store keeps them and they are
    /// unknown (or, with `stale_after`, older than that). While the store cannot answer it
    /// retries until `deadline`, then this fails with [`KelpError::StorageUnavailable`].
    pub(super) async fn sync_offsets(
        &self,
        topic: &str,
        partition: i32,
        stale_after: Option<Duration>,
        deadline: Instant,
    ) -> Result<(), KelpError> {
        let store = self.with_partition(topic, partition, |p| {
            p.needs_sync(stale_after).then(|| p.store().clone())
        })?;
        let Some(store) = store else {
            return Ok(());
        };
        // Bounded here too: the engine retries until the deadline, but what it asks after
        // (SeaweedMQ's log start) has only its call timeout, and a Fetch waiting on this
        // holds up every request behind it on the connection.
        let range = crate::deadline::until(store.range(deadline), deadline)
            .await
            .ok_or_else(|| {
                KelpError::StorageUnavailable("the store's offsets: no answer in time".into())
            })??;
        let freed = self.with_partition(topic, partition, |p| p.sync_offsets(range))?;
        self.set_cached(self.cached_bytes.get().saturating_sub(freed));
        Ok(())
    }

    /// Appends validated batches to an owned partition and answers with the base offset and
    /// log start: once the store has them, and for acks=-1 once it has persisted them.
    pub async fn append(&self, item: ProduceItem) -> ProduceOut {
        let ProduceItem {
            topic,
            partition,
            mut batches,
            acks,
            timeout,
            log_append_time,
        } = item;
        let topic = &*topic;
        let deadline = Instant::now() + timeout;
        self.lead(topic, partition, deadline).await?;
        // The produce's own timeout bounds every wait, the offset lookup included: while the
        // store cannot answer (stopped, moving) the lookup is retried until the deadline, and
        // the produce then answers REQUEST_TIMED_OUT, which producers retry after their
        // backoff. Nothing was stored, so nothing is acknowledged. (Checked first: most
        // appends need no lookup, and then set no timer.) A transaction's first write to a
        // partition whose store keeps its transaction state is tracked there first.
        let transactional = batches.headers().any(|h| h.is_transactional());
        let (unsynced, untracked) = self.with_partition(topic, partition, |p| {
            (p.needs_sync(None), transactional && !p.txn_tracked())
        })?;
        if unsynced {
            // Past the deadline the sync fails as unavailable: REQUEST_TIMED_OUT here.
            self.sync_offsets(topic, partition, None, deadline)
                .await
                .map_err(KelpError::timed_out_if_transient)?;
        }
        if untracked {
            self.track_txns(topic, partition, deadline)
                .await
                .map_err(KelpError::timed_out_if_transient)?;
        }
        let durability = if acks == -1 {
            Durability::Persisted
        } else {
            Durability::Stored
        };
        // Stamped here, on the owner, after the waits above: the times follow the order the
        // batches go into the log.
        let append_time = if log_append_time {
            let now = crate::clock::now_ms();
            batches.stamp_log_append_time(now);
            now
        } else {
            -1
        };
        let mut wait_behind = true;
        let (ticket, assigned, store) = loop {
            let (reserved, store) = self.with_partition(topic, partition, |p| {
                p.reserve(batches, wait_behind)
                    .map(|r| (r, p.store().clone()))
            })??;
            match reserved {
                Reserved::Append { ticket, batches } => break (ticket, batches, store),
                Reserved::Duplicate(original) => {
                    // The original is stored; acks=all also wants it persisted.
                    if durability == Durability::Persisted {
                        let hw = self.with_partition(topic, partition, |p| p.high_watermark())?;
                        store.persist(hw).await?;
                    }
                    let log_start =
                        self.with_partition(topic, partition, |p| p.log_start_offset())?;
                    // Kafka answers a duplicate with the original's append time; Kelp does
                    // not keep it, so -1 (the records carry it).
                    return Ok(Appended {
                        base: original,
                        log_start,
                        append_time: -1,
                    });
                }
                Reserved::Behind {
                    batches: again,
                    through,
                } => {
                    self.settled_through(topic, partition, through).await?;
                    batches = again;
                    wait_behind = false;
                }
            }
        };
        let outcome = store.append(&assigned, durability, deadline).await;
        let first = outcome.first().cloned();
        let failure = outcome.iter().find_map(|r| r.clone().err());
        let end = outcome
            .iter()
            .filter_map(|r| r.as_ref().ok())
            .map(|&(_, last)| last + 1)
            .max();
        let (done, log_start) = self.with_partition(topic, partition, |p| {
            (p.settle(ticket, outcome), p.log_start_offset())
        })?;
        self.set_cached(self.cached_bytes.get().saturating_sub(done.freed));
        self.cached(topic, partition, done.added);
        if let Some(e) = failure {
            tracing::warn!(topic, partition, error = %e, "produce failed: not acknowledged");
            return Err(e);
        }
        if let (Durability::Persisted, Some(end)) = (durability, end) {
            if let Err(e) = store.persist(end).await {
                tracing::warn!(topic, partition, error = %e, "produce not persisted: not acknowledged");
                return Err(e);
            }
        }
        if transactional && assigned.iter().any(|(h, _)| h.is_control()) {
            self.save_txns(topic, partition);
        }
        match first {
            Some(Ok((base, _))) => Ok(Appended {
                base,
                log_start,
                append_time,
            }),
            _ => Err(KelpError::InvalidRecord("no record batch")),
        }
    }

    /// Waits until a partition's reservations up to `through` have settled.
    async fn settled_through(
        &self,
        topic: &str,
        partition: i32,
        through: u64,
    ) -> Result<(), KelpError> {
        loop {
            let (done, listener) = self.with_partition(topic, partition, |p| {
                let l = p.listen_settled();
                (p.settled_through(through), l)
            })?;
            if done {
                return Ok(());
            }
            listener.await;
        }
    }

    /// The offset sync before a read (Fetch, ListOffsets): bounded by READ_SYNC_WAIT, since
    /// reads carry no deadline of their own here.
    async fn sync_for_read(&self, topic: &str, partition: i32) -> Result<(), KelpError> {
        self.sync_offsets(topic, partition, None, Instant::now() + READ_SYNC_WAIT)
            .await
    }

    /// The transaction state's catch-up before a read_committed read, bounded like the
    /// offset sync; short of the end, the read stops before what was not looked at.
    async fn catch_up_txns_for_read(&self, topic: &str, partition: i32) {
        let deadline = Instant::now() + READ_SYNC_WAIT;
        if let Err(e) = self.catch_up_txns(topic, partition, deadline).await {
            tracing::debug!(topic, partition, error = %e, "transaction state not caught up");
        }
    }

    /// Reads from the cache, or from the store for offsets older than the cache.
    pub async fn read(&self, it: ReadItem, cold_budget: Rc<ColdBudget>) -> ReadResult {
        self.lead(&it.topic, it.partition, Instant::now() + READ_SYNC_WAIT)
            .await?;
        self.sync_for_read(&it.topic, it.partition).await?;
        let (behind, refresh) = self.with_partition(&it.topic, it.partition, |p| {
            let refresh = p
                .store()
                .refresh_every()
                .filter(|_| it.offset >= p.high_watermark());
            (it.committed && !p.txn_current(), refresh)
        })?;
        if behind {
            self.catch_up_txns_for_read(&it.topic, it.partition).await;
        }
        if let Some(every) = refresh {
            // Records others appended show up within `every`; a failed check only means
            // the answer comes from what Kelp knows.
            if let Err(e) = self
                .sync_offsets(
                    &it.topic,
                    it.partition,
                    Some(every),
                    Instant::now() + REFRESH_WAIT,
                )
                .await
            {
                tracing::debug!(topic = %it.topic, partition = it.partition, error = %e, "offset refresh failed");
            }
        }
        let cold = self.with_partition(&it.topic, it.partition, |p| {
            p.cold(it.offset).then(|| {
                (
                    p.store().clone(),
                    p.high_watermark(),
                    p.log_start_offset(),
                    p.last_stable_offset(),
                )
            })
        })?;
        let Some((store, hw, log_start, lso)) = cold else {
            return self.with_partition(&it.topic, it.partition, |p| {
                p.read(it.offset, it.max_bytes, it.committed)
            })?;
        };
        let share = cold_budget.take(it.max_bytes);
        if share == 0 {
            // The response is full: nothing is read (the first-batch rule is for the
            // response's first partition with data, which took a share).
            return Ok(ReadOut::empty(hw, log_start, lso));
        }
        // read_committed readers stop at the last stable offset.
        let upper = if it.committed { lso } else { hw };
        let reading = store.read(it.offset, share, upper);
        let read = if store.reads_remote() {
            // As Kafka waits for remote storage (remote.fetch.max.wait.ms): a store on another
            // server that is slow (moving a partition, restarting) costs this Fetch its
            // records, not its answer; a connection's later requests wait behind it.
            let wait = Duration::from_millis(self.config.remote_fetch_max_wait_ms);
            match crate::deadline::until(reading, Instant::now() + wait).await {
                Some(read) => read,
                None => {
                    cold_budget.give_back(share);
                    self.stats
                        .remote_reads_expired
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    tracing::debug!(topic = %it.topic, partition = it.partition, offset = it.offset,
                        "read below the cache not answered in time; none this fetch");
                    return Ok(ReadOut::empty(hw, log_start, lso));
                }
            }
        } else {
            reading.await
        };
        let used = read.as_ref().map_or(0, |b| b.iter().map(|b| b.len()).sum());
        cold_budget.give_back(share.saturating_sub(used));
        let batches = read.inspect_err(|e| {
            tracing::error!(topic = %it.topic, partition = it.partition, error = %e, "read below the cache failed");
        })?;
        let read_to = batches
            .last()
            .and_then(|b| crate::record::BatchHeader::parse(b).ok())
            .map_or(it.offset, |h| h.last_offset() + 1);
        let aborted = if it.committed && read_to > it.offset {
            self.with_partition(&it.topic, it.partition, |p| {
                p.transactions().aborted_between(it.offset, read_to)
            })?
        } else {
            Vec::new()
        };
        Ok(ReadOut {
            bytes: batches.iter().map(|b| b.len()).sum(),
            batches,
            high_watermark: hw,
            log_start_offset: log_start,
            last_stable_offset: lso,
            aborted,
        })
    }

    /// ListOffsets for one partition: special timestamps from the offsets; real ones from
    /// the cache when it covers the log, else from the store below the cache.
    pub async fn list_offset(&self, it: OffsetsItem) -> OffsetsOut {
        self.lead(&it.topic, it.partition, Instant::now() + READ_SYNC_WAIT)
            .await?;
        self.sync_for_read(&it.topic, it.partition).await?;
        if it.committed {
            self.catch_up_txns_for_read(&it.topic, it.partition).await;
        }
        let (found, cache_start, log_start, hw, store) =
            self.with_partition(&it.topic, it.partition, |p| {
                (
                    p.offset_for_timestamp(it.timestamp, it.committed),
                    p.cache_start(),
                    p.log_start_offset(),
                    p.high_watermark(),
                    p.store().clone(),
                )
            })?;
        let covered = cache_start.is_some_and(|c| c <= log_start) || log_start >= hw;
        // MAX_TIMESTAMP is kept per partition as batches are appended or recovered.
        if it.timestamp < 0 || covered || !store.keeps_evicted() {
            return Ok(found);
        }
        let end = cache_start.unwrap_or(hw).min(hw);
        Ok(store
            .find_timestamp(it.timestamp, log_start, end)
            .await?
            .unwrap_or(found))
    }

    /// DeleteRecords: moves the log start to `offset` (-1: the high watermark); the store
    /// forgets what lies below it first, so a restart keeps it.
    pub async fn delete_records(
        &self,
        topic: &str,
        partition: i32,
        offset: i64,
    ) -> Result<i64, KelpError> {
        self.lead(topic, partition, Instant::now() + READ_SYNC_WAIT)
            .await?;
        let (target, store) = self.with_partition(topic, partition, |p| {
            let hw = p.high_watermark();
            let target = if offset == -1 { hw } else { offset };
            if target < 0 || target > hw {
                return Err(KelpError::OffsetOutOfRange {
                    offset: target,
                    start: p.log_start_offset(),
                    end: hw,
                });
            }
            Ok((target.max(p.log_start_offset()), p.store().clone()))
        })??;
        store.truncate_prefix(target).await?;
        let (start, freed) = self.with_partition(topic, partition, |p| {
            let freed = p.advance_log_start(target);
            (p.log_start_offset(), freed)
        })?;
        self.set_cached(self.cached_bytes.get().saturating_sub(freed));
        Ok(start)
    }

    /// Takes over the partitions this shard owns that the engine finds at start-up, with
    /// the idempotent producers' state rebuilt from their batches.
    pub async fn recover_partitions(&self) -> anyhow::Result<()> {
        let owns = |topic: &str, partition: i32| self.owner(topic, partition) == self.id;
        let mut producers: HashMap<(String, i32), (ProducerStates, Transactions)> = HashMap::new();
        let mut on_batch =
            |topic: &str, partition: i32, h: &crate::record::batch::BatchHeader, b: &[u8]| {
                // Markers are rare and tiny: copied to be read.
                let control = h
                    .is_control()
                    .then(|| control_type(h, &bytes::Bytes::copy_from_slice(b)))
                    .flatten();
                // The key is built only for the first batch of each partition.
                match producers.get_mut(&(topic.to_string(), partition)) {
                    Some((p, t)) => {
                        p.record(h);
                        t.observe(h, control);
                    }
                    None => {
                        let (mut p, mut t) = (ProducerStates::default(), Transactions::default());
                        p.record(h);
                        t.observe(h, control);
                        producers.insert((topic.to_string(), partition), (p, t));
                    }
                }
            };
        let found = self.engine.recover(&owns, &mut on_batch).await?;
        let mut parts = self.partitions.borrow_mut();
        for r in found {
            let key = (std::rc::Rc::<str>::from(r.topic.as_str()), r.partition);
            let (states, txns) = producers
                .remove(crate::cluster::key::key(&(&r.topic, r.partition)))
                .unwrap_or_default();
            let mut p = Partition::from_recovered(r, states);
            p.set_transactions(txns);
            p.publish_gauges(true);
            self.stats.partitions.add(&key.0, key.1, p.gauges().clone());
            parts.insert(key, p);
        }
        Ok(())
    }

    /// Applies retention to this shard's partitions every `every`, forever.
    pub async fn run_retention(self: Rc<Self>, every: Duration) {
        loop {
            glommio::timer::sleep(every).await;
            self.apply_retention().await;
        }
    }

    /// The owned partitions' stores, taken out of the partition map so that the work done
    /// with them may wait without holding it.
    fn stores(
        &self,
    ) -> Vec<(
        super::PartitionKey,
        std::rc::Rc<dyn crate::storage::PartitionStore>,
    )> {
        self.partitions
            .borrow()
            .iter()
            .map(|(k, p)| (k.clone(), p.store().clone()))
            .collect()
    }

    /// One retention pass over the owned partitions.
    pub async fn apply_retention(&self) {
        let now_ms = crate::clock::now_ms();
        for ((topic, partition), store) in self.stores() {
            let Some(cut) = store.retention_cut(now_ms).await else {
                continue;
            };
            // Engines that keep the records (a logical log start) name the same cut again
            // until retention moves it further.
            if self
                .with_partition(&topic, partition, |p| cut <= p.log_start_offset())
                .unwrap_or(true)
            {
                continue;
            }
            match store.truncate_prefix(cut).await {
                Ok(()) => {
                    if let Ok(freed) =
                        self.with_partition(&topic, partition, |p| p.advance_log_start(cut))
                    {
                        self.set_cached(self.cached_bytes.get().saturating_sub(freed));
                    }
                    tracing::info!(topic = %topic, partition, log_start = cut, "retention moved the log start");
                }
                Err(e) => {
                    tracing::warn!(topic = %topic, partition, error = %e, "retention could not delete")
                }
            }
        }
    }

    /// Runs the log cleaner over this shard's partitions every `every`, forever. Spawned in
    /// a low-share task queue: cleaning yields to requests for the core.
    pub async fn run_cleaner(self: Rc<Self>, every: Duration) {
        loop {
            glommio::timer::sleep(every).await;
            self.clean_partitions().await;
        }
    }

    /// One cleaner pass over the owned partitions, one partition at a time.
    pub async fn clean_partitions(&self) {
        for ((topic, partition), store) in self.stores() {
            let Ok(facts) = self.with_partition(&topic, partition, |p| p.cleaner_facts()) else {
                continue;
            };
            match store.compact(crate::clock::now_ms(), facts).await {
                None => {}
                Some(Ok(r)) if r.segments == 0 => {
                    tracing::debug!(topic = %topic, partition, cleaned_to = r.cleaned_to, "log cleaner: nothing to remove");
                }
                Some(Ok(r)) => {
                    // Readers of the cleaned range read the cleaned segments, not the
                    // batches the cache still holds from before.
                    // Compaction shrinks the log without moving an offset: published here.
                    if let Ok(freed) = self.with_partition(&topic, partition, |p| {
                        let freed = p.evict_through(r.cleaned_to - 1);
                        p.publish_gauges(true);
                        freed
                    }) {
                        self.set_cached(self.cached_bytes.get().saturating_sub(freed));
                    }
                    tracing::info!(
                        topic = %topic,
                        partition,
                        segments = r.segments,
                        bytes_before = r.bytes_before,
                        bytes_after = r.bytes_after,
                        keys = r.keys,
                        cleaned_to = r.cleaned_to,
                        "log cleaner compacted segments"
                    )
                }
                Some(Err(e)) => {
                    tracing::warn!(topic = %topic, partition, error = %e, "log cleaner failed; the log is as it was")
                }
            }
        }
    }

    /// The broker is stopping: lets every partition's store leave its files as a restart
    /// expects them.
    pub async fn close_stores(&self) {
        for (_, store) in self.stores() {
            store.close().await;
        }
    }

    /// Flushes every partition's store each `every`, forever (`--fsync interval:MS`).
    pub async fn run_flush(self: Rc<Self>, every: Duration) {
        loop {
            glommio::timer::sleep(every).await;
            for (_, store) in self.stores() {
                // The store logs its own failures; the next round tries again.
                let _ = store.flush().await;
            }
        }
    }
}
