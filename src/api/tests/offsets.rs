//! ListOffsets (earliest, latest, by timestamp, max timestamp) and DeleteRecords, with the
//! fetches and appends that must agree with them, on partitions of both shards.

use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{DeleteRecordsRequest, ListOffsetsRequest};

use super::*;

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;

/// (error code, timestamp, offset) of each `(topic, partition, timestamp)` asked, in order.
async fn list(c: &Client, version: i16, asks: &[(&str, i32, i64)]) -> Vec<(i16, i64, i64)> {
    let mut topics: Vec<ListOffsetsTopic> = Vec::new();
    for (t, p, ts) in asks {
        let lp = ListOffsetsPartition::default()
            .with_partition_index(*p)
            .with_timestamp(*ts);
        match topics.iter_mut().find(|x| x.name.0.as_str() == *t) {
            Some(x) => x.partitions.push(lp),
            None => topics.push(
                ListOffsetsTopic::default()
                    .with_name(topic_name(*t))
                    .with_partitions(vec![lp]),
            ),
        }
    }
    let resp = c
        .send(version, ListOffsetsRequest::default().with_topics(topics))
        .await;
    let mut out = Vec::new();
    for t in &resp.topics {
        for p in &t.partitions {
            // The leader epoch exists from v4; Kelp's single leader is always at epoch 0.
            let epoch = if version >= 4 { 0 } else { -1 };
            if p.error_code == code::NONE {
                assert_eq!(p.leader_epoch, epoch, "v{version}");
            }
            out.push((p.error_code, p.timestamp, p.offset));
        }
    }
    out
}

/// (error code, low watermark) of each `(topic, partition, offset)` given, in order.
async fn delete_records(c: &Client, version: i16, asks: &[(&str, i32, i64)]) -> Vec<(i16, i64)> {
    let mut topics: Vec<DeleteRecordsTopic> = Vec::new();
    for (t, p, offset) in asks {
        let dp = DeleteRecordsPartition::default()
            .with_partition_index(*p)
            .with_offset(*offset);
        match topics.iter_mut().find(|x| x.name.0.as_str() == *t) {
            Some(x) => x.partitions.push(dp),
            None => topics.push(
                DeleteRecordsTopic::default()
                    .with_name(topic_name(*t))
                    .with_partitions(vec![dp]),
            ),
        }
    }
    let req = DeleteRecordsRequest::default()
        .with_topics(topics)
        .with_timeout_ms(5000);
    let resp = c.send(version, req).await;
    resp.topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| (p.error_code, p.low_watermark)))
        .collect()
}

#[test]
fn earliest_and_latest_follow_appends_at_every_version() {
    run(2, &[], |b| async move {
        let c = &b.client;
        create_topic(c, "t", 2).await;
        for v in [1i16, 4, 6, 8] {
            let asks = [("t", 0, EARLIEST), ("t", 0, LATEST), ("t", 1, LATEST)];
            assert_eq!(
                list(c, v, &asks).await,
                [(0, -1, 0), (0, -1, 0), (0, -1, 0)],
                "empty, v{v}"
            );
        }
        produce_ok(c, "t", 0, batch(&["a", "b", "c", "d", "e"], 10)).await;
        produce_ok(c, "t", 1, batch(&["a", "b"], 10)).await;
        for v in [1i16, 4, 6, 8] {
            let asks = [("t", 0, EARLIEST), ("t", 0, LATEST), ("t", 1, LATEST)];
            assert_eq!(
                list(c, v, &asks).await,
                [(0, -1, 0), (0, -1, 5), (0, -1, 2)],
                "v{v}"
            );
        }
    });
}

#[test]
fn lookups_by_timestamp_find_the_first_record_at_or_after_it() {
    run(2, &[], |b| async move {
        let c = &b.client;
        create_topic(c, "ts", 2).await;
        for p in 0..2 {
            produce_ok(c, "ts", p, batch(&["a", "b", "c"], 1000)).await;
            produce_ok(c, "ts", p, batch(&["d", "e"], 2000)).await;
            let asks = [
                ("ts", p, 0),
                ("ts", p, 1000),
                ("ts", p, 1001),
                ("ts", p, 1500),
                ("ts", p, 2001),
                ("ts", p, 2002),
            ];
            assert_eq!(
                list(c, 8, &asks).await,
                [
                    (0, 1000, 0),
                    (0, 1000, 0),
                    (0, 1001, 1),
                    (0, 2000, 3),
                    (0, 2001, 4),
                    (0, -1, -1),
                ],
                "partition {p}"
            );
        }
    });
}

#[test]
fn max_timestamp_names_the_record_holding_it() {
    run(2, &[], |b| async move {
        let c = &b.client;
        create_topic(c, "mt", 2).await;
        for p in 0..2 {
            assert_eq!(list(c, 7, &[("mt", p, MAX_TIMESTAMP)]).await, [(0, -1, -1)]);
            produce_ok(c, "mt", p, batch(&["a", "b"], 100)).await;
            // The largest timestamp is inside the second batch, before a later, older batch.
            produce_ok(c, "mt", p, batch(&["c", "d", "e"], 5000)).await;
            produce_ok(c, "mt", p, batch(&["f"], 300)).await;
            assert_eq!(
                list(c, 7, &[("mt", p, MAX_TIMESTAMP)]).await,
                [(0, 5002, 4)],
                "partition {p}"
            );
        }
    });
}

#[test]
fn unknown_topics_and_partitions_are_per_partition_errors() {
    run(2, &["--auto-create-topics", "false"], |b| async move {
        let c = &b.client;
        create_topic(c, "t", 2).await;
        produce_ok(c, "t", 1, batch(&["a"], 1)).await;
        let unknown = code::UNKNOWN_TOPIC_OR_PARTITION;
        let asks = [
            ("t", 2, LATEST),
            ("t", -1, EARLIEST),
            ("t", 1, LATEST),
            ("nope", 0, LATEST),
        ];
        assert_eq!(
            list(c, 8, &asks).await,
            [
                (unknown, -1, -1),
                (unknown, -1, -1),
                (0, -1, 1),
                (unknown, -1, -1)
            ]
        );
        assert!(
            c.shard.cluster.topic("nope").is_none(),
            "ListOffsets creates nothing"
        );
    });
}

#[test]
fn delete_records_moves_the_log_start_that_fetch_and_list_offsets_see() {
    run(2, &[], |b| async move {
        let c = &b.client;
        create_topic(c, "dr", 2).await;
        for p in 0..2 {
            for i in 0..5 {
                produce_ok(c, "dr", p, batch(&[&format!("r{i}")], i)).await;
            }
        }
        for v in [0i16, 2] {
            let p = i32::from(v / 2);
            assert_eq!(
                delete_records(c, v, &[("dr", p, 3)]).await,
                [(0, 3)],
                "v{v}"
            );
            let below = fetch(c, "dr", p, 2).await;
            assert_eq!(below.error_code, code::OFFSET_OUT_OF_RANGE);
            assert_eq!((below.log_start_offset, below.high_watermark), (3, 5));
            let from = fetch(c, "dr", p, 3).await;
            assert_eq!(from.log_start_offset, 3);
            let values: Vec<String> = records_of(&from.records).into_iter().map(|r| r.2).collect();
            assert_eq!(values, ["r3", "r4"]);
            let asks = [("dr", p, EARLIEST), ("dr", p, LATEST), ("dr", p, 0)];
            assert_eq!(list(c, 8, &asks).await, [(0, -1, 3), (0, -1, 5), (0, 3, 3)]);
            // Going back is not an error; the log start stays.
            assert_eq!(delete_records(c, v, &[("dr", p, 1)]).await, [(0, 3)]);
            // Appends go on after the end, and report the new log start.
            let next = produce(c, "dr", p, batch(&["r5"], 5)).await;
            assert_eq!(
                (next.error_code, next.base_offset, next.log_start_offset),
                (0, 5, 3)
            );
        }
    });
}

#[test]
fn delete_records_to_the_end_and_out_of_range() {
    run(2, &["--auto-create-topics", "false"], |b| async move {
        let c = &b.client;
        create_topic(c, "end", 2).await;
        for p in 0..2 {
            produce_ok(c, "end", p, batch(&["a", "b", "c"], 1)).await;
        }
        let oor = code::OFFSET_OUT_OF_RANGE;
        let unknown = code::UNKNOWN_TOPIC_OR_PARTITION;
        let asks = [
            ("end", 0, -1),
            ("end", 1, 4),
            ("end", 1, -7),
            ("end", 2, 0),
            ("gone", 0, 0),
        ];
        assert_eq!(
            delete_records(c, 2, &asks).await,
            [(0, 3), (oor, -1), (oor, -1), (unknown, -1), (unknown, -1)]
        );
        // -1 means the high watermark: everything is gone, the end is still readable.
        let at_end = fetch(c, "end", 0, 3).await;
        assert_eq!((at_end.error_code, at_end.log_start_offset), (0, 3));
        assert!(records_of(&at_end.records).is_empty());
        assert_eq!(fetch(c, "end", 0, 2).await.error_code, oor);
        // The refused partition kept everything.
        let kept = fetch(c, "end", 1, 0).await;
        assert_eq!(
            (kept.log_start_offset, records_of(&kept.records).len()),
            (0, 3)
        );
    });
}

#[test]
fn evicting_the_memory_cache_moves_the_log_start() {
    run(1, &["--cache-bytes-per-core", "4096"], |b| async move {
        let c = &b.client;
        create_topic(c, "small", 1).await;
        for i in 0..10 {
            assert_eq!(produce_ok(c, "small", 0, sized_batch(1, 1000, i)).await, i);
        }
        // With memory storage the cache is the log: what it evicted is gone.
        let earliest = list(c, 8, &[("small", 0, EARLIEST)]).await[0];
        assert_eq!(earliest.0, code::NONE);
        assert!(
            earliest.2 > 0 && earliest.2 < 10,
            "log start {}",
            earliest.2
        );
        let below = fetch(c, "small", 0, 0).await;
        assert_eq!(below.error_code, code::OFFSET_OUT_OF_RANGE);
        assert_eq!(below.log_start_offset, earliest.2);
        let kept = fetch(c, "small", 0, earliest.2).await;
        let first = records_of(&kept.records).first().map(|r| r.0);
        assert_eq!(first, Some(earliest.2));
        assert_eq!(list(c, 8, &[("small", 0, LATEST)]).await, [(0, -1, 10)]);
    });
}

#[test]
fn offset_for_leader_epoch_ends_the_only_epoch_at_the_log_end() {
    use kafka_protocol::messages::offset_for_leader_epoch_request::{
        OffsetForLeaderPartition, OffsetForLeaderTopic,
    };
    use kafka_protocol::messages::OffsetForLeaderEpochRequest;
    run(2, &[], |b| async move {
        let c = &b.client;
        create_topic(c, "e", 2).await;
        produce_ok(c, "e", 1, batch(&["a", "b", "c"], 10)).await;
        // (partition, current epoch, requested epoch) -> (error, epoch, end offset)
        let cases = [
            (1, -1, 0, (code::NONE, 0, 3)),
            (0, 0, 0, (code::NONE, 0, 0)),
            (1, 0, 3, (code::NONE, -1, -1)),
            (1, 2, 0, (code::UNKNOWN_LEADER_EPOCH, -1, -1)),
            (7, -1, 0, (code::UNKNOWN_TOPIC_OR_PARTITION, -1, -1)),
        ];
        for v in [2i16, 3, 4] {
            let parts = cases
                .iter()
                .map(|&(p, cur, req, _)| {
                    OffsetForLeaderPartition::default()
                        .with_partition(p)
                        .with_current_leader_epoch(cur)
                        .with_leader_epoch(req)
                })
                .collect();
            let req = OffsetForLeaderEpochRequest::default().with_topics(vec![
                OffsetForLeaderTopic::default()
                    .with_topic(topic_name("e"))
                    .with_partitions(parts),
            ]);
            let resp = c.send(v, req).await;
            let got: Vec<(i16, i32, i64)> = resp.topics[0]
                .partitions
                .iter()
                .map(|p| (p.error_code, p.leader_epoch, p.end_offset))
                .collect();
            let want: Vec<(i16, i32, i64)> = cases.iter().map(|c| c.3).collect();
            assert_eq!(got, want, "v{v}");
        }
    });
}
