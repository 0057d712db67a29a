//! The reservation queue with stores of both kinds: one that keeps no offsets of its own
//! (the local log's shape: offsets as predicted, or failure) and one that assigns them (the
//! SeaweedMQ shape: others may publish in between).

use std::rc::Rc;
use std::time::Instant;

use bytes::Bytes;
use futures::future::{ready, LocalBoxFuture};
use uuid::Uuid;

use super::*;
use crate::record::batch::tests::{make_batch, make_producer_batch};
use crate::storage::{Durability, PartitionStore};

/// A store whose answers the tests give by hand through `settle`.
struct Manual {
    learns: bool,
}

impl PartitionStore for Manual {
    fn append(
        &self,
        _: &[Batch],
        _: Durability,
        _: Instant,
    ) -> LocalBoxFuture<'_, Vec<BatchOffsets>> {
        Box::pin(ready(Vec::new()))
    }
    fn persist(&self, _: i64) -> LocalBoxFuture<'_, Result<(), KelpError>> {
        Box::pin(ready(Ok(())))
    }
    fn read(&self, _: i64, _: usize, _: i64) -> LocalBoxFuture<'_, Result<Vec<Bytes>, KelpError>> {
        Box::pin(ready(Ok(Vec::new())))
    }
    fn find_timestamp(
        &self,
        _: i64,
        _: i64,
        _: i64,
    ) -> LocalBoxFuture<'_, Result<Option<(i64, i64)>, KelpError>> {
        Box::pin(ready(Ok(None)))
    }
    fn truncate_prefix(&self, _: i64) -> LocalBoxFuture<'_, Result<(), KelpError>> {
        Box::pin(ready(Ok(())))
    }
    fn keeps_evicted(&self) -> bool {
        true
    }
    fn learns_offsets(&self) -> bool {
        self.learns
    }
}

pub(crate) fn partition(learns: bool) -> Partition {
    Partition::new(Uuid::nil(), Rc::new(Manual { learns }))
}

fn validated(n: i32) -> ValidatedBatches {
    ValidatedBatches::validate(make_batch(n, 100), 1 << 20).unwrap()
}

pub(crate) fn reserve(p: &mut Partition, b: ValidatedBatches) -> (u64, Vec<Batch>) {
    match p.reserve(b, true).unwrap() {
        Reserved::Append { ticket, batches } => (ticket, batches),
        _ => panic!("not a duplicate"),
    }
}

fn stored_as_predicted(batches: &[Batch]) -> Vec<BatchOffsets> {
    batches
        .iter()
        .map(|(h, _)| Ok((h.base_offset, h.last_offset())))
        .collect()
}

#[test]
fn predicted_offsets_are_cached_in_order() {
    let mut p = partition(true);
    assert!(p.needs_sync(None));
    p.sync_offsets(Range {
        earliest: 0,
        next: 10,
    });
    assert!(!p.needs_sync(None));
    let (a, _) = reserve(&mut p, validated(3));
    let (b, _) = reserve(&mut p, validated(2));
    // The second answer arrives first: nothing becomes visible before the first.
    assert_eq!(p.settle(b, vec![Ok((13, 14))]).added, 0);
    assert_eq!(p.high_watermark(), 10);
    assert!(!p.settled_through(b));
    assert!(p.settle(a, vec![Ok((10, 12))]).added > 0);
    assert!(p.settled_through(b));
    assert_eq!(p.high_watermark(), 15);
    assert_eq!(p.read(10, 1 << 20, false).unwrap().batches.len(), 2);
    assert!(p.cold(3));
    assert!(!p.cold(12));
}

#[test]
fn foreign_offsets_skip_the_cache() {
    let mut p = partition(true);
    p.sync_offsets(Range {
        earliest: 0,
        next: 0,
    });
    let (a, _) = reserve(&mut p, validated(2));
    p.settle(a, vec![Ok((0, 1))]);
    let (b, _) = reserve(&mut p, validated(2));
    // Someone else published 5 records in between.
    let r = p.settle(b, vec![Ok((7, 8))]);
    assert_eq!(r.added, 0);
    assert!(r.freed > 0, "the cache is dropped so it stays contiguous");
    assert_eq!(p.high_watermark(), 9);
    assert!(p.cold(0) && p.cold(8));
    // The next prediction starts after the store's offsets and is cached again.
    let (c, batches) = reserve(&mut p, validated(1));
    assert_eq!(batches[0].0.base_offset, 9);
    assert!(p.settle(c, vec![Ok((9, 9))]).added > 0);
    assert!(!p.cold(9));
}

#[test]
fn failed_append_asks_a_learning_store_for_offsets_again() {
    let mut p = partition(true);
    p.sync_offsets(Range {
        earliest: 0,
        next: 4,
    });
    let (a, _) = reserve(&mut p, validated(2));
    p.settle(a, vec![Err(KelpError::RequestTimedOut)]);
    assert_eq!(p.high_watermark(), 4);
    assert!(p.needs_sync(None));
    // The timed-out records did land: the next sync moves past them.
    p.sync_offsets(Range {
        earliest: 0,
        next: 6,
    });
    assert_eq!(p.high_watermark(), 6);
    let (_, batches) = reserve(&mut p, validated(1));
    assert_eq!(batches[0].0.base_offset, 6);
}

/// The local log's failure: a failed write fails what was queued after it too; offsets and
/// producer sequences go back to what was stored, so retries get the same ones.
#[test]
fn failed_write_rolls_back_offsets_and_producer_sequences() {
    let idem =
        |seq| ValidatedBatches::validate(make_producer_batch(2, 0, 7, 0, seq), 1 << 20).unwrap();
    let mut p = partition(false);
    assert!(
        !p.needs_sync(None),
        "a store without offsets of its own is never asked"
    );
    let (a, ab) = reserve(&mut p, idem(0));
    let (b, bb) = reserve(&mut p, idem(2));
    let (c, cb) = reserve(&mut p, idem(4));
    assert_eq!(
        (
            ab[0].0.base_offset,
            bb[0].0.base_offset,
            cb[0].0.base_offset
        ),
        (0, 2, 4)
    );
    assert!(p.settle(a, stored_as_predicted(&ab)).added > 0);
    // b's write failed; c was queued behind it and fails with it, answered first.
    assert_eq!(
        p.settle(c, vec![Err(KelpError::Storage("disk".into()))])
            .added,
        0
    );
    let r = p.settle(b, vec![Err(KelpError::Storage("disk".into()))]);
    assert_eq!(r, Settled::default());
    assert_eq!(p.high_watermark(), 2);
    assert!(!p.needs_sync(None));
    // The producer's retry of b is not a duplicate and gets b's offsets again.
    let (d, db) = reserve(&mut p, idem(2));
    assert_eq!(db[0].0.base_offset, 2);
    p.settle(d, stored_as_predicted(&db));
    assert_eq!(p.high_watermark(), 4);
    // A retry of a (stored) is still a duplicate.
    assert!(matches!(
        p.reserve(idem(0), true).unwrap(),
        Reserved::Duplicate(0)
    ));
}

/// A retry of a batch still queued waits for it: the original may yet fail.
#[test]
fn duplicate_of_a_queued_batch_waits_behind_it() {
    let idem =
        |seq| ValidatedBatches::validate(make_producer_batch(1, 0, 7, 0, seq), 1 << 20).unwrap();
    let mut p = partition(false);
    let (a, ab) = reserve(&mut p, idem(0));
    let Reserved::Behind { batches, through } = p.reserve(idem(0), true).unwrap() else {
        panic!("a duplicate of a queued batch must wait");
    };
    assert_eq!(through, a);
    assert!(!p.settled_through(through));
    let listener = p.listen_settled();
    p.settle(a, vec![Err(KelpError::Storage("disk".into()))]);
    assert!(p.settled_through(through));
    drop(listener);
    // The original failed: the retry is appended at its offset.
    let (b, bb) = reserve(&mut p, batches);
    assert_eq!(bb[0].0.base_offset, 0);
    assert!(p.settle(b, stored_as_predicted(&bb)).added > 0);
    assert!(matches!(
        p.reserve(idem(0), true).unwrap(),
        Reserved::Duplicate(0)
    ));
    let _ = ab;
}
