//! The local engine (`--storage local`, the default): each partition's batches in the
//! embedded log under `<data-dir>/topics/`, topic metadata in `<data-dir>/meta/`, group
//! offsets in a per-shard journal. Appends are queued on the partition's [`PartitionLog`]
//! (group commit) and stored once written; acks=all waits for the fdatasync that
//! `--fsync always` asks for. Retention deletes whole sealed segments; `--fsync interval`
//! syncs from a timer.
//!
//! Calls `log/` for everything on disk and `cluster/` for the topics' settings.

use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use futures::future::LocalBoxFuture;

use super::{Background, Batch, BatchOffsets, Durability, Engine, PartitionStore, Recovered};
use crate::cluster::{Cluster, TopicMeta};
use crate::config::{Config, FsyncPolicy};
use crate::error::KelpError;
use crate::group::OffsetStore;
use crate::log::offsets_store::{offsets_path, DurableOffsetStore};
use crate::log::recovery::{self, LOG_START_FILE};
use crate::log::retention::{self, SealedSegment};
use crate::log::{PartitionLog, RollSettings};

/// The local log's fault injection, for tests above the storage seam (test builds only).
#[cfg(test)]
pub use crate::log::faults;

/// Directory of one partition's log under `data_dir` (where tests aim their faults).
#[cfg(test)]
pub fn partition_dir(data_dir: &Path, topic: &str, partition: i32) -> std::path::PathBuf {
    crate::log::partition_dir(data_dir, topic, partition)
}

/// The local engine.
pub struct LocalEngine {
    config: Arc<Config>,
    cluster: Arc<Cluster>,
}

/// Prepares the data directory and loads the topic metadata it holds.
pub fn start(config: Arc<Config>, shards: usize) -> anyhow::Result<super::Storage> {
    crate::log::prepare_data_dir(&config.data_dir).context("cannot use the data directory")?;
    let cluster = Arc::new(
        Cluster::with_persistence(
            &config,
            shards,
            crate::log::meta::topics_path(&config.data_dir),
        )
        .context("cannot load topic metadata")?,
    );
    Ok(super::Storage {
        engine: Arc::new(LocalEngine {
            config,
            cluster: cluster.clone(),
        }),
        cluster,
    })
}

/// Segment roll settings of a topic: its overrides, else the broker defaults.
fn roll_settings(config: &Config, meta: Option<&TopicMeta>) -> RollSettings {
    let get = |k: &str| {
        meta.and_then(|m| m.configs.get(k))
            .and_then(|v| v.parse::<i64>().ok())
    };
    RollSettings {
        segment_bytes: get("segment.bytes")
            .filter(|&b| b > 0)
            .map_or(config.segment_bytes, |b| b as u64),
        segment_ms: get("segment.ms")
            .or_else(|| {
                crate::cluster::topic_config::default_of("segment.ms").and_then(|v| v.parse().ok())
            })
            .filter(|&ms| ms > 0)
            .map_or(u64::MAX, |ms| ms as u64),
    }
}

/// One partition's log.
pub struct LocalStore {
    log: PartitionLog,
    topic: String,
    config: Arc<Config>,
    cluster: Arc<Cluster>,
    /// Offset up to which the last cleaning round mapped the log (-1: never; kept across
    /// restarts in the partition's cleaner checkpoint).
    cleaned_to: std::cell::Cell<i64>,
}

impl LocalStore {
    fn roll(&self) -> RollSettings {
        roll_settings(&self.config, self.cluster.topic(&self.topic).as_deref())
    }
}

fn storage_error(e: crate::log::LogError) -> KelpError {
    KelpError::from(e)
}

impl LocalStore {
    /// Where retention cuts now: whole sealed segments, oldest first.
    fn retention_cut_now(&self, now_ms: i64) -> Option<i64> {
        let meta = self.cluster.topic(&self.topic)?;
        let sealed: Vec<SealedSegment> = self
            .log
            .sealed_segments()
            .into_iter()
            .map(|(base, next_offset, size, max_timestamp)| SealedSegment {
                base,
                next_offset,
                size,
                max_timestamp,
            })
            .collect();
        retention::delete_before(&sealed, self.log.size(), super::retention_of(&meta), now_ms)
    }
}

/// What a due cleaning round of a compacted partition uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct CleaningPlan {
    /// Segments whose newest batch is later than this stay out (`min.compaction.lag.ms`).
    max_timestamp: i64,
    /// `delete.retention.ms`.
    delete_retention_ms: i64,
}

/// Whether a partition of `meta` with these sealed segments (base, next offset, size, max
/// timestamp), cleaned up to `cleaned_to`, is due for cleaning, Kafka's way: its topic is
/// compacted and the dirty share of its sealed bytes reaches `min.cleanable.dirty.ratio`, or
/// its oldest dirty segment is older than `max.compaction.lag.ms`.
fn cleaning_due(
    meta: &TopicMeta,
    sealed: &[(i64, i64, u64, i64)],
    cleaned_to: i64,
    now_ms: i64,
) -> Option<CleaningPlan> {
    if !meta.compacted() {
        return None;
    }
    let num = |k: &str, default: i64| {
        meta.config(k)
            .and_then(|v| v.parse::<i64>().ok())
            .unwrap_or(default)
    };
    let ratio = meta
        .config("min.cleanable.dirty.ratio")
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.5);
    let min_lag = num("min.compaction.lag.ms", 0).max(0);
    let max_lag = num("max.compaction.lag.ms", i64::MAX);
    let total: u64 = sealed.iter().map(|s| s.2).sum();
    let dirty: Vec<&(i64, i64, u64, i64)> = sealed.iter().filter(|s| s.1 > cleaned_to).collect();
    let dirty_bytes: u64 = dirty.iter().map(|s| s.2).sum();
    if dirty_bytes == 0 || total == 0 {
        return None;
    }
    let overdue = dirty
        .first()
        .is_some_and(|s| s.3 >= 0 && s.3 < now_ms.saturating_sub(max_lag));
    if (dirty_bytes as f64) / (total as f64) < ratio && !overdue {
        return None;
    }
    Some(CleaningPlan {
        max_timestamp: now_ms.saturating_sub(min_lag),
        delete_retention_ms: num("delete.retention.ms", 86_400_000),
    })
}

impl PartitionStore for LocalStore {
    fn append(
        &self,
        batches: &[Batch],
        durability: Durability,
        _deadline: Instant,
    ) -> LocalBoxFuture<'_, Vec<BatchOffsets>> {
        let predicted: Vec<BatchOffsets> = batches
            .iter()
            .map(|(h, _)| Ok((h.base_offset, h.last_offset())))
            .collect();
        // Queued now, before the caller yields: the queue order is the append order. A
        // refusal (offsets after a failed write, a fenced log) fails the append; settling
        // it realigns the partition's offsets with the log.
        let ticket = match self.log.enqueue(batches.to_vec(), self.roll()) {
            Ok(t) => t,
            Err(e) => {
                let e = storage_error(e);
                return Box::pin(futures::future::ready(vec![Err(e); predicted.len()]));
            }
        };
        if durability == Durability::Persisted {
            self.log.want_sync(ticket.target);
        }
        Box::pin(async move {
            match self.log.wait(ticket, false).await {
                Ok(()) => predicted,
                Err(e) => vec![Err(storage_error(e)); predicted.len()],
            }
        })
    }

    fn persist(&self, through: i64) -> LocalBoxFuture<'_, Result<(), KelpError>> {
        let ticket = self.log.ticket_for_all(through);
        Box::pin(async move { self.log.wait(ticket, true).await.map_err(storage_error) })
    }

    fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        end: i64,
    ) -> LocalBoxFuture<'_, Result<Vec<Bytes>, KelpError>> {
        Box::pin(async move {
            let started = Instant::now();
            let read = self.log.read(offset, max_bytes, end).await;
            crate::metrics::storage::record(
                crate::metrics::storage::StorageOp::LocalRead,
                started.elapsed(),
                read.is_ok(),
            );
            read.map_err(storage_error)
        })
    }

    fn find_timestamp(
        &self,
        ts: i64,
        from: i64,
        end: i64,
    ) -> LocalBoxFuture<'_, Result<Option<(i64, i64)>, KelpError>> {
        Box::pin(async move {
            self.log
                .find_timestamp(ts, from, end)
                .await
                .map_err(storage_error)
        })
    }

    fn truncate_prefix(&self, offset: i64) -> LocalBoxFuture<'_, Result<(), KelpError>> {
        // The checkpoint is a small file written and synced in place: the shard waits for
        // it as it always has (DeleteRecords and retention are rare).
        let r = checkpoint_log_start(self.log.dir(), offset).map(|()| {
            self.log.delete_below(offset);
        });
        Box::pin(futures::future::ready(r))
    }

    fn keeps_evicted(&self) -> bool {
        true
    }

    fn log_size_bytes(&self) -> Option<u64> {
        Some(self.log.size())
    }

    fn retention_cut(&self, now_ms: i64) -> LocalBoxFuture<'_, Option<i64>> {
        Box::pin(futures::future::ready(self.retention_cut_now(now_ms)))
    }

    fn compact(
        &self,
        now_ms: i64,
        facts: crate::log::compact::PartitionFacts,
    ) -> LocalBoxFuture<'_, Option<Result<crate::log::cleaner::CleanReport, KelpError>>> {
        Box::pin(async move {
            let meta = self.cluster.topic(&self.topic)?;
            let plan = cleaning_due(
                &meta,
                &self.log.sealed_segments(),
                self.cleaned_to.get(),
                now_ms,
            )?;
            let capacity = (self.config.log_cleaner_dedupe_buffer_size as usize
                / crate::log::compact::BYTES_PER_KEY)
                .max(1);
            let settings = crate::log::compact::Settings {
                now_ms,
                delete_retention_ms: plan.delete_retention_ms,
                inflate_cap: crate::record::walk::MAX_INFLATED_BYTES,
            };
            let r = self
                .log
                .compact(
                    &settings,
                    capacity,
                    plan.max_timestamp,
                    self.cleaned_to.get(),
                    facts,
                    &mut crate::log::cleaner::Throttle::new(
                        self.config.log_cleaner_io_max_bytes_per_second,
                    ),
                )
                .await
                .map_err(storage_error);
            if let Ok(report) = &r {
                if report.cleaned_to != self.cleaned_to.get() {
                    if let Err(e) =
                        crate::log::cleaner::write_checkpoint(self.log.dir(), report.cleaned_to)
                    {
                        // The next start maps more; nothing is lost.
                        tracing::debug!(dir = %self.log.dir().display(), error = %e, "cleaner checkpoint not written");
                    }
                }
                self.cleaned_to.set(report.cleaned_to);
            }
            Some(r)
        })
    }

    fn flush(&self) -> LocalBoxFuture<'_, Result<(), KelpError>> {
        Box::pin(async move {
            self.log.sync_if_dirty().await.map_err(|e| {
                tracing::error!(dir = %self.log.dir().display(), error = %e, "interval fsync failed");
                storage_error(e)
            })
        })
    }

    fn remove(&self) {
        self.log.remove_all();
    }

    fn close(&self) -> LocalBoxFuture<'_, ()> {
        Box::pin(self.log.close())
    }
}

/// Writes the log start offset next to the segments (temp file + rename), so a restart
/// keeps what DeleteRecords and retention removed.
fn checkpoint_log_start(dir: &Path, start: i64) -> Result<(), KelpError> {
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

impl Engine for LocalEngine {
    fn register_metrics(&self, registry: &crate::metrics::Registry) {
        registry.set_storage_engine("local");
    }

    fn describe_log_dir(
        &self,
        partitions: Vec<(String, i32)>,
    ) -> LocalBoxFuture<'_, super::LogDirInfo> {
        let data_dir = self.config.data_dir.clone();
        // Directory listings and statvfs: off the shard's thread.
        Box::pin(async move {
            let u = glommio::executor()
                .spawn_blocking(move || crate::log::usage::describe(&data_dir, &partitions))
                .await;
            super::LogDirInfo {
                path: u.path,
                sizes: u
                    .sizes
                    .into_iter()
                    .map(|n| i64::try_from(n).unwrap_or(i64::MAX))
                    .collect(),
                total_bytes: u.total_bytes,
                usable_bytes: u.usable_bytes,
            }
        })
    }

    fn open(&self, topic: &str, partition: i32, meta: &TopicMeta) -> Rc<dyn PartitionStore> {
        Rc::new(LocalStore {
            log: PartitionLog::new(
                crate::log::partition_dir(&self.config.data_dir, topic, partition),
                self.config.fsync,
                Vec::new(),
                roll_settings(&self.config, Some(meta)),
            ),
            topic: topic.to_string(),
            config: self.config.clone(),
            cluster: self.cluster.clone(),
            cleaned_to: std::cell::Cell::new(-1),
        })
    }

    fn recover<'a>(
        &'a self,
        owns: &'a dyn Fn(&str, i32) -> bool,
        on_batch: &'a mut crate::storage::OnBatch<'a>,
    ) -> LocalBoxFuture<'a, anyhow::Result<Vec<Recovered>>> {
        Box::pin(async move {
            let dir = crate::log::topics_dir(&self.config.data_dir);
            let entries = std::fs::read_dir(&dir)
                .map_err(|e| anyhow::anyhow!("listing {}: {e}", dir.display()))?;
            let mut out = Vec::new();
            for entry in entries.filter_map(Result::ok) {
                let Some((topic, partition)) = entry
                    .file_name()
                    .to_str()
                    .and_then(recovery::parse_dir_name)
                else {
                    continue;
                };
                if !owns(&topic, partition) {
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
                let r = recovery::recover(
                    entry.path(),
                    self.config.fsync,
                    roll_settings(&self.config, Some(&meta)),
                    &mut |h, b| on_batch(&topic, partition, h, b),
                )
                .await
                .map_err(|e| anyhow::anyhow!("recovering {topic}-{partition}: {e}"))?;
                tracing::info!(
                    topic = %topic,
                    partition,
                    log_start = r.log_start,
                    high_watermark = r.next_offset,
                    "recovered partition"
                );
                let cleaned_to = crate::log::cleaner::read_checkpoint(&entry.path(), r.next_offset);
                out.push(Recovered {
                    store: Rc::new(LocalStore {
                        log: r.log,
                        topic: topic.clone(),
                        config: self.config.clone(),
                        cluster: self.cluster.clone(),
                        cleaned_to: std::cell::Cell::new(cleaned_to),
                    }),
                    topic,
                    partition,
                    topic_id: meta.id,
                    log_start: r.log_start,
                    next_offset: r.next_offset,
                    max_timestamp: r.max_timestamp,
                });
            }
            Ok(out)
        })
    }

    fn offset_store(
        &self,
        shard: usize,
        _shards: usize,
    ) -> LocalBoxFuture<'_, anyhow::Result<Rc<dyn OffsetStore>>> {
        Box::pin(async move {
            let path = offsets_path(&self.config.data_dir, shard);
            let store = DurableOffsetStore::open(&path)
                .await
                .map_err(|e| anyhow::anyhow!("group offsets: {e}"))?;
            Ok(Rc::new(store) as Rc<dyn OffsetStore>)
        })
    }

    fn pipelines_produce(&self) -> bool {
        true
    }

    fn background(&self) -> Background {
        Background {
            retention_every: Some(Duration::from_millis(
                self.config.retention_check_ms.max(10),
            )),
            clean_every: Some(Duration::from_millis(
                self.config.log_cleaner_backoff_ms.max(10),
            )),
            flush_every: match self.config.fsync {
                FsyncPolicy::Interval(ms) => Some(Duration::from_millis(ms)),
                _ => None,
            },
            // Only this process writes them.
            records_every: None,
        }
    }

    fn records<'a>(
        &'a self,
        space: &'a str,
    ) -> LocalBoxFuture<'a, Result<crate::storage::Records, KelpError>> {
        // Plain std::fs on the shard thread, as for topics.json: a few small files, read at
        // start-up and written by admin requests only.
        let dir = crate::log::meta::records_dir(&self.config.data_dir, space);
        let found = crate::log::meta::list_records(&dir, |n| super::record_key(n).is_some())
            .map(|all| {
                all.into_iter()
                    .filter_map(|(n, v)| Some((super::record_key(&n)?, v)))
                    .collect()
            })
            .map_err(KelpError::from);
        Box::pin(futures::future::ready(found))
    }

    fn put_record<'a>(
        &'a self,
        space: &'a str,
        key: &'a str,
        value: Option<Vec<u8>>,
    ) -> LocalBoxFuture<'a, Result<(), KelpError>> {
        let dir = crate::log::meta::records_dir(&self.config.data_dir, space);
        Box::pin(futures::future::ready(
            crate::log::meta::put_record(&dir, &super::record_file(key), value.as_deref())
                .map_err(KelpError::from),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::{cleaning_due, CleaningPlan};
    use crate::storage::tests::topic;

    #[test]
    fn cleaning_is_due_at_the_dirty_ratio_or_the_max_lag() {
        let now = 1_000_000;
        // (base, next offset, size, max timestamp)
        let sealed = [
            (0, 10, 100, now - 500),
            (10, 20, 100, now - 400),
            (20, 30, 100, now - 300),
        ];
        let compact = topic(&[("cleanup.policy", "compact")]);
        assert_eq!(cleaning_due(&topic(&[]), &sealed, -1, now), None);
        let plan = CleaningPlan {
            max_timestamp: now,
            delete_retention_ms: 86_400_000,
        };
        assert_eq!(cleaning_due(&compact, &sealed, -1, now), Some(plan));
        // Cleaned up to 20: a third dirty, under the 0.5 default.
        assert_eq!(cleaning_due(&compact, &sealed, 20, now), None);
        assert_eq!(cleaning_due(&compact, &sealed, 30, now), None);
        let eager = topic(&[
            ("cleanup.policy", "compact"),
            ("min.cleanable.dirty.ratio", "0.3"),
        ]);
        assert!(cleaning_due(&eager, &sealed, 20, now).is_some());
        // The dirty segment's records are older than max.compaction.lag.ms: due anyway.
        let lagged = topic(&[
            ("cleanup.policy", "compact"),
            ("max.compaction.lag.ms", "200"),
        ]);
        assert!(cleaning_due(&lagged, &sealed, 20, now).is_some());
        let lagging = topic(&[
            ("cleanup.policy", "compact,delete"),
            ("min.compaction.lag.ms", "350"),
            ("delete.retention.ms", "5"),
        ]);
        let plan = CleaningPlan {
            max_timestamp: now - 350,
            delete_retention_ms: 5,
        };
        assert_eq!(cleaning_due(&lagging, &sealed, -1, now), Some(plan));
    }
}
