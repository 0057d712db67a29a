//! Committed group offsets stored on the SeaweedFS filer, where SeaweedFS's Go Kafka gateway
//! keeps them (`/topics/kafka/.meta/consumer_offsets/<group>/<topic>/<partition>/offset`),
//! so both gateways serve the same groups.
//!
//! Reads come from an in-memory index filled at start-up with the offsets of the groups this
//! shard coordinates, and again for one group when it moves here from another Kelp node; a
//! commit is answered once the filer stored it. Used by `group/` on the
//! shard's thread; calls the [`ForwarderHandle`].

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;

use futures::future::LocalBoxFuture;

use crate::error::KelpError;
use crate::forwarder::ForwarderHandle;
use crate::group::offsets::{CommittedOffset, InMemoryOffsetStore, OffsetStore, TopicPartition};

/// Group offsets on the filer, indexed in memory.
pub struct FilerOffsetStore {
    fwd: Arc<ForwarderHandle>,
    mem: Rc<InMemoryOffsetStore>,
}

impl FilerOffsetStore {
    /// Loads the stored offsets of the groups `owns` accepts (only theirs are read).
    pub async fn open(
        fwd: Arc<ForwarderHandle>,
        owns: impl Fn(&str) -> bool + Send + 'static,
    ) -> Result<Self, KelpError> {
        let mem = Rc::new(InMemoryOffsetStore::default());
        let mut by_group: BTreeMap<String, Vec<(TopicPartition, CommittedOffset)>> =
            BTreeMap::new();
        for (group, tp, o) in fwd.load_offsets(Box::new(owns)).await? {
            by_group.entry(group).or_default().push((tp, o));
        }
        for (group, offsets) in by_group {
            // The in-memory store answers at once.
            mem.commit(&group, offsets).await?;
        }
        Ok(FilerOffsetStore { fwd, mem })
    }
}

impl OffsetStore for FilerOffsetStore {
    fn commit(
        &self,
        group: &str,
        offsets: Vec<(TopicPartition, CommittedOffset)>,
    ) -> LocalBoxFuture<'static, Result<(), KelpError>> {
        let (fwd, mem, group) = (self.fwd.clone(), self.mem.clone(), group.to_string());
        Box::pin(async move {
            fwd.commit_offsets(&group, offsets.clone()).await?;
            mem.commit(&group, offsets).await
        })
    }

    fn fetch(&self, group: &str, tp: &TopicPartition) -> Option<CommittedOffset> {
        self.mem.fetch(group, tp)
    }

    fn fetch_all(&self, group: &str) -> Vec<(TopicPartition, CommittedOffset)> {
        self.mem.fetch_all(group)
    }

    fn delete(
        &self,
        group: &str,
        partitions: &[TopicPartition],
    ) -> LocalBoxFuture<'static, Result<(), KelpError>> {
        let (fwd, mem, group) = (self.fwd.clone(), self.mem.clone(), group.to_string());
        let partitions = partitions.to_vec();
        Box::pin(async move {
            fwd.delete_offsets(&group, partitions.clone()).await?;
            mem.delete(&group, &partitions).await
        })
    }

    fn delete_group(&self, group: &str) -> LocalBoxFuture<'static, Result<(), KelpError>> {
        let (fwd, mem, group) = (self.fwd.clone(), self.mem.clone(), group.to_string());
        Box::pin(async move {
            fwd.delete_group(&group).await?;
            mem.delete_group(&group).await
        })
    }

    fn groups(&self) -> Vec<String> {
        self.mem.groups()
    }

    fn reload(&self, group: &str) -> LocalBoxFuture<'static, Result<(), KelpError>> {
        let (fwd, mem, group) = (self.fwd.clone(), self.mem.clone(), group.to_string());
        Box::pin(async move {
            let stored: Vec<_> = fwd
                .load_group_offsets(&group)
                .await?
                .into_iter()
                .map(|(_, tp, o)| (tp, o))
                .collect();
            mem.delete_group(&group).await?;
            mem.commit(&group, stored).await
        })
    }

    fn forget(&self, group: &str) {
        // In memory only: completes at once.
        drop(self.mem.delete_group(group));
    }
}
