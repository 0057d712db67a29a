//! Start-up recovery of one partition directory.
//!
//! Scans every segment in offset order, checking each batch (length, magic, CRC, offsets
//! moving forward); rebuilds the in-memory indexes and the next offset, and shows the caller
//! every intact batch header (from which `partition/` rebuilds the idempotent producer
//! state). The first damaged byte ends the log: a torn or corrupt tail of the last segment is
//! cut (by reopening it for append at the intact length); damage inside an older segment cuts
//! that segment and drops the later ones, because offsets must stay contiguous. A batch whose
//! records disagree with its header counts as damage, like a torn write. A header is shown
//! only once its batch is known to stay: segments are visited in order and damage only ever
//! cuts what follows it. Calls [`super::scan`] and [`super::segment`].

use std::path::{Path, PathBuf};

use glommio::io::BufferedFile;

use super::partition_log::{PartitionLog, RollSettings};
use super::scan::{Scanned, SegmentScan, SCAN_CHUNK};
use super::segment::{self, parse_log_name, Segment};
use super::LogError;
use crate::config::FsyncPolicy;
use crate::record::batch::BatchHeader;

/// File holding the log start offset moved by DeleteRecords (decimal text).
pub const LOG_START_FILE: &str = "log-start-offset";

/// A recovered partition.
pub struct Recovered {
    /// The log, ready for appends after the last intact batch.
    pub log: PartitionLog,
    /// First readable offset (the checkpointed log start, within the segments).
    pub log_start: i64,
    /// Offset after the last intact batch.
    pub next_offset: i64,
    /// (largest batch max timestamp, base offset of that batch), or (-1, -1).
    pub max_timestamp: (i64, i64),
}

/// Reads one segment file through [`SegmentScan`], which decides what is intact.
async fn scan_segment(
    path: &Path,
    base: i64,
    on_batch: &mut dyn FnMut(&BatchHeader, &[u8]),
) -> Result<Scanned, LogError> {
    let io = |e: std::io::Error| LogError::Recovery(format!("{}: {e}", path.display()));
    let file = BufferedFile::open(path)
        .await
        .map_err(|e| LogError::Recovery(format!("opening {}: {e}", path.display())))?;
    let file_len = std::fs::metadata(path)
        .map_err(|e| LogError::Recovery(format!("{}: {e}", path.display())))?
        .len();
    let mut sc = SegmentScan::new(base, file_len, SCAN_CHUNK);
    while let Some((pos, len)) = sc.next_read() {
        let data = segment::read(&file, pos, len).await.map_err(io)?;
        sc.feed(&data, on_batch);
    }
    let _ = file.close().await;
    let out = sc.finish();
    if let Some(why) = out.damage {
        tracing::warn!(path = %path.display(), at = out.valid_len, why, "damaged or torn batch in a segment");
    }
    Ok(out)
}

/// Recovers the partition in `dir` (which exists). `on_batch` sees the header (and bytes) of every batch
/// the recovered log holds, once, in offset order (and nothing it does not hold); after an
/// error, what it saw means nothing.
pub async fn recover(
    dir: PathBuf,
    policy: FsyncPolicy,
    roll: RollSettings,
    on_batch: &mut dyn FnMut(&BatchHeader, &[u8]),
) -> Result<Recovered, LogError> {
    let entries = std::fs::read_dir(&dir)
        .map_err(|e| LogError::Recovery(format!("listing {}: {e}", dir.display())))?;
    let names: Vec<String> = entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .collect();
    // A cleaned segment not renamed over its original when the process stopped: the
    // original is whole, the copy is dropped.
    for n in names
        .iter()
        .filter(|n| n.ends_with(super::cleaner::CLEANED_SUFFIX))
    {
        tracing::info!(file = %n, "dropping an unfinished cleaned segment");
        let _ = std::fs::remove_file(dir.join(n));
    }
    let mut bases: Vec<i64> = names.iter().filter_map(|n| parse_log_name(n)).collect();
    bases.sort_unstable();

    let mut max_ts = (-1i64, -1i64);
    let mut segments = Vec::new();
    let mut next = bases.first().copied().unwrap_or(0);
    let mut cut = false;
    for (i, &base) in bases.iter().enumerate() {
        let path = dir.join(segment::log_name(base));
        if cut || base < next {
            tracing::warn!(path = %path.display(), "dropping a segment after damage in an earlier one");
            let _ = std::fs::remove_file(&path);
            continue;
        }
        // Damage found in this segment cuts only what follows it, and later segments are
        // scanned only when nothing was cut: every batch shown here stays.
        let mut visit = |h: &BatchHeader, b: &[u8]| {
            on_batch(h, b);
            if h.max_timestamp > max_ts.0 {
                max_ts = (h.max_timestamp, h.base_offset);
            }
        };
        let sc = scan_segment(&path, base, &mut visit).await?;
        let last = i + 1 == bases.len();
        if sc.valid_len < sc.file_len {
            if !last && sc.padding_only {
                // A sealed segment whose trim did not happen: cut the padding, keep going.
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .and_then(|f| f.set_len(sc.valid_len))
                    .map_err(|e| LogError::Recovery(format!("{}: {e}", path.display())))?;
            } else if sc.padding_only {
                tracing::debug!(path = %path.display(), to = sc.valid_len, "cutting DMA padding");
            } else {
                cut = !last;
                tracing::warn!(
                    path = %path.display(),
                    from = sc.file_len,
                    to = sc.valid_len,
                    "truncating a damaged segment tail"
                );
            }
        }
        next = sc.next_offset;
        // The last intact segment stays active; truncation happens as it is reopened.
        let active = last || cut;
        let seg = Segment::reopen(
            path,
            base,
            sc.valid_len,
            sc.next_offset,
            sc.index,
            active,
            super::partition_log::direct_appends(policy),
        )
        .await
        .map_err(|e| LogError::Recovery(e.to_string()))?;
        segments.push(seg);
    }
    let first = segments.first().map_or(0, |s| s.base);
    let log_start = std::fs::read_to_string(dir.join(LOG_START_FILE))
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
        .map_or(first, |ls| ls.clamp(first, next));
    Ok(Recovered {
        log: PartitionLog::new(dir, policy, segments, roll),
        log_start,
        next_offset: next,
        max_timestamp: max_ts,
    })
}

/// Topic and partition of a partition directory name `<topic>-<partition>`.
pub fn parse_dir_name(name: &str) -> Option<(String, i32)> {
    let (t, p) = name.rsplit_once('-')?;
    let p: i32 = p.parse().ok()?;
    (!t.is_empty() && p >= 0).then(|| (t.to_string(), p))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::partition_log::RollSettings;
    use crate::record::batch::tests::make_batch;
    use crate::record::ValidatedBatches;

    fn batches(base: i64, n: usize) -> Vec<(BatchHeader, bytes::Bytes)> {
        let mut out = Vec::new();
        let mut next = base;
        for _ in 0..n {
            let v = ValidatedBatches::validate(make_batch(3, 100), 1 << 20).unwrap();
            for (h, b) in v.assign_offsets(next) {
                next = h.last_offset() + 1;
                out.push((h, b));
            }
        }
        out
    }

    #[test]
    fn write_roll_read_recover_and_truncate_torn_tail() {
        let dir = std::env::temp_dir().join(format!("kelp-log-{}", uuid::Uuid::new_v4()));
        let roll = RollSettings {
            segment_bytes: 1000,
            segment_ms: u64::MAX,
        };
        let d = dir.clone();
        glommio::LocalExecutor::default().run(async move {
            let log = PartitionLog::new(d.clone(), FsyncPolicy::Always, Vec::new(), roll);
            let all = batches(0, 40);
            let originals: Vec<_> = all.iter().map(|(_, b)| b.clone()).collect();
            for chunk in all.chunks(7) {
                let t = log.enqueue(chunk.to_vec(), roll).unwrap();
                log.wait(t, true).await.unwrap();
            }
            assert_eq!(log.written_end(), 120);
            assert!(log.segment_count() > 1, "segments roll by size");
            // Reads return the batches byte-identical, from any offset inside a batch.
            let mut got = Vec::new();
            let mut at = 0;
            while at < 120 {
                let r = log.read(at, 300, 120).await.unwrap();
                assert!(!r.is_empty());
                for b in r {
                    at = BatchHeader::parse(&b).unwrap().last_offset() + 1;
                    got.push(b);
                }
            }
            assert_eq!(got, originals);
            assert_eq!(log.read(61, 1, 120).await.unwrap()[0], originals[20]);
            drop(log);

            // Recovery finds everything; then a torn last batch is cut off.
            let r = recover(d.clone(), FsyncPolicy::Always, roll, &mut |_, _| {})
                .await
                .unwrap();
            assert_eq!(r.next_offset, 120);
            drop(r);
            let mut segs: Vec<_> = std::fs::read_dir(&d)
                .unwrap()
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "log"))
                .collect();
            segs.sort();
            let last = segs.last().unwrap();
            let len = std::fs::metadata(last).unwrap().len();
            let f = std::fs::OpenOptions::new().write(true).open(last).unwrap();
            f.set_len(len - 5).unwrap();
            let r = recover(d.clone(), FsyncPolicy::Always, roll, &mut |_, _| {})
                .await
                .unwrap();
            assert_eq!(r.next_offset, 117);
            // Appends continue right after the intact prefix.
            let t = r.log.enqueue(batches(117, 1), roll).unwrap();
            r.log.wait(t, true).await.unwrap();
            let back = r.log.read(117, 1 << 20, 120).await.unwrap();
            assert_eq!(BatchHeader::parse(&back[0]).unwrap().base_offset, 117);
        });
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_lying_batch_on_disk_is_cut_like_a_torn_write() {
        let dir = std::env::temp_dir().join(format!("kelp-liar-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut seg = crate::log::scan::tests::segment_bytes();
        let good = seg.len() as u64;
        seg.extend_from_slice(&crate::log::scan::tests::lying_batch(6));
        let path = dir.join(segment::log_name(0));
        std::fs::write(&path, &seg).unwrap();
        let roll = RollSettings {
            segment_bytes: 1 << 20,
            segment_ms: u64::MAX,
        };
        let d = dir.clone();
        glommio::LocalExecutor::default().run(async move {
            let r = recover(d.clone(), FsyncPolicy::Always, roll, &mut |_, _| {})
                .await
                .unwrap();
            assert_eq!(r.next_offset, 6);
            assert_eq!(std::fs::metadata(&path).unwrap().len(), good);
            // Lookups by timestamp run over what is left, and find nothing past it.
            assert_eq!(
                r.log.find_timestamp(101, 0, 6).await.unwrap(),
                Some((101, 1))
            );
            assert_eq!(r.log.find_timestamp(10_000, 0, 6).await.unwrap(), None);
            // Appends continue right after the intact prefix.
            let t = r.log.enqueue(batches(6, 1), roll).unwrap();
            r.log.wait(t, true).await.unwrap();
            drop(r);
            let r = recover(d.clone(), FsyncPolicy::Always, roll, &mut |_, _| {})
                .await
                .unwrap();
            assert_eq!(r.next_offset, 9);
        });
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
