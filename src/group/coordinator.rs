//! One shard's group coordinator: the groups hashed to this shard and their offsets.
//!
//! Answers [`GroupRequest`]s for groups it owns (the caller — `shard/` — routes requests here
//! from any core). Deferred JoinGroup/SyncGroup answers are awaited without holding a borrow
//! of the group table, so other requests proceed meanwhile. Calls `classic` and `offsets`.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Instant;

use super::classic::{Group, GroupConfig, Pending};
use super::consumer::{ConsumerGroup, Description, HeartbeatIn, HeartbeatOut};
use super::messages::{
    CommitRequest, FetchRequest, FetchedOffset, GroupListing, GroupReply, GroupRequest,
    JoinResponse, PartitionResults, SyncResponse, TxnCommitRequest,
};
use super::offsets::{CommittedOffset, OffsetStore, TopicPartition};
use super::state::GroupState;
use crate::error::KelpError;
use crate::group::share::coordinator::ShareCoordinator;
use crate::group::share::messages::ShareHeartbeatIn;

/// Largest offset commit metadata accepted (offset.metadata.max.bytes).
pub const MAX_METADATA_BYTES: usize = 4096;

/// Every this many ticks, groups with nothing left in them are looked for; one found idle
/// at two looks in a row is forgotten. (Each group id a client names creates a group: kept
/// forever, made-up ids would grow the coordinator without bound over months.)
const IDLE_SWEEP_TICKS: u32 = 200;

/// The groups of one shard.
pub struct Coordinator {
    config: GroupConfig,
    groups: RefCell<HashMap<String, Group>>,
    /// KIP-848 groups; an id is in at most one of the two maps.
    consumers: RefCell<HashMap<String, ConsumerGroup>>,
    offsets: Rc<dyn OffsetStore>,
    /// Ticks since the last idle sweep, and the groups that sweep found idle.
    sweep: std::cell::Cell<u32>,
    idle: RefCell<std::collections::HashSet<String>>,
    /// Offsets transactional producers committed (TxnOffsetCommit), by group and producer
    /// id, waiting for their transaction's end.
    pending: RefCell<HashMap<String, HashMap<i64, Vec<PendingOffset>>>>,
    /// KIP-932 share groups; an id is a share group or one of the others, never both.
    pub shares: ShareCoordinator,
}

/// One partition's offset a transaction holds.
pub type PendingOffset = (TopicPartition, CommittedOffset);

impl Coordinator {
    /// A coordinator with no groups, storing offsets in `offsets`.
    pub fn new(config: GroupConfig, offsets: Rc<dyn OffsetStore>) -> Self {
        Coordinator {
            config,
            groups: RefCell::new(HashMap::new()),
            consumers: RefCell::new(HashMap::new()),
            sweep: std::cell::Cell::new(0),
            idle: RefCell::new(std::collections::HashSet::new()),
            shares: ShareCoordinator::new(config.share, offsets.clone()),
            offsets,
            pending: RefCell::new(HashMap::new()),
        }
    }

    /// Runs `f` on the group, creating it (Empty) if `create`.
    fn with_group<R>(&self, id: &str, create: bool, f: impl FnOnce(&mut Group) -> R) -> Option<R> {
        let mut groups = self.groups.borrow_mut();
        if create && !groups.contains_key(id) {
            groups.insert(id.to_string(), Group::new(id, self.config));
        }
        groups.get_mut(id).map(f)
    }

    /// Whether the group exists: has members, a past generation or committed offsets.
    fn exists(&self, id: &str) -> bool {
        self.groups.borrow().contains_key(id)
            || self.consumers.borrow().contains_key(id)
            || self.shares.is_share(id)
            || !self.offsets.fetch_all(id).is_empty()
    }

    /// Runs `f` on the KIP-848 group `id`, if there is one.
    fn with_consumer<R>(&self, id: &str, f: impl FnOnce(&mut ConsumerGroup) -> R) -> Option<R> {
        self.consumers.borrow_mut().get_mut(id).map(f)
    }

    /// An empty group of the other protocol gives way to a member of this one; a group with
    /// members does not (Kafka's online migration between the protocols is not served).
    fn classic_has_members(&self, id: &str) -> bool {
        let mut groups = self.groups.borrow_mut();
        match groups.get(id) {
            Some(g) if !g.is_empty() => true,
            Some(_) => {
                if let Some(mut g) = groups.remove(id) {
                    g.kill();
                }
                false
            }
            None => false,
        }
    }

    fn consumer_has_members(&self, id: &str) -> bool {
        let mut consumers = self.consumers.borrow_mut();
        match consumers.get(id) {
            Some(g) if !g.is_empty() => true,
            Some(_) => {
                consumers.remove(id);
                false
            }
            None => false,
        }
    }

    fn consumer_heartbeat(
        &self,
        id: &str,
        r: HeartbeatIn,
        now: Instant,
    ) -> Result<HeartbeatOut, KelpError> {
        if id.is_empty() {
            return Err(KelpError::InvalidGroupId);
        }
        if self.classic_has_members(id) {
            return Err(KelpError::GroupProtocolMismatch(id.to_string(), "consumer"));
        }
        let mut consumers = self.consumers.borrow_mut();
        if r.member_epoch == 0 && !consumers.contains_key(id) {
            consumers.insert(id.to_string(), ConsumerGroup::new(id, self.config.consumer));
        }
        // Groups live in memory: after a restart or a move a member's group is gone, and
        // UNKNOWN_MEMBER_ID makes it rejoin at epoch 0.
        let g = consumers.get_mut(id).ok_or(KelpError::UnknownMemberId)?;
        g.heartbeat(r, now)
    }

    fn consumer_describe(&self, id: &str) -> Result<Description, KelpError> {
        if let Some(d) = self.with_consumer(id, |g| g.describe()) {
            return Ok(d);
        }
        if self.groups.borrow().get(id).is_some_and(|g| !g.is_empty()) {
            return Err(KelpError::GroupProtocolMismatch(id.to_string(), "consumer"));
        }
        Err(KelpError::GroupIdNotFound)
    }

    /// Whether `member_id` at `generation` (a KIP-848 group's member epoch) may commit for
    /// the group: by the KIP-848 group's rules if it is one, else the classic group's (made,
    /// Empty, when `create`; a missing group answers ILLEGAL_GENERATION).
    fn check_committer(
        &self,
        id: &str,
        create: bool,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        modern: bool,
    ) -> Result<(), KelpError> {
        match self.consumer_check(id, member_id, generation, modern) {
            Some(check) => check,
            None => self
                .with_group(id, create, |g| {
                    g.check_commit(member_id, instance_id, generation)
                })
                .unwrap_or(Err(KelpError::IllegalGeneration)),
        }
    }

    /// A commit (or a fetch naming a member) to a KIP-848 group: Some(check), else None.
    /// `modern`: the request's version is one KIP-848 members may use (OffsetCommit v9+;
    /// fetches and transactional commits always are).
    fn consumer_check(
        &self,
        id: &str,
        member_id: &str,
        epoch: i32,
        modern: bool,
    ) -> Option<Result<(), KelpError>> {
        self.with_consumer(id, |g| g.check_member(member_id, epoch, modern))
    }

    /// Answers one request for a group owned by this shard.
    pub async fn handle(&self, req: GroupRequest) -> GroupReply {
        let now = Instant::now();
        // A share group's id is not a consumer group's (Kafka: "Group X is not a consumer
        // group.").
        let consumerish = matches!(
            req,
            GroupRequest::ConsumerHeartbeat(..)
                | GroupRequest::ConsumerDescribe(_)
                | GroupRequest::Commit(..)
                | GroupRequest::Fetch(..)
                | GroupRequest::DeleteOffsets(..)
                | GroupRequest::TxnCommit(..)
        );
        // A classic or KIP-848 group in memory is not a share group (a share group's id gives
        // way to neither), so the common case skips the look at the stored offsets.
        let known = |g: &str| {
            self.groups.borrow().contains_key(g) || self.consumers.borrow().contains_key(g)
        };
        if let Some(g) = req
            .group_id()
            .filter(|g| consumerish && !known(g) && self.shares.is_share(g))
        {
            let e = KelpError::GroupProtocolMismatch(g.to_string(), "consumer");
            return req.refuse(e);
        }
        match req {
            GroupRequest::Join(g, r) => {
                if g.is_empty() {
                    return GroupReply::Join(JoinResponse::failed(
                        KelpError::InvalidGroupId,
                        r.member_id,
                    ));
                }
                let member_id = r.member_id.clone();
                if self.consumer_has_members(&g) || self.shares.is_share(&g) {
                    return GroupReply::Join(JoinResponse::failed(
                        KelpError::InconsistentGroupProtocol,
                        member_id,
                    ));
                }
                let pending = self
                    .with_group(&g, true, |grp| grp.join(r, now))
                    .expect("created");
                GroupReply::Join(match pending {
                    Pending::Ready(resp) => resp,
                    Pending::Wait(rx) => rx.await.unwrap_or_else(|_| {
                        JoinResponse::failed(KelpError::RebalanceInProgress, member_id)
                    }),
                })
            }
            GroupRequest::Sync(g, r) => {
                let pending = self.with_group(&g, false, |grp| grp.sync(r, now));
                GroupReply::Sync(match pending {
                    None => SyncResponse::failed(KelpError::UnknownMemberId),
                    Some(Pending::Ready(resp)) => resp,
                    Some(Pending::Wait(rx)) => rx
                        .await
                        .unwrap_or_else(|_| SyncResponse::failed(KelpError::RebalanceInProgress)),
                })
            }
            GroupRequest::Heartbeat(g, r) => GroupReply::Heartbeat(
                self.with_group(&g, false, |grp| grp.heartbeat(&r, now))
                    .unwrap_or(Err(KelpError::UnknownMemberId)),
            ),
            GroupRequest::Leave(g, members) => GroupReply::Leave(
                self.with_group(&g, false, |grp| grp.leave(&members, now))
                    .unwrap_or_else(|| {
                        Ok(members
                            .iter()
                            .map(|_| Err(KelpError::UnknownMemberId))
                            .collect())
                    }),
            ),
            GroupRequest::Describe(g)
                if self.consumers.borrow().contains_key(&g) || self.shares.is_share(&g) =>
            {
                GroupReply::Describe(Err(KelpError::GroupProtocolMismatch(g, "classic")))
            }
            GroupRequest::ShareHeartbeat(g, r) => {
                GroupReply::ShareHeartbeat(self.share_heartbeat(&g, *r, now))
            }
            GroupRequest::ShareDescribe(g) => GroupReply::ShareDescribe(
                self.shares.describe(&g).ok_or(KelpError::GroupIdNotFound),
            ),
            GroupRequest::ShareAlter(g, starts) => GroupReply::Done(if self.other_type(&g) {
                Err(KelpError::GroupProtocolMismatch(g, "share"))
            } else {
                self.shares.alter_starts(&g, &starts).await
            }),
            GroupRequest::ShareDeleteOffsets(g, topics) => {
                GroupReply::Done(self.shares.delete_starts(&g, &topics).await)
            }
            GroupRequest::ShareOffsets(g) => {
                GroupReply::ShareOffsets(self.shares.starts(&g).ok_or(KelpError::GroupIdNotFound))
            }
            // Served by the shard, which reads the partitions (`shard::share`).
            GroupRequest::ShareFetch(..) | GroupRequest::ShareClosed(..) => GroupReply::Unavailable,
            GroupRequest::ConsumerHeartbeat(g, r) => {
                GroupReply::ConsumerHeartbeat(self.consumer_heartbeat(&g, *r, now))
            }
            GroupRequest::ConsumerDescribe(g) => {
                GroupReply::ConsumerDescribe(self.consumer_describe(&g))
            }
            GroupRequest::Describe(g) => GroupReply::Describe(Ok(self
                .with_group(&g, false, |grp| grp.describe())
                .unwrap_or_else(|| super::messages::GroupDescription {
                    state: if self.exists(&g) {
                        GroupState::Empty
                    } else {
                        GroupState::Dead
                    },
                    protocol_type: String::new(),
                    protocol: String::new(),
                    members: Vec::new(),
                }))),
            GroupRequest::List => GroupReply::List(self.list()),
            GroupRequest::Delete(g) => GroupReply::Delete(self.delete(&g).await),
            GroupRequest::Commit(g, r) => GroupReply::Commit(self.commit(&g, r).await),
            GroupRequest::Fetch(g, r) => {
                let check = r
                    .member
                    .as_ref()
                    .and_then(|(m, e)| self.consumer_check(&g, m, *e, true))
                    .unwrap_or(Ok(()));
                GroupReply::Fetch(check.map(|()| self.fetch(&g, r)))
            }
            GroupRequest::DeleteOffsets(g, parts) => {
                GroupReply::DeleteOffsets(self.delete_offsets(&g, parts).await)
            }
            GroupRequest::TxnCommit(g, r) => GroupReply::Commit(self.txn_commit(&g, r)),
            GroupRequest::TxnOutcome {
                group_id,
                producer_id,
                commit,
            } => GroupReply::Done(self.txn_outcome(&group_id, producer_id, commit).await),
        }
    }

    /// Whether a classic or consumer group holds `id` (with members or committed offsets).
    fn other_type(&self, id: &str) -> bool {
        self.classic_has_members(id)
            || self.consumer_has_members(id)
            || self
                .offsets
                .fetch_all(id)
                .iter()
                .any(|((t, _), _)| crate::group::share::state::topic_of(t).is_none())
    }

    /// A ShareGroupHeartbeat: refused for an id a classic or consumer group holds (with
    /// members or committed offsets).
    fn share_heartbeat(
        &self,
        id: &str,
        r: ShareHeartbeatIn,
        now: Instant,
    ) -> Result<crate::group::share::group::ShareHeartbeatOut, KelpError> {
        if id.is_empty() {
            return Err(KelpError::InvalidRequest("GroupId can't be empty.".into()));
        }
        if self.other_type(id) {
            return Err(KelpError::GroupProtocolMismatch(id.to_string(), "share"));
        }
        let hb = crate::group::share::group::ShareHeartbeat {
            member_id: &r.member_id,
            member_epoch: r.member_epoch,
            rack_id: r.rack_id,
            topic_names: r.topic_names,
            client: r.client,
        };
        self.shares.heartbeat(id, hb, r.topics.as_ref(), now)
    }

    /// Every group on this shard, including groups that only have committed offsets.
    pub fn list(&self) -> Vec<GroupListing> {
        let groups = self.groups.borrow();
        let mut out: Vec<GroupListing> = groups
            .values()
            .filter(|g| g.state != GroupState::Dead)
            .map(|g| GroupListing {
                group_id: g.id.clone(),
                protocol_type: g.protocol_type.clone().unwrap_or_default(),
                state: g.state.as_str(),
                group_type: "classic",
            })
            .collect();
        let consumers = self.consumers.borrow();
        out.extend(consumers.values().map(|g| GroupListing {
            group_id: g.id.clone(),
            protocol_type: "consumer".to_string(),
            state: g.state(),
            group_type: "consumer",
        }));
        let shares = self.shares.listed();
        out.extend(shares.iter().map(|(id, members)| GroupListing {
            group_id: id.clone(),
            protocol_type: "share".to_string(),
            state: if *members { "Stable" } else { "Empty" },
            group_type: "share",
        }));
        for id in self.offsets.groups() {
            let share = shares.iter().any(|(s, _)| *s == id);
            if !groups.contains_key(&id) && !consumers.contains_key(&id) && !share {
                out.push(GroupListing {
                    group_id: id,
                    protocol_type: String::new(),
                    state: GroupState::Empty.as_str(),
                    group_type: "classic",
                });
            }
        }
        out
    }

    async fn delete(&self, id: &str) -> Result<(), KelpError> {
        if !self.exists(id) {
            return Err(KelpError::GroupIdNotFound);
        }
        let non_empty = self
            .with_group(id, false, |g| !g.is_empty())
            .or_else(|| self.with_consumer(id, |g| !g.is_empty()))
            .unwrap_or(false)
            || self.shares.has_members(id);
        if non_empty {
            return Err(KelpError::NonEmptyGroup);
        }
        self.consumers.borrow_mut().remove(id);
        self.shares.forget_group(id);
        if let Some(mut g) = self.groups.borrow_mut().remove(id) {
            g.kill();
        }
        self.offsets.delete_group(id).await
    }

    async fn commit(&self, id: &str, r: CommitRequest) -> Result<PartitionResults, KelpError> {
        if id.is_empty() {
            return Err(KelpError::InvalidGroupId);
        }
        let simple = r.generation_id < 0 && r.member_id.is_empty() && r.instance_id.is_none();
        // A simple commit creates the group (Empty); a member commit needs the group to exist.
        self.check_committer(
            id,
            simple,
            &r.member_id,
            r.instance_id.as_deref(),
            r.generation_id,
            r.modern,
        )?;
        let mut results = Vec::with_capacity(r.offsets.len());
        let mut accepted = Vec::with_capacity(r.offsets.len());
        for (tp, off) in r.offsets {
            if off.metadata.len() > MAX_METADATA_BYTES {
                results.push((
                    tp,
                    Err(KelpError::OffsetMetadataTooLarge(off.metadata.len())),
                ));
            } else {
                results.push((tp.clone(), Ok(())));
                accepted.push((tp, off));
            }
        }
        if !accepted.is_empty() {
            if let Err(e) = self.offsets.commit(id, accepted).await {
                for (_, res) in results.iter_mut() {
                    if res.is_ok() {
                        *res = Err(e.clone());
                    }
                }
            }
        }
        Ok(results)
    }

    /// Holds a transaction's offsets until it ends; a later commit of the same partition
    /// in the transaction replaces the earlier one.
    fn txn_commit(&self, id: &str, r: TxnCommitRequest) -> Result<PartitionResults, KelpError> {
        if id.is_empty() {
            return Err(KelpError::InvalidGroupId);
        }
        if r.generation_id >= 0 || !r.member_id.is_empty() {
            // KIP-447: a member of an older generation may not commit for the group.
            self.check_committer(
                id,
                false,
                &r.member_id,
                r.instance_id.as_deref(),
                r.generation_id,
                true,
            )?;
        }
        let mut results = Vec::with_capacity(r.offsets.len());
        let mut pending = self.pending.borrow_mut();
        let held = pending
            .entry(id.to_string())
            .or_default()
            .entry(r.producer_id)
            .or_default();
        for (tp, off) in r.offsets {
            if off.metadata.len() > MAX_METADATA_BYTES {
                results.push((
                    tp,
                    Err(KelpError::OffsetMetadataTooLarge(off.metadata.len())),
                ));
                continue;
            }
            results.push((tp.clone(), Ok(())));
            match held.iter_mut().find(|(t, _)| *t == tp) {
                Some(slot) => slot.1 = off,
                None => held.push((tp, off)),
            }
        }
        Ok(results)
    }

    /// The offsets producer `producer_id`'s transaction holds for group `id`.
    pub fn pending_of(&self, id: &str, producer_id: i64) -> Vec<PendingOffset> {
        self.pending
            .borrow()
            .get(id)
            .and_then(|m| m.get(&producer_id))
            .cloned()
            .unwrap_or_default()
    }

    /// Puts back offsets a transaction held before a restart.
    pub fn restore_pending(&self, id: &str, producer_id: i64, offsets: Vec<PendingOffset>) {
        self.pending
            .borrow_mut()
            .entry(id.to_string())
            .or_default()
            .insert(producer_id, offsets);
    }

    /// Applies (commit) or drops the offsets a transaction held. Committed ones stay held
    /// until the store has them: meanwhile an OffsetFetch with require_stable still answers
    /// UNSTABLE_OFFSET_COMMIT for them. Dropped first, they were for a moment neither held
    /// nor committed, and a consumer taking a partition over then read the offset from
    /// before the transaction and processed its input again (Kafka Streams' exactly-once
    /// counted twice after a rebalance on SeaweedMQ, whose store writes take longest).
    async fn txn_outcome(&self, id: &str, producer_id: i64, commit: bool) -> Result<(), KelpError> {
        let held = self.pending_of(id, producer_id);
        if commit && !held.is_empty() {
            // On failure they stay held for the coordinator's next try.
            self.offsets.commit(id, held.clone()).await?;
        }
        let mut pending = self.pending.borrow_mut();
        if let Some(by_producer) = pending.get_mut(id) {
            if let Some(h) = by_producer.get_mut(&producer_id) {
                // Only what was applied: the store write let other work run.
                h.retain(|o| !held.contains(o));
                if h.is_empty() {
                    by_producer.remove(&producer_id);
                }
            }
            if by_producer.is_empty() {
                pending.remove(id);
            }
        }
        Ok(())
    }

    fn fetch(&self, id: &str, r: FetchRequest) -> Vec<FetchedOffset> {
        let rows: Vec<(TopicPartition, Option<CommittedOffset>)> = match r.partitions {
            Some(parts) => parts
                .into_iter()
                .map(|tp| {
                    let off = self.offsets.fetch(id, &tp);
                    (tp, off)
                })
                .collect(),
            None => self
                .offsets
                .fetch_all(id)
                .into_iter()
                .map(|(tp, o)| (tp, Some(o)))
                .collect(),
        };
        let pending = self.pending.borrow();
        let held = |tp: &TopicPartition| {
            r.require_stable
                && pending
                    .get(id)
                    .is_some_and(|m| m.values().any(|offs| offs.iter().any(|(t, _)| t == tp)))
        };
        rows.into_iter()
            .map(|(tp, o)| {
                if held(&tp) {
                    (tp, Err(KelpError::UnstableOffsetCommit))
                } else {
                    (tp, Ok(o))
                }
            })
            .collect()
    }

    async fn delete_offsets(
        &self,
        id: &str,
        parts: Vec<TopicPartition>,
    ) -> Result<PartitionResults, KelpError> {
        if !self.exists(id) {
            return Err(KelpError::GroupIdNotFound);
        }
        // Offsets of topics the members still consume cannot go (Kafka's OffsetDelete rule).
        let subscribed = self
            .with_group(id, false, |g| {
                if g.is_empty() {
                    None
                } else {
                    Some(g.subscribed_topics())
                }
            })
            .or_else(|| self.with_consumer(id, |g| (!g.is_empty()).then(|| g.subscribed_topics())))
            .flatten();
        let mut results = Vec::with_capacity(parts.len());
        let mut deletable = Vec::new();
        for tp in parts {
            match &subscribed {
                Some(topics) if topics.contains(&tp.0) => {
                    results.push((tp, Err(KelpError::GroupSubscribedToTopic)))
                }
                _ => {
                    deletable.push(tp.clone());
                    results.push((tp, Ok(())));
                }
            }
        }
        if !deletable.is_empty() {
            self.offsets.delete(id, &deletable).await?;
        }
        Ok(results)
    }

    /// Reads a group's offsets again from the store shared by every node (the group moved
    /// here).
    pub async fn reload(&self, id: &str) -> Result<(), KelpError> {
        self.offsets.reload(id).await
    }

    /// Drops a group that moved to another node: its members find the new coordinator (a
    /// waiting join or sync is answered as a rebalance, and the rejoin is refused here).
    pub fn forget(&self, id: &str) {
        self.groups.borrow_mut().remove(id);
        self.consumers.borrow_mut().remove(id);
        self.offsets.forget(id);
    }

    /// Runs every group's timers; called periodically by the shard.
    pub fn tick(&self, now: Instant) {
        let mut groups = self.groups.borrow_mut();
        for g in groups.values_mut() {
            g.tick(now);
        }
        let mut consumers = self.consumers.borrow_mut();
        for g in consumers.values_mut() {
            g.tick(now);
        }
        let ticks = self.sweep.get() + 1;
        if ticks < IDLE_SWEEP_TICKS {
            self.sweep.set(ticks);
            return;
        }
        self.sweep.set(0);
        let mut idle = self.idle.borrow_mut();
        let now_idle: std::collections::HashSet<String> = groups
            .iter()
            .filter(|(_, g)| g.is_idle())
            .map(|(id, _)| id)
            .chain(
                consumers
                    .iter()
                    .filter(|(_, g)| g.is_empty())
                    .map(|(id, _)| id),
            )
            .cloned()
            .collect();
        groups.retain(|id, _| !(now_idle.contains(id) && idle.contains(id)));
        consumers.retain(|id, _| !(now_idle.contains(id) && idle.contains(id)));
        *idle = now_idle;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use futures::executor::block_on;
    use futures::future::LocalBoxFuture;
    use futures::FutureExt;

    use super::*;
    use crate::group::consumer::{Assignment, HeartbeatIn, TopicView};
    use crate::group::offsets::InMemoryOffsetStore;

    struct NoTopics;

    impl TopicView for NoTopics {
        fn version(&self) -> u64 {
            1
        }
        fn lookup(&self, _: &str) -> Option<(uuid::Uuid, i32)> {
            None
        }
        fn matching(&self, _: &regex::Regex) -> Vec<String> {
            Vec::new()
        }
    }

    fn beat(member: &str, epoch: i32) -> GroupRequest {
        GroupRequest::ConsumerHeartbeat(
            "g".into(),
            Box::new(HeartbeatIn {
                member_id: member.into(),
                member_epoch: epoch,
                instance_id: None,
                rack_id: None,
                rebalance_timeout_ms: 30_000,
                topic_names: Some(vec!["t".into()]),
                topic_regex: None,
                server_assignor: None,
                owned: Some(Assignment::new()),
                client_id: "c".into(),
                client_host: "h".into(),
                topics: Arc::new(NoTopics),
            }),
        )
    }

    fn sweep(c: &Coordinator, now: Instant) {
        for _ in 0..IDLE_SWEEP_TICKS {
            c.tick(now);
        }
    }

    fn listed(c: &Coordinator) -> Vec<(String, &'static str)> {
        let mut l: Vec<_> = c
            .list()
            .into_iter()
            .map(|g| (g.group_id, g.group_type))
            .collect();
        l.sort();
        l
    }

    #[test]
    fn groups_left_with_nothing_are_forgotten_after_two_sweeps_offsets_stay() {
        let c = Coordinator::new(
            GroupConfig::default(),
            Rc::new(InMemoryOffsetStore::default()),
        );
        let now = Instant::now();
        block_on(c.handle(beat("m", 0)));
        // A simple commit makes an empty classic group with offsets.
        let commit = CommitRequest {
            member_id: String::new(),
            instance_id: None,
            generation_id: -1,
            offsets: vec![(("t".into(), 0), CommittedOffset::committed(5, -1, None, 0))],
            modern: true,
        };
        block_on(c.handle(GroupRequest::Commit("kept".into(), commit)));
        sweep(&c, now);
        sweep(&c, now);
        // The consumer group has a member: kept.
        assert_eq!(
            listed(&c),
            [("g".into(), "consumer"), ("kept".into(), "classic")]
        );
        assert!(
            c.groups.borrow().is_empty(),
            "the idle classic group object is gone"
        );
        block_on(c.handle(beat("m", -1)));
        sweep(&c, now);
        assert!(
            c.consumers.borrow().contains_key("g"),
            "one look is not enough"
        );
        sweep(&c, now);
        assert!(c.consumers.borrow().is_empty());
        // Offsets outlive the group object.
        assert_eq!(listed(&c), [("kept".into(), "classic")]);
    }

    /// Offsets in memory, a commit applied only once its gate opens (as a store that writes
    /// elsewhere before it keeps them).
    struct GatedStore {
        mem: Rc<InMemoryOffsetStore>,
        gate: RefCell<Option<futures::channel::oneshot::Receiver<()>>>,
    }

    impl OffsetStore for GatedStore {
        fn commit(
            &self,
            group: &str,
            offsets: Vec<(TopicPartition, CommittedOffset)>,
        ) -> LocalBoxFuture<'static, Result<(), KelpError>> {
            let (mem, group, gate) = (self.mem.clone(), group.to_string(), self.gate.take());
            Box::pin(async move {
                if let Some(gate) = gate {
                    let _ = gate.await;
                }
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
            self.mem.delete(group, partitions)
        }
        fn delete_group(&self, group: &str) -> LocalBoxFuture<'static, Result<(), KelpError>> {
            self.mem.delete_group(group)
        }
        fn groups(&self) -> Vec<String> {
            self.mem.groups()
        }
    }

    #[test]
    fn a_committed_transactions_offsets_stay_unstable_until_stored() {
        let (open, gate) = futures::channel::oneshot::channel();
        let store = Rc::new(GatedStore {
            mem: Rc::new(InMemoryOffsetStore::default()),
            gate: RefCell::new(None),
        });
        let c = Coordinator::new(GroupConfig::default(), store.clone());
        let tp: TopicPartition = ("t".into(), 0);
        let at = |offset| CommittedOffset::committed(offset, -1, None, 0);
        let commit = CommitRequest {
            member_id: String::new(),
            instance_id: None,
            generation_id: -1,
            offsets: vec![(tp.clone(), at(10))],
            modern: true,
        };
        block_on(c.handle(GroupRequest::Commit("g".into(), commit)));
        let held = TxnCommitRequest {
            producer_id: 7,
            epoch: 0,
            member_id: String::new(),
            instance_id: None,
            generation_id: -1,
            offsets: vec![(tp.clone(), at(20))],
        };
        block_on(c.handle(GroupRequest::TxnCommit("g".into(), held)));
        let stable_fetch = || {
            let r = FetchRequest {
                partitions: Some(vec![tp.clone()]),
                require_stable: true,
                member: None,
            };
            // Answered at once (no store write), also from inside the executor.
            match c.handle(GroupRequest::Fetch("g".into(), r)).now_or_never() {
                Some(GroupReply::Fetch(Ok(rows))) => rows[0].1.clone().map(|o| o.map(|o| o.offset)),
                _ => panic!("an OffsetFetch answer"),
            }
        };
        assert_eq!(stable_fetch(), Err(KelpError::UnstableOffsetCommit));
        *store.gate.borrow_mut() = Some(gate);
        let outcome = GroupRequest::TxnOutcome {
            group_id: "g".into(),
            producer_id: 7,
            commit: true,
        };
        let (done, ()) = block_on(futures::future::join(c.handle(outcome), async {
            // The store write is under way: neither the old offset nor "none held".
            assert_eq!(stable_fetch(), Err(KelpError::UnstableOffsetCommit));
            let _ = open.send(());
        }));
        assert!(matches!(done, GroupReply::Done(Ok(()))));
        assert_eq!(stable_fetch(), Ok(Some(20)));
        assert!(c.pending.borrow().is_empty());
    }
}
