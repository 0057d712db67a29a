//! Log compaction decisions (`cleanup.policy=compact`): which records of the sealed
//! segments stay. Pure: [`super::PartitionLog::compact`] reads the segments, feeds their
//! batches through a [`KeyMap`] and then [`clean_batch`], and swaps the cleaned segments in.
//!
//! Kafka's rules, offsets preserved: a record stays while it is the latest of its key in the
//! mapped range (records past the range stay too: the next round sees them); a keyless
//! record goes (Produce refuses them on compacted topics; older ones go as Kafka's cleaner
//! drops them); a tombstone that is the latest of its key stays until its batch is older
//! than `delete.retention.ms`. Kept whole: transactional and control batches (their markers
//! and aborted records are for readers to filter), and each idempotent producer's last
//! batch in the range, whose header recovery rebuilds the producer's sequence from. A batch
//! left with some of its records is rebuilt uncompressed with the same base offset, last
//! offset delta, timestamps and producer fields; one left with none goes.
//!
//! Keys are mapped by a 16-byte SHA-256 prefix (as Kafka maps them by MD5), so the map's
//! memory is bounded by its key capacity, not by key sizes.

use std::collections::HashMap;

use bytes::Bytes;
use sha2::{Digest, Sha256};

use crate::record::batch::BatchHeader;
use crate::record::walk::{Records, WalkError};

/// Bytes one mapped key may cost, for sizing the map from a memory budget: the digest and
/// the offset (24 bytes), the hash table's control bytes and spare buckets, and the old and
/// new tables side by side while it grows.
pub const BYTES_PER_KEY: usize = 96;

/// What the cleaner needs besides the batches.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// Now, in ms since the epoch.
    pub now_ms: i64,
    /// `delete.retention.ms`: how long a latest tombstone stays.
    pub delete_retention_ms: i64,
    /// Largest inflated size of a compressed batch's records.
    pub inflate_cap: usize,
}

/// The latest offset of each key in a range of batches, and each idempotent producer's last
/// batch there.
#[derive(Debug)]
pub struct KeyMap {
    latest: HashMap<[u8; 16], i64>,
    last_of_producer: HashMap<i64, i64>,
    capacity: usize,
    /// Offset after the last batch mapped: the end of the range cleaned.
    end: i64,
}

fn digest(key: &[u8]) -> [u8; 16] {
    let d = Sha256::digest(key);
    let mut out = [0u8; 16];
    out.copy_from_slice(&d[..16]);
    out
}

impl KeyMap {
    /// An empty map for at most `capacity` entries (keys and producers), starting at offset
    /// `start`, knowing `producers`' last batches (producer id to base offset) already.
    pub fn new(capacity: usize, start: i64, producers: HashMap<i64, i64>) -> Self {
        KeyMap {
            latest: HashMap::new(),
            last_of_producer: producers,
            capacity,
            end: start,
        }
    }

    /// Offset after the last batch mapped.
    pub fn end(&self) -> i64 {
        self.end
    }

    /// Keys mapped.
    pub fn len(&self) -> usize {
        self.latest.len()
    }

    /// Whether no key is mapped.
    pub fn is_empty(&self) -> bool {
        self.latest.is_empty()
    }

    /// Maps the next batch's keys; false (nothing mapped) when they might not fit, which
    /// ends the range. Transactional and control batches are mapped as a range position
    /// only: they are kept whole, and their keys keep nothing else alive.
    pub fn add(&mut self, batch: &Bytes, h: &BatchHeader, s: &Settings) -> Result<bool, WalkError> {
        let held = self.latest.len() + self.last_of_producer.len();
        if held + h.record_count.max(0) as usize + 1 > self.capacity {
            return Ok(false);
        }
        if h.producer_id >= 0 {
            let last = self
                .last_of_producer
                .entry(h.producer_id)
                .or_insert(h.base_offset);
            *last = (*last).max(h.base_offset);
        }
        if !(h.is_control() || h.is_transactional()) {
            let mut records = Records::new(batch, s.inflate_cap)?;
            while let Some(r) = records.next_record()? {
                if let Some(k) = r.key {
                    let offset = h.base_offset + i64::from(r.offset_delta);
                    self.latest.insert(digest(&k), offset);
                }
            }
        }
        self.end = h.last_offset() + 1;
        Ok(true)
    }
}

/// What becomes of one batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Kept as it is.
    Whole,
    /// Every record goes.
    Gone,
    /// Kept with fewer records: the rebuilt batch.
    Rebuilt(Bytes),
}

/// Cleans one batch of the mapped range against `map` (see the module docs).
pub fn clean_batch(
    batch: &Bytes,
    h: &BatchHeader,
    map: &KeyMap,
    s: &Settings,
) -> Result<Outcome, WalkError> {
    if h.last_offset() >= map.end || h.is_control() || h.is_transactional() {
        return Ok(Outcome::Whole);
    }
    if h.producer_id >= 0 && map.last_of_producer.get(&h.producer_id) == Some(&h.base_offset) {
        return Ok(Outcome::Whole);
    }
    let tombstones_expire = h.max_timestamp < s.now_ms.saturating_sub(s.delete_retention_ms);
    let mut records = Records::new(batch, s.inflate_cap)?;
    let mut kept = Vec::new();
    let mut seen = 0;
    while let Some((r, raw)) = records.next_record_raw()? {
        seen += 1;
        let Some(key) = r.key else {
            continue;
        };
        let offset = h.base_offset + i64::from(r.offset_delta);
        let latest = map.latest.get(&digest(&key)).is_none_or(|&l| l <= offset);
        if latest && !(r.value.is_none() && tombstones_expire) {
            kept.push(raw);
        }
    }
    Ok(match kept.len() {
        0 => Outcome::Gone,
        n if n == seen => Outcome::Whole,
        _ => Outcome::Rebuilt(crate::record::build::rebuild(batch, h, &kept)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::build::{BatchBuilder, RecordParts};
    use crate::record::walk::check_records;

    const S: Settings = Settings {
        now_ms: 10_000_000,
        delete_retention_ms: 1000,
        inflate_cap: 1 << 20,
    };

    /// A batch at `base` of (key, value) records, timestamps `ts`.
    fn batch(base: i64, ts: i64, recs: &[(Option<&str>, Option<&str>)]) -> (BatchHeader, Bytes) {
        let mut b = BatchBuilder::default();
        for (k, v) in recs {
            b.push(RecordParts {
                timestamp: ts,
                key: k.map(str::as_bytes),
                value: v.map(str::as_bytes),
                header_count: 0,
                headers: &[],
            });
        }
        let bytes = b.finish(base);
        (BatchHeader::parse(&bytes).unwrap(), bytes)
    }

    fn values(b: &Bytes) -> Vec<(i64, Option<String>, Option<String>)> {
        let h = BatchHeader::parse(b).unwrap();
        let mut r = Records::new(b, 1 << 20).unwrap();
        let mut out = Vec::new();
        while let Some(x) = r.next_record().unwrap() {
            let s = |b: Option<Bytes>| b.map(|b| String::from_utf8(b.to_vec()).unwrap());
            out.push((
                h.base_offset + i64::from(x.offset_delta),
                s(x.key),
                s(x.value),
            ));
        }
        out
    }

    #[test]
    fn the_latest_of_each_key_stays_at_its_offset() {
        let now = S.now_ms;
        let b0 = batch(
            0,
            now,
            &[
                (Some("a"), Some("1")),
                (Some("b"), Some("1")),
                (Some("a"), Some("2")),
            ],
        );
        let b1 = batch(
            3,
            now,
            &[
                (Some("c"), Some("1")),
                (None, Some("x")),
                (Some("b"), Some("2")),
            ],
        );
        let b2 = batch(6, now, &[(Some("a"), Some("3"))]);
        let mut map = KeyMap::new(100, 0, HashMap::new());
        for (h, b) in [&b0, &b1, &b2] {
            assert!(map.add(b, h, &S).unwrap());
        }
        assert_eq!((map.len(), map.end()), (3, 7));
        // b0: everything superseded later.
        assert_eq!(clean_batch(&b0.1, &b0.0, &map, &S).unwrap(), Outcome::Gone);
        // b1: c stays at offset 3, the keyless record goes, b's latest stays at offset 5.
        let Outcome::Rebuilt(r) = clean_batch(&b1.1, &b1.0, &map, &S).unwrap() else {
            panic!("b1 should be rebuilt");
        };
        let h = BatchHeader::parse(&r).unwrap();
        assert_eq!(
            (h.base_offset, h.last_offset_delta, h.record_count),
            (3, 2, 2)
        );
        assert_eq!(check_records(&r, 1 << 20).unwrap(), 2);
        assert!(crate::log::scan::scan(&r, 3, true).1 == crate::log::scan::Stop::End);
        assert_eq!(
            values(&r),
            [
                (3, Some("c".into()), Some("1".into())),
                (5, Some("b".into()), Some("2".into()))
            ]
        );
        assert_eq!(clean_batch(&b2.1, &b2.0, &map, &S).unwrap(), Outcome::Whole);
    }

    #[test]
    fn tombstones_stay_until_delete_retention_passes() {
        let old = S.now_ms - 5000;
        let fresh = S.now_ms;
        let t_old = batch(0, old, &[(Some("a"), None)]);
        let t_new = batch(1, fresh, &[(Some("b"), None)]);
        let mut map = KeyMap::new(10, 0, HashMap::new());
        assert!(map.add(&t_old.1, &t_old.0, &S).unwrap());
        assert!(map.add(&t_new.1, &t_new.0, &S).unwrap());
        assert_eq!(
            clean_batch(&t_old.1, &t_old.0, &map, &S).unwrap(),
            Outcome::Gone
        );
        assert_eq!(
            clean_batch(&t_new.1, &t_new.0, &map, &S).unwrap(),
            Outcome::Whole
        );
    }

    #[test]
    fn a_full_map_ends_the_range_and_later_batches_stay_whole() {
        let now = S.now_ms;
        let b0 = batch(0, now, &[(Some("a"), Some("1")), (Some("b"), Some("1"))]);
        let b1 = batch(2, now, &[(Some("a"), Some("2")), (Some("c"), Some("1"))]);
        let mut map = KeyMap::new(3, 0, HashMap::new());
        assert!(map.add(&b0.1, &b0.0, &S).unwrap());
        assert!(!map.add(&b1.1, &b1.0, &S).unwrap());
        assert_eq!(map.end(), 2);
        // a's newer value is past the range: nothing in b0 is known superseded.
        assert_eq!(clean_batch(&b0.1, &b0.0, &map, &S).unwrap(), Outcome::Whole);
        assert_eq!(clean_batch(&b1.1, &b1.0, &map, &S).unwrap(), Outcome::Whole);
    }

    #[test]
    fn producer_last_batches_and_transactions_stay_whole() {
        let now = S.now_ms;
        let (mut h0, b0) = batch(0, now, &[(Some("a"), Some("1"))]);
        let (mut h1, b1) = batch(1, now, &[(Some("a"), Some("2"))]);
        let b2 = batch(2, now, &[(Some("a"), Some("3"))]);
        // Producer 7 wrote b0 and b1 (headers only: the cleaner reads pid from them).
        h0.producer_id = 7;
        h1.producer_id = 7;
        let mut map = KeyMap::new(10, 0, HashMap::new());
        assert!(map.add(&b0, &h0, &S).unwrap());
        assert!(map.add(&b1, &h1, &S).unwrap());
        assert!(map.add(&b2.1, &b2.0, &S).unwrap());
        assert_eq!(clean_batch(&b0, &h0, &map, &S).unwrap(), Outcome::Gone);
        assert_eq!(clean_batch(&b1, &h1, &map, &S).unwrap(), Outcome::Whole);
        // The partition's producer state names b0 as producer 7's last batch: it stays.
        let mut map = KeyMap::new(10, 0, HashMap::from([(7, 0)]));
        assert!(map.add(&b2.1, &b2.0, &S).unwrap());
        assert_eq!(clean_batch(&b0, &h0, &map, &S).unwrap(), Outcome::Whole);
        let mut txn = h0;
        txn.attributes |= 0x10;
        assert_eq!(clean_batch(&b0, &txn, &map, &S).unwrap(), Outcome::Whole);
    }
}
