//! Group membership: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, DescribeGroups,
//! ListGroups and DeleteGroups, with groups coordinated by either shard and members whose
//! connections are on either shard.

use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ConsumerProtocolSubscription, DeleteGroupsRequest, DescribeGroupsRequest, GroupId,
    HeartbeatRequest, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, ListGroupsRequest,
    SyncGroupRequest, SyncGroupResponse,
};

use bytes::BufMut;

use super::*;
use crate::api::sb;

/// A group name (from `prefix`) coordinated by shard `shard`.
pub(super) fn group_on(c: &Client, shard: usize, prefix: &str) -> String {
    (0..)
        .map(|i| format!("{prefix}-{i}"))
        .find(|g| c.shard.group_owner(g) == shard)
        .expect("some name lands on every shard")
}

/// Consumer protocol metadata subscribing to `topics` (version 0, as clients prefix it).
pub(super) fn subscription(topics: &[&str]) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(0);
    ConsumerProtocolSubscription::default()
        .with_topics(topics.iter().map(|t| sb(*t)).collect())
        .encode(&mut b, 0)
        .expect("subscription");
    b.freeze()
}

pub(super) fn join_request(
    group: &str,
    member: &str,
    protocols: &[(&str, Bytes)],
) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(GroupId(sb(group)))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(30_000)
        .with_member_id(sb(member))
        .with_protocol_type(sb("consumer"))
        .with_protocols(
            protocols
                .iter()
                .map(|(n, m)| {
                    JoinGroupRequestProtocol::default()
                        .with_name(sb(*n))
                        .with_metadata(m.clone())
                })
                .collect(),
        )
}

/// Joins a new member at v7 through the MEMBER_ID_REQUIRED round trip; returns the answer
/// that ends the join (once the rebalance completes).
pub(super) async fn join_new(c: &Client, group: &str, topics: &[&str]) -> JoinGroupResponse {
    let protocols = [("range", subscription(topics))];
    let first = c.send(7, join_request(group, "", &protocols)).await;
    assert_eq!(first.error_code, code::MEMBER_ID_REQUIRED);
    assert!(
        first.member_id.starts_with("api-test-"),
        "{:?}",
        first.member_id
    );
    c.send(7, join_request(group, &first.member_id, &protocols))
        .await
}

pub(super) fn sync_request(
    group: &str,
    generation: i32,
    member: &str,
    assignments: &[(&str, &str)],
) -> SyncGroupRequest {
    SyncGroupRequest::default()
        .with_group_id(GroupId(sb(group)))
        .with_generation_id(generation)
        .with_member_id(sb(member))
        .with_protocol_type(Some(sb("consumer")))
        .with_protocol_name(Some(sb("range")))
        .with_assignments(
            assignments
                .iter()
                .map(|(m, a)| {
                    SyncGroupRequestAssignment::default()
                        .with_member_id(sb(*m))
                        .with_assignment(Bytes::from(a.to_string()))
                })
                .collect(),
        )
}

/// A lone member joined and synced: a Stable group at generation 1. Returns its member id.
pub(super) async fn stable_member(c: &Client, group: &str, topics: &[&str]) -> String {
    let joined = join_new(c, group, topics).await;
    assert_eq!((joined.error_code, joined.generation_id), (code::NONE, 1));
    let me = joined.member_id.to_string();
    let synced = c
        .send(5, sync_request(group, 1, &me, &[(&me, "mine")]))
        .await;
    assert_eq!(synced.error_code, code::NONE);
    me
}

async fn heartbeat(c: &Client, group: &str, generation: i32, member: &str) -> i16 {
    let req = HeartbeatRequest::default()
        .with_group_id(GroupId(sb(group)))
        .with_generation_id(generation)
        .with_member_id(sb(member));
    c.send(4, req).await.error_code
}

/// (state, member ids) of a group as DescribeGroups shows it.
async fn describe_state(c: &Client, group: &str) -> (i16, String, Vec<String>) {
    let req = DescribeGroupsRequest::default().with_groups(vec![GroupId(sb(group))]);
    let resp = c.send(5, req).await;
    let g = &resp.groups[0];
    let members = g.members.iter().map(|m| m.member_id.to_string()).collect();
    (g.error_code, g.group_state.to_string(), members)
}

#[test]
fn a_lone_member_joins_syncs_and_heartbeats_on_either_coordinator() {
    run(2, &[], |b| async move {
        let c = &b.client;
        for shard in 0..2 {
            let group = group_on(c, shard, "solo");
            let joined = join_new(c, &group, &["t"]).await;
            assert_eq!((joined.error_code, joined.generation_id), (code::NONE, 1));
            let me = joined.member_id.to_string();
            assert_eq!(joined.leader.as_str(), me);
            assert_eq!(joined.protocol_type.as_deref(), Some("consumer"));
            assert_eq!(joined.protocol_name.as_deref(), Some("range"));
            let members: Vec<(&str, Bytes)> = joined
                .members
                .iter()
                .map(|m| (m.member_id.as_str(), m.metadata.clone()))
                .collect();
            assert_eq!(
                members,
                [(me.as_str(), subscription(&["t"]))],
                "the leader sees itself"
            );
            for v in [0i16, 3, 5] {
                let mut req = sync_request(&group, 1, &me, &[(&me, "p0,p1")]);
                if v < 5 {
                    // Not on the wire before v5 (the crate refuses to encode them set).
                    (req.protocol_type, req.protocol_name) = (None, None);
                }
                let synced: SyncGroupResponse = c.send(v, req).await;
                assert_eq!(synced.error_code, code::NONE, "v{v}");
                assert_eq!(synced.assignment, Bytes::from("p0,p1"), "v{v}");
                if v >= 5 {
                    assert_eq!(synced.protocol_name.as_deref(), Some("range"));
                }
            }
            assert_eq!(heartbeat(c, &group, 1, &me).await, code::NONE);
            assert_eq!(heartbeat(c, &group, 2, &me).await, code::ILLEGAL_GENERATION);
            assert_eq!(
                heartbeat(c, &group, 1, "stranger").await,
                code::UNKNOWN_MEMBER_ID
            );
            let resp = c
                .send(
                    5,
                    DescribeGroupsRequest::default().with_groups(vec![GroupId(sb(group.as_str()))]),
                )
                .await;
            let g = &resp.groups[0];
            assert_eq!(
                (g.error_code, g.group_state.as_str()),
                (code::NONE, "Stable")
            );
            assert_eq!(
                (g.protocol_type.as_str(), g.protocol_data.as_str()),
                ("consumer", "range")
            );
            let m = &g.members[0];
            assert_eq!(
                (m.member_id.as_str(), m.client_id.as_str()),
                (me.as_str(), "api-test")
            );
            assert_eq!(m.client_host.as_str(), "/127.0.0.1");
            assert_eq!(m.member_assignment, Bytes::from("p0,p1"));
            assert_eq!(m.member_metadata, subscription(&["t"]));
        }
    });
}

#[test]
fn members_on_both_shards_form_one_generation_and_get_their_assignments() {
    run(
        2,
        &["--group-initial-rebalance-delay-ms", "300"],
        |b| async move {
            let c = &b.client;
            for shard in 0..2 {
                let group = group_on(c, shard, "pair");
                let g = group.clone();
                let far = b.on(1, move |c| async move { join_new(&c, &g, &["t"]).await });
                let (near, far) = futures::join!(join_new(c, &group, &["t"]), far);
                assert_eq!((near.error_code, far.error_code), (code::NONE, code::NONE));
                assert_eq!((near.generation_id, far.generation_id), (1, 1));
                assert_eq!(near.leader, far.leader, "one leader");
                let (leader, follower) = if near.leader == near.member_id {
                    (near, far)
                } else {
                    (far, near)
                };
                assert_eq!(leader.members.len(), 2, "the leader sees every member");
                assert!(follower.members.is_empty(), "followers see none");
                let (l, f) = (leader.member_id.to_string(), follower.member_id.to_string());
                // The follower's sync waits for the leader's assignment.
                let g = group.clone();
                let f2 = f.clone();
                let follower_sync = b.on(1, move |c| async move {
                    c.send(5, sync_request(&g, 1, &f2, &[])).await
                });
                let leader_sync = async {
                    glommio::timer::sleep(Duration::from_millis(50)).await;
                    c.send(
                        5,
                        sync_request(&group, 1, &l, &[(&l, "for-leader"), (&f, "for-follower")]),
                    )
                    .await
                };
                let (fs, ls) = futures::join!(follower_sync, leader_sync);
                assert_eq!(
                    (ls.error_code, ls.assignment),
                    (0, Bytes::from("for-leader"))
                );
                assert_eq!(
                    (fs.error_code, fs.assignment),
                    (0, Bytes::from("for-follower"))
                );
                let (_, state, mut members) = describe_state(c, &group).await;
                members.sort();
                let mut want = vec![l, f];
                want.sort();
                assert_eq!((state.as_str(), members), ("Stable", want));
            }
        },
    );
}

#[test]
fn a_new_member_makes_the_group_rebalance_into_the_next_generation() {
    run(2, &[], |b| async move {
        let c = &b.client;
        let group = group_on(c, 1, "grow");
        let first = stable_member(c, &group, &["t"]).await;
        let g = group.clone();
        let second = b.on(1, move |c| async move { join_new(&c, &g, &["t"]).await });
        let rejoin = async {
            // The first member learns of the rebalance from its heartbeat, then rejoins.
            let mut hb = code::NONE;
            for _ in 0..100 {
                hb = heartbeat(c, &group, 1, &first).await;
                if hb != code::NONE {
                    break;
                }
                glommio::timer::sleep(Duration::from_millis(10)).await;
            }
            assert_eq!(hb, code::REBALANCE_IN_PROGRESS);
            let protocols = [("range", subscription(&["t"]))];
            c.send(7, join_request(&group, &first, &protocols)).await
        };
        let (second, again) = futures::join!(second, rejoin);
        assert_eq!((second.error_code, again.error_code), (0, 0));
        assert_eq!((second.generation_id, again.generation_id), (2, 2));
        assert_eq!(again.leader.as_str(), first, "the leader stays");
        assert_eq!(again.members.len(), 2);
        // The old generation is over.
        assert_eq!(
            heartbeat(c, &group, 1, &first).await,
            code::ILLEGAL_GENERATION
        );
    });
}

#[test]
fn joins_are_refused_for_bad_ids_timeouts_and_protocols() {
    run(2, &[], |b| async move {
        let c = &b.client;
        let group = group_on(c, 1, "strict");
        let range = [("range", subscription(&["t"]))];
        let empty_id = c.send(7, join_request("", "", &range)).await;
        assert_eq!(empty_id.error_code, code::INVALID_GROUP_ID);
        let short = join_request(&group, "", &range).with_session_timeout_ms(10);
        assert_eq!(
            c.send(7, short).await.error_code,
            code::INVALID_SESSION_TIMEOUT
        );
        let long = join_request(&group, "", &range).with_session_timeout_ms(i32::MAX);
        assert_eq!(
            c.send(7, long).await.error_code,
            code::INVALID_SESSION_TIMEOUT
        );
        let none = join_request(&group, "", &[]);
        assert_eq!(
            c.send(7, none).await.error_code,
            code::INCONSISTENT_GROUP_PROTOCOL
        );
        stable_member(c, &group, &["t"]).await;
        let other_type = join_request(&group, "", &range).with_protocol_type(sb("connect"));
        assert_eq!(
            c.send(7, other_type).await.error_code,
            code::INCONSISTENT_GROUP_PROTOCOL
        );
        let other_protocol = join_request(&group, "", &[("roundrobin", subscription(&["t"]))]);
        assert_eq!(
            c.send(7, other_protocol).await.error_code,
            code::INCONSISTENT_GROUP_PROTOCOL
        );
        let made_up = join_request(&group, "api-test-made-up", &range);
        let r = c.send(7, made_up).await;
        assert_eq!(r.error_code, code::UNKNOWN_MEMBER_ID);
        // From v7 a failed join names no protocol.
        assert_eq!(r.protocol_name, None);
    });
}

#[test]
fn versions_before_4_join_without_the_member_id_round_trip() {
    run(1, &[], |b| async move {
        let c = &b.client;
        for v in [0i16, 1, 3] {
            let group = format!("old-{v}");
            let mut req = join_request(&group, "", &[("range", subscription(&["t"]))]);
            if v == 0 {
                // v0 has no rebalance timeout: the session timeout serves as both.
                req.rebalance_timeout_ms = -1;
            }
            let r = c.send(v, req).await;
            assert_eq!((r.error_code, r.generation_id), (code::NONE, 1), "v{v}");
            assert!(!r.member_id.is_empty());
            assert_eq!(r.leader, r.member_id);
        }
    });
}

#[test]
fn syncs_and_heartbeats_check_the_group_generation_and_member() {
    run(2, &[], |b| async move {
        let c = &b.client;
        let group = group_on(c, 1, "checks");
        assert_eq!(
            c.send(5, sync_request("nobody", 1, "m", &[]))
                .await
                .error_code,
            code::UNKNOWN_MEMBER_ID
        );
        assert_eq!(
            heartbeat(c, "nobody", 1, "m").await,
            code::UNKNOWN_MEMBER_ID
        );
        let me = stable_member(c, &group, &["t"]).await;
        let stale = c.send(5, sync_request(&group, 0, &me, &[])).await;
        assert_eq!(stale.error_code, code::ILLEGAL_GENERATION);
        let stranger = c.send(5, sync_request(&group, 1, "stranger", &[])).await;
        assert_eq!(stranger.error_code, code::UNKNOWN_MEMBER_ID);
        let other = sync_request(&group, 1, &me, &[]).with_protocol_name(Some(sb("roundrobin")));
        assert_eq!(
            c.send(5, other).await.error_code,
            code::INCONSISTENT_GROUP_PROTOCOL
        );
        // A stable group answers a repeated sync with the assignment it has.
        let again = c.send(5, sync_request(&group, 1, &me, &[])).await;
        assert_eq!(
            (again.error_code, again.assignment),
            (0, Bytes::from("mine"))
        );
    });
}

#[test]
fn members_leave_one_by_one_or_in_batches() {
    run(2, &[], |b| async move {
        let c = &b.client;
        // v0-v2: one member, one top-level error.
        let group = group_on(c, 0, "leave-old");
        let me = stable_member(c, &group, &["t"]).await;
        let leave = |g: &str, m: &str| {
            LeaveGroupRequest::default()
                .with_group_id(GroupId(sb(g)))
                .with_member_id(sb(m))
        };
        assert_eq!(
            c.send(2, leave(&group, "stranger")).await.error_code,
            code::UNKNOWN_MEMBER_ID
        );
        assert_eq!(c.send(2, leave(&group, &me)).await.error_code, code::NONE);
        assert_eq!(describe_state(c, &group).await, (0, "Empty".into(), vec![]));
        assert_eq!(heartbeat(c, &group, 1, &me).await, code::UNKNOWN_MEMBER_ID);
        // v3+: a batch, one result per member, static members by instance id.
        let group = group_on(c, 1, "leave-new");
        let me = stable_member(c, &group, &["t"]).await;
        let fixed = join_request(&group, "", &[("range", subscription(&["t"]))])
            .with_group_instance_id(Some(sb("instance-1")));
        let fixed_join = c.send(7, fixed);
        let rejoin = async {
            glommio::timer::sleep(Duration::from_millis(50)).await;
            c.send(
                7,
                join_request(&group, &me, &[("range", subscription(&["t"]))]),
            )
            .await
        };
        let (fixed_join, rejoin) = futures::join!(fixed_join, rejoin);
        assert_eq!((fixed_join.error_code, rejoin.error_code), (0, 0));
        let who = |m: &str, i: Option<&str>| {
            MemberIdentity::default()
                .with_member_id(sb(m))
                .with_group_instance_id(i.map(sb))
        };
        let req = LeaveGroupRequest::default()
            .with_group_id(GroupId(sb(group.as_str())))
            .with_members(vec![
                who(&me, None),
                who("", Some("instance-1")),
                who("stranger", None),
                who("", Some("instance-9")),
            ]);
        let resp = c.send(5, req).await;
        assert_eq!(resp.error_code, code::NONE);
        let got: Vec<i16> = resp.members.iter().map(|m| m.error_code).collect();
        assert_eq!(
            got,
            [0, 0, code::UNKNOWN_MEMBER_ID, code::UNKNOWN_MEMBER_ID]
        );
        assert_eq!(
            resp.members[1].group_instance_id.as_deref(),
            Some("instance-1")
        );
        assert_eq!(describe_state(c, &group).await.1, "Empty");
        // Leaving a group that does not exist.
        let req = LeaveGroupRequest::default()
            .with_group_id(GroupId(sb("no-group")))
            .with_members(vec![who("m", None)]);
        let resp = c.send(5, req).await;
        assert_eq!(
            resp.members
                .iter()
                .map(|m| m.error_code)
                .collect::<Vec<_>>(),
            [code::UNKNOWN_MEMBER_ID]
        );
    });
}

#[test]
fn describe_groups_answers_each_group_from_its_coordinator() {
    run(2, &[], |b| async move {
        let c = &b.client;
        let stable = group_on(c, 1, "desc");
        stable_member(c, &stable, &["t"]).await;
        let ids = vec![GroupId(sb("never")), GroupId(sb(stable.as_str()))];
        for v in [0i16, 5] {
            let resp = c
                .send(v, DescribeGroupsRequest::default().with_groups(ids.clone()))
                .await;
            let got: Vec<(&str, i16, &str, usize)> = resp
                .groups
                .iter()
                .map(|g| {
                    (
                        g.group_id.0.as_str(),
                        g.error_code,
                        g.group_state.as_str(),
                        g.members.len(),
                    )
                })
                .collect();
            assert_eq!(
                got,
                [("never", 0, "Dead", 0), (stable.as_str(), 0, "Stable", 1)],
                "v{v}"
            );
        }
    });
}

#[test]
fn list_groups_gathers_every_shard_and_filters_by_state_and_type() {
    run(2, &[], |b| async move {
        let c = &b.client;
        let stable = group_on(c, 0, "listed");
        let completing = group_on(c, 1, "listed");
        stable_member(c, &stable, &["t"]).await;
        // A member that joins and never syncs leaves the other group completing its rebalance.
        let protocols = [("range", subscription(&["t"]))];
        let g = completing.clone();
        let hold = b.on(1, move |c| async move {
            let first = c.send(3, join_request(&g, "", &protocols)).await;
            first.error_code
        });
        assert_eq!(hold.await, code::NONE);
        let list = |states: &[&str], types: &[&str]| {
            ListGroupsRequest::default()
                .with_states_filter(states.iter().map(|s| sb(*s)).collect())
                .with_types_filter(types.iter().map(|s| sb(*s)).collect())
        };
        let names = |resp: &kafka_protocol::messages::ListGroupsResponse| -> Vec<(String, String)> {
            resp.groups
                .iter()
                .map(|g| (g.group_id.0.to_string(), g.group_state.to_string()))
                .collect()
        };
        let mut all = vec![
            (stable.clone(), "Stable".to_string()),
            (completing.clone(), "CompletingRebalance".to_string()),
        ];
        all.sort();
        let only_stable = vec![(stable.clone(), "Stable".to_string())];
        let resp = c.send(0, list(&[], &[])).await;
        assert_eq!(resp.error_code, code::NONE);
        let got: Vec<String> = names(&resp).into_iter().map(|n| n.0).collect();
        assert_eq!(got, all.iter().map(|a| a.0.clone()).collect::<Vec<_>>());
        assert_eq!(names(&c.send(4, list(&[], &[])).await), all);
        assert_eq!(
            names(&c.send(4, list(&["stable"], &[])).await),
            only_stable,
            "case-insensitive"
        );
        assert!(names(&c.send(4, list(&["Empty"], &[])).await).is_empty());
        assert_eq!(names(&c.send(5, list(&[], &["classic"])).await), all);
        assert!(names(&c.send(5, list(&[], &["consumer"])).await).is_empty());
    });
}

#[test]
fn delete_groups_removes_empty_groups_only() {
    run(2, &[], |b| async move {
        let c = &b.client;
        let busy = group_on(c, 0, "del");
        let idle = group_on(c, 1, "del");
        stable_member(c, &busy, &["t"]).await;
        let me = stable_member(c, &idle, &["t"]).await;
        let leave = LeaveGroupRequest::default()
            .with_group_id(GroupId(sb(idle.as_str())))
            .with_member_id(sb(me));
        assert_eq!(c.send(1, leave).await.error_code, code::NONE);
        let req = DeleteGroupsRequest::default().with_groups_names(vec![
            GroupId(sb(busy.as_str())),
            GroupId(sb(idle.as_str())),
            GroupId(sb("missing")),
        ]);
        for v in [0i16, 2] {
            let resp = c.send(v, req.clone()).await;
            let got: Vec<(&str, i16)> = resp
                .results
                .iter()
                .map(|r| (r.group_id.0.as_str(), r.error_code))
                .collect();
            let idle_code = if v == 0 {
                code::NONE
            } else {
                code::GROUP_ID_NOT_FOUND
            };
            assert_eq!(
                got,
                [
                    (busy.as_str(), code::NON_EMPTY_GROUP),
                    (idle.as_str(), idle_code),
                    ("missing", code::GROUP_ID_NOT_FOUND)
                ],
                "v{v}"
            );
        }
        assert_eq!(describe_state(c, &idle).await.1, "Dead");
        assert_eq!(describe_state(c, &busy).await.1, "Stable");
    });
}
