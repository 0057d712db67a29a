//! One share group's membership and assignment (KIP-932's ShareGroupHeartbeat), as Kafka
//! 4.2's group coordinator keeps it: members choose their ids and join at epoch 0, leave at
//! -1 or by missing their session timeout; the group epoch moves with every member, every
//! subscription change and every change of the subscribed topics; the target assignment is
//! recomputed at the new epoch by a simple assignor, and a member moves straight to it (no
//! revocation phase: record locks, not partition ownership, keep two members from handling
//! the same record). Pure: time and the cluster's topics are passed in.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use uuid::Uuid;

use crate::error::KelpError;
use crate::group::consumer::{Assignment, TopicView, LEAVE_EPOCH};

/// Broker-wide share group settings (Kafka's group.share.*).
#[derive(Debug, Clone, Copy)]
pub struct ShareGroupConfig {
    /// group.share.session.timeout.ms: silence after which a member is removed (45 s).
    pub session_timeout: Duration,
    /// group.share.heartbeat.interval.ms (5 s).
    pub heartbeat_interval: Duration,
    /// group.share.max.size: most members (200).
    pub max_size: usize,
}

impl Default for ShareGroupConfig {
    fn default() -> Self {
        ShareGroupConfig {
            session_timeout: Duration::from_secs(45),
            heartbeat_interval: Duration::from_secs(5),
            max_size: 200,
        }
    }
}

/// A heartbeat as the coordinator takes it.
pub struct ShareHeartbeat<'a> {
    /// The member's id (chosen by the client).
    pub member_id: &'a str,
    /// 0 to join, -1 to leave, else the member's epoch.
    pub member_epoch: i32,
    /// client.rack; None: unchanged.
    pub rack_id: Option<String>,
    /// Subscribed topic names; None: unchanged.
    pub topic_names: Option<Vec<String>>,
    /// The client's id and host ("/ip"), as ShareGroupDescribe shows them.
    pub client: (String, String),
}

/// The coordinator's answer to a heartbeat that was accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareHeartbeatOut {
    /// The member's epoch now (-1 after a leave).
    pub member_epoch: i32,
    /// The member's partitions, when the member must be told (it joined, sent its
    /// subscription, or its partitions changed); None otherwise.
    pub assignment: Option<Assignment>,
}

#[derive(Debug, Clone)]
struct Member {
    epoch: i32,
    previous_epoch: i32,
    rack: Option<String>,
    topics: Vec<String>,
    assigned: Assignment,
    deadline: Instant,
    /// Client id and host.
    client: (String, String),
}

/// A member as ShareGroupDescribe lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedMember {
    /// Its id.
    pub id: String,
    /// Its epoch.
    pub epoch: i32,
    /// client.rack.
    pub rack: Option<String>,
    /// Subscribed topic names.
    pub topics: Vec<String>,
    /// Its partitions.
    pub assigned: Assignment,
    /// The client id of its last heartbeat.
    pub client_id: String,
    /// The host ("/ip") of its last heartbeat.
    pub client_host: String,
}

/// One share group (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct ShareGroup {
    epoch: i32,
    assignment_epoch: i32,
    members: BTreeMap<String, Member>,
    /// The subscribed topics as last resolved: id -> (name, partitions).
    subscribed: BTreeMap<Uuid, (String, i32)>,
    target: BTreeMap<String, Assignment>,
}

impl ShareGroup {
    /// The group epoch.
    pub fn epoch(&self) -> i32 {
        self.epoch
    }

    /// Whether the group has no members.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The members, by id, as ShareGroupDescribe lists them.
    pub fn members(&self) -> impl Iterator<Item = DescribedMember> + '_ {
        self.members.iter().map(|(id, m)| DescribedMember {
            id: id.clone(),
            epoch: m.epoch,
            rack: m.rack.clone(),
            topics: m.topics.clone(),
            assigned: m.assigned.clone(),
            client_id: m.client.0.clone(),
            client_host: m.client.1.clone(),
        })
    }

    /// Handles one heartbeat at `now`.
    pub fn heartbeat(
        &mut self,
        hb: ShareHeartbeat<'_>,
        view: &dyn TopicView,
        cfg: &ShareGroupConfig,
        now: Instant,
    ) -> Result<ShareHeartbeatOut, KelpError> {
        if hb.member_epoch == LEAVE_EPOCH {
            if self.members.remove(hb.member_id).is_none() {
                return Err(KelpError::UnknownMemberId);
            }
            self.epoch += 1;
            self.reassign(view);
            return Ok(ShareHeartbeatOut {
                member_epoch: LEAVE_EPOCH,
                assignment: None,
            });
        }
        let known = self.members.contains_key(hb.member_id);
        if !known {
            if hb.member_epoch != 0 {
                return Err(KelpError::UnknownMemberId);
            }
            if self.members.len() >= cfg.max_size {
                return Err(KelpError::GroupMaxSizeReached(cfg.max_size));
            }
        }
        if let Some(m) = self.members.get(hb.member_id) {
            let e = hb.member_epoch;
            if e != 0 && e != m.epoch && e != m.previous_epoch {
                return Err(KelpError::FencedMemberEpoch {
                    got: e,
                    expected: m.epoch,
                });
            }
        }
        let told = hb.member_epoch == 0 || hb.topic_names.is_some();
        let m = self
            .members
            .entry(hb.member_id.to_string())
            .or_insert_with(|| Member {
                epoch: 0,
                previous_epoch: 0,
                rack: None,
                topics: Vec::new(),
                assigned: Assignment::new(),
                deadline: now,
                client: Default::default(),
            });
        m.client = hb.client;
        m.deadline = now + cfg.session_timeout;
        let mut bump = !known;
        if let Some(rack) = hb.rack_id {
            m.rack = Some(rack);
        }
        if let Some(mut names) = hb.topic_names {
            names.sort();
            names.dedup();
            bump |= names != m.topics;
            m.topics = names;
        }
        bump |= self.resolve(view);
        if bump {
            self.epoch += 1;
        }
        if self.epoch > self.assignment_epoch {
            self.reassign(view);
        }
        let m = self.members.get_mut(hb.member_id).expect("inserted above");
        let target = self.target.get(hb.member_id).cloned().unwrap_or_default();
        let changed = target != m.assigned;
        if m.epoch != self.assignment_epoch {
            m.previous_epoch = m.epoch;
            m.epoch = self.assignment_epoch;
        }
        m.assigned = target;
        Ok(ShareHeartbeatOut {
            member_epoch: m.epoch,
            assignment: (told || changed).then(|| m.assigned.clone()),
        })
    }

    /// Removes members whose session timed out by `now`; whether any went.
    pub fn expire(&mut self, view: &dyn TopicView, now: Instant) -> bool {
        let before = self.members.len();
        self.members.retain(|_, m| m.deadline > now);
        if self.members.len() == before {
            return false;
        }
        self.epoch += 1;
        self.reassign(view);
        true
    }

    /// Resolves the members' subscriptions against `view`; whether the subscribed topics or
    /// their partition counts changed.
    fn resolve(&mut self, view: &dyn TopicView) -> bool {
        let mut now = BTreeMap::new();
        for name in self.members.values().flat_map(|m| m.topics.iter()) {
            if let Some((id, parts)) = view.lookup(name) {
                now.insert(id, (name.clone(), parts));
            }
        }
        let changed = now != self.subscribed;
        self.subscribed = now;
        changed
    }

    /// Recomputes the target assignment at the group epoch.
    fn reassign(&mut self, view: &dyn TopicView) {
        self.resolve(view);
        let mut target: BTreeMap<String, Assignment> = self
            .members
            .keys()
            .map(|id| (id.clone(), Assignment::new()))
            .collect();
        for (&topic, (name, parts)) in &self.subscribed {
            let subscribers: Vec<&str> = self
                .members
                .iter()
                .filter(|(_, m)| m.topics.iter().any(|t| t == name))
                .map(|(id, _)| id.as_str())
                .collect();
            let current = |id: &str| -> BTreeSet<i32> {
                self.members
                    .get(id)
                    .and_then(|m| m.assigned.get(&topic))
                    .map(|ps| ps.iter().copied().filter(|&p| p < *parts).collect())
                    .unwrap_or_default()
            };
            for (id, ps) in assign_topic(&subscribers, *parts, current) {
                if !ps.is_empty() {
                    if let Some(a) = target.get_mut(id) {
                        a.insert(topic, ps);
                    }
                }
            }
        }
        self.target = target;
        self.assignment_epoch = self.epoch;
    }
}

/// Spreads `partitions` partitions of one topic over `members` (sorted by id), keeping what
/// each holds (`current`) where the balance allows. With no more members than partitions
/// each partition goes to one member and counts differ by at most one; with more, each
/// member gets one partition and each partition is shared by about members / partitions
/// members (Kafka's simple assignor balances the same way).
fn assign_topic<'a>(
    members: &[&'a str],
    partitions: i32,
    current: impl Fn(&str) -> BTreeSet<i32>,
) -> Vec<(&'a str, BTreeSet<i32>)> {
    let n = members.len();
    let p = usize::try_from(partitions).unwrap_or(0);
    if n == 0 || p == 0 {
        return members.iter().map(|&m| (m, BTreeSet::new())).collect();
    }
    // Holders per partition: one each, or sharing = ceil(n / p) each when members outnumber
    // partitions; each member's quota follows.
    let (per_partition, quotas): (usize, Vec<usize>) = if n <= p {
        (1, (0..n).map(|i| p / n + usize::from(i < p % n)).collect())
    } else {
        (n.div_ceil(p), vec![1; n])
    };
    // Members holding the most keep theirs first, so the larger quotas go to them.
    let mut order: Vec<(usize, &str, BTreeSet<i32>)> = members
        .iter()
        .map(|&m| {
            let cur = current(m);
            (cur.len(), m, cur)
        })
        .collect();
    order.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)));
    let mut holders = vec![0usize; p];
    let mut out: Vec<(&str, BTreeSet<i32>)> = Vec::with_capacity(n);
    for (i, (_, m, cur)) in order.iter().enumerate() {
        let mut mine = BTreeSet::new();
        for &part in cur {
            let idx = part as usize;
            if mine.len() < quotas[i] && holders[idx] < per_partition {
                holders[idx] += 1;
                mine.insert(part);
            }
        }
        out.push((*m, mine));
    }
    // The rest: each member with room takes the least-held partitions it lacks.
    for (i, (_, mine)) in out.iter_mut().enumerate() {
        while mine.len() < quotas[i] {
            let pick = (0..p)
                .filter(|&x| holders[x] < per_partition && !mine.contains(&(x as i32)))
                .min_by_key(|&x| holders[x]);
            let Some(x) = pick else { break };
            holders[x] += 1;
            mine.insert(x as i32);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use regex::Regex;

    struct View(Vec<(&'static str, Uuid, i32)>, u64);

    impl TopicView for View {
        fn version(&self) -> u64 {
            self.1
        }
        fn lookup(&self, name: &str) -> Option<(Uuid, i32)> {
            self.0
                .iter()
                .find(|t| t.0 == name)
                .map(|&(_, id, parts)| (id, parts))
        }
        fn matching(&self, _: &Regex) -> Vec<String> {
            Vec::new()
        }
    }

    fn join(id: &str, topics: &[&str]) -> ShareHeartbeat<'static> {
        ShareHeartbeat {
            member_id: Box::leak(id.to_string().into_boxed_str()),
            member_epoch: 0,
            rack_id: None,
            topic_names: Some(topics.iter().map(|t| t.to_string()).collect()),
            client: Default::default(),
        }
    }

    fn beat(id: &str, epoch: i32) -> ShareHeartbeat<'static> {
        ShareHeartbeat {
            member_id: Box::leak(id.to_string().into_boxed_str()),
            member_epoch: epoch,
            rack_id: None,
            topic_names: None,
            client: Default::default(),
        }
    }

    fn parts(a: &Assignment) -> usize {
        a.values().map(BTreeSet::len).sum()
    }

    #[test]
    fn members_join_get_a_balanced_assignment_and_leave() {
        let t = Uuid::new_v4();
        let view = View(vec![("t", t, 4)], 1);
        let cfg = ShareGroupConfig::default();
        let now = Instant::now();
        let mut g = ShareGroup::default();
        let a = g.heartbeat(join("a", &["t"]), &view, &cfg, now).unwrap();
        assert_eq!(a.member_epoch, 1);
        assert_eq!(a.assignment.unwrap()[&t].len(), 4);
        let b = g.heartbeat(join("b", &["t"]), &view, &cfg, now).unwrap();
        assert_eq!(
            (b.member_epoch, parts(b.assignment.as_ref().unwrap())),
            (2, 2)
        );
        // a learns of the new epoch on its next heartbeat, with two partitions left; the
        // two hold every partition once.
        let a2 = g.heartbeat(beat("a", 1), &view, &cfg, now).unwrap();
        assert_eq!(a2.member_epoch, 2);
        let (pa, pb) = (a2.assignment.unwrap(), b.assignment.unwrap());
        assert_eq!(pa[&t].intersection(&pb[&t]).count(), 0);
        assert_eq!(pa[&t].len() + pb[&t].len(), 4);
        // Nothing changed: no assignment sent.
        assert_eq!(
            g.heartbeat(beat("a", 2), &view, &cfg, now)
                .unwrap()
                .assignment,
            None
        );
        // b leaves: a gets all four back.
        let left = g
            .heartbeat(beat("b", LEAVE_EPOCH), &view, &cfg, now)
            .unwrap();
        assert_eq!(left.member_epoch, LEAVE_EPOCH);
        let a3 = g.heartbeat(beat("a", 2), &view, &cfg, now).unwrap();
        assert_eq!(
            (a3.member_epoch, parts(a3.assignment.as_ref().unwrap())),
            (3, 4)
        );
    }

    #[test]
    fn more_members_than_partitions_share_them() {
        let t = Uuid::new_v4();
        let view = View(vec![("t", t, 2)], 1);
        let cfg = ShareGroupConfig::default();
        let now = Instant::now();
        let mut g = ShareGroup::default();
        for id in ["a", "b", "c", "d", "e"] {
            g.heartbeat(join(id, &["t"]), &view, &cfg, now).unwrap();
        }
        let mut held = [0usize; 2];
        for id in ["a", "b", "c", "d", "e"] {
            let got = &g.target[id];
            assert_eq!(parts(got), 1, "{id}: one partition each");
            for &p in &got[&t] {
                held[p as usize] += 1;
            }
        }
        assert_eq!(held, [3, 2]);
    }

    #[test]
    fn epochs_are_fenced_except_the_previous_one_and_unknown_members_are_told() {
        let t = Uuid::new_v4();
        let view = View(vec![("t", t, 2)], 1);
        let cfg = ShareGroupConfig::default();
        let now = Instant::now();
        let mut g = ShareGroup::default();
        g.heartbeat(join("a", &["t"]), &view, &cfg, now).unwrap();
        g.heartbeat(join("b", &["t"]), &view, &cfg, now).unwrap();
        // a is at epoch 1, the group at 2: a's heartbeat at 1 moves it to 2.
        assert_eq!(
            g.heartbeat(beat("a", 1), &view, &cfg, now)
                .unwrap()
                .member_epoch,
            2
        );
        // Its previous epoch (a lost answer) is still accepted; older or newer ones are not.
        assert!(g.heartbeat(beat("a", 1), &view, &cfg, now).is_ok());
        assert!(matches!(
            g.heartbeat(beat("a", 7), &view, &cfg, now),
            Err(KelpError::FencedMemberEpoch { got: 7, .. })
        ));
        assert!(matches!(
            g.heartbeat(beat("zz", 3), &view, &cfg, now),
            Err(KelpError::UnknownMemberId)
        ));
        assert!(matches!(
            g.heartbeat(beat("zz", LEAVE_EPOCH), &view, &cfg, now),
            Err(KelpError::UnknownMemberId)
        ));
        // Full.
        let small = ShareGroupConfig { max_size: 2, ..cfg };
        assert!(matches!(
            g.heartbeat(join("c", &["t"]), &view, &small, now),
            Err(KelpError::GroupMaxSizeReached(2))
        ));
    }

    #[test]
    fn silent_members_expire_and_new_partitions_are_assigned() {
        let t = Uuid::new_v4();
        let cfg = ShareGroupConfig::default();
        let now = Instant::now();
        let mut g = ShareGroup::default();
        let v1 = View(vec![("t", t, 2)], 1);
        g.heartbeat(join("a", &["t"]), &v1, &cfg, now).unwrap();
        g.heartbeat(join("b", &["t"]), &v1, &cfg, now + Duration::from_secs(30))
            .unwrap();
        // a goes silent: expired after its session timeout; b takes both partitions.
        assert!(!g.expire(&v1, now + Duration::from_secs(44)));
        assert!(g.expire(&v1, now + Duration::from_secs(46)));
        let epoch = g.epoch();
        let later = now + Duration::from_secs(47);
        let b = g.heartbeat(beat("b", epoch - 2), &v1, &cfg, later);
        assert!(b.is_err(), "two epochs behind: fenced, rejoins");
        let b = g.heartbeat(join("b", &["t"]), &v1, &cfg, later).unwrap();
        assert_eq!(parts(b.assignment.as_ref().unwrap()), 2);
        // The topic grows to 3 partitions: the next heartbeat brings the third.
        let v2 = View(vec![("t", t, 3)], 2);
        let b2 = g
            .heartbeat(beat("b", b.member_epoch), &v2, &cfg, later)
            .unwrap();
        assert_eq!(parts(b2.assignment.as_ref().unwrap()), 3);
    }

    #[test]
    fn the_assignor_keeps_what_members_hold_where_balance_allows() {
        let held = |m: &str| -> BTreeSet<i32> {
            match m {
                "a" => [0, 1, 2].into(),
                "b" => [3].into(),
                _ => BTreeSet::new(),
            }
        };
        let out = assign_topic(&["a", "b", "c"], 6, held);
        let get = |id: &str| out.iter().find(|x| x.0 == id).unwrap().1.clone();
        // Two each: a keeps two of its three, b keeps 3, c gets what is left.
        assert_eq!(get("a").len(), 2);
        assert!(get("a").is_subset(&[0, 1, 2].into()));
        assert!(get("b").contains(&3) && get("b").len() == 2);
        assert_eq!(get("c").len(), 2);
        let all: BTreeSet<i32> = out.iter().flat_map(|x| x.1.iter().copied()).collect();
        assert_eq!(all.len(), 6);
    }
}
