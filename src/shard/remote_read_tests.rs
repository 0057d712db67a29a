//! Reads through a store on another server that does not answer: a Fetch's read below the
//! cache ends at `--remote-fetch-max-wait-ms` without records, and the offset sync before
//! any read ends at its wait with KAFKA_STORAGE_ERROR, whatever the store does. (A stuck
//! read held up every later request of the connection: a consumer's FindCoordinator sat
//! behind one for 47 s in the cluster e2e test.)

use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::future::{pending, ready, LocalBoxFuture};

use super::local_shard_tests::{read_at, with_local_shard, DataDir};
use crate::error::{code, KelpError};
use crate::partition::Partition;
use crate::storage::{BatchOffsets, Durability, PartitionStore, Range};

const TOPIC: &str = "remote";

/// A remote store that knows offsets [0, 10) and never answers a read; with `stuck_range`
/// it does not answer for its offsets either.
struct Silent {
    stuck_range: bool,
    reads: Rc<Cell<u32>>,
}

impl PartitionStore for Silent {
    fn append(
        &self,
        _: &[crate::storage::Batch],
        _: Durability,
        _: Instant,
    ) -> LocalBoxFuture<'_, Vec<BatchOffsets>> {
        Box::pin(ready(Vec::new()))
    }
    fn persist(&self, _: i64) -> LocalBoxFuture<'_, Result<(), KelpError>> {
        Box::pin(ready(Ok(())))
    }
    fn read(&self, _: i64, _: usize, _: i64) -> LocalBoxFuture<'_, Result<Vec<Bytes>, KelpError>> {
        self.reads.set(self.reads.get() + 1);
        Box::pin(pending())
    }
    fn find_timestamp(
        &self,
        _: i64,
        _: i64,
        _: i64,
    ) -> LocalBoxFuture<'_, Result<Option<(i64, i64)>, KelpError>> {
        Box::pin(pending())
    }
    fn truncate_prefix(&self, _: i64) -> LocalBoxFuture<'_, Result<(), KelpError>> {
        Box::pin(ready(Ok(())))
    }
    fn keeps_evicted(&self) -> bool {
        true
    }
    fn learns_offsets(&self) -> bool {
        true
    }
    fn reads_remote(&self) -> bool {
        true
    }
    fn range(&self, _: Instant) -> LocalBoxFuture<'_, Result<Range, KelpError>> {
        if self.stuck_range {
            // Ignores its deadline, as an engine's later calls may.
            return Box::pin(pending());
        }
        Box::pin(ready(Ok(Range {
            earliest: 0,
            next: 10,
        })))
    }
}

/// Runs `body` on a one-shard broker whose partition `TOPIC`-0 sits on a [`Silent`] store.
fn with_silent_partition<F, Fut>(name: &str, stuck_range: bool, body: F)
where
    F: FnOnce(Rc<super::Shard>, Rc<Cell<u32>>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()>,
{
    let dir = DataDir::new(&format!("remote-read-{name}"));
    with_local_shard(
        &dir.0,
        &["--remote-fetch-max-wait-ms", "300"],
        move |shard| async move {
            shard
                .create_topic(TOPIC, 1, 1, Default::default(), false)
                .await
                .expect("topic");
            let reads = Rc::new(Cell::new(0));
            let store = Rc::new(Silent {
                stuck_range,
                reads: reads.clone(),
            });
            // Partitions are made on first use: this one is made first, on the silent store.
            let id = shard.cluster.topic(TOPIC).expect("topic").id;
            shard
                .partitions
                .borrow_mut()
                .insert((TOPIC.into(), 0), Partition::new(id, store));
            body(shard, reads).await;
        },
    );
}

/// The read of offset 0; a test failure, not a hang, when it does not end within 5 s.
async fn answer(shard: &super::Shard) -> super::ops::ReadResult {
    crate::deadline::until(
        read_at(shard, TOPIC, 0),
        Instant::now() + Duration::from_secs(5),
    )
    .await
    .expect("the read answered within 5 s")
}

#[test]
fn a_read_the_remote_store_does_not_answer_ends_at_the_wait_without_records() {
    with_silent_partition("read", false, |shard, reads| async move {
        let started = Instant::now();
        let out = answer(&shard).await.expect("an answer, not an error");
        let took = started.elapsed();
        assert_eq!(reads.get(), 1, "the read went to the store");
        assert!(out.batches.is_empty());
        assert_eq!((out.high_watermark, out.log_start_offset), (10, 0));
        assert!(
            took >= Duration::from_millis(300) && took < Duration::from_secs(3),
            "answered after {took:?}"
        );
        assert_eq!(shard.stats.remote_reads_expired.load(Ordering::Relaxed), 1);
    });
}

#[test]
fn an_offset_sync_the_store_does_not_answer_ends_with_a_storage_error() {
    with_silent_partition("range", true, |shard, reads| async move {
        let started = Instant::now();
        let err = answer(&shard).await.expect_err("no offsets, no read");
        let took = started.elapsed();
        assert_eq!(err.code(), code::KAFKA_STORAGE_ERROR, "{err}");
        assert_eq!(reads.get(), 0);
        assert!(took < Duration::from_secs(3), "answered after {took:?}");
    });
}
