//! The log cleaner's I/O for one partition (`cleanup.policy=compact`): maps the keys of the
//! sealed segments (never the active one) from the first, then rewrites each segment of the
//! mapped range whose batches [`super::compact`] changes into `<base>.log.cleaned`, synced,
//! and renames it over the segment, so a crash at any point leaves either the old segment or
//! the cleaned one, both whole; recovery deletes a `.cleaned` file left behind. Offsets are
//! preserved: a cleaned segment keeps its name and base, its batches their offsets, and its
//! next offset becomes the one after its last kept batch, so reads in a removed range move
//! on to the next batch or segment.
//!
//! Reads and writes go through the page cache in bounded steps; the caller runs the cleaner
//! in a low-share task queue and chooses the map's key capacity (its memory).

use std::collections::HashMap;
use std::path::PathBuf;
use std::rc::Rc;

use bytes::Bytes;
use glommio::io::BufferedFile;

use super::appender::Appender;
use super::compact::{clean_batch, KeyMap, Outcome, Settings};
use super::index::SegmentIndex;
use super::partition_log::PartitionLog;
use super::scan::{scan, Stop};
use super::segment::{self, Segment};
use super::LogError;
use crate::record::batch::BatchHeader;

/// Suffix of a cleaned segment not yet renamed over its original.
pub const CLEANED_SUFFIX: &str = ".cleaned";

/// Bytes read per step, and written per append.
const STEP: usize = 1 << 20;

/// What one cleaning round did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CleanReport {
    /// Offset after the last batch the key map covered (the next round's dirty start).
    pub cleaned_to: i64,
    /// Segments rewritten.
    pub segments: usize,
    /// Bytes before and after, of the rewritten segments.
    pub bytes_before: u64,
    /// See `bytes_before`.
    pub bytes_after: u64,
    /// Records mapped (distinct keys).
    pub keys: usize,
}

/// A sealed segment as the cleaner reads it.
#[derive(Clone)]
pub(super) struct SealedFile {
    pub base: i64,
    pub next_offset: i64,
    pub path: PathBuf,
    pub file: Rc<BufferedFile>,
    pub size: u64,
}

/// The batches of one sealed segment, a read step at a time.
struct BatchReader<'a> {
    seg: &'a SealedFile,
    pos: u64,
    chunk: usize,
    done: bool,
}

impl<'a> BatchReader<'a> {
    fn new(seg: &'a SealedFile) -> Self {
        BatchReader {
            seg,
            pos: 0,
            chunk: STEP,
            done: false,
        }
    }

    /// The whole batches of the next step (empty once the segment is read).
    async fn next_step(&mut self) -> Result<Vec<(BatchHeader, Bytes)>, LogError> {
        while !self.done && self.pos < self.seg.size {
            let len = self.chunk.min((self.seg.size - self.pos) as usize);
            let data = segment::read(&self.seg.file, self.pos, len)
                .await
                .map_err(|e| LogError::Read(e.to_string()))?;
            let (batches, stop) = scan(&data, -1, false);
            let out: Vec<(BatchHeader, Bytes)> = batches
                .iter()
                .map(|b| (b.header, data.slice(b.pos..b.pos + b.header.total_len())))
                .collect();
            match stop {
                Stop::NeedMore { pos: p, total } if data.len() == len => {
                    self.pos += p as u64;
                    self.chunk = self.chunk.max(total);
                }
                _ => self.done = true,
            }
            if !out.is_empty() {
                return Ok(out);
            }
        }
        Ok(Vec::new())
    }
}

fn walk_error(seg: &SealedFile, e: crate::record::walk::WalkError) -> LogError {
    LogError::Read(format!("{}: {}", seg.path.display(), e.why()))
}

impl PartitionLog {
    /// One cleaning round over the sealed segments whose newest batch is at most
    /// `max_timestamp` (`min.compaction.lag.ms`): the keys of the dirty ones (from the first
    /// holding offsets at or past `dirty_from`, the previous round's end) are mapped, at most
    /// `capacity` entries, and every segment from the first up to the map's end is cleaned
    /// against them, as Kafka's cleaner does. `producers` names each idempotent producer's
    /// last batch (producer id to base offset), kept whole.
    pub async fn compact(
        &self,
        s: &Settings,
        capacity: usize,
        max_timestamp: i64,
        dirty_from: i64,
        producers: HashMap<i64, i64>,
    ) -> Result<CleanReport, LogError> {
        let sealed = self.sealed_files(max_timestamp);
        let Some(first_dirty) = sealed.iter().find(|seg| seg.next_offset > dirty_from) else {
            return Ok(CleanReport {
                cleaned_to: dirty_from,
                ..CleanReport::default()
            });
        };
        let mut map = KeyMap::new(capacity, first_dirty.base, producers);
        'map: for seg in sealed.iter().filter(|seg| seg.base >= first_dirty.base) {
            let mut r = BatchReader::new(seg);
            loop {
                let step = r.next_step().await?;
                if step.is_empty() {
                    break;
                }
                for (h, b) in &step {
                    if !map.add(b, h, s).map_err(|e| walk_error(seg, e))? {
                        break 'map;
                    }
                }
            }
        }
        let mut report = CleanReport {
            cleaned_to: map.end(),
            keys: map.len(),
            ..CleanReport::default()
        };
        for seg in sealed.iter().filter(|seg| seg.base < map.end()) {
            if let Some(size) = self.clean_segment(seg, &map, s).await? {
                report.segments += 1;
                report.bytes_before += seg.size;
                report.bytes_after += size;
            }
        }
        Ok(report)
    }

    /// Rewrites one segment if cleaning changes it; its new size, or None.
    async fn clean_segment(
        &self,
        seg: &SealedFile,
        map: &KeyMap,
        s: &Settings,
    ) -> Result<Option<u64>, LogError> {
        // A first pass decides whether anything changes, so unchanged segments are not
        // rewritten (most of them, once a log has been cleaned).
        let mut r = BatchReader::new(seg);
        let mut changes = false;
        'look: loop {
            let step = r.next_step().await?;
            if step.is_empty() {
                break;
            }
            for (h, b) in &step {
                if clean_batch(b, h, map, s).map_err(|e| walk_error(seg, e))? != Outcome::Whole {
                    changes = true;
                    break 'look;
                }
            }
        }
        if !changes {
            return Ok(None);
        }
        let tmp = PathBuf::from(format!("{}{CLEANED_SUFFIX}", seg.path.display()));
        let write = |e: std::io::Error| LogError::Write(format!("{}: {e}", tmp.display()));
        let mut out = Appender::create(&tmp).await.map_err(write)?;
        let mut index = SegmentIndex::default();
        let mut next_offset = seg.base;
        let mut written = 0u64;
        let mut failed = None;
        let mut r = BatchReader::new(seg);
        loop {
            let step = match r.next_step().await {
                Ok(step) => step,
                Err(e) => {
                    let _ = std::fs::remove_file(&tmp);
                    return Err(e);
                }
            };
            if step.is_empty() {
                break;
            }
            let mut parts = Vec::with_capacity(step.len());
            for (h, b) in step {
                let batch = match clean_batch(&b, &h, map, s) {
                    Ok(Outcome::Whole) => b,
                    Ok(Outcome::Gone) => continue,
                    Ok(Outcome::Rebuilt(r)) => r,
                    Err(e) => {
                        let _ = std::fs::remove_file(&tmp);
                        return Err(walk_error(seg, e));
                    }
                };
                let rel_base = u32::try_from(h.base_offset - seg.base).unwrap_or(u32::MAX);
                index.on_batch(rel_base, written, h.max_timestamp);
                written += batch.len() as u64;
                next_offset = h.last_offset() + 1;
                parts.push(batch);
            }
            if let Err(e) = out.append(&parts).await {
                failed = Some(e);
                break;
            }
        }
        let done = match failed {
            Some(e) => Err(e),
            None => match out.trim().await {
                Ok(()) => out.sync().await,
                Err(e) => Err(e),
            },
        };
        if let Err(e) = done {
            let _ = std::fs::remove_file(&tmp);
            return Err(write(e));
        }
        // Nothing left: the segment goes (its open file with it), unless it is the first,
        // whose base is where the log starts after a restart.
        if written == 0 && self.drop_sealed_unless_first(seg.base) {
            let _ = std::fs::remove_file(&tmp);
            return Ok(Some(0));
        }
        // No await between the check and the rename: retention or a topic deletion cannot
        // remove the segment in between, so a rename never brings a deleted one back.
        if !self.holds_sealed(seg.base) {
            let _ = std::fs::remove_file(&tmp);
            return Ok(None);
        }
        std::fs::rename(&tmp, &seg.path).map_err(write)?;
        super::sync_dir(self.dir()).await?;
        let cleaned = Segment::reopen(
            seg.path.clone(),
            seg.base,
            written,
            next_offset,
            index,
            false,
        )
        .await
        .map_err(|e| LogError::Read(e.to_string()))?;
        let offsets = cleaned.index.encode_offsets();
        let times = cleaned.index.encode_times();
        if self.replace_sealed(cleaned) {
            // Nothing reads the index files (recovery rebuilds the index by scanning): a
            // failure to write them loses nothing.
            if let Err(e) = segment::write_index_files(&seg.path, offsets, times).await {
                tracing::debug!(path = %seg.path.display(), error = %e, "cleaned segment's index files not written");
            }
        }
        Ok(Some(written))
    }
}
