//! Consumer group state machine tests: joining, revocation before reassignment, epochs,
//! leaving, static members, timeouts, regex subscriptions, commit checks.

use super::*;

struct Topics(BTreeMap<String, (Uuid, i32)>);

impl TopicView for Topics {
    fn version(&self) -> u64 {
        self as *const Topics as u64
    }
    fn lookup(&self, name: &str) -> Option<(Uuid, i32)> {
        self.0.get(name).copied()
    }
    fn matching(&self, pattern: &Regex) -> Vec<String> {
        self.0
            .keys()
            .filter(|n| pattern.is_match(n))
            .cloned()
            .collect()
    }
}

fn tid(n: u8) -> Uuid {
    Uuid::from_bytes([n; 16])
}

fn view(topics: &[(&str, u8, i32)]) -> Arc<dyn TopicView> {
    Arc::new(Topics(
        topics
            .iter()
            .map(|(n, id, p)| (n.to_string(), (tid(*id), *p)))
            .collect(),
    ))
}

fn join(id: &str, topics: &[&str], v: &Arc<dyn TopicView>) -> HeartbeatIn {
    HeartbeatIn {
        member_id: id.into(),
        member_epoch: 0,
        instance_id: None,
        rack_id: None,
        rebalance_timeout_ms: 30_000,
        topic_names: Some(topics.iter().map(|s| s.to_string()).collect()),
        topic_regex: None,
        server_assignor: None,
        owned: Some(Assignment::new()),
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        topics: v.clone(),
    }
}

fn beat(id: &str, epoch: i32, owned: Option<Assignment>, v: &Arc<dyn TopicView>) -> HeartbeatIn {
    HeartbeatIn {
        member_epoch: epoch,
        topic_names: None,
        rebalance_timeout_ms: -1,
        owned,
        ..join(id, &[], v)
    }
}

fn count(a: &Assignment) -> usize {
    a.values().map(BTreeSet::len).sum()
}

fn group() -> ConsumerGroup {
    ConsumerGroup::new("g", ConsumerConfig::default())
}

#[test]
fn a_lone_member_gets_every_partition_at_epoch_one() {
    let v = view(&[("t", 1, 4)]);
    let mut g = group();
    let out = g.heartbeat(join("m1", &["t"], &v), Instant::now()).unwrap();
    assert_eq!(out.member_epoch, 1);
    assert_eq!(count(out.assignment.as_ref().unwrap()), 4);
    assert_eq!(g.state(), "Stable");
    // A plain heartbeat changes nothing and sends no assignment.
    let again = g
        .heartbeat(beat("m1", 1, None, &v), Instant::now())
        .unwrap();
    assert_eq!((again.member_epoch, again.assignment), (1, None));
}

#[test]
fn a_second_member_gets_partitions_only_after_the_first_revokes_them() {
    let v = view(&[("t", 1, 4)]);
    let mut g = group();
    let now = Instant::now();
    let first = g.heartbeat(join("m1", &["t"], &v), now).unwrap();
    let all = first.assignment.unwrap();
    let second = g.heartbeat(join("m2", &["t"], &v), now).unwrap();
    // m1 still owns everything: m2 moves to epoch 2 with nothing yet.
    assert_eq!(second.member_epoch, 2);
    assert_eq!(count(second.assignment.as_ref().unwrap()), 0);
    assert_eq!(g.state(), "Reconciling");
    // m1 is told to keep two partitions, at its old epoch.
    let m1 = g.heartbeat(beat("m1", 1, None, &v), now).unwrap();
    assert_eq!(m1.member_epoch, 1);
    let kept = m1.assignment.unwrap();
    assert_eq!(count(&kept), 2);
    // Until m1 reports the revocation, m2 gets nothing.
    let m2 = g.heartbeat(beat("m2", 2, None, &v), now).unwrap();
    assert!(m2.assignment.is_none());
    let m1 = g
        .heartbeat(beat("m1", 1, Some(all.clone()), &v), now)
        .unwrap();
    assert_eq!(m1.member_epoch, 1, "still owns what it must give up");
    let m1 = g
        .heartbeat(beat("m1", 1, Some(kept.clone()), &v), now)
        .unwrap();
    assert_eq!(m1.member_epoch, 2);
    let m2 = g.heartbeat(beat("m2", 2, None, &v), now).unwrap();
    let got = m2.assignment.unwrap();
    assert_eq!(count(&got), 2);
    for (t, ps) in &got {
        assert!(kept.get(t).is_none_or(|k| k.is_disjoint(ps)), "owned twice");
    }
    assert_eq!(g.state(), "Stable");
}

#[test]
fn epochs_ahead_or_unknown_are_fenced_and_a_lost_answer_is_forgiven() {
    let v = view(&[("t", 1, 2)]);
    let mut g = group();
    let now = Instant::now();
    let a = g.heartbeat(join("m1", &["t"], &v), now).unwrap();
    assert!(matches!(
        g.heartbeat(beat("m1", 5, None, &v), now),
        Err(KelpError::FencedMemberEpoch {
            got: 5,
            expected: 1
        })
    ));
    assert!(matches!(
        g.heartbeat(beat("nobody", 1, None, &v), now),
        Err(KelpError::UnknownMemberId)
    ));
    // Epoch 0 is the previous epoch: accepted when what it owns is a subset of its own.
    let owned = a.assignment.unwrap();
    assert!(g.heartbeat(beat("m1", 0, Some(owned), &v), now).is_ok());
}

#[test]
fn leaving_frees_partitions_for_the_others() {
    let v = view(&[("t", 1, 4)]);
    let mut g = group();
    let now = Instant::now();
    g.heartbeat(join("m1", &["t"], &v), now).unwrap();
    let m2 = g.heartbeat(join("m2", &["t"], &v), now).unwrap();
    let out = g.heartbeat(beat("m1", LEAVE_EPOCH, None, &v), now).unwrap();
    assert_eq!(out.member_epoch, LEAVE_EPOCH);
    let m2 = g
        .heartbeat(beat("m2", m2.member_epoch, None, &v), now)
        .unwrap();
    assert_eq!(count(m2.assignment.as_ref().unwrap()), 4);
    assert_eq!(m2.member_epoch, 3);
}

#[test]
fn a_silent_member_is_removed_after_its_session() {
    let v = view(&[("t", 1, 2)]);
    let mut g = group();
    let now = Instant::now();
    g.heartbeat(join("m1", &["t"], &v), now).unwrap();
    g.tick(now + Duration::from_secs(44));
    assert!(!g.is_empty());
    g.tick(now + Duration::from_secs(46));
    assert!(g.is_empty());
    assert_eq!(g.state(), "Empty");
}

#[test]
fn a_member_that_does_not_revoke_in_time_is_removed() {
    let v = view(&[("t", 1, 4)]);
    let mut g = group();
    let now = Instant::now();
    g.heartbeat(join("m1", &["t"], &v), now).unwrap();
    g.heartbeat(join("m2", &["t"], &v), now).unwrap();
    g.heartbeat(beat("m1", 1, None, &v), now).unwrap(); // told to revoke, 30 s to do it
    let later = now + Duration::from_secs(31);
    g.heartbeat(beat("m2", 2, None, &v), later).unwrap();
    g.tick(later);
    assert!(matches!(
        g.heartbeat(beat("m1", 1, None, &v), later),
        Err(KelpError::UnknownMemberId)
    ));
}

#[test]
fn a_static_member_comes_back_to_its_partitions() {
    let v = view(&[("t", 1, 4)]);
    let mut g = group();
    let now = Instant::now();
    let mut j = join("a1", &["t"], &v);
    j.instance_id = Some("i".into());
    let first = g.heartbeat(j.clone(), now).unwrap();
    // Another incarnation cannot take the instance id while the first is in.
    let mut other = j.clone();
    other.member_id = "a2".into();
    assert!(matches!(
        g.heartbeat(other.clone(), now),
        Err(KelpError::UnreleasedInstanceId(_))
    ));
    let mut away = beat("a1", LEAVE_STATIC_EPOCH, None, &v);
    away.instance_id = Some("i".into());
    assert_eq!(
        g.heartbeat(away, now).unwrap().member_epoch,
        LEAVE_STATIC_EPOCH
    );
    let back = g.heartbeat(other, now).unwrap();
    assert_eq!(back.member_id, "a2");
    assert_eq!(back.member_epoch, first.member_epoch, "no rebalance");
    assert_eq!(back.assignment, first.assignment);
}

#[test]
fn regex_subscriptions_follow_new_topics() {
    let mut g = group();
    let now = Instant::now();
    let v1 = view(&[("orders-1", 1, 2), ("other", 2, 2)]);
    let mut j = join("m1", &[], &v1);
    j.topic_names = Some(Vec::new());
    j.topic_regex = Some("orders-.*".into());
    let out = g.heartbeat(j, now).unwrap();
    assert_eq!(
        out.assignment.unwrap().keys().collect::<Vec<_>>(),
        vec![&tid(1)]
    );
    let v2 = view(&[("orders-1", 1, 2), ("other", 2, 2), ("orders-2", 3, 1)]);
    let out = g.heartbeat(beat("m1", 1, None, &v2), now).unwrap();
    assert_eq!(out.member_epoch, 2);
    assert_eq!(count(out.assignment.as_ref().unwrap()), 3);
    let mut bad = beat("m1", 2, None, &v2);
    bad.topic_regex = Some("(".into());
    assert!(matches!(
        g.heartbeat(bad, now),
        Err(KelpError::InvalidRegularExpression(_))
    ));
}

#[test]
fn partitions_added_to_a_topic_are_assigned() {
    let mut g = group();
    let now = Instant::now();
    let v1 = view(&[("t", 1, 2)]);
    g.heartbeat(join("m1", &["t"], &v1), now).unwrap();
    let v2 = view(&[("t", 1, 5)]);
    let out = g.heartbeat(beat("m1", 1, None, &v2), now).unwrap();
    assert_eq!((out.member_epoch, count(&out.assignment.unwrap())), (2, 5));
}

#[test]
fn unknown_assignors_are_refused_and_range_is_chosen_by_vote() {
    let v = view(&[("t", 1, 2)]);
    let mut g = group();
    let mut j = join("m1", &["t"], &v);
    j.server_assignor = Some("sticky".into());
    assert!(matches!(
        g.heartbeat(j.clone(), Instant::now()),
        Err(KelpError::UnsupportedAssignor(_))
    ));
    j.server_assignor = Some("range".into());
    g.heartbeat(j, Instant::now()).unwrap();
    assert_eq!(g.describe().assignor, "range");
}

#[test]
fn commits_need_the_members_current_epoch() {
    let v = view(&[("t", 1, 2)]);
    let mut g = group();
    assert!(
        g.check_member("", -1, true).is_ok(),
        "empty group: admin commits"
    );
    g.heartbeat(join("m1", &["t"], &v), Instant::now()).unwrap();
    assert!(g.check_member("m1", 1, true).is_ok());
    assert!(matches!(
        g.check_member("m1", 0, true),
        Err(KelpError::StaleMemberEpoch { .. })
    ));
    assert!(matches!(
        g.check_member("m1", 2, true),
        Err(KelpError::FencedMemberEpoch { .. })
    ));
    assert!(matches!(
        g.check_member("", -1, true),
        Err(KelpError::UnknownMemberId)
    ));
    // A member committing with OffsetCommit before v9: UNSUPPORTED_VERSION, as Kafka.
    let old = g.check_member("m1", 1, false).unwrap_err();
    assert_eq!(old.code(), crate::error::code::UNSUPPORTED_VERSION);
    // An admin commit into an empty group with an old version stays allowed.
    assert!(group().check_member("", -1, false).is_ok());
}
