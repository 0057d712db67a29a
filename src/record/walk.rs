//! Walking the records of one v2 batch, one at a time, without trusting its header.
//!
//! Owns the record layout inside a batch (varint lengths, the fields of a record) and the
//! bounded inflation of compressed batches. A batch's header can claim anything (2^31-1
//! records in a 100-byte batch): nothing here is sized from a count or length read from the
//! batch. Every length is checked against the bytes that remain before it is used, records
//! are produced one by one, and inflation stops at a cap. A batch whose records disagree with
//! its header is reported as [`WalkError`], never a panic.
//!
//! Used by Produce validation ([`super::batch`]), by ListOffsets by timestamp and by the
//! SeaweedMQ forwarder. Calls `record::batch` for the header and the compression crates the
//! `kafka-protocol` codecs use (flate2, snap, lz4, zstd) for inflating.

use std::io::Read;
use std::ops::Range;

use bytes::Bytes;

use super::batch::{BatchHeader, BATCH_HEADER_LEN, LOG_OVERHEAD};

/// Most bytes a compressed batch may inflate to. Kafka producers cap a request at
/// max.request.size (1 MiB by default) and real data compresses some 2-10x; a batch that
/// inflates past this is a compression bomb or garbage, and is treated as corrupt.
pub const MAX_INFLATED_BYTES: usize = 64 << 20;

/// Fewest bytes one record takes: length, attributes, timestamp delta, offset delta, key
/// length, value length and header count, one byte each.
pub const MIN_RECORD_BYTES: usize = 7;

/// Largest zstd window (log2) the decoder accepts: the window is allocated up front from the
/// frame header, so an unchecked one would be an allocation chosen by the batch.
const ZSTD_WINDOW_LOG_MAX: u32 = 25;

/// xerial snappy-java framing, used by Kafka's Java clients: magic, version, compatible
/// version, then blocks of `[u32 compressed length][raw snappy block]`.
const XERIAL_MAGIC: &[u8] = b"\x82SNAPPY\x00";
const XERIAL_HEADER_LEN: usize = 16;

/// Why a batch's records cannot be walked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WalkError {
    /// The batch is shorter than its header or its length field says.
    Truncated,
    /// A record length, field length or varint runs past the bytes present.
    BadRecord(&'static str),
    /// Fewer records than the header's count before the bytes end.
    TooFewRecords,
    /// Bytes left after the header's count of records.
    TrailingBytes,
    /// Offset deltas not strictly increasing within 0..=last offset delta.
    BadOffsetDelta,
    /// Compressed data that does not inflate, or inflates past the cap.
    BadCompression(&'static str),
}

impl WalkError {
    /// Short reason, for log lines and error messages.
    pub fn why(&self) -> &'static str {
        match self {
            WalkError::Truncated => "batch shorter than its length",
            WalkError::BadRecord(w) => w,
            WalkError::TooFewRecords => "fewer records than the batch header counts",
            WalkError::TrailingBytes => "bytes after the record count the batch header gives",
            WalkError::BadOffsetDelta => "record offset deltas out of order or out of range",
            WalkError::BadCompression(w) => w,
        }
    }
}

/// One record, its key and value zero-copy slices of the batch (or of the inflated data).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordRef {
    /// Offset relative to the batch's base offset.
    pub offset_delta: i32,
    /// Timestamp relative to the batch's base timestamp.
    pub timestamp_delta: i64,
    /// The record key; None for a null key.
    pub key: Option<Bytes>,
    /// The record value; None for a tombstone.
    pub value: Option<Bytes>,
    /// Number of record headers.
    pub header_count: u32,
    /// The record's header entries as the client wrote them (after the count), checked.
    pub headers: Bytes,
}

/// Reads one zigzag varint of at most `max_bytes` bytes (5 for int32, 10 for int64).
fn read_varint(b: &[u8], pos: &mut usize, max_bytes: usize) -> Result<i64, WalkError> {
    let mut raw: u64 = 0;
    for i in 0..max_bytes {
        let Some(&byte) = b.get(*pos) else {
            return Err(WalkError::BadRecord("varint runs past the record"));
        };
        *pos += 1;
        raw |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok((raw >> 1) as i64 ^ -((raw & 1) as i64));
        }
    }
    Err(WalkError::BadRecord("varint too long"))
}

fn read_i32_varint(b: &[u8], pos: &mut usize) -> Result<i32, WalkError> {
    let v = read_varint(b, pos, 5)?;
    i32::try_from(v).map_err(|_| WalkError::BadRecord("varint out of int32 range"))
}

/// A nullable byte field of a record in `b` (which ends where the record ends): varint
/// length (-1: null), then that many bytes. Returns the field's range.
fn read_field(b: &[u8], pos: &mut usize, null_ok: bool) -> Result<Option<Range<usize>>, WalkError> {
    let len = read_i32_varint(b, pos)?;
    if len < 0 {
        return if null_ok && len == -1 {
            Ok(None)
        } else {
            Err(WalkError::BadRecord("negative field length"))
        };
    }
    let len = len as usize;
    if len > b.len() - *pos {
        return Err(WalkError::BadRecord("field length runs past the record"));
    }
    let r = *pos..*pos + len;
    *pos += len;
    Ok(Some(r))
}

/// One record as positions in the records region.
struct Parsed {
    offset_delta: i32,
    timestamp_delta: i64,
    key: Option<Range<usize>>,
    value: Option<Range<usize>>,
    header_count: u32,
    headers: Range<usize>,
}

/// Where a walk over a records region is: shared by the zero-copy [`Records`] and the
/// slice-based [`check_plain_records`] of Produce validation.
#[derive(Debug, Default)]
struct Cursor {
    pos: usize,
    /// Records read so far.
    read: i32,
    /// Offset delta of the last record read (-1 before the first).
    last_delta: i32,
}

impl Cursor {
    fn new() -> Cursor {
        Cursor {
            pos: 0,
            read: 0,
            last_delta: -1,
        }
    }

    /// The next record of `data` under header `h`; `Ok(None)` once the header's count was
    /// read and the bytes ended with it.
    fn step(&mut self, data: &[u8], h: &BatchHeader) -> Result<Option<Parsed>, WalkError> {
        let remaining = data.len() - self.pos;
        if self.read >= h.record_count {
            return if remaining == 0 {
                Ok(None)
            } else {
                Err(WalkError::TrailingBytes)
            };
        }
        if remaining == 0 {
            return Err(WalkError::TooFewRecords);
        }
        let mut pos = self.pos;
        let len = read_i32_varint(data, &mut pos)?;
        if len < 0 || len as usize > data.len() - pos {
            return Err(WalkError::BadRecord("record length runs past the batch"));
        }
        let end = pos + len as usize;
        // Every field below is read from the record's own bytes only.
        let rec = &data[..end];
        // attributes: unused in v2 records, but the byte must be there.
        if pos >= end {
            return Err(WalkError::BadRecord("empty record"));
        }
        pos += 1;
        let timestamp_delta = read_varint(rec, &mut pos, 10)?;
        let offset_delta = read_i32_varint(rec, &mut pos)?;
        if offset_delta <= self.last_delta || offset_delta > h.last_offset_delta {
            return Err(WalkError::BadOffsetDelta);
        }
        let key = read_field(rec, &mut pos, true)?;
        let value = read_field(rec, &mut pos, true)?;
        let header_count = read_i32_varint(rec, &mut pos)?;
        if header_count < 0 {
            return Err(WalkError::BadRecord("negative header count"));
        }
        let headers_at = pos;
        // Each header takes at least two bytes, so the loop is bounded by the record's bytes
        // however large the count claims to be.
        for _ in 0..header_count {
            if pos >= end {
                return Err(WalkError::BadRecord("header count runs past the record"));
            }
            // Header keys are non-null strings; values may be null.
            read_field(rec, &mut pos, false)?;
            read_field(rec, &mut pos, true)?;
        }
        if pos != end {
            return Err(WalkError::BadRecord(
                "record length disagrees with its fields",
            ));
        }
        self.pos = end;
        self.read += 1;
        self.last_delta = offset_delta;
        Ok(Some(Parsed {
            offset_delta,
            timestamp_delta,
            key,
            value,
            header_count: header_count as u32,
            headers: headers_at..end,
        }))
    }
}

/// Whether `b` holds exactly `count` record-header entries in Kafka's encoding (non-null
/// key, nullable value): for header bytes kept apart from their record.
pub fn headers_well_formed(b: &[u8], count: u32) -> bool {
    let mut pos = 0;
    for _ in 0..count {
        if pos >= b.len()
            || read_field(b, &mut pos, false).is_err()
            || read_field(b, &mut pos, true).is_err()
        {
            return false;
        }
    }
    pos == b.len()
}

/// Bytes of a batch's records region: the batch length field checked against the bytes.
fn records_region(batch: &[u8], h: &BatchHeader) -> Result<Range<usize>, WalkError> {
    let total = usize::try_from(h.batch_length)
        .ok()
        .and_then(|l| l.checked_add(LOG_OVERHEAD))
        .filter(|&t| t >= BATCH_HEADER_LEN && t <= batch.len())
        .ok_or(WalkError::Truncated)?;
    Ok(BATCH_HEADER_LEN..total)
}

/// Checks the records of an uncompressed batch against its header, without copying:
/// exactly `record_count` well-formed records with increasing offset deltas, ending exactly
/// at the end of the batch. Returns the count.
pub fn check_plain_records(batch: &[u8], h: &BatchHeader) -> Result<i32, WalkError> {
    let region = records_region(batch, h)?;
    let data = &batch[region];
    let mut c = Cursor::new();
    while c.step(data, h)?.is_some() {}
    Ok(c.read)
}

/// Whether every record of `batch` has a key (Kafka refuses keyless records on a compacted
/// topic). A compressed batch is inflated, at most `cap` bytes: the price of a compacted
/// topic, which Kafka pays too; an uncompressed one is walked where it lies.
pub fn all_keyed(batch: &[u8], h: &BatchHeader, cap: usize) -> Result<bool, WalkError> {
    let region = records_region(batch, h)?;
    let inflated;
    let data = match h.compression() {
        0 => &batch[region],
        codec => {
            inflated = inflate(codec, &batch[region], cap)?;
            &inflated[..]
        }
    };
    let mut c = Cursor::new();
    while let Some(p) = c.step(data, h)? {
        if p.key.is_none() {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The records of one batch, read one at a time by [`Records::next_record`].
#[derive(Debug)]
pub struct Records {
    header: BatchHeader,
    /// The records region: the batch after its header, or its inflated contents.
    data: Bytes,
    cursor: Cursor,
}

impl Records {
    /// Starts walking `batch`, inflating it (at most `cap` bytes) if it is compressed.
    pub fn new(batch: &Bytes, cap: usize) -> Result<Records, WalkError> {
        let header = BatchHeader::parse(batch).map_err(|_| WalkError::Truncated)?;
        let body = batch.slice(records_region(batch, &header)?);
        let data = match header.compression() {
            0 => body,
            codec => inflate(codec, &body, cap)?,
        };
        Ok(Records {
            header,
            data,
            cursor: Cursor::new(),
        })
    }

    /// The batch header.
    pub fn header(&self) -> &BatchHeader {
        &self.header
    }

    /// The next record; `Ok(None)` once the header's count was read and the bytes ended with
    /// it. Errors when the bytes and the count disagree or a record is malformed.
    pub fn next_record(&mut self) -> Result<Option<RecordRef>, WalkError> {
        let Some(p) = self.cursor.step(&self.data, &self.header)? else {
            return Ok(None);
        };
        Ok(Some(RecordRef {
            offset_delta: p.offset_delta,
            timestamp_delta: p.timestamp_delta,
            key: p.key.map(|r| self.data.slice(r)),
            value: p.value.map(|r| self.data.slice(r)),
            header_count: p.header_count,
            headers: self.data.slice(p.headers),
        }))
    }
}

impl Records {
    /// [`Records::next_record`] with the record's whole encoding (length prefix included),
    /// which is valid as it is in any batch with the same base offset and base timestamp:
    /// what the log cleaner copies into the batches it rebuilds.
    pub fn next_record_raw(&mut self) -> Result<Option<(RecordRef, Bytes)>, WalkError> {
        let start = self.cursor.pos;
        let Some(r) = self.next_record()? else {
            return Ok(None);
        };
        let raw = self.data.slice(start..self.cursor.pos);
        Ok(Some((r, raw)))
    }
}

/// Inflates a compressed records region, failing past `cap` bytes of output. The output
/// buffer grows as bytes come out of the decoder, never to a size the input announces.
fn inflate(codec: i16, src: &[u8], cap: usize) -> Result<Bytes, WalkError> {
    let mut out = Vec::new();
    let limit = cap as u64 + 1;
    let res = match codec {
        1 => flate2::read::MultiGzDecoder::new(src)
            .take(limit)
            .read_to_end(&mut out),
        2 => return snappy(src, cap),
        3 => lz4::Decoder::new(src).and_then(|d| d.take(limit).read_to_end(&mut out)),
        4 => zstd::stream::read::Decoder::with_buffer(src).and_then(|mut d| {
            d.window_log_max(ZSTD_WINDOW_LOG_MAX)?;
            d.take(limit).read_to_end(&mut out)
        }),
        _ => return Err(WalkError::BadCompression("unknown compression codec")),
    };
    if res.is_err() {
        return Err(WalkError::BadCompression(
            "compressed records do not inflate",
        ));
    }
    if out.len() > cap {
        return Err(WalkError::BadCompression(
            "records inflate past the size cap",
        ));
    }
    Ok(Bytes::from(out))
}

/// Snappy as Kafka writes it: xerial framing from the Java client, raw snappy otherwise
/// (librdkafka), the same fallback the Java broker's snappy-java stream makes.
fn snappy(src: &[u8], cap: usize) -> Result<Bytes, WalkError> {
    let mut out = Vec::new();
    if src.len() >= XERIAL_HEADER_LEN && src.starts_with(XERIAL_MAGIC) {
        let mut pos = XERIAL_HEADER_LEN;
        while pos < src.len() {
            let Some(len_bytes) = src.get(pos..pos + 4) else {
                return Err(WalkError::BadCompression("torn snappy block length"));
            };
            let len = u32::from_be_bytes([len_bytes[0], len_bytes[1], len_bytes[2], len_bytes[3]])
                as usize;
            pos += 4;
            let Some(block) = src.get(pos..pos.saturating_add(len)) else {
                return Err(WalkError::BadCompression(
                    "snappy block runs past the batch",
                ));
            };
            raw_snappy(block, cap, &mut out)?;
            pos += len;
        }
    } else {
        raw_snappy(src, cap, &mut out)?;
    }
    Ok(Bytes::from(out))
}

/// Appends one raw snappy block to `out`, checking its announced length against the cap
/// before making room for it.
fn raw_snappy(block: &[u8], cap: usize, out: &mut Vec<u8>) -> Result<(), WalkError> {
    let bad = |_| WalkError::BadCompression("snappy block does not inflate");
    let n = snap::raw::decompress_len(block).map_err(bad)?;
    if n > cap - out.len() {
        return Err(WalkError::BadCompression(
            "records inflate past the size cap",
        ));
    }
    let at = out.len();
    out.resize(at + n, 0);
    let got = snap::raw::Decoder::new()
        .decompress(block, &mut out[at..])
        .map_err(bad)?;
    out.truncate(at + got);
    Ok(())
}

/// Walks every record of `batch`, checking it against its header: exactly `record_count`
/// records that end exactly at the end of the (inflated) records region.
pub fn check_records(batch: &Bytes, cap: usize) -> Result<i32, WalkError> {
    let mut r = Records::new(batch, cap)?;
    while r.next_record()?.is_some() {}
    Ok(r.cursor.read)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::record::build::simple_batch;

    /// A batch of `values` with offset deltas 0.. and timestamps `ts + i`, compressed with
    /// `codec` by the kafka-protocol crate's encoder (what a Rust client sends).
    pub(crate) fn encoded_batch(codec: i16, values: &[&[u8]], ts: i64) -> Bytes {
        encoded_batch_keyed(codec, values, ts, true)
    }

    /// [`encoded_batch`], with keys `k0`, `k1`… or (`keyed` false) null keys.
    pub(crate) fn encoded_batch_keyed(codec: i16, values: &[&[u8]], ts: i64, keyed: bool) -> Bytes {
        use kafka_protocol::records::{
            Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
        };
        let records: Vec<Record> = values
            .iter()
            .enumerate()
            .map(|(i, v)| Record {
                transactional: false,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: 0,
                producer_id: -1,
                producer_epoch: -1,
                timestamp_type: TimestampType::Creation,
                offset: i as i64,
                sequence: i as i32 - 1,
                timestamp: ts + i as i64,
                key: keyed.then(|| Bytes::from(format!("k{i}"))),
                value: Some(Bytes::copy_from_slice(v)),
                headers: Default::default(),
            })
            .collect();
        let compression = match codec {
            0 => Compression::None,
            1 => Compression::Gzip,
            2 => Compression::Snappy,
            3 => Compression::Lz4,
            _ => Compression::Zstd,
        };
        let mut out = bytes::BytesMut::new();
        RecordBatchEncoder::encode(
            &mut out,
            records.iter(),
            &RecordEncodeOptions {
                version: 2,
                compression,
            },
        )
        .unwrap();
        out.freeze()
    }

    /// Rewrites the record count (and optionally the last offset delta), fixing the CRC.
    pub(crate) fn with_count(batch: &[u8], count: i32, last_delta: Option<i32>) -> Bytes {
        let mut b = batch.to_vec();
        b[57..61].copy_from_slice(&count.to_be_bytes());
        if let Some(d) = last_delta {
            b[23..27].copy_from_slice(&d.to_be_bytes());
        }
        let crc = crc32c::crc32c(&b[21..]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        Bytes::from(b)
    }

    #[test]
    fn walks_a_plain_batch() {
        let b = simple_batch(5, 3, 1000).freeze();
        let mut r = Records::new(&b, MAX_INFLATED_BYTES).unwrap();
        let mut n = 0;
        while let Some(rec) = r.next_record().unwrap() {
            assert_eq!(rec.offset_delta, n);
            assert_eq!(rec.timestamp_delta, i64::from(n));
            assert_eq!(rec.key, None);
            assert_eq!(rec.value.as_deref(), Some(&[b'a' + n as u8; 3][..]));
            n += 1;
        }
        assert_eq!(n, 5);
        assert_eq!(check_records(&b, MAX_INFLATED_BYTES), Ok(5));
    }

    #[test]
    fn walks_every_codec() {
        let big = vec![b'z'; 100_000];
        let values: [&[u8]; 3] = [b"one", b"two", &big];
        for codec in 0..=4 {
            let b = encoded_batch(codec, &values, 50);
            assert_eq!(BatchHeader::parse(&b).unwrap().compression(), codec);
            let mut r = Records::new(&b, MAX_INFLATED_BYTES).unwrap();
            let mut got = Vec::new();
            while let Some(rec) = r.next_record().unwrap() {
                got.push(rec.value.unwrap());
            }
            assert_eq!(got, values.to_vec(), "codec {codec}");
            // The cap holds: 100 KB of 'z' does not fit in 1 KiB.
            if codec != 0 {
                assert!(matches!(
                    Records::new(&b, 1024).and_then(|mut r| r.next_record()),
                    Err(WalkError::BadCompression(_))
                ));
            }
        }
    }

    #[test]
    fn a_batch_claiming_i32_max_records_is_corrupt_not_an_abort() {
        let one = simple_batch(1, 4, 0);
        let liar = with_count(&one, i32::MAX, Some(i32::MAX - 1));
        let mut r = Records::new(&liar, MAX_INFLATED_BYTES).unwrap();
        assert!(r.next_record().unwrap().is_some());
        assert_eq!(r.next_record(), Err(WalkError::TooFewRecords));
        assert_eq!(
            check_records(&liar, MAX_INFLATED_BYTES),
            Err(WalkError::TooFewRecords)
        );
        // The same lie inside every compressed codec.
        for codec in 1..=4 {
            let b = encoded_batch(codec, &[b"v"], 0);
            let liar = with_count(&b, i32::MAX, Some(i32::MAX - 1));
            assert_eq!(
                check_records(&liar, MAX_INFLATED_BYTES),
                Err(WalkError::TooFewRecords),
                "codec {codec}"
            );
        }
    }

    #[test]
    fn inconsistencies() {
        let three = simple_batch(3, 2, 0);
        // Claims fewer records than it holds.
        assert_eq!(
            check_records(&with_count(&three, 2, Some(1)), MAX_INFLATED_BYTES),
            Err(WalkError::TrailingBytes)
        );
        // Offset deltas past the last offset delta.
        assert_eq!(
            check_records(&with_count(&three, 3, Some(1)), MAX_INFLATED_BYTES),
            Err(WalkError::BadOffsetDelta)
        );
        // A record length past the end: the first record's length varint (2 * len) grown.
        let mut b = three.to_vec();
        b[BATCH_HEADER_LEN] = 0x7e;
        let b = with_count(&b, 3, None);
        assert!(matches!(
            check_records(&b, MAX_INFLATED_BYTES),
            Err(WalkError::BadRecord(_))
        ));
        // Batch length beyond the bytes.
        let mut b = three.to_vec();
        b.truncate(b.len() - 1);
        assert_eq!(
            check_records(&Bytes::from(b), MAX_INFLATED_BYTES).unwrap_err(),
            WalkError::Truncated
        );
        // Garbage instead of gzip data.
        let mut g = three.to_vec();
        g[21..23].copy_from_slice(&1i16.to_be_bytes());
        assert!(matches!(
            check_records(&with_count(&g, 3, None), MAX_INFLATED_BYTES),
            Err(WalkError::BadCompression(_))
        ));
    }

    #[test]
    fn all_keyed_reads_plain_and_compressed_batches() {
        for codec in [0, 1, 2, 3, 4] {
            for keyed in [true, false] {
                let b = encoded_batch_keyed(codec, &[b"a", b"b"], 1, keyed);
                let h = BatchHeader::parse(&b).unwrap();
                assert_eq!(
                    all_keyed(&b, &h, MAX_INFLATED_BYTES),
                    Ok(keyed),
                    "codec {codec}"
                );
            }
        }
    }
}
