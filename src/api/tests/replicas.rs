//! The replica-management APIs on partitions with one replica: ElectLeaders,
//! ListPartitionReassignments and DescribeLogDirs (whose memory engine has no log
//! directory; the local log's sizes are `log::usage`'s and the e2e suite's).

use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::{
    DescribeLogDirsRequest, ElectLeadersRequest, ListPartitionReassignmentsRequest,
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
