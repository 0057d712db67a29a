//! Committed offsets of the groups a shard coordinates, behind the [`OffsetStore`] trait.
//!
//! The in-memory store answers commits at once. A durable store (on the embedded log) keeps
//! the same in-memory index for reads, appends commits to its log and completes the commit
//! future only once the record is durable; it rebuilds the index from its log at start-up.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};

use futures::future::{ready, LocalBoxFuture};

use crate::error::KelpError;

/// One committed offset.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CommittedOffset {
    /// The next offset the group will consume.
    pub offset: i64,
    /// The leader epoch the client saw (-1 if none), returned as given.
    pub leader_epoch: i32,
    /// Free-form client metadata, returned as given.
    pub metadata: String,
    /// When it was committed, in ms since the epoch.
    pub commit_timestamp_ms: i64,
}

impl CommittedOffset {
    /// An offset as OffsetCommit and TxnOffsetCommit send it, committed at `now_ms`.
    pub fn committed(offset: i64, leader_epoch: i32, metadata: Option<&str>, now_ms: i64) -> Self {
        CommittedOffset {
            offset,
            leader_epoch,
            metadata: metadata.unwrap_or_default().to_string(),
            commit_timestamp_ms: now_ms,
        }
    }
}

/// (topic, partition).
pub type TopicPartition = (String, i32);

/// Where one shard's committed offsets live. Used only from the shard's own thread.
pub trait OffsetStore {
    /// Stores `offsets` for `group`; completes once they are durable, and only then are they
    /// visible to [`OffsetStore::fetch`].
    fn commit(
        &self,
        group: &str,
        offsets: Vec<(TopicPartition, CommittedOffset)>,
    ) -> LocalBoxFuture<'static, Result<(), KelpError>>;

    /// The committed offset of one partition.
    fn fetch(&self, group: &str, tp: &TopicPartition) -> Option<CommittedOffset>;

    /// Every committed offset of `group`, ordered by topic and partition.
    fn fetch_all(&self, group: &str) -> Vec<(TopicPartition, CommittedOffset)>;

    /// Removes the offsets of some partitions of `group` (OffsetDelete).
    fn delete(
        &self,
        group: &str,
        partitions: &[TopicPartition],
    ) -> LocalBoxFuture<'static, Result<(), KelpError>>;

    /// Removes every offset of `group` (DeleteGroups).
    fn delete_group(&self, group: &str) -> LocalBoxFuture<'static, Result<(), KelpError>>;

    /// Groups with at least one committed offset.
    fn groups(&self) -> Vec<String>;

    /// Reads `group`'s offsets again from where every node writes them (the group moved to
    /// this node, and others committed meanwhile). Stores only this node writes: nothing.
    fn reload(&self, _group: &str) -> LocalBoxFuture<'static, Result<(), KelpError>> {
        Box::pin(ready(Ok(())))
    }

    /// Forgets what this node keeps of `group` without deleting it where it is stored (the
    /// group moved to another node). Stores only this node writes: nothing.
    fn forget(&self, _group: &str) {}
}

/// Offsets kept in memory only: lost on restart.
#[derive(Default)]
pub struct InMemoryOffsetStore {
    groups: RefCell<HashMap<String, BTreeMap<TopicPartition, CommittedOffset>>>,
}

impl OffsetStore for InMemoryOffsetStore {
    fn commit(
        &self,
        group: &str,
        offsets: Vec<(TopicPartition, CommittedOffset)>,
    ) -> LocalBoxFuture<'static, Result<(), KelpError>> {
        let mut groups = self.groups.borrow_mut();
        let g = groups.entry(group.to_string()).or_default();
        g.extend(offsets);
        Box::pin(ready(Ok(())))
    }

    fn fetch(&self, group: &str, tp: &TopicPartition) -> Option<CommittedOffset> {
        self.groups.borrow().get(group)?.get(tp).cloned()
    }

    fn fetch_all(&self, group: &str) -> Vec<(TopicPartition, CommittedOffset)> {
        self.groups
            .borrow()
            .get(group)
            .map(|g| g.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default()
    }

    fn delete(
        &self,
        group: &str,
        partitions: &[TopicPartition],
    ) -> LocalBoxFuture<'static, Result<(), KelpError>> {
        let mut groups = self.groups.borrow_mut();
        if let Some(g) = groups.get_mut(group) {
            for tp in partitions {
                g.remove(tp);
            }
            if g.is_empty() {
                groups.remove(group);
            }
        }
        Box::pin(ready(Ok(())))
    }

    fn delete_group(&self, group: &str) -> LocalBoxFuture<'static, Result<(), KelpError>> {
        self.groups.borrow_mut().remove(group);
        Box::pin(ready(Ok(())))
    }

    fn groups(&self) -> Vec<String> {
        self.groups.borrow().keys().cloned().collect()
    }
}
