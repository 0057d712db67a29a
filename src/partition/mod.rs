//! One partition's state on its owning shard: offsets, the batch cache, idempotent-producer
//! sequence state and fetch waiters.
//!
//! Lives only on the shard that owns the partition and is never shared across threads.
//! Called by `shard/`; calls `record/` for batch headers.

pub mod cache;
pub mod producer_state;

use std::time::Instant;

use bytes::Bytes;
use uuid::Uuid;

use crate::error::KelpError;
use crate::record::batch::{first_offset_at_or_after, ValidatedBatches};
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

/// A partition on its owning shard.
pub struct Partition {
    /// Id of the topic incarnation this state belongs to (a re-created topic gets a new id).
    pub topic_id: Uuid,
    log_start: i64,
    /// Next offset to assign; equals the high watermark on a single broker.
    next_offset: i64,
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
            cache: BatchCache::default(),
            appended: event_listener::Event::new(),
            max_timestamp: (-1, -1),
            last_append: None,
            producers: ProducerStates::default(),
        }
    }

    /// High watermark (next offset to be written).
    pub fn high_watermark(&self) -> i64 {
        self.next_offset
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
    pub fn append(&mut self, batches: ValidatedBatches) -> Result<(i64, usize), KelpError> {
        if let SeqCheck::Duplicate(original) = self.producers.check_all(batches.headers())? {
            return Ok((original, 0));
        }
        let base = self.next_offset;
        let mut added = 0;
        for (h, data) in batches.assign_offsets(base) {
            self.producers.record(&h);
            if h.max_timestamp > self.max_timestamp.0 {
                self.max_timestamp = (h.max_timestamp, h.base_offset);
            }
            added += data.len();
            self.next_offset = h.last_offset() + 1;
            self.cache
                .push(h.base_offset, h.last_offset(), h.max_timestamp, data);
        }
        self.last_append = Some(Instant::now());
        self.appended.notify(usize::MAX);
        Ok((base, added))
    }

    /// Drops the oldest cached batch; with no storage behind the cache, its offsets become
    /// unreadable and the log start moves past them. Returns the bytes freed.
    pub fn evict_oldest(&mut self) -> usize {
        match self.cache.pop_front() {
            Some(b) => {
                self.log_start = self.log_start.max(b.last + 1);
                b.data.len()
            }
            None => 0,
        }
    }

    /// Reads whole batches from `offset`, up to `max_bytes` but always at least one batch
    /// when any is available (Kafka's first-batch rule), so oversized batches still progress.
    pub fn read(&self, offset: i64, max_bytes: usize) -> Result<ReadOut, KelpError> {
        let (start, end) = (self.log_start, self.next_offset);
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
        offset < self.log_start || offset != self.next_offset
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
            timestamp::LATEST => (-1, self.next_offset),
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

    fn validated(n: i32, ts: i64) -> ValidatedBatches {
        ValidatedBatches::validate(make_batch(n, ts), 1 << 20).unwrap()
    }

    #[test]
    fn append_read_evict() {
        let mut p = Partition::new(Uuid::nil());
        assert_eq!(p.append(validated(3, 100)).unwrap().0, 0);
        assert_eq!(p.append(validated(2, 200)).unwrap().0, 3);
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
        assert!(p.evict_oldest() > 0);
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
        assert_eq!(p.append(validated(1, 0)).unwrap().0, 0);
        assert_eq!(p.append(batch(0, 0)).unwrap().0, 1);
        assert_eq!(p.append(batch(0, 2)).unwrap().0, 3);
        // A retry of the first batch is acknowledged with its original offset, not re-appended.
        assert_eq!(p.append(batch(0, 0)).unwrap(), (1, 0));
        assert_eq!(p.high_watermark(), 5);
        let gap = p.append(batch(0, 9)).unwrap_err();
        assert_eq!(gap.code(), crate::error::code::OUT_OF_ORDER_SEQUENCE_NUMBER);
        // A bumped epoch restarts at sequence 0 and fences the old epoch.
        assert_eq!(p.append(batch(1, 0)).unwrap().0, 5);
        let fenced = p.append(batch(0, 4)).unwrap_err();
        assert_eq!(fenced.code(), crate::error::code::INVALID_PRODUCER_EPOCH);
        assert_eq!(p.high_watermark(), 7);
    }
}
