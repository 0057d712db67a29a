//! Fetch: records by name and by topic id, per-partition errors, the long-poll (woken by an
//! append or a topic deletion on either shard, or timing out), min_bytes, and the response
//! and partition byte limits with the first-batch rule.

use std::sync::atomic::Ordering;

use kafka_protocol::messages::FetchResponse;

use super::*;

/// Every partition answer of a response, topic by topic.
fn partitions(resp: &FetchResponse) -> Vec<&PartitionData> {
    resp.responses.iter().flat_map(|t| &t.partitions).collect()
}

/// Offsets of the records of one partition answer.
fn offsets(p: &PartitionData) -> Vec<i64> {
    records_of(&p.records).iter().map(|r| r.0).collect()
}

/// Batches in one records field.
fn batch_count(p: &PartitionData) -> usize {
    let mut b = p.records.clone().unwrap_or_default();
    RecordBatchDecoder::decode_all(&mut b)
        .expect("batches")
        .len()
}

async fn sleep_ms(ms: u64) {
    glommio::timer::sleep(Duration::from_millis(ms)).await;
}

#[test]
fn fetch_returns_whole_batches_from_the_one_holding_the_offset() {
    run(1, &[], |b| async move {
        let c = &b.client;
        create_topic(c, "t", 1).await;
        produce_ok(c, "t", 0, batch(&["a", "b", "c"], 100)).await;
        produce_ok(c, "t", 0, batch(&["d", "e"], 200)).await;
        produce_ok(c, "t", 0, batch(&["f"], 300)).await;
        for v in [4i16, 7, 11, 12] {
            let resp = c.send(v, fetch_request(0, &[("t", 0, 4)])).await;
            let p = partitions(&resp)[0];
            assert_eq!(p.error_code, code::NONE, "v{v}");
            assert_eq!((p.high_watermark, p.last_stable_offset), (6, 6), "v{v}");
            if v >= 5 {
                assert_eq!(p.log_start_offset, 0, "v{v}");
            }
            // The batch holding offset 4 starts at 3: it comes whole.
            assert_eq!(
                records_of(&p.records),
                vec![
                    (3, 200, "d".to_string()),
                    (4, 201, "e".to_string()),
                    (5, 300, "f".to_string())
                ],
                "v{v}"
            );
        }
        // At the high watermark: nothing, no error.
        let p = fetch(c, "t", 0, 6).await;
        assert_eq!((p.error_code, p.high_watermark), (code::NONE, 6));
        assert!(offsets(&p).is_empty());
    });
}

#[test]
fn topics_are_named_by_id_from_v13() {
    run(1, &[], |b| async move {
        let c = &b.client;
        let id = create_topic(c, "byid", 1).await;
        produce_ok(c, "byid", 0, batch(&["x", "y"], 1)).await;
        let unknown = uuid::Uuid::from_u128(0x1234);
        for v in [13i16, 16] {
            let mut req = fetch_request(0, &[("byid", 0, 0)]);
            req.topics[0].topic_id = id;
            let mut other = req.topics[0].clone();
            other.topic_id = unknown;
            req.topics.push(other);
            let resp = c.send(v, req).await;
            assert_eq!(resp.responses.len(), 2);
            assert_eq!(resp.responses[0].topic_id, id, "v{v}");
            let p = &resp.responses[0].partitions[0];
            assert_eq!((p.error_code, offsets(p)), (code::NONE, vec![0, 1]), "v{v}");
            assert_eq!(resp.responses[1].topic_id, unknown);
            let q = &resp.responses[1].partitions[0];
            assert_eq!(
                (q.error_code, q.high_watermark),
                (code::UNKNOWN_TOPIC_ID, -1)
            );
        }
    });
}

#[test]
fn unknown_topics_partitions_and_offsets_are_answered_at_once() {
    run(2, &[], |b| async move {
        let c = &b.client;
        create_topic(c, "t", 2).await;
        for p in 0..2 {
            produce_ok(c, "t", p, batch(&["a", "b", "c"], 1)).await;
        }
        let started = Instant::now();
        // A long max_wait: errors must not wait for it.
        let req = fetch_request(
            10_000,
            &[
                ("t", 0, 10),
                ("t", 1, -1),
                ("t", 2, 0),
                ("nope", 0, 0),
                ("t", 1, 1),
            ],
        );
        let resp = c.send(12, req).await;
        assert!(started.elapsed() < Duration::from_secs(5), "errors waited");
        let got: Vec<(i32, i16, i64, i64)> = partitions(&resp)
            .iter()
            .map(|p| {
                (
                    p.partition_index,
                    p.error_code,
                    p.high_watermark,
                    p.log_start_offset,
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (0, code::OFFSET_OUT_OF_RANGE, 3, 0),
                (1, code::OFFSET_OUT_OF_RANGE, 3, 0),
                (2, code::UNKNOWN_TOPIC_OR_PARTITION, -1, -1),
                (1, code::NONE, 3, 0),
                (0, code::UNKNOWN_TOPIC_OR_PARTITION, -1, -1),
            ]
        );
        assert_eq!(offsets(partitions(&resp)[3]), vec![0, 1, 2]);
    });
}

#[test]
fn a_long_poll_times_out_empty_on_either_shard() {
    run(2, &[], |b| async move {
        let c = &b.client;
        create_topic(c, "t", 2).await;
        for p in 0..2 {
            produce_ok(c, "t", p, batch(&["a"], 1)).await;
            let started = Instant::now();
            let resp = c.send(12, fetch_request(300, &[("t", p, 1)])).await;
            let waited = started.elapsed();
            assert!(waited >= Duration::from_millis(290), "p{p}: {waited:?}");
            assert!(waited < Duration::from_secs(5), "p{p}: {waited:?}");
            let got = partitions(&resp)[0];
            assert_eq!((got.error_code, got.high_watermark), (code::NONE, 1));
            assert!(offsets(got).is_empty());
        }
    });
}

/// A fetch from `fetcher`'s client of `topic`-`p` at its end, answered by an append made
/// by `producer`'s client 100 ms later: it must come back with the record, well before its
/// 20 s max_wait.
async fn woken_by_append(b: &Broker, topic: &'static str, p: i32, fetcher: usize, producer: usize) {
    let poll = b.on(fetcher, move |c| async move {
        let started = Instant::now();
        let resp = c.send(12, fetch_request(20_000, &[(topic, p, 0)])).await;
        let got = partitions(&resp)[0].clone();
        (started.elapsed(), got.error_code, records_of(&got.records))
    });
    let append = b.on(producer, move |c| async move {
        sleep_ms(100).await;
        produce_ok(&c, topic, p, batch(&["wake"], 7)).await
    });
    let ((waited, err, recs), base) = futures::join!(poll, append);
    assert_eq!(base, 0);
    assert_eq!(err, code::NONE);
    assert_eq!(recs, vec![(0, 7, "wake".to_string())]);
    assert!(
        waited < Duration::from_secs(10),
        "{topic}-{p} (fetch on {fetcher}, produce on {producer}) waited {waited:?}"
    );
}

#[test]
fn a_long_poll_is_woken_by_an_append_from_any_shard() {
    run(2, &[], |b| async move {
        let c = &b.client;
        create_topic(c, "w", 2).await;
        create_topic(c, "x", 2).await;
        create_topic(c, "y", 2).await;
        let mine = owned_by(c, "w", 2, 0)[0];
        let theirs = owned_by(c, "w", 2, 1)[0];
        // The partition on the fetching shard, appended through the other shard.
        woken_by_append(&b, "w", mine, 0, 1).await;
        // The partition on the other shard: the wait runs there, the answer crosses back.
        woken_by_append(&b, "w", theirs, 0, 0).await;
        // Both hops: fetch and append arrive on the shard that does not own the partition.
        let p = owned_by(c, "x", 2, 0)[0];
        woken_by_append(&b, "x", p, 1, 1).await;
        // The partition on the fetching shard, appended there while it waits.
        let p = owned_by(c, "y", 2, 1)[0];
        woken_by_append(&b, "y", p, 1, 0).await;
    });
}

#[test]
fn deleting_the_topic_ends_a_long_poll_on_either_shard() {
    run(2, &[], |b| async move {
        let c = &b.client;
        for name in ["gone0", "gone1"] {
            create_topic(c, name, 2).await;
        }
        for (name, shard) in [("gone0", 0usize), ("gone1", 1)] {
            let p = owned_by(c, name, 2, shard)[0];
            let started = Instant::now();
            let poll = c.send(12, fetch_request(20_000, &[(name, p, 0)]));
            let delete = async {
                sleep_ms(100).await;
                let req = kafka_protocol::messages::DeleteTopicsRequest::default()
                    .with_topic_names(vec![topic_name(name)]);
                c.send(5, req).await.responses[0].error_code
            };
            let (resp, deleted) = futures::join!(poll, delete);
            assert_eq!(deleted, code::NONE);
            let waited = started.elapsed();
            assert!(
                waited < Duration::from_secs(10),
                "{name}: waited {waited:?}"
            );
            let got = partitions(&resp)[0];
            assert_eq!(got.error_code, code::UNKNOWN_TOPIC_OR_PARTITION, "{name}");
        }
    });
}

#[test]
fn min_bytes_waits_for_more_data_and_is_woken_when_it_comes() {
    run(2, &[], |b| async move {
        let c = &b.client;
        create_topic(c, "m", 2).await;
        for p in 0..2 {
            produce_ok(c, "m", p, sized_batch(1, 100, 1)).await;
            let mut req = fetch_request(20_000, &[("m", p, 0)]);
            req.min_bytes = 250;
            let started = Instant::now();
            let poll = c.send(12, req);
            let more = async {
                sleep_ms(100).await;
                produce_ok(c, "m", p, sized_batch(1, 100, 2)).await
            };
            let (resp, base) = futures::join!(poll, more);
            assert_eq!(base, 1);
            assert!(started.elapsed() < Duration::from_secs(10), "p{p}");
            assert_eq!(offsets(partitions(&resp)[0]), vec![0, 1], "p{p}");
            // Not enough by the deadline: what there is, after max_wait.
            let mut req = fetch_request(300, &[("m", p, 0)]);
            req.min_bytes = 1 << 20;
            let started = Instant::now();
            let resp = c.send(12, req).await;
            assert!(started.elapsed() >= Duration::from_millis(290), "p{p}");
            assert_eq!(offsets(partitions(&resp)[0]), vec![0, 1], "p{p}");
        }
    });
}

#[test]
fn min_bytes_waits_for_appends_instead_of_rereading() {
    run(2, &[], |b| async move {
        let c = &b.client;
        create_topic(c, "spin", 2).await;
        let p = owned_by(c, "spin", 2, 1)[0];
        produce_ok(c, "spin", p, sized_batch(1, 100, 1)).await;
        let mut req = fetch_request(300, &[("spin", p, 0)]);
        req.min_bytes = 1 << 20;
        // Each read of the other shard's partition is one forwarded item.
        let before = c.shard.stats.forwarded_items.load(Ordering::Relaxed);
        let resp = c.send(12, req).await;
        let reads = c.shard.stats.forwarded_items.load(Ordering::Relaxed) - before;
        assert_eq!(offsets(partitions(&resp)[0]), vec![0]);
        // Nothing was appended while it waited: one read before the wait, one after.
        assert!(reads <= 3, "{reads} reads in 300 ms");
    });
}

#[test]
fn byte_limits_keep_whole_batches_and_always_the_first() {
    run(2, &[], |b| async move {
        let c = &b.client;
        create_topic(c, "big", 2).await;
        for p in 0..2 {
            for i in 0..3 {
                produce_ok(c, "big", p, sized_batch(1, 1000, i)).await;
            }
        }
        let one = fetch(c, "big", 0, 0).await.records.map_or(0, |r| r.len()) / 3;
        assert!(one > 1000);
        // (response max_bytes, partition max_bytes) -> batches of partition 0 and 1.
        let cases: [(i32, i32, usize, usize); 6] = [
            (1, 1 << 20, 1, 0),
            (one as i32 * 5 / 2, 1 << 20, 2, 0),
            (one as i32 * 9 / 2, 1 << 20, 3, 1),
            (1 << 20, 1, 1, 1),
            (1 << 20, one as i32 * 2, 2, 2),
            (1 << 20, 1 << 20, 3, 3),
        ];
        for (max, part_max, want0, want1) in cases {
            let mut req = fetch_request(0, &[("big", 0, 0), ("big", 1, 0)]);
            req.max_bytes = max;
            for fp in &mut req.topics[0].partitions {
                fp.partition_max_bytes = part_max;
            }
            let resp = c.send(12, req).await;
            let ps = partitions(&resp);
            let got = (batch_count(ps[0]), batch_count(ps[1]));
            assert_eq!(
                got,
                (want0, want1),
                "max_bytes {max}, partition max {part_max}"
            );
            assert!(ps
                .iter()
                .all(|p| p.high_watermark == 3 && p.error_code == 0));
        }
        // A partition that is empty where it is read does not use up the first-batch rule.
        let mut req = fetch_request(0, &[("big", 0, 3), ("big", 1, 0)]);
        req.max_bytes = 1;
        let resp = c.send(12, req).await;
        let ps = partitions(&resp);
        assert_eq!((batch_count(ps[0]), batch_count(ps[1])), (0, 1));
    });
}

#[test]
fn the_broker_fetch_max_bytes_caps_what_the_client_asks() {
    run(1, &["--fetch-max-bytes", "2500"], |b| async move {
        let c = &b.client;
        create_topic(c, "t", 1).await;
        for i in 0..3 {
            produce_ok(c, "t", 0, sized_batch(1, 1000, i)).await;
        }
        for max in [i32::MAX, 0, -1] {
            let mut req = fetch_request(0, &[("t", 0, 0)]);
            req.max_bytes = max;
            let resp = c.send(12, req).await;
            assert_eq!(
                batch_count(partitions(&resp)[0]),
                2,
                "client max_bytes {max}"
            );
        }
    });
}
