//! Durable committed offsets: one append-only file per shard,
//! `<data-dir>/meta/offsets-<shard>.log`, of commit and delete records.
//!
//! Record: length u32, CRC32C u32 of the body, body (kind u8, group, entries). At start the
//! file is replayed (stopping at the first torn or corrupt record), then compacted: the live
//! offsets are rewritten to a temp file that replaces the old one. A commit is appended and
//! fdatasynced before it becomes visible and before the OffsetCommit answer. Reads are
//! served by the in-memory store this wraps. Calls [`super::appender`] and `group/`.

use std::path::{Path, PathBuf};
use std::rc::Rc;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use futures::future::LocalBoxFuture;
use futures::lock::Mutex;

use super::appender::Appender;
use super::LogError;
use crate::error::KelpError;
use crate::group::offsets::{CommittedOffset, InMemoryOffsetStore, OffsetStore, TopicPartition};

const COMMIT: u8 = 1;
const DELETE: u8 = 2;
const DELETE_GROUP: u8 = 3;

/// A decoded record.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Record {
    Commit(String, Vec<(TopicPartition, CommittedOffset)>),
    Delete(String, Vec<TopicPartition>),
    DeleteGroup(String),
}

fn put_str(b: &mut BytesMut, s: &str) {
    b.put_u32(s.len() as u32);
    b.put_slice(s.as_bytes());
}

fn get_str(b: &mut Bytes) -> Option<String> {
    if b.remaining() < 4 {
        return None;
    }
    let n = b.get_u32() as usize;
    if b.remaining() < n {
        return None;
    }
    String::from_utf8(b.split_to(n).to_vec()).ok()
}

fn encode(r: &Record) -> Bytes {
    let mut body = BytesMut::new();
    match r {
        Record::Commit(g, offsets) => {
            body.put_u8(COMMIT);
            put_str(&mut body, g);
            body.put_u32(offsets.len() as u32);
            for ((t, p), o) in offsets {
                put_str(&mut body, t);
                body.put_i32(*p);
                body.put_i64(o.offset);
                body.put_i32(o.leader_epoch);
                body.put_i64(o.commit_timestamp_ms);
                put_str(&mut body, &o.metadata);
            }
        }
        Record::Delete(g, tps) => {
            body.put_u8(DELETE);
            put_str(&mut body, g);
            body.put_u32(tps.len() as u32);
            for (t, p) in tps {
                put_str(&mut body, t);
                body.put_i32(*p);
            }
        }
        Record::DeleteGroup(g) => {
            body.put_u8(DELETE_GROUP);
            put_str(&mut body, g);
        }
    }
    let mut out = BytesMut::with_capacity(8 + body.len());
    out.put_u32(body.len() as u32);
    out.put_u32(crc32c::crc32c(&body));
    out.put_slice(&body);
    out.freeze()
}

fn decode_body(mut b: Bytes) -> Option<Record> {
    if b.remaining() < 1 {
        return None;
    }
    let kind = b.get_u8();
    let group = get_str(&mut b)?;
    match kind {
        COMMIT | DELETE => {
            if b.remaining() < 4 {
                return None;
            }
            let n = b.get_u32() as usize;
            let mut commits = Vec::new();
            let mut deletes = Vec::new();
            for _ in 0..n {
                let t = get_str(&mut b)?;
                if b.remaining() < 4 {
                    return None;
                }
                let p = b.get_i32();
                if kind == DELETE {
                    deletes.push((t, p));
                    continue;
                }
                if b.remaining() < 20 {
                    return None;
                }
                let offset = b.get_i64();
                let leader_epoch = b.get_i32();
                let commit_timestamp_ms = b.get_i64();
                let metadata = get_str(&mut b)?;
                commits.push((
                    (t, p),
                    CommittedOffset {
                        offset,
                        leader_epoch,
                        metadata,
                        commit_timestamp_ms,
                    },
                ));
            }
            Some(if kind == COMMIT {
                Record::Commit(group, commits)
            } else {
                Record::Delete(group, deletes)
            })
        }
        DELETE_GROUP => Some(Record::DeleteGroup(group)),
        _ => None,
    }
}

/// Records of a file's contents, up to the first torn or corrupt one.
fn decode_all(mut data: Bytes) -> Vec<Record> {
    let mut out = Vec::new();
    while data.remaining() >= 8 {
        let len = u32::from_be_bytes([data[0], data[1], data[2], data[3]]) as usize;
        let crc = u32::from_be_bytes([data[4], data[5], data[6], data[7]]);
        if len == 0 || data.remaining() < 8 + len {
            break;
        }
        let body = data.slice(8..8 + len);
        if crc32c::crc32c(&body) != crc {
            break;
        }
        match decode_body(body) {
            Some(r) => out.push(r),
            None => break,
        }
        data.advance(8 + len);
    }
    out
}

fn apply(mem: &InMemoryOffsetStore, r: Record) {
    // The in-memory store answers at once; its futures are ready.
    match r {
        Record::Commit(g, o) => drop(mem.commit(&g, o)),
        Record::Delete(g, tps) => drop(mem.delete(&g, &tps)),
        Record::DeleteGroup(g) => drop(mem.delete_group(&g)),
    }
}

/// The offsets an offsets file's contents hold, up to its first torn or corrupt record.
/// Every length in the file is checked against the bytes that remain before it is used
/// (public for the fuzz target: it is the whole parser of the file).
pub fn replay(data: Bytes) -> InMemoryOffsetStore {
    let mem = InMemoryOffsetStore::default();
    for r in decode_all(data) {
        apply(&mem, r);
    }
    mem
}

/// Offsets of one shard's groups, durable in its offsets file.
pub struct DurableOffsetStore {
    mem: Rc<InMemoryOffsetStore>,
    file: Rc<Mutex<Appender>>,
}

/// Path of a shard's offsets file.
pub fn offsets_path(data_dir: &Path, shard: usize) -> PathBuf {
    super::meta_dir(data_dir).join(format!("offsets-{shard}.log"))
}

impl DurableOffsetStore {
    /// Replays and compacts the shard's offsets file, then opens it for appends.
    pub async fn open(path: &Path) -> Result<DurableOffsetStore, LogError> {
        let err = |e: std::io::Error| LogError::Recovery(format!("{}: {e}", path.display()));
        let data = match std::fs::read(path) {
            Ok(d) => Bytes::from(d),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Bytes::new(),
            Err(e) => return Err(err(e)),
        };
        let mem = Rc::new(replay(data));
        // Compaction: one commit record per live group.
        let mut compact = BytesMut::new();
        for g in mem.groups() {
            compact.put_slice(&encode(&Record::Commit(g.clone(), mem.fetch_all(&g))));
        }
        let tmp = path.with_extension("log.tmp");
        std::fs::write(&tmp, &compact).map_err(err)?;
        std::fs::File::open(&tmp)
            .and_then(|f| f.sync_all())
            .map_err(err)?;
        std::fs::rename(&tmp, path).map_err(err)?;
        if let Some(dir) = path.parent() {
            super::sync_dir(dir).await?;
        }
        let appender = Appender::open(path, compact.len() as u64)
            .await
            .map_err(|e| LogError::Recovery(e.to_string()))?;
        Ok(DurableOffsetStore {
            mem,
            file: Rc::new(Mutex::new(appender)),
        })
    }

    /// Appends and syncs a record, then applies it to the in-memory view.
    fn write(&self, r: Record) -> LocalBoxFuture<'static, Result<(), KelpError>> {
        let (file, mem) = (self.file.clone(), self.mem.clone());
        Box::pin(async move {
            let data = encode(&r);
            let mut f = file.lock().await;
            let res = match f.append(&[data]).await {
                Ok(()) => f.sync().await,
                Err(e) => Err(e),
            };
            drop(f);
            if let Err(e) = res {
                tracing::error!(error = %e, "could not store committed offsets");
                return Err(KelpError::from(LogError::Write(e.to_string())));
            }
            apply(&mem, r);
            Ok(())
        })
    }
}

impl OffsetStore for DurableOffsetStore {
    fn commit(
        &self,
        group: &str,
        offsets: Vec<(TopicPartition, CommittedOffset)>,
    ) -> LocalBoxFuture<'static, Result<(), KelpError>> {
        self.write(Record::Commit(group.to_string(), offsets))
    }

    fn fetch(&self, group: &str, tp: &TopicPartition) -> Option<CommittedOffset> {
        self.mem.fetch(group, tp)
    }

    fn fetch_all(&self, group: &str) -> Vec<(TopicPartition, CommittedOffset)> {
        self.mem.fetch_all(group)
    }

    fn delete(
        &self,
        group: &str,
        partitions: &[TopicPartition],
    ) -> LocalBoxFuture<'static, Result<(), KelpError>> {
        self.write(Record::Delete(group.to_string(), partitions.to_vec()))
    }

    fn delete_group(&self, group: &str) -> LocalBoxFuture<'static, Result<(), KelpError>> {
        self.write(Record::DeleteGroup(group.to_string()))
    }

    fn groups(&self) -> Vec<String> {
        self.mem.groups()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn off(o: i64) -> CommittedOffset {
        CommittedOffset {
            offset: o,
            leader_epoch: 0,
            metadata: "m".into(),
            commit_timestamp_ms: 5,
        }
    }

    #[test]
    fn records_round_trip_and_torn_tail_is_ignored() {
        let recs = vec![
            Record::Commit(
                "g".into(),
                vec![(("t".into(), 0), off(7)), (("t".into(), 1), off(9))],
            ),
            Record::Delete("g".into(), vec![("t".into(), 1)]),
            Record::DeleteGroup("h".into()),
        ];
        let mut all = BytesMut::new();
        for r in &recs {
            all.put_slice(&encode(r));
        }
        let full = all.clone().freeze();
        assert_eq!(decode_all(full.clone()), recs);
        // Torn last record, then zero padding: only the intact records count.
        assert_eq!(decode_all(full.slice(..full.len() - 3)), recs[..2].to_vec());
        let mut padded = all.clone();
        padded.put_slice(&[0u8; 64]);
        assert_eq!(decode_all(padded.freeze()), recs);
        let mem = InMemoryOffsetStore::default();
        for r in recs {
            apply(&mem, r);
        }
        assert_eq!(mem.fetch_all("g"), vec![(("t".to_string(), 0), off(7))]);
    }
}
