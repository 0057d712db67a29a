//! Finding whole, intact record batches in raw segment bytes.
//!
//! Pure functions over byte slices, shared by recovery (which scans every segment at start)
//! and cold reads (which cut whole batches out of what they read). A batch is intact when its
//! header parses, its magic is 2, its length is sane and fits, its CRC32C matches and its base
//! offset follows the previous batch. Calls only `record/` for the header layout.

use crate::record::batch::{BatchHeader, BATCH_HEADER_LEN, LOG_OVERHEAD};

/// One intact batch found by [`scan`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Found {
    /// Position in the scanned slice.
    pub pos: usize,
    pub header: BatchHeader,
}

/// Why a scan stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// Every byte was consumed.
    End,
    /// The last batch continues past the slice: read more from `Found`-less position.
    NeedMore { pos: usize, total: usize },
    /// Bytes at `pos` are not an intact batch (torn write, padding, garbage).
    Corrupt { pos: usize, why: &'static str },
}

/// Largest batch recovery believes (above any max.message.bytes a topic can be given).
const MAX_BATCH: usize = 1 << 30;

/// Scans `buf` for consecutive intact batches. `expect` is the base offset the first batch
/// must have at least (batches never go backwards); `check_crc` verifies each batch's CRC.
pub fn scan(buf: &[u8], mut expect: i64, check_crc: bool) -> (Vec<Found>, Stop) {
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
        if h.magic != 2 {
            return (
                out,
                Stop::Corrupt {
                    pos,
                    why: "magic is not 2",
                },
            );
        }
        if h.base_offset < expect || h.last_offset_delta < 0 {
            return (
                out,
                Stop::Corrupt {
                    pos,
                    why: "offsets go backwards",
                },
            );
        }
        if check_crc && crc32c::crc32c(&rest[21..total]) != h.crc {
            return (
                out,
                Stop::Corrupt {
                    pos,
                    why: "CRC mismatch",
                },
            );
        }
        expect = h.last_offset() + 1;
        out.push(Found { pos, header: h });
        pos += total;
    }
}

#[cfg(test)]
mod tests {
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
}
