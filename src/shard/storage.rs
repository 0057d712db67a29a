//! The shard's partition data operations that may wait for the durable log: appends (with
//! the acks/fsync rules), cold reads, timestamp lookups, DeleteRecords, start-up recovery,
//! retention and the interval fsync timer.
//!
//! Runs on the owning shard only. Calls `partition/` for state and `log/` for the disk;
//! never holds a borrow of the partition map across an await.

use std::rc::Rc;
use std::time::Duration;

use super::ops::{ColdBudget, OffsetsItem, OffsetsOut, ProduceOut, ReadItem, ReadResult};
use super::Shard;
use crate::config::{FsyncPolicy, StorageKind};
use crate::error::KelpError;
use crate::log::recovery::{self, LOG_START_FILE};
use crate::log::retention::{self, Retention, SealedSegment};
use crate::partition::Partition;
use crate::record::ValidatedBatches;

impl Shard {
    /// Appends validated batches to an owned partition. With local storage, answers once the
    /// batches are written — and, for acks=-1 under `--fsync always`, synced.
    pub async fn append(
        &self,
        topic: &str,
        partition: i32,
        batches: ValidatedBatches,
        acks: i16,
        timeout: Duration,
    ) -> ProduceOut {
        if self.forwarder.is_some() {
            return self.append_remote(topic, partition, batches, timeout).await;
        }
        let meta = self
            .cluster
            .topic(topic)
            .ok_or(KelpError::UnknownTopicOrPartition)?;
        let roll = self.roll_settings(&meta);
        let appended = self.with_partition(topic, partition, |p| p.append(batches, roll))??;
        self.cached(topic, partition, appended.added);
        let Some((log, ticket)) = appended.wait else {
            let log_start = self.with_partition(topic, partition, |p| p.log_start_offset())?;
            return Ok((appended.base, log_start));
        };
        let res = log.wait(ticket, acks == -1).await;
        // Whatever was written becomes visible, whether or not this append made it.
        let (added, log_start) = self.with_partition(topic, partition, |p| {
            (p.commit_written(), p.log_start_offset())
        })?;
        self.cached(topic, partition, added);
        match res {
            Ok(()) => Ok((appended.base, log_start)),
            Err(e) => {
                tracing::warn!(topic, partition, error = %e, "produce failed: not acknowledged");
                Err(e.into())
            }
        }
    }

    /// Reads from the cache, or from the log for offsets older than the cache.
    pub async fn read(&self, it: ReadItem, cold_budget: Rc<ColdBudget>) -> ReadResult {
        if self.forwarder.is_some() {
            return self.read_remote(it, cold_budget).await;
        }
        let cold = self.with_partition(&it.topic, it.partition, |p| {
            p.cold_log(it.offset)
                .map(|log| (log, p.high_watermark(), p.log_start_offset()))
        })?;
        let Some((log, hw, log_start)) = cold else {
            return self
                .with_partition(&it.topic, it.partition, |p| p.read(it.offset, it.max_bytes))?;
        };
        let share = cold_budget.take(it.max_bytes);
        if share == 0 {
            // The response is full: nothing is read (the first-batch rule is for the
            // response's first partition with data, which took a share).
            return Ok(crate::partition::ReadOut::empty(hw, log_start));
        }
        let read = log.read(it.offset, share, hw).await;
        let used = read.as_ref().map_or(0, |b| b.iter().map(|b| b.len()).sum());
        cold_budget.give_back(share.saturating_sub(used));
        let batches = read.map_err(|e| {
            tracing::error!(topic = %it.topic, partition = it.partition, error = %e, "cold read failed");
            KelpError::from(e)
        })?;
        Ok(crate::partition::ReadOut {
            bytes: batches.iter().map(|b| b.len()).sum(),
            batches,
            high_watermark: hw,
            log_start_offset: log_start,
        })
    }

    /// ListOffsets for one partition; lookups by timestamp search the log when it exists.
    pub async fn list_offset(&self, it: OffsetsItem) -> OffsetsOut {
        if self.forwarder.is_some() {
            return self.list_offset_remote(it).await;
        }
        let special = it.timestamp < 0;
        let lookup = self.with_partition(&it.topic, it.partition, |p| {
            match p.log().filter(|_| !special) {
                Some(log) => Err((log.clone(), p.log_start_offset(), p.high_watermark())),
                None => Ok(p.offset_for_timestamp(it.timestamp)),
            }
        })?;
        match lookup {
            Ok(found) => Ok(found),
            Err((log, from, hw)) => Ok(log
                .find_timestamp(it.timestamp, from, hw)
                .await?
                .unwrap_or((-1, -1))),
        }
    }

    /// DeleteRecords: moves the log start to `offset` (-1: the high watermark), deletes the
    /// segments wholly below it and checkpoints it so a restart keeps it.
    pub fn delete_records(
        &self,
        topic: &str,
        partition: i32,
        offset: i64,
    ) -> Result<i64, KelpError> {
        if self.forwarder.is_some() {
            // SeaweedMQ has no way to delete records below an offset.
            return Err(KelpError::PolicyViolation(
                "DeleteRecords is not supported with --storage seaweedmq".into(),
            ));
        }
        let (start, freed, log) = self.with_partition(topic, partition, |p| {
            let hw = p.high_watermark();
            let target = if offset == -1 { hw } else { offset };
            if target < 0 || target > hw {
                return Err(KelpError::OffsetOutOfRange {
                    offset: target,
                    start: p.log_start_offset(),
                    end: hw,
                });
            }
            let freed = p.advance_log_start(target);
            Ok((p.log_start_offset(), freed, p.log().cloned()))
        })??;
        self.set_cached(self.cached_bytes.get().saturating_sub(freed));
        if let Some(log) = log {
            checkpoint_log_start(&log, start)?;
            log.delete_below(start);
        }
        Ok(start)
    }

    /// Recovers the partitions this shard owns from `<data-dir>/topics/`; directories of
    /// topics the metadata no longer knows are deleted.
    pub async fn recover_partitions(&self) -> anyhow::Result<()> {
        if self.config.storage != StorageKind::Local {
            return Ok(());
        }
        let dir = crate::log::topics_dir(&self.config.data_dir);
        let entries = std::fs::read_dir(&dir)
            .map_err(|e| anyhow::anyhow!("listing {}: {e}", dir.display()))?;
        for entry in entries.filter_map(Result::ok) {
            let Some((topic, partition)) = entry
                .file_name()
                .to_str()
                .and_then(recovery::parse_dir_name)
            else {
                continue;
            };
            if self.owner(&topic, partition) != self.id {
                continue;
            }
            let meta = self
                .cluster
                .topic(&topic)
                .filter(|m| partition < m.partitions);
            let Some(meta) = meta else {
                tracing::info!(path = %entry.path().display(), "deleting the log of an unknown partition");
                let _ = std::fs::remove_dir_all(entry.path());
                continue;
            };
            let mut producers = crate::partition::producer_state::ProducerStates::default();
            let roll = self.roll_settings(&meta);
            let r = recovery::recover(entry.path(), self.config.fsync, roll, &mut |h| {
                producers.record(h)
            })
            .await
            .map_err(|e| anyhow::anyhow!("recovering {topic}-{partition}: {e}"))?;
            tracing::info!(
                topic = %topic,
                partition,
                log_start = r.log_start,
                high_watermark = r.next_offset,
                "recovered partition"
            );
            self.partitions.borrow_mut().insert(
                (topic, partition),
                Partition::from_recovered(meta.id, r, producers),
            );
        }
        Ok(())
    }

    /// Applies retention.bytes / retention.ms to this shard's logs, forever.
    pub async fn run_retention(self: Rc<Self>) {
        let every = Duration::from_millis(self.config.retention_check_ms.max(10));
        loop {
            glommio::timer::sleep(every).await;
            self.apply_retention();
        }
    }

    /// One retention pass over the owned partitions.
    pub fn apply_retention(&self) {
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let keys: Vec<(String, i32)> = self.partitions.borrow().keys().cloned().collect();
        for (topic, partition) in keys {
            let Some(meta) = self.cluster.topic(&topic) else {
                continue;
            };
            let get = |k: &str| {
                meta.config(k)
                    .and_then(|v| v.parse::<i64>().ok())
                    .unwrap_or(-1)
            };
            let r = Retention {
                bytes: get("retention.bytes"),
                ms: get("retention.ms"),
            };
            let Ok(Some(log)) = self.with_partition(&topic, partition, |p| p.log().cloned()) else {
                continue;
            };
            let sealed: Vec<SealedSegment> = log
                .sealed_segments()
                .into_iter()
                .map(|(base, next_offset, size, max_timestamp)| SealedSegment {
                    base,
                    next_offset,
                    size,
                    max_timestamp,
                })
                .collect();
            let Some(cut) = retention::delete_before(&sealed, log.size(), r, now_ms) else {
                continue;
            };
            if let Ok(freed) = self.with_partition(&topic, partition, |p| p.advance_log_start(cut))
            {
                self.set_cached(self.cached_bytes.get().saturating_sub(freed));
            }
            let deleted = log.delete_below(cut);
            tracing::info!(topic = %topic, partition, log_start = cut, bytes = deleted, "retention deleted segments");
        }
    }

    /// Under `--fsync interval:MS`, syncs every log with unsynced writes each period.
    pub async fn run_fsync_timer(self: Rc<Self>) {
        let FsyncPolicy::Interval(ms) = self.config.fsync else {
            return;
        };
        loop {
            glommio::timer::sleep(Duration::from_millis(ms)).await;
            let logs: Vec<_> = self
                .partitions
                .borrow()
                .values()
                .filter_map(|p| p.log().cloned())
                .collect();
            for log in logs {
                if let Err(e) = log.sync_if_dirty().await {
                    tracing::error!(dir = %log.dir().display(), error = %e, "interval fsync failed");
                }
            }
        }
    }
}

/// Writes the log start offset next to the segments (temp file + rename).
fn checkpoint_log_start(log: &crate::log::PartitionLog, start: i64) -> Result<(), KelpError> {
    let dir = log.dir();
    if !dir.exists() {
        return Ok(());
    }
    let path = dir.join(LOG_START_FILE);
    let tmp = dir.join(format!("{LOG_START_FILE}.tmp"));
    std::fs::write(&tmp, start.to_string())
        .and_then(|()| std::fs::File::open(&tmp).and_then(|f| f.sync_all()))
        .and_then(|()| std::fs::rename(&tmp, &path))
        .map_err(|e| {
            tracing::error!(path = %path.display(), error = %e, "could not checkpoint the log start");
            KelpError::Storage(e.to_string())
        })
}
