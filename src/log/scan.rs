//! Finding whole, intact record batches in raw segment bytes.
//!
//! Pure functions over byte slices, shared by recovery (which scans every segment at start)
//! and cold reads (which cut whole batches out of what they read). A batch is intact when its
//! header parses, its magic is 2, its length is sane and fits, its offsets move forward, and
//! (when verifying, as recovery does) its CRC32C matches, its counts agree with its offsets
//! and an uncompressed batch's records agree with its header. [`SegmentScan`] is recovery's
//! whole-segment walk as a pure state machine, fed by file reads or by an in-memory buffer
//! ([`scan_segment_bytes`]). Calls only `record/` for the header and record layout, and
//! [`super::index`] for the rebuilt index.

use super::index::SegmentIndex;
use crate::record::batch::{BatchHeader, BATCH_HEADER_LEN, LOG_OVERHEAD};
use crate::record::walk;

/// One intact batch found by [`scan`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Found {
    /// Position in the scanned slice.
    pub pos: usize,
    /// Its header, already checked.
    pub header: BatchHeader,
}

/// Why a scan stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// Every byte was consumed.
    End,
    /// The last batch continues past the slice: read more from `Found`-less position.
    NeedMore {
        /// Where the unfinished batch starts.
        pos: usize,
        /// Its whole length, 0 when even its length field was cut off.
        total: usize,
    },
    /// Bytes at `pos` are not an intact batch (torn write, padding, garbage).
    Corrupt {
        /// Where the bad bytes start.
        pos: usize,
        /// What was wrong with them.
        why: &'static str,
    },
}

/// Largest batch recovery believes (above any max.message.bytes a topic can be given).
const MAX_BATCH: usize = 1 << 30;

/// Why the batch `rest` starts with (whose length was checked to fit) is not intact, if it
/// is not. `verify` adds the CRC, count and record checks.
fn damage(rest: &[u8], h: &BatchHeader, expect: i64, verify: bool) -> Option<&'static str> {
    if h.magic != 2 {
        return Some("magic is not 2");
    }
    if h.base_offset < expect || h.last_offset_delta < 0 {
        return Some("offsets go backwards");
    }
    // The next batch's base offset must be representable.
    if h.base_offset
        .checked_add(i64::from(h.last_offset_delta) + 1)
        .is_none()
    {
        return Some("offsets overflow");
    }
    if !verify {
        return None;
    }
    let total = h.total_len();
    if crc32c::crc32c(&rest[21..total]) != h.crc {
        return Some("CRC mismatch");
    }
    // What Produce has always let in: 1 ..= lastOffsetDelta + 1 records (it now demands
    // equality, older logs may hold less). Anything else is damage, not data.
    if h.record_count < 1 || i64::from(h.record_count) > i64::from(h.last_offset_delta) + 1 {
        return Some("record count disagrees with the offsets");
    }
    if h.compression() == 0 {
        // A CRC only proves the bytes are what a client sent, not that they agree with the
        // header: a batch that lies about its records is cut like a torn one, so no later
        // reader meets it. Compressed batches are not inflated here (too costly at start-up
        // for every segment); their readers walk them with the same checks.
        if let Err(e) = walk::check_plain_records(&rest[..total], h) {
            return Some(e.why());
        }
    }
    None
}

/// Scans `buf` for consecutive intact batches. `expect` is the base offset the first batch
/// must have at least (batches never go backwards); `verify` checks each batch's CRC, counts
/// and (uncompressed) records, as recovery does; reads of recovered data skip it.
pub fn scan(buf: &[u8], mut expect: i64, verify: bool) -> (Vec<Found>, Stop) {
    let mut out = Vec::new();
    let mut pos = 0usize;
    loop {
        let rest = &buf[pos..];
        if rest.is_empty() {
            return (out, Stop::End);
        }
        if rest.len() < LOG_OVERHEAD {
            return (out, Stop::NeedMore { pos, total: 0 });
        }
        let batch_length = i32::from_be_bytes([rest[8], rest[9], rest[10], rest[11]]);
        if batch_length < (BATCH_HEADER_LEN - LOG_OVERHEAD) as i32 {
            return (
                out,
                Stop::Corrupt {
                    pos,
                    why: "batch length too small",
                },
            );
        }
        let total = LOG_OVERHEAD + batch_length as usize;
        if total > MAX_BATCH {
            return (
                out,
                Stop::Corrupt {
                    pos,
                    why: "batch length too large",
                },
            );
        }
        if total > rest.len() {
            return (out, Stop::NeedMore { pos, total });
        }
        let Ok(h) = BatchHeader::parse(rest) else {
            return (
                out,
                Stop::Corrupt {
                    pos,
                    why: "unreadable header",
                },
            );
        };
        if let Some(why) = damage(rest, &h, expect, verify) {
            return (out, Stop::Corrupt { pos, why });
        }
        expect = h.last_offset() + 1;
        out.push(Found { pos, header: h });
        pos += total;
    }
}

/// Bytes recovery reads per step.
pub const SCAN_CHUNK: usize = 1 << 20;

/// What scanning one whole segment found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scanned {
    /// The sparse index rebuilt from the intact batches.
    pub index: SegmentIndex,
    /// Bytes of intact batches from the start of the segment.
    pub valid_len: u64,
    /// The file's length when scanned: more than `valid_len` means a tail to truncate.
    pub file_len: u64,
    /// Offset after the last intact batch.
    pub next_offset: i64,
    /// Whether everything past `valid_len` is zero padding (an O_DIRECT tail block of logs
    /// written before Kelp moved to page-cache writes), not damage.
    pub padding_only: bool,
    /// Why the scan stopped before the end of the file, if it did and it was not padding.
    pub damage: Option<&'static str>,
}

/// Recovery's walk over one segment of `file_len` bytes whose name says base offset `base`:
/// ask [`SegmentScan::next_read`] what to read, hand the bytes to [`SegmentScan::feed`],
/// until it says done. Pure: no I/O, no clock.
#[derive(Debug)]
pub struct SegmentScan {
    base: i64,
    file_len: u64,
    pos: u64,
    chunk: usize,
    done: bool,
    out: Scanned,
}

impl SegmentScan {
    /// A scan reading `chunk` bytes at a time (more when a batch is bigger).
    pub fn new(base: i64, file_len: u64, chunk: usize) -> SegmentScan {
        SegmentScan {
            base,
            file_len,
            pos: 0,
            chunk: chunk.max(LOG_OVERHEAD),
            done: false,
            out: Scanned {
                index: SegmentIndex::default(),
                valid_len: 0,
                file_len,
                next_offset: base,
                padding_only: true,
                damage: None,
            },
        }
    }

    /// (position, length) of the next read, or None once the scan is done.
    pub fn next_read(&self) -> Option<(u64, usize)> {
        if self.done || self.pos >= self.file_len {
            return None;
        }
        let len = (self.chunk as u64).min(self.file_len - self.pos) as usize;
        Some((self.pos, len))
    }

    /// Takes the bytes of the read [`SegmentScan::next_read`] asked for (fewer if the file
    /// ended early); `on_batch` sees every intact batch's header and bytes, in order.
    pub fn feed(&mut self, data: &[u8], on_batch: &mut dyn FnMut(&BatchHeader, &[u8])) {
        let Some((_, asked)) = self.next_read() else {
            return;
        };
        if data.is_empty() {
            // The file shrank under the scan: stop rather than ask for the same bytes again.
            self.stop_at(0, data, "segment shorter than its length");
            return;
        }
        let (found, stop) = scan(data, self.out.next_offset, true);
        let mut consumed = 0usize;
        for f in &found {
            let h = f.header;
            // The index keeps offsets relative to the segment base in 32 bits; a batch past
            // that range is not one Kelp wrote into this segment.
            let Ok(rel) = u32::try_from(h.last_offset() - self.base) else {
                self.stop_at(f.pos, data, "offset too far from the segment base");
                return;
            };
            let rel_base = rel - h.last_offset_delta as u32;
            self.out
                .index
                .on_batch(rel_base, self.pos + f.pos as u64, h.max_timestamp);
            on_batch(&h, &data[f.pos..f.pos + h.total_len()]);
            self.out.next_offset = h.last_offset() + 1;
            consumed = f.pos + h.total_len();
        }
        match stop {
            Stop::End => self.pos += data.len() as u64,
            Stop::NeedMore { pos: p, total }
                if data.len() == asked && self.pos + (asked as u64) < self.file_len =>
            {
                self.pos += p as u64;
                self.chunk = self.chunk.max(total);
            }
            Stop::NeedMore { .. } => self.stop_at(consumed, data, "torn batch at the end"),
            Stop::Corrupt { pos: p, why } => self.stop_at(p, data, why),
        }
    }

    fn stop_at(&mut self, at: usize, data: &[u8], why: &'static str) {
        self.pos += at as u64;
        // Zero padding after the last batch is how a DMA tail block ends: not damage.
        self.out.padding_only = data[at..].iter().all(|&b| b == 0);
        if !self.out.padding_only {
            self.out.damage = Some(why);
        }
        self.done = true;
    }

    /// Where the intact batches end, the rebuilt index and the next offset.
    pub fn finish(mut self) -> Scanned {
        self.out.valid_len = self.pos.min(self.file_len);
        self.out
    }
}

/// [`SegmentScan`] over a segment held in memory, read `chunk` bytes at a time (tests and
/// fuzzing: the same decisions recovery makes over a file).
pub fn scan_segment_bytes(
    seg: &[u8],
    base: i64,
    chunk: usize,
    on_batch: &mut dyn FnMut(&BatchHeader, &[u8]),
) -> Scanned {
    let mut s = SegmentScan::new(base, seg.len() as u64, chunk);
    while let Some((pos, len)) = s.next_read() {
        let at = pos as usize;
        s.feed(&seg[at..at + len], on_batch);
    }
    s.finish()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::record::batch::tests::make_batch;
    use crate::record::ValidatedBatches;

    /// Three batches with offsets 0.., as a segment holds them.
    pub(crate) fn segment_bytes() -> Vec<u8> {
        let mut all = Vec::new();
        let mut base = 0;
        for n in [3, 1, 2] {
            let v = ValidatedBatches::validate(make_batch(n, 100), 1 << 20).unwrap();
            for (h, b) in v.assign_offsets(base) {
                base = h.last_offset() + 1;
                all.extend_from_slice(&b);
            }
        }
        all
    }

    #[test]
    fn intact_torn_and_corrupt() {
        let seg = segment_bytes();
        let (found, stop) = scan(&seg, 0, true);
        assert_eq!(stop, Stop::End);
        assert_eq!(found.len(), 3);
        assert_eq!(found[2].header.base_offset, 4);
        // A torn last batch: the first two stay, the scan asks for more.
        let cut = &seg[..seg.len() - 5];
        let (found, stop) = scan(cut, 0, true);
        assert_eq!(found.len(), 2);
        assert!(matches!(stop, Stop::NeedMore { .. }));
        // Zero padding after the data (DMA tail block) is not a batch.
        let mut padded = seg.clone();
        padded.extend_from_slice(&[0u8; 100]);
        let (found, stop) = scan(&padded, 0, true);
        assert_eq!(found.len(), 3);
        assert!(matches!(stop, Stop::Corrupt { pos, .. } if pos == seg.len()));
        // A flipped byte in the second batch stops at it.
        let mut bad = seg.clone();
        let second = found[1].pos;
        bad[second + BATCH_HEADER_LEN] ^= 0xff;
        let (found, stop) = scan(&bad, 0, true);
        assert_eq!(found.len(), 1);
        assert_eq!(
            stop,
            Stop::Corrupt {
                pos: second,
                why: "CRC mismatch"
            }
        );
        // Offsets must not go backwards.
        let (found, _) = scan(&seg, 1, true);
        assert!(found.is_empty());
    }

    /// A batch with a valid CRC and a consistent header that claims 2^31-1 records over the
    /// one it holds, with base offset `base`.
    pub(crate) fn lying_batch(base: i64) -> Vec<u8> {
        let one = crate::record::build::simple_batch(1, 4, 100);
        let mut b =
            crate::record::walk::tests::with_count(&one, i32::MAX, Some(i32::MAX - 1)).to_vec();
        b[..8].copy_from_slice(&base.to_be_bytes());
        b
    }

    #[test]
    fn a_lying_batch_is_damage_for_recovery() {
        let seg = segment_bytes();
        let mut all = seg.clone();
        all.extend_from_slice(&lying_batch(6));
        all.extend_from_slice(&segment_bytes());
        let (found, stop) = scan(&all, 0, true);
        assert_eq!(found.len(), 3);
        assert!(
            matches!(stop, Stop::Corrupt { pos, .. } if pos == seg.len()),
            "{stop:?}"
        );
        // Reads of recovered data do not re-verify (recovery already cut such a batch).
        assert_eq!(scan(&all, 0, false).0.len(), 4);
        for chunk in [1, 13, 100, 1 << 20] {
            let mut seen = 0;
            let s = scan_segment_bytes(&all, 0, chunk, &mut |_, _| seen += 1);
            assert_eq!(seen, 3, "chunk {chunk}");
            assert_eq!(s.valid_len, seg.len() as u64);
            assert_eq!(s.next_offset, 6);
            assert!(!s.padding_only);
            assert!(s.damage.is_some());
            assert_eq!(s.index.max_timestamp(), 102);
        }
        // Intact segment, then zero padding: all batches, padding only.
        let mut padded = seg.clone();
        padded.extend_from_slice(&[0u8; 300]);
        let s = scan_segment_bytes(&padded, 0, 64, &mut |_, _| {});
        assert_eq!((s.valid_len, s.next_offset), (seg.len() as u64, 6));
        assert!(s.padding_only && s.damage.is_none());
        // Zeros written ahead of the end (`log::prealloc`), many chunks of them, the data
        // ending inside a chunk or exactly at its end: the same.
        padded.extend_from_slice(&vec![0u8; 5000]);
        for chunk in [64, seg.len()] {
            let s = scan_segment_bytes(&padded, 0, chunk, &mut |_, _| {});
            assert_eq!((s.valid_len, s.next_offset), (seg.len() as u64, 6));
            assert!(s.padding_only && s.damage.is_none());
        }
        // Counts that disagree with offsets, and offsets that would overflow.
        let mut b = segment_bytes();
        b[57..61].copy_from_slice(&9i32.to_be_bytes());
        let crc = crc32c::crc32c(&b[21..seg_first_len()]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        assert!(matches!(scan(&b, 0, true).1, Stop::Corrupt { pos: 0, .. }));
        let mut far = segment_bytes();
        far[..8].copy_from_slice(&(i64::MAX - 1).to_be_bytes());
        assert!(matches!(
            scan(&far, 0, false).1,
            Stop::Corrupt {
                pos: 0,
                why: "offsets overflow"
            }
        ));
    }

    fn seg_first_len() -> usize {
        let seg = segment_bytes();
        BatchHeader::parse(&seg).unwrap().total_len()
    }
}
