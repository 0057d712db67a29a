//! One partition's state on its owning shard: offsets, the batch cache, idempotent-producer
//! sequence state and fetch waiters.
//!
//! Lives only on the shard that owns the partition and is never shared across threads.
//! With local storage, appends are reserved here (offsets and producer sequences), queued on
//! the partition's [`PartitionLog`], and become visible (cache, high watermark) only once
//! written: [`Partition::commit_written`]. Called by `shard/`; calls `record/` for batch
//! headers and `log/` for the durable log.

pub mod cache;
pub mod producer_state;
pub mod remote;

use std::collections::VecDeque;
use std::rc::Rc;
use std::time::Instant;

use bytes::Bytes;
use uuid::Uuid;

use crate::error::KelpError;
use crate::log::recovery::Recovered;
use crate::log::{PartitionLog, RollSettings, Ticket};
use crate::record::batch::{first_offset_at_or_after, BatchHeader, ValidatedBatches};
use cache::BatchCache;
use producer_state::{ProducerStates, SeqCheck};

/// Special ListOffsets timestamps (KIP-734, KIP-405).
pub mod timestamp {
    pub const LATEST: i64 = -1;
    pub const EARLIEST: i64 = -2;
    pub const MAX_TIMESTAMP: i64 = -3;
    pub const EARLIEST_LOCAL: i64 = -4;
}

/// What a read returned.
#[derive(Debug, Default)]
pub struct ReadOut {
    pub batches: Vec<Bytes>,
    pub bytes: usize,
    pub high_watermark: i64,
    pub log_start_offset: i64,
}

impl ReadOut {
    /// No batches, with the partition's offsets.
    pub fn empty(high_watermark: i64, log_start_offset: i64) -> Self {
        ReadOut {
            batches: Vec::new(),
            bytes: 0,
            high_watermark,
            log_start_offset,
        }
    }
}

/// Result of an append: base offset, bytes added to the cache and, with local storage, what
/// to wait for before answering.
pub struct Appended {
    pub base: i64,
    pub added: usize,
    pub wait: Option<(Rc<PartitionLog>, Ticket)>,
}

/// The durable side of a partition with local storage.
struct Durable {
    log: Rc<PartitionLog>,
    /// Reserved batches not yet written, oldest first.
    pending: VecDeque<(BatchHeader, Bytes)>,
    /// Producer state of the written batches only, to roll back to when a write fails.
    committed_producers: ProducerStates,
    /// Log generation this state matches (a failed write bumps the log's).
    generation: u64,
}

/// A partition on its owning shard.
pub struct Partition {
    /// Id of the topic incarnation this state belongs to (a re-created topic gets a new id).
    pub topic_id: Uuid,
    log_start: i64,
    /// Next offset to assign.
    next_offset: i64,
    /// High watermark: offsets below it are written and readable. Equals `next_offset` for
    /// memory storage; trails it while local appends are queued.
    hw: i64,
    durable: Option<Durable>,
    /// SeaweedMQ storage state (`--storage seaweedmq`).
    remote: Option<remote::Remote>,
    cache: BatchCache,
    appended: event_listener::Event,
    /// Largest batch max timestamp seen and the batch's base offset.
    max_timestamp: (i64, i64),
    pub last_append: Option<Instant>,
    producers: ProducerStates,
}

impl Partition {
    /// Empty partition state for a topic incarnation.
    pub fn new(topic_id: Uuid) -> Self {
        Partition {
            topic_id,
            log_start: 0,
            next_offset: 0,
            hw: 0,
            durable: None,
            remote: None,
            cache: BatchCache::default(),
            appended: event_listener::Event::new(),
            max_timestamp: (-1, -1),
            last_append: None,
            producers: ProducerStates::default(),
        }
    }

    /// Empty partition state backed by a (new) durable log.
    pub fn new_local(topic_id: Uuid, log: Rc<PartitionLog>) -> Self {
        let mut p = Partition::new(topic_id);
        p.durable = Some(Durable {
            generation: log.generation(),
            log,
            pending: VecDeque::new(),
            committed_producers: ProducerStates::default(),
        });
        p
    }

    /// Partition state recovered from its log at start-up.
    pub fn from_recovered(topic_id: Uuid, r: Recovered, producers: ProducerStates) -> Self {
        let log = Rc::new(r.log);
        let mut p = Partition::new_local(topic_id, log);
        p.log_start = r.log_start;
        p.next_offset = r.next_offset;
        p.hw = r.next_offset;
        p.max_timestamp = r.max_timestamp;
        if let Some(d) = &mut p.durable {
            d.committed_producers = producers.clone();
        }
        p.producers = producers;
        p
    }

    /// The durable log, with local storage.
    pub fn log(&self) -> Option<&Rc<PartitionLog>> {
        self.durable.as_ref().map(|d| &d.log)
    }

    /// High watermark (offsets below it are readable).
    pub fn high_watermark(&self) -> i64 {
        self.hw
    }

    /// First offset still readable.
    pub fn log_start_offset(&self) -> i64 {
        self.log_start
    }

    /// Bytes held in this partition's cache.
    pub fn cached_bytes(&self) -> usize {
        self.cache.bytes()
    }

    /// Checks idempotent producers' sequences, assigns offsets to validated batches, caches
    /// them and wakes fetch waiters. Returns the base offset of the first batch and the bytes
    /// added; a retried duplicate returns its original base offset and adds nothing.
    /// With local storage the batches are queued on the log instead and become visible in
    /// [`Partition::commit_written`]; the result says what to wait for.
    pub fn append(
        &mut self,
        batches: ValidatedBatches,
        roll: RollSettings,
    ) -> Result<Appended, KelpError> {
        self.sync_generation();
        if let SeqCheck::Duplicate(original) = self.producers.check_all(batches.headers())? {
            // The original may still be queued: answer once everything reserved is written.
            let wait = self
                .durable
                .as_ref()
                .map(|d| (d.log.clone(), d.log.ticket_for_all(self.next_offset)));
            return Ok(Appended {
                base: original,
                added: 0,
                wait,
            });
        }
        let base = self.next_offset;
        let assigned = batches.assign_offsets(base);
        for (h, _) in &assigned {
            self.producers.record(h);
            self.next_offset = h.last_offset() + 1;
        }
        self.last_append = Some(Instant::now());
        if let Some(d) = &mut self.durable {
            d.pending.extend(assigned.iter().cloned());
            let ticket = d.log.enqueue(assigned, roll)?;
            return Ok(Appended {
                base,
                added: 0,
                wait: Some((d.log.clone(), ticket)),
            });
        }
        let mut added = 0;
        for (h, data) in assigned {
            added += data.len();
            self.make_visible(&h, data);
        }
        self.appended.notify(usize::MAX);
        Ok(Appended {
            base,
            added,
            wait: None,
        })
    }

    fn make_visible(&mut self, h: &BatchHeader, data: Bytes) {
        if h.max_timestamp > self.max_timestamp.0 {
            self.max_timestamp = (h.max_timestamp, h.base_offset);
        }
        self.hw = h.last_offset() + 1;
        self.cache
            .push(h.base_offset, h.last_offset(), h.max_timestamp, data);
    }

    /// Moves queued batches the log has written into the cache and past the high watermark,
    /// waking fetchers. Returns the bytes added to the cache.
    pub fn commit_written(&mut self) -> usize {
        let Some(d) = &mut self.durable else {
            return 0;
        };
        let written = d.log.written_end();
        let mut ready = Vec::new();
        while d
            .pending
            .front()
            .is_some_and(|(h, _)| h.last_offset() < written)
        {
            if let Some((h, data)) = d.pending.pop_front() {
                d.committed_producers.record(&h);
                ready.push((h, data));
            }
        }
        let mut added = 0;
        for (h, data) in ready {
            added += data.len();
            self.make_visible(&h, data);
        }
        if added > 0 {
            self.appended.notify(usize::MAX);
        }
        added
    }

    /// After a failed log write, forgets the reservations that were never written: offsets
    /// and producer sequences go back to what the log holds, so retries get the same ones.
    fn sync_generation(&mut self) {
        let Some(gen) = self.durable.as_ref().map(|d| d.log.generation()) else {
            return;
        };
        if self.durable.as_ref().is_some_and(|d| d.generation == gen) {
            return;
        }
        self.commit_written();
        if let Some(d) = &mut self.durable {
            d.pending.clear();
            d.generation = gen;
            self.producers = d.committed_producers.clone();
            self.next_offset = self.hw;
        }
    }

    /// Moves the log start to `offset` (DeleteRecords, retention): older cached batches go.
    /// Returns the cache bytes freed.
    pub fn advance_log_start(&mut self, offset: i64) -> usize {
        if offset <= self.log_start {
            return 0;
        }
        self.log_start = offset.min(self.hw);
        self.cache.drop_below(self.log_start)
    }

    /// Whether reading `offset` needs the log: it is below what the cache holds.
    pub fn cold_log(&self, offset: i64) -> Option<Rc<PartitionLog>> {
        let d = self.durable.as_ref()?;
        if offset < self.log_start || offset >= self.hw {
            return None;
        }
        match self.cache.first_base() {
            Some(first) if offset >= first => None,
            _ => Some(d.log.clone()),
        }
    }

    /// Drops the cached batches up to and including offset `through`; with no storage
    /// behind the cache, their offsets become unreadable and the log start moves past them
    /// (with a log or SeaweedMQ, they are read from there). Returns the bytes freed.
    pub fn evict_through(&mut self, through: i64) -> usize {
        let freed = self.cache.drop_below(through.saturating_add(1));
        if freed > 0 && self.durable.is_none() && self.remote.is_none() {
            let first = self.cache.first_base().unwrap_or(self.hw);
            self.log_start = self.log_start.max(first.min(through.saturating_add(1)));
        }
        freed
    }

    /// Last offset of the newest cached batch.
    pub fn cached_last_offset(&self) -> Option<i64> {
        self.cache.last_offset()
    }

    /// Reads whole batches from `offset`, up to `max_bytes` but always at least one batch
    /// when any is available (Kafka's first-batch rule), so oversized batches still progress.
    pub fn read(&self, offset: i64, max_bytes: usize) -> Result<ReadOut, KelpError> {
        let (start, end) = (self.log_start, self.hw);
        if offset < start || offset > end {
            return Err(KelpError::OffsetOutOfRange { offset, start, end });
        }
        let mut out = ReadOut {
            high_watermark: end,
            log_start_offset: start,
            ..Default::default()
        };
        for b in self.cache.from_offset(offset) {
            if !out.batches.is_empty() && out.bytes + b.data.len() > max_bytes {
                break;
            }
            out.bytes += b.data.len();
            out.batches.push(b.data.clone());
            if out.bytes >= max_bytes {
                break;
            }
        }
        Ok(out)
    }

    /// Whether a fetch at `offset` would return data or an error right now.
    pub fn has_data_for(&self, offset: i64) -> bool {
        offset < self.log_start || offset != self.hw
    }

    /// A listener that fires on the next append; register before checking `has_data_for`.
    pub fn listen(&self) -> event_listener::EventListener {
        self.appended.listen()
    }

    /// Wakes every waiter (the partition is going away).
    pub fn wake_all(&self) {
        self.appended.notify(usize::MAX);
    }

    /// ListOffsets: (timestamp, offset) for a special or real timestamp; (-1, -1) if none.
    pub fn offset_for_timestamp(&self, ts: i64) -> (i64, i64) {
        match ts {
            timestamp::LATEST => (-1, self.hw),
            timestamp::EARLIEST | timestamp::EARLIEST_LOCAL => (-1, self.log_start),
            timestamp::MAX_TIMESTAMP => {
                let (max_ts, base) = self.max_timestamp;
                if max_ts < 0 || base < self.log_start {
                    return (-1, -1);
                }
                let off = self
                    .cache
                    .from_offset(base)
                    .next()
                    .and_then(|b| first_offset_at_or_after(&b.data, max_ts))
                    .map_or(base, |(off, _)| off);
                (max_ts, off)
            }
            ts => {
                for b in self.cache.from_offset(self.log_start) {
                    if b.max_timestamp >= ts {
                        if let Some((off, found_ts)) = first_offset_at_or_after(&b.data, ts) {
                            return (found_ts, off);
                        }
                    }
                }
                (-1, -1)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::batch::tests::{make_batch, make_producer_batch};

    const ROLL: RollSettings = RollSettings {
        segment_bytes: 1 << 30,
        segment_ms: u64::MAX,
    };

    impl Partition {
        fn append_mem(&mut self, b: ValidatedBatches) -> Result<(i64, usize), KelpError> {
            self.append(b, ROLL).map(|a| (a.base, a.added))
        }
    }

    fn validated(n: i32, ts: i64) -> ValidatedBatches {
        ValidatedBatches::validate(make_batch(n, ts), 1 << 20).unwrap()
    }

    #[test]
    fn append_read_evict() {
        let mut p = Partition::new(Uuid::nil());
        assert_eq!(p.append_mem(validated(3, 100)).unwrap().0, 0);
        assert_eq!(p.append_mem(validated(2, 200)).unwrap().0, 3);
        assert_eq!(p.high_watermark(), 5);
        let r = p.read(0, 1 << 20).unwrap();
        assert_eq!(r.batches.len(), 2);
        // Offset inside the first batch still returns that whole batch.
        assert_eq!(p.read(1, 1 << 20).unwrap().batches.len(), 2);
        assert_eq!(p.read(3, 1 << 20).unwrap().batches.len(), 1);
        // First-batch rule: a tiny limit still yields one batch.
        assert_eq!(p.read(0, 1).unwrap().batches.len(), 1);
        assert!(p.read(5, 10).unwrap().batches.is_empty());
        assert!(p.read(6, 10).is_err());
        assert_eq!(p.offset_for_timestamp(timestamp::LATEST), (-1, 5));
        assert_eq!(p.offset_for_timestamp(201).1, 4);
        assert_eq!(p.offset_for_timestamp(101).1, 1);
        assert_eq!(p.offset_for_timestamp(timestamp::MAX_TIMESTAMP), (201, 4));
        assert_eq!(p.offset_for_timestamp(9999), (-1, -1));
        assert!(p.evict_through(2) > 0);
        assert_eq!(p.log_start_offset(), 3);
        assert!(p.read(0, 10).is_err());
        assert_eq!(p.offset_for_timestamp(timestamp::EARLIEST), (-1, 3));
    }

    #[test]
    fn idempotent_appends() {
        let batch = |epoch, seq| {
            ValidatedBatches::validate(make_producer_batch(2, 0, 9, epoch, seq), 1 << 20).unwrap()
        };
        let mut p = Partition::new(Uuid::nil());
        assert_eq!(p.append_mem(validated(1, 0)).unwrap().0, 0);
        assert_eq!(p.append_mem(batch(0, 0)).unwrap().0, 1);
        assert_eq!(p.append_mem(batch(0, 2)).unwrap().0, 3);
        // A retry of the first batch is acknowledged with its original offset, not re-appended.
        assert_eq!(p.append_mem(batch(0, 0)).unwrap(), (1, 0));
        assert_eq!(p.high_watermark(), 5);
        let gap = p.append_mem(batch(0, 9)).unwrap_err();
        assert_eq!(gap.code(), crate::error::code::OUT_OF_ORDER_SEQUENCE_NUMBER);
        // A bumped epoch restarts at sequence 0 and fences the old epoch.
        assert_eq!(p.append_mem(batch(1, 0)).unwrap().0, 5);
        let fenced = p.append_mem(batch(0, 4)).unwrap_err();
        assert_eq!(fenced.code(), crate::error::code::INVALID_PRODUCER_EPOCH);
        assert_eq!(p.high_watermark(), 7);
    }
}
