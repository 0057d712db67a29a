//! One segment of a partition log: `<base offset, 20 digits>.log` with raw record batches
//! exactly as cached (base offsets assigned), plus its in-memory sparse index and, once
//! sealed, `.index` and `.timeindex` files.
//!
//! Owned by [`super::partition_log::PartitionLog`]; calls [`super::appender`] for writes.

use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Instant;

use bytes::Bytes;
use glommio::io::BufferedFile;

use super::appender::{self, Appender, SyncHandle};
use super::index::SegmentIndex;
use crate::record::batch::BatchHeader;

/// File name of a segment's log with base offset `base`.
pub fn log_name(base: i64) -> String {
    format!("{base:020}.log")
}

/// Base offset of a segment from its log file name, if it is one.
pub fn parse_log_name(name: &str) -> Option<i64> {
    let digits = name.strip_suffix(".log")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// A segment: its file, logical size, offsets and index.
pub struct Segment {
    /// Its first offset, also its file name.
    pub base: i64,
    path: PathBuf,
    /// Read handle (through the page cache, like the writes).
    reader: Rc<BufferedFile>,
    /// Handle of the active segment, for fdatasync while the appender is out writing.
    sync: Option<SyncHandle>,
    /// Present while the segment is the active (appended) one.
    appender: Option<Appender>,
    /// Bytes of intact batches.
    pub size: u64,
    /// Offset after the last batch (== base when empty).
    pub next_offset: i64,
    /// Bytes known to be on stable storage (an fdatasync after their write succeeded), and
    /// the offset after the batches they hold.
    pub synced_len: u64,
    /// Offset after the batches within `synced_len`.
    pub synced_next: i64,
    /// Sparse offset → position index, so a read seeks instead of scanning.
    pub index: SegmentIndex,
    /// When the segment was created or recovered (for `segment.ms`).
    pub opened: Instant,
}

impl Segment {
    /// Creates an empty active segment in `dir`, appended with O_DIRECT when `direct`.
    pub async fn create(dir: &Path, base: i64, direct: bool) -> io::Result<Segment> {
        let path = dir.join(log_name(base));
        let appender = match direct {
            true => Appender::create_direct(&path).await?,
            false => Appender::create(&path).await?,
        };
        let reader = open_reader(&path).await?;
        Ok(Segment {
            base,
            path,
            reader,
            sync: Some(appender.sync_handle()),
            appender: Some(appender),
            size: 0,
            next_offset: base,
            synced_len: 0,
            synced_next: base,
            index: SegmentIndex::default(),
            opened: Instant::now(),
        })
    }

    /// Reopens a recovered segment whose first `size` bytes are intact; `active` segments
    /// get an appender (which cuts anything past `size`), with O_DIRECT when `direct`.
    pub async fn reopen(
        path: PathBuf,
        base: i64,
        size: u64,
        next_offset: i64,
        index: SegmentIndex,
        active: bool,
        direct: bool,
    ) -> io::Result<Segment> {
        let appender = match (active, direct) {
            (false, _) => None,
            (true, true) => Some(Appender::open_direct(&path, size).await?),
            (true, false) => Some(Appender::open(&path, size).await?),
        };
        let reader = open_reader(&path).await?;
        Ok(Segment {
            base,
            path,
            reader,
            sync: appender.as_ref().map(Appender::sync_handle),
            appender,
            size,
            next_offset,
            // What recovery found is what the disk gave back.
            synced_len: size,
            synced_next: next_offset,
            index,
            opened: Instant::now(),
        })
    }

    /// Path of the `.log` file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The read handle, for reads that outlive a borrow of the segment.
    pub fn file(&self) -> Rc<BufferedFile> {
        self.reader.clone()
    }

    /// The sync handle while the segment is active.
    pub fn sync_handle(&self) -> Option<SyncHandle> {
        self.sync.clone()
    }

    /// Takes the appender out for a write (the log's single writer puts it back).
    pub fn take_appender(&mut self) -> Option<Appender> {
        self.appender.take()
    }

    /// Returns the appender after a write and records the batches it wrote.
    pub fn put_appender(&mut self, a: Appender, written: &[(BatchHeader, u64)]) {
        for &(h, pos) in written {
            let rel = (h.base_offset - self.base) as u32;
            self.index.on_batch(rel, pos, h.max_timestamp);
            self.next_offset = h.last_offset() + 1;
        }
        self.size = a.len();
        self.appender = Some(a);
    }

    /// Makes the segment sealed (no appender) and returns the I/O left to finish it: writing
    /// the index files. The log file must already be trimmed and (unless `--fsync never`)
    /// synced: nothing writes or syncs a sealed segment again. Readers keep using the segment
    /// meanwhile; recovery rebuilds the indexes by scanning, so a failed index write loses
    /// nothing.
    pub fn begin_seal(&mut self) -> Option<SealJob> {
        self.appender.take()?;
        self.sync = None;
        Some(SealJob {
            path: self.path.clone(),
            offsets: self.index.encode_offsets(),
            times: self.index.encode_times(),
        })
    }

    /// Whether this is the active segment.
    pub fn is_active(&self) -> bool {
        self.appender.is_some()
    }

    /// Where to start reading for `offset`: the indexed position at or before it.
    pub fn position_for(&self, offset: i64) -> u64 {
        let rel = (offset - self.base).clamp(0, i64::from(u32::MAX)) as u32;
        self.index.position_for(rel)
    }

    /// Deletes the segment's files (readers holding the file keep reading it).
    pub fn remove_files(&self) {
        for p in [
            self.path.clone(),
            self.path.with_extension("index"),
            self.path.with_extension("timeindex"),
        ] {
            if let Err(e) = std::fs::remove_file(&p) {
                if e.kind() != io::ErrorKind::NotFound {
                    tracing::warn!(path = %p.display(), error = %e, "could not delete segment file");
                }
            }
        }
    }
}

async fn open_reader(path: &Path) -> io::Result<Rc<BufferedFile>> {
    BufferedFile::open(path)
        .await
        .map(Rc::new)
        .map_err(|e| io::Error::other(format!("opening {}: {e}", path.display())))
}

/// Reads `len` bytes at `pos` of a segment file.
pub async fn read(file: &BufferedFile, pos: u64, len: usize) -> io::Result<Bytes> {
    appender::read_at(file, pos, len).await
}

/// The I/O that completes sealing a segment.
pub struct SealJob {
    path: PathBuf,
    offsets: Bytes,
    times: Bytes,
}

impl SealJob {
    /// Writes the index files, synced when `sync`.
    pub async fn finish(self, sync: bool) -> io::Result<()> {
        index_files(&self.path, self.offsets, self.times, sync).await
    }
}

/// Writes the index files of the segment at `path` (unsynced: recovery rebuilds indexes).
pub async fn write_index_files(path: &Path, offsets: Bytes, times: Bytes) -> io::Result<()> {
    index_files(path, offsets, times, false).await
}

async fn index_files(path: &Path, offsets: Bytes, times: Bytes, sync: bool) -> io::Result<()> {
    for (ext, data) in [("index", offsets), ("timeindex", times)] {
        let mut ix = Appender::create(&path.with_extension(ext)).await?;
        ix.append(&[data]).await?;
        ix.trim().await?;
        if sync {
            ix.sync().await?;
        }
    }
    Ok(())
}
