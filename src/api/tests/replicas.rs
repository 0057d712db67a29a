//! The replica-management APIs on partitions with one replica: ElectLeaders,
//! Alter/ListPartitionReassignments and DescribeLogDirs (whose memory engine has no log
//! directory; the local log's sizes are `log::usage`'s and the e2e suite's).

use kafka_protocol::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, BrokerId, DescribeLogDirsRequest, ElectLeadersRequest,
    ListPartitionReassignmentsRequest,
};

use super::*;
use crate::api::topic_name;

fn elect(election_type: i8, asked: Option<&[(&str, &[i32])]>) -> ElectLeadersRequest {
    ElectLeadersRequest::default()
        .with_election_type(election_type)
        .with_timeout_ms(1000)
        .with_topic_partitions(asked.map(|a| {
            a.iter()
                .map(|(t, ps)| {
                    TopicPartitions::default()
                        .with_topic(topic_name(*t))
                        .with_partitions(ps.to_vec())
                })
                .collect()
        }))
}

fn outcomes(r: &kafka_protocol::messages::ElectLeadersResponse) -> Vec<(String, i32, i16)> {
    r.replica_election_results
        .iter()
        .flat_map(|t| {
            t.partition_result
                .iter()
                .map(|p| (t.topic.0.to_string(), p.partition_id, p.error_code))
        })
        .collect()
}

#[test]
fn no_election_is_ever_needed() {
    run(2, &[], |b| async move {
        let c = &b.client;
        create_topic(c, "e", 2).await;
        let asked: &[(&str, &[i32])] = &[("e", &[0, 1, 2]), ("nope", &[0])];
        for (version, kind) in [(0, 0), (1, 1), (2, 0)] {
            let r = c.send(version, elect(kind, Some(asked))).await;
            assert_eq!(r.error_code, code::NONE, "v{version}");
            assert_eq!(
                outcomes(&r),
                [
                    ("e".into(), 0, code::ELECTION_NOT_NEEDED),
                    ("e".into(), 1, code::ELECTION_NOT_NEEDED),
                    ("e".into(), 2, code::UNKNOWN_TOPIC_OR_PARTITION),
                    ("nope".into(), 0, code::UNKNOWN_TOPIC_OR_PARTITION),
                ],
                "v{version}"
            );
        }
        // Kafka's internal topic is led like the others.
        let r = c
            .send(2, elect(0, Some(&[("__consumer_offsets", &[49])])))
            .await;
        assert_eq!(outcomes(&r)[0].2, code::ELECTION_NOT_NEEDED);
        // All partitions: none elected, none listed.
        let r = c.send(2, elect(0, None)).await;
        assert_eq!((r.error_code, outcomes(&r)), (code::NONE, vec![]));
        let r = c.send(2, elect(7, Some(&[("e", &[0])]))).await;
        assert_eq!(outcomes(&r)[0].2, code::INVALID_REQUEST);
    });
}

#[test]
fn nothing_is_being_reassigned_and_no_log_dir_is_kept_in_memory() {
    run(1, &[], |b| async move {
        let c = &b.client;
        create_topic(c, "r", 3).await;
        let r = c
            .send(0, ListPartitionReassignmentsRequest::default())
            .await;
        assert_eq!(r.error_code, code::NONE);
        assert!(r.topics.is_empty());
        for v in 1..=4 {
            // No directory: where the partitions live, sizes unknown (an empty answer
            // would be a refusal to Kafka's admin client).
            let r = c
                .send(v, DescribeLogDirsRequest::default().with_topics(None))
                .await;
            assert_eq!((r.error_code, r.results.len()), (code::NONE, 1), "v{v}");
            let d = &r.results[0];
            assert_eq!((d.error_code, d.log_dir.as_str()), (code::NONE, "memory"));
            let parts: Vec<(String, i32, i64)> = d
                .topics
                .iter()
                .flat_map(|t| {
                    t.partitions
                        .iter()
                        .map(|p| (t.name.0.to_string(), p.partition_index, p.partition_size))
                })
                .collect();
            assert_eq!(
                parts,
                [
                    ("r".into(), 0, -1),
                    ("r".into(), 1, -1),
                    ("r".into(), 2, -1)
                ]
            );
        }
    });
}

#[test]
fn the_cluster_acl_decides() {
    // No ACL allows ANONYMOUS anything on the cluster.
    run(1, &["--authorizer", "acl"], |b| async move {
        let c = &b.client;
        let r = c.send(2, elect(0, Some(&[("e", &[0])]))).await;
        assert_eq!(r.error_code, code::CLUSTER_AUTHORIZATION_FAILED);
        assert_eq!(outcomes(&r)[0].2, code::CLUSTER_AUTHORIZATION_FAILED);
        let r = c
            .send(0, ListPartitionReassignmentsRequest::default())
            .await;
        assert_eq!(r.error_code, code::CLUSTER_AUTHORIZATION_FAILED);
        let r = c.send(4, DescribeLogDirsRequest::default()).await;
        assert_eq!(r.error_code, code::CLUSTER_AUTHORIZATION_FAILED);
    });
}

/// A reassignment to the partition's own broker is already done; anything else is refused
/// with Kafka's codes, each partition on its own.
#[test]
fn reassignments_to_the_own_replica_are_done_and_others_refused() {
    run(1, &[], |b| async move {
        let c = &b.client;
        create_topic(c, "r", 2).await;
        let part = |p: i32, replicas: Option<&[i32]>| {
            ReassignablePartition::default()
                .with_partition_index(p)
                .with_replicas(replicas.map(|rs| rs.iter().map(|&r| BrokerId(r)).collect()))
        };
        for v in 0..=1i16 {
            let req = AlterPartitionReassignmentsRequest::default()
                .with_timeout_ms(1000)
                .with_topics(vec![
                    ReassignableTopic::default()
                        .with_name(topic_name("r"))
                        .with_partitions(vec![
                            part(0, Some(&[0])),
                            part(1, Some(&[0, 0])),
                            part(1, Some(&[7])),
                            part(1, Some(&[])),
                            part(1, None),
                            part(5, Some(&[0])),
                        ]),
                    ReassignableTopic::default()
                        .with_name(topic_name("nope"))
                        .with_partitions(vec![part(0, Some(&[0]))]),
                ]);
            let r = c.send(v, req).await;
            assert_eq!(r.error_code, code::NONE);
            let codes: Vec<(String, i32, i16)> = r
                .responses
                .iter()
                .flat_map(|t| {
                    t.partitions
                        .iter()
                        .map(|p| (t.name.0.to_string(), p.partition_index, p.error_code))
                })
                .collect();
            let r_ = |p, code| ("r".to_string(), p, code);
            assert_eq!(
                codes,
                [
                    r_(0, code::NONE),
                    r_(1, code::INVALID_REPLICA_ASSIGNMENT),
                    r_(1, code::INVALID_REPLICA_ASSIGNMENT),
                    r_(1, code::INVALID_REPLICA_ASSIGNMENT),
                    r_(1, code::NO_REASSIGNMENT_IN_PROGRESS),
                    r_(5, code::UNKNOWN_TOPIC_OR_PARTITION),
                    ("nope".into(), 0, code::UNKNOWN_TOPIC_OR_PARTITION),
                ],
                "v{v}"
            );
        }
    });
    // With a broker per shard, another existing broker is not where Kelp put the partition,
    // and two replicas are more than a Kelp partition has.
    run(2, &["--advertise-shards"], |b| async move {
        let c = &b.client;
        create_topic(c, "r", 1).await;
        let mut codes = Vec::new();
        for replicas in [vec![0], vec![1], vec![0, 1]] {
            let req = AlterPartitionReassignmentsRequest::default().with_topics(vec![
                ReassignableTopic::default()
                    .with_name(topic_name("r"))
                    .with_partitions(vec![ReassignablePartition::default()
                        .with_partition_index(0)
                        .with_replicas(Some(replicas.into_iter().map(BrokerId).collect()))]),
            ]);
            let r = c.send(1, req).await;
            codes.push(r.responses[0].partitions[0].error_code);
        }
        codes.sort_unstable();
        assert_eq!(
            codes,
            [
                code::NONE,
                code::INVALID_REPLICATION_FACTOR,
                code::INVALID_REPLICA_ASSIGNMENT
            ]
        );
    });
}
