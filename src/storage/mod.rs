//! The storage seam: what lies behind a partition's in-core batch cache, behind one interface.
//!
//! An [`Engine`] is chosen once, at start-up ([`select`]), from `--storage`: [`memory`] (the
//! cache alone), [`local`] (the embedded log, the default) or [`seaweedmq`] (SeaweedFS's
//! message queue through the forwarder thread). Every partition holds one
//! [`PartitionStore`] made by that engine. Nothing above this module asks which engine runs:
//! the shard and the partition use the interface and its capability answers only.
//!
//! Appends are two-phase. [`PartitionStore::append`] stores batches whose offsets the
//! partition predicted and resolves with the offsets the engine gave them (once stored in
//! order, readable); [`PartitionStore::persist`] then waits for stable storage when the
//! producer asked for acks=all. Called by `shard/` and `partition/`; calls `log/` and
//! `forwarder/`.

pub mod local;
pub mod memory;
pub mod seaweedmq;

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::future::LocalBoxFuture;

use crate::cluster::{Cluster, TopicMeta};
use crate::config::{Config, StorageKind};
use crate::error::KelpError;
use crate::group::OffsetStore;
/// What the log cleaner is told by the partition (its producers, last stable offset and
/// aborted transactions).
pub use crate::log::compact::PartitionFacts;
use crate::record::batch::BatchHeader;
use crate::txn::checkpoint::TxnCheckpoint;

/// One batch whose offsets are assigned: its parsed header and its bytes (offsets rewritten).
pub type Batch = (BatchHeader, Bytes);

/// What an engine did with one batch: the first and last offsets it stored it at.
pub type BatchOffsets = Result<(i64, i64), KelpError>;

/// How far an append must get before the producer is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Stored in order and readable (acks=1).
    Stored,
    /// Also on stable storage as the engine defines it (acks=all); the caller follows the
    /// append with [`PartitionStore::persist`], and engines may start the sync with the write.
    Persisted,
}

/// A partition's offsets as the engine knows them, for engines others may write to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    /// First offset still stored.
    pub earliest: i64,
    /// Offset the next record will get.
    pub next: i64,
}

/// What recovery calls for every stored batch, in offset order: (topic, partition, header,
/// the batch's bytes).
pub type OnBatch<'a> = dyn FnMut(&str, i32, &BatchHeader, &[u8]) + 'a;

/// A partition found in the engine at start-up.
pub struct Recovered {
    /// The topic's name.
    pub topic: String,
    /// The partition index.
    pub partition: i32,
    /// The topic incarnation it belongs to.
    pub topic_id: uuid::Uuid,
    /// Its store.
    pub store: Rc<dyn PartitionStore>,
    /// First readable offset.
    pub log_start: i64,
    /// Offset after the last stored record.
    pub next_offset: i64,
    /// (largest batch max timestamp, base offset of that batch), or (-1, -1).
    pub max_timestamp: (i64, i64),
}

/// A topic as an engine with a catalog of its own knows it.
pub use crate::forwarder::TopicInfo;

/// A topic's retention limits from its configs (-1: unlimited, also for a value that does
/// not parse).
pub fn retention_of(meta: &TopicMeta) -> crate::log::retention::Retention {
    // Kafka deletes by time and size only under cleanup.policy delete (alone or with
    // compact): a compact-only topic keeps every segment, however old.
    let deletes = meta
        .config("cleanup.policy")
        .is_none_or(|p| p.split(',').any(|v| v.trim() == "delete"));
    if !deletes {
        return crate::log::retention::Retention { bytes: -1, ms: -1 };
    }
    let get = |k: &str| {
        meta.config(k)
            .and_then(|v| v.parse::<i64>().ok())
            .unwrap_or(-1)
    };
    crate::log::retention::Retention {
        bytes: get("retention.bytes"),
        ms: get("retention.ms"),
    }
}

/// Periodic work an engine needs from each shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Background {
    /// Apply retention.ms / retention.bytes every this often.
    pub retention_every: Option<Duration>,
    /// Look for compacted partitions to clean ([`PartitionStore::compact`]) this often.
    pub clean_every: Option<Duration>,
    /// Call [`PartitionStore::flush`] on every partition this often.
    pub flush_every: Option<Duration>,
    /// Re-read the cluster-wide records ([`Engine::records`]) this often, for engines that
    /// other Kelp nodes write to as well.
    pub records_every: Option<Duration>,
}

/// The storage of one partition, held by its partition on the owning
/// shard. Every method runs on that shard's thread.
pub trait PartitionStore {
    /// Stores batches in order, offsets as predicted by the partition (rewritten in place),
    /// and resolves with the offsets the engine gave each one, once stored and readable. Work
    /// that fixes the order (queueing) happens before this returns, so appends issued one
    /// after another are stored in that order. `deadline` bounds engines that wait on a peer.
    fn append(
        &self,
        batches: &[Batch],
        durability: Durability,
        deadline: Instant,
    ) -> LocalBoxFuture<'_, Vec<BatchOffsets>>;

    /// Waits until everything stored below `through` is on stable storage.
    fn persist(&self, through: i64) -> LocalBoxFuture<'_, Result<(), KelpError>>;

    /// Whole batches from the one containing `offset`, below `end`, up to `max_bytes` but at
    /// least one (Kafka's first-batch rule): reads below the cache.
    fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        end: i64,
    ) -> LocalBoxFuture<'_, Result<Vec<Bytes>, KelpError>>;

    /// (timestamp, offset) of the first record at or after `from` and below `end` whose
    /// timestamp is at least `ts`, searching what is stored below the cache.
    fn find_timestamp(
        &self,
        ts: i64,
        from: i64,
        end: i64,
    ) -> LocalBoxFuture<'_, Result<Option<(i64, i64)>, KelpError>>;

    /// Forgets records below `offset` (DeleteRecords, retention), so that a restart keeps
    /// the new log start; resolves once that is durable. Engines that cannot refuse with a
    /// Kafka error.
    fn truncate_prefix(&self, offset: i64) -> LocalBoxFuture<'_, Result<(), KelpError>>;

    /// Whether records evicted from the cache can still be read here (false: they are gone,
    /// and the log start moves past them).
    fn keeps_evicted(&self) -> bool;

    /// Whether the partition's offsets are learned from the engine ([`Self::range`]) instead
    /// of being known from the start: the engine assigns them and others may append.
    fn learns_offsets(&self) -> bool {
        false
    }

    /// Whether reads below the cache ask another server: a Fetch then waits for them at
    /// most `--remote-fetch-max-wait-ms`, as Kafka waits for remote storage.
    fn reads_remote(&self) -> bool {
        false
    }

    /// How often a reader at the end of the partition asks the engine for records others
    /// appended; `None`: nobody else appends.
    fn refresh_every(&self) -> Option<Duration> {
        None
    }

    /// The engine's offsets of the partition, retried while it cannot answer, until
    /// `deadline`. Only called when [`Self::learns_offsets`].
    fn range(&self, deadline: Instant) -> LocalBoxFuture<'_, Result<Range, KelpError>> {
        let _ = deadline;
        Box::pin(futures::future::ready(Err(KelpError::Storage(
            "this engine keeps no offsets of its own".into(),
        ))))
    }

    /// The transaction state last saved for this partition ([`Self::save_transactions`]);
    /// None: never saved, so no transaction ever wrote here. Asked only of stores that learn
    /// their offsets: the others' partitions rebuild it from their log at start-up.
    fn load_transactions(&self) -> LocalBoxFuture<'_, Result<Option<TxnCheckpoint>, KelpError>> {
        Box::pin(futures::future::ready(Ok(None)))
    }

    /// Saves the partition's transaction state through an offset, durably before this
    /// resolves (stores that learn their offsets; the others keep nothing).
    fn save_transactions(&self, cp: TxnCheckpoint) -> LocalBoxFuture<'_, Result<(), KelpError>> {
        let _ = cp;
        Box::pin(futures::future::ready(Ok(())))
    }

    /// One log cleaner round if the partition's topic is compacted and due (dirty ratio,
    /// lag): what it did, or None when nothing ran. `facts` names each idempotent
    /// producer's last batch (by base offset), which stays whole, the last stable offset and
    /// the aborted transactions. Engines that keep no log of their own clean nothing.
    fn compact(
        &self,
        now_ms: i64,
        facts: PartitionFacts,
    ) -> LocalBoxFuture<'_, Option<Result<crate::log::cleaner::CleanReport, KelpError>>> {
        let _ = (now_ms, facts);
        Box::pin(futures::future::ready(None))
    }

    /// The log start retention asks for now, when it would move.
    fn retention_cut(&self, now_ms: i64) -> LocalBoxFuture<'_, Option<i64>> {
        let _ = now_ms;
        Box::pin(futures::future::ready(None))
    }

    /// Bytes the partition's log takes where the engine keeps it, when it knows cheaply
    /// (`kelp_partition_log_size_bytes`); None: it does not.
    fn log_size_bytes(&self) -> Option<u64> {
        None
    }

    /// Makes written data durable (the periodic flush of [`Background::flush_every`]).
    fn flush(&self) -> LocalBoxFuture<'_, Result<(), KelpError>> {
        Box::pin(futures::future::ready(Ok(())))
    }

    /// Deletes everything stored (the topic was deleted).
    fn remove(&self) {}

    /// The broker is stopping: leave the stored files as a restart expects to find them.
    fn close(&self) -> LocalBoxFuture<'_, ()> {
        Box::pin(futures::future::ready(()))
    }
}

/// A log directory as DescribeLogDirs shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogDirInfo {
    /// Its absolute path, or where the partitions live when not on this host.
    pub path: String,
    /// Bytes of each partition asked about, in the order asked (0: nothing written yet;
    /// -1: not known here).
    pub sizes: Vec<i64>,
    /// The size of its file system (-1: unknown).
    pub total_bytes: i64,
    /// What its file system has free for Kelp (-1: unknown).
    pub usable_bytes: i64,
}

impl LogDirInfo {
    /// Partitions kept at `location`, not in a directory of this host: sizes unknown.
    pub fn elsewhere(location: &str, partitions: usize) -> Self {
        LogDirInfo {
            path: location.to_string(),
            sizes: vec![-1; partitions],
            total_bytes: -1,
            usable_bytes: -1,
        }
    }
}

/// A storage engine: makes partition stores and keeps what is shared by a shard's
/// partitions (the topic catalog, the group offsets). One value for the whole broker,
/// shared by the shards.
pub trait Engine: Send + Sync {
    /// Store of a partition with no data yet.
    fn open(&self, topic: &str, partition: i32, meta: &TopicMeta) -> Rc<dyn PartitionStore>;

    /// The partitions found at start-up that `owns` accepts; `on_batch` sees every stored
    /// batch header of each, in offset order (the idempotent producers' state is rebuilt
    /// from them). None by default: engines that keep no partitions of their own, or whose
    /// partitions learn their offsets on first use.
    fn recover<'a>(
        &'a self,
        owns: &'a dyn Fn(&str, i32) -> bool,
        on_batch: &'a mut OnBatch<'a>,
    ) -> LocalBoxFuture<'a, anyhow::Result<Vec<Recovered>>> {
        let _ = (owns, on_batch);
        Box::pin(futures::future::ready(Ok(Vec::new())))
    }

    /// The store of group offsets of shard `shard` of `shards`.
    fn offset_store(
        &self,
        shard: usize,
        shards: usize,
    ) -> LocalBoxFuture<'_, anyhow::Result<Rc<dyn OffsetStore>>>;

    /// Whether a connection may start its next produce once this one's appends are queued
    /// (the engine keeps their order), rather than once they are answered.
    fn pipelines_produce(&self) -> bool;

    /// Where this engine keeps partition logs, with the bytes each of `partitions` takes
    /// there (DescribeLogDirs). Clients take an answer without a log directory for a
    /// refusal, so an engine without one on this host names where its partitions live.
    fn describe_log_dir(&self, partitions: Vec<(String, i32)>) -> LocalBoxFuture<'_, LogDirInfo>;

    /// Periodic work each shard runs for this engine.
    fn background(&self) -> Background {
        Background::default()
    }

    /// A topic created outside this broker (engines with a catalog of their own).
    fn lookup_topic<'a>(
        &'a self,
        name: &'a str,
    ) -> LocalBoxFuture<'a, Result<Option<TopicInfo>, KelpError>> {
        let _ = name;
        Box::pin(futures::future::ready(Ok(None)))
    }

    /// Creates a topic in the engine's catalog; `None`: the engine keeps none, and the
    /// broker's metadata assigns the id.
    fn create_topic<'a>(
        &'a self,
        name: &'a str,
        partitions: i32,
        configs: &'a BTreeMap<String, String>,
    ) -> LocalBoxFuture<'a, Result<Option<TopicInfo>, KelpError>> {
        let _ = (name, partitions, configs);
        Box::pin(futures::future::ready(Ok(None)))
    }

    /// Takes a block of `n` producer ids that no other broker over the same storage gets;
    /// `None`: the engine has no shared storage, and the broker counts on its own.
    fn allocate_producer_ids(
        &self,
        n: i64,
    ) -> LocalBoxFuture<'_, Result<Option<std::ops::Range<i64>>, KelpError>> {
        let _ = n;
        Box::pin(futures::future::ready(Ok(None)))
    }

    /// Stores a topic's config overrides in the engine's catalog, for engines that keep them
    /// there (others: the broker's metadata persists them).
    fn set_topic_configs<'a>(
        &'a self,
        name: &'a str,
        configs: &'a BTreeMap<String, String>,
    ) -> LocalBoxFuture<'a, Result<(), KelpError>> {
        let _ = (name, configs);
        Box::pin(futures::future::ready(Ok(())))
    }

    /// Stores a group's config overrides (all of them; empty: none) where the engine keeps
    /// them, for engines that keep them beside the data, shared by every node (SeaweedMQ's:
    /// records of [`crate::cluster::group_config::SPACE`], re-read by its topic refresh).
    /// Others keep nothing: the broker's metadata persists them (local) or holds them in
    /// memory (memory).
    fn set_group_configs<'a>(
        &'a self,
        group: &'a str,
        configs: &'a BTreeMap<String, String>,
    ) -> LocalBoxFuture<'a, Result<(), KelpError>> {
        let _ = (group, configs);
        Box::pin(futures::future::ready(Ok(())))
    }

    /// Every record of `space` (SCRAM credentials, ACLs: small, cluster-wide, rarely
    /// changed), by key, where the engine keeps its data (the memory engine: in the process),
    /// shared by every Kelp node over the same storage.
    fn records<'a>(
        &'a self,
        space: &'a str,
    ) -> LocalBoxFuture<'a, Result<crate::storage::Records, KelpError>>;

    /// Stores (`Some`) or deletes (`None`) the record `key` of `space`, durably before the
    /// future resolves. Records are written one by one, so writers of different keys never
    /// overwrite each other's.
    fn put_record<'a>(
        &'a self,
        space: &'a str,
        key: &'a str,
        value: Option<Vec<u8>>,
    ) -> LocalBoxFuture<'a, Result<(), KelpError>>;

    /// Makes room for partitions `from..to` of a topic (CreatePartitions) before the metadata
    /// shows them. Engines whose partitions open on first use need nothing.
    fn add_partitions<'a>(
        &'a self,
        name: &'a str,
        from: i32,
        to: i32,
    ) -> LocalBoxFuture<'a, Result<(), KelpError>> {
        let _ = (name, from, to);
        Box::pin(futures::future::ready(Ok(())))
    }

    /// Deletes a topic from the engine's catalog (its partitions' data goes with it).
    fn delete_topic<'a>(&'a self, name: &'a str) -> LocalBoxFuture<'a, Result<(), KelpError>> {
        let _ = name;
        Box::pin(futures::future::ready(Ok(())))
    }

    /// Publishes the engine's own counters on `/metrics`.
    fn register_metrics(&self, registry: &crate::metrics::Registry) {
        let _ = registry;
    }

    /// Called once every shard has stopped: finish what is in flight, within `limit`.
    fn shutdown(&self, limit: Duration) {
        let _ = limit;
    }
}

/// Records of one space, by key ([`Engine::records`]).
pub type Records = Vec<(String, Vec<u8>)>;

/// The file name of the record `key` (keys are any string; file names hex): one codec for
/// every engine that keeps records as files.
pub fn record_file(key: &str) -> String {
    crate::hex::encode(key.as_bytes())
}

/// The key of the record file `name`; None for a file that is no record's.
pub fn record_key(name: &str) -> Option<String> {
    String::from_utf8(crate::hex::decode(name)?).ok()
}

/// The broker's storage: the engine and the topic metadata it starts from.
pub struct Storage {
    /// The topic metadata (persisted where the engine keeps it).
    pub cluster: Arc<Cluster>,
    /// The engine every shard uses.
    pub engine: Arc<dyn Engine>,
}

/// Chooses the engine from `--storage`: the one place that asks which engine runs.
pub fn select(config: &Arc<Config>, shards: usize) -> anyhow::Result<Storage> {
    match config.storage {
        StorageKind::Memory => {
            let cluster = Arc::new(Cluster::new(config, shards));
            Ok(Storage {
                engine: Arc::new(memory::MemoryEngine::default()),
                cluster,
            })
        }
        StorageKind::Local => local::start(config.clone(), shards),
        StorageKind::Seaweedmq => seaweedmq::start(config.clone(), shards),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A topic `t` with one partition and these config overrides.
    pub(crate) fn topic(configs: &[(&str, &str)]) -> TopicMeta {
        TopicMeta {
            name: "t".into(),
            id: uuid::Uuid::nil(),
            partitions: 1,
            configs: configs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    #[test]
    fn compact_only_topics_are_not_deleted_by_time_or_size() {
        let unlimited = crate::log::retention::Retention { bytes: -1, ms: -1 };
        assert_eq!(
            retention_of(&topic(&[("cleanup.policy", "compact")])),
            unlimited
        );
        let both = retention_of(&topic(&[("cleanup.policy", "compact,delete")]));
        assert_eq!(both.ms, 604_800_000);
        let set = retention_of(&topic(&[("retention.bytes", "99")]));
        assert_eq!((set.bytes, set.ms), (99, 604_800_000));
    }

    #[test]
    fn record_keys_round_trip_through_file_names() {
        for k in ["alice", "User:CN=a,O=b", "x/../y", "ünï", ""] {
            assert_eq!(record_key(&record_file(k)).as_deref(), Some(k));
        }
        assert_eq!(record_key("abc"), None);
        assert_eq!(record_key("zz"), None);
        assert_eq!(record_key("626f62.tmp"), None);
    }
}
