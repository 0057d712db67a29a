//! Sparse per-segment indexes: offset → file position and timestamp → offset.
//!
//! One entry is added whenever about [`INDEX_INTERVAL`] bytes were appended since the last
//! one, so a lookup lands at most that far before the wanted batch. Both live in memory for
//! every segment (rebuilt by the recovery scan) and are written next to a segment as
//! `.index` (8 bytes: relative offset u32, position u32) and `.timeindex` (12 bytes: max
//! timestamp i64, relative offset u32) when it is sealed. Pure data: no I/O here.

use bytes::{BufMut, Bytes, BytesMut};

/// Log bytes between two index entries.
pub const INDEX_INTERVAL: u64 = 4096;

/// Offset and time index of one segment.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SegmentIndex {
    /// (offset relative to the segment base, byte position of the batch).
    offsets: Vec<(u32, u32)>,
    /// (largest timestamp so far, relative offset of the batch that carried it).
    times: Vec<(i64, u32)>,
    last_indexed_pos: Option<u64>,
    max_timestamp: i64,
}

impl SegmentIndex {
    /// Notes a batch starting at `pos` with relative base offset `rel`.
    pub fn on_batch(&mut self, rel: u32, pos: u64, max_timestamp: i64) {
        let due = self
            .last_indexed_pos
            .is_none_or(|last| pos >= last + INDEX_INTERVAL);
        if due {
            self.offsets.push((rel, pos as u32));
            self.last_indexed_pos = Some(pos);
        }
        if max_timestamp > self.max_timestamp || self.times.is_empty() {
            self.max_timestamp = self.max_timestamp.max(max_timestamp);
            if due || self.times.is_empty() {
                self.times.push((self.max_timestamp, rel));
            }
        }
    }

    /// Largest batch timestamp seen in the segment (-1: none).
    pub fn max_timestamp(&self) -> i64 {
        if self.times.is_empty() {
            -1
        } else {
            self.max_timestamp
        }
    }

    /// File position of the last indexed batch at or before relative offset `rel` (0 if none).
    pub fn position_for(&self, rel: u32) -> u64 {
        let i = self.offsets.partition_point(|&(r, _)| r <= rel);
        if i == 0 {
            0
        } else {
            u64::from(self.offsets[i - 1].1)
        }
    }

    /// Relative offset from which batches with timestamp >= `ts` may start: the entry just
    /// before the first one whose running max reaches `ts`. None if no batch reaches `ts`.
    pub fn offset_for_time(&self, ts: i64) -> Option<u32> {
        if self.max_timestamp() < ts {
            return None;
        }
        let i = self.times.partition_point(|&(t, _)| t < ts);
        Some(if i == 0 { 0 } else { self.times[i - 1].1 })
    }

    /// `.index` file contents.
    pub fn encode_offsets(&self) -> Bytes {
        let mut b = BytesMut::with_capacity(self.offsets.len() * 8);
        for &(rel, pos) in &self.offsets {
            b.put_u32(rel);
            b.put_u32(pos);
        }
        b.freeze()
    }

    /// `.timeindex` file contents.
    pub fn encode_times(&self) -> Bytes {
        let mut b = BytesMut::with_capacity(self.times.len() * 12);
        for &(ts, rel) in &self.times {
            b.put_i64(ts);
            b.put_u32(rel);
        }
        b.freeze()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparse_lookups() {
        let mut ix = SegmentIndex::default();
        // 100 batches of 1000 bytes, 10 offsets each, timestamps rising by 5.
        for i in 0..100u32 {
            ix.on_batch(i * 10, u64::from(i) * 1000, i64::from(i) * 5);
        }
        // An entry once 4 KiB passed since the last: positions 0, 5000, 10000, ...
        assert_eq!(ix.encode_offsets().len(), 20 * 8);
        assert_eq!(ix.position_for(0), 0);
        assert_eq!(ix.position_for(49), 0);
        assert_eq!(ix.position_for(50), 5000);
        assert_eq!(ix.position_for(999), 95000);
        assert_eq!(ix.max_timestamp(), 495);
        // Lookup by time never starts after the wanted batch.
        let rel = ix.offset_for_time(203).unwrap();
        assert!(rel <= 410, "{rel}");
        assert_eq!(ix.offset_for_time(0), Some(0));
        assert_eq!(ix.offset_for_time(496), None);
        assert_eq!(SegmentIndex::default().max_timestamp(), -1);
    }
}
