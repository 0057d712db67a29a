//! OffsetCommit, OffsetFetch and OffsetDelete: committed offsets kept by each group's
//! coordinator shard, whichever shard the request arrives on, and the checks on topics,
//! metadata, generations and members.

use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::{
    DeleteGroupsRequest, DescribeGroupsRequest, GroupId, LeaveGroupRequest, OffsetCommitRequest,
    OffsetDeleteRequest, OffsetFetchRequest,
};

use super::groups::{group_on, stable_member};
use super::*;
use crate::api::sb;

/// A commit of `(topic, partition, offset, metadata)` entries, simple unless a member is set.
pub(super) fn commit_request(
    group: &str,
    entries: &[(&str, i32, i64, &str)],
) -> OffsetCommitRequest {
    let mut topics: Vec<OffsetCommitRequestTopic> = Vec::new();
    for (t, p, offset, md) in entries {
        let cp = OffsetCommitRequestPartition::default()
            .with_partition_index(*p)
            .with_committed_offset(*offset)
            .with_committed_metadata(Some(sb(*md)));
        match topics.iter_mut().find(|x| x.name.0.as_str() == *t) {
            Some(x) => x.partitions.push(cp),
            None => topics.push(
                OffsetCommitRequestTopic::default()
                    .with_name(topic_name(*t))
                    .with_partitions(vec![cp]),
            ),
        }
    }
    OffsetCommitRequest::default()
        .with_group_id(GroupId(sb(group)))
        .with_topics(topics)
}

/// (topic, partition, error code) of each partition of a commit answer.
async fn commit(c: &Client, version: i16, req: OffsetCommitRequest) -> Vec<(String, i32, i16)> {
    let resp = c.send(version, req).await;
    resp.topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| (t.name.0.to_string(), p.partition_index, p.error_code))
        })
        .collect()
}

/// One committed entry as fetched: (topic, partition, offset, metadata, error code).
type Fetched = (String, i32, i64, String, i16);

/// OffsetFetch of one group (v1-v7 layout): top-level error and entries.
async fn fetch_offsets(
    c: &Client,
    version: i16,
    group: &str,
    asks: Option<&[(&str, i32)]>,
) -> (i16, Vec<Fetched>) {
    let topics = asks.map(|asks| {
        let mut ts: Vec<OffsetFetchRequestTopic> = Vec::new();
        for (t, p) in asks {
            match ts.iter_mut().find(|x| x.name.0.as_str() == *t) {
                Some(x) => x.partition_indexes.push(*p),
                None => ts.push(
                    OffsetFetchRequestTopic::default()
                        .with_name(topic_name(*t))
                        .with_partition_indexes(vec![*p]),
                ),
            }
        }
        ts
    });
    let req = OffsetFetchRequest::default()
        .with_group_id(GroupId(sb(group)))
        .with_topics(topics);
    let resp = c.send(version, req).await;
    let rows = resp
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(move |p| {
                let md = p.metadata.as_deref().unwrap_or_default().to_string();
                (
                    t.name.0.to_string(),
                    p.partition_index,
                    p.committed_offset,
                    md,
                    p.error_code,
                )
            })
        })
        .collect();
    (resp.error_code, rows)
}

fn row(t: &str, p: i32, offset: i64, md: &str) -> Fetched {
    (t.to_string(), p, offset, md.to_string(), code::NONE)
}

#[test]
fn simple_commits_are_fetched_back_at_every_version() {
    run(2, &[], |b| async move {
        let c = &b.client;
        create_topic(c, "t", 2).await;
        create_topic(c, "u", 1).await;
        for shard in 0..2 {
            let group = group_on(c, shard, "simple");
            let req = commit_request(
                &group,
                &[("t", 0, 10, "m0"), ("t", 1, 20, ""), ("u", 0, 5, "x")],
            );
            assert_eq!(
                commit(c, 2, req).await,
                [("t".into(), 0, 0), ("t".into(), 1, 0), ("u".into(), 0, 0)]
            );
            let asks: &[(&str, i32)] = &[("t", 0), ("t", 1), ("u", 0)];
            let want = vec![
                row("t", 0, 10, "m0"),
                row("t", 1, 20, ""),
                row("u", 0, 5, "x"),
            ];
            for v in [1i16, 3, 5, 7] {
                assert_eq!(
                    fetch_offsets(c, v, &group, Some(asks)).await,
                    (0, want.clone()),
                    "v{v}"
                );
            }
            // Null topics (v2+): everything committed.
            assert_eq!(fetch_offsets(c, 7, &group, None).await, (0, want.clone()));
            // A later commit (v8, with a leader epoch) replaces one entry.
            let mut req = commit_request(&group, &[("t", 1, 21, "again")]);
            req.topics[0].partitions[0].committed_leader_epoch = 3;
            assert_eq!(commit(c, 8, req).await, [("t".into(), 1, 0)]);
            let resp = c
                .send(
                    8,
                    OffsetFetchRequest::default().with_groups(vec![
                        OffsetFetchRequestGroup::default()
                            .with_group_id(GroupId(sb(group.as_str())))
                            .with_topics(Some(vec![OffsetFetchRequestTopics::default()
                                .with_name(topic_name("t"))
                                .with_partition_indexes(vec![1, 0])])),
                    ]),
                )
                .await;
            let g = &resp.groups[0];
            assert_eq!((g.group_id.0.as_str(), g.error_code), (group.as_str(), 0));
            let got: Vec<(i32, i64, i32)> = g.topics[0]
                .partitions
                .iter()
                .map(|p| {
                    (
                        p.partition_index,
                        p.committed_offset,
                        p.committed_leader_epoch,
                    )
                })
                .collect();
            assert_eq!(got, [(1, 21, 3), (0, 10, -1)]);
        }
    });
}

#[test]
fn offsets_committed_through_one_shard_are_read_through_the_other() {
    run(2, &[], |b| async move {
        let c = &b.client;
        create_topic(c, "t", 1).await;
        for shard in 0..2 {
            let group = group_on(c, shard, "across");
            let g = group.clone();
            let codes = b
                .on(1, move |c| async move {
                    commit(&c, 8, commit_request(&g, &[("t", 0, 77, "far")])).await
                })
                .await;
            assert_eq!(codes, [("t".into(), 0, 0)]);
            assert_eq!(
                fetch_offsets(c, 7, &group, Some(&[("t", 0)])).await,
                (0, vec![row("t", 0, 77, "far")])
            );
        }
    });
}

#[test]
fn unknown_groups_and_partitions_fetch_as_nothing_committed() {
    run(2, &[], |b| async move {
        let c = &b.client;
        create_topic(c, "t", 2).await;
        let group = group_on(c, 1, "partial");
        commit(c, 8, commit_request(&group, &[("t", 0, 4, "")])).await;
        let none = |p| ("t".to_string(), p, -1i64, String::new(), code::NONE);
        assert_eq!(
            fetch_offsets(c, 7, &group, Some(&[("t", 0), ("t", 1)])).await,
            (0, vec![row("t", 0, 4, ""), none(1)])
        );
        assert_eq!(
            fetch_offsets(c, 7, "never-committed", Some(&[("t", 1)])).await,
            (0, vec![none(1)])
        );
        assert_eq!(
            fetch_offsets(c, 7, "never-committed", None).await,
            (0, vec![])
        );
    });
}

#[test]
fn commits_check_topics_and_metadata_size_partition_by_partition() {
    run(2, &["--auto-create-topics", "false"], |b| async move {
        let c = &b.client;
        create_topic(c, "t", 1).await;
        let group = group_on(c, 0, "checked");
        let big = "m".repeat(4097);
        let req = commit_request(
            &group,
            &[
                ("t", 0, 1, ""),
                ("t", 1, 1, ""),
                ("nope", 0, 1, ""),
                ("t", 0, 2, &big),
            ],
        );
        let unknown = code::UNKNOWN_TOPIC_OR_PARTITION;
        assert_eq!(
            commit(c, 8, req).await,
            [
                ("t".into(), 0, 0),
                ("t".into(), 1, unknown),
                ("t".into(), 0, code::OFFSET_METADATA_TOO_LARGE),
                ("nope".into(), 0, unknown),
            ]
        );
        assert_eq!(
            fetch_offsets(c, 7, &group, None).await,
            (0, vec![row("t", 0, 1, "")])
        );
        assert!(c.shard.cluster.topic("nope").is_none());
        let empty_id = commit(c, 8, commit_request("", &[("t", 0, 1, "")])).await;
        assert_eq!(empty_id, [("t".into(), 0, code::INVALID_GROUP_ID)]);
    });
}

#[test]
fn member_commits_need_the_current_generation_and_a_known_member() {
    run(2, &[], |b| async move {
        let c = &b.client;
        create_topic(c, "t", 1).await;
        let group = group_on(c, 1, "members");
        let me = stable_member(c, &group, &["t"]).await;
        let as_member = |gen: i32, member: &str| {
            commit_request(&group, &[("t", 0, 9, "")])
                .with_generation_id_or_member_epoch(gen)
                .with_member_id(sb(member))
        };
        let code_of = |r: Vec<(String, i32, i16)>| r[0].2;
        assert_eq!(code_of(commit(c, 8, as_member(1, &me)).await), code::NONE);
        assert_eq!(
            code_of(commit(c, 8, as_member(0, &me)).await),
            code::ILLEGAL_GENERATION
        );
        assert_eq!(
            code_of(commit(c, 8, as_member(1, "stranger")).await),
            code::UNKNOWN_MEMBER_ID
        );
        // A simple commit while the group has members.
        assert_eq!(
            code_of(commit(c, 8, as_member(-1, "")).await),
            code::UNKNOWN_MEMBER_ID
        );
        // A member commit to a group that does not exist.
        let ghost = commit_request("ghost", &[("t", 0, 1, "")])
            .with_generation_id_or_member_epoch(3)
            .with_member_id(sb("m"));
        assert_eq!(code_of(commit(c, 8, ghost).await), code::ILLEGAL_GENERATION);
        assert_eq!(
            fetch_offsets(c, 7, &group, None).await,
            (0, vec![row("t", 0, 9, "")])
        );
    });
}

#[test]
fn offset_delete_removes_unsubscribed_offsets_only() {
    run(2, &[], |b| async move {
        let c = &b.client;
        create_topic(c, "t", 2).await;
        create_topic(c, "u", 1).await;
        let delete = |group: &str, parts: &[(&str, i32)]| {
            let mut topics: Vec<OffsetDeleteRequestTopic> = Vec::new();
            for (t, p) in parts {
                let dp = OffsetDeleteRequestPartition::default().with_partition_index(*p);
                match topics.iter_mut().find(|x| x.name.0.as_str() == *t) {
                    Some(x) => x.partitions.push(dp),
                    None => topics.push(
                        OffsetDeleteRequestTopic::default()
                            .with_name(topic_name(*t))
                            .with_partitions(vec![dp]),
                    ),
                }
            }
            OffsetDeleteRequest::default()
                .with_group_id(GroupId(sb(group)))
                .with_topics(topics)
        };
        // An empty group: any committed offset can go.
        let idle = group_on(c, 0, "od");
        commit(
            c,
            8,
            commit_request(&idle, &[("t", 0, 1, ""), ("t", 1, 2, "")]),
        )
        .await;
        let resp = c.send(0, delete(&idle, &[("t", 0)])).await;
        assert_eq!(resp.error_code, code::NONE);
        assert_eq!(resp.topics[0].partitions[0].error_code, code::NONE);
        assert_eq!(
            fetch_offsets(c, 7, &idle, None).await,
            (0, vec![row("t", 1, 2, "")])
        );
        // A group whose member consumes t keeps t's offsets, not u's.
        let busy = group_on(c, 1, "od");
        let me = stable_member(c, &busy, &["t"]).await;
        let member_commit = commit_request(&busy, &[("t", 0, 3, ""), ("u", 0, 4, "")])
            .with_generation_id_or_member_epoch(1)
            .with_member_id(sb(me.as_str()));
        commit(c, 8, member_commit).await;
        let resp = c.send(0, delete(&busy, &[("t", 0), ("u", 0)])).await;
        assert_eq!(resp.error_code, code::NONE);
        let got: Vec<(String, i16)> = resp
            .topics
            .iter()
            .map(|t| (t.name.0.to_string(), t.partitions[0].error_code))
            .collect();
        assert_eq!(
            got,
            [
                ("t".into(), code::GROUP_SUBSCRIBED_TO_TOPIC),
                ("u".into(), 0)
            ]
        );
        assert_eq!(
            fetch_offsets(c, 7, &busy, None).await,
            (0, vec![row("t", 0, 3, "")])
        );
        // A group nobody knows.
        let resp = c.send(0, delete("unknown-group", &[("t", 0)])).await;
        assert_eq!(resp.error_code, code::GROUP_ID_NOT_FOUND);
    });
}

#[test]
fn deleting_a_group_deletes_its_offsets() {
    run(2, &[], |b| async move {
        let c = &b.client;
        create_topic(c, "t", 1).await;
        let group = group_on(c, 1, "gone");
        let me = stable_member(c, &group, &["t"]).await;
        let member_commit = commit_request(&group, &[("t", 0, 8, "")])
            .with_generation_id_or_member_epoch(1)
            .with_member_id(sb(me.as_str()));
        commit(c, 8, member_commit).await;
        let leave = LeaveGroupRequest::default()
            .with_group_id(GroupId(sb(group.as_str())))
            .with_member_id(sb(me.as_str()));
        assert_eq!(c.send(1, leave).await.error_code, code::NONE);
        // Empty, and its offsets stay until the group is deleted.
        assert_eq!(
            fetch_offsets(c, 7, &group, None).await,
            (0, vec![row("t", 0, 8, "")])
        );
        let describe =
            || DescribeGroupsRequest::default().with_groups(vec![GroupId(sb(group.as_str()))]);
        assert_eq!(
            c.send(5, describe()).await.groups[0].group_state.as_str(),
            "Empty"
        );
        let req =
            DeleteGroupsRequest::default().with_groups_names(vec![GroupId(sb(group.as_str()))]);
        assert_eq!(c.send(2, req).await.results[0].error_code, code::NONE);
        assert_eq!(
            c.send(5, describe()).await.groups[0].group_state.as_str(),
            "Dead"
        );
        assert_eq!(fetch_offsets(c, 7, &group, None).await, (0, vec![]));
        let none = ("t".to_string(), 0, -1i64, String::new(), code::NONE);
        assert_eq!(
            fetch_offsets(c, 7, &group, Some(&[("t", 0)])).await,
            (0, vec![none])
        );
    });
}
