//! Decoding the records of a batch with the kafka-protocol crate, bounded by the batch's bytes.
//!
//! The crate reserves room for the header's record count, and for each record's header count,
//! before reading them; a client computes the CRC itself, so a batch that passes validation can
//! still claim 2^31 records or headers and make that reservation abort the process. This module
//! owns the one entry to the crate's record decoder: it hands the crate the (decompressed)
//! records only after walking them, every count checked against the bytes that remain.

use anyhow::anyhow;
use bytes::{Buf, Bytes};
use kafka_protocol::compression::{self as cmpr, Decompressor};
use kafka_protocol::records::{Compression, RecordBatchDecoder, RecordSet};

/// Offset of the record count in a v2 batch header.
const OFF_RECORD_COUNT: usize = 57;
/// Smallest encoded record: length, attributes, timestamp delta, offset delta, key length,
/// value length and header count, one byte each.
const MIN_RECORD: usize = 7;

/// Decodes the first batch in `batch` (records decompressed as needed).
pub fn decode(batch: &Bytes) -> Result<RecordSet, String> {
    let count = batch
        .get(OFF_RECORD_COUNT..OFF_RECORD_COUNT + 4)
        .map(|s| i32::from_be_bytes([s[0], s[1], s[2], s[3]]))
        .ok_or("batch shorter than its header")?;
    let mut b = batch.clone();
    let check = |records: &mut Bytes, c: Compression| -> anyhow::Result<Bytes> {
        let data = decompress(records, c)?;
        check_records(&data, count).map_err(|e| anyhow!("records: {e}"))?;
        Ok(data)
    };
    RecordBatchDecoder::decode_with_custom_compression(&mut b, Some(check))
        .map_err(|e| e.to_string())
}

fn decompress(records: &mut Bytes, c: Compression) -> anyhow::Result<Bytes> {
    fn all(b: &mut Bytes) -> anyhow::Result<Bytes> {
        Ok(b.copy_to_bytes(b.remaining()))
    }
    match c {
        Compression::None => <cmpr::None as Decompressor<Bytes>>::decompress(records, all),
        Compression::Gzip => cmpr::Gzip::decompress(records, all),
        Compression::Snappy => cmpr::Snappy::decompress(records, all),
        Compression::Lz4 => cmpr::Lz4::decompress(records, all),
        Compression::Zstd => cmpr::Zstd::decompress(records, all),
    }
}

/// Walks `count` records in `data`: every count and length must fit in what is left.
fn check_records(data: &[u8], count: i32) -> Result<(), &'static str> {
    let count = usize::try_from(count).map_err(|_| "negative record count")?;
    if count.saturating_mul(MIN_RECORD) > data.len() {
        return Err("record count past the end");
    }
    let mut r = data;
    for _ in 0..count {
        let size = len(&mut r)?.ok_or("negative record size")?;
        let (mut rec, rest) = (&r[..size], &r[size..]);
        r = rest;
        take(&mut rec, 1)?; // attributes
        varint(&mut rec, 10)?; // timestamp delta
        varint(&mut rec, 5)?; // offset delta
        for _ in 0..2 {
            // key, value
            if let Some(n) = len(&mut rec)? {
                take(&mut rec, n)?;
            }
        }
        let headers = len(&mut rec)?.ok_or("negative header count")?;
        // A header is a key length and a value length at least.
        if headers.saturating_mul(2) > rec.len() {
            return Err("header count past the end");
        }
        for _ in 0..headers {
            let key = len(&mut rec)?.ok_or("null header key")?;
            take(&mut rec, key)?;
            if let Some(n) = len(&mut rec)? {
                take(&mut rec, n)?;
            }
        }
    }
    Ok(())
}

fn take(r: &mut &[u8], n: usize) -> Result<(), &'static str> {
    if n > r.len() {
        return Err("length past the end");
    }
    *r = &r[n..];
    Ok(())
}

/// A zigzag varint of at most `max_bytes` bytes.
fn varint(r: &mut &[u8], max_bytes: usize) -> Result<i64, &'static str> {
    let mut raw: u64 = 0;
    for i in 0..max_bytes {
        let (&b, rest) = r.split_first().ok_or("varint past the end")?;
        *r = rest;
        raw |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Ok((raw >> 1) as i64 ^ -((raw & 1) as i64));
        }
    }
    Err("varint too long")
}

/// An int32 varint length or count: `None` for -1, an error below that or past the end.
fn len(r: &mut &[u8]) -> Result<Option<usize>, &'static str> {
    let n = varint(r, 5)?;
    match n {
        -1 => Ok(None),
        n if n < -1 || n > i64::from(i32::MAX) => Err("bad length"),
        n if n as usize > r.len() => Err("length past the end"),
        n => Ok(Some(n as usize)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::build::simple_batch;

    /// A batch of one record with `headers` claimed headers and none present, CRC fixed up.
    fn claiming_headers(headers: i32) -> Bytes {
        let mut b = simple_batch(1, 1, 1_700_000_000_000);
        // The last byte of a one-record batch without headers is its header count (0).
        let last = b.len() - 1;
        assert_eq!(b[last], 0);
        b.truncate(last);
        let zig = ((headers << 1) ^ (headers >> 31)) as u32;
        let mut v = zig;
        let mut enc = Vec::new();
        while v >= 0x80 {
            enc.push((v as u8 & 0x7f) | 0x80);
            v >>= 7;
        }
        enc.push(v as u8);
        b.extend_from_slice(&enc);
        fix_lengths(&mut b, enc.len() as i32 - 1);
        b.freeze()
    }

    /// Grows the batch and record length fields by `grow` bytes and recomputes the CRC.
    fn fix_lengths(b: &mut bytes::BytesMut, grow: i32) {
        let bl = i32::from_be_bytes([b[8], b[9], b[10], b[11]]) + grow;
        b[8..12].copy_from_slice(&bl.to_be_bytes());
        // The record's size varint sits right after the 61-byte header (one byte here).
        let size = i32::from(b[61] >> 1) + grow;
        b[61] = ((size << 1) ^ (size >> 31)) as u8;
        let crc = crc32c::crc32c(&b[21..]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
    }

    #[test]
    fn decodes_what_clients_send() {
        let set = decode(&simple_batch(3, 10, 1_700_000_000_000).freeze()).unwrap();
        assert_eq!(set.records.len(), 3);
        assert!(decode(&claiming_headers(0)).is_ok());
    }

    #[test]
    fn refuses_counts_past_the_end_before_the_crate_allocates() {
        for claimed in [i32::MAX, 1 << 20, 3] {
            let e = decode(&claiming_headers(claimed)).unwrap_err();
            assert!(e.contains("past the end"), "{claimed}: {e}");
        }
        let mut b = bytes::BytesMut::from(&simple_batch(1, 1, 0)[..]);
        b[OFF_RECORD_COUNT..OFF_RECORD_COUNT + 4].copy_from_slice(&i32::MAX.to_be_bytes());
        let crc = crc32c::crc32c(&b[21..]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        let e = decode(&b.freeze()).unwrap_err();
        assert!(e.contains("record count past the end"), "{e}");
    }
}
