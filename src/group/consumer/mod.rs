//! KIP-848 consumer groups: the coordinator assigns partitions itself, members only
//! heartbeat (ConsumerGroupHeartbeat) with their subscription and what they own.
//!
//! One [`ConsumerGroup`] holds the group epoch (bumped by every change of members,
//! subscriptions or subscribed topics' partitions), the target assignment computed by an
//! [`assignor`] at the assignment epoch, and each member's progress towards its target
//! ([`reconcile`]). Pure and single-threaded like the classic group: time comes in as `now`;
//! the cluster's topics come in through a [`TopicView`] the caller passes with each heartbeat.
//! State is held in memory: after a restart members get UNKNOWN_MEMBER_ID and rejoin at
//! epoch 0, as after a coordinator move. Calls `assignor` and `reconcile` only.

pub mod assignor;
pub mod reconcile;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use regex::Regex;
use uuid::Uuid;

use crate::error::KelpError;
use reconcile::{MemberState, Progress};

/// Partitions by topic id: an assignment as the protocol sends it.
pub type Assignment = BTreeMap<Uuid, BTreeSet<i32>>;

/// Member epoch of a member leaving the group for good.
pub const LEAVE_EPOCH: i32 = -1;
/// Member epoch of a static member leaving for now: it keeps its partitions for its
/// session timeout, for its restarted instance to take back.
pub const LEAVE_STATIC_EPOCH: i32 = -2;

/// What the coordinator needs to know of the cluster's topics.
pub trait TopicView: Send + Sync {
    /// Tells views apart: two views with the same version list the same topics.
    fn version(&self) -> u64;
    /// A topic's id and partition count.
    fn lookup(&self, name: &str) -> Option<(Uuid, i32)>;
    /// The names of the topics the pattern matches (internal ones too, as Kafka's).
    fn matching(&self, pattern: &Regex) -> Vec<String>;
}

/// Broker-wide consumer group settings.
#[derive(Debug, Clone, Copy)]
pub struct ConsumerConfig {
    /// group.consumer.session.timeout.ms: silence after which a member is removed.
    pub session_timeout: Duration,
    /// group.consumer.heartbeat.interval.ms: how often members heartbeat.
    pub heartbeat_interval: Duration,
    /// group.consumer.max.size.
    pub max_size: usize,
}

impl Default for ConsumerConfig {
    fn default() -> Self {
        ConsumerConfig {
            session_timeout: Duration::from_millis(45_000),
            heartbeat_interval: Duration::from_millis(5_000),
            max_size: i32::MAX as usize,
        }
    }
}

/// ConsumerGroupHeartbeat, decoded and checked for shape by `api/`.
#[derive(Clone)]
pub struct HeartbeatIn {
    /// The member's id (v1: chosen by the client; v0: empty on the first heartbeat).
    pub member_id: String,
    /// 0 to join, -1 to leave, -2 (static) to leave for now, else the current epoch.
    pub member_epoch: i32,
    /// group.instance.id of a static member.
    pub instance_id: Option<String>,
    /// client.rack; None: unchanged.
    pub rack_id: Option<String>,
    /// -1: unchanged.
    pub rebalance_timeout_ms: i32,
    /// None: unchanged.
    pub topic_names: Option<Vec<String>>,
    /// None: unchanged; empty: no regex.
    pub topic_regex: Option<String>,
    /// None: unchanged.
    pub server_assignor: Option<String>,
    /// What the member owns; None: unchanged since its last report.
    pub owned: Option<Assignment>,
    /// The client's `client.id`.
    pub client_id: String,
    /// The client's address.
    pub client_host: String,
    /// The cluster's topics as of this request.
    pub topics: Arc<dyn TopicView>,
}

impl std::fmt::Debug for HeartbeatIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeartbeatIn")
            .field("member_id", &self.member_id)
            .field("member_epoch", &self.member_epoch)
            .finish_non_exhaustive()
    }
}

/// The coordinator's answer to a heartbeat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatOut {
    /// The member's id.
    pub member_id: String,
    /// Its epoch now.
    pub member_epoch: i32,
    /// How long until its next heartbeat.
    pub heartbeat_interval_ms: i32,
    /// Its assignment, when it changed or the member asked in full; None: unchanged.
    pub assignment: Option<Assignment>,
}

/// One member.
struct Member {
    id: String,
    instance_id: Option<String>,
    rack_id: Option<String>,
    client_id: String,
    client_host: String,
    rebalance_timeout: Duration,
    topic_names: Vec<String>,
    regex: Option<(String, Regex)>,
    server_assignor: Option<String>,
    /// Ids of the existing topics it subscribes to.
    topics: BTreeSet<Uuid>,
    progress: Progress,
    /// The epoch before its last move, accepted once more (its answer may have been lost).
    previous_epoch: i32,
    session_deadline: Instant,
    /// Set while it must revoke partitions: past it, the member is removed.
    revoke_deadline: Option<Instant>,
    /// A static member that left for now (epoch -2).
    away: bool,
}

/// A member as ConsumerGroupDescribe shows it.
#[derive(Debug, Clone)]
pub struct DescribedMember {
    /// Member id.
    pub member_id: String,
    /// group.instance.id.
    pub instance_id: Option<String>,
    /// client.rack.
    pub rack_id: Option<String>,
    /// Member epoch.
    pub member_epoch: i32,
    /// client.id.
    pub client_id: String,
    /// Client address.
    pub client_host: String,
    /// Subscribed topic names.
    pub topic_names: Vec<String>,
    /// Subscription regex.
    pub topic_regex: Option<String>,
    /// What it owns.
    pub assignment: Assignment,
    /// What it is moving to.
    pub target: Assignment,
}

/// A group as ConsumerGroupDescribe shows it.
#[derive(Debug, Clone)]
pub struct Description {
    /// Empty, Assigning, Reconciling or Stable.
    pub state: &'static str,
    /// Group epoch.
    pub epoch: i32,
    /// Epoch of the target assignment.
    pub assignment_epoch: i32,
    /// The assignor in use.
    pub assignor: String,
    /// Members by id.
    pub members: Vec<DescribedMember>,
    /// Names of the topics in the assignments.
    pub topic_names: BTreeMap<Uuid, String>,
}

/// One KIP-848 consumer group.
pub struct ConsumerGroup {
    /// The group id.
    pub id: String,
    epoch: i32,
    assignment_epoch: i32,
    members: BTreeMap<String, Member>,
    /// group.instance.id → member id.
    statics: HashMap<String, String>,
    target: BTreeMap<String, Assignment>,
    /// Subscribed topics: id → (name, partition count).
    subscribed: BTreeMap<Uuid, (String, i32)>,
    /// Version of the view the subscriptions were last resolved against. (Not the view:
    /// a group holding an old snapshot of every topic for as long as it lives would multiply
    /// the metadata's memory by the number of groups.)
    view_version: Option<u64>,
    config: ConsumerConfig,
}

impl ConsumerGroup {
    /// A new, empty group.
    pub fn new(id: impl Into<String>, config: ConsumerConfig) -> Self {
        ConsumerGroup {
            id: id.into(),
            epoch: 0,
            assignment_epoch: 0,
            members: BTreeMap::new(),
            statics: HashMap::new(),
            target: BTreeMap::new(),
            subscribed: BTreeMap::new(),
            view_version: None,
            config,
        }
    }

    /// Whether the group has no members.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Names of the topics the members subscribe to (OffsetDelete refuses those).
    pub fn subscribed_topics(&self) -> Vec<String> {
        self.subscribed.values().map(|(n, _)| n.clone()).collect()
    }

    /// The group's state as Kafka names it.
    pub fn state(&self) -> &'static str {
        if self.members.is_empty() {
            "Empty"
        } else if self.epoch != self.assignment_epoch {
            "Assigning"
        } else if self.members.values().any(|m| {
            m.progress.state != MemberState::Stable || m.progress.epoch != self.assignment_epoch
        }) {
            "Reconciling"
        } else {
            "Stable"
        }
    }

    /// Handles one heartbeat.
    pub fn heartbeat(&mut self, r: HeartbeatIn, now: Instant) -> Result<HeartbeatOut, KelpError> {
        if r.member_epoch == LEAVE_EPOCH || r.member_epoch == LEAVE_STATIC_EPOCH {
            return self.leave(&r);
        }
        let regex = match r.topic_regex.as_deref() {
            Some(re) if !re.is_empty() => Some((re.to_string(), compile(re)?)),
            _ => None,
        };
        if let Some(a) = r.server_assignor.as_deref() {
            if !assignor::NAMES.contains(&a) {
                return Err(KelpError::UnsupportedAssignor(a.to_string()));
            }
        }
        let mut changed = false;
        let id = if r.member_epoch == 0 {
            let (id, new) = self.join(&r, now)?;
            changed |= new;
            id
        } else {
            self.check_epoch(&r)?;
            r.member_id.clone()
        };
        let before = self.members.get(&id).map(|m| (m.progress.clone(), m.away));
        let m = self
            .members
            .get_mut(&id)
            .ok_or(KelpError::UnknownMemberId)?;
        m.away = false;
        m.client_id = r.client_id.clone();
        m.client_host = r.client_host.clone();
        m.session_deadline = now + self.config.session_timeout;
        if let Some(rack) = &r.rack_id {
            m.rack_id = Some(rack.clone()).filter(|s| !s.is_empty());
        }
        if r.rebalance_timeout_ms >= 0 {
            m.rebalance_timeout = Duration::from_millis(r.rebalance_timeout_ms as u64);
        }
        if let Some(names) = &r.topic_names {
            let mut names = names.clone();
            names.sort();
            names.dedup();
            changed |= names != m.topic_names;
            m.topic_names = names;
        }
        if r.topic_regex.is_some() {
            changed |= regex.as_ref().map(|(s, _)| s) != m.regex.as_ref().map(|(s, _)| s);
            m.regex = regex;
        }
        if let Some(a) = &r.server_assignor {
            changed |= m.server_assignor.as_ref() != Some(a);
            m.server_assignor = Some(a.clone());
        }
        let version = r.topics.version();
        if changed || self.view_version != Some(version) {
            self.view_version = Some(version);
            changed |= self.resolve_subscriptions(&*r.topics);
        }
        if changed {
            self.epoch += 1;
        }
        if self.epoch > self.assignment_epoch {
            self.compute_target();
        }
        self.reconcile(&id, r.owned.as_ref(), now);
        let m = self.members.get(&id).ok_or(KelpError::UnknownMemberId)?;
        let moved = before.as_ref() != Some(&(m.progress.clone(), false));
        let full = r.member_epoch == 0 || r.owned.is_some();
        Ok(HeartbeatOut {
            member_id: id,
            member_epoch: m.progress.epoch,
            heartbeat_interval_ms: self.config.heartbeat_interval.as_millis() as i32,
            assignment: (moved || full).then(|| m.progress.assigned.clone()),
        })
    }

    /// Epoch 0: a new member, a known one rejoining, or a static member's new incarnation.
    /// Returns its id and whether it is new to the group.
    fn join(&mut self, r: &HeartbeatIn, now: Instant) -> Result<(String, bool), KelpError> {
        let id = if r.member_id.is_empty() {
            uuid::Uuid::new_v4().to_string()
        } else {
            r.member_id.clone()
        };
        if self.members.contains_key(&id) {
            return Ok((id, false));
        }
        if let Some(inst) = &r.instance_id {
            if let Some(old_id) = self.statics.get(inst).cloned() {
                let away = self.members.get(&old_id).is_none_or(|m| m.away);
                if !away {
                    return Err(KelpError::UnreleasedInstanceId(inst.clone()));
                }
                // The new incarnation takes over what the old one owned and was to own, so
                // the group needs no rebalance.
                if let Some(mut m) = self.members.remove(&old_id) {
                    m.id = id.clone();
                    self.members.insert(id.clone(), m);
                }
                if let Some(t) = self.target.remove(&old_id) {
                    self.target.insert(id.clone(), t);
                }
                self.statics.insert(inst.clone(), id.clone());
                return Ok((id, false));
            }
        }
        if self.members.len() >= self.config.max_size {
            return Err(KelpError::GroupMaxSizeReached(self.config.max_size));
        }
        if let Some(inst) = &r.instance_id {
            self.statics.insert(inst.clone(), id.clone());
        }
        self.members.insert(
            id.clone(),
            Member {
                id: id.clone(),
                instance_id: r.instance_id.clone(),
                rack_id: None,
                client_id: String::new(),
                client_host: String::new(),
                rebalance_timeout: Duration::from_millis(r.rebalance_timeout_ms.max(0) as u64),
                topic_names: Vec::new(),
                regex: None,
                server_assignor: None,
                topics: BTreeSet::new(),
                progress: Progress {
                    state: MemberState::Stable,
                    epoch: 0,
                    assigned: Assignment::new(),
                    revoking: Assignment::new(),
                },
                previous_epoch: 0,
                session_deadline: now + self.config.session_timeout,
                revoke_deadline: None,
                away: false,
            },
        );
        Ok((id, true))
    }

    /// A known member's epoch must be its current one, or its previous one when what it
    /// reports owning is still its own (the answer that moved it was lost).
    fn check_epoch(&self, r: &HeartbeatIn) -> Result<(), KelpError> {
        let m = self
            .members
            .get(&r.member_id)
            .ok_or(KelpError::UnknownMemberId)?;
        let expected = m.progress.epoch;
        let fenced = KelpError::FencedMemberEpoch {
            got: r.member_epoch,
            expected,
        };
        if r.member_epoch > expected {
            return Err(fenced);
        }
        if r.member_epoch < expected {
            let owned_is_ours = r.owned.as_ref().is_some_and(|o| {
                o.iter()
                    .all(|(t, ps)| m.progress.assigned.get(t).is_some_and(|a| ps.is_subset(a)))
            });
            if r.member_epoch != m.previous_epoch || !owned_is_ours {
                return Err(fenced);
            }
        }
        Ok(())
    }

    fn leave(&mut self, r: &HeartbeatIn) -> Result<HeartbeatOut, KelpError> {
        let id = match (&r.instance_id, self.members.contains_key(&r.member_id)) {
            (_, true) => r.member_id.clone(),
            (Some(inst), false) => self
                .statics
                .get(inst)
                .cloned()
                .ok_or(KelpError::UnknownMemberId)?,
            (None, false) => return Err(KelpError::UnknownMemberId),
        };
        let out = |epoch| HeartbeatOut {
            member_id: r.member_id.clone(),
            member_epoch: epoch,
            heartbeat_interval_ms: 0,
            assignment: None,
        };
        if r.member_epoch == LEAVE_STATIC_EPOCH && r.instance_id.is_some() {
            if let Some(m) = self.members.get_mut(&id) {
                m.away = true;
            }
            return Ok(out(LEAVE_STATIC_EPOCH));
        }
        self.remove(&id);
        Ok(out(LEAVE_EPOCH))
    }

    /// Drops a member: its partitions are free, and the group moves to a new epoch.
    fn remove(&mut self, id: &str) {
        if let Some(m) = self.members.remove(id) {
            if let Some(inst) = &m.instance_id {
                if self.statics.get(inst).map(String::as_str) == Some(id) {
                    self.statics.remove(inst);
                }
            }
            self.target.remove(id);
            self.epoch += 1;
            let members = &self.members;
            self.subscribed
                .retain(|t, _| members.values().any(|m| m.topics.contains(t)));
        }
    }

    /// Resolves every member's subscription against the current view; whether the group's
    /// subscribed topics (or their partition counts) or a member's topics changed.
    fn resolve_subscriptions(&mut self, view: &dyn TopicView) -> bool {
        let mut subscribed = BTreeMap::new();
        let mut regex_hits: HashMap<String, Vec<String>> = HashMap::new();
        let mut changed = false;
        for m in self.members.values_mut() {
            let mut names: Vec<String> = m.topic_names.clone();
            if let Some((src, re)) = &m.regex {
                let hits = regex_hits
                    .entry(src.clone())
                    .or_insert_with(|| view.matching(re));
                names.extend(hits.iter().cloned());
            }
            let mut topics = BTreeSet::new();
            for n in names {
                if let Some((id, parts)) = view.lookup(&n) {
                    topics.insert(id);
                    subscribed.insert(id, (n, parts));
                }
            }
            changed |= topics != m.topics;
            m.topics = topics;
        }
        changed |= subscribed != self.subscribed;
        self.subscribed = subscribed;
        changed
    }

    /// The assignor most members ask for, else the default.
    fn assignor(&self) -> String {
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some(a) = m.server_assignor.as_deref() {
                *votes.entry(a).or_default() += 1;
            }
        }
        votes
            .into_iter()
            .max_by_key(|(name, n)| (*n, *name == assignor::DEFAULT))
            .map_or(assignor::DEFAULT.to_string(), |(name, _)| name.to_string())
    }

    fn compute_target(&mut self) {
        let partitions: BTreeMap<Uuid, i32> = self
            .subscribed
            .iter()
            .map(|(id, (_, n))| (*id, *n))
            .collect();
        let subs: Vec<assignor::Subscriber<'_>> = self
            .members
            .values()
            .map(|m| assignor::Subscriber {
                id: &m.id,
                topics: m.topics.clone(),
                previous: self.target.get(&m.id),
            })
            .collect();
        let target = assignor::assign(&self.assignor(), &subs, &partitions);
        self.target = target;
        self.assignment_epoch = self.epoch;
    }

    /// Moves one member towards its target.
    fn reconcile(&mut self, id: &str, owned: Option<&Assignment>, now: Instant) {
        let empty = Assignment::new();
        let target = self.target.get(id).unwrap_or(&empty);
        let members = &self.members;
        let Some(current) = members.get(id).map(|m| &m.progress) else {
            return;
        };
        // What the other members hold is gathered only when the member has partitions to
        // gain: a member already at its target (most heartbeats) needs none of it.
        let held: std::cell::OnceCell<HashSet<(Uuid, i32)>> = std::cell::OnceCell::new();
        let held_elsewhere = |t: &Uuid, p: i32| {
            held.get_or_init(|| {
                members
                    .values()
                    .filter(|o| o.id != id)
                    .flat_map(|o| {
                        o.progress
                            .assigned
                            .iter()
                            .chain(o.progress.revoking.iter())
                            .flat_map(|(t, ps)| ps.iter().map(move |p| (*t, *p)))
                    })
                    .collect()
            })
            .contains(&(*t, p))
        };
        let next = reconcile::advance(
            current,
            self.assignment_epoch,
            target,
            owned,
            held_elsewhere,
        );
        let Some(m) = self.members.get_mut(id) else {
            return;
        };
        if next.epoch != m.progress.epoch {
            m.previous_epoch = m.progress.epoch;
        }
        m.revoke_deadline = match (m.progress.state, next.state) {
            (MemberState::UnrevokedPartitions, MemberState::UnrevokedPartitions) => {
                m.revoke_deadline
            }
            (_, MemberState::UnrevokedPartitions) => Some(now + m.rebalance_timeout),
            _ => None,
        };
        m.progress = next;
    }

    /// Removes members whose session expired or who did not revoke in time.
    pub fn tick(&mut self, now: Instant) {
        let gone: Vec<String> = self
            .members
            .values()
            .filter(|m| now >= m.session_deadline || m.revoke_deadline.is_some_and(|d| now >= d))
            .map(|m| m.id.clone())
            .collect();
        for id in gone {
            tracing::info!(group = %self.id, member = %id, "consumer group member removed: session or rebalance timeout");
            self.remove(&id);
        }
    }

    /// Checks an offset commit (or an OffsetFetch naming a member): `member_epoch` < 0 with
    /// no member id is an admin or a manual committer, let in only while the group is empty.
    /// A member must commit with OffsetCommit v9 or later (`modern`), as Kafka requires:
    /// an older version is UNSUPPORTED_VERSION.
    pub fn check_member(
        &self,
        member_id: &str,
        member_epoch: i32,
        modern: bool,
    ) -> Result<(), KelpError> {
        if member_epoch < 0 && member_id.is_empty() && self.members.is_empty() {
            return Ok(());
        }
        let m = self
            .members
            .get(member_id)
            .ok_or(KelpError::UnknownMemberId)?;
        if !modern {
            return Err(KelpError::VersionNotForGroup(
                "OffsetCommit version 9 or above must be used by members using the modern \
                 group protocol",
            ));
        }
        let expected = m.progress.epoch;
        if member_epoch > expected {
            return Err(KelpError::FencedMemberEpoch {
                got: member_epoch,
                expected,
            });
        }
        if member_epoch < expected {
            return Err(KelpError::StaleMemberEpoch {
                got: member_epoch,
                expected,
            });
        }
        Ok(())
    }

    /// The group for ConsumerGroupDescribe.
    pub fn describe(&self) -> Description {
        let members = self
            .members
            .values()
            .map(|m| DescribedMember {
                member_id: m.id.clone(),
                instance_id: m.instance_id.clone(),
                rack_id: m.rack_id.clone(),
                member_epoch: m.progress.epoch,
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                topic_names: m.topic_names.clone(),
                topic_regex: m.regex.as_ref().map(|(s, _)| s.clone()),
                assignment: m.progress.assigned.clone(),
                target: self.target.get(&m.id).cloned().unwrap_or_default(),
            })
            .collect();
        Description {
            state: self.state(),
            epoch: self.epoch,
            assignment_epoch: self.assignment_epoch,
            assignor: self.assignor(),
            members,
            topic_names: self
                .subscribed
                .iter()
                .map(|(id, (n, _))| (*id, n.clone()))
                .collect(),
        }
    }
}

/// Compiles a subscription regex; Kafka matches the whole topic name (RE2/J `matches`).
pub fn compile(pattern: &str) -> Result<Regex, KelpError> {
    Regex::new(&format!("^(?:{pattern})$"))
        .map_err(|e| KelpError::InvalidRegularExpression(format!("{pattern}: {e}")))
}
