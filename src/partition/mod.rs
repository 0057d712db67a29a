//! One partition's state on its owning shard: offsets, the batch cache, idempotent-producer
//! sequence state, fetch waiters, and the [`PartitionStore`] behind the cache.
//!
//! Lives only on the shard that owns the partition and is never shared across threads.
//! Appends are reserved here (offsets predicted, producer sequences checked) and become
//! visible (cache, high watermark) once the store settles them, in reservation order
//! ([`settle`]). The partition does not know which engine its store belongs to; it asks the
//! store's capabilities. Called by `shard/`; calls `record/` for batch headers and
//! `storage/` through the store.

pub mod cache;
pub mod producer_state;
pub mod settle;
pub mod txn;
pub mod txn_sync;

use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use uuid::Uuid;

use crate::error::KelpError;
use crate::metrics::partitions::PartitionGauges;
use crate::record::batch::{first_offset_at_or_after, BatchHeader};
use crate::record::control::control_type;
use crate::storage::{PartitionStore, Recovered};
use cache::BatchCache;
use producer_state::ProducerStates;
use txn::{AbortedTxn, Transactions};

/// Special ListOffsets timestamps (KIP-734, KIP-405).
pub mod timestamp {
    /// The high watermark.
    pub const LATEST: i64 = -1;
    /// The log start offset.
    pub const EARLIEST: i64 = -2;
    /// The offset of the record with the largest timestamp.
    pub const MAX_TIMESTAMP: i64 = -3;
    /// The first offset stored locally (tiered storage): the log start here.
    pub const EARLIEST_LOCAL: i64 = -4;
}

/// What a read returned.
#[derive(Debug, Default)]
pub struct ReadOut {
    /// Whole batches, in offset order.
    pub batches: Vec<Bytes>,
    /// Their total size.
    pub bytes: usize,
    /// The partition's high watermark at the time of the read.
    pub high_watermark: i64,
    /// The partition's log start offset at the time of the read.
    pub log_start_offset: i64,
    /// The last stable offset at the time of the read (the high watermark when no
    /// transaction is open).
    pub last_stable_offset: i64,
    /// For a read_committed read: the aborted transactions with records in what was read.
    pub aborted: Vec<AbortedTxn>,
}

impl ReadOut {
    /// No batches, with the partition's offsets.
    pub fn empty(high_watermark: i64, log_start_offset: i64, last_stable_offset: i64) -> Self {
        ReadOut {
            batches: Vec::new(),
            bytes: 0,
            high_watermark,
            log_start_offset,
            last_stable_offset,
            aborted: Vec::new(),
        }
    }
}

/// A partition on its owning shard.
pub struct Partition {
    /// Id of the topic incarnation this state belongs to (a re-created topic gets a new id).
    pub topic_id: Uuid,
    log_start: i64,
    /// Next offset to assign.
    next_offset: i64,
    /// High watermark: offsets below it are stored and readable. Trails `next_offset` while
    /// appends wait for their store.
    hw: i64,
    store: Rc<dyn PartitionStore>,
    /// Appends reserved and not yet settled, and what settling needs.
    queue: settle::Queue,
    cache: BatchCache,
    appended: event_listener::Event,
    /// Largest batch max timestamp seen and the batch's base offset.
    max_timestamp: (i64, i64),
    /// When the last append was reserved.
    pub last_append: Option<Instant>,
    producers: ProducerStates,
    /// Open and aborted transactions (KIP-98).
    txns: Transactions,
    /// `txns` took in every batch below this offset; None: not known yet (a store that
    /// learns its offsets keeps the state to start from, [`txn_sync`]).
    txn_seen: Option<i64>,
    /// The store keeps this partition's transaction state (a transaction wrote here).
    txn_tracked: bool,
    /// When the store was last handed a checkpoint of the state (after a marker).
    txn_saved_at: Option<Instant>,
    /// The leader epoch this state was built under: another tenure (the partition was led
    /// by another node meanwhile) starts from fresh state.
    pub epoch: i32,
    /// What `/metrics` shows of this partition ([`Partition::publish_gauges`]).
    gauges: Arc<PartitionGauges>,
}

impl Partition {
    /// Empty partition state for a topic incarnation, stored in `store`. Offsets start at 0,
    /// or are learned from the store first when it keeps its own.
    pub fn new(topic_id: Uuid, store: Rc<dyn PartitionStore>) -> Self {
        let store_learns = store.learns_offsets();
        Partition {
            topic_id,
            log_start: 0,
            next_offset: 0,
            hw: 0,
            queue: settle::Queue::new(store.learns_offsets()),
            store,
            cache: BatchCache::default(),
            appended: event_listener::Event::new(),
            max_timestamp: (-1, -1),
            last_append: None,
            producers: ProducerStates::default(),
            txns: Transactions::default(),
            txn_seen: (!store_learns).then_some(0),
            txn_tracked: false,
            txn_saved_at: None,
            epoch: 0,
            gauges: Arc::default(),
        }
    }

    /// Partition state found in its store at start-up, with the producer state rebuilt from
    /// its batches.
    pub fn from_recovered(r: Recovered, producers: ProducerStates) -> Self {
        let mut p = Partition::new(r.topic_id, r.store);
        p.log_start = r.log_start;
        p.next_offset = r.next_offset;
        p.hw = r.next_offset;
        p.txn_seen = Some(r.next_offset);
        p.max_timestamp = r.max_timestamp;
        p.queue.committed_producers = producers.clone();
        p.producers = producers;
        p
    }

    /// What the log cleaner needs besides the log: each idempotent producer's last batch
    /// here (by base offset; it stays whole), the last stable offset (cleaning stops before
    /// it) and the aborted transactions.
    pub fn cleaner_facts(&self) -> crate::storage::PartitionFacts {
        let stable_to = self.last_stable_offset();
        crate::storage::PartitionFacts {
            producers: self.producers.last_batches(),
            stable_to,
            aborted: self
                .txns
                .aborted_between(self.log_start, stable_to)
                .into_iter()
                .map(|a| (a.producer_id, a.first_offset, a.last_offset))
                .collect(),
        }
    }

    /// Starts a fresh partition's producer state from `producers` (a tenure taking over
    /// from another node's).
    pub fn seed_producers(&mut self, producers: ProducerStates) {
        self.queue.committed_producers = producers.clone();
        self.producers = producers;
    }

    /// The store behind the cache.
    pub fn store(&self) -> &Rc<dyn PartitionStore> {
        &self.store
    }

    /// High watermark (offsets below it are readable).
    pub fn high_watermark(&self) -> i64 {
        self.hw
    }

    /// First offset still readable.
    pub fn log_start_offset(&self) -> i64 {
        self.log_start
    }

    /// The last stable offset: read_committed readers read up to it (KIP-98). Not past
    /// what the transaction state has taken in: records not looked at yet may be a
    /// transaction's.
    pub fn last_stable_offset(&self) -> i64 {
        let lso = self.txns.last_stable_offset(self.hw);
        match self.txn_seen {
            Some(seen) => lso.min(seen.max(self.log_start)),
            None => self.log_start,
        }
    }

    /// The producers with state here (DescribeProducers): (producer id, epoch, last
    /// sequence, first offset of its open transaction or -1).
    pub fn active_producers(&self) -> Vec<(i64, i16, i32, i64)> {
        let open: std::collections::HashMap<i64, i64> = self.txns.open().collect();
        self.producers
            .producers()
            .into_iter()
            .map(|(pid, epoch, seq)| (pid, epoch, seq, open.get(&pid).copied().unwrap_or(-1)))
            .collect()
    }

    /// Open and aborted transactions.
    pub fn transactions(&self) -> &Transactions {
        &self.txns
    }

    /// Starts from the transactions found in the log (recovery), dropping those below the
    /// log start.
    pub fn set_transactions(&mut self, mut txns: Transactions) {
        txns.forget_below(self.log_start);
        self.txns = txns;
    }

    /// Bytes held in this partition's cache.
    pub fn cached_bytes(&self) -> usize {
        self.cache.bytes()
    }

    /// The gauges `/metrics` shows of this partition.
    pub fn gauges(&self) -> &Arc<PartitionGauges> {
        &self.gauges
    }

    /// Takes over the gauges of the state this one replaces (a new tenure, a re-created
    /// topic), published already, and shows this state in them.
    pub fn adopt_gauges(&mut self, gauges: Arc<PartitionGauges>) {
        self.gauges = gauges;
        self.publish_gauges(true);
    }

    /// Bytes of the partition's log: the cache when the store keeps nothing evicted from
    /// it (it is the whole log), else what the store says (None: it cannot tell cheaply).
    pub fn log_size_bytes(&self) -> Option<u64> {
        if self.store.keeps_evicted() {
            self.store.log_size_bytes()
        } else {
            Some(self.cache.bytes() as u64)
        }
    }

    /// Stores the high watermark, log start and log size in the gauges: when an offset
    /// moved (the size moves with them: appends, retention, DeleteRecords, eviction), or
    /// always when `force` (compaction shrinks the log without moving an offset). Relaxed
    /// stores on the owning shard; the scrape reads them.
    pub fn publish_gauges(&self, force: bool) {
        if force || !self.gauges.shows(self.hw, self.log_start) {
            self.gauges
                .set(self.hw, self.log_start, self.log_size_bytes());
        }
    }

    fn make_visible(&mut self, h: &BatchHeader, data: Bytes) {
        if h.max_timestamp > self.max_timestamp.0 {
            self.max_timestamp = (h.max_timestamp, h.base_offset);
        }
        self.hw = h.last_offset() + 1;
        // A batch after records not looked at yet waits for them (`txn_sync`).
        if self.txn_seen == Some(h.base_offset) || !self.queue.learns {
            self.txns.observe(h, control_type(h, &data));
            self.txn_seen = Some(self.hw);
        }
        self.cache
            .push(h.base_offset, h.last_offset(), h.max_timestamp, data);
    }

    /// Moves the log start to `offset` (DeleteRecords, retention): older cached batches go.
    /// Returns the cache bytes freed.
    pub fn advance_log_start(&mut self, offset: i64) -> usize {
        if offset <= self.log_start {
            return 0;
        }
        self.log_start = offset.min(self.hw);
        self.txns.forget_below(self.log_start);
        self.cache.drop_below(self.log_start)
    }

    /// Whether reading `offset` needs the store: readable, but older than the cache.
    pub fn cold(&self, offset: i64) -> bool {
        if !self.store.keeps_evicted() || offset < self.log_start || offset >= self.hw {
            return false;
        }
        self.cache.first_base().is_none_or(|first| offset < first)
    }

    /// First offset the cache holds, if any.
    pub fn cache_start(&self) -> Option<i64> {
        self.cache.first_base()
    }

    /// Drops the cached batches up to and including offset `through`; when the store does
    /// not keep them, their offsets become unreadable and the log start moves past them
    /// (otherwise they are read from the store). Returns the bytes freed.
    pub fn evict_through(&mut self, through: i64) -> usize {
        let freed = self.cache.drop_below(through.saturating_add(1));
        if freed > 0 && !self.store.keeps_evicted() {
            let first = self.cache.first_base().unwrap_or(self.hw);
            self.log_start = self.log_start.max(first.min(through.saturating_add(1)));
            self.txns.forget_below(self.log_start);
        }
        freed
    }

    /// Last offset of the newest cached batch.
    pub fn cached_last_offset(&self) -> Option<i64> {
        self.cache.last_offset()
    }

    /// Reads whole batches from `offset`, up to `max_bytes` but always at least one batch
    /// when any is available (Kafka's first-batch rule), so oversized batches still progress.
    /// `committed` (read_committed) stops at the last stable offset and lists the aborted
    /// transactions among what was read.
    pub fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        committed: bool,
    ) -> Result<ReadOut, KelpError> {
        let (start, end) = (self.log_start, self.hw);
        if offset < start || offset > end {
            return Err(KelpError::OffsetOutOfRange { offset, start, end });
        }
        let lso = self.last_stable_offset();
        let upper = if committed { lso } else { end };
        let mut out = ReadOut {
            high_watermark: end,
            log_start_offset: start,
            last_stable_offset: lso,
            ..Default::default()
        };
        let mut read_to = offset;
        for b in self.cache.from_offset(offset) {
            if b.base >= upper {
                break;
            }
            if !out.batches.is_empty() && out.bytes + b.data.len() > max_bytes {
                break;
            }
            out.bytes += b.data.len();
            out.batches.push(b.data.clone());
            read_to = b.last + 1;
            if out.bytes >= max_bytes {
                break;
            }
        }
        if committed && read_to > offset {
            out.aborted = self.txns.aborted_between(offset, read_to);
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
    /// `committed` (read_committed): the latest offset is the last stable offset.
    pub fn offset_for_timestamp(&self, ts: i64, committed: bool) -> (i64, i64) {
        match ts {
            timestamp::LATEST if committed => (-1, self.last_stable_offset()),
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
    use crate::record::ValidatedBatches;
    use crate::storage::memory::MemoryStore;
    use settle::Reserved;

    impl Partition {
        /// Reserves and settles an append as the memory engine stores it: at once, at the
        /// predicted offsets. Returns (base offset, bytes cached).
        pub(crate) fn append_now(
            &mut self,
            b: ValidatedBatches,
        ) -> Result<(i64, usize), KelpError> {
            match self.reserve(b, false)? {
                Reserved::Duplicate(original) => Ok((original, 0)),
                Reserved::Behind { .. } => unreachable!("not asked to wait"),
                Reserved::Append { ticket, batches } => {
                    let base = batches[0].0.base_offset;
                    let out = batches
                        .iter()
                        .map(|(h, _)| Ok((h.base_offset, h.last_offset())))
                        .collect();
                    Ok((base, self.settle(ticket, out).added))
                }
            }
        }
    }

    fn validated(n: i32, ts: i64) -> ValidatedBatches {
        ValidatedBatches::validate(make_batch(n, ts), 1 << 20).unwrap()
    }

    fn memory() -> Partition {
        Partition::new(Uuid::nil(), Rc::new(MemoryStore))
    }

    #[test]
    fn append_read_evict() {
        let mut p = memory();
        assert_eq!(p.append_now(validated(3, 100)).unwrap().0, 0);
        assert_eq!(p.append_now(validated(2, 200)).unwrap().0, 3);
        assert_eq!(p.high_watermark(), 5);
        let r = p.read(0, 1 << 20, false).unwrap();
        assert_eq!(r.batches.len(), 2);
        // Offset inside the first batch still returns that whole batch.
        assert_eq!(p.read(1, 1 << 20, false).unwrap().batches.len(), 2);
        assert_eq!(p.read(3, 1 << 20, false).unwrap().batches.len(), 1);
        // First-batch rule: a tiny limit still yields one batch.
        assert_eq!(p.read(0, 1, false).unwrap().batches.len(), 1);
        assert!(p.read(5, 10, false).unwrap().batches.is_empty());
        assert!(p.read(6, 10, false).is_err());
        assert_eq!(p.offset_for_timestamp(timestamp::LATEST, false), (-1, 5));
        assert_eq!(p.offset_for_timestamp(201, false).1, 4);
        assert_eq!(p.offset_for_timestamp(101, false).1, 1);
        assert_eq!(
            p.offset_for_timestamp(timestamp::MAX_TIMESTAMP, false),
            (201, 4)
        );
        assert_eq!(p.offset_for_timestamp(9999, false), (-1, -1));
        // Nothing keeps evicted records of the memory engine: the log start moves past them.
        assert!(p.evict_through(2) > 0);
        assert_eq!(p.log_start_offset(), 3);
        assert!(p.read(0, 10, false).is_err());
        assert!(!p.cold(0) && !p.cold(3));
        assert_eq!(p.offset_for_timestamp(timestamp::EARLIEST, false), (-1, 3));
    }

    #[test]
    fn read_committed_stops_at_the_last_stable_offset() {
        use crate::record::control::{marker_batch, ControlType};
        // A transactional batch of producer `pid` (attributes bit 4, CRC refreshed).
        let txn = |pid: i64, seq: i32| {
            let mut b = make_producer_batch(2, 0, pid, 0, seq);
            b[22] |= 0x10;
            crate::record::build::refresh_crcs(&mut b);
            ValidatedBatches::validate(b, 1 << 20).unwrap()
        };
        let marker = |kind, pid| {
            ValidatedBatches::validate_broker(marker_batch(kind, pid, 0, 0, 5)).unwrap()
        };
        let mut p = memory();
        p.append_now(validated(1, 0)).unwrap(); // 0
        p.append_now(txn(7, 0)).unwrap(); // 1-2, producer 7 opens
        p.append_now(txn(8, 0)).unwrap(); // 3-4, producer 8 opens
        assert_eq!((p.high_watermark(), p.last_stable_offset()), (5, 1));
        let r = p.read(0, 1 << 20, true).unwrap();
        assert_eq!((r.batches.len(), r.last_stable_offset), (1, 1));
        assert_eq!(p.read(0, 1 << 20, false).unwrap().batches.len(), 3);
        assert_eq!(p.offset_for_timestamp(timestamp::LATEST, true), (-1, 1));
        assert_eq!(p.offset_for_timestamp(timestamp::LATEST, false), (-1, 5));
        p.append_now(marker(ControlType::Abort, 7)).unwrap(); // 5
        assert_eq!(p.last_stable_offset(), 3);
        p.append_now(marker(ControlType::Commit, 8)).unwrap(); // 6
        assert_eq!(p.last_stable_offset(), 7);
        let r = p.read(0, 1 << 20, true).unwrap();
        assert_eq!(r.batches.len(), 5);
        assert_eq!(
            r.aborted
                .iter()
                .map(|a| (a.producer_id, a.first_offset))
                .collect::<Vec<_>>(),
            [(7, 1)]
        );
        // A read from past the aborted transaction is not told about it.
        assert!(p.read(6, 1 << 20, true).unwrap().aborted.is_empty());
        // Nor is a read_uncommitted one.
        assert!(p.read(0, 1 << 20, false).unwrap().aborted.is_empty());
        p.advance_log_start(6);
        assert!(p.transactions().aborted_between(0, 10).is_empty());
    }

    #[test]
    fn idempotent_appends() {
        let batch = |epoch, seq| {
            ValidatedBatches::validate(make_producer_batch(2, 0, 9, epoch, seq), 1 << 20).unwrap()
        };
        let mut p = memory();
        assert_eq!(p.append_now(validated(1, 0)).unwrap().0, 0);
        assert_eq!(p.append_now(batch(0, 0)).unwrap().0, 1);
        assert_eq!(p.append_now(batch(0, 2)).unwrap().0, 3);
        // A retry of the first batch is acknowledged with its original offset, not re-appended.
        assert_eq!(p.append_now(batch(0, 0)).unwrap(), (1, 0));
        assert_eq!(p.high_watermark(), 5);
        let gap = p.append_now(batch(0, 9)).unwrap_err();
        assert_eq!(gap.code(), crate::error::code::OUT_OF_ORDER_SEQUENCE_NUMBER);
        // A bumped epoch restarts at sequence 0 and fences the old epoch.
        assert_eq!(p.append_now(batch(1, 0)).unwrap().0, 5);
        let fenced = p.append_now(batch(0, 4)).unwrap_err();
        assert_eq!(fenced.code(), crate::error::code::INVALID_PRODUCER_EPOCH);
        assert_eq!(p.high_watermark(), 7);
    }
}
