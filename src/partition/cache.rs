//! In-core batch cache of one partition: whole record batches in offset order.

use std::collections::VecDeque;

use bytes::Bytes;

/// One cached batch with the header fields reads need.
#[derive(Debug, Clone)]
pub struct CachedBatch {
    /// Base offset.
    pub base: i64,
    /// Last offset.
    pub last: i64,
    /// Largest record timestamp in the batch.
    pub max_timestamp: i64,
    /// The batch as the producer sent it, base offset rewritten.
    pub data: Bytes,
}

/// Batches of one partition, oldest first, with their total size.
#[derive(Debug, Default)]
pub struct BatchCache {
    batches: VecDeque<CachedBatch>,
    bytes: usize,
}

impl BatchCache {
    /// Appends a batch (offsets must follow the previous batch).
    pub fn push(&mut self, base: i64, last: i64, max_timestamp: i64, data: Bytes) {
        self.bytes += data.len();
        self.batches.push_back(CachedBatch {
            base,
            last,
            max_timestamp,
            data,
        });
    }

    /// Removes the oldest batch.
    pub fn pop_front(&mut self) -> Option<CachedBatch> {
        let b = self.batches.pop_front()?;
        self.bytes -= b.data.len();
        Some(b)
    }

    /// Base offset of the oldest cached batch.
    pub fn first_base(&self) -> Option<i64> {
        self.batches.front().map(|b| b.base)
    }

    /// Drops batches wholly below `offset` (DeleteRecords); returns the bytes freed.
    pub fn drop_below(&mut self, offset: i64) -> usize {
        let mut freed = 0;
        while self.batches.front().is_some_and(|b| b.last < offset) {
            if let Some(b) = self.pop_front() {
                freed += b.data.len();
            }
        }
        freed
    }

    /// Last offset of the newest batch.
    pub fn last_offset(&self) -> Option<i64> {
        self.batches.back().map(|b| b.last)
    }

    /// Total bytes cached.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Batches from the one containing `offset` onwards (binary search on last offsets).
    pub fn from_offset(&self, offset: i64) -> impl Iterator<Item = &CachedBatch> {
        let i = self.batches.partition_point(|b| b.last < offset);
        self.batches.range(i..)
    }
}
