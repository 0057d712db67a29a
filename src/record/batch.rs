//! Record batch header layout, validation and base-offset rewrite.

use bytes::{Bytes, BytesMut};

use super::walk;
use crate::error::KelpError;

/// Bytes in a v2 record batch header, up to and including the record count.
pub const BATCH_HEADER_LEN: usize = 61;
/// Bytes before the batch length field ends (base offset + batch length).
pub const LOG_OVERHEAD: usize = 12;

const OFF_BATCH_LENGTH: usize = 8;
/// The partition leader epoch: outside the CRC, so a broker stamps it on append (KIP-101).
const OFF_LEADER_EPOCH: usize = 12;
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
    /// Offset of the first record: the producer's value until Kelp rewrites it in place
    /// (the CRC does not cover it).
    pub base_offset: i64,
    /// Length of the batch after the length field itself.
    pub batch_length: i32,
    /// Format version; only 2 (the v2 batch format) is accepted.
    pub magic: i8,
    /// CRC32C from the attributes to the end of the batch.
    pub crc: u32,
    /// Compression codec, timestamp type, transactional and control flags.
    pub attributes: i16,
    /// Offset of the last record minus `base_offset`.
    pub last_offset_delta: i32,
    /// Timestamp of the first record; the others are deltas from it.
    pub base_timestamp: i64,
    /// Largest record timestamp (ListOffsets by max timestamp reads it).
    pub max_timestamp: i64,
    /// Idempotent producer id, -1 for a plain producer.
    pub producer_id: i64,
    /// The producer's epoch; a lower one than last seen is fenced.
    pub producer_epoch: i16,
    /// Sequence of the first record, checked for duplicates and gaps.
    pub base_sequence: i32,
    /// Records in the batch, checked against the records themselves.
    pub record_count: i32,
}

/// An idempotent producer's sequence `seq` advanced by `delta` records; sequences wrap at
/// i32::MAX, as Kafka's do.
pub fn add_seq(seq: i32, delta: i32) -> i32 {
    let sum = i64::from(seq) + i64::from(delta);
    if sum > i64::from(i32::MAX) {
        (sum - i64::from(i32::MAX) - 1) as i32
    } else {
        sum as i32
    }
}

/// The partition leader epoch a stored batch carries (-1 if it is shorter than a header).
pub fn leader_epoch_of(b: &[u8]) -> i32 {
    if b.len() < BATCH_HEADER_LEN {
        return -1;
    }
    be_i32(b, OFF_LEADER_EPOCH)
}

/// `b` with its partition leader epoch set to `epoch` (outside the CRC); copied only when
/// its bytes are shared and the epoch differs.
pub fn with_leader_epoch(b: Bytes, epoch: i32) -> Bytes {
    if b.len() < BATCH_HEADER_LEN || leader_epoch_of(&b) == epoch {
        return b;
    }
    let mut m = b
        .try_into_mut()
        .unwrap_or_else(|shared| BytesMut::from(&shared[..]));
    m[OFF_LEADER_EPOCH..OFF_LEADER_EPOCH + 4].copy_from_slice(&epoch.to_be_bytes());
    m.freeze()
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
        // A negative length never passes validation or a scan; saturate rather than wrap.
        LOG_OVERHEAD + self.batch_length.max(0) as usize
    }

    /// Offset of the last record: the next batch starts right after it.
    pub fn last_offset(&self) -> i64 {
        // Saturating: a garbage header read from disk must not overflow (scan rejects it).
        self.base_offset
            .saturating_add(i64::from(self.last_offset_delta))
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

    /// Whether the batch's timestamps are the broker's append time (attributes bit 3): its
    /// max timestamp is every record's timestamp.
    pub fn is_log_append_time(&self) -> bool {
        self.attributes & LOG_APPEND_TIME != 0
    }
}

/// Attribute bit of a batch stamped with the broker's append time (LogAppendTime).
const LOG_APPEND_TIME: i16 = 0x08;

/// Kafka's header checks of a client batch (LogValidator.validateBatch, Kafka 4): the offset
/// range must be positive (lastOffsetDelta >= 0), the count positive, and the count equal to
/// lastOffsetDelta + 1; each failure is an InvalidRecordException: INVALID_RECORD. Kafka
/// enforces this for compressed batches too, and every producer writes lastOffsetDelta =
/// count - 1, so it is the whole check a compressed batch gets on Kelp's hot path.
pub fn check_counts(h: &BatchHeader) -> Result<(), KelpError> {
    if h.last_offset_delta < 0 {
        return Err(KelpError::InvalidRecord("invalid offset range"));
    }
    if h.record_count <= 0 {
        return Err(KelpError::InvalidRecord("invalid reported record count"));
    }
    if i64::from(h.last_offset_delta) + 1 != i64::from(h.record_count) {
        return Err(KelpError::InvalidRecord(
            "inconsistent batch offset range and record count",
        ));
    }
    Ok(())
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
    /// attributes..end, sane record counts, no control batch. Nothing is copied.
    pub fn validate(buf: BytesMut, max_batch_bytes: usize) -> Result<Self, KelpError> {
        Self::validate_from(buf, max_batch_bytes, false)
    }

    /// The same checks for batches the broker writes itself: transaction markers (control
    /// batches) pass.
    pub fn validate_broker(buf: BytesMut) -> Result<Self, KelpError> {
        Self::validate_from(buf, usize::MAX, true)
    }

    fn validate_from(
        buf: BytesMut,
        max_batch_bytes: usize,
        broker: bool,
    ) -> Result<Self, KelpError> {
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
            check_counts(&h)?;
            if h.is_control() && !broker {
                // Commit and abort markers are the broker's to write (Kafka's LogValidator:
                // "Clients are not allowed to write control records").
                return Err(KelpError::InvalidRecord(
                    "clients are not allowed to write control records",
                ));
            }
            if h.compression() == 0 {
                // Kafka walks every record of an uncompressed batch as it validates it and
                // rejects fewer records than the count ("premature EOF"), bytes after the
                // last counted record ("records still remaining") and malformed records,
                // all as InvalidRecordException: INVALID_RECORD. Offset deltas must be
                // 0..count-1, which is stricter than Kafka: 4.1.1 stores an uncompressed
                // batch with deltas 0,1,1 or 5,6,7 as it is (and answers the same inside a
                // gzip batch with UNKNOWN_SERVER_ERROR); Kelp refuses it with INVALID_RECORD,
                // as such deltas give records offsets outside their batch or twice over.
                walk::check_plain_records(&rest[..total], &h)
                    .map_err(|e| KelpError::InvalidRecord(e.why()))?;
            } else if h.compression() > 4 {
                return Err(KelpError::InvalidRecord("unknown compression codec"));
            } else if h.record_count as usize > walk::MAX_INFLATED_BYTES / walk::MIN_RECORD_BYTES {
                // More records than the inflation cap can hold: no reader of Kelp's could
                // ever walk it, and Kafka (which inflates) rejects such a lie as well.
                return Err(KelpError::InvalidRecord(
                    "record count larger than a compressed batch can hold",
                ));
            }
            // Compressed batches pass through untouched (no inflation on the hot path): the
            // header checks above are all they get here, and every later reader walks them
            // with [`walk::Records`], which treats a lying header as corruption.
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

    /// Refuses batches with a record without a key, for a compacted topic (Kafka's
    /// LogValidator: "Compacted topic cannot accept message without key").
    pub fn require_keys(&self) -> Result<(), KelpError> {
        self.require_keys_within(walk::MAX_INFLATED_BYTES)
    }

    /// [`ValidatedBatches::require_keys`] inflating at most `cap` bytes per batch (fuzzing
    /// uses a small cap; the broker the default).
    pub fn require_keys_within(&self, cap: usize) -> Result<(), KelpError> {
        for (start, h) in &self.batches {
            let b = &self.buf[*start..*start + h.total_len()];
            match walk::all_keyed(b, h, cap) {
                Ok(true) => {}
                Ok(false) => {
                    return Err(KelpError::InvalidRecord(
                        "Compacted topic cannot accept message without key",
                    ))
                }
                Err(e) => return Err(KelpError::InvalidRecord(e.why())),
            }
        }
        Ok(())
    }

    /// Stamps every batch with the broker's append time `now_ms`, for a topic with
    /// `message.timestamp.type=LogAppendTime`: as Kafka's LogValidator does, the
    /// timestamp-type bit and the max timestamp are rewritten in place and the CRC computed
    /// again; the records keep their own timestamps, which readers ignore in such a batch.
    pub fn stamp_log_append_time(&mut self, now_ms: i64) {
        for (start, h) in &mut self.batches {
            let b = &mut self.buf[*start..*start + h.total_len()];
            h.attributes |= LOG_APPEND_TIME;
            h.max_timestamp = now_ms;
            b[OFF_ATTRIBUTES..OFF_ATTRIBUTES + 2].copy_from_slice(&h.attributes.to_be_bytes());
            b[OFF_MAX_TIMESTAMP..OFF_MAX_TIMESTAMP + 8].copy_from_slice(&now_ms.to_be_bytes());
            h.crc = crc32c::crc32c(&b[OFF_ATTRIBUTES..]);
            b[OFF_CRC..OFF_CRC + 4].copy_from_slice(&h.crc.to_be_bytes());
        }
        self.max_timestamp = now_ms;
    }

    /// Stamps every batch with the partition leader epoch it is appended under, in place (the
    /// CRC does not cover it), as Kafka's brokers do: a consumer keeps the epoch of what it
    /// read with its position and committed offset, and checks it against the leader's
    /// history after a leader change (KIP-320). Clients send 0 (librdkafka) or -1 (Java).
    pub fn stamp_leader_epoch(&mut self, epoch: i32) {
        for (start, _) in &self.batches {
            self.buf[*start + OFF_LEADER_EPOCH..*start + OFF_LEADER_EPOCH + 4]
                .copy_from_slice(&epoch.to_be_bytes());
        }
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
/// Walks the records one by one (inflating a compressed batch up to
/// [`walk::MAX_INFLATED_BYTES`]); used only by ListOffsets by timestamp. A batch whose
/// records disagree with its header (possible on disk, or from before Produce checked
/// records) is skipped with a log line: it answers None, it never aborts the broker.
pub fn first_offset_at_or_after(batch: &Bytes, ts: i64) -> Option<(i64, i64)> {
    first_offset_at_or_after_within(batch, ts, walk::MAX_INFLATED_BYTES)
}

/// [`first_offset_at_or_after`] with the inflation capped at `cap` bytes (fuzzing uses a
/// small cap so compression bombs stay cheap; the broker uses the default).
pub fn first_offset_at_or_after_within(batch: &Bytes, ts: i64, cap: usize) -> Option<(i64, i64)> {
    let result = (|| {
        let mut records = walk::Records::new(batch, cap)?;
        let h = *records.header();
        let mut found = None;
        while let Some(r) = records.next_record()? {
            // LogAppendTime batches: every record has the broker's time, the max timestamp.
            let t = if h.is_log_append_time() {
                h.max_timestamp
            } else {
                h.base_timestamp.wrapping_add(r.timestamp_delta)
            };
            // Kafka answers the first offset whose record reaches the timestamp, not the
            // record with the smallest such timestamp (timestamps need not be ordered).
            // The walk goes on to the end: a batch that turns out inconsistent is skipped
            // whole, not half believed.
            if t >= ts && found.is_none() {
                found = Some((h.base_offset.saturating_add(i64::from(r.offset_delta)), t));
            }
        }
        Ok::<_, walk::WalkError>(found)
    })();
    match result {
        Ok(f) => f,
        Err(e) => {
            let h = BatchHeader::parse(batch).ok();
            tracing::warn!(
                base_offset = h.map(|h| h.base_offset),
                why = e.why(),
                "skipping a corrupt record batch in a lookup by timestamp"
            );
            None
        }
    }
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
    fn the_leader_epoch_is_stamped_outside_the_crc() {
        let mut two = make_batch(3, 1000);
        two.extend_from_slice(&make_batch(2, 2000));
        let mut v = ValidatedBatches::validate(two, 1 << 20).unwrap();
        v.stamp_leader_epoch(7);
        let out = v.assign_offsets(40);
        for (_, b) in &out {
            assert_eq!(leader_epoch_of(b), 7);
            // Still a valid batch: the CRC does not cover the epoch.
            ValidatedBatches::validate(BytesMut::from(&b[..]), 1 << 20).unwrap();
        }
        let again = with_leader_epoch(out[1].1.clone(), 9);
        assert_eq!(leader_epoch_of(&again), 9);
        assert_eq!(
            leader_epoch_of(&out[1].1),
            7,
            "a shared batch is copied, not changed"
        );
        assert_eq!(again[16..], out[1].1[16..]);
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

    fn code_of(b: &[u8]) -> i16 {
        match ValidatedBatches::validate(BytesMut::from(b), 1 << 20) {
            Ok(_) => crate::error::code::NONE,
            Err(e) => e.code(),
        }
    }

    #[test]
    fn header_and_records_must_agree() {
        use crate::error::code::{INVALID_RECORD, NONE};
        use crate::record::walk::tests::{encoded_batch, with_count};
        let one = make_batch(1, 0);
        let three = make_batch(3, 0);
        assert_eq!(code_of(&one), NONE);
        assert_eq!(code_of(&three), NONE);
        // The batch: 1 record, a consistent header claiming 2^31-1.
        assert_eq!(
            code_of(&with_count(&one, i32::MAX, Some(i32::MAX - 1))),
            INVALID_RECORD
        );
        // Count and last offset delta disagree, either way.
        assert_eq!(code_of(&with_count(&one, i32::MAX, None)), INVALID_RECORD);
        assert_eq!(code_of(&with_count(&three, 2, None)), INVALID_RECORD);
        assert_eq!(code_of(&with_count(&three, 3, Some(5))), INVALID_RECORD);
        // Zero and negative counts, negative last offset delta.
        assert_eq!(code_of(&with_count(&one, 0, Some(-1))), INVALID_RECORD);
        assert_eq!(code_of(&with_count(&one, -5, None)), INVALID_RECORD);
        assert_eq!(code_of(&with_count(&one, 1, Some(-1))), INVALID_RECORD);
        // A consistent header over fewer / more records than it counts.
        assert_eq!(code_of(&with_count(&three, 2, Some(1))), INVALID_RECORD);
        assert_eq!(code_of(&with_count(&three, 4, Some(3))), INVALID_RECORD);
        // Offset deltas that are not 0..count-1 (second record's delta 1 -> 2).
        let mut gap = three.to_vec();
        let second = BATCH_HEADER_LEN + 1 + usize::from(gap[BATCH_HEADER_LEN] / 2);
        assert_eq!(gap[second + 3], 2, "offset delta varint of record 1");
        gap[second + 3] = 4;
        assert_eq!(code_of(&with_count(&gap, 3, None)), INVALID_RECORD);
        // A record length running past the batch.
        let mut long = one.to_vec();
        long[BATCH_HEADER_LEN] = 0x7e;
        assert_eq!(code_of(&with_count(&long, 1, None)), INVALID_RECORD);
        // Batch length field larger than the bytes: INVALID_RECORD; smaller than a header:
        // CORRUPT_MESSAGE (as Kafka's batch iterator and isValid answer).
        let mut short = one.to_vec();
        short[8..12].copy_from_slice(&(one.len() as i32).to_be_bytes());
        assert_eq!(code_of(&short), INVALID_RECORD);
        let mut tiny = one.to_vec();
        tiny[8..12].copy_from_slice(&20i32.to_be_bytes());
        assert_eq!(code_of(&tiny), crate::error::code::CORRUPT_MESSAGE);
        // Compressed batches from the crate's encoder pass with every codec; their header
        // lies are caught without inflating; unknown codecs are refused.
        for codec in 1..=4 {
            let b = encoded_batch(codec, &[b"x", b"yy"], 7);
            assert_eq!(code_of(&b), NONE, "codec {codec}");
            assert_eq!(code_of(&with_count(&b, i32::MAX, None)), INVALID_RECORD);
            assert_eq!(code_of(&with_count(&b, 0, Some(-1))), INVALID_RECORD);
            // A consistent claim of 2^31-1 records is more than the inflation cap can hold.
            let liar = with_count(&b, i32::MAX, Some(i32::MAX - 1));
            assert_eq!(code_of(&liar), INVALID_RECORD);
            assert_eq!(first_offset_at_or_after(&liar, 0), None);
            // A small consistent lie passes the hot path (no inflation), and every reader
            // sees it as corrupt rather than sizing anything from it.
            let small = with_count(&b, 5, Some(4));
            assert_eq!(code_of(&small), NONE);
            assert_eq!(first_offset_at_or_after(&small, 0), None);
        }
        let mut odd = encoded_batch(1, &[b"x"], 7).to_vec();
        odd[OFF_ATTRIBUTES + 1] = 6;
        assert_eq!(code_of(&with_count(&odd, 1, None)), INVALID_RECORD);
    }

    #[test]
    fn lookup_by_timestamp_in_every_codec() {
        use crate::record::walk::tests::{encoded_batch, with_count};
        for codec in 0..=4 {
            let mut b = encoded_batch(codec, &[b"a", b"b", b"c"], 100).to_vec();
            b[..8].copy_from_slice(&40i64.to_be_bytes());
            let b = Bytes::from(b);
            assert_eq!(
                first_offset_at_or_after(&b, 101),
                Some((41, 101)),
                "{codec}"
            );
            assert_eq!(first_offset_at_or_after(&b, 0), Some((40, 100)));
            assert_eq!(first_offset_at_or_after(&b, 103), None);
        }
        let liar = with_count(&make_batch(1, 5), i32::MAX, Some(i32::MAX - 1));
        assert_eq!(first_offset_at_or_after(&liar, 0), None);
        // Timestamps out of order (deltas 5, 1): the first offset reaching the timestamp
        // wins, as in Kafka, not the smallest timestamp (found by the record_batch fuzzer).
        let mut b = make_batch(2, 100).to_vec();
        let first = BATCH_HEADER_LEN + 2;
        assert_eq!(b[first], 0, "timestamp delta varint of record 0");
        b[first] = 10;
        let b = with_count(&b, 2, None);
        assert_eq!(first_offset_at_or_after(&b, 0), Some((0, 105)));
        assert_eq!(first_offset_at_or_after(&b, 101), Some((0, 105)));
        assert_eq!(first_offset_at_or_after(&b, 106), None);
    }
}
