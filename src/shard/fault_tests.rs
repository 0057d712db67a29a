//! The local engine's write-failure rollback through the shard: a failed write, a full disk
//! or a failed fdatasync under a partition fails exactly the appends it touched, leaves
//! nothing unacknowledged readable, and gives retries the same offsets and producer
//! sequences — before and after a restart. Faults come from the local log's injection seam.

use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;

use super::local_shard_tests::{read_at, with_local_shard, DataDir};
use super::ops::ProduceItem;
use super::Shard;
use crate::error::code;
use crate::record::batch::tests::{make_batch, make_producer_batch};
use crate::record::batch::BatchHeader;
use crate::record::ValidatedBatches;
use crate::storage::local::faults::{self, SyncFault, WriteFault};

const TOPIC: &str = "t";
const PID: i64 = 77;

/// The test's data directory; its partition's injected faults are forgotten with it.
struct FaultDir(DataDir);

impl FaultDir {
    fn new(name: &str) -> Self {
        FaultDir(DataDir::new(&format!("faults-{name}")))
    }
    fn path(&self) -> &Path {
        &self.0 .0
    }
    fn partition(&self) -> PathBuf {
        crate::storage::local::partition_dir(self.path(), TOPIC, 0)
    }
}

impl Drop for FaultDir {
    fn drop(&mut self) {
        faults::forget(&self.partition());
    }
}

/// Runs `body` on a one-shard broker on the local engine over `data_dir` (created, or
/// recovered when it holds data), with the test topic.
fn with_shard<F, Fut>(data_dir: &Path, fsync: &str, body: F)
where
    F: FnOnce(Rc<Shard>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()>,
{
    with_local_shard(data_dir, &["--fsync", fsync], |shard| async move {
        if shard.cluster.topic(TOPIC).is_none() {
            shard
                .create_topic(TOPIC, 1, 1, Default::default(), false)
                .await
                .expect("topic");
        }
        body(shard).await;
    });
}

fn idempotent(seq: i32, records: i32) -> ValidatedBatches {
    ValidatedBatches::validate(make_producer_batch(records, 0, PID, 0, seq), 1 << 20)
        .expect("valid")
}

async fn produce(shard: &Shard, b: ValidatedBatches, acks: i16) -> Result<i64, i16> {
    shard
        .append(ProduceItem {
            topic: TOPIC.into(),
            partition: 0,
            batches: b,
            acks,
            timeout: Duration::from_secs(5),
            log_append_time: false,
        })
        .await
        .map(|a| a.base)
        .map_err(|e| e.code())
}

/// Every batch readable from offset 0, as (base offset, record count).
async fn contents(shard: &Shard) -> Vec<(i64, i32)> {
    let mut out = Vec::new();
    let mut offset = 0;
    loop {
        let read = read_at(shard, TOPIC, offset).await.expect("read");
        if read.batches.is_empty() {
            return out;
        }
        for b in read.batches {
            let h = BatchHeader::parse(&Bytes::clone(&b)).expect("batch");
            out.push((h.base_offset, h.last_offset_delta + 1));
            offset = h.last_offset() + 1;
        }
    }
}

#[test]
fn a_failed_write_is_not_acknowledged_and_its_retry_gets_the_same_offset() {
    let data = FaultDir::new("write");
    let part = data.partition();
    with_shard(data.path(), "always", move |shard| async move {
        assert_eq!(produce(&shard, idempotent(0, 3), -1).await, Ok(0));
        faults::fail_writes(&part, 0, 1, WriteFault::Torn(20));
        assert_eq!(
            produce(&shard, idempotent(3, 2), -1).await,
            Err(code::KAFKA_STORAGE_ERROR)
        );
        assert_eq!(faults::injected(&part), 1, "the fault hit the write");
        assert_eq!(contents(&shard).await, vec![(0, 3)]);
        // The producer's retry is a new append (not a duplicate), at the same offset.
        assert_eq!(produce(&shard, idempotent(3, 2), -1).await, Ok(3));
        // Its own retry is a duplicate, answered with the original offset.
        assert_eq!(produce(&shard, idempotent(3, 2), -1).await, Ok(3));
        assert_eq!(produce(&shard, idempotent(5, 1), 1).await, Ok(5));
        assert_eq!(contents(&shard).await, vec![(0, 3), (3, 2), (5, 1)]);
    });
    // After a restart: the same batches, and the producer's state rebuilt from them.
    with_shard(data.path(), "always", |shard| async move {
        assert_eq!(contents(&shard).await, vec![(0, 3), (3, 2), (5, 1)]);
        assert_eq!(produce(&shard, idempotent(5, 1), -1).await, Ok(5));
        assert_eq!(produce(&shard, idempotent(6, 1), -1).await, Ok(6));
    });
}

#[test]
fn appends_queued_behind_a_failed_write_fail_with_it_and_the_next_ones_line_up() {
    let data = FaultDir::new("queued");
    let part = data.partition();
    with_shard(data.path(), "always", move |shard| async move {
        assert_eq!(produce(&shard, make_plain(2), -1).await, Ok(0));
        faults::fail_writes(&part, 0, 1, WriteFault::Eio);
        // Pipelined appends: queued before the writer runs, written (and failed) together.
        let results =
            futures::future::join_all((0..4).map(|_| produce(&shard, make_plain(1), 1))).await;
        assert_eq!(results, vec![Err(code::KAFKA_STORAGE_ERROR); 4]);
        assert_eq!(contents(&shard).await, vec![(0, 2)]);
        let results =
            futures::future::join_all((0..3).map(|_| produce(&shard, make_plain(1), -1))).await;
        assert_eq!(results, vec![Ok(2), Ok(3), Ok(4)]);
        assert_eq!(contents(&shard).await, vec![(0, 2), (2, 1), (3, 1), (4, 1)]);
    });
    with_shard(data.path(), "always", |shard| async move {
        assert_eq!(contents(&shard).await, vec![(0, 2), (2, 1), (3, 1), (4, 1)]);
    });
}

#[test]
fn a_full_disk_fails_produces_until_space_comes_back() {
    let data = FaultDir::new("full");
    let part = data.partition();
    with_shard(data.path(), "always", move |shard| async move {
        assert_eq!(produce(&shard, make_plain(5), 1).await, Ok(0));
        faults::fill_disk(&part, 10);
        for _ in 0..3 {
            assert_eq!(
                produce(&shard, make_plain(5), 1).await,
                Err(code::KAFKA_STORAGE_ERROR)
            );
        }
        faults::clear(&part);
        assert_eq!(produce(&shard, make_plain(5), 1).await, Ok(5));
        assert_eq!(contents(&shard).await, vec![(0, 5), (5, 5)]);
    });
    with_shard(data.path(), "always", |shard| async move {
        assert_eq!(contents(&shard).await, vec![(0, 5), (5, 5)]);
    });
}

/// Under `--fsync always`: an fdatasync that fails once is retried after the log wrote the
/// unsynced bytes again, so the acks=all append that met it is acknowledged durable; one that
/// keeps failing fails the append, whose batch (written) stays readable, and the next
/// acks=all append that syncs makes it durable too. A power cut after that loses nothing.
#[test]
fn failed_fdatasyncs_fail_acks_all_only_while_they_last() {
    let data = FaultDir::new("sync");
    let part = data.partition();
    with_shard(data.path(), "always", move |shard| async move {
        assert_eq!(produce(&shard, make_plain(1), -1).await, Ok(0));
        faults::fail_syncs(&part, 0, 1, SyncFault::Eio);
        assert_eq!(produce(&shard, make_plain(2), -1).await, Ok(1));
        assert_eq!(faults::injected(&part), 1, "the fault hit the sync");
        faults::fail_syncs(&part, 0, 2, SyncFault::Eio);
        assert_eq!(
            produce(&shard, make_plain(3), -1).await,
            Err(code::KAFKA_STORAGE_ERROR)
        );
        assert_eq!(faults::injected(&part), 3);
        // Written before its syncs failed: readable, as Kafka's acks=1 data would be.
        assert_eq!(contents(&shard).await, vec![(0, 1), (1, 2), (3, 3)]);
        assert_eq!(produce(&shard, make_plain(1), -1).await, Ok(6));
        faults::power_cut(&part).expect("power cut");
    });
    with_shard(data.path(), "always", |shard| async move {
        assert_eq!(contents(&shard).await, vec![(0, 1), (1, 2), (3, 3), (6, 1)]);
    });
}

fn make_plain(records: i32) -> ValidatedBatches {
    ValidatedBatches::validate(make_batch(records, 0), 1 << 20).expect("valid")
}
