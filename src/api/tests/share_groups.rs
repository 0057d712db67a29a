//! KIP-932 share groups over the wire: ShareGroupHeartbeat, ShareFetch (sessions, long
//! poll, acquisition, piggybacked acknowledgements), ShareAcknowledge, ShareGroupDescribe,
//! and how the other group APIs treat a share group.

use kafka_protocol::messages::alter_share_group_offsets_request::{
    AlterShareGroupOffsetsRequestPartition, AlterShareGroupOffsetsRequestTopic,
};
use kafka_protocol::messages::delete_share_group_offsets_request::DeleteShareGroupOffsetsRequestTopic;
use kafka_protocol::messages::describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestGroup;
use kafka_protocol::messages::share_acknowledge_request::{
    AcknowledgePartition, AcknowledgeTopic, AcknowledgementBatch as AckBatchA,
};
use kafka_protocol::messages::share_fetch_request::{
    AcknowledgementBatch, FetchPartition as SharePartition, FetchTopic as ShareTopic,
};
use kafka_protocol::messages::share_fetch_response::PartitionData as SharePartitionData;
use kafka_protocol::messages::{
    AlterShareGroupOffsetsRequest, DeleteGroupsRequest, DeleteShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequest, GroupId, JoinGroupRequest, ListGroupsRequest,
    ShareAcknowledgeRequest, ShareFetchRequest, ShareGroupDescribeRequest,
    ShareGroupHeartbeatRequest,
};

use super::groups::group_on;
use super::*;
use crate::api::sb;

fn join(group: &str, member: &str, topics: &[&str]) -> ShareGroupHeartbeatRequest {
    ShareGroupHeartbeatRequest::default()
        .with_group_id(GroupId(sb(group)))
        .with_member_id(sb(member))
        .with_member_epoch(0)
        .with_subscribed_topic_names(Some(topics.iter().map(|t| topic_name(*t)).collect()))
}

/// Acknowledgements: (first, last, type) batches.
type Acks = Vec<(i64, i64, i8)>;

/// A ShareFetch of `member` at `epoch` naming `parts` of `topic` (with `acks`: per partition,
/// (first, last, type)).
fn share_fetch(
    group: &str,
    member: &str,
    epoch: i32,
    topic: uuid::Uuid,
    parts: &[(i32, Acks)],
    max_wait_ms: i32,
) -> ShareFetchRequest {
    ShareFetchRequest::default()
        .with_group_id(Some(GroupId(sb(group))))
        .with_member_id(Some(sb(member)))
        .with_share_session_epoch(epoch)
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_max_records(500)
        .with_batch_size(500)
        .with_topics(vec![ShareTopic::default()
            .with_topic_id(topic)
            .with_partitions(
                parts
                    .iter()
                    .map(|(p, acks)| {
                        SharePartition::default()
                            .with_partition_index(*p)
                            .with_acknowledgement_batches(
                                acks.iter()
                                    .map(|&(f, l, t)| {
                                        AcknowledgementBatch::default()
                                            .with_first_offset(f)
                                            .with_last_offset(l)
                                            .with_acknowledge_types(vec![t])
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            )])
}

/// (partition, error, ack error, acquired (first, last, deliveries), records' values).
type Got = (i32, i16, i16, Vec<(i64, i64, i16)>, Vec<String>);

fn got(r: &kafka_protocol::messages::ShareFetchResponse) -> Vec<Got> {
    let part = |p: &SharePartitionData| -> Got {
        (
            p.partition_index,
            p.error_code,
            p.acknowledge_error_code,
            p.acquired_records
                .iter()
                .map(|a| (a.first_offset, a.last_offset, a.delivery_count))
                .collect(),
            records_of(&p.records).into_iter().map(|r| r.2).collect(),
        )
    };
    r.responses
        .iter()
        .flat_map(|t| t.partitions.iter().map(part))
        .collect()
}

#[test]
fn a_share_group_hands_each_record_to_one_member_until_acknowledged() {
    run(2, &[], |b| async move {
        let c = &b.client;
        let topic = create_topic(c, "st", 2).await;
        for shard in 0..2 {
            let group = group_on(c, shard, "sg");
            let hb = c.send(1, join(&group, "m1", &["st"])).await;
            assert_eq!((hb.error_code, hb.member_epoch), (code::NONE, 1));
            let a = hb.assignment.expect("assignment on joining");
            assert_eq!(a.topic_partitions[0].partitions, vec![0, 1]);

            // Opening the session lists every partition; latest: nothing old is acquired.
            let base = fetch(c, "st", 0, 0).await.high_watermark;
            let r = c
                .send(
                    1,
                    share_fetch(&group, "m1", 0, topic, &[(0, vec![]), (1, vec![])], 0),
                )
                .await;
            assert_eq!(r.error_code, code::NONE);
            assert_eq!(r.acquisition_lock_timeout_ms, 30_000);
            assert_eq!(got(&r).len(), 2);
            assert!(got(&r).iter().all(|g| g.3.is_empty()));

            // A fetch waiting for records is answered by the append.
            let waiting = {
                let c = c.clone();
                let group = group.clone();
                glommio::spawn_local(async move {
                    c.send(1, share_fetch(&group, "m1", 1, topic, &[], 10_000))
                        .await
                })
            };
            glommio::timer::sleep(Duration::from_millis(50)).await;
            produce_ok(c, "st", 0, batch(&["a", "b"], 1)).await;
            let r = waiting.await;
            let g = got(&r);
            assert_eq!(g.len(), 1, "{g:?}");
            assert_eq!(g[0].3, vec![(base, base + 1, 1)]);
            assert_eq!(g[0].4, vec!["a", "b"]);

            // Another member gets nothing while m1 holds them.
            let r = c
                .send(1, share_fetch(&group, "m2", 0, topic, &[(0, vec![])], 0))
                .await;
            assert!(got(&r).iter().all(|g| g.3.is_empty()), "{:?}", got(&r));

            // m1 releases the first, accepts the second; m2 gets the first again.
            let ack = |member: &str, epoch: i32, acks: &[(i64, i64, i8)]| {
                ShareAcknowledgeRequest::default()
                    .with_group_id(Some(GroupId(sb(group.as_str()))))
                    .with_member_id(Some(sb(member)))
                    .with_share_session_epoch(epoch)
                    .with_topics(vec![AcknowledgeTopic::default()
                        .with_topic_id(topic)
                        .with_partitions(vec![AcknowledgePartition::default()
                            .with_partition_index(0)
                            .with_acknowledgement_batches(
                                acks.iter()
                                    .map(|&(f, l, t)| {
                                        AckBatchA::default()
                                            .with_first_offset(f)
                                            .with_last_offset(l)
                                            .with_acknowledge_types(vec![t])
                                    })
                                    .collect(),
                            )])])
            };
            let r = c
                .send(1, ack("m1", 2, &[(base, base, 2), (base + 1, base + 1, 1)]))
                .await;
            assert_eq!(r.responses[0].partitions[0].error_code, code::NONE);
            let r = c
                .send(1, share_fetch(&group, "m2", 1, topic, &[], 1000))
                .await;
            assert_eq!(got(&r)[0].3, vec![(base, base, 2)]);

            // m1 may not acknowledge what m2 holds now; m2 may.
            let r = c.send(1, ack("m1", 3, &[(base, base, 1)])).await;
            assert_eq!(
                r.responses[0].partitions[0].error_code,
                code::INVALID_RECORD_STATE
            );
            let r = c.send(1, ack("m2", 2, &[(base, base, 1)])).await;
            assert_eq!(r.responses[0].partitions[0].error_code, code::NONE);
            // Both done now: the start moved past them, and Kafka ignores offsets below it.
            let r = c.send(1, ack("m2", 3, &[(base, base, 1)])).await;
            assert_eq!(r.responses[0].partitions[0].error_code, code::NONE);
            // A wrong epoch is the session's error.
            let r = c.send(1, ack("m2", 9, &[(base, base, 1)])).await;
            assert_eq!(r.error_code, code::INVALID_SHARE_SESSION_EPOCH);

            // Both records done: partition 0 starts after them; partition 1 from its end.
            let d = c
                .send(
                    0,
                    DescribeShareGroupOffsetsRequest::default().with_groups(vec![
                        DescribeShareGroupOffsetsRequestGroup::default()
                            .with_group_id(GroupId(sb(group.as_str())))
                            .with_topics(None),
                    ]),
                )
                .await;
            let g = &d.groups[0];
            assert_eq!(g.error_code, code::NONE);
            let starts: Vec<(i32, i64)> = g.topics[0]
                .partitions
                .iter()
                .map(|p| (p.partition_index, p.start_offset))
                .collect();
            assert_eq!(starts, vec![(0, base + 2), (1, 0)]);
            assert_eq!(g.topics[0].topic_id, topic);

            // Listed and described as a share group; the other group APIs refuse it.
            let l = c.send(5, ListGroupsRequest::default()).await;
            let listed = l
                .groups
                .iter()
                .find(|g| g.group_id.0.as_str() == group)
                .unwrap();
            assert_eq!(
                (listed.group_type.as_str(), listed.group_state.as_str()),
                ("share", "Stable")
            );
            let d = c
                .send(
                    1,
                    ShareGroupDescribeRequest::default()
                        .with_group_ids(vec![GroupId(sb(group.as_str()))]),
                )
                .await;
            assert_eq!(d.groups[0].error_code, code::NONE);
            assert_eq!(d.groups[0].members.len(), 1);
            assert_eq!(
                d.groups[0].members[0].assignment.topic_partitions[0]
                    .topic_name
                    .0
                    .as_str(),
                "st"
            );
            let j = c
                .send(
                    6,
                    JoinGroupRequest::default()
                        .with_group_id(GroupId(sb(group.as_str())))
                        .with_session_timeout_ms(10_000)
                        .with_rebalance_timeout_ms(10_000)
                        .with_protocol_type(sb("consumer")),
                )
                .await;
            assert_eq!(j.error_code, code::INCONSISTENT_GROUP_PROTOCOL);
            let alter = AlterShareGroupOffsetsRequest::default()
                .with_group_id(GroupId(sb(group.as_str())))
                .with_topics(vec![AlterShareGroupOffsetsRequestTopic::default()
                    .with_topic_name(topic_name("st"))
                    .with_partitions(vec![
                        AlterShareGroupOffsetsRequestPartition::default()
                            .with_partition_index(1)
                            .with_start_offset(0),
                        AlterShareGroupOffsetsRequestPartition::default()
                            .with_partition_index(7)
                            .with_start_offset(0),
                    ])]);
            let r = c.send(0, alter.clone()).await;
            assert_eq!(r.error_code, code::NON_EMPTY_GROUP);
            let del =
                DeleteGroupsRequest::default().with_groups_names(vec![GroupId(sb(group.as_str()))]);
            let r = c.send(2, del.clone()).await;
            assert_eq!(r.results[0].error_code, code::NON_EMPTY_GROUP);
            let leave = ShareGroupHeartbeatRequest::default()
                .with_group_id(GroupId(sb(group.as_str())))
                .with_member_id(sb("m1"))
                .with_member_epoch(-1);
            assert_eq!(c.send(1, leave).await.member_epoch, -1);
            // Empty now: its offsets may be reset and deleted.
            let r = c.send(0, alter).await;
            assert_eq!(r.error_code, code::NONE);
            let errors: Vec<(i32, i16)> = r.responses[0]
                .partitions
                .iter()
                .map(|p| (p.partition_index, p.error_code))
                .collect();
            assert_eq!(
                errors,
                vec![(1, code::NONE), (7, code::UNKNOWN_TOPIC_OR_PARTITION)]
            );
            let describe = DescribeShareGroupOffsetsRequest::default().with_groups(vec![
                DescribeShareGroupOffsetsRequestGroup::default()
                    .with_group_id(GroupId(sb(group.as_str())))
                    .with_topics(None),
            ]);
            let d = c.send(0, describe.clone()).await;
            let starts: Vec<(i32, i64)> = d.groups[0].topics[0]
                .partitions
                .iter()
                .map(|p| (p.partition_index, p.start_offset))
                .collect();
            assert_eq!(starts, vec![(0, base + 2), (1, 0)]);
            let r = c
                .send(
                    0,
                    DeleteShareGroupOffsetsRequest::default()
                        .with_group_id(GroupId(sb(group.as_str())))
                        .with_topics(vec![DeleteShareGroupOffsetsRequestTopic::default()
                            .with_topic_name(topic_name("st"))]),
                )
                .await;
            assert_eq!(
                (r.error_code, r.responses[0].error_code),
                (code::NONE, code::NONE)
            );
            let d = c.send(0, describe).await;
            assert!(d.groups[0].topics.is_empty(), "{d:?}");
            let r = c.send(2, del).await;
            assert_eq!(r.results[0].error_code, code::NONE);
        }
    });
}

#[test]
fn malformed_share_requests_get_kafkas_errors() {
    run(1, &[], |b| async move {
        let c = &b.client;
        let topic = create_topic(c, "mt", 1).await;
        let r = c.send(1, join("g", "", &["mt"])).await;
        assert_eq!(r.error_code, code::INVALID_REQUEST);
        let r = c.send(1, join("g", "m", &[])).await;
        assert_eq!(r.error_code, code::INVALID_REQUEST);
        let beat = join("g", "m", &["mt"])
            .with_member_epoch(3)
            .with_subscribed_topic_names(None);
        assert_eq!(c.send(1, beat).await.error_code, code::UNKNOWN_MEMBER_ID);
        // Acknowledgements when opening a session, or with no session.
        let r = c
            .send(
                1,
                share_fetch("g", "m", 0, topic, &[(0, vec![(0, 0, 1)])], 0),
            )
            .await;
        assert_eq!(r.error_code, code::INVALID_REQUEST);
        let r = c.send(1, share_fetch("g", "m", 5, topic, &[], 0)).await;
        assert_eq!(r.error_code, code::SHARE_SESSION_NOT_FOUND);
        // An unknown topic id is the partition's error; a bad ack type the partition's.
        let r = c
            .send(
                1,
                share_fetch("g", "m", 0, uuid::Uuid::from_u128(9), &[(0, vec![])], 0),
            )
            .await;
        assert_eq!(got(&r)[0].1, code::UNKNOWN_TOPIC_ID);
        let r = c
            .send(
                1,
                share_fetch("g", "m", 1, topic, &[(0, vec![(0, 0, 7)])], 0),
            )
            .await;
        assert!(
            got(&r).iter().any(|g| g.2 == code::INVALID_REQUEST),
            "{:?}",
            got(&r)
        );
    });
}
