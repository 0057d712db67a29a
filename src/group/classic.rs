//! The classic group state machine: join, sync, heartbeat, leave and the timers that drive
//! rebalances (initial delay, rebalance timeout, session expiry, pending-sync timeout).
//!
//! Pure and single-threaded: time comes in as `now`, deferred JoinGroup/SyncGroup answers go
//! out through oneshot channels the coordinator awaits. Calls only `member` and `protocol`.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::channel::oneshot;

use super::member::Member;
use super::messages::{
    DescribedMember, GroupDescription, HeartbeatRequest, JoinMember, JoinRequest, JoinResponse,
    LeavingMember, SyncRequest, SyncResponse,
};
use super::protocol;
use super::state::GroupState;
use crate::error::KelpError;

/// Broker-wide group settings.
#[derive(Debug, Clone, Copy)]
pub struct GroupConfig {
    /// group.initial.rebalance.delay.ms.
    pub initial_rebalance_delay: Duration,
    /// group.min.session.timeout.ms: a shorter session is refused, so a client cannot make
    /// the coordinator expire members in a tight loop.
    pub min_session_timeout_ms: i32,
    /// group.max.session.timeout.ms: a longer session is refused, so a dead member cannot
    /// stall its group for long.
    pub max_session_timeout_ms: i32,
    /// Settings of KIP-848 consumer groups.
    pub consumer: super::consumer::ConsumerConfig,
    /// Settings of KIP-932 share groups.
    pub share: crate::group::share::coordinator::ShareSettings,
}

impl Default for GroupConfig {
    fn default() -> Self {
        GroupConfig {
            initial_rebalance_delay: Duration::from_millis(3000),
            min_session_timeout_ms: 6000,
            max_session_timeout_ms: 1_800_000,
            consumer: super::consumer::ConsumerConfig::default(),
            share: crate::group::share::coordinator::ShareSettings::default(),
        }
    }
}

/// An answer now, or one that arrives when the rebalance gets there.
pub enum Pending<T> {
    /// Answered at once.
    Ready(T),
    /// Answered when the rebalance completes (or the member is dropped).
    Wait(oneshot::Receiver<T>),
}

/// The initial-delay window of a group's first rebalance (Kafka's InitialDelayedJoin).
#[derive(Debug, Clone, Copy)]
struct InitialDelay {
    window_end: Instant,
    cap: Instant,
    new_member_joined: bool,
}

/// One classic group.
pub struct Group {
    /// The group id.
    pub id: String,
    /// Where the group is in its rebalance cycle.
    pub state: GroupState,
    /// Bumped by every completed join phase; requests of another generation are refused.
    pub generation: i32,
    /// Set by the first member; every later one must match.
    pub protocol_type: Option<String>,
    /// The assignor chosen for the current generation.
    pub protocol: Option<String>,
    /// Member id of the leader, who computes the assignment.
    pub leader: Option<String>,
    members: HashMap<String, Member>,
    /// Member ids handed out with MEMBER_ID_REQUIRED, valid until the deadline.
    pending: HashMap<String, Instant>,
    /// group.instance.id → member id.
    static_members: HashMap<String, String>,
    join_deadline: Option<Instant>,
    initial_delay: Option<InitialDelay>,
    sync_deadline: Option<Instant>,
    next_join_order: u64,
    config: GroupConfig,
}

impl Group {
    /// A new, empty group.
    pub fn new(id: impl Into<String>, config: GroupConfig) -> Self {
        Group {
            id: id.into(),
            state: GroupState::Empty,
            generation: 0,
            protocol_type: None,
            protocol: None,
            leader: None,
            members: HashMap::new(),
            pending: HashMap::new(),
            static_members: HashMap::new(),
            join_deadline: None,
            initial_delay: None,
            sync_deadline: None,
            next_join_order: 0,
            config,
        }
    }

    /// Whether the group has no members (it may still have committed offsets).
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Number of members.
    pub fn member_count(&self) -> usize {
        self.members.len()
    }

    /// Whether `member_id` is a member.
    pub fn has_member(&self, member_id: &str) -> bool {
        self.members.contains_key(member_id)
    }

    /// Topics the members subscribe to, when they use the consumer protocol.
    pub fn subscribed_topics(&self) -> Vec<String> {
        if self.protocol_type.as_deref() != Some("consumer") {
            return Vec::new();
        }
        let Some(p) = self.protocol.as_deref() else {
            return Vec::new();
        };
        let mut topics: Vec<String> = self
            .members
            .values()
            .filter_map(|m| protocol::subscribed_topics(&m.metadata_for(p)))
            .flatten()
            .collect();
        topics.sort();
        topics.dedup();
        topics
    }

    fn new_member_id(prefix: &str) -> String {
        format!("{prefix}-{}", uuid::Uuid::new_v4())
    }

    /// Handles JoinGroup.
    pub fn join(&mut self, r: JoinRequest, now: Instant) -> Pending<JoinResponse> {
        let fail = |e: KelpError, id: &str| Pending::Ready(JoinResponse::failed(e, id.to_string()));
        if self.state == GroupState::Dead {
            return fail(KelpError::CoordinatorNotAvailable, &r.member_id);
        }
        if r.session_timeout_ms < self.config.min_session_timeout_ms
            || r.session_timeout_ms > self.config.max_session_timeout_ms
        {
            return fail(
                KelpError::InvalidSessionTimeout(r.session_timeout_ms),
                &r.member_id,
            );
        }
        if r.protocol_type.is_empty() || r.protocols.is_empty() || !self.protocols_compatible(&r) {
            return fail(KelpError::InconsistentGroupProtocol, &r.member_id);
        }
        if r.member_id.is_empty() {
            self.join_unknown(r, now)
        } else {
            self.join_known(r, now)
        }
    }

    /// A joining member must share the group's protocol type and one protocol with every other
    /// member (the one being replaced or rejoining does not count against itself).
    fn protocols_compatible(&self, r: &JoinRequest) -> bool {
        if self.members.is_empty() {
            return true;
        }
        if self.protocol_type.as_deref() != Some(r.protocol_type.as_str()) {
            return false;
        }
        let replaced = r
            .instance_id
            .as_ref()
            .and_then(|i| self.static_members.get(i))
            .map(String::as_str);
        let others = self
            .members
            .values()
            .filter(|m| m.id != r.member_id && Some(m.id.as_str()) != replaced);
        r.protocols
            .iter()
            .any(|(n, _)| others.clone().all(|m| m.supports(n)))
    }

    fn join_unknown(&mut self, r: JoinRequest, now: Instant) -> Pending<JoinResponse> {
        if let Some(inst) = r.instance_id.clone() {
            let new_id = Self::new_member_id(&inst);
            if let Some(old_id) = self.static_members.get(&inst).cloned() {
                return self.replace_static_member(&old_id, new_id, r, now);
            }
            return self.add_member_and_rebalance(new_id, r, now);
        }
        let prefix = if r.client_id.is_empty() {
            "member"
        } else {
            &r.client_id
        };
        let new_id = Self::new_member_id(prefix);
        if r.require_known_member {
            let deadline = now + Duration::from_millis(r.session_timeout_ms as u64);
            self.pending.insert(new_id.clone(), deadline);
            return Pending::Ready(JoinResponse::failed(KelpError::MemberIdRequired, new_id));
        }
        self.add_member_and_rebalance(new_id, r, now)
    }

    fn join_known(&mut self, r: JoinRequest, now: Instant) -> Pending<JoinResponse> {
        if self.pending.remove(&r.member_id).is_some() {
            let id = r.member_id.clone();
            return self.add_member_and_rebalance(id, r, now);
        }
        if let Err(e) = self.check_identity(&r.member_id, r.instance_id.as_deref()) {
            return Pending::Ready(JoinResponse::failed(e, r.member_id));
        }
        let id = r.member_id.clone();
        let changed = {
            let m = self.members.get(&id).expect("checked member");
            m.protocols != r.protocols
        };
        match self.state {
            GroupState::PreparingRebalance => {
                let rx = self.update_and_await_join(&id, r, now);
                self.try_complete_join(now);
                Pending::Wait(rx)
            }
            GroupState::CompletingRebalance if !changed => {
                self.touch(&id, now);
                Pending::Ready(self.join_response_for(&id, r.supports_skip_assignment, false))
            }
            GroupState::Stable if !changed && self.leader.as_deref() != Some(id.as_str()) => {
                self.touch(&id, now);
                Pending::Ready(self.join_response_for(&id, r.supports_skip_assignment, false))
            }
            GroupState::CompletingRebalance | GroupState::Stable => {
                let rx = self.update_and_await_join(&id, r, now);
                self.prepare_rebalance(now);
                self.try_complete_join(now);
                Pending::Wait(rx)
            }
            GroupState::Empty | GroupState::Dead => {
                Pending::Ready(JoinResponse::failed(KelpError::UnknownMemberId, id))
            }
        }
    }

    /// A known group.instance.id joined without a member id: the new member id takes over the
    /// old one's place (and assignment). A stable group with unchanged protocols does not
    /// rebalance; the old member id is fenced.
    fn replace_static_member(
        &mut self,
        old_id: &str,
        new_id: String,
        r: JoinRequest,
        now: Instant,
    ) -> Pending<JoinResponse> {
        let Some(mut m) = self.members.remove(old_id) else {
            self.static_members
                .remove(r.instance_id.as_deref().unwrap_or_default());
            return self.add_member_and_rebalance(new_id, r, now);
        };
        if let Some(tx) = m.awaiting_join.take() {
            let _ = tx.send(JoinResponse::failed(
                KelpError::FencedInstanceId,
                old_id.to_string(),
            ));
        }
        if let Some(tx) = m.awaiting_sync.take() {
            let _ = tx.send(SyncResponse::failed(KelpError::FencedInstanceId));
        }
        let changed = m.protocols != r.protocols;
        m.id = new_id.clone();
        m.client_id = r.client_id.clone();
        m.client_host = r.client_host.clone();
        m.session_timeout = Duration::from_millis(r.session_timeout_ms as u64);
        m.rebalance_timeout = r.rebalance_timeout;
        m.touch(now);
        if let Some(inst) = &r.instance_id {
            self.static_members.insert(inst.clone(), new_id.clone());
        }
        if self.leader.as_deref() == Some(old_id) {
            self.leader = Some(new_id.clone());
        }
        self.members.insert(new_id.clone(), m);
        match self.state {
            GroupState::Stable if !changed => {
                let leader = self.leader.as_deref() == Some(new_id.as_str());
                Pending::Ready(self.join_response_for(&new_id, r.supports_skip_assignment, leader))
            }
            GroupState::PreparingRebalance => {
                let rx = self.update_and_await_join(&new_id, r, now);
                self.try_complete_join(now);
                Pending::Wait(rx)
            }
            _ => {
                let rx = self.update_and_await_join(&new_id, r, now);
                self.prepare_rebalance(now);
                self.try_complete_join(now);
                Pending::Wait(rx)
            }
        }
    }

    fn add_member_and_rebalance(
        &mut self,
        id: String,
        r: JoinRequest,
        now: Instant,
    ) -> Pending<JoinResponse> {
        let (tx, rx) = oneshot::channel();
        let session_timeout = Duration::from_millis(r.session_timeout_ms as u64);
        let m = Member {
            id: id.clone(),
            instance_id: r.instance_id.clone(),
            client_id: r.client_id,
            client_host: r.client_host,
            session_timeout,
            rebalance_timeout: r.rebalance_timeout,
            protocols: r.protocols,
            assignment: Bytes::new(),
            session_deadline: now + session_timeout,
            join_order: self.next_join_order,
            awaiting_join: Some(tx),
            awaiting_sync: None,
            synced: false,
        };
        self.next_join_order += 1;
        if self.members.is_empty() {
            self.protocol_type = Some(r.protocol_type);
        }
        if let Some(inst) = r.instance_id {
            self.static_members.insert(inst, id.clone());
        }
        if self.leader.is_none() {
            self.leader = Some(id.clone());
        }
        self.members.insert(id, m);
        match self.state {
            GroupState::PreparingRebalance => {
                if let Some(d) = self.initial_delay.as_mut() {
                    d.new_member_joined = true;
                }
            }
            _ => self.prepare_rebalance(now),
        }
        self.try_complete_join(now);
        Pending::Wait(rx)
    }

    fn update_and_await_join(
        &mut self,
        id: &str,
        r: JoinRequest,
        now: Instant,
    ) -> oneshot::Receiver<JoinResponse> {
        let (tx, rx) = oneshot::channel();
        let m = self.members.get_mut(id).expect("member exists");
        m.protocols = r.protocols;
        m.session_timeout = Duration::from_millis(r.session_timeout_ms as u64);
        m.rebalance_timeout = r.rebalance_timeout;
        m.client_id = r.client_id;
        m.client_host = r.client_host;
        m.touch(now);
        // A repeated join replaces the earlier wait; that one is answered as superseded.
        if let Some(old) = m.awaiting_join.replace(tx) {
            let _ = old.send(JoinResponse::failed(
                KelpError::RebalanceInProgress,
                id.to_string(),
            ));
        }
        rx
    }

    fn touch(&mut self, id: &str, now: Instant) {
        if let Some(m) = self.members.get_mut(id) {
            m.touch(now);
        }
    }

    /// Fails a request from a fenced static member or an unknown member id.
    fn check_identity(&self, member_id: &str, instance_id: Option<&str>) -> Result<(), KelpError> {
        if let Some(inst) = instance_id {
            match self.static_members.get(inst) {
                Some(current) if current != member_id => return Err(KelpError::FencedInstanceId),
                Some(_) => {}
                None => return Err(KelpError::UnknownMemberId),
            }
        }
        if !self.members.contains_key(member_id) {
            return Err(KelpError::UnknownMemberId);
        }
        Ok(())
    }

    /// Starts a rebalance: pending syncs are told to rejoin, and members get until the largest
    /// rebalance timeout to join. The first rebalance of an empty group waits the initial delay.
    fn prepare_rebalance(&mut self, now: Instant) {
        for m in self.members.values_mut() {
            if let Some(tx) = m.awaiting_sync.take() {
                let _ = tx.send(SyncResponse::failed(KelpError::RebalanceInProgress));
            }
        }
        let timeout = self
            .members
            .values()
            .map(|m| m.rebalance_timeout)
            .max()
            .unwrap_or_default();
        if self.state == GroupState::Empty && !self.config.initial_rebalance_delay.is_zero() {
            let cap = now + timeout;
            self.initial_delay = Some(InitialDelay {
                window_end: (now + self.config.initial_rebalance_delay).min(cap),
                cap,
                new_member_joined: false,
            });
        } else {
            self.initial_delay = None;
        }
        self.join_deadline = Some(now + timeout);
        self.sync_deadline = None;
        self.state = GroupState::PreparingRebalance;
    }

    /// Ends the join phase once every member has rejoined (or the rebalance timeout passed),
    /// starting a new generation.
    fn try_complete_join(&mut self, now: Instant) {
        if self.state != GroupState::PreparingRebalance {
            return;
        }
        if let Some(d) = self.initial_delay.as_mut() {
            // Kafka runs the delay again each time members arrived during the last window, up
            // to the rebalance timeout. Windows are chained from their ends, so a late timer
            // tick gives the same outcome as a punctual one.
            loop {
                if now < d.window_end {
                    return;
                }
                if !(d.new_member_joined && d.window_end < d.cap) {
                    break;
                }
                d.window_end = (d.window_end + self.config.initial_rebalance_delay).min(d.cap);
                d.new_member_joined = false;
            }
            self.initial_delay = None;
        }
        let all_joined = self.members.values().all(|m| m.awaiting_join.is_some());
        let timed_out = self.join_deadline.is_some_and(|d| now >= d);
        if !all_joined && !timed_out {
            return;
        }
        let missing: Vec<String> = self
            .members
            .values()
            .filter(|m| m.awaiting_join.is_none())
            .map(|m| m.id.clone())
            .collect();
        for id in missing {
            self.remove_member(&id);
        }
        self.generation += 1;
        self.join_deadline = None;
        if self.members.is_empty() {
            self.state = GroupState::Empty;
            self.protocol = None;
            self.leader = None;
            return;
        }
        self.protocol = protocol::select(self.members.values());
        if !self
            .leader
            .as_ref()
            .is_some_and(|l| self.members.contains_key(l))
        {
            self.leader = self
                .members
                .values()
                .min_by_key(|m| m.join_order)
                .map(|m| m.id.clone());
        }
        self.state = GroupState::CompletingRebalance;
        let timeout = self
            .members
            .values()
            .map(|m| m.rebalance_timeout)
            .max()
            .unwrap_or_default();
        self.sync_deadline = Some(now + timeout);
        let ids: Vec<String> = self.members.keys().cloned().collect();
        for id in ids {
            let resp = self.join_response_for(&id, false, false);
            let m = self.members.get_mut(&id).expect("member exists");
            m.assignment = Bytes::new();
            m.synced = false;
            m.touch(now);
            if let Some(tx) = m.awaiting_join.take() {
                let _ = tx.send(resp);
            }
        }
    }

    /// The JoinGroup answer for a member of the current generation; the leader gets the member
    /// list. `skip`: a static leader rejoining a stable group keeps the current assignment.
    fn join_response_for(&self, id: &str, supports_skip: bool, skip: bool) -> JoinResponse {
        let is_leader = self.leader.as_deref() == Some(id);
        let protocol = self.protocol.clone().unwrap_or_default();
        let mut members = Vec::new();
        if is_leader {
            let mut ms: Vec<&Member> = self.members.values().collect();
            ms.sort_by_key(|m| m.join_order);
            members = ms
                .into_iter()
                .map(|m| JoinMember {
                    member_id: m.id.clone(),
                    instance_id: m.instance_id.clone(),
                    metadata: m.metadata_for(&protocol),
                })
                .collect();
        }
        JoinResponse {
            error: None,
            generation_id: self.generation,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol.clone(),
            leader: self.leader.clone().unwrap_or_default(),
            skip_assignment: is_leader && skip && supports_skip,
            member_id: id.to_string(),
            members,
        }
    }

    /// Removes a member, answering whatever it waits for with UNKNOWN_MEMBER_ID.
    fn remove_member(&mut self, id: &str) {
        let Some(mut m) = self.members.remove(id) else {
            return;
        };
        if let Some(tx) = m.awaiting_join.take() {
            let _ = tx.send(JoinResponse::failed(
                KelpError::UnknownMemberId,
                id.to_string(),
            ));
        }
        if let Some(tx) = m.awaiting_sync.take() {
            let _ = tx.send(SyncResponse::failed(KelpError::UnknownMemberId));
        }
        if let Some(inst) = &m.instance_id {
            if self.static_members.get(inst).map(String::as_str) == Some(id) {
                self.static_members.remove(inst);
            }
        }
        if self.leader.as_deref() == Some(id) {
            self.leader = None;
        }
    }

    /// After members left or expired: rebalance the rest.
    fn on_members_removed(&mut self, now: Instant) {
        match self.state {
            GroupState::Stable | GroupState::CompletingRebalance => {
                self.prepare_rebalance(now);
                self.try_complete_join(now);
            }
            GroupState::PreparingRebalance => self.try_complete_join(now),
            GroupState::Empty | GroupState::Dead => {}
        }
    }

    /// Handles SyncGroup.
    pub fn sync(&mut self, r: SyncRequest, now: Instant) -> Pending<SyncResponse> {
        let fail = |e| Pending::Ready(SyncResponse::failed(e));
        if self.state == GroupState::Dead {
            return fail(KelpError::CoordinatorNotAvailable);
        }
        if let Err(e) = self.check_identity(&r.member_id, r.instance_id.as_deref()) {
            return fail(e);
        }
        if r.generation_id != self.generation {
            return fail(KelpError::IllegalGeneration);
        }
        let mismatch = |given: &Option<String>, ours: &Option<String>| {
            given.is_some() && given.as_deref() != ours.as_deref()
        };
        if mismatch(&r.protocol_type, &self.protocol_type)
            || mismatch(&r.protocol_name, &self.protocol)
        {
            return fail(KelpError::InconsistentGroupProtocol);
        }
        match self.state {
            GroupState::Empty | GroupState::Dead => fail(KelpError::UnknownMemberId),
            GroupState::PreparingRebalance => fail(KelpError::RebalanceInProgress),
            GroupState::Stable => {
                self.touch(&r.member_id, now);
                Pending::Ready(self.sync_response_for(&r.member_id))
            }
            GroupState::CompletingRebalance => {
                let (tx, rx) = oneshot::channel();
                let m = self.members.get_mut(&r.member_id).expect("checked member");
                m.touch(now);
                m.synced = true;
                if let Some(old) = m.awaiting_sync.replace(tx) {
                    let _ = old.send(SyncResponse::failed(KelpError::RebalanceInProgress));
                }
                if self.leader.as_deref() == Some(r.member_id.as_str()) {
                    let mut given: HashMap<String, Bytes> = r.assignments.into_iter().collect();
                    for m in self.members.values_mut() {
                        m.assignment = given.remove(&m.id).unwrap_or_default();
                    }
                    self.state = GroupState::Stable;
                    self.sync_deadline = None;
                    let ids: Vec<String> = self.members.keys().cloned().collect();
                    for id in ids {
                        let resp = self.sync_response_for(&id);
                        if let Some(tx) = self
                            .members
                            .get_mut(&id)
                            .and_then(|m| m.awaiting_sync.take())
                        {
                            let _ = tx.send(resp);
                        }
                    }
                }
                Pending::Wait(rx)
            }
        }
    }

    fn sync_response_for(&self, id: &str) -> SyncResponse {
        SyncResponse {
            error: None,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol.clone(),
            assignment: self
                .members
                .get(id)
                .map(|m| m.assignment.clone())
                .unwrap_or_default(),
        }
    }

    /// Handles Heartbeat.
    pub fn heartbeat(&mut self, r: &HeartbeatRequest, now: Instant) -> Result<(), KelpError> {
        if self.state == GroupState::Dead {
            return Err(KelpError::CoordinatorNotAvailable);
        }
        self.check_identity(&r.member_id, r.instance_id.as_deref())?;
        if r.generation_id != self.generation {
            return Err(KelpError::IllegalGeneration);
        }
        self.touch(&r.member_id, now);
        match self.state {
            GroupState::PreparingRebalance => Err(KelpError::RebalanceInProgress),
            GroupState::Empty | GroupState::Dead => Err(KelpError::UnknownMemberId),
            GroupState::CompletingRebalance | GroupState::Stable => Ok(()),
        }
    }

    /// Handles LeaveGroup: one result per member, in order.
    pub fn leave(
        &mut self,
        leaving: &[LeavingMember],
        now: Instant,
    ) -> Result<Vec<Result<(), KelpError>>, KelpError> {
        if self.state == GroupState::Dead {
            return Err(KelpError::CoordinatorNotAvailable);
        }
        let mut removed = false;
        let results = leaving
            .iter()
            .map(|l| {
                let id = match &l.instance_id {
                    Some(inst) => match self.static_members.get(inst) {
                        Some(cur) if !l.member_id.is_empty() && *cur != l.member_id => {
                            return Err(KelpError::FencedInstanceId)
                        }
                        Some(cur) => cur.clone(),
                        None => return Err(KelpError::UnknownMemberId),
                    },
                    None => l.member_id.clone(),
                };
                if self.pending.remove(&id).is_some() {
                    return Ok(());
                }
                if !self.members.contains_key(&id) {
                    return Err(KelpError::UnknownMemberId);
                }
                self.remove_member(&id);
                removed = true;
                Ok(())
            })
            .collect();
        if removed {
            self.on_members_removed(now);
        }
        Ok(results)
    }

    /// Runs the group's timers: expired pending ids and sessions, the initial delay, the
    /// rebalance timeout and the pending-sync timeout.
    pub fn tick(&mut self, now: Instant) {
        self.pending.retain(|_, deadline| *deadline > now);
        let expired: Vec<String> = self
            .members
            .values()
            .filter(|m| {
                m.awaiting_join.is_none() && m.awaiting_sync.is_none() && now >= m.session_deadline
            })
            .map(|m| m.id.clone())
            .collect();
        let any_expired = !expired.is_empty();
        for id in expired {
            tracing::debug!(group = %self.id, member = %id, "member session expired");
            self.remove_member(&id);
        }
        if self.state == GroupState::CompletingRebalance
            && self.sync_deadline.is_some_and(|d| now >= d)
        {
            // The leader never sent the assignment in time: drop members that did not sync.
            let unsynced: Vec<String> = self
                .members
                .values()
                .filter(|m| !m.synced)
                .map(|m| m.id.clone())
                .collect();
            for id in unsynced {
                self.remove_member(&id);
            }
            self.prepare_rebalance(now);
        }
        if any_expired {
            self.on_members_removed(now);
        }
        self.try_complete_join(now);
    }

    /// Whether nothing is left of the group but its name: no members, no member ids handed
    /// out, no rebalance under way. The coordinator forgets such a group after a while; its
    /// committed offsets stay in the offset store (an empty group is that after a restart).
    pub fn is_idle(&self) -> bool {
        self.state == GroupState::Empty && self.members.is_empty() && self.pending.is_empty()
    }

    /// Marks the group deleted, failing everything that waits on it.
    pub fn kill(&mut self) {
        let ids: Vec<String> = self.members.keys().cloned().collect();
        for id in ids {
            if let Some(m) = self.members.get_mut(&id) {
                if let Some(tx) = m.awaiting_join.take() {
                    let _ = tx.send(JoinResponse::failed(KelpError::CoordinatorNotAvailable, id));
                }
                if let Some(tx) = m.awaiting_sync.take() {
                    let _ = tx.send(SyncResponse::failed(KelpError::CoordinatorNotAvailable));
                }
            }
        }
        self.members.clear();
        self.state = GroupState::Dead;
    }

    /// DescribeGroups view.
    pub fn describe(&self) -> GroupDescription {
        let protocol = self.protocol.clone().unwrap_or_default();
        let show_details = matches!(self.state, GroupState::Stable);
        let mut ms: Vec<&Member> = self.members.values().collect();
        ms.sort_by_key(|m| m.join_order);
        GroupDescription {
            state: self.state,
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            protocol: if show_details {
                protocol.clone()
            } else {
                String::new()
            },
            members: ms
                .into_iter()
                .map(|m| DescribedMember {
                    member_id: m.id.clone(),
                    instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    metadata: if show_details {
                        m.metadata_for(&protocol)
                    } else {
                        Bytes::new()
                    },
                    assignment: if show_details {
                        m.assignment.clone()
                    } else {
                        Bytes::new()
                    },
                })
                .collect(),
        }
    }

    /// Whether `generation`/`member_id` may commit offsets now (Kafka's validateOffsetCommit).
    pub fn check_commit(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
    ) -> Result<(), KelpError> {
        if self.state == GroupState::Dead {
            return Err(KelpError::CoordinatorNotAvailable);
        }
        if generation < 0 && member_id.is_empty() && instance_id.is_none() {
            // A "simple" commit from outside the group: only allowed while nobody is in it.
            return if self.state == GroupState::Empty {
                Ok(())
            } else {
                Err(KelpError::UnknownMemberId)
            };
        }
        self.check_identity(member_id, instance_id)?;
        if generation != self.generation {
            return Err(KelpError::IllegalGeneration);
        }
        if self.state == GroupState::CompletingRebalance {
            return Err(KelpError::RebalanceInProgress);
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "classic_tests.rs"]
mod tests;
