//! Produce: appends on the owning shard (local and across the mesh), per-partition errors,
//! whole-request refusals, acks=0 and idempotent retries.

use super::*;
use crate::record::build::producer_batch;

/// One record "x" as a records field.
fn one() -> Option<Bytes> {
    Some(batch(&["x"], 1).freeze())
}

/// (index, error code, base offset) of every partition answer of every topic, in order.
fn outcomes(resp: &kafka_protocol::messages::ProduceResponse) -> Vec<(String, i32, i16, i64)> {
    resp.responses
        .iter()
        .flat_map(|t| {
            t.partition_responses
                .iter()
                .map(move |p| (t.name.0.to_string(), p.index, p.error_code, p.base_offset))
        })
        .collect()
}

async fn high_watermark(c: &Client, topic: &str, partition: i32) -> i64 {
    let p = fetch(c, topic, partition, 0).await;
    assert_eq!(p.error_code, code::NONE);
    p.high_watermark
}

#[test]
fn appends_get_consecutive_base_offsets_at_every_version() {
    run(1, &[], |b| async move {
        let c = &b.client;
        create_topic(c, "t", 1).await;
        let mut next = 0;
        for v in [3i16, 5, 8, 9, 11] {
            let req = produce_request(
                -1,
                &[("t", 0, Some(batch(&["a", "b", "c"], 1000).freeze()))],
            );
            let resp = c.send(v, req).await;
            let p = &resp.responses[0].partition_responses[0];
            assert_eq!((p.error_code, p.base_offset), (code::NONE, next), "v{v}");
            if v >= 5 {
                assert_eq!(p.log_start_offset, 0, "v{v}");
            }
            next += 3;
        }
        let got = fetch(c, "t", 0, 0).await;
        assert_eq!(got.high_watermark, 15);
        let recs = records_of(&got.records);
        assert_eq!(recs.len(), 15);
        assert_eq!(recs[4], (4, 1001, "b".to_string()));
        assert_eq!(recs[14], (14, 1002, "c".to_string()));
    });
}

#[test]
fn one_request_appends_to_partitions_of_both_shards() {
    run(2, &[], |b| async move {
        let c = &b.client;
        create_topic(c, "spread", 4).await;
        assert!(!owned_by(c, "spread", 4, 0).is_empty());
        assert!(!owned_by(c, "spread", 4, 1).is_empty());
        let values: Vec<String> = (0..4).map(|p| format!("v{p}")).collect();
        for round in 0..2i64 {
            let parts: Vec<(&str, i32, Option<Bytes>)> = (0..4)
                .map(|p| {
                    (
                        "spread",
                        p,
                        Some(batch(&[&values[p as usize]], 10).freeze()),
                    )
                })
                .collect();
            let resp = c.send(9, produce_request(-1, &parts)).await;
            let want: Vec<_> = (0..4)
                .map(|p| ("spread".to_string(), p, code::NONE, round))
                .collect();
            assert_eq!(outcomes(&resp), want, "round {round}");
        }
        for p in 0..4 {
            // The data lives on the owner: its partition state holds both appends.
            let owner = c.shard.owner("spread", p);
            let hw = b
                .on(owner, move |c| async move {
                    c.shard
                        .with_partition("spread", p, |x| x.high_watermark())
                        .expect("partition")
                })
                .await;
            assert_eq!(hw, 2, "partition {p} on shard {owner}");
            let recs = records_of(&fetch(c, "spread", p, 0).await.records);
            let got: Vec<&str> = recs.iter().map(|r| r.2.as_str()).collect();
            assert_eq!(got, vec![values[p as usize].as_str(); 2]);
        }
    });
}

#[test]
fn clients_of_either_shard_append_to_the_same_log() {
    run(2, &[], |b| async move {
        create_topic(&b.client, "t", 2).await;
        for p in 0..2 {
            let first = b
                .on(1, move |c| async move {
                    produce_ok(&c, "t", p, batch(&["from-1"], 1)).await
                })
                .await;
            let second = produce_ok(&b.client, "t", p, batch(&["from-0"], 2)).await;
            assert_eq!((first, second), (0, 1), "partition {p}");
            let recs = records_of(&fetch(&b.client, "t", p, 0).await.records);
            let got: Vec<&str> = recs.iter().map(|r| r.2.as_str()).collect();
            assert_eq!(got, ["from-1", "from-0"]);
        }
    });
}

#[test]
fn unknown_topics_and_partitions_fail_alone() {
    run(2, &["--auto-create-topics", "false"], |b| async move {
        let c = &b.client;
        create_topic(c, "t", 2).await;
        let req = produce_request(
            -1,
            &[
                ("t", 0, one()),
                ("t", 2, one()),
                ("t", -1, one()),
                ("missing", 0, one()),
                ("t", 1, one()),
            ],
        );
        let resp = c.send(9, req).await;
        let unknown = code::UNKNOWN_TOPIC_OR_PARTITION;
        assert_eq!(
            outcomes(&resp),
            vec![
                ("t".into(), 0, code::NONE, 0),
                ("t".into(), 2, unknown, -1),
                ("t".into(), -1, unknown, -1),
                ("t".into(), 1, code::NONE, 0),
                ("missing".into(), 0, unknown, -1),
            ]
        );
        assert!(
            c.shard.cluster.topic("missing").is_none(),
            "auto-create is off"
        );
    });
}

#[test]
fn produce_creates_unknown_topics_when_allowed_and_refuses_bad_names() {
    run(1, &["--default-partitions", "3"], |b| async move {
        let c = &b.client;
        let req = produce_request(
            -1,
            &[
                ("auto", 2, one()),
                ("auto", 3, one()),
                ("bad name", 0, one()),
            ],
        );
        let resp = c.send(9, req).await;
        assert_eq!(
            outcomes(&resp),
            vec![
                ("auto".into(), 2, code::NONE, 0),
                ("auto".into(), 3, code::UNKNOWN_TOPIC_OR_PARTITION, -1),
                ("bad name".into(), 0, code::INVALID_TOPIC_EXCEPTION, -1),
            ]
        );
        assert_eq!(c.shard.cluster.topic("auto").map(|m| m.partitions), Some(3));
        assert!(c.shard.cluster.topic("bad name").is_none());
    });
}

#[test]
fn invalid_acks_refuse_every_partition_and_append_nothing() {
    run(2, &[], |b| async move {
        let c = &b.client;
        create_topic(c, "t", 2).await;
        for acks in [2i16, -2, 5] {
            let resp = c
                .send(
                    9,
                    produce_request(acks, &[("t", 0, one()), ("t", 1, one())]),
                )
                .await;
            let codes: Vec<i16> = outcomes(&resp).iter().map(|o| o.2).collect();
            assert_eq!(codes, [code::INVALID_REQUIRED_ACKS; 2], "acks {acks}");
        }
        for p in 0..2 {
            assert_eq!(high_watermark(c, "t", p).await, 0);
        }
    });
}

#[test]
fn transactional_batches_need_a_transactional_id() {
    run(1, &[], |b| async move {
        let c = &b.client;
        create_topic(c, "t", 1).await;
        let mut txn = crate::record::build::producer_batch(1, 4, 0, 7, 0, 0);
        txn[22] |= 0x10;
        crate::record::build::refresh_crcs(&mut txn);
        let req = produce_request(-1, &[("t", 0, Some(txn.freeze()))]);
        let resp = c.send(9, req).await;
        let codes: Vec<i16> = outcomes(&resp).iter().map(|o| o.2).collect();
        assert_eq!(codes, [code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED]);
        assert_eq!(high_watermark(c, "t", 0).await, 0);
    });
}

#[test]
fn bad_batches_fail_their_partition_only() {
    run(2, &[], |b| async move {
        let c = &b.client;
        create_topic_with(c, "t", 6, &[("max.message.bytes", "300")]).await;
        let good = batch(&["ok"], 5);
        let mut truncated = batch(&["abc", "def"], 5);
        truncated.truncate(truncated.len() - 4);
        let mut magic1 = batch(&["m"], 5);
        magic1[16] = 1;
        let req = produce_request(
            -1,
            &[
                ("t", 0, Some(corrupt(batch(&["crc"], 5)).freeze())),
                ("t", 1, Some(sized_batch(1, 400, 0).freeze())),
                ("t", 2, Some(truncated.freeze())),
                ("t", 3, None),
                ("t", 4, Some(magic1.freeze())),
                ("t", 5, Some(good.freeze())),
            ],
        );
        let resp = c.send(9, req).await;
        let codes: Vec<(i32, i16)> = outcomes(&resp).iter().map(|o| (o.1, o.2)).collect();
        assert_eq!(
            codes,
            [
                (0, code::CORRUPT_MESSAGE),
                (1, code::MESSAGE_TOO_LARGE),
                (2, code::INVALID_RECORD),
                (3, code::INVALID_RECORD),
                (4, code::INVALID_RECORD),
                (5, code::NONE),
            ]
        );
        let msg = resp.responses[0].partition_responses[1]
            .error_message
            .clone();
        assert!(
            msg.is_some_and(|m| m.contains("300")),
            "too-large message names the limit"
        );
        for p in 0..5 {
            assert_eq!(high_watermark(c, "t", p).await, 0, "partition {p}");
        }
        assert_eq!(high_watermark(c, "t", 5).await, 1);
    });
}

#[test]
fn acks_zero_appends_without_an_answer() {
    run(2, &[], |b| async move {
        let c = &b.client;
        create_topic(c, "t", 2).await;
        for p in 0..2 {
            let req = produce_request(0, &[("t", p, Some(batch(&["q1", "q2"], 9).freeze()))]);
            let out = c.try_send(9, req).await.expect("no connection error");
            assert!(out.is_none(), "acks=0 is never answered");
            // Errors are not answered either.
            let bad = produce_request(0, &[("t", p, Some(corrupt(batch(&["z"], 1)).freeze()))]);
            assert!(c.try_send(9, bad).await.expect("kept open").is_none());
            let recs = records_of(&fetch(c, "t", p, 0).await.records);
            assert_eq!(recs.iter().map(|r| r.0).collect::<Vec<_>>(), [0, 1]);
        }
    });
}

#[test]
fn idempotent_retries_get_the_original_offset_and_sequences_are_checked() {
    run(2, &[], |b| async move {
        let c = &b.client;
        create_topic(c, "idem", 2).await;
        // One partition per shard: the check runs on the owner either way.
        for p in 0..2 {
            let pid = 4242 + i64::from(p);
            let first = producer_batch(3, 10, 100, pid, 0, 0);
            assert_eq!(produce_ok(c, "idem", p, first.clone()).await, 0);
            assert_eq!(produce_ok(c, "idem", p, sized_batch(2, 10, 0)).await, 3);
            // The retry is answered with the offset the original got, and appends nothing.
            assert_eq!(produce_ok(c, "idem", p, first).await, 0);
            assert_eq!(high_watermark(c, "idem", p).await, 5);
            assert_eq!(
                produce_ok(c, "idem", p, producer_batch(1, 10, 100, pid, 0, 3)).await,
                5
            );
            let gap = produce(c, "idem", p, producer_batch(1, 10, 100, pid, 0, 9)).await;
            assert_eq!(gap.error_code, code::OUT_OF_ORDER_SEQUENCE_NUMBER);
            // A new epoch starts again at sequence 0 and fences the old one.
            assert_eq!(
                produce_ok(c, "idem", p, producer_batch(1, 10, 100, pid, 1, 0)).await,
                6
            );
            let fenced = produce(c, "idem", p, producer_batch(1, 10, 100, pid, 0, 4)).await;
            assert_eq!(fenced.error_code, code::INVALID_PRODUCER_EPOCH);
            assert_eq!(high_watermark(c, "idem", p).await, 7);
        }
    });
}

#[test]
fn produce_lets_the_connection_start_its_next_request_before_answering() {
    run(2, &[], |b| async move {
        let c = &b.client;
        create_topic(c, "t", 2).await;
        for p in 0..2 {
            let (_, frame) = c.frame(9, &produce_request(-1, &[("t", p, one())]));
            let header = RequestHeader::parse(&frame).expect("header");
            let (tx, mut rx) = oneshot::channel();
            let out =
                crate::api::dispatch(c.shard.clone(), header, super::session(&c.shard), frame, tx)
                    .await
                    .expect("answered");
            assert!(out.is_some());
            assert_eq!(
                rx.try_recv(),
                Ok(Some(())),
                "partition {p}: started was signalled"
            );
        }
    });
}

#[test]
fn log_append_time_topics_get_the_brokers_time() {
    run(2, &[], |b| async move {
        create_topic_with(
            &b.client,
            "lat",
            2,
            &[("message.timestamp.type", "LogAppendTime")],
        )
        .await;
        create_topic(&b.client, "ct", 1).await;
        for p in 0..2 {
            let before = crate::clock::now_ms();
            // From shard 1 too: the owner stamps, whichever shard the request came to.
            let r = b
                .on(1, move |c| async move {
                    produce(&c, "lat", p, batch(&["a", "b"], 1000)).await
                })
                .await;
            let after = crate::clock::now_ms();
            assert_eq!(r.error_code, code::NONE, "{:?}", r.error_message);
            let t = r.log_append_time_ms;
            assert!((before..=after).contains(&t), "{before} <= {t} <= {after}");
            let data = fetch(&b.client, "lat", p, 0).await.records;
            // The batch says LogAppendTime with the append time as its max timestamp (every
            // record's timestamp to a reader), and its CRC checks out again.
            assert_eq!(records_of(&data).len(), 2);
            let raw = data.unwrap();
            let h = crate::record::BatchHeader::parse(&raw).unwrap();
            assert!(h.is_log_append_time());
            assert_eq!(h.max_timestamp, t);
            assert_eq!(h.crc, crc32c::crc32c(&raw[21..h.total_len()]));
        }
        // CreateTime (the default) keeps the producer's timestamps and answers -1.
        let r = produce(&b.client, "ct", 0, batch(&["c"], 1000)).await;
        assert_eq!(r.log_append_time_ms, -1);
        assert_eq!(
            records_of(&fetch(&b.client, "ct", 0, 0).await.records),
            [(0, 1000, "c".to_string())]
        );
    });
}

#[test]
fn compacted_topics_refuse_records_without_keys() {
    use crate::record::walk::tests::encoded_batch_keyed;
    run(1, &[], |b| async move {
        let c = &b.client;
        create_topic_with(c, "compacted", 1, &[("cleanup.policy", "compact,delete")]).await;
        create_topic(c, "plain", 1).await;
        let keyless = |codec| BytesMut::from(&encoded_batch_keyed(codec, &[b"v"], 1, false)[..]);
        for codec in [0, 4] {
            let r = produce(c, "compacted", 0, keyless(codec)).await;
            assert_eq!(r.error_code, code::INVALID_RECORD, "codec {codec}");
            assert_eq!(
                produce_ok(c, "plain", 0, keyless(codec)).await,
                i64::from(codec == 4)
            );
        }
        let keyed = BytesMut::from(&crate::record::walk::tests::encoded_batch(4, &[b"v"], 1)[..]);
        assert_eq!(produce_ok(c, "compacted", 0, keyed).await, 0);
        assert_eq!(produce_ok(c, "compacted", 0, batch(&["w"], 2)).await, 1);
    });
}
