//! A partition's transaction state kept in step with a store that learns its offsets
//! (SeaweedMQ): such a store does not hand every batch to the partition at start-up, and
//! others' records (another node's tenure, a forward that landed late) reach it without
//! passing through here. The state starts from the checkpoint the store keeps
//! ([`crate::storage::PartitionStore::load_transactions`]; none: no transaction ever wrote
//! to the partition) and takes in the records after it, read back from the store, in offset
//! order. Until it has looked at a record, the last stable offset stays before it. Steps
//! are pure here; the shard does the waiting (`shard::txn_sync`). Calls `record/`.

use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::txn::{Transactions, TxnCheckpoint};
use super::Partition;
use crate::record::batch::BatchHeader;
use crate::record::control::control_type;
use crate::storage::PartitionStore;

/// How often a partition's checkpoint moves up after markers at most: a transaction every
/// 100 ms (Kafka Streams' exactly-once default) would otherwise cost a filer write per
/// partition each; what is left over is read back by the next leader.
pub const CHECKPOINT_EVERY: Duration = Duration::from_secs(1);

/// What bringing the transaction state up to the high watermark needs next.
pub enum TxnStep {
    /// Nothing: every record below the high watermark was looked at.
    Current,
    /// The store's offsets first.
    Sync,
    /// The store's checkpoint.
    Load(Rc<dyn PartitionStore>),
    /// The records `[from, end)` from the store.
    Read {
        /// The partition's store.
        store: Rc<dyn PartitionStore>,
        /// First offset not looked at.
        from: i64,
        /// The high watermark.
        end: i64,
    },
}

impl Partition {
    /// Whether the transaction state has looked at everything below the high watermark
    /// (always, for stores that hand the partition every batch).
    pub fn txn_current(&self) -> bool {
        !self.queue.learns || self.txn_seen.is_some_and(|seen| seen >= self.hw)
    }

    /// What the transaction state needs next to reach the high watermark.
    pub fn txn_step(&self) -> TxnStep {
        if self.txn_current() {
            return TxnStep::Current;
        }
        match self.txn_seen {
            None if self.needs_sync(None) => TxnStep::Sync,
            None => TxnStep::Load(self.store.clone()),
            Some(seen) => TxnStep::Read {
                store: self.store.clone(),
                from: seen,
                end: self.hw,
            },
        }
    }

    /// Starts from the store's checkpoint (None: no transaction ever wrote here, so there is
    /// nothing to look at below the high watermark). Ignored once a state is known.
    pub fn txn_loaded(&mut self, checkpoint: Option<TxnCheckpoint>) {
        if self.txn_seen.is_some() {
            return;
        }
        match checkpoint {
            None => {
                self.txn_seen = Some(self.hw);
                self.txn_tracked = false;
            }
            Some(cp) => {
                let mut txns = Transactions::from_checkpoint(&cp);
                txns.forget_below(self.log_start);
                self.txns = txns;
                self.txn_seen = Some(cp.through.min(self.hw));
                self.txn_tracked = true;
            }
        }
    }

    /// Takes in batches read from `from`: whole batches, the first may begin before it.
    /// Ignored unless `from` is where the state stands (another read got there first).
    /// Returns whether the state moved on.
    pub fn txn_replayed(&mut self, from: i64, batches: &[Bytes]) -> bool {
        if self.txn_seen != Some(from) {
            return false;
        }
        let mut seen = from;
        for b in batches {
            let Ok(h) = BatchHeader::parse(b) else { break };
            let last = h.last_offset();
            if last < seen {
                continue;
            }
            if h.base_offset >= self.hw {
                break;
            }
            // Batches read back from records can span what was taken in already: only
            // the rest counts (a marker is always a batch of its own).
            let mut rest = h;
            if rest.base_offset < seen {
                rest.last_offset_delta = (last - seen) as i32;
                rest.base_offset = seen;
            }
            self.txns.observe(&rest, control_type(&h, b));
            seen = last + 1;
        }
        if seen == from && from < self.log_start {
            // Nothing left to read below the log start.
            seen = self.log_start;
        }
        // Records the store had past the high watermark were looked at too: batches that
        // become visible from here on are past them.
        self.txn_seen = Some(seen);
        seen > from
    }

    /// Whether the store keeps this partition's transaction state already: false for a
    /// partition no transaction wrote to yet; true for stores that rebuild it from their log
    /// (they keep nothing).
    pub fn txn_tracked(&self) -> bool {
        self.txn_tracked || !self.queue.learns
    }

    /// The store keeps the transaction state now.
    pub fn set_txn_tracked(&mut self) {
        self.txn_tracked = true;
    }

    /// The state as a checkpoint, when it is known.
    pub fn txn_checkpoint(&self) -> Option<TxnCheckpoint> {
        self.txn_seen.map(|seen| self.txns.checkpoint(seen))
    }

    /// After a marker: the checkpoint to hand a store that keeps one, unless one was handed
    /// over less than [`CHECKPOINT_EVERY`] before `now`.
    pub fn txn_checkpoint_due(&mut self, now: Instant) -> Option<TxnCheckpoint> {
        if !self.queue.learns || !self.txn_tracked {
            return None;
        }
        if self
            .txn_saved_at
            .is_some_and(|at| now.saturating_duration_since(at) < CHECKPOINT_EVERY)
        {
            return None;
        }
        let checkpoint = self.txn_checkpoint()?;
        self.txn_saved_at = Some(now);
        Some(checkpoint)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::partition::settle::tests::{partition, reserve};
    use crate::record::build::{BatchBuilder, RecordParts};
    use crate::record::ValidatedBatches;
    use crate::storage::Range;

    /// `n` records at `base` as a store that keeps records hands them back: of producer
    /// `pid`'s transaction, or of no producer (pid -1).
    fn read_back(base: i64, n: i32, pid: i64) -> Bytes {
        crate::record::build::records_at(base, n, (pid >= 0).then_some(pid))
    }

    /// An abort (0) or commit (1) marker of `pid` at `offset`, as read back.
    fn marker(offset: i64, pid: i64, kind: u8) -> Bytes {
        let mut b = BatchBuilder::default();
        b.push(RecordParts {
            timestamp: 1,
            key: Some(&[0, 0, 0, kind]),
            value: Some(&[0, 0, 0, 0, 0, 0]),
            header_count: 0,
            headers: &[],
        });
        b.finish_for(offset, Some((pid, 0, 0x30)))
    }

    fn txn_batch(pid: i64) -> ValidatedBatches {
        let mut b = crate::record::batch::tests::make_producer_batch(2, 0, pid, 0, 0);
        b[22] |= 0x10;
        crate::record::build::refresh_crcs(&mut b);
        ValidatedBatches::validate(b, 1 << 20).unwrap()
    }

    #[test]
    fn the_stable_offset_waits_for_records_not_looked_at() {
        let mut p = partition(true);
        assert!(matches!(p.txn_step(), TxnStep::Sync));
        p.sync_offsets(Range {
            earliest: 0,
            next: 10,
        });
        assert!(matches!(p.txn_step(), TxnStep::Load(_)));
        assert!(!p.txn_current());
        // Unknown: read_committed readers read nothing yet.
        assert_eq!(p.last_stable_offset(), 0);
        p.txn_loaded(None);
        assert!(matches!(p.txn_step(), TxnStep::Current));
        assert!(p.txn_current());
        assert_eq!(p.last_stable_offset(), 10);
        assert!(!p.txn_tracked());
        // Producer 7's batch, stored as predicted, is taken in as it becomes visible.
        let (t, _) = reserve(&mut p, txn_batch(7));
        p.settle(t, vec![Ok((10, 11))]);
        assert_eq!((p.high_watermark(), p.last_stable_offset()), (12, 10));
        // Producer 8's lands past others' records: not looked at until read back.
        let (t, _) = reserve(&mut p, txn_batch(8));
        let (t2, _) = reserve(&mut p, txn_batch(9));
        p.settle(t, vec![Ok((15, 16))]);
        p.settle(t2, vec![Ok((17, 18))]);
        assert_eq!(p.high_watermark(), 19);
        let TxnStep::Read { from, end, .. } = p.txn_step() else {
            panic!("records to read back")
        };
        assert_eq!((from, end), (12, 19));
        // A read that starts elsewhere is not taken in.
        assert!(!p.txn_replayed(11, &[read_back(11, 4, -1)]));
        // The first batch read back begins before what is left to look at.
        let back = [
            read_back(8, 7, -1),
            read_back(15, 2, 8),
            marker(17, 7, 0),
            read_back(18, 1, 9),
        ];
        assert!(p.txn_replayed(12, &back[..2]));
        assert_eq!(p.last_stable_offset(), 10);
        assert!(p.txn_replayed(17, &back[2..]));
        assert!(matches!(p.txn_step(), TxnStep::Current));
        // Producer 7 aborted at 17: producer 8's transaction (from 15) holds the LSO.
        assert_eq!(p.last_stable_offset(), 15);
        let aborted = p.transactions().aborted_between(0, 19);
        assert_eq!(
            aborted
                .iter()
                .map(|a| (a.producer_id, a.first_offset, a.last_offset))
                .collect::<Vec<_>>(),
            [(7, 10, 17)]
        );
        // A new leader starts from the checkpoint and reads nothing again.
        let cp = p.txn_checkpoint().unwrap();
        assert_eq!(cp.through, 19);
        let mut next = partition(true);
        next.sync_offsets(Range {
            earliest: 0,
            next: 19,
        });
        next.txn_loaded(Some(cp));
        assert!(next.txn_tracked());
        assert!(matches!(next.txn_step(), TxnStep::Current));
        assert_eq!(next.last_stable_offset(), 15);
        assert_eq!(next.transactions().aborted_between(0, 19), aborted);
        // Checkpoints after markers: at most one per CHECKPOINT_EVERY.
        let now = Instant::now();
        assert!(next.txn_checkpoint_due(now).is_some());
        assert!(next
            .txn_checkpoint_due(now + CHECKPOINT_EVERY / 2)
            .is_none());
        assert!(next.txn_checkpoint_due(now + CHECKPOINT_EVERY).is_some());
    }

    #[test]
    fn stores_with_their_own_log_need_nothing() {
        let mut p = partition(false);
        assert!(matches!(p.txn_step(), TxnStep::Current));
        assert!(p.txn_current());
        assert!(p.txn_tracked());
        let (t, _) = reserve(&mut p, txn_batch(7));
        p.settle(t, vec![Ok((0, 1))]);
        assert_eq!(p.last_stable_offset(), 0);
        assert!(p.txn_checkpoint_due(Instant::now()).is_none());
    }
}
