//! A partition's appends between reservation and visibility: one queue for every engine.
//!
//! An append is reserved first: idempotent producers' sequences are checked, offsets are
//! predicted from the next offset and rewritten in the batches, and the reservation joins
//! the queue. The store then says what it did with each batch, in any order across tasks;
//! results are applied in reservation order ([`Partition::settle`]). A batch stored at its
//! predicted offsets right after the high watermark enters the cache; one stored elsewhere
//! (another publisher took offsets, a forward was lost) is not cached, and the cache is
//! dropped so it stays contiguous up to the high watermark — reads below it go to the
//! store. A failed batch rolls the producer state back to what is settled plus what is still
//! queued, and the next offset is realigned once the queue is empty. Stores that assign
//! offsets themselves ([`PartitionStore::learns_offsets`]) are asked for them again.
//!
//! [`PartitionStore::learns_offsets`]: crate::storage::PartitionStore::learns_offsets

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::producer_state::{ProducerStates, SeqCheck};
use super::Partition;
use crate::error::KelpError;
use crate::record::batch::ValidatedBatches;
use crate::storage::{Batch, BatchOffsets, Range};

/// The reservations of one partition and what settling them needs.
pub(super) struct Queue {
    pending: VecDeque<Pending>,
    next_ticket: u64,
    /// Producer state of settled batches only, to roll back to when a batch fails.
    pub(super) committed_producers: ProducerStates,
    /// A batch failed or landed elsewhere: realign the next offset once nothing is pending.
    realign: bool,
    /// Whether offsets come from the store, which must be asked before appending.
    pub(super) learns: bool,
    /// Whether the store's offsets are known (always, for stores that keep none).
    synced: bool,
    /// When the store was last asked for its offsets.
    refreshed: Option<Instant>,
    /// Fired whenever reservations settle.
    settled: event_listener::Event,
}

struct Pending {
    ticket: u64,
    batches: Vec<Batch>,
    outcome: Option<Vec<BatchOffsets>>,
}

impl Queue {
    pub(super) fn new(learns: bool) -> Self {
        Queue {
            pending: VecDeque::new(),
            next_ticket: 0,
            committed_producers: ProducerStates::default(),
            realign: false,
            learns,
            synced: !learns,
            refreshed: None,
            settled: event_listener::Event::new(),
        }
    }
}

/// What a reservation asks of the shard.
pub enum Reserved {
    /// Store these batches (offsets assigned) and settle `ticket` with the outcome.
    Append {
        /// Identifies the reservation in [`Partition::settle`].
        ticket: u64,
        /// The batches, offsets rewritten.
        batches: Vec<Batch>,
    },
    /// A retried idempotent batch already stored: answer with its original base offset.
    Duplicate(i64),
    /// A retried idempotent batch whose original may still be in the queue: wait until the
    /// queue has settled through `through` ([`Partition::settled_through`]), then reserve
    /// again, since a failed original makes the retry a new append.
    Behind {
        /// The batches, untouched.
        batches: ValidatedBatches,
        /// The newest reservation at the time.
        through: u64,
    },
}

/// What settling changed in the cache.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Settled {
    /// Bytes that entered the cache.
    pub added: usize,
    /// Bytes dropped from the cache.
    pub freed: usize,
}

impl Partition {
    /// Whether the store must be asked for the offsets before this partition serves: not
    /// yet known, or (when `stale_after` is given and nothing is pending) not asked for that
    /// long. Always false for stores that keep no offsets of their own.
    pub fn needs_sync(&self, stale_after: Option<Duration>) -> bool {
        let q = &self.queue;
        if !q.learns {
            return false;
        }
        if !q.synced {
            return q.pending.is_empty();
        }
        match (stale_after, q.refreshed) {
            (Some(age), Some(at)) => q.pending.is_empty() && at.elapsed() >= age,
            _ => false,
        }
    }

    /// Takes the store's offsets. Data appended by others moves the high watermark past
    /// the cache: the cache is dropped. Returns the cache bytes freed.
    pub fn sync_offsets(&mut self, r: Range) -> usize {
        let q = &mut self.queue;
        q.refreshed = Some(Instant::now());
        if !q.pending.is_empty() {
            return 0;
        }
        q.synced = true;
        q.realign = false;
        self.log_start = self.log_start.max(r.earliest);
        if r.next == self.hw && self.next_offset == r.next {
            return 0;
        }
        let freed = self.cache.drop_below(i64::MAX);
        self.hw = r.next.max(self.log_start);
        self.next_offset = self.hw;
        if self.txn_seen.is_some_and(|seen| seen > self.hw) {
            // The store lost records this state took in: it is read again.
            self.txn_seen = None;
            self.txns = Default::default();
        }
        self.appended.notify(usize::MAX);
        freed
    }

    /// Checks producer sequences and predicts offsets (rewritten in place) for an append.
    /// With `wait_behind`, a duplicate of a batch that may still be queued is answered with
    /// [`Reserved::Behind`].
    pub fn reserve(
        &mut self,
        mut batches: ValidatedBatches,
        wait_behind: bool,
    ) -> Result<Reserved, KelpError> {
        if let SeqCheck::Duplicate(original) = self.producers.check_all(batches.headers())? {
            return Ok(match self.queue.pending.back() {
                Some(last) if wait_behind => Reserved::Behind {
                    batches,
                    through: last.ticket,
                },
                _ => Reserved::Duplicate(original),
            });
        }
        // The tenure's epoch (0 on a lone node).
        batches.stamp_leader_epoch(self.epoch);
        let assigned = batches.assign_offsets(self.next_offset);
        for (h, _) in &assigned {
            self.producers.record(h);
            self.next_offset = h.last_offset() + 1;
        }
        self.last_append = Some(Instant::now());
        let q = &mut self.queue;
        let ticket = q.next_ticket;
        q.next_ticket += 1;
        q.pending.push_back(Pending {
            ticket,
            batches: assigned.clone(),
            outcome: None,
        });
        Ok(Reserved::Append {
            ticket,
            batches: assigned,
        })
    }

    /// Whether every reservation up to `ticket` has settled.
    pub fn settled_through(&self, ticket: u64) -> bool {
        self.queue.pending.front().is_none_or(|p| p.ticket > ticket)
    }

    /// A listener that fires when reservations settle; register before checking.
    pub fn listen_settled(&self) -> event_listener::EventListener {
        self.queue.settled.listen()
    }

    /// Records the store's answer to a reservation and applies every answered reservation
    /// at the front of the queue, in order.
    pub fn settle(&mut self, ticket: u64, outcome: Vec<BatchOffsets>) -> Settled {
        let mut done = Settled::default();
        if let Some(p) = self.queue.pending.iter_mut().find(|p| p.ticket == ticket) {
            p.outcome = Some(outcome);
        }
        let mut failed = false;
        let mut moved = false;
        while self
            .queue
            .pending
            .front()
            .is_some_and(|p| p.outcome.is_some())
        {
            let Some(p) = self.queue.pending.pop_front() else {
                break;
            };
            let outcome = p.outcome.unwrap_or_default();
            for (i, (h, data)) in p.batches.into_iter().enumerate() {
                match outcome
                    .get(i)
                    .cloned()
                    .unwrap_or(Err(KelpError::RequestTimedOut))
                {
                    Ok((first, last)) => {
                        self.queue.committed_producers.record(&h);
                        moved = true;
                        if first == h.base_offset && last == h.last_offset() && first == self.hw {
                            done.added += data.len();
                            self.make_visible(&h, data);
                        } else {
                            tracing::debug!(
                                predicted = h.base_offset,
                                first,
                                last,
                                "stored at other offsets than predicted: batch not cached"
                            );
                            done.freed += self.cache.drop_below(i64::MAX);
                            self.hw = self.hw.max(last + 1);
                            self.queue.realign = true;
                        }
                    }
                    Err(_) => failed = true,
                }
            }
        }
        let q = &mut self.queue;
        if failed {
            // Not stored, or unknown (a timed-out forward may still land): the producers'
            // sequences go back to what is settled plus what is still queued.
            let mut producers = q.committed_producers.clone();
            for p in &q.pending {
                for (h, _) in &p.batches {
                    producers.record(h);
                }
            }
            self.producers = producers;
            q.realign = true;
            q.synced = !q.learns;
        }
        if q.pending.is_empty() && q.realign {
            self.next_offset = self.hw;
            q.realign = false;
        }
        q.settled.notify(usize::MAX);
        if moved {
            self.appended.notify(usize::MAX);
        }
        done
    }
}

#[cfg(test)]
pub(crate) mod tests;
