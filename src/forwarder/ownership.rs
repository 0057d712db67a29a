//! Partition leadership among the Kelp nodes over one SeaweedMQ, kept with filer leases.
//!
//! Every second, and at once when a node joins or leaves or a topic appears, this node
//! works out which partitions placement gives it among the live nodes
//! (`cluster::ownership::designated`), and:
//! - gives up the ones it holds and no longer should: they leave the held set first (so
//!   shards and the publish fence refuse them), their publisher finishes what it had, then
//!   their lease is released and the new owner can take it at once;
//! - renews the leases it holds; one not renewed in time is dropped before it could expire
//!   ([`SAFE_FOR`] after the renewal was sent), so a node cut off from the filer stops
//!   acting before anyone else can take over;
//! - takes the lease `kelp/<cluster id>/partition/<topic>/<partition>` of the ones it should
//!   hold, when free. The new tenure's leader epoch is one past the last one recorded in
//!   `/topics/kafka/.meta/kelp/clusters/<cluster id>/epochs/<topic>/<partition>` (with the
//!   offset it starts at,
//!   the high water mark then), written before the partition is served, so epochs only grow
//!   even when the filer forgets its locks on a restart.
//!
//! A node whose own lease is gone is not in the live set and so holds nothing. The held
//! set goes to `cluster::ownership`; the partitions held, with their epochs, also go into
//! this node's record so every node's Metadata names the leaders. Runs on the forwarder
//! thread.

use std::collections::HashSet;
use std::rc::Rc;
use std::time::{Duration, Instant};

use futures::stream::{self, StreamExt};
use kelp_storage_client::filer;
use kelp_storage_client::lock::{self, Acquired, Lease};
use serde::{Deserialize, Serialize};

use super::client::{storage, unavailable, Forwarder};
use super::producer_journal::{self, Journal};
use crate::cluster::ownership::{Held, HeldMap, ProducedBatch};
use crate::error::KelpError;

/// How long a partition lease lasts without renewal.
pub const PARTITION_TTL: Duration = Duration::from_secs(4);
/// How long after sending a renewal this node still acts on the partition: a second short
/// of the ttl, so its last sends land before the lease can pass to another node.
pub const SAFE_FOR: Duration = Duration::from_secs(3);
/// How often leases are renewed and placement is checked.
const EVERY: Duration = Duration::from_secs(1);
/// How long a given-up partition's publisher may take to finish what it had.
const STOP_WAIT: Duration = Duration::from_secs(3);
/// Lease operations run at once.
const PARALLEL: usize = 16;
/// Take-overs running at once.
pub(super) const TAKING: usize = 64;
/// How long a failed take-over waits before it is tried again (unless a request asks),
/// doubling with each failure in a row up to [`RETRY_MAX`]: a partition whose SeaweedMQ
/// leader is gone must not keep the take-over slots busy.
const RETRY_AFTER: Duration = Duration::from_secs(3);
/// Longest wait between tries of a take-over that keeps failing.
const RETRY_MAX: Duration = Duration::from_secs(60);
/// How long a new tenure may spend reading back the records its predecessor's journal
/// left pending.
const RECOVER_WAIT: Duration = Duration::from_secs(3);
/// Tenures remembered per partition.
const HISTORY: usize = 32;
pub(super) type Key = (String, i32);

fn lock_name(cluster: &str, topic: &str, k: i32) -> String {
    format!("kelp/{cluster}/partition/{topic}/{k}")
}

/// One partition's tenures: (leader epoch, first offset), oldest first.
#[derive(Debug, Default, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Epochs {
    /// The tenures.
    pub epochs: Vec<(i32, i64)>,
}

impl Epochs {
    /// The next tenure's epoch.
    fn next_epoch(&self) -> i32 {
        self.epochs.last().map_or(0, |&(e, _)| e.saturating_add(1))
    }

    /// Adds a tenure starting at `start`, forgetting the oldest beyond [`HISTORY`].
    fn push(&mut self, epoch: i32, start: i64) {
        self.epochs.push((epoch, start));
        let over = self.epochs.len().saturating_sub(HISTORY);
        self.epochs.drain(..over);
    }
}

/// A partition this node holds.
pub(super) struct Tenure {
    lease: Lease,
    epoch: i32,
    /// The partition's tenures, this one last.
    history: std::sync::Arc<Vec<(i32, i64)>>,
    /// When the last successful grant or renewal was sent.
    renewed: Instant,
    /// The offset the tenure started at (the high water mark then).
    start: i64,
    /// Producer state found when the tenure started (see [`super::producer_journal`]).
    producers: std::sync::Arc<Vec<ProducedBatch>>,
}

impl Forwarder {
    /// The filer directory of this cluster's epoch histories, a directory per topic.
    fn epochs_root(&self) -> String {
        format!(
            "{}/{}/epochs",
            super::membership::CLUSTERS,
            self.cluster.cluster_id
        )
    }

    /// The filer directory of a topic's epoch histories in this cluster.
    fn epochs_dir(&self, topic: &str) -> String {
        format!("{}/{topic}", self.epochs_root())
    }

    /// Forgets a deleted topic's epoch histories in this cluster (a topic made again under
    /// the name starts at epoch 0; its files are tied to the old topic id anyway).
    pub(super) async fn drop_epochs(&self, topic: &str) -> Result<(), KelpError> {
        let mut f = self.filer_client()?;
        filer::delete(&mut f, &self.epochs_root(), topic, true)
            .await
            .map_err(|e| storage("deleting epochs", e))
    }

    /// Keeps this node's partition leases in line with placement until the node leaves.
    /// `first_round` fires once the first round is done. Renewals run in a task of their
    /// own, so a slow take-over (SeaweedMQ not answering) never delays them.
    pub(super) async fn keep_ownership(
        self: Rc<Self>,
        owner: String,
        first_round: tokio::sync::oneshot::Sender<()>,
    ) {
        let mut first_round = Some(first_round);
        self.cluster.ownership.start_leasing();
        tokio::task::spawn_local(self.clone().keep_leases(owner.clone()));
        let mut tick = tokio::time::interval(EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut recorded: Vec<(String, i32, i32)> = Vec::new();
        let mut topics = self.cluster.listen();
        let mut asked = self.cluster.ownership.listen_asked();
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = self.stop_owning.notified() => {}
                _ = self.placement_moved.notified() => {}
                // A topic made here or found in SeaweedMQ is led at once, not next round.
                _ = &mut topics => {}
                // So is a partition a request waits for.
                _ = &mut asked => {}
            }
            topics = self.cluster.listen();
            asked = self.cluster.ownership.listen_asked();
            if self.leaving.get() {
                self.give_up_all().await;
                self.owning_stopped.notify_one();
                return;
            }
            let wanted = self.wanted();
            let gone: Vec<Key> = self
                .tenures
                .borrow()
                .keys()
                .filter(|k| !wanted.contains(*k))
                .cloned()
                .collect();
            if !gone.is_empty() {
                let leases: Vec<(Key, Tenure)> = gone
                    .into_iter()
                    .filter_map(|k| self.tenures.borrow_mut().remove(&k).map(|t| (k, t)))
                    .collect();
                self.publish_held();
                self.release(leases).await;
            }
            // Partitions requests wait for first, then the others, a bounded number per
            // round so that new asks are not kept waiting behind a long list.
            let mut missing: Vec<Key> = self
                .cluster
                .ownership
                .take_asked()
                .into_iter()
                .filter(|k| wanted.contains(k))
                .collect();
            let rest: Vec<Key> = {
                let tenures = self.tenures.borrow();
                wanted
                    .iter()
                    .filter(|k| !tenures.contains_key(*k) && !missing.contains(*k))
                    .cloned()
                    .collect()
            };
            missing.retain(|k| !self.tenures.borrow().contains_key(k));
            let asked_now: HashSet<Key> = missing.iter().cloned().collect();
            missing.extend(rest);
            // Take-overs run in tasks of their own: one waiting on SeaweedMQ (a partition
            // whose broker is gone) never holds up another, nor the next round. A failed
            // one is tried again after RETRY_AFTER, or at once when a request asks.
            self.taking.borrow_mut().retain(|k, _| wanted.contains(k));
            self.take_failures
                .borrow_mut()
                .retain(|k, _| wanted.contains(k));
            let now = Instant::now();
            let mut first = Vec::new();
            for k in missing {
                {
                    let mut taking = self.taking.borrow_mut();
                    match taking.get(&k) {
                        Some(None) => continue,
                        Some(Some(after)) if *after > now && !asked_now.contains(&k) => continue,
                        _ => {}
                    }
                    taking.insert(k.clone(), None);
                }
                let asked = asked_now.contains(&k);
                let task = tokio::task::spawn_local(self.clone().take_in_background(
                    k,
                    owner.clone(),
                    asked,
                ));
                if first_round.is_some() {
                    first.push(task);
                }
            }
            // The first round is awaited, so a node is ready with the partitions it can have.
            futures::future::join_all(first).await;
            let mut owns: Vec<(String, i32, i32)> = self
                .tenures
                .borrow()
                .iter()
                .map(|((t, k), h)| (t.clone(), *k, h.epoch))
                .collect();
            owns.sort();
            if owns != recorded {
                match self.write_owns(&owns).await {
                    Ok(()) => recorded = owns,
                    Err(e) => tracing::warn!(error = %e, "node record not updated"),
                }
            }
            if let Some(tx) = first_round.take() {
                let _ = tx.send(());
            }
        }
    }

    /// Takes one partition over (a task of its own, at most [`TAKING`] at once, and as many
    /// again for partitions a request waits for, `asked`, which never queue behind the
    /// others) and adds it to the held set, or releases it again if placement moved on
    /// meanwhile.
    async fn take_in_background(self: Rc<Self>, k: Key, owner: String, asked: bool) {
        let slots = if asked {
            self.asked_slots.clone()
        } else {
            self.take_slots.clone()
        };
        let Ok(_slot) = slots.acquire_owned().await else {
            return;
        };
        let Some(t) = self.take(&k.0, k.1, &owner).await else {
            let failures = {
                let mut f = self.take_failures.borrow_mut();
                let n = f.entry(k.clone()).or_insert(0);
                *n = n.saturating_add(1);
                *n
            };
            let wait = RETRY_AFTER
                .saturating_mul(1 << (failures - 1).min(5))
                .min(RETRY_MAX);
            self.taking
                .borrow_mut()
                .insert(k, Some(Instant::now() + wait));
            return;
        };
        self.taking.borrow_mut().remove(&k);
        self.take_failures.borrow_mut().remove(&k);
        // Placement of this one key, not the whole wanted set again for each take-over.
        let still_here = self.cluster.placed_here(&k.0, k.1)
            && self.cluster.topic(&k.0).is_some_and(|t| k.1 < t.partitions);
        if self.leaving.get() || !still_here {
            self.release(vec![(k, t)]).await;
            return;
        }
        self.tenures.borrow_mut().insert(k, t);
        self.publish_held();
        // The node record names it from the next round on.
        self.placement_moved.notify_one();
    }

    /// The partitions placement gives this node now: none while it is not live itself.
    fn wanted(&self) -> HashSet<Key> {
        let me = self.cluster.node_id;
        if !self.cluster.members.live().iter().any(|n| n.node_id == me) {
            return HashSet::new();
        }
        let snap = self.cluster.snapshot();
        let mut out = HashSet::new();
        for t in snap.topics.values() {
            for k in 0..t.partitions {
                if self.cluster.placed_node(&t.name, k) == Some(me) {
                    out.insert((t.name.clone(), k));
                }
            }
        }
        out
    }

    /// Hands the held set to the shards and the publish fence.
    fn publish_held(&self) {
        let map: HeldMap = self
            .tenures
            .borrow()
            .iter()
            .map(|(k, t)| {
                (
                    k.clone(),
                    Held {
                        epoch: t.epoch,
                        until: t.renewed + SAFE_FOR,
                        history: t.history.clone(),
                        producers: t.producers.clone(),
                    },
                )
            })
            .collect();
        self.cluster.ownership.set_held(map);
    }

    /// Renews every held lease each [`EVERY`] until the node leaves; one that cannot be
    /// renewed is kept (and served) only while its last renewal is safe, then dropped.
    async fn keep_leases(self: Rc<Self>, owner: String) {
        let mut tick = tokio::time::interval(EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if self.leaving.get() {
                return;
            }
            let leases: Vec<(Key, Lease)> = self
                .tenures
                .borrow()
                .iter()
                .map(|(k, t)| (k.clone(), t.lease.clone()))
                .collect();
            let renewed: Vec<(Key, Result<Lease, KelpError>, Instant)> = stream::iter(leases)
                .map(|(k, mut lease)| {
                    let me = self.clone();
                    let owner = owner.clone();
                    async move {
                        let sent = Instant::now();
                        let r = match me.filer_client() {
                            Ok(mut f) => lock::renew(&mut f, &mut lease, &owner, PARTITION_TTL)
                                .await
                                .map(|()| lease)
                                .map_err(|e| unavailable("partition lease", e)),
                            Err(e) => Err(e),
                        };
                        (k, r, sent)
                    }
                })
                .buffer_unordered(PARALLEL)
                .collect()
                .await;
            let mut lost = false;
            {
                let mut tenures = self.tenures.borrow_mut();
                for (k, r, sent) in renewed {
                    let Some(t) = tenures.get_mut(&k) else {
                        continue; // given up meanwhile
                    };
                    match r {
                        Ok(lease) if lease.generation == t.lease.generation => {
                            t.lease = lease;
                            t.renewed = sent;
                        }
                        Ok(_) => {} // another tenure of the partition meanwhile
                        Err(e) if t.renewed.elapsed() < SAFE_FOR => {
                            tracing::warn!(topic = %k.0, partition = k.1, error = %e, "partition lease not renewed; retrying");
                        }
                        Err(e) => {
                            tracing::error!(topic = %k.0, partition = k.1, error = %e, "partition lease lost: no longer serving the partition");
                            tenures.remove(&k);
                            lost = true;
                        }
                    }
                }
            }
            self.publish_held();
            if lost {
                // The node record must stop naming it; the placement round rewrites it.
                self.placement_moved.notify_one();
            }
        }
    }

    /// Takes a partition's lease and opens a tenure for it, or None (held elsewhere, or the
    /// filer or SeaweedMQ could not answer: tried again next round).
    async fn take(self: &Rc<Self>, topic: &str, k: i32, owner: &str) -> Option<Tenure> {
        let sent = Instant::now();
        let mut f = self.filer_client().ok()?;
        let lease = match lock::acquire(
            &mut f,
            &lock_name(&self.cluster.cluster_id, topic, k),
            owner,
            PARTITION_TTL,
        )
        .await
        {
            Ok(Acquired::Held(l)) => l,
            Ok(Acquired::Busy(_)) => return None,
            Err(e) => {
                tracing::debug!(topic, partition = k, error = %e, "partition lease not taken");
                return None;
            }
        };
        match self.open_tenure(topic, k).await {
            Ok(history) => {
                let (epoch, start) = history.epochs.last().copied().unwrap_or((0, 0));
                let producers = self.recover_producers(topic, k, start).await;
                tracing::info!(
                    topic,
                    partition = k,
                    epoch,
                    producer_batches = producers.len(),
                    "leading the partition"
                );
                Some(Tenure {
                    lease,
                    epoch,
                    history: std::sync::Arc::new(history.epochs),
                    renewed: sent,
                    start,
                    producers: std::sync::Arc::new(producers),
                })
            }
            Err(e) => {
                tracing::warn!(topic, partition = k, error = %e, "could not open a tenure; lease released");
                let _ = lock::release(&mut f, &lease).await;
                None
            }
        }
    }

    /// The producer state a tenure starting at offset `start` takes over: the partition's
    /// journal, its pending batches checked against SeaweedMQ's records (see
    /// [`producer_journal::recover`]). What cannot be read counts as not stored (a retry may
    /// then be appended twice, never lost).
    async fn recover_producers(&self, topic: &str, k: i32, start: i64) -> Vec<ProducedBatch> {
        let Some(id) = self.cluster.topic(topic).map(|t| t.id) else {
            return Vec::new();
        };
        let file = match self.read_journal(topic, k, id).await {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!(topic, partition = k, error = %e, "producer journal unreadable; producer state starts empty");
                return Vec::new();
            }
        };
        let want = file.pending_records();
        let mut tail = Vec::new();
        if want > 0 && file.anchor() < start {
            let read = tokio::time::timeout(
                RECOVER_WAIT,
                self.read_tail(topic, k, file.anchor(), start, want, &mut tail),
            )
            .await;
            if !matches!(read, Ok(Ok(()))) {
                tracing::info!(topic, partition = k, read = tail.len(), "records after the journal not all readable; unread batches count as not stored");
            }
        }
        producer_journal::recover(&file, &tail)
    }

    /// Appends (offset, record checksum) of the partition's records from `from` (below
    /// `end`) to `out`, until it holds `want` of them.
    async fn read_tail(
        &self,
        topic: &str,
        k: i32,
        from: i64,
        end: i64,
        want: usize,
        out: &mut Vec<(i64, u32)>,
    ) -> Result<(), KelpError> {
        let mut at = from;
        while at < end && out.len() < want {
            let got = self.fetch(topic, k, at, 4 << 20, end).await?;
            if got.batches.is_empty() {
                return Err(storage("reading records back", "nothing served"));
            }
            for b in &got.batches {
                let mut records =
                    crate::record::walk::Records::new(b, crate::record::walk::MAX_INFLATED_BYTES)
                        .map_err(|e| storage("reading records back", e.why()))?;
                let base = records.header().base_offset;
                while let Some(r) = records
                    .next_record()
                    .map_err(|e| storage("reading records back", e.why()))?
                {
                    let offset = base + i64::from(r.offset_delta);
                    out.push((
                        offset,
                        producer_journal::record_crc(
                            r.key.as_deref(),
                            r.value.as_deref(),
                            &r.headers,
                        ),
                    ));
                    at = offset + 1;
                }
            }
        }
        Ok(())
    }

    /// The journal a partition's new publisher starts with: from its tenure.
    pub(super) fn journal_for(&self, topic: &str, k: i32) -> Journal {
        match self.tenures.borrow().get(&(topic.to_string(), k)) {
            Some(t) => Journal::new(&t.producers, t.start),
            None => Journal::new(&[], -1),
        }
    }

    /// Records the next epoch of a partition, starting at SeaweedMQ's high water mark now;
    /// returns the tenures with the new one last.
    async fn open_tenure(&self, topic: &str, k: i32) -> Result<Epochs, KelpError> {
        let id = self
            .cluster
            .topic(topic)
            .ok_or(KelpError::UnknownTopicOrPartition)?
            .id;
        let mut history = self.epochs(topic, k, id).await?;
        let (_, hwm) = self
            .range_until(topic, k, Instant::now() + Duration::from_secs(2))
            .await?;
        let epoch = history.next_epoch();
        history.push(epoch, hwm);
        self.write_tied(
            &self.epochs_dir(topic),
            &k.to_string(),
            &history,
            id,
            "epochs",
        )
        .await?;
        Ok(history)
    }

    /// A partition's recorded tenures (none yet: empty).
    pub(super) async fn epochs(
        &self,
        topic: &str,
        k: i32,
        id: uuid::Uuid,
    ) -> Result<Epochs, KelpError> {
        self.read_tied(&self.epochs_dir(topic), &k.to_string(), id, "epochs")
            .await
    }

    /// Lets given-up partitions' publishers finish (bounded), then releases their leases.
    /// A publisher still running at the bound is stopped and its lease left to expire
    /// instead: what it had sent reaches SeaweedMQ well before another node can take the
    /// partition, so two publishers never write one partition at once.
    async fn release(&self, leases: Vec<(Key, Tenure)>) {
        let mut tasks: Vec<(Key, tokio::task::JoinHandle<()>)> = leases
            .iter()
            .filter_map(|(k, _)| {
                self.publishers.borrow_mut().remove(k);
                let t = self.publisher_tasks.borrow_mut().remove(k)?;
                Some((k.clone(), t))
            })
            .collect();
        let _ = tokio::time::timeout(
            STOP_WAIT,
            futures::future::join_all(tasks.iter_mut().map(|(_, t)| t)),
        )
        .await;
        let mut stuck = HashSet::new();
        for (k, t) in tasks {
            if !t.is_finished() {
                t.abort();
                stuck.insert(k);
            }
        }
        let Ok(mut f) = self.filer_client() else {
            return;
        };
        for ((topic, k), t) in leases {
            if stuck.contains(&(topic.clone(), k)) {
                tracing::warn!(topic = %topic, partition = k, epoch = t.epoch, "publisher did not finish in time; stopped, the partition lease expires");
                continue;
            }
            tracing::info!(topic = %topic, partition = k, epoch = t.epoch, "handing the partition over");
            if let Err(e) = lock::release(&mut f, &t.lease).await {
                tracing::debug!(topic = %topic, partition = k, error = %e, "partition lease not released; it expires");
            }
        }
    }

    /// Gives every partition up (clean stop), so the other nodes take them at once.
    async fn give_up_all(&self) {
        let all: Vec<(Key, Tenure)> = self.tenures.borrow_mut().drain().collect();
        self.publish_held();
        self.release(all).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epochs_only_grow_and_the_history_is_bounded() {
        let mut h = Epochs::default();
        assert_eq!(h.next_epoch(), 0);
        for i in 0..40 {
            let e = h.next_epoch();
            assert_eq!(e, i);
            h.push(e, i64::from(i) * 10);
        }
        assert_eq!(h.epochs.len(), HISTORY);
        assert_eq!(h.epochs.last(), Some(&(39, 390)));
        let id = uuid::Uuid::from_u128(1);
        let body = super::super::tied::encode(&h, id).unwrap();
        assert_eq!(
            super::super::tied::decode::<Epochs>(&body, id, "e"),
            Some(h)
        );
    }
}
