//! Write-ahead journal of a partition's idempotent producers on the filer, so that a retry
//! reaching the partition's next leader (another node after a handover or a kill -9, or this
//! node after a restart) is still recognised as a duplicate.
//!
//! One file per partition, `/topics/kafka/.meta/kelp/clusters/<cluster>/producers/<topic>/<p>`,
//! tied to the topic incarnation and rewritten whole by the partition's publisher. It holds
//! the producers' last batches SeaweedMQ acknowledged (with their offsets), the offset where
//! the records not yet acknowledged start (`anchor`), and the batches not yet acknowledged, in
//! send order: producer, epoch, sequences, record count and a checksum of their records. A
//! batch of an idempotent producer is sent only once a write naming it is on the filer, so
//! every such batch SeaweedMQ may hold is in the file, acknowledged or pending.
//!
//! The next leader reads the file and SeaweedMQ's records from the anchor ([`recover`]), and
//! takes a pending batch as stored only when the next records there are exactly its records
//! (count and checksum), in order. The first that is not ends the walk: it and what follows
//! are taken as not stored, so a retry of them may be appended twice but is never answered
//! as a duplicate of records that are not there. Pure, but for the filer calls at the end.

use std::collections::{BTreeMap, HashMap, VecDeque};

use kelp_storage_client::filer;
use serde::{Deserialize, Serialize};

use super::client::{storage, Forwarder};
use super::records::Pending;
use crate::cluster::ownership::ProducedBatch;
use crate::error::KelpError;
use crate::record::batch::add_seq;

/// Batches kept per producer (Kafka's dedup window: five in flight).
const PER_PRODUCER: usize = 5;
/// Producers kept per partition; beyond it the least recently active are forgotten (a late
/// retry of theirs after a move could then be appended twice).
const MAX_PRODUCERS: usize = 4096;

/// Checksum of one record's content (key, value, headers), both when it is produced and when
/// it is read back from SeaweedMQ.
pub fn record_crc(key: Option<&[u8]>, value: Option<&[u8]>, headers: &[u8]) -> u32 {
    let mut c = 0u32;
    for part in [key, value, Some(headers)] {
        match part {
            Some(b) => {
                c = crc32c::crc32c_append(c, &(b.len() as u64).to_le_bytes());
                c = crc32c::crc32c_append(c, b);
            }
            None => c = crc32c::crc32c_append(c, &u64::MAX.to_le_bytes()),
        }
    }
    c
}

/// Checksum of a batch: of its records' checksums, in order.
fn batch_crc(records: impl IntoIterator<Item = u32>) -> u32 {
    records
        .into_iter()
        .fold(0, |c, r| crc32c::crc32c_append(c, &r.to_le_bytes()))
}

/// A stored batch in the file: producer, epoch, first and last sequence, first offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct Stored(i64, i16, i32, i32, i64);

/// A batch sent (or about to be) and not yet acknowledged: producer (-1 for none), epoch,
/// first and last sequence, record count, checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Intent(i64, i16, i32, i32, u32, u32);

impl Intent {
    /// The intent for a batch of `records` from producer `producer_id` (-1: not idempotent).
    pub fn new(producer_id: i64, epoch: i16, first_seq: i32, records: &[Pending]) -> Intent {
        let n = records.len() as u32;
        let last_seq = add_seq(
            first_seq,
            i32::try_from(n.saturating_sub(1)).unwrap_or(i32::MAX),
        );
        let crc = batch_crc(
            records
                .iter()
                .map(|r| record_crc(r.key.as_deref(), r.value.as_deref(), &r.headers)),
        );
        Intent(producer_id, epoch, first_seq, last_seq, n, crc)
    }

    fn idempotent(&self) -> bool {
        self.0 >= 0
    }
}

/// The file's body (besides the topic id).
#[derive(Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct JournalFile {
    anchor: i64,
    stored: Vec<Stored>,
    pending: Vec<Intent>,
}

/// The publisher's side: what the next write puts in the file, and which batches may go out.
#[derive(Debug)]
pub struct Journal {
    /// Per producer: its last batches SeaweedMQ acknowledged, oldest first, and when it
    /// last had one (a counter), to forget the least active first.
    producers: HashMap<i64, (VecDeque<ProducedBatch>, u64)>,
    /// Batches not yet resolved, by intent number (send order).
    pending: BTreeMap<u64, Intent>,
    next: u64,
    /// Offset after the last record of the last acknowledged batch.
    anchor: i64,
    /// Intents below this number must be on the filer before their batch is sent.
    needed: u64,
    /// Intents below this number are on the filer.
    durable: u64,
    /// A write covering the intents below this number is under way.
    writing: Option<u64>,
    ticks: u64,
}

impl Journal {
    /// A journal starting from the producer state a tenure found (`stored`, oldest first)
    /// at offset `anchor` (the high water mark then).
    pub fn new(stored: &[ProducedBatch], anchor: i64) -> Journal {
        let mut j = Journal {
            producers: HashMap::new(),
            pending: BTreeMap::new(),
            next: 0,
            anchor,
            needed: 0,
            durable: 0,
            writing: None,
            ticks: 0,
        };
        for b in stored {
            j.remember(*b);
        }
        j
    }

    /// Sets where pending records start when the journal was made without it (negative).
    pub fn start_at(&mut self, offset: i64) {
        if self.anchor < 0 {
            self.anchor = offset;
        }
    }

    /// Takes a batch that is about to be queued; returns its intent number.
    pub fn intend(&mut self, intent: Intent) -> u64 {
        let id = self.next;
        self.next += 1;
        if intent.idempotent() {
            self.needed = self.next;
        }
        self.pending.insert(id, intent);
        id
    }

    /// Whether the batch of intent `id` may be sent now.
    pub fn sendable(&self, id: u64) -> bool {
        id < self.durable || !self.pending.get(&id).is_some_and(Intent::idempotent)
    }

    /// SeaweedMQ stored every record of intent `id`'s batch, from `first` to `last`.
    pub fn stored(&mut self, id: u64, first: i64, last: i64) {
        let Some(i) = self.pending.remove(&id) else {
            return;
        };
        self.anchor = self.anchor.max(last + 1);
        if i.idempotent() {
            self.remember(ProducedBatch {
                producer_id: i.0,
                epoch: i.1,
                first_seq: i.2,
                last_seq: i.3,
                first_offset: first,
            });
        }
    }

    /// Intent `id`'s batch was answered with an error (not, or not wholly, stored).
    pub fn dropped(&mut self, id: u64) {
        self.pending.remove(&id);
    }

    fn remember(&mut self, b: ProducedBatch) {
        self.ticks += 1;
        let e = self
            .producers
            .entry(b.producer_id)
            .or_insert_with(|| (VecDeque::new(), 0));
        if e.0.back().is_some_and(|last| last.epoch != b.epoch) {
            e.0.clear();
        }
        if e.0.len() == PER_PRODUCER {
            e.0.pop_front();
        }
        e.0.push_back(b);
        e.1 = self.ticks;
        if self.producers.len() > MAX_PRODUCERS {
            let oldest = self
                .producers
                .iter()
                .min_by_key(|(_, (_, t))| *t)
                .map(|(pid, _)| *pid);
            if let Some(pid) = oldest {
                self.producers.remove(&pid);
            }
        }
    }

    /// The body of the next write and the intent number it covers up to, when one is due
    /// (a batch waits for it) and none is under way.
    pub fn write_due(&mut self) -> Option<(u64, JournalFile)> {
        if self.needed <= self.durable || self.writing.is_some() || self.anchor < 0 {
            return None;
        }
        let upto = self.next;
        self.writing = Some(upto);
        let mut stored: Vec<(u64, ProducedBatch)> = self
            .producers
            .values()
            .flat_map(|(bs, t)| bs.iter().map(move |b| (*t, *b)))
            .collect();
        stored.sort_by_key(|(_, b)| b.first_offset);
        Some((
            upto,
            JournalFile {
                anchor: self.anchor,
                stored: stored
                    .into_iter()
                    .map(|(_, b)| {
                        Stored(
                            b.producer_id,
                            b.epoch,
                            b.first_seq,
                            b.last_seq,
                            b.first_offset,
                        )
                    })
                    .collect(),
                pending: self.pending.values().copied().collect(),
            },
        ))
    }

    /// The write covering intents below `upto` ended; `ok` if it is on the filer.
    pub fn written(&mut self, upto: u64, ok: bool) {
        self.writing = None;
        if ok {
            self.durable = self.durable.max(upto);
        }
    }
}

/// The producer state a new tenure starts from: the file's acknowledged batches, then its
/// pending batches found, in order and intact, in `tail` (SeaweedMQ's records from the
/// file's anchor: offset and [`record_crc`]). Oldest first.
pub fn recover(file: &JournalFile, tail: &[(i64, u32)]) -> Vec<ProducedBatch> {
    let mut out: Vec<ProducedBatch> = file
        .stored
        .iter()
        .map(|s| ProducedBatch {
            producer_id: s.0,
            epoch: s.1,
            first_seq: s.2,
            last_seq: s.3,
            first_offset: s.4,
        })
        .collect();
    let mut at = 0usize;
    for i in &file.pending {
        let n = i.4 as usize;
        let Some(records) = tail.get(at..at + n) else {
            break;
        };
        if n == 0 || batch_crc(records.iter().map(|r| r.1)) != i.5 {
            break;
        }
        if i.idempotent() {
            out.push(ProducedBatch {
                producer_id: i.0,
                epoch: i.1,
                first_seq: i.2,
                last_seq: i.3,
                first_offset: records[0].0,
            });
        }
        at += n;
    }
    out
}

impl JournalFile {
    /// Records to read back from the anchor to check every pending batch.
    pub fn pending_records(&self) -> usize {
        self.pending.iter().map(|i| i.4 as usize).sum()
    }

    /// Where the pending batches' records start.
    pub fn anchor(&self) -> i64 {
        self.anchor
    }
}

impl Forwarder {
    /// The filer directory of a topic's producer journals in this cluster.
    fn journals_dir(&self, topic: &str) -> String {
        format!("{}/{topic}", self.journals_root())
    }

    fn journals_root(&self) -> String {
        format!(
            "{}/{}/producers",
            super::membership::CLUSTERS,
            self.cluster.cluster_id
        )
    }

    /// Writes partition `k`'s journal.
    pub(super) async fn write_journal(
        &self,
        topic: &str,
        k: i32,
        file: &JournalFile,
    ) -> Result<(), KelpError> {
        let id = self
            .cluster
            .topic(topic)
            .ok_or(KelpError::UnknownTopicOrPartition)?
            .id;
        self.write_tied(
            &self.journals_dir(topic),
            &k.to_string(),
            file,
            id,
            "producer journal",
        )
        .await
    }

    /// Partition `k`'s journal (none yet: empty).
    pub(super) async fn read_journal(
        &self,
        topic: &str,
        k: i32,
        id: uuid::Uuid,
    ) -> Result<JournalFile, KelpError> {
        self.read_tied(
            &self.journals_dir(topic),
            &k.to_string(),
            id,
            "producer journal",
        )
        .await
    }

    /// Forgets a deleted topic's journals.
    pub(super) async fn drop_journals(&self, topic: &str) -> Result<(), KelpError> {
        let mut f = self.filer_client()?;
        filer::delete(&mut f, &self.journals_root(), topic, true)
            .await
            .map_err(|e| storage("deleting producer journals", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn recs(vals: &[&str]) -> Vec<Pending> {
        vals.iter()
            .map(|v| Pending {
                key: None,
                value: Some(Bytes::copy_from_slice(v.as_bytes())),
                timestamp: 0,
                header_count: 0,
                headers: Bytes::new(),
                txn: None,
            })
            .collect()
    }

    fn tail(from: i64, vals: &[&str]) -> Vec<(i64, u32)> {
        vals.iter()
            .enumerate()
            .map(|(i, v)| (from + i as i64, record_crc(None, Some(v.as_bytes()), &[])))
            .collect()
    }

    #[test]
    fn idempotent_batches_wait_for_their_write_others_do_not() {
        let mut j = Journal::new(&[], 100);
        let plain = j.intend(Intent::new(-1, 0, 0, &recs(&["a"])));
        let idem = j.intend(Intent::new(7, 0, 0, &recs(&["b", "c"])));
        assert!(j.sendable(plain));
        assert!(!j.sendable(idem));
        let (upto, file) = j.write_due().expect("a write is due");
        assert!(j.write_due().is_none(), "one write at a time");
        assert_eq!(file.pending.len(), 2);
        assert_eq!(file.anchor, 100);
        j.written(upto, false);
        assert!(!j.sendable(idem), "a failed write does not let it out");
        let (upto, _) = j.write_due().expect("tried again");
        j.written(upto, true);
        assert!(j.sendable(idem));
        assert!(j.write_due().is_none());
        j.stored(plain, 100, 100);
        j.stored(idem, 101, 102);
        let idem2 = j.intend(Intent::new(7, 0, 2, &recs(&["d"])));
        let (_, file) = j.write_due().unwrap();
        assert_eq!(file.anchor, 103);
        assert_eq!(file.stored, vec![Stored(7, 0, 0, 1, 101)]);
        assert_eq!(file.pending, vec![Intent::new(7, 0, 2, &recs(&["d"]))]);
        assert!(!j.sendable(idem2));
    }

    #[test]
    fn a_producer_keeps_five_batches_and_a_new_epoch_starts_over() {
        let mut j = Journal::new(&[], 0);
        for s in 0..7 {
            let id = j.intend(Intent::new(1, 0, s, &recs(&["x"])));
            j.stored(id, i64::from(s), i64::from(s));
        }
        let id = j.intend(Intent::new(2, 0, 0, &recs(&["y"])));
        let (_, file) = j.write_due().unwrap();
        assert_eq!(file.stored.len(), 5);
        assert_eq!(file.stored[0], Stored(1, 0, 2, 2, 2));
        j.stored(id, 7, 7);
        let id = j.intend(Intent::new(1, 1, 0, &recs(&["z"])));
        j.stored(id, 8, 8);
        j.needed = j.next;
        j.writing = None;
        let (_, file) = j.write_due().unwrap();
        assert_eq!(
            file.stored,
            vec![Stored(2, 0, 0, 0, 7), Stored(1, 1, 0, 0, 8)]
        );
    }

    #[test]
    fn recovery_takes_pending_batches_found_intact_in_order() {
        let file = JournalFile {
            anchor: 50,
            stored: vec![Stored(7, 0, 0, 1, 48)],
            pending: vec![
                Intent::new(7, 0, 2, &recs(&["a", "b"])),
                Intent::new(-1, 0, 0, &recs(&["c"])),
                Intent::new(7, 0, 4, &recs(&["d"])),
                Intent::new(7, 0, 5, &recs(&["e", "f"])),
            ],
        };
        assert_eq!(file.pending_records(), 6);
        // SeaweedMQ has a, b, c, d (a burned offset between c and d) and only e of the last.
        let mut t = tail(50, &["a", "b", "c"]);
        t.extend(tail(54, &["d", "e"]));
        let got = recover(&file, &t);
        let seqs: Vec<(i32, i32, i64)> = got
            .iter()
            .map(|b| (b.first_seq, b.last_seq, b.first_offset))
            .collect();
        assert_eq!(seqs, vec![(0, 1, 48), (2, 3, 50), (4, 4, 54)]);
        // Other records where the pending ones should be: nothing pending is taken.
        let got = recover(&file, &tail(50, &["a", "x", "c", "d"]));
        assert_eq!(got.len(), 1);
        assert_eq!(recover(&file, &[]).len(), 1);
    }

    #[test]
    fn sequences_wrap_like_kafka() {
        let i = Intent::new(1, 0, i32::MAX, &recs(&["a", "b"]));
        assert_eq!((i.2, i.3), (i32::MAX, 0));
    }
}
