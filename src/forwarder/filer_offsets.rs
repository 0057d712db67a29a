//! Group offsets on the filer for the forwarder: commits, deletes and the start-up load of
//! `/topics/kafka/.meta/consumer_offsets/<group>/<topic>/<partition>/offset`, the JSON files
//! SeaweedFS's Go gateway reads and writes. Runs on the forwarder thread; the shards' side is
//! `storage::seaweedmq::offsets` (named, not linked: the forwarder does not reach up into storage).

use futures::{StreamExt, TryStreamExt};
use kelp_storage_client::{filer, group_offsets};

use super::client::{storage, Forwarder};
use super::{GroupFilter, LoadedOffsets};
use crate::error::KelpError;
use crate::group::offsets::{CommittedOffset, TopicPartition};

/// Groups whose offsets a start-up load reads at the same time.
const LOAD_GROUPS_AT_ONCE: usize = 16;

impl Forwarder {
    pub(super) async fn commit_offsets(
        &self,
        group: &str,
        offsets: Vec<(TopicPartition, CommittedOffset)>,
    ) -> Result<(), KelpError> {
        let mut f = self.filer_client()?;
        for ((topic, p), o) in offsets {
            let dir = group_offsets::dir(group, &topic, p);
            let body = group_offsets::encode(o.offset, o.commit_timestamp_ms, &o.metadata);
            filer::write_file(&mut f, &dir, group_offsets::FILE_NAME, body)
                .await
                .map_err(|e| storage("writing a group offset", e))?;
        }
        Ok(())
    }

    pub(super) async fn delete_offsets(
        &self,
        group: &str,
        tps: Vec<TopicPartition>,
    ) -> Result<(), KelpError> {
        let mut f = self.filer_client()?;
        for (topic, p) in tps {
            let dir = group_offsets::dir(group, &topic, p);
            filer::delete(&mut f, &dir, group_offsets::FILE_NAME, false)
                .await
                .map_err(|e| storage("deleting a group offset", e))?;
        }
        Ok(())
    }

    pub(super) async fn delete_group(&self, group: &str) -> Result<(), KelpError> {
        let mut f = self.filer_client()?;
        filer::delete(&mut f, group_offsets::ROOT, group, true)
            .await
            .map_err(|e| storage("deleting a group", e))
    }

    /// Reads the `<root>/<group>/<topic>/<partition>/offset` files of every group `owns`
    /// accepts, [`LOAD_GROUPS_AT_ONCE`] groups at a time: a group costs a filer round trip per
    /// topic and per partition, and every shard starts by loading its groups, so read one
    /// after the other a filer holding a few hundred groups kept a shard from serving for
    /// over 30 s (the e2e suite's SeaweedFS near the end of its pass, on a busy machine).
    pub(super) async fn load_offsets(&self, owns: GroupFilter) -> Result<LoadedOffsets, KelpError> {
        let mut f = self.filer_client()?;
        let groups: Vec<String> = filer::list(&mut f, group_offsets::ROOT)
            .await
            .map_err(|e| storage("reading group offsets", e))?
            .into_iter()
            .map(|g| g.name)
            .filter(|g| owns(g))
            .collect();
        let loaded: Vec<LoadedOffsets> = futures::stream::iter(groups)
            .map(|g| async move { self.load_group_offsets(&g).await })
            .buffer_unordered(LOAD_GROUPS_AT_ONCE)
            .try_collect()
            .await?;
        Ok(loaded.into_iter().flatten().collect())
    }

    /// Reads one group's `<root>/<group>/<topic>/<partition>/offset` files.
    pub(super) async fn load_group_offsets(&self, group: &str) -> Result<LoadedOffsets, KelpError> {
        let mut f = self.filer_client()?;
        let err = |e| storage("reading group offsets", e);
        let mut out = Vec::new();
        let gdir = format!("{}/{}", group_offsets::ROOT, group);
        for t in filer::list(&mut f, &gdir).await.map_err(err)? {
            let tdir = format!("{gdir}/{}", t.name);
            for p in filer::list(&mut f, &tdir).await.map_err(err)? {
                let Ok(partition) = p.name.parse::<i32>() else {
                    continue;
                };
                let pdir = format!("{tdir}/{}", p.name);
                let Some(body) = filer::read_file(&mut f, &pdir, group_offsets::FILE_NAME)
                    .await
                    .map_err(err)?
                else {
                    continue;
                };
                match group_offsets::decode(&body) {
                    Ok(s) => out.push((
                        group.to_string(),
                        (t.name.clone(), partition),
                        CommittedOffset {
                            offset: s.offset,
                            leader_epoch: -1,
                            metadata: s.metadata,
                            commit_timestamp_ms: s.committed_at_ms,
                        },
                    )),
                    Err(e) => {
                        tracing::warn!(path = %pdir, error = %e, "skipping an unreadable group offset")
                    }
                }
            }
        }
        Ok(out)
    }
}
