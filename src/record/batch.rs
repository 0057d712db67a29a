//! Record batch header layout, validation and base-offset rewrite.

use bytes::{Bytes, BytesMut};

use crate::error::KelpError;

/// Bytes in a v2 record batch header, up to and including the record count.
pub const BATCH_HEADER_LEN: usize = 61;
/// Bytes before the batch length field ends (base offset + batch length).
pub const LOG_OVERHEAD: usize = 12;

const OFF_BATCH_LENGTH: usize = 8;
const OFF_MAGIC: usize = 16;
const OFF_CRC: usize = 17;
const OFF_ATTRIBUTES: usize = 21;
const OFF_LAST_OFFSET_DELTA: usize = 23;
const OFF_BASE_TIMESTAMP: usize = 27;
const OFF_MAX_TIMESTAMP: usize = 35;
const OFF_PRODUCER_ID: usize = 43;
const OFF_PRODUCER_EPOCH: usize = 51;
const OFF_BASE_SEQUENCE: usize = 53;
const OFF_RECORD_COUNT: usize = 57;

fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}
fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
fn be_i64(b: &[u8], at: usize) -> i64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(a)
}

/// Header fields of one batch, read from its first [`BATCH_HEADER_LEN`] bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    /// Length of the batch after the length field itself.
    pub batch_length: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub record_count: i32,
}

impl BatchHeader {
    /// Reads the header of a batch that is at least [`BATCH_HEADER_LEN`] bytes long.
    pub fn parse(b: &[u8]) -> Result<Self, KelpError> {
        if b.len() < BATCH_HEADER_LEN {
            return Err(KelpError::CorruptMessage(
                "record batch shorter than its header",
            ));
        }
        Ok(BatchHeader {
            base_offset: be_i64(b, 0),
            batch_length: be_i32(b, OFF_BATCH_LENGTH),
            magic: b[OFF_MAGIC] as i8,
            crc: u32::from_be_bytes([b[OFF_CRC], b[OFF_CRC + 1], b[OFF_CRC + 2], b[OFF_CRC + 3]]),
            attributes: be_i16(b, OFF_ATTRIBUTES),
            last_offset_delta: be_i32(b, OFF_LAST_OFFSET_DELTA),
            base_timestamp: be_i64(b, OFF_BASE_TIMESTAMP),
            max_timestamp: be_i64(b, OFF_MAX_TIMESTAMP),
            producer_id: be_i64(b, OFF_PRODUCER_ID),
            producer_epoch: be_i16(b, OFF_PRODUCER_EPOCH),
            base_sequence: be_i32(b, OFF_BASE_SEQUENCE),
            record_count: be_i32(b, OFF_RECORD_COUNT),
        })
    }

    /// Total size of the batch on the wire, including base offset and length fields.
    pub fn total_len(&self) -> usize {
        LOG_OVERHEAD + self.batch_length as usize
    }

    /// Offset of the last record: the next batch starts right after it.
    pub fn last_offset(&self) -> i64 {
        self.base_offset + i64::from(self.last_offset_delta)
    }

    /// Compression codec id (attributes bits 0-2).
    pub fn compression(&self) -> i16 {
        self.attributes & 0x7
    }

    /// Whether the batch is part of a transaction (attributes bit 4).
    pub fn is_transactional(&self) -> bool {
        self.attributes & 0x10 != 0
    }

    /// Whether the batch is a control batch (attributes bit 5).
    pub fn is_control(&self) -> bool {
        self.attributes & 0x20 != 0
    }
}

/// Batches of one partition's produce data, validated and with offsets not yet assigned.
#[derive(Debug)]
pub struct ValidatedBatches {
    /// The produce records region, still mutable so base offsets can be written in place.
    buf: BytesMut,
    /// Start and header of every batch in `buf`.
    batches: Vec<(usize, BatchHeader)>,
    /// Sum of (last offset delta + 1) over the batches: offsets this data consumes.
    pub offset_count: i64,
    /// Largest max timestamp over the batches.
    pub max_timestamp: i64,
}

impl ValidatedBatches {
    /// Checks every batch in a produce records region: magic 2, consistent lengths, CRC32C over
    /// attributes..end, sane record counts. Nothing is copied.
    pub fn validate(buf: BytesMut, max_batch_bytes: usize) -> Result<Self, KelpError> {
        let mut batches = Vec::with_capacity(1);
        let mut pos = 0usize;
        let mut offset_count = 0i64;
        let mut max_timestamp = -1i64;
        if buf.is_empty() {
            return Err(KelpError::InvalidRecord("empty records"));
        }
        while pos < buf.len() {
            let rest = &buf[pos..];
            // Kafka's batch iterator stops at an incomplete batch; a request whose records hold
            // one is answered as having no valid batch: INVALID_RECORD.
            if rest.len() < LOG_OVERHEAD + 5 {
                return Err(KelpError::InvalidRecord("truncated record batch"));
            }
            let magic = rest[OFF_MAGIC] as i8;
            if magic != 2 {
                return Err(KelpError::InvalidRecord(
                    "only record batch format v2 (magic 2) is supported",
                ));
            }
            let h = BatchHeader::parse(rest)?;
            if h.batch_length < (BATCH_HEADER_LEN - LOG_OVERHEAD) as i32 {
                return Err(KelpError::CorruptMessage("record batch length too small"));
            }
            let total = h.total_len();
            if total > rest.len() {
                return Err(KelpError::InvalidRecord(
                    "record batch length exceeds the data",
                ));
            }
            if total > max_batch_bytes {
                return Err(KelpError::MessageTooLarge {
                    size: total,
                    max: max_batch_bytes,
                });
            }
            let computed = crc32c::crc32c(&rest[OFF_ATTRIBUTES..total]);
            if computed != h.crc {
                return Err(KelpError::CorruptMessage("record batch CRC mismatch"));
            }
            if h.last_offset_delta < 0 || h.record_count < 0 {
                return Err(KelpError::InvalidRecord("negative record count"));
            }
            if h.record_count == 0 || h.record_count > h.last_offset_delta.saturating_add(1) {
                return Err(KelpError::InvalidRecord(
                    "record count does not match offsets",
                ));
            }
            offset_count += i64::from(h.last_offset_delta) + 1;
            max_timestamp = max_timestamp.max(h.max_timestamp);
            batches.push((pos, h));
            pos += total;
        }
        Ok(ValidatedBatches {
            buf,
            batches,
            offset_count,
            max_timestamp,
        })
    }

    /// Number of batches.
    pub fn len(&self) -> usize {
        self.batches.len()
    }

    /// Whether there are no batches (never true for a validated region).
    pub fn is_empty(&self) -> bool {
        self.batches.is_empty()
    }

    /// Headers of the batches, in order.
    pub fn headers(&self) -> impl Iterator<Item = &BatchHeader> {
        self.batches.iter().map(|(_, h)| h)
    }

    /// Writes consecutive base offsets starting at `base` into the batches, in place (the CRC
    /// does not cover the base offset), and returns each batch as a zero-copy `Bytes` slice with
    /// its assigned header.
    pub fn assign_offsets(mut self, base: i64) -> Vec<(BatchHeader, Bytes)> {
        let mut next = base;
        for (start, h) in self.batches.iter_mut() {
            self.buf[*start..*start + 8].copy_from_slice(&next.to_be_bytes());
            h.base_offset = next;
            next += i64::from(h.last_offset_delta) + 1;
        }
        let frozen = self.buf.freeze();
        self.batches
            .into_iter()
            .map(|(start, h)| (h, frozen.slice(start..start + h.total_len())))
            .collect()
    }
}

/// (offset, timestamp) of the first record in `batch` with timestamp >= `ts`, if any.
/// Decodes the records (decompressing if needed); used only by ListOffsets by timestamp.
pub fn first_offset_at_or_after(batch: &Bytes, ts: i64) -> Option<(i64, i64)> {
    let set = super::decode::decode(batch).ok()?;
    set.records
        .iter()
        .filter(|r| r.timestamp >= ts)
        .map(|r| (r.offset, r.timestamp))
        .min()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    pub use crate::record::build::simple_batch;

    pub fn make_batch(n: i32, ts: i64) -> BytesMut {
        simple_batch(n, 1, ts)
    }

    /// Like [`make_batch`], from an idempotent producer (id, epoch, base sequence).
    pub fn make_producer_batch(n: i32, ts: i64, pid: i64, epoch: i16, seq: i32) -> BytesMut {
        crate::record::build::producer_batch(n, 1, ts, pid, epoch, seq)
    }

    #[test]
    fn validates_and_rewrites_offsets_in_place() {
        let mut two = make_batch(3, 1000);
        two.extend_from_slice(&make_batch(2, 2000));
        let v = ValidatedBatches::validate(two, 1 << 20).unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!(v.offset_count, 5);
        let out = v.assign_offsets(40);
        assert_eq!(out[0].0.base_offset, 40);
        assert_eq!(out[1].0.base_offset, 43);
        let h = BatchHeader::parse(&out[1].1).unwrap();
        assert_eq!(h.base_offset, 43);
        // The rewritten batch still carries a valid CRC.
        assert_eq!(crc32c::crc32c(&out[1].1[OFF_ATTRIBUTES..]), h.crc);
        assert_eq!(first_offset_at_or_after(&out[0].1, 1001), Some((41, 1001)));
        assert_eq!(first_offset_at_or_after(&out[0].1, 5000), None);
    }

    #[test]
    fn rejects_corruption() {
        let mut b = make_batch(2, 0);
        let last = b.len() - 1;
        b[last] ^= 0xff;
        assert_eq!(
            ValidatedBatches::validate(b, 1 << 20).unwrap_err().code(),
            crate::error::code::CORRUPT_MESSAGE
        );
        let mut short = make_batch(2, 0);
        short.truncate(short.len() - 3);
        assert!(ValidatedBatches::validate(short, 1 << 20).is_err());
        let mut magic1 = make_batch(1, 0);
        magic1[OFF_MAGIC] = 1;
        assert_eq!(
            ValidatedBatches::validate(magic1, 1 << 20)
                .unwrap_err()
                .code(),
            crate::error::code::INVALID_RECORD
        );
        assert!(ValidatedBatches::validate(make_batch(4, 0), 30).is_err());
    }
}
