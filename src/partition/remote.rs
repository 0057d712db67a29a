//! A partition's state when SeaweedMQ stores it (`--storage seaweedmq`).
//!
//! SeaweedMQ assigns the offsets. The shard predicts them (its next offset), rewrites the
//! base offsets in place with the prediction and forwards the batches; when SeaweedMQ's
//! acknowledged offsets equal the prediction (Kelp is the partition's only publisher), the
//! very same bytes enter the cache. When they differ (another publisher, a lost or timed-out
//! forward), the batch is not cached, the cache is dropped (it must stay contiguous up to the
//! high watermark) and reads below it go to SeaweedMQ, which re-encodes the true offsets.
//! Forwards resolve out of order across tasks, so results are applied in reservation order.
//! Called by `shard/`; owns no I/O.

use std::collections::VecDeque;
use std::time::Instant;

use bytes::Bytes;

use super::producer_state::{ProducerStates, SeqCheck};
use super::Partition;
use crate::error::KelpError;
use crate::forwarder::BatchOffsets;
use crate::record::batch::{BatchHeader, ValidatedBatches};

/// The SeaweedMQ side of a partition.
#[derive(Default)]
pub struct Remote {
    /// Whether offsets are known from SeaweedMQ (GetPartitionRangeInfo).
    synced: bool,
    /// When the offsets were last asked of SeaweedMQ.
    refreshed: Option<Instant>,
    pending: VecDeque<Pending>,
    next_ticket: u64,
    /// Producer state of acknowledged batches only.
    committed_producers: ProducerStates,
    /// A prediction failed: realign the next offset once nothing is pending.
    realign: bool,
}

struct Pending {
    ticket: u64,
    batches: Vec<(BatchHeader, Bytes)>,
    outcome: Option<Vec<BatchOffsets>>,
}

/// What a reservation asks of the shard.
pub enum Reserved {
    /// Forward these batches and resolve `ticket` with the outcome.
    Forward { ticket: u64, batches: Vec<Bytes> },
    /// A retried idempotent batch: answer with its original base offset.
    Duplicate(i64),
}

/// What resolving forwards changed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Resolved {
    pub added: usize,
    pub freed: usize,
}

impl Partition {
    /// Empty partition state stored in SeaweedMQ; offsets are learned before first use.
    pub fn new_remote(topic_id: uuid::Uuid) -> Self {
        let mut p = Partition::new(topic_id);
        p.remote = Some(Remote::default());
        p
    }

    /// Whether SeaweedMQ must be asked for the offsets before this partition serves: not yet
    /// known, or (when `stale_after` is given and nothing is pending) not asked for that long.
    pub fn needs_sync(&self, stale_after: Option<std::time::Duration>) -> bool {
        let Some(r) = &self.remote else {
            return false;
        };
        if !r.synced {
            return r.pending.is_empty();
        }
        match (stale_after, r.refreshed) {
            (Some(age), Some(at)) => r.pending.is_empty() && at.elapsed() >= age,
            _ => false,
        }
    }

    /// Takes SeaweedMQ's (earliest, high water mark). Data appended by others moves the high
    /// watermark past the cache: the cache is dropped. Returns the cache bytes freed.
    pub fn sync_remote(&mut self, earliest: i64, hwm: i64) -> usize {
        let Some(r) = &mut self.remote else {
            return 0;
        };
        r.refreshed = Some(Instant::now());
        if !r.pending.is_empty() {
            return 0;
        }
        r.synced = true;
        r.realign = false;
        self.log_start = self.log_start.max(earliest);
        if hwm == self.hw && self.next_offset == hwm {
            return 0;
        }
        let freed = self.cache.drop_below(i64::MAX);
        self.hw = hwm.max(self.log_start);
        self.next_offset = self.hw;
        self.appended.notify(usize::MAX);
        freed
    }

    /// Checks producer sequences and predicts offsets (rewritten in place) for a forward.
    pub fn reserve_remote(&mut self, batches: ValidatedBatches) -> Result<Reserved, KelpError> {
        if let SeqCheck::Duplicate(original) = self.producers.check_all(batches.headers())? {
            return Ok(Reserved::Duplicate(original));
        }
        let assigned = batches.assign_offsets(self.next_offset);
        for (h, _) in &assigned {
            self.producers.record(h);
            self.next_offset = h.last_offset() + 1;
        }
        self.last_append = Some(Instant::now());
        let r = self
            .remote
            .as_mut()
            .ok_or_else(|| KelpError::Storage("partition is not stored in SeaweedMQ".into()))?;
        let ticket = r.next_ticket;
        r.next_ticket += 1;
        let bytes = assigned.iter().map(|(_, b)| b.clone()).collect();
        r.pending.push_back(Pending {
            ticket,
            batches: assigned,
            outcome: None,
        });
        Ok(Reserved::Forward {
            ticket,
            batches: bytes,
        })
    }

    /// Records SeaweedMQ's answer to a forward and applies every answered forward at the
    /// front, in reservation order.
    pub fn resolve_remote(&mut self, ticket: u64, outcome: Vec<BatchOffsets>) -> Resolved {
        let mut done = Resolved::default();
        let Some(r) = &mut self.remote else {
            return done;
        };
        if let Some(p) = r.pending.iter_mut().find(|p| p.ticket == ticket) {
            p.outcome = Some(outcome);
        }
        let mut ready = Vec::new();
        while r.pending.front().is_some_and(|p| p.outcome.is_some()) {
            if let Some(p) = r.pending.pop_front() {
                ready.push(p);
            }
        }
        let mut failed = false;
        let mut moved = false;
        for p in ready {
            let outcome = p.outcome.unwrap_or_default();
            for (i, (h, data)) in p.batches.into_iter().enumerate() {
                match outcome
                    .get(i)
                    .cloned()
                    .unwrap_or(Err(KelpError::RequestTimedOut))
                {
                    Ok((first, last)) => {
                        if let Some(r) = &mut self.remote {
                            r.committed_producers.record(&h);
                        }
                        moved = true;
                        if first == h.base_offset && last == h.last_offset() && first == self.hw {
                            done.added += data.len();
                            self.make_visible(&h, data);
                        } else {
                            tracing::debug!(
                                predicted = h.base_offset,
                                first,
                                last,
                                "SeaweedMQ assigned other offsets than predicted: batch not cached"
                            );
                            done.freed += self.cache.drop_below(i64::MAX);
                            self.hw = self.hw.max(last + 1);
                            if let Some(r) = &mut self.remote {
                                r.realign = true;
                            }
                        }
                    }
                    Err(_) => failed = true,
                }
            }
        }
        if failed {
            // Not stored, or unknown (a timed-out forward may still land): roll producer
            // state back to what is acknowledged plus what is still pending, and ask
            // SeaweedMQ for the offsets again once nothing is pending.
            if let Some(r) = &mut self.remote {
                let mut producers = r.committed_producers.clone();
                for p in &r.pending {
                    for (h, _) in &p.batches {
                        producers.record(h);
                    }
                }
                self.producers = producers;
                r.realign = true;
                r.synced = false;
            }
        }
        if let Some(r) = &mut self.remote {
            if r.pending.is_empty() && r.realign {
                self.next_offset = self.hw;
                r.realign = false;
            }
        }
        if moved {
            self.appended.notify(usize::MAX);
        }
        done
    }

    /// Whether reading `offset` needs SeaweedMQ: readable, but older than the cache.
    pub fn remote_cold(&self, offset: i64) -> bool {
        if self.remote.is_none() || offset < self.log_start || offset >= self.hw {
            return false;
        }
        self.cache.first_base().is_none_or(|first| offset < first)
    }

    /// First offset the cache holds, if any.
    pub fn cache_start(&self) -> Option<i64> {
        self.cache.first_base()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::batch::tests::make_batch;

    fn validated(n: i32) -> ValidatedBatches {
        ValidatedBatches::validate(make_batch(n, 100), 1 << 20).unwrap()
    }

    fn forward(p: &mut Partition, n: i32) -> u64 {
        match p.reserve_remote(validated(n)).unwrap() {
            Reserved::Forward { ticket, .. } => ticket,
            Reserved::Duplicate(_) => panic!("not a duplicate"),
        }
    }

    #[test]
    fn predicted_offsets_are_cached_in_order() {
        let mut p = Partition::new_remote(uuid::Uuid::nil());
        assert!(p.needs_sync(None));
        p.sync_remote(0, 10);
        let a = forward(&mut p, 3);
        let b = forward(&mut p, 2);
        // The second answer arrives first: nothing becomes visible before the first.
        assert_eq!(p.resolve_remote(b, vec![Ok((13, 14))]).added, 0);
        assert_eq!(p.high_watermark(), 10);
        assert!(p.resolve_remote(a, vec![Ok((10, 12))]).added > 0);
        assert_eq!(p.high_watermark(), 15);
        assert_eq!(p.read(10, 1 << 20).unwrap().batches.len(), 2);
        assert!(p.remote_cold(3));
        assert!(!p.remote_cold(12));
    }

    #[test]
    fn foreign_offsets_skip_the_cache() {
        let mut p = Partition::new_remote(uuid::Uuid::nil());
        p.sync_remote(0, 0);
        let a = forward(&mut p, 2);
        p.resolve_remote(a, vec![Ok((0, 1))]);
        let b = forward(&mut p, 2);
        // Someone else published 5 records in between.
        let r = p.resolve_remote(b, vec![Ok((7, 8))]);
        assert_eq!(r.added, 0);
        assert!(r.freed > 0, "the cache is dropped so it stays contiguous");
        assert_eq!(p.high_watermark(), 9);
        assert!(p.remote_cold(0) && p.remote_cold(8));
        // The next prediction starts after SeaweedMQ's offsets and is cached again.
        let c = forward(&mut p, 1);
        assert!(p.resolve_remote(c, vec![Ok((9, 9))]).added > 0);
        assert!(!p.remote_cold(9));
    }

    #[test]
    fn failed_forward_asks_for_offsets_again() {
        let mut p = Partition::new_remote(uuid::Uuid::nil());
        p.sync_remote(0, 4);
        let a = forward(&mut p, 2);
        p.resolve_remote(a, vec![Err(KelpError::RequestTimedOut)]);
        assert_eq!(p.high_watermark(), 4);
        assert!(p.needs_sync(None));
        // The timed-out records did land: the next sync moves past them.
        p.sync_remote(0, 6);
        assert_eq!(p.high_watermark(), 6);
        assert!(matches!(
            p.reserve_remote(validated(1)).unwrap(),
            Reserved::Forward { .. }
        ));
    }
}
