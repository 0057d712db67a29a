//! KIP-848 consumer groups over the wire: ConsumerGroupHeartbeat's checks and answers,
//! ConsumerGroupDescribe, and how the other group APIs treat a consumer group (ListGroups
//! types, DescribeGroups, JoinGroup, OffsetCommit/OffsetFetch by member epoch, DeleteGroups).

use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestGroup;
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse,
    DeleteGroupsRequest, DescribeGroupsRequest, GroupId, ListGroupsRequest, OffsetFetchRequest,
};

use super::group_offsets::commit_request;
use super::groups::{group_on, stable_member};
use super::*;
use crate::api::sb;

fn join(group: &str, member: &str, topics: &[&str]) -> ConsumerGroupHeartbeatRequest {
    ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(sb(group)))
        .with_member_id(sb(member))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(topics.iter().map(|t| topic_name(*t)).collect()))
        .with_topic_partitions(Some(Vec::new()))
}

fn beat(group: &str, member: &str, epoch: i32) -> ConsumerGroupHeartbeatRequest {
    ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(sb(group)))
        .with_member_id(sb(member))
        .with_member_epoch(epoch)
        .with_rebalance_timeout_ms(-1)
}

async fn hb(c: &Client, req: ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResponse {
    c.send(1, req).await
}

/// (topic id, partitions) of an answer's assignment.
fn assigned(r: &ConsumerGroupHeartbeatResponse) -> Vec<(uuid::Uuid, Vec<i32>)> {
    r.assignment
        .as_ref()
        .map(|a| {
            a.topic_partitions
                .iter()
                .map(|t| (t.topic_id, t.partitions.clone()))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn malformed_heartbeats_get_kafkas_errors() {
    run(1, &[], |b| async move {
        let c = &b.client;
        let cases = [
            (
                join("", "m", &["t"]),
                code::INVALID_REQUEST,
                "GroupId can't be empty.",
            ),
            (
                join("g", "", &["t"]),
                code::INVALID_REQUEST,
                "MemberId can't be empty.",
            ),
            (
                join("g", "m", &["t"]).with_rebalance_timeout_ms(-1),
                code::INVALID_REQUEST,
                "RebalanceTimeoutMs must be provided in first request.",
            ),
            (
                join("g", "m", &["t"]).with_topic_partitions(None),
                code::INVALID_REQUEST,
                "TopicPartitions must be empty when (re-)joining.",
            ),
            (
                join("g", "m", &["t"]).with_subscribed_topic_names(None),
                code::INVALID_REQUEST,
                "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.",
            ),
            (
                beat("g", "m", -3),
                code::INVALID_REQUEST,
                "MemberEpoch is invalid.",
            ),
            (
                beat("g", "m", -2),
                code::INVALID_REQUEST,
                "InstanceId can't be null.",
            ),
            (
                join("g", "m", &["t"]).with_server_assignor(Some(sb("sticky"))),
                code::UNSUPPORTED_ASSIGNOR,
                "",
            ),
            (
                join("g", "m", &[]).with_subscribed_topic_regex(Some(sb("(unclosed"))),
                code::INVALID_REGULAR_EXPRESSION,
                "",
            ),
            (beat("g", "nobody", 3), code::UNKNOWN_MEMBER_ID, ""),
        ];
        for (req, want, message) in cases {
            let r = hb(c, req).await;
            assert_eq!(r.error_code, want, "{message} {:?}", r.error_message);
            assert!(
                r.error_message.as_deref().unwrap_or("").contains(message),
                "{:?}",
                r.error_message
            );
        }
    });
}

#[test]
fn a_consumer_group_on_either_coordinator_assigns_describes_lists_and_commits() {
    run(2, &[], |b| async move {
        let c = &b.client;
        let topic_id = create_topic(c, "t", 3).await;
        for shard in 0..2 {
            let group = group_on(c, shard, "cg");
            let first = hb(c, join(&group, "m1", &["t"])).await;
            assert_eq!((first.error_code, first.member_epoch), (code::NONE, 1));
            assert_eq!(first.member_id.as_deref(), Some("m1"));
            assert_eq!(first.heartbeat_interval_ms, 5000);
            assert_eq!(assigned(&first), [(topic_id, vec![0, 1, 2])]);
            // A second member: m1 must give up partitions before m2 gets them.
            let second = hb(c, join(&group, "m2", &["t"])).await;
            assert_eq!((second.error_code, second.member_epoch), (code::NONE, 2));
            assert_eq!(assigned(&second), []);
            let m1 = hb(c, beat(&group, "m1", 1)).await;
            assert_eq!(m1.member_epoch, 1);
            let kept = assigned(&m1);
            assert_eq!(kept.len(), 1);
            let owned: Vec<TopicPartitions> = kept
                .iter()
                .map(|(id, ps)| {
                    TopicPartitions::default()
                        .with_topic_id(*id)
                        .with_partitions(ps.clone())
                })
                .collect();
            let m1 = hb(c, beat(&group, "m1", 1).with_topic_partitions(Some(owned))).await;
            assert_eq!(m1.member_epoch, 2);
            let m2 = hb(c, beat(&group, "m2", 2)).await;
            let got = assigned(&m2);
            assert_eq!(
                got[0].1.len() + kept[0].1.len(),
                3,
                "{got:?} and {kept:?} cover the topic"
            );

            let d = c
                .send(
                    1,
                    ConsumerGroupDescribeRequest::default()
                        .with_group_ids(vec![GroupId(sb(group.as_str()))]),
                )
                .await;
            let g = &d.groups[0];
            assert_eq!(g.error_code, code::NONE);
            assert_eq!(
                (g.group_state.as_str(), g.group_epoch, g.assignment_epoch),
                ("Stable", 2, 2)
            );
            assert_eq!(g.assignor_name.as_str(), "uniform");
            assert_eq!(g.members.len(), 2);
            let m = g
                .members
                .iter()
                .find(|m| m.member_id.as_str() == "m2")
                .unwrap();
            assert_eq!(m.member_type, 1);
            assert_eq!(m.assignment.topic_partitions[0].topic_name.0.as_str(), "t");
            assert_eq!(m.client_host.as_str(), "/127.0.0.1");

            let listed = |types: &[&str]| {
                ListGroupsRequest::default()
                    .with_types_filter(types.iter().map(|t| sb(*t)).collect())
            };
            let consumer = c.send(5, listed(&["consumer"])).await;
            let g = consumer
                .groups
                .iter()
                .find(|g| g.group_id.0.as_str() == group)
                .expect("listed as a consumer group");
            assert_eq!(
                (g.group_type.as_str(), g.group_state.as_str()),
                ("consumer", "Stable")
            );
            let classic = c.send(5, listed(&["classic"])).await;
            assert!(!classic
                .groups
                .iter()
                .any(|g| g.group_id.0.as_str() == group));

            // The classic APIs see a group of the other protocol.
            let dg = c
                .send(
                    5,
                    DescribeGroupsRequest::default().with_groups(vec![GroupId(sb(group.as_str()))]),
                )
                .await;
            assert_eq!(dg.groups[0].error_code, code::GROUP_ID_NOT_FOUND);
            let protocols = [("range", super::groups::subscription(&["t"]))];
            let j = c
                .send(7, super::groups::join_request(&group, "", &protocols))
                .await;
            assert_eq!(j.error_code, code::INCONSISTENT_GROUP_PROTOCOL);

            // Commits and fetches by member epoch (OffsetCommit/OffsetFetch v9).
            let commit = |member: &str, epoch: i32| {
                commit_request(&group, &[("t", 0, 5, "")])
                    .with_member_id(sb(member))
                    .with_generation_id_or_member_epoch(epoch)
            };
            let codes = |r: kafka_protocol::messages::OffsetCommitResponse| {
                r.topics[0].partitions[0].error_code
            };
            assert_eq!(codes(c.send(9, commit("m2", 2)).await), code::NONE);
            assert_eq!(
                codes(c.send(9, commit("m2", 1)).await),
                code::STALE_MEMBER_EPOCH
            );
            assert_eq!(
                codes(c.send(9, commit("m2", 3)).await),
                code::FENCED_MEMBER_EPOCH
            );
            assert_eq!(
                codes(c.send(9, commit("", -1)).await),
                code::UNKNOWN_MEMBER_ID
            );
            // A member must commit with v9 or later, as Kafka requires.
            assert_eq!(
                codes(c.send(8, commit("m2", 2)).await),
                code::UNSUPPORTED_VERSION
            );
            let fetch = |epoch: i32| {
                OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
                    .with_group_id(GroupId(sb(group.as_str())))
                    .with_member_id(Some(sb("m2")))
                    .with_member_epoch(epoch)
                    .with_topics(None)])
            };
            let f = c.send(9, fetch(2)).await;
            assert_eq!(f.groups[0].error_code, code::NONE);
            assert_eq!(f.groups[0].topics[0].partitions[0].committed_offset, 5);
            let f = c.send(9, fetch(1)).await;
            assert_eq!(f.groups[0].error_code, code::STALE_MEMBER_EPOCH);

            // Both leave; the empty group can be deleted.
            let del = || {
                DeleteGroupsRequest::default().with_groups_names(vec![GroupId(sb(group.as_str()))])
            };
            assert_eq!(
                c.send(2, del()).await.results[0].error_code,
                code::NON_EMPTY_GROUP
            );
            for (m, e) in [("m1", 2), ("m2", 2)] {
                let left = hb(c, beat(&group, m, -1).with_member_epoch(-1)).await;
                assert_eq!(
                    (left.error_code, left.member_epoch),
                    (code::NONE, -1),
                    "{m} at {e}"
                );
            }
            assert_eq!(c.send(2, del()).await.results[0].error_code, code::NONE);
        }
    });
}

#[test]
fn a_classic_group_with_members_refuses_consumer_heartbeats() {
    run(1, &[], |b| async move {
        let c = &b.client;
        let group = "mixed";
        stable_member(c, group, &["t"]).await;
        let r = hb(c, join(group, "m", &["t"])).await;
        assert_eq!(r.error_code, code::GROUP_ID_NOT_FOUND);
        let d = c
            .send(
                1,
                ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(sb(group))]),
            )
            .await;
        assert_eq!(d.groups[0].error_code, code::GROUP_ID_NOT_FOUND);
    });
}

/// With ACLs on, a regex subscription matches only the topics the heartbeat's principal may
/// DESCRIBE, as Kafka filters a regex resolution.
#[test]
fn regex_subscriptions_match_only_topics_the_member_may_describe() {
    use kafka_protocol::messages::create_acls_request::AclCreation;
    use kafka_protocol::messages::CreateAclsRequest;
    let args = ["--authorizer", "acl", "--allow-everyone-if-no-acl-found"];
    run(1, &args, |b| async move {
        let c = &b.client;
        let shown = create_topic(c, "s-shown", 1).await;
        create_topic(c, "s-hidden", 1).await;
        // DENY DESCRIBE (8) on s-hidden to ANONYMOUS (this connection's principal).
        let deny = CreateAclsRequest::default().with_creations(vec![AclCreation::default()
            .with_resource_type(2)
            .with_resource_name(sb("s-hidden"))
            .with_resource_pattern_type(3)
            .with_principal(sb("User:ANONYMOUS"))
            .with_host(sb("*"))
            .with_operation(8)
            .with_permission_type(2)]);
        assert_eq!(c.send(3, deny).await.results[0].error_code, code::NONE);
        let first = hb(
            c,
            join("g", "m", &[])
                .with_subscribed_topic_names(None)
                .with_subscribed_topic_regex(Some(sb("s-.*"))),
        )
        .await;
        assert_eq!(first.error_code, code::NONE, "{first:?}");
        let mut epoch = first.member_epoch;
        let mut got = assigned(&first);
        for _ in 0..5 {
            if !got.is_empty() {
                break;
            }
            let r = hb(c, beat("g", "m", epoch)).await;
            epoch = r.member_epoch;
            got = assigned(&r);
        }
        assert_eq!(got, [(shown, vec![0])]);
    });
}
