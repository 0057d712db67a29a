//! The shard's side of leadership among several Kelp nodes: an append, read, offset lookup
//! or DeleteRecords goes ahead only while this node leads the partition
//! (`cluster::ownership`), and partition state built under an earlier tenure is dropped, so
//! the cache, offset prediction and producer state are rebuilt from what SeaweedMQ holds.
//! A group request goes ahead only on the group's coordinator node, which reads the group's
//! offsets again when the group moved to it. With one node everything is led and
//! coordinated here, and this costs one atomic load.

use std::time::{Duration, Instant};

use super::Shard;
use crate::cluster::key::key;
use crate::cluster::ownership::ProducedBatch;
use crate::error::KelpError;
use crate::group::{GroupReply, GroupRequest};
use crate::partition::producer_state::ProducerStates;
use crate::record::batch::BatchHeader;

/// How long a request for a partition placed on this node waits for its lease to be taken
/// (a topic just created, a node just joined or left) before NOT_LEADER_OR_FOLLOWER.
const TAKE_WAIT: Duration = Duration::from_secs(2);

impl Shard {
    /// Succeeds while this node leads `(topic, partition)`; a partition this node is taking
    /// over is waited for until `deadline` (at most two seconds).
    pub async fn lead(
        &self,
        topic: &str,
        partition: i32,
        deadline: Instant,
    ) -> Result<(), KelpError> {
        let ownership = &self.cluster.ownership;
        if !ownership.leased() {
            return Ok(());
        }
        let until = deadline.min(Instant::now() + TAKE_WAIT);
        let mut asked = false;
        loop {
            let listener = ownership.listen();
            match ownership.lead(topic, partition) {
                Ok(epoch) => {
                    self.enter_epoch(topic, partition, epoch);
                    return Ok(());
                }
                Err(e) if !self.cluster.placed_here(topic, partition) => return Err(e),
                Err(e) => {
                    if !asked {
                        ownership.ask(topic, partition);
                        asked = true;
                    }
                    if crate::deadline::until(listener, until).await.is_none() {
                        return Err(e);
                    }
                }
            }
        }
    }

    /// Drops a partition's state built under another node's epoch. The epoch right after
    /// this node's own (it lost the lease for a moment and took it again: nobody led in
    /// between, epochs go up by one per tenure) keeps the state, which still describes the
    /// whole log, producer state included.
    fn enter_epoch(&self, topic: &str, partition: i32, epoch: i32) {
        let mut parts = self.partitions.borrow_mut();
        let Some(p) = parts.get_mut(key(&(topic, partition))) else {
            return;
        };
        if p.epoch == epoch {
            return;
        }
        if p.epoch >= 0 && epoch == p.epoch + 1 {
            p.epoch = epoch;
            return;
        }
        tracing::info!(
            topic,
            partition,
            from = p.epoch,
            to = epoch,
            "new tenure: partition state starts afresh"
        );
        let mut fresh = crate::partition::Partition::new(p.topic_id, p.store().clone());
        fresh.epoch = epoch;
        self.seed_producers(&mut fresh, topic, partition);
        self.replace_partition(p, fresh);
    }

    /// Gives a fresh partition the producer state its tenure took over from the previous
    /// leader (`cluster::ownership::Held::producers`), so retries stay duplicates.
    pub(super) fn seed_producers(
        &self,
        p: &mut crate::partition::Partition,
        topic: &str,
        partition: i32,
    ) {
        let batches = self.cluster.ownership.producers(topic, partition);
        if batches.is_empty() {
            return;
        }
        let headers: Vec<BatchHeader> = batches.iter().map(header_of).collect();
        p.seed_producers(ProducerStates::rebuild(&headers));
    }

    /// Drops the state of partitions placed on another node, when the held set changed
    /// since `seen`; returns the version looked at.
    pub(super) fn drop_unled(&self, seen: u64) -> u64 {
        let ownership = &self.cluster.ownership;
        let now = ownership.version();
        if now == seen || !ownership.leased() {
            return now;
        }
        let held = ownership.held();
        let mut freed = 0;
        let mut parts = self.partitions.borrow_mut();
        // A partition still placed here but not held (its lease lapsed for a moment, or is
        // being taken) keeps its state: the next tenure may continue it.
        let kept =
            |t: &str, p: i32| held.contains_key(key(&(t, p))) || self.cluster.placed_here(t, p);
        parts.retain(|(t, i), p| {
            let keep = kept(t, *i);
            if !keep {
                freed += p.cached_bytes();
                p.wake_all();
            }
            keep
        });
        drop(parts);
        self.eviction.borrow_mut().retain(|((t, i), _)| kept(t, *i));
        self.stats.partitions.remove_where(|t, p| !kept(t, p));
        self.set_cached(self.cached_bytes.get().saturating_sub(freed));
        now
    }

    /// Serves a group request on this (its coordinator) shard: refused when another node
    /// coordinates the group; a group new here has its offsets read first, once
    /// (`group_load`).
    pub(super) async fn serve_group(&self, req: GroupRequest) -> GroupReply {
        if let Some(g) = req.group_id().filter(|_| self.cluster.ownership.leased()) {
            if !self.cluster.coordinates(g) {
                return req.refuse(KelpError::NotCoordinator);
            }
            if let Err(e) = self.group_loads.ensure(g, || self.groups.reload(g)).await {
                tracing::warn!(group = %g, error = %e, "group offsets not read");
                return req.refuse(KelpError::CoordinatorLoadInProgress);
            }
        }
        let held_by = match &req {
            GroupRequest::TxnCommit(g, r) => Some((g.clone(), r.producer_id)),
            _ => None,
        };
        let reply = match req {
            GroupRequest::ShareFetch(g, r) => GroupReply::ShareFetch(self.share_fetch(g, *r).await),
            GroupRequest::ShareClosed(_, connection) => {
                self.share_closed(connection).await;
                GroupReply::Done(Ok(()))
            }
            req => self.groups.handle(req).await,
        };
        match (held_by, reply) {
            // A transaction's offsets are stored until it ends, so a restart keeps them.
            (Some((group, producer_id)), GroupReply::Commit(Ok(results))) => {
                let held = self.groups.pending_of(&group, producer_id);
                match self.store_pending_offsets(&group, producer_id, &held).await {
                    Ok(()) => GroupReply::Commit(Ok(results)),
                    Err(e) => GroupReply::Commit(Err(e)),
                }
            }
            (_, reply) => reply,
        }
    }

    /// Forgets the groups another node coordinates now, when the live nodes changed since
    /// `seen`; returns the version looked at.
    pub(super) fn drop_moved_groups(&self, seen: u64) -> u64 {
        let now = self.cluster.members.version();
        if now == seen || !self.cluster.ownership.leased() {
            return now;
        }
        for g in self.group_loads.take_moved(|g| self.cluster.coordinates(g)) {
            tracing::info!(group = %g, "group moved to another node");
            self.groups.forget(&g);
        }
        now
    }
}

/// The header [`ProducerStates::rebuild`] needs for a stored batch (sequences wrap at
/// i32::MAX, so the record count is taken modulo that).
fn header_of(b: &ProducedBatch) -> BatchHeader {
    let delta = i64::from(b.last_seq) - i64::from(b.first_seq);
    let delta = if delta < 0 {
        delta + i64::from(i32::MAX) + 1
    } else {
        delta
    };
    BatchHeader {
        base_offset: b.first_offset,
        batch_length: 0,
        magic: 2,
        crc: 0,
        attributes: 0,
        last_offset_delta: delta as i32,
        base_timestamp: 0,
        max_timestamp: 0,
        producer_id: b.producer_id,
        producer_epoch: b.epoch,
        base_sequence: b.first_seq,
        record_count: delta as i32 + 1,
    }
}
