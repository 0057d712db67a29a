//! Log compaction decisions (`cleanup.policy=compact`): which records of the sealed
//! segments stay. Pure: [`super::PartitionLog::compact`] reads the segments, feeds their
//! batches through a [`KeyMap`] and then [`clean_batch`], and swaps the cleaned segments in.
//!
//! Kafka's rules, offsets preserved: a record stays while it is the latest of its key in the
//! mapped range (records past the range stay too: the next round sees them); a keyless
//! record goes (Produce refuses them on compacted topics; older ones go as Kafka's cleaner
//! drops them); a tombstone that is the latest of its key stays until its batch is older
//! than `delete.retention.ms`. Each idempotent producer's last batch in the range stays
//! whole: recovery rebuilds the producer's sequence from its header. A batch left with some
//! of its records is rebuilt uncompressed with the same base offset, last offset delta,
//! timestamps, producer fields and flags; one left with none goes.
//!
//! Transactions (KIP-98), as Kafka's cleaner treats them: the range ends before the last
//! stable offset (an open transaction's records may still be aborted); a committed
//! transaction's records are compacted like any others; an aborted one's go whole and map no
//! keys; a commit or abort marker stays while any record of its transaction does (recovery
//! and read_committed readers need it to place them), then goes once it is older than
//! `delete.retention.ms` (Kafka counts from the round that first found it removable; the
//! marker's own timestamp is used here). A [`Markers`] walk from the log's first batch tells
//! which transactions still hold records.
//!
//! Keys are mapped by a 16-byte SHA-256 prefix (as Kafka maps them by MD5), so the map's
//! memory is bounded by its key capacity, not by key sizes.

use std::collections::{HashMap, HashSet};

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

/// What the partition knows that the log's bytes do not say.
#[derive(Debug, Clone, Default)]
pub struct PartitionFacts {
    /// Each idempotent producer's last batch (producer id to base offset).
    pub producers: HashMap<i64, i64>,
    /// The last stable offset: the cleaned range ends before it.
    pub stable_to: i64,
    /// Aborted transactions still in the log: (producer id, first offset, marker offset).
    pub aborted: Vec<(i64, i64, i64)>,
}

/// The latest offset of each key in a range of batches, and each idempotent producer's last
/// batch there.
#[derive(Debug)]
pub struct KeyMap {
    latest: HashMap<[u8; 16], i64>,
    last_of_producer: HashMap<i64, i64>,
    /// Producer id -> its aborted transactions' (first offset, marker offset), in order.
    aborted: HashMap<i64, Vec<(i64, i64)>>,
    stable_to: i64,
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
    /// `start`, with what the partition knows (`facts`).
    pub fn new(capacity: usize, start: i64, facts: PartitionFacts) -> Self {
        let mut aborted: HashMap<i64, Vec<(i64, i64)>> = HashMap::new();
        for (pid, first, last) in facts.aborted {
            aborted.entry(pid).or_default().push((first, last));
        }
        for spans in aborted.values_mut() {
            spans.sort_unstable();
        }
        KeyMap {
            latest: HashMap::new(),
            last_of_producer: facts.producers,
            aborted,
            stable_to: facts.stable_to,
            capacity,
            end: start,
        }
    }

    /// Whether the transactional data batch `h` belongs to an aborted transaction.
    fn is_aborted(&self, h: &BatchHeader) -> bool {
        self.aborted.get(&h.producer_id).is_some_and(|spans| {
            let i = spans.partition_point(|&(first, _)| first <= h.base_offset);
            i > 0 && spans[i - 1].1 > h.base_offset
        })
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

    /// Maps the next batch's keys; false (nothing mapped) when they might not fit or the
    /// batch reaches the last stable offset, which ends the range. Markers and aborted
    /// transactions' records are mapped as a range position only: their keys keep nothing
    /// else alive.
    pub fn add(&mut self, batch: &Bytes, h: &BatchHeader, s: &Settings) -> Result<bool, WalkError> {
        let held = self.latest.len() + self.last_of_producer.len();
        if held + h.record_count.max(0) as usize + 1 > self.capacity
            || h.last_offset() >= self.stable_to
        {
            return Ok(false);
        }
        if h.producer_id >= 0 {
            let last = self
                .last_of_producer
                .entry(h.producer_id)
                .or_insert(h.base_offset);
            *last = (*last).max(h.base_offset);
        }
        if !(h.is_control() || (h.is_transactional() && self.is_aborted(h))) {
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

/// The transactions a cleaning walk (in offset order, from the log's first batch) is in the
/// middle of: the producers whose current transaction kept records, so its marker stays.
#[derive(Debug, Clone, Default)]
pub struct Markers {
    holding: HashSet<i64>,
}

/// Cleans one batch against `map` (see the module docs), batches walked in offset order from
/// the log's first, `markers` carried from one to the next.
pub fn clean_batch(
    batch: &Bytes,
    h: &BatchHeader,
    map: &KeyMap,
    s: &Settings,
    markers: &mut Markers,
) -> Result<Outcome, WalkError> {
    let outcome = decide(batch, h, map, s, markers)?;
    if h.producer_id >= 0 && h.is_transactional() {
        if h.is_control() {
            markers.holding.remove(&h.producer_id);
        } else if outcome != Outcome::Gone {
            markers.holding.insert(h.producer_id);
        }
    }
    Ok(outcome)
}

fn decide(
    batch: &Bytes,
    h: &BatchHeader,
    map: &KeyMap,
    s: &Settings,
    markers: &Markers,
) -> Result<Outcome, WalkError> {
    if h.last_offset() >= map.end {
        return Ok(Outcome::Whole);
    }
    if h.producer_id >= 0 && map.last_of_producer.get(&h.producer_id) == Some(&h.base_offset) {
        return Ok(Outcome::Whole);
    }
    let expired = h.max_timestamp < s.now_ms.saturating_sub(s.delete_retention_ms);
    if h.is_control() {
        let done = h.is_transactional() && !markers.holding.contains(&h.producer_id);
        return Ok(if done && expired {
            Outcome::Gone
        } else {
            Outcome::Whole
        });
    }
    if h.is_transactional() && map.is_aborted(h) {
        return Ok(Outcome::Gone);
    }
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
        if latest && !(r.value.is_none() && expired) {
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
    use crate::record::control::ControlType;
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

    /// Facts of a partition with no transaction and nothing unstable.
    fn open() -> PartitionFacts {
        PartitionFacts {
            stable_to: i64::MAX,
            ..PartitionFacts::default()
        }
    }

    /// One batch cleaned alone (no transaction met before it).
    fn clean(b: &Bytes, h: &BatchHeader, map: &KeyMap) -> Outcome {
        clean_batch(b, h, map, &S, &mut Markers::default()).unwrap()
    }

    /// Producer `pid`'s transactional batch at `base`.
    fn txn_batch(base: i64, pid: i64, ts: i64, recs: &[(&str, &str)]) -> (BatchHeader, Bytes) {
        let mut b = BatchBuilder::default();
        for (k, v) in recs {
            b.push(RecordParts {
                timestamp: ts,
                key: Some(k.as_bytes()),
                value: Some(v.as_bytes()),
                header_count: 0,
                headers: &[],
            });
        }
        let bytes = b.finish_for(base, Some((pid, 0, 0x10)));
        (BatchHeader::parse(&bytes).unwrap(), bytes)
    }

    /// Producer `pid`'s commit or abort marker at `base`.
    fn marker(base: i64, pid: i64, ts: i64, kind: ControlType) -> (BatchHeader, Bytes) {
        let mut m = crate::record::control::marker_batch(kind, pid, 0, 0, ts);
        m[..8].copy_from_slice(&base.to_be_bytes());
        let bytes = m.freeze();
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
        let mut map = KeyMap::new(100, 0, open());
        for (h, b) in [&b0, &b1, &b2] {
            assert!(map.add(b, h, &S).unwrap());
        }
        assert_eq!((map.len(), map.end()), (3, 7));
        // b0: everything superseded later.
        assert_eq!(clean(&b0.1, &b0.0, &map), Outcome::Gone);
        // b1: c stays at offset 3, the keyless record goes, b's latest stays at offset 5.
        let Outcome::Rebuilt(r) = clean(&b1.1, &b1.0, &map) else {
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
        assert_eq!(clean(&b2.1, &b2.0, &map), Outcome::Whole);
    }

    #[test]
    fn tombstones_stay_until_delete_retention_passes() {
        let old = S.now_ms - 5000;
        let fresh = S.now_ms;
        let t_old = batch(0, old, &[(Some("a"), None)]);
        let t_new = batch(1, fresh, &[(Some("b"), None)]);
        let mut map = KeyMap::new(10, 0, open());
        assert!(map.add(&t_old.1, &t_old.0, &S).unwrap());
        assert!(map.add(&t_new.1, &t_new.0, &S).unwrap());
        assert_eq!(clean(&t_old.1, &t_old.0, &map), Outcome::Gone);
        assert_eq!(clean(&t_new.1, &t_new.0, &map), Outcome::Whole);
    }

    #[test]
    fn a_full_map_ends_the_range_and_later_batches_stay_whole() {
        let now = S.now_ms;
        let b0 = batch(0, now, &[(Some("a"), Some("1")), (Some("b"), Some("1"))]);
        let b1 = batch(2, now, &[(Some("a"), Some("2")), (Some("c"), Some("1"))]);
        let mut map = KeyMap::new(3, 0, open());
        assert!(map.add(&b0.1, &b0.0, &S).unwrap());
        assert!(!map.add(&b1.1, &b1.0, &S).unwrap());
        assert_eq!(map.end(), 2);
        // a's newer value is past the range: nothing in b0 is known superseded.
        assert_eq!(clean(&b0.1, &b0.0, &map), Outcome::Whole);
        assert_eq!(clean(&b1.1, &b1.0, &map), Outcome::Whole);
    }

    #[test]
    fn producer_last_batches_stay_whole() {
        let now = S.now_ms;
        let (mut h0, b0) = batch(0, now, &[(Some("a"), Some("1"))]);
        let (mut h1, b1) = batch(1, now, &[(Some("a"), Some("2"))]);
        let b2 = batch(2, now, &[(Some("a"), Some("3"))]);
        // Producer 7 wrote b0 and b1 (headers only: the cleaner reads pid from them).
        h0.producer_id = 7;
        h1.producer_id = 7;
        let mut map = KeyMap::new(10, 0, open());
        assert!(map.add(&b0, &h0, &S).unwrap());
        assert!(map.add(&b1, &h1, &S).unwrap());
        assert!(map.add(&b2.1, &b2.0, &S).unwrap());
        assert_eq!(clean(&b0, &h0, &map), Outcome::Gone);
        assert_eq!(clean(&b1, &h1, &map), Outcome::Whole);
        // The partition's producer state names b0 as producer 7's last batch: it stays.
        let mut map = KeyMap::new(
            10,
            0,
            PartitionFacts {
                producers: HashMap::from([(7, 0)]),
                ..open()
            },
        );
        assert!(map.add(&b2.1, &b2.0, &S).unwrap());
        assert_eq!(clean(&b0, &h0, &map), Outcome::Whole);
        let mut txn = h0;
        txn.attributes |= 0x10;
        assert_eq!(clean(&b0, &txn, &map), Outcome::Whole);
    }

    /// Kafka's rules: a committed transaction's records compact like others, an aborted
    /// one's go and supersede nothing, and a marker stays while its transaction keeps
    /// records, then goes once older than delete.retention.ms.
    #[test]
    fn transactions_compact_and_their_markers_go_with_their_records() {
        let now = S.now_ms;
        let old = now - 5000;
        let b0 = batch(0, old, &[(Some("a"), Some("1"))]);
        let t1 = txn_batch(1, 5, old, &[("a", "2"), ("b", "1")]);
        let m1 = marker(3, 5, old, ControlType::Commit);
        let t2 = txn_batch(4, 6, old, &[("a", "x")]);
        let m2 = marker(5, 6, old, ControlType::Abort);
        let t3 = txn_batch(6, 5, old, &[("c", "1")]);
        let m3 = marker(7, 5, now, ControlType::Commit);
        // Later transactions, so that the markers above are not their producer's last batch
        // (which stays whole).
        let t4 = txn_batch(8, 6, now, &[("d", "1")]);
        let m4 = marker(9, 6, now, ControlType::Commit);
        let t5 = txn_batch(10, 5, now, &[("e", "1")]);
        let m5 = marker(11, 5, now, ControlType::Commit);
        let b12 = batch(12, now, &[(Some("b"), Some("2")), (Some("c"), Some("2"))]);
        let all = [&b0, &t1, &m1, &t2, &m2, &t3, &m3, &t4, &m4, &t5, &m5, &b12];
        let facts = PartitionFacts {
            aborted: vec![(6, 4, 5)],
            ..open()
        };
        let mut map = KeyMap::new(100, 0, facts);
        for (h, b) in all {
            assert!(map.add(b, h, &S).unwrap());
        }
        let walk = |s: &Settings| -> Vec<Outcome> {
            let mut markers = Markers::default();
            all.iter()
                .map(|(h, b)| clean_batch(b, h, &map, s, &mut markers).unwrap())
                .collect()
        };
        let out = walk(&S);
        // a=1 superseded by the committed a=2, which the aborted a=x does not supersede.
        assert_eq!(out[0], Outcome::Gone);
        let Outcome::Rebuilt(r) = &out[1] else {
            panic!("t1 keeps a=2 only: {:?}", out[1]);
        };
        let h = BatchHeader::parse(r).unwrap();
        assert!(h.is_transactional() && h.producer_id == 5);
        assert_eq!(values(r), [(1, Some("a".into()), Some("2".into()))]);
        // t1 kept a record: its commit marker stays, old as it is.
        assert_eq!(out[2], Outcome::Whole);
        // The aborted transaction goes whole, and its marker, with nothing left, too.
        assert_eq!((&out[3], &out[4]), (&Outcome::Gone, &Outcome::Gone));
        // t3's only record is superseded by b12; its marker is too recent to go yet.
        assert_eq!((&out[5], &out[6]), (&Outcome::Gone, &Outcome::Whole));
        assert!(out[7..].iter().all(|o| *o == Outcome::Whole), "{out:?}");
        // A later round, once that marker is old: it goes; t1's stays with a=2.
        let later = walk(&Settings {
            now_ms: now + 10_000,
            ..S
        });
        assert_eq!((&later[2], &later[6]), (&Outcome::Whole, &Outcome::Gone));
        // The last batch of each producer stays however old.
        assert_eq!((&later[8], &later[10]), (&Outcome::Whole, &Outcome::Whole));
    }

    /// An open transaction's records may still be aborted: the range ends before the last
    /// stable offset, and what is past it stays whole.
    #[test]
    fn the_range_ends_before_the_last_stable_offset() {
        let now = S.now_ms;
        let b0 = batch(0, now, &[(Some("a"), Some("1"))]);
        let t1 = txn_batch(1, 5, now, &[("a", "2")]);
        let facts = PartitionFacts {
            stable_to: 1,
            ..PartitionFacts::default()
        };
        let mut map = KeyMap::new(100, 0, facts);
        assert!(map.add(&b0.1, &b0.0, &S).unwrap());
        assert!(!map.add(&t1.1, &t1.0, &S).unwrap());
        assert_eq!(map.end(), 1);
        assert_eq!(clean(&b0.1, &b0.0, &map), Outcome::Whole);
        assert_eq!(clean(&t1.1, &t1.0, &map), Outcome::Whole);
    }
}
