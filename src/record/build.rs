//! Builds uncompressed v2 record batches: for benchmarks, tests and tools that need valid
//! batches without a client, and for storage engines that keep records rather than batches
//! (SeaweedMQ) when they hand records back. Produce and the cache never build batches.

use bytes::{BufMut, Bytes, BytesMut};

use super::batch::{BATCH_HEADER_LEN, LOG_OVERHEAD};

const OFF_CRC: usize = 17;
const OFF_ATTRIBUTES: usize = 21;

fn put_varint(b: &mut BytesMut, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        b.put_u8((z as u8 & 0x7f) | 0x80);
        z >>= 7;
    }
    b.put_u8(z as u8);
}

/// A batch of `n` records with null keys and `value_len`-byte values; record i has timestamp
/// `ts + i`. Base offset 0, no producer id, valid CRC.
pub fn simple_batch(n: i32, value_len: usize, ts: i64) -> BytesMut {
    producer_batch(n, value_len, ts, -1, -1, -1)
}

/// `n` records with one-byte values at `base`, as a store that keeps records hands them
/// back: a batch of producer `pid`'s transaction (epoch 0), or of no producer when None.
#[cfg(test)]
pub fn records_at(base: i64, n: i32, pid: Option<i64>) -> Bytes {
    let mut b = BatchBuilder::default();
    for _ in 0..n {
        b.push(RecordParts {
            timestamp: 1,
            key: None,
            value: Some(b"v"),
            header_count: 0,
            headers: &[],
        });
    }
    b.finish_for(base, pid.map(|pid| (pid, 0, 0x10)))
}

/// Like [`simple_batch`], written by an idempotent producer (id, epoch, base sequence).
pub fn producer_batch(
    n: i32,
    value_len: usize,
    ts: i64,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
) -> BytesMut {
    let mut records = BytesMut::with_capacity(n as usize * (value_len + 8));
    let mut rec = BytesMut::with_capacity(value_len + 16);
    for i in 0..n {
        rec.clear();
        rec.put_u8(0); // attributes
        put_varint(&mut rec, i64::from(i)); // timestamp delta
        put_varint(&mut rec, i64::from(i)); // offset delta
        put_varint(&mut rec, -1); // null key
        put_varint(&mut rec, value_len as i64);
        rec.extend(std::iter::repeat_n(b'a' + (i % 26) as u8, value_len));
        put_varint(&mut rec, 0); // no headers
        put_varint(&mut records, rec.len() as i64);
        records.extend_from_slice(&rec);
    }
    let mut b = BytesMut::with_capacity(BATCH_HEADER_LEN + records.len());
    b.put_i64(0);
    b.put_i32((BATCH_HEADER_LEN - LOG_OVERHEAD + records.len()) as i32);
    b.put_i32(0); // partition leader epoch
    b.put_i8(2); // magic
    b.put_u32(0); // crc, filled below
    b.put_i16(0); // attributes
    b.put_i32(n - 1);
    b.put_i64(ts);
    b.put_i64(ts + i64::from(n) - 1);
    b.put_i64(producer_id);
    b.put_i16(producer_epoch);
    b.put_i32(base_sequence);
    b.put_i32(n);
    b.extend_from_slice(&records);
    let crc = crc32c::crc32c(&b[OFF_ATTRIBUTES..]);
    b[OFF_CRC..OFF_CRC + 4].copy_from_slice(&crc.to_be_bytes());
    b
}

/// The batch `original` (header `h`) holding only `records`, each a whole record encoding
/// of it (see [`super::walk::Records::next_record_raw`]): same base offset, last offset
/// delta, timestamps, producer and flags, uncompressed, count and CRC made anew. The log
/// cleaner's output; `records` must not be empty (a batch holds at least one record).
pub fn rebuild(original: &[u8], h: &super::batch::BatchHeader, records: &[Bytes]) -> Bytes {
    let body: usize = records.iter().map(Bytes::len).sum();
    let mut b = BytesMut::with_capacity(BATCH_HEADER_LEN + body);
    b.extend_from_slice(&original[..BATCH_HEADER_LEN]);
    b[8..12].copy_from_slice(&((BATCH_HEADER_LEN - LOG_OVERHEAD + body) as i32).to_be_bytes());
    // Compression bits cleared; timestamp type, transactional and control flags kept.
    let attributes = h.attributes & !0x07;
    b[OFF_ATTRIBUTES..OFF_ATTRIBUTES + 2].copy_from_slice(&attributes.to_be_bytes());
    b[BATCH_HEADER_LEN - 4..BATCH_HEADER_LEN]
        .copy_from_slice(&(records.len() as i32).to_be_bytes());
    for r in records {
        b.extend_from_slice(r);
    }
    let crc = crc32c::crc32c(&b[OFF_ATTRIBUTES..]);
    b[OFF_CRC..OFF_CRC + 4].copy_from_slice(&crc.to_be_bytes());
    b.freeze()
}

/// Recomputes the CRC32C of each whole batch in `buf`, from the start, until one does not fit:
/// lets a fuzzer's mutations reach the checks behind the CRC (it cannot guess a CRC).
pub fn refresh_crcs(buf: &mut [u8]) {
    let mut pos = 0usize;
    while pos + BATCH_HEADER_LEN <= buf.len() {
        let len = i32::from_be_bytes([buf[pos + 8], buf[pos + 9], buf[pos + 10], buf[pos + 11]]);
        let Ok(len) = usize::try_from(len) else {
            return;
        };
        let end = pos + LOG_OVERHEAD + len;
        if len < BATCH_HEADER_LEN - LOG_OVERHEAD || end > buf.len() {
            return;
        }
        let crc = crc32c::crc32c(&buf[pos + OFF_ATTRIBUTES..end]);
        buf[pos + OFF_CRC..pos + OFF_ATTRIBUTES].copy_from_slice(&crc.to_be_bytes());
        pos = end;
    }
}

/// One uncompressed v2 batch built record by record, each with its own timestamp, nullable
/// key and value, and header entries already in Kafka's record-header encoding (copied as
/// they are, so duplicate header keys and null header values survive). No producer id unless
/// [`BatchBuilder::finish_for`] names one.
#[derive(Debug, Default)]
pub struct BatchBuilder {
    records: BytesMut,
    rec: BytesMut,
    count: i32,
    base_timestamp: Option<i64>,
    max_timestamp: i64,
}

/// One record for [`BatchBuilder::push`].
#[derive(Debug, Clone, Copy)]
pub struct RecordParts<'a> {
    /// Timestamp in ms.
    pub timestamp: i64,
    /// None: a null key.
    pub key: Option<&'a [u8]>,
    /// None: a null value (tombstone).
    pub value: Option<&'a [u8]>,
    /// How many header entries `headers` holds.
    pub header_count: u32,
    /// Header entries in Kafka's encoding, without the count.
    pub headers: &'a [u8],
}

impl BatchBuilder {
    /// Records pushed so far.
    pub fn len(&self) -> i32 {
        self.count
    }

    /// Whether nothing was pushed.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Appends a record; its offset is the base offset plus the records before it.
    pub fn push(&mut self, r: RecordParts<'_>) {
        let base = *self.base_timestamp.get_or_insert(r.timestamp);
        self.max_timestamp = if self.count == 0 {
            r.timestamp
        } else {
            self.max_timestamp.max(r.timestamp)
        };
        let rec = &mut self.rec;
        rec.clear();
        rec.put_u8(0);
        put_varint(rec, r.timestamp.wrapping_sub(base));
        put_varint(rec, i64::from(self.count));
        for field in [r.key, r.value] {
            match field {
                Some(b) => {
                    put_varint(rec, b.len() as i64);
                    rec.extend_from_slice(b);
                }
                None => put_varint(rec, -1),
            }
        }
        put_varint(rec, i64::from(r.header_count));
        rec.extend_from_slice(r.headers);
        put_varint(&mut self.records, rec.len() as i64);
        self.records.extend_from_slice(rec);
        self.count += 1;
    }

    /// The batch, its records at `base_offset`, `base_offset + 1`, ...
    pub fn finish(self, base_offset: i64) -> Bytes {
        self.finish_for(base_offset, None)
    }

    /// Like [`Self::finish`], the batch written by `producer` (id, epoch, and the
    /// transactional (bit 4) and control (bit 5) attribute bits), base sequence unknown
    /// (-1): a transaction's records or marker handed back by an engine that keeps records.
    pub fn finish_for(self, base_offset: i64, producer: Option<(i64, i16, i16)>) -> Bytes {
        let (producer_id, epoch, attributes) = producer.unwrap_or((-1, -1, 0));
        let base_ts = self.base_timestamp.unwrap_or(-1);
        let mut b = BytesMut::with_capacity(BATCH_HEADER_LEN + self.records.len());
        b.put_i64(base_offset);
        b.put_i32((BATCH_HEADER_LEN - LOG_OVERHEAD + self.records.len()) as i32);
        b.put_i32(0); // partition leader epoch
        b.put_i8(2); // magic
        b.put_u32(0); // crc, filled below
        b.put_i16(attributes & 0x30); // uncompressed, CreateTime
        b.put_i32((self.count - 1).max(0));
        b.put_i64(base_ts);
        b.put_i64(if self.count == 0 {
            base_ts
        } else {
            self.max_timestamp
        });
        b.put_i64(producer_id);
        b.put_i16(epoch);
        b.put_i32(-1);
        b.put_i32(self.count);
        b.extend_from_slice(&self.records);
        let crc = crc32c::crc32c(&b[OFF_ATTRIBUTES..]);
        b[OFF_CRC..OFF_CRC + 4].copy_from_slice(&crc.to_be_bytes());
        b.freeze()
    }
}
