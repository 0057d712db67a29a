//! State machine tests: join, sync, heartbeat, leave, rebalance, static membership, timers.

use super::*;

const DELAY: Duration = Duration::from_millis(100);

fn cfg() -> GroupConfig {
    GroupConfig {
        initial_rebalance_delay: DELAY,
        min_session_timeout_ms: 1000,
        max_session_timeout_ms: 60_000,
        consumer: Default::default(),
        share: Default::default(),
    }
}

fn join_req(member: &str, instance: Option<&str>, protocols: &[&str]) -> JoinRequest {
    JoinRequest {
        member_id: member.to_string(),
        instance_id: instance.map(str::to_string),
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout_ms: 10_000,
        rebalance_timeout: Duration::from_secs(30),
        protocol_type: "consumer".into(),
        protocols: protocols
            .iter()
            .map(|p| (p.to_string(), Bytes::from(format!("meta-{p}"))))
            .collect(),
        require_known_member: true,
        supports_skip_assignment: true,
    }
}

fn ready<T>(p: Pending<T>) -> T {
    match p {
        Pending::Ready(t) => t,
        Pending::Wait(_) => panic!("expected an immediate answer"),
    }
}

fn waiting<T>(p: Pending<T>) -> oneshot::Receiver<T> {
    match p {
        Pending::Wait(rx) => rx,
        Pending::Ready(_) => panic!("expected a deferred answer"),
    }
}

fn answered<T>(rx: &mut oneshot::Receiver<T>) -> T {
    rx.try_recv()
        .expect("sender alive")
        .expect("answer should be there")
}

fn not_answered<T>(rx: &mut oneshot::Receiver<T>) {
    assert!(matches!(rx.try_recv(), Ok(None)), "answered too early");
}

/// Joins a new dynamic member through the MEMBER_ID_REQUIRED round trip.
fn join_new(
    g: &mut Group,
    now: Instant,
    protocols: &[&str],
) -> (String, oneshot::Receiver<JoinResponse>) {
    let first = ready(g.join(join_req("", None, protocols), now));
    assert_eq!(first.error, Some(KelpError::MemberIdRequired));
    assert!(!first.member_id.is_empty());
    let rx = waiting(g.join(join_req(&first.member_id, None, protocols), now));
    (first.member_id, rx)
}

fn sync(
    g: &mut Group,
    id: &str,
    gen: i32,
    assignments: &[(&str, &str)],
    now: Instant,
) -> Pending<SyncResponse> {
    g.sync(
        SyncRequest {
            member_id: id.into(),
            instance_id: None,
            generation_id: gen,
            protocol_type: Some("consumer".into()),
            protocol_name: Some("range".into()),
            assignments: assignments
                .iter()
                .map(|(m, a)| (m.to_string(), Bytes::from(a.to_string())))
                .collect(),
        },
        now,
    )
}

fn hb(g: &mut Group, id: &str, gen: i32, now: Instant) -> Result<(), KelpError> {
    g.heartbeat(
        &HeartbeatRequest {
            member_id: id.into(),
            instance_id: None,
            generation_id: gen,
        },
        now,
    )
}

/// Two members joined, synced and stable at generation 1.
fn stable_pair(g: &mut Group, t0: Instant) -> (String, String) {
    let (a, mut ja) = join_new(g, t0, &["range"]);
    let (b, mut jb) = join_new(g, t0, &["range"]);
    assert_eq!(g.state, GroupState::PreparingRebalance);
    g.tick(t0 + DELAY / 2);
    not_answered(&mut ja);
    g.tick(t0 + DELAY * 3);
    let ra = answered(&mut ja);
    let rb = answered(&mut jb);
    assert_eq!(ra.generation_id, 1);
    assert_eq!(ra.leader, a);
    assert_eq!(ra.members.len(), 2, "leader sees every member");
    assert!(rb.members.is_empty(), "followers see none");
    assert_eq!(g.state, GroupState::CompletingRebalance);
    let t1 = t0 + DELAY * 3;
    let mut sb = waiting(sync(g, &b, 1, &[], t1));
    not_answered(&mut sb);
    let mut sa = waiting(sync(g, &a, 1, &[(&a, "A"), (&b, "B")], t1));
    assert_eq!(answered(&mut sa).assignment, Bytes::from("A"));
    assert_eq!(answered(&mut sb).assignment, Bytes::from("B"));
    assert_eq!(g.state, GroupState::Stable);
    (a, b)
}

#[test]
fn join_sync_heartbeat_and_leave() {
    let t0 = Instant::now();
    let mut g = Group::new("g", cfg());
    let (a, b) = stable_pair(&mut g, t0);
    let t1 = t0 + Duration::from_secs(1);
    assert_eq!(hb(&mut g, &a, 1, t1), Ok(()));
    assert_eq!(hb(&mut g, &a, 0, t1), Err(KelpError::IllegalGeneration));
    assert_eq!(hb(&mut g, "nobody", 1, t1), Err(KelpError::UnknownMemberId));
    // Stable: a follower's sync returns its assignment at once.
    assert_eq!(
        ready(sync(&mut g, &b, 1, &[], t1)).assignment,
        Bytes::from("B")
    );
    assert_eq!(
        ready(sync(&mut g, &b, 7, &[], t1)).error,
        Some(KelpError::IllegalGeneration)
    );

    // b leaves: a must rejoin (heartbeat says so) and gets generation 2 alone.
    let left = g
        .leave(
            &[LeavingMember {
                member_id: b.clone(),
                instance_id: None,
            }],
            t1,
        )
        .unwrap();
    assert_eq!(left, vec![Ok(())]);
    assert_eq!(g.state, GroupState::PreparingRebalance);
    assert_eq!(hb(&mut g, &a, 1, t1), Err(KelpError::RebalanceInProgress));
    let mut ja = waiting(g.join(join_req(&a, None, &["range"]), t1));
    let r = answered(&mut ja);
    assert_eq!((r.generation_id, r.leader.as_str()), (2, a.as_str()));
    assert_eq!(r.members.len(), 1);

    // The last member leaving empties the group.
    g.leave(
        &[LeavingMember {
            member_id: a.clone(),
            instance_id: None,
        }],
        t1,
    )
    .unwrap();
    assert_eq!(g.state, GroupState::Empty);
    assert_eq!(g.generation, 3);
    let unknown = g
        .leave(
            &[LeavingMember {
                member_id: a,
                instance_id: None,
            }],
            t1,
        )
        .unwrap();
    assert_eq!(unknown, vec![Err(KelpError::UnknownMemberId)]);
}

#[test]
fn unknown_member_and_bad_session_timeout() {
    let t0 = Instant::now();
    let mut g = Group::new("g", cfg());
    let r = ready(g.join(join_req("made-up", None, &["range"]), t0));
    assert_eq!(r.error, Some(KelpError::UnknownMemberId));
    let mut bad = join_req("", None, &["range"]);
    bad.session_timeout_ms = 10;
    assert!(matches!(
        ready(g.join(bad, t0)).error,
        Some(KelpError::InvalidSessionTimeout(10))
    ));
    // v0-v3 clients get a member id without the MEMBER_ID_REQUIRED round trip.
    let mut old = join_req("", None, &["range"]);
    old.require_known_member = false;
    let mut rx = waiting(g.join(old, t0));
    g.tick(t0 + DELAY * 2);
    let r = answered(&mut rx);
    assert!(r.error.is_none());
    assert!(r.member_id.starts_with("c-"));
}

#[test]
fn session_expiry_triggers_rebalance() {
    let t0 = Instant::now();
    let mut g = Group::new("g", cfg());
    let (a, b) = stable_pair(&mut g, t0);
    // a keeps heartbeating, b goes silent past its 10 s session.
    let t5 = t0 + Duration::from_secs(5);
    assert_eq!(hb(&mut g, &a, 1, t5), Ok(()));
    let t11 = t0 + Duration::from_secs(11);
    g.tick(t11);
    assert_eq!(g.state, GroupState::PreparingRebalance);
    assert!(!g.has_member(&b));
    let mut ja = waiting(g.join(join_req(&a, None, &["range"]), t11));
    assert_eq!(answered(&mut ja).generation_id, 2);
}

#[test]
fn rebalance_timeout_drops_members_that_do_not_rejoin() {
    let t0 = Instant::now();
    let mut g = Group::new("g", cfg());
    let (a, b) = stable_pair(&mut g, t0);
    // A new member triggers a rebalance; only a and the newcomer rejoin.
    let t1 = t0 + Duration::from_secs(1);
    let (c, mut jc) = join_new(&mut g, t1, &["range"]);
    let mut ja = waiting(g.join(join_req(&a, None, &["range"]), t1));
    g.tick(t1 + Duration::from_secs(5));
    not_answered(&mut ja);
    // b's session (10 s) would still be alive, but the 30 s rebalance timeout removes it.
    assert_eq!(
        hb(&mut g, &b, 1, t1 + Duration::from_secs(8)),
        Err(KelpError::RebalanceInProgress)
    );
    g.tick(t1 + Duration::from_secs(31));
    let r = answered(&mut ja);
    assert_eq!(r.generation_id, 2);
    assert_eq!(r.members.len(), 2);
    assert_eq!(answered(&mut jc).member_id, c);
    assert!(!g.has_member(&b));
}

#[test]
fn initial_delay_extends_while_members_arrive() {
    let t0 = Instant::now();
    let mut g = Group::new("g", cfg());
    let (_, mut ja) = join_new(&mut g, t0, &["range"]);
    let (_, mut jb) = join_new(&mut g, t0 + DELAY / 2, &["range"]);
    g.tick(t0 + DELAY);
    // b arrived during the window: the delay runs once more.
    not_answered(&mut ja);
    g.tick(t0 + DELAY * 2 + Duration::from_millis(1));
    assert_eq!(answered(&mut ja).generation_id, 1);
    assert_eq!(answered(&mut jb).generation_id, 1);
}

#[test]
fn protocol_chosen_by_votes() {
    let t0 = Instant::now();
    let mut g = Group::new("g", cfg());
    let (_, mut j1) = join_new(&mut g, t0, &["range", "roundrobin"]);
    let (_, mut j2) = join_new(&mut g, t0, &["roundrobin", "range"]);
    let (_, mut j3) = join_new(&mut g, t0, &["roundrobin", "sticky", "range"]);
    g.tick(t0 + DELAY * 3);
    for rx in [&mut j1, &mut j2, &mut j3] {
        assert_eq!(answered(rx).protocol_name.as_deref(), Some("roundrobin"));
    }
    // A member sharing no protocol with the group is refused.
    let r = ready(g.join(join_req("", None, &["sticky"]), t0 + DELAY * 3));
    assert_eq!(r.error, Some(KelpError::InconsistentGroupProtocol));
}

#[test]
fn sync_during_rebalance_and_leader_change() {
    let t0 = Instant::now();
    let mut g = Group::new("g", cfg());
    let (a, b) = stable_pair(&mut g, t0);
    let t1 = t0 + Duration::from_secs(1);
    // The leader leaves: b becomes leader of generation 2.
    g.leave(
        &[LeavingMember {
            member_id: a,
            instance_id: None,
        }],
        t1,
    )
    .unwrap();
    assert_eq!(
        ready(sync(&mut g, &b, 1, &[], t1)).error,
        Some(KelpError::RebalanceInProgress)
    );
    let mut jb = waiting(g.join(join_req(&b, None, &["range"]), t1));
    let r = answered(&mut jb);
    assert_eq!(r.leader, b);
    assert_eq!(r.generation_id, 2);
}

#[test]
fn static_member_rejoin_keeps_generation() {
    let t0 = Instant::now();
    let mut g = Group::new("g", cfg());
    let mut ja = waiting(g.join(join_req("", Some("inst-a"), &["range"]), t0));
    let mut jb = waiting(g.join(join_req("", Some("inst-b"), &["range"]), t0));
    g.tick(t0 + DELAY * 3);
    let ra = answered(&mut ja);
    let rb = answered(&mut jb);
    assert_eq!(ra.generation_id, 1);
    let t1 = t0 + DELAY * 3;
    let mut sb = waiting(sync(&mut g, &rb.member_id, 1, &[], t1));
    let mut sa = waiting(sync(
        &mut g,
        &ra.member_id,
        1,
        &[(&ra.member_id, "A"), (&rb.member_id, "B")],
        t1,
    ));
    answered(&mut sa);
    answered(&mut sb);
    assert_eq!(g.state, GroupState::Stable);

    // b restarts (no member id, same instance id) within its session: no rebalance.
    let t2 = t1 + Duration::from_secs(3);
    let r = ready(g.join(join_req("", Some("inst-b"), &["range"]), t2));
    assert!(r.error.is_none());
    assert_eq!(r.generation_id, 1);
    assert_ne!(r.member_id, rb.member_id);
    assert_eq!(g.state, GroupState::Stable);
    assert_eq!(g.generation, 1);
    // The new member id gets the old assignment; the old one is fenced.
    let s = g.sync(
        SyncRequest {
            member_id: r.member_id.clone(),
            instance_id: Some("inst-b".into()),
            generation_id: 1,
            protocol_type: None,
            protocol_name: None,
            assignments: vec![],
        },
        t2,
    );
    assert_eq!(ready(s).assignment, Bytes::from("B"));
    let fenced = g.heartbeat(
        &HeartbeatRequest {
            member_id: rb.member_id.clone(),
            instance_id: Some("inst-b".into()),
            generation_id: 1,
        },
        t2,
    );
    assert_eq!(fenced, Err(KelpError::FencedInstanceId));

    // The static leader rejoining is told to skip the assignment (v9).
    let r = ready(g.join(join_req("", Some("inst-a"), &["range"]), t2));
    assert!(r.skip_assignment);
    assert_eq!(r.leader, r.member_id);
    assert_eq!(r.members.len(), 2);
    assert_eq!(g.generation, 1);

    // Leaving by instance id works; a stale member id for the instance is fenced.
    let res = g
        .leave(
            &[
                LeavingMember {
                    member_id: rb.member_id.clone(),
                    instance_id: Some("inst-b".into()),
                },
                LeavingMember {
                    member_id: String::new(),
                    instance_id: Some("inst-b".into()),
                },
            ],
            t2,
        )
        .unwrap();
    assert_eq!(res, vec![Err(KelpError::FencedInstanceId), Ok(())]);
    assert_eq!(g.state, GroupState::PreparingRebalance);
}

#[test]
fn pending_member_ids_expire() {
    let t0 = Instant::now();
    let mut g = Group::new("g", cfg());
    let first = ready(g.join(join_req("", None, &["range"]), t0));
    g.tick(t0 + Duration::from_secs(11));
    let r = ready(g.join(
        join_req(&first.member_id, None, &["range"]),
        t0 + Duration::from_secs(11),
    ));
    assert_eq!(r.error, Some(KelpError::UnknownMemberId));
}

#[test]
fn offset_commit_rules() {
    let t0 = Instant::now();
    let mut g = Group::new("g", cfg());
    // A simple (outside) commit works only while the group is empty.
    assert_eq!(g.check_commit("", None, -1), Ok(()));
    let (a, _b) = stable_pair(&mut g, t0);
    assert_eq!(
        g.check_commit("", None, -1),
        Err(KelpError::UnknownMemberId)
    );
    assert_eq!(g.check_commit(&a, None, 1), Ok(()));
    assert_eq!(
        g.check_commit(&a, None, 0),
        Err(KelpError::IllegalGeneration)
    );
    assert_eq!(
        g.check_commit("x", None, 1),
        Err(KelpError::UnknownMemberId)
    );
}

#[test]
fn sync_timeout_removes_members_that_never_synced() {
    let t0 = Instant::now();
    let mut g = Group::new("g", cfg());
    let (a, mut ja) = join_new(&mut g, t0, &["range"]);
    let (b, mut jb) = join_new(&mut g, t0, &["range"]);
    g.tick(t0 + DELAY * 3);
    answered(&mut ja);
    answered(&mut jb);
    // Only b syncs; the leader a never sends the assignment.
    let t1 = t0 + DELAY * 3;
    let mut sb = waiting(sync(&mut g, &b, 1, &[], t1));
    g.tick(t1 + Duration::from_secs(31));
    assert_eq!(
        answered(&mut sb).error,
        Some(KelpError::RebalanceInProgress)
    );
    assert!(!g.has_member(&a));
    assert!(g.has_member(&b));
}
