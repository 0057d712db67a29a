//! Transactions as one partition sees them (KIP-98): which producers have a transaction open
//! here (from their first transactional batch to their commit or abort marker), the last
//! stable offset that follows, and the aborted transactions a read_committed fetch is told
//! about so that it can drop their records. Fed every batch as it becomes visible, in offset
//! order. Calls only `record/`.
//!
//! Memory: one entry per open transaction, and one (24 bytes) per aborted transaction whose
//! records are still in the log; entries go with the log start ([`Transactions::forget_below`]).
//!
//! Engines that keep records rather than this broker's log (SeaweedMQ) cannot have the state
//! rebuilt from the whole log at start-up: they keep a [`TxnCheckpoint`] (the state through
//! an offset), from which the partition reads the rest of the log again.

use std::collections::{BTreeSet, HashMap, VecDeque};

use crate::record::batch::BatchHeader;
use crate::record::control::ControlType;
pub use crate::txn::checkpoint::TxnCheckpoint;

/// An aborted transaction's span on this partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxn {
    /// The producer that ran it.
    pub producer_id: i64,
    /// Its first offset here.
    pub first_offset: i64,
    /// The offset of its abort marker.
    pub last_offset: i64,
}

/// Open and aborted transactions of one partition.
#[derive(Debug, Default, Clone)]
pub struct Transactions {
    /// Producer id -> first offset of its open transaction.
    open: HashMap<i64, i64>,
    /// The same, ordered by first offset: the smallest bounds the last stable offset.
    by_offset: BTreeSet<(i64, i64)>,
    /// Aborted transactions in marker order (so by last offset).
    aborted: VecDeque<AbortedTxn>,
}

impl Transactions {
    /// Takes in a batch that just became visible (its header carries its offsets), with its
    /// marker type if it is a control batch.
    pub fn observe(&mut self, h: &BatchHeader, control: Option<ControlType>) {
        if h.producer_id < 0 || !h.is_transactional() {
            return;
        }
        if h.is_control() {
            let Some(kind) = control else { return };
            // A marker for a producer with nothing open here (it added the partition and
            // wrote nothing) leaves nothing to record, as in Kafka.
            if let Some(first) = self.open.remove(&h.producer_id) {
                self.by_offset.remove(&(first, h.producer_id));
                if kind == ControlType::Abort {
                    self.aborted.push_back(AbortedTxn {
                        producer_id: h.producer_id,
                        first_offset: first,
                        last_offset: h.base_offset,
                    });
                }
            }
        } else if let std::collections::hash_map::Entry::Vacant(v) = self.open.entry(h.producer_id)
        {
            v.insert(h.base_offset);
            self.by_offset.insert((h.base_offset, h.producer_id));
        }
    }

    /// The last stable offset: the first offset of the oldest open transaction, or the
    /// high watermark `hw` when none is open. read_committed readers stop there.
    pub fn last_stable_offset(&self, hw: i64) -> i64 {
        self.by_offset
            .first()
            .map_or(hw, |&(first, _)| first.min(hw))
    }

    /// Aborted transactions with records in `[from, to)`, for a read_committed fetch of
    /// that range, oldest first.
    pub fn aborted_between(&self, from: i64, to: i64) -> Vec<AbortedTxn> {
        // Markers come in offset order, so those ending before `from` are a prefix.
        let start = self.aborted.partition_point(|a| a.last_offset < from);
        self.aborted
            .iter()
            .skip(start)
            .filter(|a| a.first_offset < to)
            .copied()
            .collect()
    }

    /// Forgets aborted transactions wholly below `log_start` (their records are gone).
    pub fn forget_below(&mut self, log_start: i64) {
        while self
            .aborted
            .front()
            .is_some_and(|a| a.last_offset < log_start)
        {
            self.aborted.pop_front();
        }
    }

    /// The state as a checkpoint through `through`.
    pub fn checkpoint(&self, through: i64) -> TxnCheckpoint {
        TxnCheckpoint {
            through,
            open: self.open().collect(),
            aborted: self
                .aborted
                .iter()
                .map(|a| (a.producer_id, a.first_offset, a.last_offset))
                .collect(),
        }
    }

    /// The state a checkpoint holds.
    pub fn from_checkpoint(cp: &TxnCheckpoint) -> Self {
        let mut t = Transactions::default();
        for &(pid, first) in &cp.open {
            t.open.insert(pid, first);
            t.by_offset.insert((first, pid));
        }
        t.aborted = cp
            .aborted
            .iter()
            .map(|&(producer_id, first_offset, last_offset)| AbortedTxn {
                producer_id,
                first_offset,
                last_offset,
            })
            .collect();
        t
    }

    /// Open transactions: (producer id, first offset), oldest first.
    pub fn open(&self) -> impl Iterator<Item = (i64, i64)> + '_ {
        self.by_offset.iter().map(|&(first, pid)| (pid, first))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(base: i64, count: i32, pid: i64, attributes: i16) -> BatchHeader {
        BatchHeader {
            base_offset: base,
            batch_length: 0,
            magic: 2,
            crc: 0,
            attributes,
            last_offset_delta: count - 1,
            base_timestamp: 0,
            max_timestamp: 0,
            producer_id: pid,
            producer_epoch: 0,
            base_sequence: 0,
            record_count: count,
        }
    }

    const TXN: i16 = 0x10;
    const MARKER: i16 = 0x30;

    #[test]
    fn stable_offset_and_aborted_spans() {
        let mut t = Transactions::default();
        t.observe(&header(0, 2, -1, 0), None); // plain records
        assert_eq!(t.last_stable_offset(2), 2);
        t.observe(&header(2, 3, 7, TXN), None); // producer 7 opens at 2
        t.observe(&header(5, 1, 8, TXN), None); // producer 8 opens at 5
        t.observe(&header(6, 2, 7, TXN), None); // still open at 2
        assert_eq!(t.last_stable_offset(8), 2);
        assert_eq!(t.open().collect::<Vec<_>>(), [(7, 2), (8, 5)]);
        t.observe(&header(8, 1, 7, MARKER), Some(ControlType::Abort));
        assert_eq!(t.last_stable_offset(9), 5);
        t.observe(&header(9, 1, 8, MARKER), Some(ControlType::Commit));
        assert_eq!(t.last_stable_offset(10), 10);
        let aborted = AbortedTxn {
            producer_id: 7,
            first_offset: 2,
            last_offset: 8,
        };
        assert_eq!(t.aborted_between(0, 10), [aborted]);
        assert_eq!(t.aborted_between(8, 10), [aborted]);
        assert!(t.aborted_between(9, 10).is_empty());
        assert!(t.aborted_between(0, 2).is_empty());
        // A marker with nothing open, an unknown control record: no change.
        t.observe(&header(10, 1, 9, MARKER), Some(ControlType::Abort));
        t.observe(&header(11, 1, 7, MARKER), None);
        assert_eq!(t.aborted_between(0, 20).len(), 1);
        // The next transaction of producer 7 opens afresh.
        t.observe(&header(12, 1, 7, TXN), None);
        assert_eq!(t.last_stable_offset(13), 12);
        t.forget_below(8);
        assert_eq!(t.aborted_between(0, 20).len(), 1);
        let cp = t.checkpoint(13);
        let back = Transactions::from_checkpoint(&cp);
        assert_eq!(back.checkpoint(13), cp);
        assert_eq!(back.last_stable_offset(20), 12);
        assert_eq!(back.aborted_between(0, 20), t.aborted_between(0, 20));
        t.forget_below(9);
        assert!(t.aborted_between(0, 20).is_empty());
    }
}
