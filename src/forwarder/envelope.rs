//! The value envelope: what a SeaweedMQ `DataMessage` (key, value, ts_ns) cannot carry of a
//! Kafka record — headers, a timestamp SeaweedMQ's clock cannot hold, an empty key or value
//! that is not null — travels inside the stored value, wrapped as
//!
//! `MAGIC (8) | crc32c (4, of what follows) | flags (1) | timestamp ms (8) |`
//! `value length (4, -1 null) | value | header count (4) | header entries (Kafka's encoding)`
//! `[| producer id (8) | producer epoch (2)]`
//!
//! The producer fields follow a transaction's records and markers (flags say which), which
//! must come back in batches of their producer for read_committed readers to tell them
//! apart. Only records that need it are wrapped, so other SeaweedMQ readers (the Go gateway) see
//! the plain key and value of every other record. A plain value that happens to begin with
//! the magic is wrapped too, so Kelp never mistakes data for an envelope; the CRC keeps a
//! foreign value that begins with the magic from being read as one. Pure functions; called
//! by [`super::records`].

use bytes::{BufMut, Bytes, BytesMut};

/// Starts every envelope: a NUL, "KELP", two bytes unlikely in text, the format version.
pub const MAGIC: [u8; 8] = [0x00, b'K', b'E', b'L', b'P', 0xEE, 0x76, 0x01];
/// The key of the record is empty, not null (SeaweedMQ stores both as no bytes).
const FLAG_EMPTY_KEY: u8 = 1;
/// The record belongs to a transaction: the producer fields follow the headers.
const FLAG_TXN: u8 = 2;
/// The record is a transaction marker (a control record; FLAG_TXN is set too).
const FLAG_CONTROL: u8 = 4;
/// Bytes of the producer fields.
const PRODUCER_LEN: usize = 8 + 2;
/// Bytes before the value: magic, crc, flags, timestamp, value length.
const FIXED: usize = 8 + 4 + 1 + 8 + 4;

/// The transaction a record belongs to: its producer, and whether it is the marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TxnTag {
    /// The producer id.
    pub producer_id: i64,
    /// The producer epoch.
    pub epoch: i16,
    /// A commit or abort marker (a control record), not a record of the transaction.
    pub control: bool,
}

impl TxnTag {
    /// The batch attribute bits of its batch: transactional, and control for a marker.
    pub fn attributes(self) -> i16 {
        if self.control {
            0x30
        } else {
            0x10
        }
    }
}

/// A Kafka record's fields as the envelope keeps them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opened {
    /// Timestamp in ms.
    pub timestamp: i64,
    /// The key was empty rather than null.
    pub empty_key: bool,
    /// None: a null value.
    pub value: Option<Bytes>,
    /// Header entries in Kafka's record-header encoding.
    pub header_count: u32,
    /// The entries themselves.
    pub headers: Bytes,
    /// The transaction it belongs to, if any.
    pub txn: Option<TxnTag>,
}

/// Wraps a record's value, timestamp, headers, key nullness and transaction into one stored
/// value.
pub fn wrap(
    timestamp: i64,
    empty_key: bool,
    value: Option<&[u8]>,
    header_count: u32,
    headers: &[u8],
    txn: Option<TxnTag>,
) -> Bytes {
    let vlen = value.map_or(0, <[u8]>::len);
    let mut b = BytesMut::with_capacity(FIXED + vlen + 4 + headers.len() + PRODUCER_LEN);
    b.extend_from_slice(&MAGIC);
    b.put_u32(0);
    let mut flags = if empty_key { FLAG_EMPTY_KEY } else { 0 };
    match txn {
        Some(t) if t.control => flags |= FLAG_TXN | FLAG_CONTROL,
        Some(_) => flags |= FLAG_TXN,
        None => {}
    }
    b.put_u8(flags);
    b.put_i64(timestamp);
    match value {
        Some(v) => {
            b.put_i32(v.len() as i32);
            b.extend_from_slice(v);
        }
        None => b.put_i32(-1),
    }
    b.put_u32(header_count);
    b.extend_from_slice(headers);
    if let Some(t) = txn {
        b.put_i64(t.producer_id);
        b.put_i16(t.epoch);
    }
    let crc = crc32c::crc32c(&b[12..]);
    b[8..12].copy_from_slice(&crc.to_be_bytes());
    b.freeze()
}

/// Whether a plain value would be taken for an envelope (so it must be wrapped itself).
pub fn looks_wrapped(value: &[u8]) -> bool {
    value.starts_with(&MAGIC)
}

/// The record inside `stored`, or None when it is not an envelope (a plain value, or bytes
/// that begin like one but do not check out).
pub fn open(stored: &Bytes) -> Option<Opened> {
    if stored.len() < FIXED + 4 || !looks_wrapped(stored) {
        return None;
    }
    let crc = u32::from_be_bytes(stored[8..12].try_into().ok()?);
    if crc32c::crc32c(&stored[12..]) != crc {
        return None;
    }
    let flags = stored[12];
    // Only flags Kelp writes: anything else is not an envelope of this version (a value
    // that happens to pass the CRC), kept as the plain value it is.
    let known = FLAG_EMPTY_KEY | FLAG_TXN | FLAG_CONTROL;
    if flags & !known != 0 || (flags & FLAG_CONTROL != 0 && flags & FLAG_TXN == 0) {
        return None;
    }
    let timestamp = i64::from_be_bytes(stored[13..21].try_into().ok()?);
    let vlen = i32::from_be_bytes(stored[21..25].try_into().ok()?);
    let mut pos = FIXED;
    let value = match vlen {
        -1 => None,
        n if n >= 0 && (n as usize) <= stored.len() - pos => {
            let v = stored.slice(pos..pos + n as usize);
            pos += n as usize;
            Some(v)
        }
        _ => return None,
    };
    let count_bytes = stored.get(pos..pos + 4)?;
    let header_count = u32::from_be_bytes(count_bytes.try_into().ok()?);
    pos += 4;
    let (headers_end, txn) = if flags & FLAG_TXN != 0 {
        let at = stored
            .len()
            .checked_sub(PRODUCER_LEN)
            .filter(|&at| at >= pos)?;
        let tag = TxnTag {
            producer_id: i64::from_be_bytes(stored[at..at + 8].try_into().ok()?),
            epoch: i16::from_be_bytes(stored[at + 8..at + 10].try_into().ok()?),
            control: flags & FLAG_CONTROL != 0,
        };
        (at, Some(tag))
    } else {
        (stored.len(), None)
    };
    let headers = stored.slice(pos..headers_end);
    if !crate::record::walk::headers_well_formed(&headers, header_count) {
        return None;
    }
    Some(Opened {
        timestamp,
        empty_key: flags & FLAG_EMPTY_KEY != 0,
        value,
        header_count,
        headers,
        txn,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapped_fields_come_back() {
        let hdrs = [2u8, b'h', 0]; // one header: key "h" (zigzag length 1), empty value
        let w = wrap(-5, true, Some(b""), 1, &hdrs, None);
        assert_eq!(
            open(&w),
            Some(Opened {
                timestamp: -5,
                empty_key: true,
                value: Some(Bytes::new()),
                header_count: 1,
                headers: Bytes::copy_from_slice(&hdrs),
                txn: None,
            })
        );
        let null = wrap(7, false, None, 0, &[], None);
        assert_eq!(open(&null).map(|o| o.value), Some(None));
        // A transaction's record and marker keep their producer, headers intact.
        for control in [false, true] {
            let tag = TxnTag {
                producer_id: 1 << 40,
                epoch: 7,
                control,
            };
            let w = wrap(3, false, Some(b"v"), 1, &hdrs, Some(tag));
            let o = open(&w).unwrap();
            assert_eq!((o.txn, &o.headers[..]), (Some(tag), &hdrs[..]));
        }
    }

    #[test]
    fn plain_values_and_damaged_envelopes_are_not_opened() {
        assert_eq!(open(&Bytes::from_static(b"hello")), None);
        let mut w = wrap(1, false, Some(b"value"), 0, &[], None).to_vec();
        // A value that merely starts with the magic fails the CRC.
        w[20] ^= 1;
        assert_eq!(open(&Bytes::from(w.clone())), None);
        // A truncated envelope is not read past its end.
        let whole = wrap(1, false, Some(b"value"), 0, &[], None);
        for cut in 0..whole.len() {
            let mut t = whole[..cut].to_vec();
            let crc = crc32c::crc32c(t.get(12..).unwrap_or(&[]));
            if t.len() >= 12 {
                t[8..12].copy_from_slice(&crc.to_be_bytes());
            }
            assert_eq!(open(&Bytes::from(t)), None, "cut at {cut}");
        }
        // Flags Kelp never writes (found by the fuzz target: a value whose CRC happened to
        // check out, opened and wrapped back to other bytes) make it a plain value.
        for flags in [0x08u8, 0xff, FLAG_CONTROL] {
            let mut t = whole.to_vec();
            t[12] = flags;
            let crc = crc32c::crc32c(&t[12..]);
            t[8..12].copy_from_slice(&crc.to_be_bytes());
            assert_eq!(open(&Bytes::from(t)), None, "flags {flags:#x}");
        }
    }
}
