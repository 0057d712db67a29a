//! Idempotent-producer state of one partition: per producer id, its epoch and the last five
//! batches' sequence ranges, as Kafka keeps them (ProducerStateManager).
//!
//! Appends consult [`ProducerStates::check`] before offsets are assigned and feed the written
//! batch headers back through [`ProducerStates::record`]. Because `record` needs nothing but
//! headers, the state is rebuilt after a restart by replaying the log's batch headers in order
//! ([`ProducerStates::rebuild`]). Calls only `record/` for the header type.

use std::collections::{HashMap, VecDeque};

use crate::error::KelpError;
use crate::record::batch::{add_seq, BatchHeader};

/// Batches remembered per producer for duplicate detection (the Java client keeps at most
/// five in flight, so a retry is always one of these).
pub const DEDUP_WINDOW: usize = 5;

/// Sequence range and offsets of one appended batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct BatchMeta {
    first_seq: i32,
    last_seq: i32,
    first_offset: i64,
}

/// One producer's state on this partition.
#[derive(Debug, Clone, Default)]
struct ProducerEntry {
    epoch: i16,
    batches: VecDeque<BatchMeta>,
}

/// What to do with a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeqCheck {
    /// Not idempotent, or the next in sequence: append it.
    Append,
    /// A retry of a batch already written at this base offset: answer success, do not append.
    Duplicate(i64),
}

/// Producer states of one partition.
#[derive(Debug, Default, Clone)]
pub struct ProducerStates {
    producers: HashMap<i64, ProducerEntry>,
}

impl ProducerStates {
    /// Each producer's last batch here, by its base offset: what the log cleaner keeps whole,
    /// as recovery rebuilds the producer's sequence from it.
    pub fn last_batches(&self) -> HashMap<i64, i64> {
        self.producers
            .iter()
            .filter_map(|(&pid, e)| e.batches.back().map(|b| (pid, b.first_offset)))
            .collect()
    }

    /// State rebuilt from batch headers in log order (with their assigned base offsets).
    pub fn rebuild<'a>(headers: impl IntoIterator<Item = &'a BatchHeader>) -> Self {
        let mut s = ProducerStates::default();
        for h in headers {
            s.record(h);
        }
        s
    }

    /// Checks a batch against the producer's epoch and sequence, Kafka's way: an older epoch is
    /// fenced; a batch matching one of the last five is a duplicate; otherwise its first
    /// sequence must follow the last one (or be 0 on a new epoch). A producer with no state
    /// here (new, or its batches are gone) may start at any sequence.
    pub fn check(&self, h: &BatchHeader) -> Result<SeqCheck, KelpError> {
        if h.producer_id < 0 {
            return Ok(SeqCheck::Append);
        }
        let Some(e) = self.producers.get(&h.producer_id) else {
            return Ok(SeqCheck::Append);
        };
        if h.producer_epoch < e.epoch {
            return Err(KelpError::InvalidProducerEpoch {
                got: h.producer_epoch,
                current: e.epoch,
            });
        }
        if h.is_control() {
            // A transaction marker (written by the broker) carries no sequence.
            return Ok(SeqCheck::Append);
        }
        let last_seq = add_seq(h.base_sequence, h.last_offset_delta);
        if h.producer_epoch > e.epoch {
            return if h.base_sequence == 0 {
                Ok(SeqCheck::Append)
            } else {
                Err(KelpError::OutOfOrderSequence {
                    expected: 0,
                    got: h.base_sequence,
                })
            };
        }
        if let Some(b) = e
            .batches
            .iter()
            .find(|b| b.first_seq == h.base_sequence && b.last_seq == last_seq)
        {
            return Ok(SeqCheck::Duplicate(b.first_offset));
        }
        match e.batches.back() {
            Some(prev) if h.base_sequence != add_seq(prev.last_seq, 1) => {
                Err(KelpError::OutOfOrderSequence {
                    expected: add_seq(prev.last_seq, 1),
                    got: h.base_sequence,
                })
            }
            _ => Ok(SeqCheck::Append),
        }
    }

    /// Every producer with state here: (producer id, epoch, last sequence written, -1 if
    /// none), for DescribeProducers.
    pub fn producers(&self) -> Vec<(i64, i16, i32)> {
        let mut out: Vec<(i64, i16, i32)> = self
            .producers
            .iter()
            .map(|(&pid, e)| (pid, e.epoch, e.batches.back().map_or(-1, |b| b.last_seq)))
            .collect();
        out.sort_unstable();
        out
    }

    /// Records an appended batch (its header carries the assigned base offset).
    pub fn record(&mut self, h: &BatchHeader) {
        if h.producer_id < 0 {
            return;
        }
        let e = self.producers.entry(h.producer_id).or_default();
        if h.is_control() {
            // Markers take no place in the sequence window; a newer epoch still fences.
            if h.producer_epoch > e.epoch {
                e.epoch = h.producer_epoch;
                e.batches.clear();
            }
            return;
        }
        if h.producer_epoch != e.epoch {
            // A new epoch starts a fresh sequence space.
            e.epoch = h.producer_epoch;
            e.batches.clear();
        }
        if e.batches.len() == DEDUP_WINDOW {
            e.batches.pop_front();
        }
        e.batches.push_back(BatchMeta {
            first_seq: h.base_sequence,
            last_seq: add_seq(h.base_sequence, h.last_offset_delta),
            first_offset: h.base_offset,
        });
    }

    /// Checks every batch of one append as if the earlier ones were already written, so an
    /// append is accepted or refused as a whole. Returns the duplicate's original offset when
    /// the append's first batch retries an earlier one.
    pub fn check_all<'a>(
        &self,
        headers: impl IntoIterator<Item = &'a BatchHeader>,
    ) -> Result<SeqCheck, KelpError> {
        let mut scratch: Option<ProducerStates> = None;
        for (i, h) in headers.into_iter().enumerate() {
            let view = scratch.as_ref().unwrap_or(self);
            match view.check(h)? {
                SeqCheck::Duplicate(off) if i == 0 => return Ok(SeqCheck::Duplicate(off)),
                SeqCheck::Duplicate(_) => {
                    return Err(KelpError::OutOfOrderSequence {
                        expected: -1,
                        got: h.base_sequence,
                    })
                }
                SeqCheck::Append => {}
            }
            if h.producer_id >= 0 {
                let s = scratch.get_or_insert_with(|| self.clone_producer(h.producer_id));
                s.record(h);
            }
        }
        Ok(SeqCheck::Append)
    }

    /// A copy holding only one producer's entry (enough to check the rest of an append).
    fn clone_producer(&self, pid: i64) -> ProducerStates {
        let mut producers = HashMap::new();
        if let Some(e) = self.producers.get(&pid) {
            producers.insert(pid, e.clone());
        }
        ProducerStates { producers }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(pid: i64, epoch: i16, seq: i32, records: i32, offset: i64) -> BatchHeader {
        BatchHeader {
            base_offset: offset,
            batch_length: 0,
            magic: 2,
            crc: 0,
            attributes: 0,
            last_offset_delta: records - 1,
            base_timestamp: 0,
            max_timestamp: 0,
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: seq,
            record_count: records,
        }
    }

    #[test]
    fn in_order_duplicate_gap_and_epochs() {
        let mut s = ProducerStates::default();
        assert_eq!(s.check(&h(7, 0, 0, 3, 0)), Ok(SeqCheck::Append));
        s.record(&h(7, 0, 0, 3, 0));
        assert_eq!(s.check(&h(7, 0, 3, 2, 3)), Ok(SeqCheck::Append));
        s.record(&h(7, 0, 3, 2, 3));
        // Retries of either batch are duplicates answered with the original offsets.
        assert_eq!(s.check(&h(7, 0, 0, 3, -1)), Ok(SeqCheck::Duplicate(0)));
        assert_eq!(s.check(&h(7, 0, 3, 2, -1)), Ok(SeqCheck::Duplicate(3)));
        // A gap, or an overlap that is not an exact retry, is out of order.
        assert!(matches!(
            s.check(&h(7, 0, 6, 1, -1)),
            Err(KelpError::OutOfOrderSequence {
                expected: 5,
                got: 6
            })
        ));
        assert!(matches!(
            s.check(&h(7, 0, 1, 1, -1)),
            Err(KelpError::OutOfOrderSequence { .. })
        ));
        // A bumped epoch must restart at 0; the old epoch is fenced afterwards.
        assert!(s.check(&h(7, 1, 5, 1, -1)).is_err());
        assert_eq!(s.check(&h(7, 1, 0, 1, 5)), Ok(SeqCheck::Append));
        s.record(&h(7, 1, 0, 1, 5));
        assert!(matches!(
            s.check(&h(7, 0, 5, 1, -1)),
            Err(KelpError::InvalidProducerEpoch { got: 0, current: 1 })
        ));
        // Non-idempotent batches and unknown producers are always appended.
        assert_eq!(s.check(&h(-1, -1, -1, 1, -1)), Ok(SeqCheck::Append));
        assert_eq!(s.check(&h(8, 0, 42, 1, -1)), Ok(SeqCheck::Append));
    }

    #[test]
    fn only_last_five_batches_are_remembered() {
        let mut s = ProducerStates::default();
        for i in 0..6 {
            s.record(&h(1, 0, i, 1, i64::from(i)));
        }
        assert_eq!(s.check(&h(1, 0, 1, 1, -1)), Ok(SeqCheck::Duplicate(1)));
        // Batch 0 fell out of the window: no longer recognised as a duplicate.
        assert!(s.check(&h(1, 0, 0, 1, -1)).is_err());
    }

    #[test]
    fn sequence_wraps_and_state_rebuilds() {
        let mut s = ProducerStates::default();
        s.record(&h(1, 0, i32::MAX - 1, 2, 0));
        assert_eq!(s.check(&h(1, 0, 0, 1, -1)), Ok(SeqCheck::Append));
        let log = [h(2, 0, 0, 2, 0), h(2, 0, 2, 2, 2), h(3, 4, 9, 1, 4)];
        let r = ProducerStates::rebuild(log.iter());
        assert_eq!(r.check(&h(2, 0, 2, 2, -1)), Ok(SeqCheck::Duplicate(2)));
        assert_eq!(r.check(&h(2, 0, 4, 1, -1)), Ok(SeqCheck::Append));
        assert!(r.check(&h(3, 3, 10, 1, -1)).is_err());
    }

    #[test]
    fn multi_batch_appends_are_checked_in_order() {
        let mut s = ProducerStates::default();
        s.record(&h(1, 0, 0, 2, 0));
        let ok = [h(1, 0, 2, 1, -1), h(1, 0, 3, 1, -1)];
        assert_eq!(s.check_all(ok.iter()), Ok(SeqCheck::Append));
        let gap = [h(1, 0, 2, 1, -1), h(1, 0, 4, 1, -1)];
        assert!(s.check_all(gap.iter()).is_err());
        let dup = [h(1, 0, 0, 2, -1)];
        assert_eq!(s.check_all(dup.iter()), Ok(SeqCheck::Duplicate(0)));
    }
}
