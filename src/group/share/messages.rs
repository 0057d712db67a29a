//! Share group requests and answers as they travel between a connection's shard and the
//! group's coordinator shard (inside `group::GroupRequest` / `GroupReply`): owned, `Send`,
//! already checked for shape and ACLs by the API handlers.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use super::partition::{AckBatch, Acquired};
use super::session::SessionPartition;
use crate::error::KelpError;
use crate::group::consumer::TopicView;

/// A ShareGroupHeartbeat.
pub struct ShareHeartbeatIn {
    /// The member (client-chosen id).
    pub member_id: String,
    /// 0 join, -1 leave, else the member's epoch.
    pub member_epoch: i32,
    /// client.rack; None: unchanged.
    pub rack_id: Option<String>,
    /// Subscribed topic names; None: unchanged.
    pub topic_names: Option<Vec<String>>,
    /// The client's id and host ("/ip").
    pub client: (String, String),
    /// The cluster's topics as the connection's shard saw them.
    pub topics: Arc<dyn TopicView>,
}

impl std::fmt::Debug for ShareHeartbeatIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShareHeartbeatIn")
            .field("member_id", &self.member_id)
            .field("member_epoch", &self.member_epoch)
            .finish_non_exhaustive()
    }
}

/// One partition's acknowledgements: refused as a whole when malformed (`Err`), as Kafka
/// validates a partition's batches before applying any.
pub type PartitionAcks = (SessionPartition, Result<Vec<AckBatch>, KelpError>);

/// A ShareFetch (`fetch`) or ShareAcknowledge (not `fetch`).
#[derive(Debug)]
pub struct ShareFetchIn {
    /// The member.
    pub member_id: String,
    /// The connection it came over.
    pub connection: u64,
    /// The broker (node id) it was sent to.
    pub broker: i32,
    /// Its share session epoch.
    pub epoch: i32,
    /// Partitions added to the session (ShareFetch's topics).
    pub added: Vec<SessionPartition>,
    /// Partitions dropped from the session.
    pub forgotten: Vec<SessionPartition>,
    /// Acknowledgements, per partition.
    pub acks: Vec<PartitionAcks>,
    /// Whether records are wanted (ShareFetch) or only acknowledgements (ShareAcknowledge).
    pub fetch: bool,
    /// Longest wait for records.
    pub max_wait: Duration,
    /// Bytes of records that end the wait early.
    pub min_bytes: usize,
    /// Most bytes of records in the answer (the first batch always goes).
    pub max_bytes: usize,
    /// About how many records to acquire in all (a whole batch may overshoot).
    pub max_records: usize,
}

/// One partition of the answer.
#[derive(Debug, Default)]
pub struct SharePartitionOut {
    /// The partition.
    pub partition: SessionPartition,
    /// Why no records could be read.
    pub error: Option<KelpError>,
    /// The outcome of its acknowledgements, when it had some.
    pub ack: Option<Result<(), KelpError>>,
    /// Whole log batches covering the acquired records.
    pub records: Vec<Bytes>,
    /// What the member now holds.
    pub acquired: Vec<Acquired>,
}

/// The answer to a [`ShareFetchIn`].
#[derive(Debug, Default)]
pub struct ShareFetchOut {
    /// The partitions to list.
    pub partitions: Vec<SharePartitionOut>,
    /// The record lock duration in ms (AcquisitionLockTimeoutMs).
    pub lock_ms: i32,
}
