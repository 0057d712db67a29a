//! The SeaweedMQ forwarder (`--storage seaweedmq`): one thread, pinned to `--forwarder-core`,
//! running a tokio runtime with the gRPC clients of `kelp-storage-client`.
//!
//! Shards (glommio executors) talk to it only through [`ForwarderHandle`]: each call sends a
//! [`Command`] over a bounded tokio channel and awaits a oneshot reply; both are
//! executor-agnostic. Publishes also hold permits of a byte semaphore, so the memory of
//! in-flight forwards is bounded: when SeaweedMQ is slow or down, Produce waits for room,
//! then fails with a retriable error. The forwarder owns the connections, partition routes,
//! one publisher per partition ([`publisher`]), cold reads, topic management and the group
//! offsets on the filer ([`client`]). It calls `cluster/` to publish topics it finds.

pub mod client;
pub mod cluster_records;
pub mod envelope;
pub mod filer_log;
pub mod filer_offsets;
pub mod group_configs;
pub mod log_start;
pub mod membership;
pub mod ownership;
pub mod producer_ids;
pub mod producer_journal;
pub mod publisher;
pub mod reads;
pub mod records;
pub mod tied;
pub mod topic_configs;
pub mod topic_refresh;
pub mod topics;
pub mod txn_index;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore};

use crate::cluster::Cluster;
use crate::config::Config;
use crate::error::KelpError;
use crate::group::offsets::{CommittedOffset, TopicPartition};
use crate::metrics::ForwarderStats;

/// Record files of one space: (file name, contents).
pub type RecordFiles = Vec<(String, Vec<u8>)>;

/// Capacity of the shard → forwarder command channel.
const COMMAND_QUEUE: usize = 4096;

/// Byte semaphore granularity: one permit per KiB keeps counts within u32.
const PERMIT_BYTES: usize = 1024;

/// Result of publishing one batch: SeaweedMQ's first and last assigned offsets.
pub type BatchOffsets = Result<(i64, i64), KelpError>;

/// A topic as SeaweedMQ knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicInfo {
    /// The Kafka topic name (SeaweedMQ's `kafka/<name>`).
    pub name: String,
    /// Partition count.
    pub partitions: i32,
    /// Stable id: derived from the name and SeaweedMQ's partition generation, so every Kelp
    /// (and every restart) reports the same id for the same topic incarnation.
    pub id: uuid::Uuid,
    /// Its Kafka config overrides, as stored on the filer ([`topic_configs`]).
    pub configs: std::collections::BTreeMap<String, String>,
}

/// Batches read below the cache, re-encoded.
#[derive(Debug, Default)]
pub struct FetchOut {
    /// Whole batches, offsets as SeaweedMQ assigned them.
    pub batches: Vec<Bytes>,
    /// SeaweedMQ's high water mark when read.
    pub high_watermark: i64,
}

/// Group offsets loaded from the filer: (group, partition, offset).
pub type LoadedOffsets = Vec<(String, TopicPartition, CommittedOffset)>;

/// Which groups a load is for, by name (the groups a shard coordinates).
pub type GroupFilter = Box<dyn Fn(&str) -> bool + Send>;

/// What a shard asks the forwarder. The fields of each variant are the arguments of the
/// [`ForwarderHandle`] method that sends it, and `reply` carries its result.
#[allow(
    missing_docs,
    reason = "variant fields: the arguments of the sending ForwarderHandle method"
)]
pub enum Command {
    /// Publish batches to a partition ([`ForwarderHandle::publish`]).
    Publish {
        topic: String,
        partition: i32,
        batches: Vec<Bytes>,
        deadline: Instant,
        permit: OwnedSemaphorePermit,
        reply: oneshot::Sender<Vec<BatchOffsets>>,
    },
    /// Read below the cache ([`ForwarderHandle::fetch`]).
    Fetch {
        topic: String,
        partition: i32,
        offset: i64,
        max_bytes: usize,
        /// Offsets from here on are not read (Kelp's high watermark).
        end: i64,
        reply: oneshot::Sender<Result<FetchOut, KelpError>>,
    },
    /// (earliest offset, high water mark), retried while SeaweedMQ cannot answer, until
    /// `deadline`.
    Range {
        topic: String,
        partition: i32,
        deadline: Instant,
        reply: oneshot::Sender<Result<(i64, i64), KelpError>>,
    },
    /// Move a partition's logical log start ([`ForwarderHandle::set_log_start`]).
    SetLogStart {
        topic: String,
        partition: i32,
        offset: i64,
        reply: oneshot::Sender<Result<i64, KelpError>>,
    },
    /// Read a partition's transaction state ([`ForwarderHandle::load_txns`]).
    LoadTxns {
        topic: String,
        partition: i32,
        reply: oneshot::Sender<Result<Option<crate::txn::checkpoint::TxnCheckpoint>, KelpError>>,
    },
    /// Save a partition's transaction state ([`ForwarderHandle::save_txns`]).
    SaveTxns {
        topic: String,
        partition: i32,
        checkpoint: crate::txn::checkpoint::TxnCheckpoint,
        reply: oneshot::Sender<Result<(), KelpError>>,
    },
    /// Create `kafka/<name>` ([`ForwarderHandle::create_topic`]).
    CreateTopic {
        name: String,
        partitions: i32,
        configs: std::collections::BTreeMap<String, String>,
        reply: oneshot::Sender<Result<TopicInfo, KelpError>>,
    },
    /// List a partition's flushed log files ([`ForwarderHandle::flushed_files`]).
    FlushedFiles {
        topic: String,
        partition: i32,
        reply: oneshot::Sender<Result<Vec<filer_log::FlushedFile>, KelpError>>,
    },
    /// Take a block of producer ids ([`ForwarderHandle::allocate_producer_ids`]).
    AllocateProducerIds {
        n: i64,
        reply: oneshot::Sender<Result<std::ops::Range<i64>, KelpError>>,
    },
    /// Store a topic's config overrides ([`ForwarderHandle::set_topic_configs`]).
    SetTopicConfigs {
        name: String,
        configs: std::collections::BTreeMap<String, String>,
        reply: oneshot::Sender<Result<(), KelpError>>,
    },
    /// Read a space of cluster-wide records ([`ForwarderHandle::records`]).
    Records {
        space: String,
        reply: oneshot::Sender<Result<RecordFiles, KelpError>>,
    },
    /// Write or delete one record ([`ForwarderHandle::put_record`]).
    PutRecord {
        space: String,
        name: String,
        value: Option<Vec<u8>>,
        reply: oneshot::Sender<Result<(), KelpError>>,
    },
    /// Find `kafka/<name>` ([`ForwarderHandle::lookup_topic`]).
    LookupTopic {
        name: String,
        reply: oneshot::Sender<Result<Option<TopicInfo>, KelpError>>,
    },
    /// Delete `kafka/<name>` ([`ForwarderHandle::delete_topic`]).
    DeleteTopic {
        name: String,
        reply: oneshot::Sender<Result<(), KelpError>>,
    },
    /// Store a group's committed offsets on the filer.
    CommitOffsets {
        group: String,
        offsets: Vec<(TopicPartition, CommittedOffset)>,
        reply: oneshot::Sender<Result<(), KelpError>>,
    },
    /// Remove some partitions' committed offsets of a group.
    DeleteOffsets {
        group: String,
        partitions: Vec<TopicPartition>,
        reply: oneshot::Sender<Result<(), KelpError>>,
    },
    /// Remove every committed offset of a group.
    DeleteGroup {
        group: String,
        reply: oneshot::Sender<Result<(), KelpError>>,
    },
    /// Load the offsets stored on the filer of every group `owns` accepts (start-up).
    LoadOffsets {
        owns: GroupFilter,
        reply: oneshot::Sender<Result<LoadedOffsets, KelpError>>,
    },
    /// Load one group's offsets from the filer (a group that moved to this node).
    LoadGroupOffsets {
        group: String,
        reply: oneshot::Sender<Result<LoadedOffsets, KelpError>>,
    },
    /// Shutting down: answer once publishes are done and SeaweedMQ's offset checkpoint has
    /// had time to cover them (see [`ForwarderHandle::drain`]).
    Drain { reply: oneshot::Sender<()> },
}

/// The shards' side of the forwarder. Cheap to share (`Arc`); every method may be awaited
/// from any executor.
pub struct ForwarderHandle {
    tx: mpsc::Sender<Command>,
    inflight: Arc<Semaphore>,
    max_inflight_permits: u32,
    timeout: Duration,
    /// Counters published on `/metrics`.
    pub stats: Arc<ForwarderStats>,
}

fn unavailable() -> KelpError {
    KelpError::Storage("the SeaweedMQ forwarder is not running".into())
}

impl ForwarderHandle {
    async fn call<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<Result<T, KelpError>>) -> Command,
    ) -> Result<T, KelpError> {
        let (tx, rx) = oneshot::channel();
        self.send(make(tx)).await?;
        rx.await.map_err(|_| unavailable())?
    }

    async fn send(&self, cmd: Command) -> Result<(), KelpError> {
        self.stats.queued.fetch_add(1, Ordering::Relaxed);
        let r = self.tx.send(cmd).await.map_err(|_| unavailable());
        if r.is_err() {
            self.stats.queued.fetch_sub(1, Ordering::Relaxed);
        }
        r
    }

    /// Publishes batches (offsets already rewritten with Kelp's prediction) to a partition
    /// and returns SeaweedMQ's offsets per batch. Waits at most `timeout` (capped by
    /// `--forwarder-timeout-ms`), including the wait for in-flight room.
    pub async fn publish(
        &self,
        topic: &str,
        partition: i32,
        batches: Vec<Bytes>,
        timeout: Duration,
    ) -> Vec<BatchOffsets> {
        let n = batches.len();
        let fail = |e: KelpError| vec![Err(e); n];
        let deadline = Instant::now() + timeout.min(self.timeout);
        let bytes: usize = batches.iter().map(Bytes::len).sum();
        let permits = (bytes.div_ceil(PERMIT_BYTES) as u32).clamp(1, self.max_inflight_permits);
        let acquire = self.inflight.clone().acquire_many_owned(permits);
        let permit = match crate::deadline::until(acquire, deadline).await {
            Some(Ok(p)) => p,
            Some(Err(_)) => return fail(unavailable()),
            None => {
                tracing::warn!(
                    topic,
                    partition,
                    bytes,
                    "produce timed out waiting for forwarder memory"
                );
                return fail(KelpError::RequestTimedOut);
            }
        };
        self.stats
            .inflight_bytes
            .fetch_add(bytes as i64, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        let sent = self
            .send(Command::Publish {
                topic: topic.to_string(),
                partition,
                batches,
                deadline,
                permit,
                reply: tx,
            })
            .await;
        let out = match sent {
            Ok(()) => rx.await.unwrap_or_else(|_| fail(unavailable())),
            Err(e) => fail(e),
        };
        self.stats
            .inflight_bytes
            .fetch_sub(bytes as i64, Ordering::Relaxed);
        out
    }

    /// Reads `[offset, end)` below the cache, at most about `max_bytes` (at least one record).
    pub async fn fetch(
        &self,
        topic: &str,
        partition: i32,
        offset: i64,
        max_bytes: usize,
        end: i64,
    ) -> Result<FetchOut, KelpError> {
        self.call(|reply| Command::Fetch {
            topic: topic.to_string(),
            partition,
            offset,
            max_bytes,
            end,
            reply,
        })
        .await
    }

    /// (earliest offset, high water mark) of a partition. While SeaweedMQ cannot answer
    /// (leader unreachable or moving) the forwarder retries with backoff until `deadline`,
    /// then returns the last [`KelpError::StorageUnavailable`]; other errors come at once.
    pub async fn range(
        &self,
        topic: &str,
        partition: i32,
        deadline: Instant,
    ) -> Result<(i64, i64), KelpError> {
        self.call(|reply| Command::Range {
            topic: topic.to_string(),
            partition,
            deadline,
            reply,
        })
        .await
    }

    /// Moves a partition's log start up to `offset` (DeleteRecords), durably; returns the
    /// log start now in force.
    pub async fn set_log_start(
        &self,
        topic: &str,
        partition: i32,
        offset: i64,
    ) -> Result<i64, KelpError> {
        self.call(|reply| Command::SetLogStart {
            topic: topic.to_string(),
            partition,
            offset,
            reply,
        })
        .await
    }

    /// A partition's saved transaction state (None: no transaction ever wrote to it).
    pub async fn load_txns(
        &self,
        topic: &str,
        partition: i32,
    ) -> Result<Option<crate::txn::checkpoint::TxnCheckpoint>, KelpError> {
        self.call(|reply| Command::LoadTxns {
            topic: topic.to_string(),
            partition,
            reply,
        })
        .await
    }

    /// Saves a partition's transaction state, durably.
    pub async fn save_txns(
        &self,
        topic: &str,
        partition: i32,
        checkpoint: crate::txn::checkpoint::TxnCheckpoint,
    ) -> Result<(), KelpError> {
        self.call(|reply| Command::SaveTxns {
            topic: topic.to_string(),
            partition,
            checkpoint,
            reply,
        })
        .await
    }

    /// Creates `kafka/<name>` with `partitions` partitions and its config overrides;
    /// TopicAlreadyExists if present.
    pub async fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        configs: std::collections::BTreeMap<String, String>,
    ) -> Result<TopicInfo, KelpError> {
        self.call(|reply| Command::CreateTopic {
            name: name.to_string(),
            partitions,
            configs,
            reply,
        })
        .await
    }

    /// A partition's flushed log files in SeaweedMQ, oldest first (retention decides on them).
    pub async fn flushed_files(
        &self,
        topic: &str,
        partition: i32,
    ) -> Result<Vec<filer_log::FlushedFile>, KelpError> {
        self.call(|reply| Command::FlushedFiles {
            topic: topic.to_string(),
            partition,
            reply,
        })
        .await
    }

    /// Takes `n` producer ids no other Kelp over this SeaweedMQ gets.
    pub async fn allocate_producer_ids(&self, n: i64) -> Result<std::ops::Range<i64>, KelpError> {
        self.call(|reply| Command::AllocateProducerIds { n, reply })
            .await
    }

    /// Replaces a topic's config overrides, durably on the filer.
    pub async fn set_topic_configs(
        &self,
        name: &str,
        configs: std::collections::BTreeMap<String, String>,
    ) -> Result<(), KelpError> {
        self.call(|reply| Command::SetTopicConfigs {
            name: name.to_string(),
            configs,
            reply,
        })
        .await
    }

    /// Every record file of `space` (name, contents), from this cluster's directory on the
    /// filer.
    pub async fn records(&self, space: &str) -> Result<RecordFiles, KelpError> {
        self.call(|reply| Command::Records {
            space: space.to_string(),
            reply,
        })
        .await
    }

    /// Writes (`Some`) or deletes (`None`) the record file `name` of `space` on the filer.
    pub async fn put_record(
        &self,
        space: &str,
        name: &str,
        value: Option<Vec<u8>>,
    ) -> Result<(), KelpError> {
        self.call(|reply| Command::PutRecord {
            space: space.to_string(),
            name: name.to_string(),
            value,
            reply,
        })
        .await
    }

    /// The topic `kafka/<name>`, if SeaweedMQ has it.
    pub async fn lookup_topic(&self, name: &str) -> Result<Option<TopicInfo>, KelpError> {
        self.call(|reply| Command::LookupTopic {
            name: name.to_string(),
            reply,
        })
        .await
    }

    /// Deletes `kafka/<name>` (its directory on the filer).
    pub async fn delete_topic(&self, name: &str) -> Result<(), KelpError> {
        self.call(|reply| Command::DeleteTopic {
            name: name.to_string(),
            reply,
        })
        .await
    }

    /// Stores committed offsets where the Go gateway keeps them.
    pub async fn commit_offsets(
        &self,
        group: &str,
        offsets: Vec<(TopicPartition, CommittedOffset)>,
    ) -> Result<(), KelpError> {
        self.call(|reply| Command::CommitOffsets {
            group: group.to_string(),
            offsets,
            reply,
        })
        .await
    }

    /// Removes some partitions' committed offsets of a group.
    pub async fn delete_offsets(
        &self,
        group: &str,
        partitions: Vec<TopicPartition>,
    ) -> Result<(), KelpError> {
        self.call(|reply| Command::DeleteOffsets {
            group: group.to_string(),
            partitions,
            reply,
        })
        .await
    }

    /// Removes every committed offset of a group.
    pub async fn delete_group(&self, group: &str) -> Result<(), KelpError> {
        self.call(|reply| Command::DeleteGroup {
            group: group.to_string(),
            reply,
        })
        .await
    }

    /// The offsets stored on the filer of every group `owns` accepts: the other groups'
    /// files are not read.
    pub async fn load_offsets(&self, owns: GroupFilter) -> Result<LoadedOffsets, KelpError> {
        self.call(|reply| Command::LoadOffsets { owns, reply })
            .await
    }

    /// One group's offsets stored on the filer.
    pub async fn load_group_offsets(&self, group: &str) -> Result<LoadedOffsets, KelpError> {
        let group = group.to_string();
        self.call(|reply| Command::LoadGroupOffsets { group, reply })
            .await
    }
}

impl ForwarderHandle {
    /// Called from the main thread once the shards stopped: waits (at most `limit`) until no
    /// publish is in flight and [`client::CHECKPOINT_GRACE`] has passed since SeaweedMQ's last
    /// acknowledgement. Closing the publish streams makes the broker unload the partitions, and
    /// a reloaded partition takes its next offset from a checkpoint written every 2 s: closing
    /// sooner would let SeaweedMQ hand out offsets Kelp already used.
    pub fn drain(&self, limit: Duration) {
        let (tx, rx) = oneshot::channel();
        if self.tx.blocking_send(Command::Drain { reply: tx }).is_err() {
            return;
        }
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = rx.blocking_recv();
            let _ = done_tx.send(());
        });
        if done_rx.recv_timeout(limit).is_err() {
            tracing::warn!("SeaweedMQ forwarder did not drain in time");
        }
    }
}

/// Starts the forwarder thread and waits until SeaweedMQ answers (bounded by
/// `--seaweedmq-connect-timeout-ms`) and its Kafka topics are in `cluster`.
pub fn start(config: Arc<Config>, cluster: Arc<Cluster>) -> anyhow::Result<Arc<ForwarderHandle>> {
    let settings = client::Settings::from_config(&config)?;
    let (tx, rx) = mpsc::channel(COMMAND_QUEUE);
    let stats = Arc::new(ForwarderStats::default());
    let max_permits = (config.forwarder_max_inflight_bytes.div_ceil(PERMIT_BYTES))
        .clamp(1, Semaphore::MAX_PERMITS.min(u32::MAX as usize)) as u32;
    let handle = Arc::new(ForwarderHandle {
        tx,
        inflight: Arc::new(Semaphore::new(max_permits as usize)),
        max_inflight_permits: max_permits,
        timeout: Duration::from_millis(config.forwarder_timeout_ms.max(1)),
        stats: stats.clone(),
    });
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(), String>>();
    let core = config.forwarder_core;
    std::thread::Builder::new()
        .name("kelp-forwarder".into())
        .spawn(move || {
            if let Some(core) = core {
                if !core_affinity::set_for_current(core_affinity::CoreId { id: core }) {
                    tracing::warn!(core, "could not pin the forwarder thread");
                }
            }
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = ready_tx.send(Err(format!("tokio runtime: {e}")));
                    return;
                }
            };
            let local = tokio::task::LocalSet::new();
            local.block_on(&rt, client::run(settings, cluster, stats, rx, ready_tx));
        })?;
    match ready_rx.recv() {
        Ok(Ok(())) => Ok(handle),
        Ok(Err(e)) => anyhow::bail!("SeaweedMQ: {e}"),
        Err(_) => anyhow::bail!("the SeaweedMQ forwarder thread died during start-up"),
    }
}
