//! Transactions through the handlers: InitProducerId with a transactional id (epochs,
//! fencing), AddPartitionsToTxn, transactional produces, EndTxn writing commit and abort
//! markers, read_committed fetches (last stable offset, aborted transactions), transactional
//! offset commits and the timeout that aborts a forgotten transaction.

use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, EndTxnRequest, GroupId,
    InitProducerIdRequest, OffsetFetchRequest, ProducerId, TransactionalId, TxnOffsetCommitRequest,
};

use super::*;
use crate::api::sb;

fn init(id: &str, timeout_ms: i32) -> InitProducerIdRequest {
    InitProducerIdRequest::default()
        .with_transactional_id(Some(TransactionalId(sb(id))))
        .with_transaction_timeout_ms(timeout_ms)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1)
}

fn add(id: &str, pid: i64, epoch: i16, topic: &str, parts: Vec<i32>) -> AddPartitionsToTxnRequest {
    AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(TransactionalId(sb(id)))
        .with_v3_and_below_producer_id(ProducerId(pid))
        .with_v3_and_below_producer_epoch(epoch)
        .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
            .with_name(topic_name(topic))
            .with_partitions(parts)])
}

fn end(id: &str, pid: i64, epoch: i16, commit: bool) -> EndTxnRequest {
    EndTxnRequest::default()
        .with_transactional_id(TransactionalId(sb(id)))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_committed(commit)
}

/// A transactional batch of `n` records (attributes bit 4), sequences from `seq`.
fn txn_batch(n: i32, pid: i64, epoch: i16, seq: i32) -> Bytes {
    let mut b = crate::record::build::producer_batch(n, 8, 1_000, pid, epoch, seq);
    b[22] |= 0x10;
    crate::record::build::refresh_crcs(&mut b);
    b.freeze()
}

async fn txn_produce(c: &Client, id: &str, topic: &str, p: i32, records: Bytes) -> (i16, i64) {
    txn_produce_at(c, 9, id, topic, p, records).await
}

async fn txn_produce_at(
    c: &Client,
    version: i16,
    id: &str,
    topic: &str,
    p: i32,
    records: Bytes,
) -> (i16, i64) {
    let req = produce_request(-1, &[(topic, p, Some(records))])
        .with_transactional_id(Some(TransactionalId(sb(id))));
    let resp = c.send(version, req).await;
    let r = &resp.responses[0].partition_responses[0];
    (r.error_code, r.base_offset)
}

/// (high watermark, last stable offset, aborted (pid, first offset), record offsets) of a
/// read_committed (or not) fetch from offset 0.
async fn fetch(
    c: &Client,
    topic: &str,
    p: i32,
    committed: bool,
) -> (i64, i64, Vec<(i64, i64)>, Vec<i64>) {
    let req = fetch_request(0, &[(topic, p, 0)]).with_isolation_level(i8::from(committed));
    let resp = c.send(12, req).await;
    let pd = &resp.responses[0].partitions[0];
    assert_eq!(pd.error_code, code::NONE);
    let aborted = pd
        .aborted_transactions
        .iter()
        .flatten()
        .map(|a| (a.producer_id.0, a.first_offset))
        .collect();
    let offsets = records_of(&pd.records).into_iter().map(|r| r.0).collect();
    (pd.high_watermark, pd.last_stable_offset, aborted, offsets)
}

#[test]
fn transactions_commit_abort_fence_and_time_out() {
    run(2, &[], |b| async move {
        let c = &b.client;
        create_topic(c, "tt", 2).await;
        let r = c.send(4, init("tx", 0)).await;
        assert_eq!(r.error_code, code::INVALID_TRANSACTION_TIMEOUT);
        let r = c.send(4, init("tx", 60_000)).await;
        assert_eq!((r.error_code, r.producer_epoch), (0, 0));
        let pid = r.producer_id.0;
        // A second producer with the id: same producer id, next epoch; the first is fenced.
        let r = c.send(4, init("tx", 60_000)).await;
        assert_eq!(
            (r.error_code, r.producer_id.0, r.producer_epoch),
            (0, pid, 1)
        );
        let fenced = c.send(3, add("tx", pid, 0, "tt", vec![0])).await;
        let code_of = |r: &kafka_protocol::messages::AddPartitionsToTxnResponse| {
            r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
        };
        assert_eq!(code_of(&fenced), code::PRODUCER_FENCED);
        let fenced = c.send(1, add("tx", pid, 0, "tt", vec![0])).await;
        assert_eq!(code_of(&fenced), code::INVALID_PRODUCER_EPOCH);
        let wrong = c.send(3, add("tx", pid + 1, 1, "tt", vec![0])).await;
        assert_eq!(code_of(&wrong), code::INVALID_PRODUCER_ID_MAPPING);
        // One unknown partition: nothing is added.
        let r = c.send(3, add("tx", pid, 1, "tt", vec![0, 9])).await;
        let codes: Vec<i16> = r.results_by_topic_v3_and_below[0]
            .results_by_partition
            .iter()
            .map(|p| p.partition_error_code)
            .collect();
        assert_eq!(codes, [55, code::UNKNOWN_TOPIC_OR_PARTITION]);

        // A committed transaction.
        assert_eq!(
            code_of(&c.send(3, add("tx", pid, 1, "tt", vec![0, 1])).await),
            0
        );
        assert_eq!(
            txn_produce(c, "tx", "tt", 0, txn_batch(2, pid, 1, 0)).await,
            (0, 0)
        );
        assert_eq!(produce_ok(c, "tt", 0, batch(&["plain"], 5)).await, 2);
        let (hw, lso, _, seen) = fetch(c, "tt", 0, true).await;
        assert_eq!((hw, lso, seen.len()), (3, 0, 0));
        assert_eq!(fetch(c, "tt", 0, false).await.3, [0, 1, 2]);
        assert_eq!(c.send(3, end("tx", pid, 1, true)).await.error_code, 0);
        // The marker took offset 3 on partition 0 (a control record: clients skip it) and 0
        // on partition 1 (nothing written there: a marker still is, as Kafka's coordinator
        // does).
        let (hw, lso, aborted, seen) = fetch(c, "tt", 0, true).await;
        assert_eq!((hw, lso, aborted.len(), seen), (4, 4, 0, vec![0, 1, 2, 3]));
        assert_eq!(fetch(c, "tt", 1, true).await.0, 1);
        assert_eq!(
            c.send(3, end("tx", pid, 1, true)).await.error_code,
            0,
            "a retry"
        );

        // An aborted one, with a group's offsets.
        assert_eq!(
            code_of(&c.send(3, add("tx", pid, 1, "tt", vec![0])).await),
            0
        );
        let ao = AddOffsetsToTxnRequest::default()
            .with_transactional_id(TransactionalId(sb("tx")))
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(1)
            .with_group_id(GroupId(sb("g")));
        assert_eq!(c.send(3, ao.clone()).await.error_code, 0);
        let commit = TxnOffsetCommitRequest::default()
            .with_transactional_id(TransactionalId(sb("tx")))
            .with_group_id(GroupId(sb("g")))
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(1)
            .with_generation_id(-1)
            .with_topics(vec![TxnOffsetCommitRequestTopic::default()
                .with_name(topic_name("tt"))
                .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(42)
                    .with_committed_leader_epoch(-1)])]);
        let r = c.send(3, commit.clone()).await;
        assert_eq!(r.topics[0].partitions[0].error_code, 0);
        assert_eq!(
            txn_produce(c, "tx", "tt", 0, txn_batch(3, pid, 1, 2)).await,
            (0, 4)
        );
        let committed = |c: &Client| {
            let req = OffsetFetchRequest::default()
                .with_group_id(GroupId(sb("g")))
                .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                    .with_name(topic_name("tt"))
                    .with_partition_indexes(vec![0])]));
            let c = c.clone();
            async move { c.send(7, req).await.topics[0].partitions[0].committed_offset }
        };
        assert_eq!(committed(c).await, -1);
        // KIP-447: a reader that asks for stable offsets is told to wait.
        let stable = OffsetFetchRequest::default()
            .with_group_id(GroupId(sb("g")))
            .with_require_stable(true)
            .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                .with_name(topic_name("tt"))
                .with_partition_indexes(vec![0])]));
        let r = c.send(7, stable.clone()).await;
        assert_eq!(
            r.topics[0].partitions[0].error_code,
            code::UNSTABLE_OFFSET_COMMIT
        );
        assert_eq!(c.send(3, end("tx", pid, 1, false)).await.error_code, 0);
        let r = c.send(7, stable).await;
        assert_eq!(r.topics[0].partitions[0].error_code, 0);
        assert_eq!(committed(c).await, -1, "aborted offsets are dropped");
        let (hw, lso, aborted, seen) = fetch(c, "tt", 0, true).await;
        assert_eq!((hw, lso), (8, 8));
        assert_eq!(aborted, [(pid, 4)]);
        // The consumer is handed the aborted records with the list, and drops them itself.
        assert_eq!(seen, [0, 1, 2, 3, 4, 5, 6, 7]);
        let r = c.send(3, end("tx", pid, 1, true)).await;
        assert_eq!(r.error_code, code::INVALID_TXN_STATE);

        // Committed offsets of a committed transaction become the group's.
        assert_eq!(
            code_of(&c.send(3, add("tx", pid, 1, "tt", vec![1])).await),
            0
        );
        assert_eq!(c.send(3, ao).await.error_code, 0);
        assert_eq!(
            c.send(3, commit).await.topics[0].partitions[0].error_code,
            0
        );
        assert_eq!(c.send(3, end("tx", pid, 1, true)).await.error_code, 0);
        assert_eq!(committed(c).await, 42);

        // Re-initialising while a transaction is open aborts it and fences its producer.
        assert_eq!(
            code_of(&c.send(3, add("tx", pid, 1, "tt", vec![1])).await),
            0
        );
        assert_eq!(
            txn_produce(c, "tx", "tt", 1, txn_batch(1, pid, 1, 0))
                .await
                .0,
            0
        );
        let r = c.send(4, init("tx", 60_000)).await;
        assert_eq!((r.error_code, r.producer_id.0), (0, pid));
        assert!(r.producer_epoch > 1);
        let (_, lso, aborted, _) = fetch(c, "tt", 1, true).await;
        assert_eq!(aborted.len(), 1);
        assert_eq!(lso, fetch(c, "tt", 1, false).await.0);
        let (code, _) = txn_produce(c, "tx", "tt", 1, txn_batch(1, pid, 1, 1)).await;
        assert_eq!(
            code,
            code::INVALID_PRODUCER_EPOCH,
            "the old producer is fenced"
        );

        // A transaction past its timeout is aborted by the coordinator.
        let r = c.send(4, init("slow", 1_000)).await;
        let (spid, sepoch) = (r.producer_id.0, r.producer_epoch);
        assert_eq!(
            code_of(&c.send(3, add("slow", spid, sepoch, "tt", vec![0])).await),
            0
        );
        assert_eq!(
            txn_produce(c, "slow", "tt", 0, txn_batch(1, spid, sepoch, 0))
                .await
                .0,
            0
        );
        glommio::timer::sleep(Duration::from_millis(2_500)).await;
        let (hw, lso, aborted, _) = fetch(c, "tt", 0, true).await;
        assert_eq!(hw, lso, "the marker closed it");
        assert!(aborted.contains(&(spid, 8)), "{aborted:?}");
        let r = c.send(3, end("slow", spid, sepoch, true)).await;
        assert_eq!(r.error_code, code::PRODUCER_FENCED);
    });
}

#[test]
fn describe_and_list_transactions() {
    use kafka_protocol::messages::{DescribeTransactionsRequest, ListTransactionsRequest};
    run(2, &[], |b| async move {
        let c = &b.client;
        create_topic(c, "dt", 2).await;
        let mut pids = Vec::new();
        for id in ["t-a", "t-b", "t-c"] {
            pids.push(c.send(4, init(id, 30_000)).await.producer_id.0);
        }
        let add = add("t-b", pids[1], 0, "dt", vec![1, 0]);
        assert_eq!(c.send(3, add).await.results_by_topic_v3_and_below.len(), 1);
        let req = DescribeTransactionsRequest::default().with_transactional_ids(vec![
            TransactionalId(sb("t-b")),
            TransactionalId(sb("nobody")),
        ]);
        let r = c.send(0, req).await;
        let b_state = &r.transaction_states[0];
        assert_eq!(
            (b_state.error_code, b_state.transaction_state.as_str()),
            (0, "Ongoing")
        );
        assert_eq!(
            (b_state.producer_id.0, b_state.transaction_timeout_ms),
            (pids[1], 30_000)
        );
        assert!(b_state.transaction_start_time_ms > 0);
        assert_eq!(b_state.topics[0].partitions, [0, 1]);
        assert_eq!(
            r.transaction_states[1].error_code,
            code::TRANSACTIONAL_ID_NOT_FOUND
        );
        // Every shard's ids, filtered by state.
        let r = c
            .send(
                1,
                ListTransactionsRequest::default().with_duration_filter(-1),
            )
            .await;
        let mut ids: Vec<&str> = r
            .transaction_states
            .iter()
            .map(|t| t.transactional_id.0.as_str())
            .collect();
        ids.sort();
        assert_eq!(ids, ["t-a", "t-b", "t-c"]);
        let r = c
            .send(
                1,
                ListTransactionsRequest::default()
                    .with_duration_filter(-1)
                    .with_state_filters(vec![sb("Ongoing"), sb("Bogus")]),
            )
            .await;
        assert_eq!(r.transaction_states.len(), 1);
        assert_eq!(r.unknown_state_filters, [sb("Bogus")]);
        // DescribeProducers: the open transaction's producer on the partition it wrote.
        assert_eq!(
            txn_produce(c, "t-b", "dt", 0, txn_batch(2, pids[1], 0, 0)).await,
            (0, 0)
        );
        let req = kafka_protocol::messages::DescribeProducersRequest::default().with_topics(vec![
            kafka_protocol::messages::describe_producers_request::TopicRequest::default()
                .with_name(topic_name("dt"))
                .with_partition_indexes(vec![0, 9]),
        ]);
        let r = c.send(0, req).await;
        let parts = &r.topics[0].partitions;
        assert_eq!(parts[0].error_code, 0);
        let p0 = &parts[0].active_producers;
        assert_eq!(p0.len(), 1);
        assert_eq!(
            (
                p0[0].producer_id.0,
                p0[0].producer_epoch,
                p0[0].last_sequence,
                p0[0].current_txn_start_offset
            ),
            (pids[1], 0, 1, 0)
        );
        assert_eq!(parts[1].error_code, code::UNKNOWN_TOPIC_OR_PARTITION);
    });
}

#[test]
fn idle_transactional_ids_expire() {
    use kafka_protocol::messages::DescribeTransactionsRequest;
    run(
        1,
        &["--transactional-id-expiration-ms", "1000"],
        |b| async move {
            let c = &b.client;
            create_topic(c, "ex", 1).await;
            let idle = c.send(4, init("idle", 30_000)).await;
            let open = c.send(4, init("open", 30_000)).await;
            let r = c
                .send(3, add("open", open.producer_id.0, 0, "ex", vec![0]))
                .await;
            assert_eq!(
                r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code,
                0
            );
            let later = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis() as i64
                + 5_000;
            c.shard.expire_txn_ids(later).await;
            let req = DescribeTransactionsRequest::default().with_transactional_ids(vec![
                TransactionalId(sb("idle")),
                TransactionalId(sb("open")),
            ]);
            let r = c.send(0, req).await;
            let codes: Vec<i16> = r.transaction_states.iter().map(|t| t.error_code).collect();
            assert_eq!(codes, [code::TRANSACTIONAL_ID_NOT_FOUND, 0]);
            // The expired id starts afresh: a new producer id at epoch 0.
            let again = c.send(4, init("idle", 30_000)).await;
            assert_eq!(again.producer_epoch, 0);
            assert_ne!(again.producer_id, idle.producer_id);
        },
    );
}

#[test]
fn transactions_v2_add_by_produce_and_bump_epochs() {
    use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTransaction;
    use kafka_protocol::messages::ApiVersionsRequest;
    run(2, &[], |b| async move {
        let c = &b.client;
        create_topic(c, "v2", 2).await;
        // ApiVersions finalizes transaction.version 2, which tells clients to use v2.
        let req = ApiVersionsRequest::default()
            .with_client_software_name(sb("test"))
            .with_client_software_version(sb("1"));
        let r = c.send(4, req).await;
        let f = &r.finalized_features[0];
        assert_eq!(
            (f.name.as_str(), f.min_version_level, f.max_version_level),
            ("transaction.version", 2, 2)
        );
        assert!(r.finalized_features_epoch > 0);
        assert_eq!(r.supported_features[0].max_version, 2);
        // And group.version 1: KIP-848 consumer groups are served.
        let g = &r.finalized_features[1];
        assert_eq!(
            (g.name.as_str(), g.min_version_level, g.max_version_level),
            ("group.version", 1, 1)
        );

        let r = c.send(4, init("v2", 60_000)).await;
        let (pid, e0) = (r.producer_id.0, r.producer_epoch);
        // Before v12 a write must have been added (KIP-890 part 1).
        let stray = txn_produce_at(c, 11, "v2", "v2", 0, txn_batch(1, pid, e0, 0)).await;
        assert_eq!(stray.0, code::TRANSACTION_ABORTABLE);
        let stray = txn_produce_at(c, 9, "v2", "v2", 0, txn_batch(1, pid, e0, 0)).await;
        assert_eq!(stray.0, code::INVALID_TXN_STATE);
        assert_eq!(fetch(c, "v2", 0, false).await.0, 0, "nothing written");
        // v12 adds the partition itself.
        assert_eq!(
            txn_produce_at(c, 12, "v2", "v2", 0, txn_batch(2, pid, e0, 0)).await,
            (0, 0)
        );
        // Brokers' verify-only AddPartitionsToTxn (v4): partition 0 is in, 1 is not.
        let verify = AddPartitionsToTxnRequest::default().with_transactions(vec![
            AddPartitionsToTxnTransaction::default()
                .with_transactional_id(TransactionalId(sb("v2")))
                .with_producer_id(ProducerId(pid))
                .with_producer_epoch(e0)
                .with_verify_only(true)
                .with_topics(vec![AddPartitionsToTxnTopic::default()
                    .with_name(topic_name("v2"))
                    .with_partitions(vec![0, 1])]),
        ]);
        let r = c.send(4, verify).await;
        let codes: Vec<i16> = r.results_by_transaction[0].topic_results[0]
            .results_by_partition
            .iter()
            .map(|p| p.partition_error_code)
            .collect();
        assert_eq!(codes, [0, code::TRANSACTION_ABORTABLE]);
        // TxnOffsetCommit v5 adds its group; v4 must have sent AddOffsetsToTxn.
        let commit = |group: &str| {
            TxnOffsetCommitRequest::default()
                .with_transactional_id(TransactionalId(sb("v2")))
                .with_group_id(GroupId(sb(group)))
                .with_producer_id(ProducerId(pid))
                .with_producer_epoch(e0)
                .with_generation_id(-1)
                .with_topics(vec![TxnOffsetCommitRequestTopic::default()
                    .with_name(topic_name("v2"))
                    .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(7)
                        .with_committed_leader_epoch(-1)])])
        };
        let r = c.send(4, commit("g-old")).await;
        assert_eq!(
            r.topics[0].partitions[0].error_code,
            code::TRANSACTION_ABORTABLE
        );
        let r = c.send(5, commit("g-new")).await;
        assert_eq!(r.topics[0].partitions[0].error_code, 0);
        assert_eq!(fetch(c, "v2", 0, true).await.1, 0, "open: the LSO holds");

        // EndTxn v5 moves the epoch on and answers it; a retry answers the same.
        let r = c.send(5, end("v2", pid, e0, true)).await;
        assert_eq!(
            (r.error_code, r.producer_id.0, r.producer_epoch),
            (0, pid, e0 + 1)
        );
        let r = c.send(5, end("v2", pid, e0, true)).await;
        assert_eq!(
            (r.error_code, r.producer_id.0, r.producer_epoch),
            (0, pid, e0 + 1)
        );
        let r = c.send(5, end("v2", pid, e0, false)).await;
        assert_eq!(
            r.error_code,
            code::INVALID_TXN_STATE,
            "retried the other way"
        );
        let (hw, lso, _, _) = fetch(c, "v2", 0, true).await;
        assert_eq!((hw, lso), (3, 3));
        let committed = OffsetFetchRequest::default()
            .with_group_id(GroupId(sb("g-new")))
            .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                .with_name(topic_name("v2"))
                .with_partition_indexes(vec![0])]));
        let r = c.send(7, committed).await;
        assert_eq!(r.topics[0].partitions[0].committed_offset, 7);
        // The marker carried the new epoch: a late write of the old transaction is fenced.
        let late = txn_produce_at(c, 12, "v2", "v2", 0, txn_batch(1, pid, e0, 2)).await;
        assert_eq!(late.0, code::INVALID_PRODUCER_EPOCH);

        // The next transaction runs at the new epoch from sequence 0, and aborts.
        let e1 = e0 + 1;
        assert_eq!(
            txn_produce_at(c, 12, "v2", "v2", 0, txn_batch(2, pid, e1, 0)).await,
            (0, 3)
        );
        let r = c.send(5, end("v2", pid, e1, false)).await;
        assert_eq!((r.error_code, r.producer_epoch), (0, e1 + 1));
        let (_, lso, aborted, _) = fetch(c, "v2", 0, true).await;
        assert_eq!((lso, aborted), (6, vec![(pid, 3)]));
        // An abort with nothing open moves the epoch on too; a commit is refused.
        let r = c.send(5, end("v2", pid, e1 + 1, false)).await;
        assert_eq!((r.error_code, r.producer_epoch), (0, e1 + 2));
        let r = c.send(5, end("v2", pid, e1 + 2, true)).await;
        assert_eq!(r.error_code, code::INVALID_TXN_STATE);
        let r = c.send(5, end("v2", pid, e0, true)).await;
        assert_eq!(r.error_code, code::PRODUCER_FENCED);
        assert_eq!((r.producer_id.0, r.producer_epoch), (-1, -1));
    });
}
