//! An [`OffsetStore`] that mirrors what it stores into the shard's
//! [`GroupOffsets`] gauges, so `/metrics` shows each
//! group's committed offsets and lag without asking the shard.
//!
//! Wraps whichever store the engine made; a commit shows once the store made it durable (a
//! transaction's offsets once its commit lands), deletions and groups that moved to another
//! node leave. Share groups' state, kept in the same store under their own keys, is left out.
//! Calls the wrapped store and `metrics`.

use std::rc::Rc;
use std::sync::Arc;

use futures::future::LocalBoxFuture;

use super::offsets::{CommittedOffset, OffsetStore, TopicPartition};
use super::share::state;
use crate::error::KelpError;
use crate::metrics::partitions::GroupOffsets;

/// A store whose committed offsets are published as gauges.
pub struct MeteredOffsets {
    inner: Rc<dyn OffsetStore>,
    gauges: Arc<GroupOffsets>,
}

/// The consumer offsets among `offsets` (share state keys left out), as gauge entries.
fn consumer_offsets<'a>(
    offsets: impl IntoIterator<Item = &'a (TopicPartition, CommittedOffset)>,
) -> Vec<(TopicPartition, i64)> {
    offsets
        .into_iter()
        .filter(|((t, _), _)| state::topic_of(t).is_none())
        .map(|(tp, o)| (tp.clone(), o.offset))
        .collect()
}

impl MeteredOffsets {
    /// Wraps `inner`, publishing what it already holds.
    pub fn new(inner: Rc<dyn OffsetStore>, gauges: Arc<GroupOffsets>) -> Self {
        for g in inner.groups() {
            gauges.replace(&g, consumer_offsets(&inner.fetch_all(&g)));
        }
        MeteredOffsets { inner, gauges }
    }
}

impl OffsetStore for MeteredOffsets {
    fn commit(
        &self,
        group: &str,
        offsets: Vec<(TopicPartition, CommittedOffset)>,
    ) -> LocalBoxFuture<'static, Result<(), KelpError>> {
        let shown = consumer_offsets(&offsets);
        let stored = self.inner.commit(group, offsets);
        let (gauges, group) = (self.gauges.clone(), group.to_string());
        Box::pin(async move {
            stored.await?;
            gauges.set(&group, shown);
            Ok(())
        })
    }

    fn fetch(&self, group: &str, tp: &TopicPartition) -> Option<CommittedOffset> {
        self.inner.fetch(group, tp)
    }

    fn fetch_all(&self, group: &str) -> Vec<(TopicPartition, CommittedOffset)> {
        self.inner.fetch_all(group)
    }

    fn delete(
        &self,
        group: &str,
        partitions: &[TopicPartition],
    ) -> LocalBoxFuture<'static, Result<(), KelpError>> {
        let deleted = self.inner.delete(group, partitions);
        let (gauges, group, partitions) =
            (self.gauges.clone(), group.to_string(), partitions.to_vec());
        Box::pin(async move {
            deleted.await?;
            gauges.remove(&group, &partitions);
            Ok(())
        })
    }

    fn delete_group(&self, group: &str) -> LocalBoxFuture<'static, Result<(), KelpError>> {
        let deleted = self.inner.delete_group(group);
        let (gauges, group) = (self.gauges.clone(), group.to_string());
        Box::pin(async move {
            deleted.await?;
            gauges.remove_group(&group);
            Ok(())
        })
    }

    fn groups(&self) -> Vec<String> {
        self.inner.groups()
    }

    fn reload(&self, group: &str) -> LocalBoxFuture<'static, Result<(), KelpError>> {
        let reloaded = self.inner.reload(group);
        let (inner, gauges, group) = (self.inner.clone(), self.gauges.clone(), group.to_string());
        Box::pin(async move {
            reloaded.await?;
            gauges.replace(&group, consumer_offsets(&inner.fetch_all(&group)));
            Ok(())
        })
    }

    fn forget(&self, group: &str) {
        self.inner.forget(group);
        self.gauges.remove_group(group);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::InMemoryOffsetStore;
    use crate::metrics::ShardStats;

    fn off(o: i64) -> CommittedOffset {
        CommittedOffset::committed(o, -1, None, 0)
    }

    fn shown(stats: &Arc<ShardStats>) -> String {
        let mut out = String::new();
        crate::metrics::partitions::render(&mut out, std::slice::from_ref(stats));
        out.lines()
            .filter(|l| l.starts_with("kelp_consumer_group_committed_offset{"))
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn commits_deletes_and_moves_show_in_the_gauges() {
        let inner: Rc<dyn OffsetStore> = Rc::new(InMemoryOffsetStore::default());
        futures::executor::block_on(inner.commit("old", vec![(("t".into(), 0), off(5))])).unwrap();
        let stats = Arc::new(ShardStats::new(0, 0));
        let store = MeteredOffsets::new(inner, stats.group_offsets.clone());
        assert_eq!(
            shown(&stats),
            "kelp_consumer_group_committed_offset{group=\"old\",topic=\"t\",partition=\"0\"} 5"
        );
        let share_key = state::key("t");
        futures::executor::block_on(store.commit(
            "g",
            vec![
                (("t".into(), 0), off(7)),
                (("t".into(), 1), off(9)),
                ((share_key, 0), off(1)),
            ],
        ))
        .unwrap();
        let text = shown(&stats);
        assert!(
            text.contains("{group=\"g\",topic=\"t\",partition=\"1\"} 9"),
            "{text}"
        );
        assert!(!text.contains("share"), "{text}");
        futures::executor::block_on(store.delete("g", &[("t".into(), 1)])).unwrap();
        assert!(!shown(&stats).contains("partition=\"1\""));
        store.forget("old");
        assert!(!shown(&stats).contains("old"));
        futures::executor::block_on(store.delete_group("g")).unwrap();
        assert_eq!(shown(&stats), "");
    }
}
