//! One shard's share groups (KIP-932): the groups hashed to this shard, their members, the
//! share sessions their members fetch in, and their share-partitions, with the durable form
//! of each share-partition written through the shard's offset store (see [`super::state`]).
//!
//! Kafka keeps a share-partition on the partition's leader; Kelp keeps a group's
//! share-partitions with the group, on its coordinator shard, so that one core owns every
//! decision about a group's records (acquisitions of two members never race) and one store
//! write makes an acknowledgement durable. The shard drives it: `shard::share` reads the
//! partitions and hands the batches read to [`ShareCoordinator::acquire`]. Nothing here
//! touches the network or partitions.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::rc::Rc;
use std::time::{Duration, Instant};

use uuid::Uuid;

use super::group::{
    DescribedMember, ShareGroup, ShareGroupConfig, ShareHeartbeat, ShareHeartbeatOut,
};
use super::partition::{AckBatch, Acquired, Limits, SharePartition};
use super::session::{FetchContext, Requester, SessionPartition, ShareSessions};
use super::state::{self, Stored};
use crate::error::KelpError;
use crate::group::consumer::TopicView;
use crate::group::OffsetStore;

/// A share-partition: (group, topic id, partition).
pub type PartKey = (String, Uuid, i32);

/// Broker-wide share settings beyond membership (Kafka's group.share.*).
#[derive(Debug, Clone, Copy)]
pub struct ShareSettings {
    /// Membership: session timeout, heartbeat interval, group size.
    pub group: ShareGroupConfig,
    /// Delivery limit and in-flight window of each share-partition.
    pub limits: Limits,
    /// group.share.max.share.sessions.
    pub max_sessions: usize,
    /// group.share.record.lock.duration.ms: how long a member holds what it acquired,
    /// unless the group's share.record.lock.duration.ms says otherwise.
    pub record_lock: Duration,
}

impl Default for ShareSettings {
    fn default() -> Self {
        ShareSettings {
            group: ShareGroupConfig::default(),
            limits: Limits::default(),
            max_sessions: 2000,
            record_lock: Duration::from_secs(30),
        }
    }
}

struct Loaded {
    topic: String,
    part: SharePartition,
}

/// A share group's members as ShareGroupDescribe lists them.
#[derive(Debug, Clone)]
pub struct ShareDescription {
    /// "Empty" or "Stable".
    pub state: &'static str,
    /// The group epoch.
    pub epoch: i32,
    /// (id, epoch, rack, subscribed names, assignment) per member.
    pub members: Vec<DescribedMember>,
}

/// Where one share-partition of a group stands (DescribeShareGroupOffsets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareStart {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// Its start offset (SPSO).
    pub start: i64,
    /// Offsets at or above the start already done (acknowledged or archived).
    pub done: i64,
}

/// The share groups of one shard (see the module docs).
pub struct ShareCoordinator {
    settings: ShareSettings,
    offsets: Rc<dyn OffsetStore>,
    groups: RefCell<HashMap<String, ShareGroup>>,
    parts: RefCell<HashMap<PartKey, Loaded>>,
    sessions: RefCell<ShareSessions>,
    /// Fired when records may have become available (released, expired, acknowledged):
    /// waiting fetches look again.
    changed: event_listener::Event,
}

impl ShareCoordinator {
    /// No share groups yet; share state goes to `offsets`.
    pub fn new(settings: ShareSettings, offsets: Rc<dyn OffsetStore>) -> Self {
        ShareCoordinator {
            settings,
            offsets,
            groups: RefCell::new(HashMap::new()),
            parts: RefCell::new(HashMap::new()),
            sessions: RefCell::new(ShareSessions::new(settings.max_sessions.max(1))),
            changed: event_listener::Event::new(),
        }
    }

    /// The broker-wide settings.
    pub fn settings(&self) -> &ShareSettings {
        &self.settings
    }

    /// Whether `id` is a share group: it has members or stored share state.
    pub fn is_share(&self, id: &str) -> bool {
        self.groups.borrow().contains_key(id) || self.has_stored_state(id)
    }

    /// Whether `id` has share state in the offsets store.
    pub fn has_stored_state(&self, id: &str) -> bool {
        self.offsets
            .fetch_all(id)
            .iter()
            .any(|((t, _), _)| state::topic_of(t).is_some())
    }

    /// Whether `id` is a share group with members.
    pub fn has_members(&self, id: &str) -> bool {
        self.groups.borrow().get(id).is_some_and(|g| !g.is_empty())
    }

    /// Handles a ShareGroupHeartbeat for group `id` at `now` (the caller checked the group
    /// is not of another type).
    pub fn heartbeat(
        &self,
        id: &str,
        hb: ShareHeartbeat<'_>,
        view: &dyn TopicView,
        now: Instant,
    ) -> Result<ShareHeartbeatOut, KelpError> {
        let mut groups = self.groups.borrow_mut();
        if hb.member_epoch == 0 && !groups.contains_key(id) {
            groups.insert(id.to_string(), ShareGroup::default());
        }
        // Members live in memory: after a restart a member is unknown and rejoins at epoch
        // 0 (UNKNOWN_MEMBER_ID; GROUP_ID_NOT_FOUND would be fatal to the Java client).
        let g = groups.get_mut(id).ok_or(KelpError::UnknownMemberId)?;
        g.heartbeat(hb, view, &self.settings.group, now)
    }

    /// ShareGroupDescribe of group `id`; None when it is not a share group.
    pub fn describe(&self, id: &str) -> Option<ShareDescription> {
        if let Some(g) = self.groups.borrow().get(id) {
            return Some(ShareDescription {
                state: if g.is_empty() { "Empty" } else { "Stable" },
                epoch: g.epoch(),
                members: g.members().collect(),
            });
        }
        self.has_stored_state(id).then(|| ShareDescription {
            state: "Empty",
            epoch: 0,
            members: Vec::new(),
        })
    }

    /// Each share-partition of group `id` (in memory, else as stored): (topic, partition,
    /// start, offsets done above the start); None when `id` is not a share group.
    pub fn starts(&self, id: &str) -> Option<Vec<ShareStart>> {
        if !self.is_share(id) {
            return None;
        }
        let mut out: BTreeMap<(String, i32), (i64, i64)> = BTreeMap::new();
        for ((t, p), c) in self.offsets.fetch_all(id) {
            let (Some(topic), Some(s)) = (state::topic_of(&t), state::decode(&c)) else {
                continue;
            };
            let done = s
                .batches
                .iter()
                .filter(|b| b.state.is_final())
                .map(|b| b.last - b.first + 1)
                .sum();
            out.insert((topic.to_string(), p), (s.start, done));
        }
        for (k, l) in self.parts.borrow().iter().filter(|(k, _)| k.0 == id) {
            out.insert((l.topic.clone(), k.2), (l.part.start(), l.part.completed()));
        }
        Some(
            out.into_iter()
                .map(|((topic, partition), (start, done))| ShareStart {
                    topic,
                    partition,
                    start,
                    done,
                })
                .collect(),
        )
    }

    /// AlterShareGroupOffsets: each listed share-partition of group `id` starts over at the
    /// given offset, nothing in flight, stored. The group must have no members.
    pub async fn alter_starts(
        &self,
        id: &str,
        starts: &[(String, Uuid, i32, i64)],
    ) -> Result<(), KelpError> {
        if self.has_members(id) {
            return Err(KelpError::NonEmptyGroup);
        }
        let now_ms = crate::clock::now_ms();
        let mut offsets = Vec::with_capacity(starts.len());
        {
            let mut parts = self.parts.borrow_mut();
            for (topic, topic_id, p, start) in starts {
                parts.remove(&(id.to_string(), *topic_id, *p));
                let s = Stored {
                    topic_id: *topic_id,
                    start: *start,
                    batches: Vec::new(),
                };
                offsets.push(((state::key(topic), *p), state::encode(&s, now_ms)));
            }
        }
        self.offsets.commit(id, offsets).await
    }

    /// DeleteShareGroupOffsets: forgets the share state of these topics in group `id`. The
    /// group must exist and have no members.
    pub async fn delete_starts(&self, id: &str, topics: &[String]) -> Result<(), KelpError> {
        if !self.is_share(id) {
            return Err(KelpError::GroupIdNotFound);
        }
        if self.has_members(id) {
            return Err(KelpError::NonEmptyGroup);
        }
        let gone: Vec<(String, i32)> = self
            .offsets
            .fetch_all(id)
            .into_iter()
            .map(|(tp, _)| tp)
            .filter(|(t, _)| state::topic_of(t).is_some_and(|t| topics.iter().any(|x| x == t)))
            .collect();
        self.parts
            .borrow_mut()
            .retain(|k, l| k.0 != id || !topics.contains(&l.topic));
        self.offsets.delete(id, &gone).await
    }

    /// The share groups on this shard and whether each has members, for ListGroups.
    pub fn listed(&self) -> Vec<(String, bool)> {
        let groups = self.groups.borrow();
        let mut out: Vec<(String, bool)> = groups
            .iter()
            .map(|(id, g)| (id.clone(), !g.is_empty()))
            .collect();
        for id in self.offsets.groups() {
            if !groups.contains_key(&id) && self.has_stored_state(&id) {
                out.push((id, false));
            }
        }
        out
    }

    /// Forgets group `id` (DeleteGroups; its stored state is deleted with its offsets).
    pub fn forget_group(&self, id: &str) {
        self.groups.borrow_mut().remove(id);
        self.parts.borrow_mut().retain(|k, _| k.0 != id);
    }

    /// Opens, moves on or closes the share session of a ShareFetch.
    pub fn session_fetch(
        &self,
        who: Requester<'_>,
        epoch: i32,
        added: &[SessionPartition],
        forgotten: &[SessionPartition],
        acks: bool,
    ) -> Result<FetchContext, KelpError> {
        self.sessions
            .borrow_mut()
            .fetch(who, epoch, added, forgotten, acks)
    }

    /// Checks and moves on the share session of a ShareAcknowledge (its partitions when it
    /// closes it).
    pub fn session_acknowledge(
        &self,
        who: Requester<'_>,
        epoch: i32,
    ) -> Result<Option<BTreeSet<SessionPartition>>, KelpError> {
        self.sessions.borrow_mut().acknowledge(who, epoch)
    }

    /// Drops the sessions of a closed connection: (group, member, partitions) of each.
    pub fn connection_closed(
        &self,
        connection: u64,
    ) -> Vec<(String, String, BTreeSet<SessionPartition>)> {
        self.sessions.borrow_mut().connection_closed(connection)
    }

    /// Whether the share-partition is in memory.
    pub fn loaded(&self, key: &PartKey) -> bool {
        self.parts.borrow().contains_key(key)
    }

    /// The stored state of a share-partition, if any was stored for this incarnation of
    /// the topic.
    pub fn stored(&self, key: &PartKey, topic: &str) -> Option<Stored> {
        let tp = (state::key(topic), key.2);
        self.offsets
            .fetch(&key.0, &tp)
            .and_then(|c| state::decode(&c))
            .filter(|s| s.topic_id == key.1)
    }

    /// Puts a share-partition in memory: from its stored state, else starting at `start`.
    pub fn load(&self, key: PartKey, topic: &str, stored: Option<Stored>, start: i64) {
        let limits = self.settings.limits;
        let part = match stored {
            Some(s) => SharePartition::restore(s.start, &s.batches, limits),
            None => SharePartition::new(start, limits),
        };
        self.parts.borrow_mut().insert(
            key,
            Loaded {
                topic: topic.to_string(),
                part,
            },
        );
    }

    /// Where the next read of a share-partition starts (None: not loaded, or its window is
    /// full of acquired records).
    pub fn next_fetch_offset(&self, key: &PartKey) -> Option<i64> {
        self.parts.borrow().get(key)?.part.next_fetch_offset()
    }

    /// The share-partition's start, if loaded.
    pub fn start(&self, key: &PartKey) -> Option<i64> {
        self.parts.borrow().get(key).map(|l| l.part.start())
    }

    /// The log start moved past what the share-partition still had in flight.
    pub fn log_start_moved(&self, key: &PartKey, log_start: i64) {
        if let Some(l) = self.parts.borrow_mut().get_mut(key) {
            l.part.log_start_moved(log_start);
        }
    }

    /// Acquires records of the batches read for `member` (see [`SharePartition::acquire`]).
    pub fn acquire(
        &self,
        key: &PartKey,
        member: &Rc<str>,
        batches: &[(i64, i64)],
        max_records: usize,
        now: Instant,
        lock: Duration,
    ) -> Vec<Acquired> {
        match self.parts.borrow_mut().get_mut(key) {
            Some(l) => l.part.acquire(member, batches, max_records, now, lock),
            None => Vec::new(),
        }
    }

    /// Applies `member`'s acknowledgements of one share-partition and stores the result
    /// before answering; on a failed store the acknowledgement is undone, and only it:
    /// what other members did to the share-partition during the store write stays.
    pub async fn acknowledge(
        &self,
        key: &PartKey,
        member: &str,
        acks: &[AckBatch],
    ) -> Result<(), KelpError> {
        let undo = {
            let mut parts = self.parts.borrow_mut();
            // Kafka: a share-partition not loaded on this broker.
            let l = parts
                .get_mut(key)
                .ok_or(KelpError::UnknownTopicOrPartition)?;
            l.part.acknowledge(member, acks)?
        };
        if let Err(e) = self.persist(std::slice::from_ref(key)).await {
            if let Some(l) = self.parts.borrow_mut().get_mut(key) {
                l.part.undo(undo);
            }
            return Err(e);
        }
        self.changed.notify(usize::MAX);
        Ok(())
    }

    /// Releases what `member` holds of `group` on `parts` (its session closed or its
    /// connection went), stored.
    pub async fn release(&self, group: &str, member: &str, parts: &BTreeSet<SessionPartition>) {
        let mut changed = Vec::new();
        {
            let mut loaded = self.parts.borrow_mut();
            for &(topic, p) in parts {
                let key = (group.to_string(), topic, p);
                if let Some(l) = loaded.get_mut(&key) {
                    if l.part.release_member(member) > 0 {
                        changed.push(key);
                    }
                }
            }
        }
        if changed.is_empty() {
            return;
        }
        self.changed.notify(usize::MAX);
        if let Err(e) = self.persist(&changed).await {
            // As Kafka: the records are available in memory all the same.
            tracing::warn!(group, error = %e, "released share records not stored");
        }
    }

    /// Ends the record locks due by `now` and removes members whose session timed out;
    /// returns the share-partitions whose records changed, for the caller to store.
    pub fn expire(&self, view: &dyn TopicView, now: Instant) -> Vec<PartKey> {
        for g in self.groups.borrow_mut().values_mut() {
            g.expire(view, now);
        }
        let changed: Vec<PartKey> = self
            .parts
            .borrow_mut()
            .iter_mut()
            .filter(|(_, l)| l.part.next_expiry().is_some_and(|t| t <= now))
            .filter_map(|(k, l)| (l.part.expire_locks(now) > 0).then(|| k.clone()))
            .collect();
        if !changed.is_empty() {
            self.changed.notify(usize::MAX);
        }
        changed
    }

    /// Stores the state of these share-partitions (durable when this returns Ok).
    pub async fn persist(&self, keys: &[PartKey]) -> Result<(), KelpError> {
        let now_ms = crate::clock::now_ms();
        let mut by_group: BTreeMap<&str, Vec<_>> = BTreeMap::new();
        {
            let parts = self.parts.borrow();
            for k in keys {
                if let Some(l) = parts.get(k) {
                    let s = Stored {
                        topic_id: k.1,
                        start: l.part.start(),
                        batches: l.part.state_batches(),
                    };
                    by_group
                        .entry(k.0.as_str())
                        .or_default()
                        .push(((state::key(&l.topic), k.2), state::encode(&s, now_ms)));
                }
            }
        }
        for (group, offsets) in by_group {
            self.offsets.commit(group, offsets).await?;
        }
        Ok(())
    }

    /// Registers interest in the next change (register before looking).
    pub fn listen(&self) -> event_listener::EventListener {
        self.changed.listen()
    }

    /// Drops from memory the share-partitions of groups with no member and no session
    /// (their state is stored; the next fetch loads it again), so groups that come and go
    /// over months do not pile up.
    pub fn drop_idle(&self) {
        let sessions = self.sessions.borrow();
        let groups = self.groups.borrow();
        let busy: BTreeSet<&str> = sessions.groups().collect();
        self.parts.borrow_mut().retain(|k, l| {
            let keep =
                busy.contains(k.0.as_str()) || groups.get(&k.0).is_some_and(|g| !g.is_empty());
            keep || l.part.next_expiry().is_some()
        });
        drop(groups);
        self.groups
            .borrow_mut()
            .retain(|id, g| !g.is_empty() || busy.contains(id.as_str()));
    }
}
