//! The log under injected I/O faults ([`super::faults`]): failed, torn and short-of-space
//! writes, failed fdatasyncs (with Linux's forgetting of the pages it could not write), failed
//! segment rolls, and what recovery and the live log hold afterwards. The invariant every test
//! checks: the log holds exactly the acknowledged batches, in offset order, with nothing
//! between them, and every batch acknowledged as durable survives a power cut.

use std::future::Future;
use std::path::{Path, PathBuf};

use bytes::Bytes;

use super::faults::{self, SyncFault, WriteFault};
use super::partition_log::{PartitionLog, RollSettings};
use super::recovery::{recover, Recovered};
use super::LogError;
use crate::config::FsyncPolicy;
use crate::record::batch::{BatchHeader, ValidatedBatches};
use crate::record::build::simple_batch;

type Batch = (BatchHeader, Bytes);

/// A fresh directory for one test, its faults forgotten (and files removed) when dropped.
struct TestDir(PathBuf);

impl TestDir {
    fn new(tag: &str) -> TestDir {
        let dir = std::env::temp_dir().join(format!("kelp-{tag}-{}", uuid::Uuid::new_v4()));
        faults::track(&dir);
        TestDir(dir)
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        faults::forget(&self.0);
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const BIG: RollSettings = RollSettings {
    segment_bytes: 1 << 20,
    segment_ms: u64::MAX,
};

fn run<F: Future<Output = ()> + 'static>(f: impl FnOnce() -> F) {
    glommio::LocalExecutor::default().run(f());
}

/// Batches of `counts[i]` records each (values of `value_len` bytes, timestamps from `ts`)
/// with offsets from `base`.
fn batches_with(base: i64, counts: &[i32], value_len: usize, ts: i64) -> Vec<Batch> {
    let mut raw = bytes::BytesMut::new();
    for &n in counts {
        raw.extend_from_slice(&simple_batch(n, value_len, ts));
    }
    ValidatedBatches::validate(raw, 1 << 20)
        .unwrap()
        .assign_offsets(base)
}

fn batches(base: i64, counts: &[i32]) -> Vec<Batch> {
    batches_with(base, counts, 20, 100)
}

fn bytes_of(all: &[&[Batch]]) -> Vec<Bytes> {
    all.iter()
        .flat_map(|b| b.iter().map(|(_, d)| d.clone()))
        .collect()
}

fn headers_of(all: &[&[Batch]]) -> Vec<BatchHeader> {
    all.iter().flat_map(|b| b.iter().map(|(h, _)| *h)).collect()
}

/// Every batch the log reads back from offset 0, in order.
pub(super) async fn read_all(log: &PartitionLog) -> Vec<Bytes> {
    let end = log.written_end();
    let mut out = Vec::new();
    let mut at = 0;
    while at < end {
        let got = log.read(at, 1 << 20, end).await.unwrap();
        assert!(!got.is_empty(), "nothing read at offset {at} below {end}");
        for b in got {
            at = BatchHeader::parse(&b).unwrap().last_offset() + 1;
            out.push(b);
        }
    }
    out
}

/// Recovers `dir` as a restart would, with the headers recovery showed.
async fn reopen(
    dir: &Path,
    policy: FsyncPolicy,
    roll: RollSettings,
) -> (Recovered, Vec<BatchHeader>) {
    let mut seen = Vec::new();
    let r = recover(dir.to_path_buf(), policy, roll, &mut |h, _| seen.push(*h))
        .await
        .unwrap();
    (r, seen)
}

async fn append(log: &PartitionLog, b: &[Batch], durable: bool) -> Result<(), LogError> {
    let t = log.enqueue(b.to_vec(), BIG)?;
    log.wait(t, durable).await
}

/// Bytes of the `.log` files under `dir`, in file name (offset) order.
fn segment_files(dir: &Path) -> Vec<(PathBuf, u64)> {
    let mut segs: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .map(|p| {
            let len = std::fs::metadata(&p).unwrap().len();
            (p, len)
        })
        .collect();
    segs.sort();
    segs
}

#[test]
fn a_failed_write_fails_every_queued_waiter_and_later_appends_go_on() {
    let td = TestDir::new("fail-write");
    let dir = td.0.clone();
    run(|| async move {
        let log = PartitionLog::new(dir.clone(), FsyncPolicy::Always, Vec::new(), BIG);
        let a = batches(0, &[3, 2]);
        append(&log, &a, true).await.unwrap();
        let gen = log.generation();

        faults::fail_writes(&dir, 0, 1, WriteFault::Eio);
        let b = batches(5, &[1]);
        let c = batches(6, &[2]);
        let tb = log.enqueue(b, BIG).unwrap();
        let tc = log.enqueue(c, BIG).unwrap();
        let (rb, rc) = futures::join!(log.wait(tb, false), log.wait(tc, true));
        assert!(matches!(rb, Err(LogError::Write(_))), "{rb:?}");
        assert!(matches!(rc, Err(LogError::Write(_))), "{rc:?}");
        assert_eq!(faults::injected(&dir), 1);
        assert_eq!(log.generation(), gen + 1);
        assert_eq!((log.written_end(), log.reserved_end()), (5, 5));

        // The next appends take the offsets after what was written, and succeed.
        let d = batches(5, &[4]);
        append(&log, &d, false).await.unwrap();
        let e = batches(9, &[1, 2]);
        append(&log, &e, true).await.unwrap();
        let want = bytes_of(&[&a, &d, &e]);
        assert_eq!(read_all(&log).await, want);
        drop(log);

        let (r, seen) = reopen(&dir, FsyncPolicy::Always, BIG).await;
        assert_eq!(seen, headers_of(&[&a, &d, &e]));
        assert_eq!(r.next_offset, 12);
        assert_eq!(read_all(&r.log).await, want);
    });
}

#[test]
fn enqueue_refuses_batches_that_do_not_continue_the_log() {
    let td = TestDir::new("contiguity");
    let dir = td.0.clone();
    run(|| async move {
        let log = PartitionLog::new(dir.clone(), FsyncPolicy::Always, Vec::new(), BIG);
        let t = log.enqueue(batches(0, &[3]), BIG).unwrap();
        // Queued but not written yet: the next batch still starts after it.
        let gap = log.enqueue(batches(4, &[1]), BIG);
        assert_eq!(
            gap,
            Err(LogError::OutOfOrder {
                expected: 3,
                got: 4
            })
        );
        let back = log.enqueue(batches(2, &[1]), BIG);
        assert_eq!(
            back,
            Err(LogError::OutOfOrder {
                expected: 3,
                got: 2
            })
        );
        // A list with a gap inside is refused whole.
        let mut split = batches(3, &[1]);
        split.extend(batches(5, &[1]));
        let res = log.enqueue(split, BIG);
        assert_eq!(
            res,
            Err(LogError::OutOfOrder {
                expected: 4,
                got: 5
            })
        );
        assert_eq!(log.reserved_end(), 3);
        let t2 = log.enqueue(batches(3, &[2]), BIG).unwrap();
        log.wait(t, true).await.unwrap();
        log.wait(t2, true).await.unwrap();

        // A batch reserved before a failed write, past the batches that failed, is refused:
        // written, it would leave a gap.
        faults::fail_writes(&dir, 0, 1, WriteFault::Eio);
        let failed = log.enqueue(batches(5, &[2]), BIG).unwrap();
        assert!(log.wait(failed, false).await.is_err());
        let late = log.enqueue(batches(7, &[1]), BIG);
        assert_eq!(
            late,
            Err(LogError::OutOfOrder {
                expected: 5,
                got: 7
            })
        );
        append(&log, &batches(5, &[1]), true).await.unwrap();
        assert_eq!(log.written_end(), 6);
    });
}

#[test]
fn a_torn_write_leaves_only_acknowledged_batches_live_and_after_recovery() {
    let td = TestDir::new("torn-write");
    let dir = td.0.clone();
    run(|| async move {
        let log = PartitionLog::new(dir.clone(), FsyncPolicy::Always, Vec::new(), BIG);
        let a = batches(0, &[3, 3]);
        append(&log, &a, true).await.unwrap();

        // The disk fills up in the middle of the third batch of one write: the first two
        // reach the file whole.
        let b = batches(6, &[3, 2, 4]);
        faults::fill_disk(&dir, (b[0].1.len() + b[1].1.len() + 7) as u64);
        let res = append(&log, &b, false).await;
        assert!(matches!(res, Err(LogError::Write(_))), "{res:?}");
        assert_eq!(faults::injected(&dir), 1);
        let segs = segment_files(&dir);
        assert_eq!(segs.len(), 1);
        assert_eq!(segs[0].1, log.size(), "the torn bytes are cut off the file");

        // Space is back; the producer retries its first batch (same shape, so the same
        // length) and gets the same offsets.
        faults::clear(&dir);
        let c = batches_with(6, &[3], 20, 500);
        assert_eq!(c[0].1.len(), b[0].1.len());
        append(&log, &c, false).await.unwrap();
        assert_eq!(read_all(&log).await, bytes_of(&[&a, &c]));
        drop(log);

        // After a restart, the batches of the failed write that reached the disk whole are
        // not taken for data.
        let (r, seen) = reopen(&dir, FsyncPolicy::Always, BIG).await;
        assert_eq!(seen, headers_of(&[&a, &c]));
        assert_eq!(r.next_offset, 9);
        assert_eq!(read_all(&r.log).await, bytes_of(&[&a, &c]));

        // The recovered log goes on after them.
        let d = batches(9, &[1]);
        append(&r.log, &d, true).await.unwrap();
        assert_eq!(read_all(&r.log).await, bytes_of(&[&a, &c, &d]));
    });
}

#[test]
fn a_shorter_append_after_a_torn_write_leaves_no_garbage_behind() {
    let td = TestDir::new("torn-short");
    let dir = td.0.clone();
    run(|| async move {
        let log = PartitionLog::new(dir.clone(), FsyncPolicy::Always, Vec::new(), BIG);
        let a = batches(0, &[2]);
        append(&log, &a, true).await.unwrap();
        let b = batches(2, &[5, 5]);
        faults::fail_writes(&dir, 0, 1, WriteFault::Torn(b[0].1.len() as u64 + 30));
        assert!(append(&log, &b, true).await.is_err());
        assert_eq!(faults::injected(&dir), 1);
        let c = batches(2, &[1]);
        append(&log, &c, true).await.unwrap();
        let want: Vec<u8> = bytes_of(&[&a, &c]).concat();
        let segs = segment_files(&dir);
        let file = std::fs::read(&segs[0].0).unwrap();
        // An O_DIRECT append leaves its last block's zero padding after the batches.
        let (batches_part, padding) = file.split_at(want.len().min(file.len()));
        assert_eq!(batches_part, &want[..], "file holds the batches first");
        assert!(
            padding.len() < crate::log::direct::BLOCK && padding.iter().all(|&b| b == 0),
            "and nothing after them but a block's zero padding"
        );
        assert_eq!(read_all(&log).await, bytes_of(&[&a, &c]));
    });
}

/// Roll settings that put two of `batches(_, &[3])` in a segment.
fn small_segments() -> RollSettings {
    let one = batches(0, &[3])[0].1.len() as u64;
    RollSettings {
        segment_bytes: 2 * one + one / 2,
        segment_ms: u64::MAX,
    }
}

async fn append_rolled(
    log: &PartitionLog,
    b: &[Batch],
    roll: RollSettings,
    durable: bool,
) -> Result<(), LogError> {
    let t = log.enqueue(b.to_vec(), roll)?;
    log.wait(t, durable).await
}

#[test]
fn a_failed_segment_creation_during_a_roll_leaves_a_contiguous_log() {
    let td = TestDir::new("roll-create");
    let dir = td.0.clone();
    let roll = small_segments();
    run(|| async move {
        let log = PartitionLog::new(dir.clone(), FsyncPolicy::Always, Vec::new(), roll);
        let a = batches(0, &[3, 3]);
        append_rolled(&log, &a, roll, true).await.unwrap();
        assert_eq!(log.segment_count(), 1);

        // The sealed segment's two index files are created, the new segment is not.
        faults::fail_creates(&dir, 2, 1);
        let b = batches(6, &[3]);
        assert!(append_rolled(&log, &b, roll, true).await.is_err());
        assert_eq!(faults::injected(&dir), 1);
        assert_eq!(log.written_end(), 6);

        let c = batches(6, &[3, 3, 3]);
        append_rolled(&log, &c, roll, true).await.unwrap();
        assert_eq!(log.segment_count(), 3);
        let want = bytes_of(&[&a, &c]);
        assert_eq!(read_all(&log).await, want);
        faults::power_cut(&dir).unwrap();
        drop(log);
        let (r, seen) = reopen(&dir, FsyncPolicy::Always, roll).await;
        assert_eq!(seen, headers_of(&[&a, &c]));
        assert_eq!(r.next_offset, 15);
        assert_eq!(read_all(&r.log).await, want);
    });
}

#[test]
fn a_failed_fdatasync_is_never_acknowledged_and_the_range_is_written_again() {
    let td = TestDir::new("fail-sync");
    let dir = td.0.clone();
    run(|| async move {
        let log = PartitionLog::new(dir.clone(), FsyncPolicy::Always, Vec::new(), BIG);
        let a = batches(0, &[3]);
        append(&log, &a, true).await.unwrap();
        let gen = log.generation();

        // One round writes both, then its fdatasync fails (twice in a row).
        faults::fail_syncs(&dir, 0, 2, SyncFault::Eio);
        let b = batches(3, &[2]);
        let b1 = batches(5, &[1]);
        let tb = log.enqueue(b.clone(), BIG).unwrap();
        let tb1 = log.enqueue(b1.clone(), BIG).unwrap();
        let (rb, rb1) = futures::join!(log.wait(tb, true), log.wait(tb1, false));
        assert!(matches!(rb, Err(LogError::Write(_))), "{rb:?}");
        assert!(rb1.is_ok(), "acks=1: written, so acknowledged: {rb1:?}");
        assert_eq!(log.generation(), gen + 1);
        assert_eq!(log.written_end(), 6);

        // The written batches are not durable while a sync keeps failing (a duplicate of
        // them waits for everything reserved).
        let all = log.ticket_for_all(6);
        assert!(log.wait(all, true).await.is_err());
        assert_eq!(faults::injected(&dir), 2);

        // Once syncs work again, the next durable append makes everything before it durable
        // too: the bytes the failed syncs may have lost were written again first.
        let c = batches(6, &[2]);
        append(&log, &c, true).await.unwrap();
        let all = log.ticket_for_all(8);
        log.wait(all, true).await.unwrap();
        faults::power_cut(&dir).unwrap();
        drop(log);
        let (r, seen) = reopen(&dir, FsyncPolicy::Always, BIG).await;
        assert_eq!(seen, headers_of(&[&a, &b, &b1, &c]));
        assert_eq!(read_all(&r.log).await, bytes_of(&[&a, &b, &b1, &c]));
    });
}

#[test]
fn a_failed_fdatasync_whose_pages_were_dropped_fences_the_log() {
    let td = TestDir::new("fence");
    let dir = td.0.clone();
    run(|| async move {
        let log = PartitionLog::new(dir.clone(), FsyncPolicy::Always, Vec::new(), BIG);
        let a = batches(0, &[3]);
        append(&log, &a, true).await.unwrap();
        faults::fail_syncs(&dir, 0, 1, SyncFault::EioDroppingPages);
        let b = batches(3, &[2]);
        assert!(append(&log, &b, true).await.is_err());

        // The written batch no longer reads back from the file: nothing is acknowledged from
        // here on, not even as written.
        let all = log.ticket_for_all(5);
        let res = log.wait(all, true).await;
        assert!(matches!(res, Err(LogError::Fenced(_))), "{res:?}");
        let res = append(&log, &batches(5, &[1]), false).await;
        assert!(matches!(res, Err(LogError::Fenced(_))), "{res:?}");
        // What was durable still reads.
        assert_eq!(log.read(0, 1 << 20, 3).await.unwrap(), bytes_of(&[&a]));
        drop(log);
        // A restart recovers what the disk holds.
        let (r, seen) = reopen(&dir, FsyncPolicy::Always, BIG).await;
        assert_eq!(seen, headers_of(&[&a]));
        append(&r.log, &batches(3, &[1]), true).await.unwrap();
    });
}

#[test]
fn an_interval_sync_after_a_failed_one_writes_the_lost_bytes_again() {
    let td = TestDir::new("interval");
    let dir = td.0.clone();
    let policy = FsyncPolicy::Interval(1000);
    run(|| async move {
        let log = PartitionLog::new(dir.clone(), policy, Vec::new(), BIG);
        let a = batches(0, &[3, 1]);
        append(&log, &a, false).await.unwrap();
        faults::fail_syncs(&dir, 0, 1, SyncFault::Eio);
        assert!(log.sync_if_dirty().await.is_err());
        let b = batches(4, &[2]);
        append(&log, &b, false).await.unwrap();
        log.sync_if_dirty().await.unwrap();
        assert_eq!(faults::injected(&dir), 1);
        faults::power_cut(&dir).unwrap();
        drop(log);
        let (_, seen) = reopen(&dir, policy, BIG).await;
        assert_eq!(seen, headers_of(&[&a, &b]));
    });
}

#[test]
fn a_failed_fdatasync_while_sealing_keeps_the_segment_until_it_is_synced() {
    let td = TestDir::new("roll-sync");
    let dir = td.0.clone();
    let roll = small_segments();
    run(|| async move {
        let log = PartitionLog::new(dir.clone(), FsyncPolicy::Always, Vec::new(), roll);
        // acks=1 appends: nothing syncs the segment before the roll does.
        let a = batches(0, &[3, 3]);
        append_rolled(&log, &a, roll, false).await.unwrap();
        faults::fail_syncs(&dir, 0, 1, SyncFault::Eio);
        let b = batches(6, &[3]);
        assert!(append_rolled(&log, &b, roll, false).await.is_err());
        assert_eq!(faults::injected(&dir), 1);
        assert!(
            log.sealed_segments().is_empty(),
            "not sealed before it is synced"
        );

        let c = batches(6, &[3]);
        append_rolled(&log, &c, roll, true).await.unwrap();
        assert_eq!(log.sealed_segments().len(), 1);
        faults::power_cut(&dir).unwrap();
        drop(log);
        // The sealed segment was synced (its lost bytes written again first), and the
        // durable append after it survives with nothing missing before it.
        let (r, seen) = reopen(&dir, FsyncPolicy::Always, roll).await;
        assert_eq!(seen, headers_of(&[&a, &c]));
        assert_eq!(read_all(&r.log).await, bytes_of(&[&a, &c]));
    });
}

#[test]
fn recovery_shows_exactly_the_batches_that_stay() {
    let td = TestDir::new("visitor");
    let dir = td.0.clone();
    let roll = small_segments();
    run(|| async move {
        let log = PartitionLog::new(dir.clone(), FsyncPolicy::Always, Vec::new(), roll);
        let all = batches(0, &[3, 3, 3, 3, 3, 3, 3]);
        for b in all.chunks(1) {
            append_rolled(&log, b, roll, true).await.unwrap();
        }
        assert_eq!(log.segment_count(), 4);
        drop(log);
        let (r, seen) = reopen(&dir, FsyncPolicy::Always, roll).await;
        assert_eq!(seen, headers_of(&[&all]));
        drop(r);

        // Damage in the second batch of the second segment: the segment is cut there and the
        // later ones go, and recovery showed none of what went.
        let segs = segment_files(&dir);
        assert_eq!(segs.len(), 4);
        let mut second = std::fs::read(&segs[1].0).unwrap();
        let at = all[2].1.len() + 70;
        second[at] ^= 0xff;
        std::fs::write(&segs[1].0, &second).unwrap();
        let (r, seen) = reopen(&dir, FsyncPolicy::Always, roll).await;
        assert_eq!(seen, headers_of(&[&all[..3]]));
        assert_eq!(r.next_offset, 9);
        assert_eq!(segment_files(&dir).len(), 2);
        assert_eq!(read_all(&r.log).await, bytes_of(&[&all[..3]]));
        // And again: what stayed is shown once more, nothing else.
        drop(r);
        let (_, seen) = reopen(&dir, FsyncPolicy::Always, roll).await;
        assert_eq!(seen, headers_of(&[&all[..3]]));
    });
}

#[test]
fn reads_racing_direct_appends_to_the_same_block_see_exactly_what_was_written() {
    // Under `always` durable rounds are appended with O_DIRECT, others and all reads go
    // through the page cache: a read of the last block cached while a write rewrites that
    // block must not leave stale bytes behind for later reads.
    let td = TestDir::new("direct-race");
    let dir = td.0.clone();
    run(|| async move {
        let log = PartitionLog::new(dir.clone(), FsyncPolicy::Always, Vec::new(), BIG);
        let mut written: Vec<Batch> = Vec::new();
        for i in 0..400i64 {
            // Small batches: dozens of them share each 4 KiB block.
            let b = batches_with(i, &[1], 20 + (i as usize % 50), 100 + i);
            let reread = async {
                let end = log.written_end();
                match end {
                    0 => Vec::new(),
                    _ => log.read(end - 1, 1 << 20, end).await.unwrap(),
                }
            };
            // Some rounds go through the page cache (nobody waits for their sync).
            let durable = i % 4 != 3;
            let (appended, got) = futures::join!(append(&log, &b, durable), reread);
            appended.unwrap();
            if let Some(last) = written.last() {
                assert_eq!(
                    got,
                    vec![last.1.clone()],
                    "read of batch {} racing a write",
                    i - 1
                );
            }
            written.extend(b);
        }
        assert_eq!(read_all(&log).await, bytes_of(&[&written]));
    });
}

#[test]
fn close_cuts_the_padding_and_the_log_goes_on_and_recovers() {
    let td = TestDir::new("close-trim");
    let dir = td.0.clone();
    run(|| async move {
        let log = PartitionLog::new(dir.clone(), FsyncPolicy::Always, Vec::new(), BIG);
        let a = batches(0, &[2, 3]);
        append(&log, &a, true).await.unwrap();
        let want: Vec<u8> = bytes_of(&[&a]).concat();
        let seg = segment_files(&dir)[0].0.clone();
        // Durable rounds are O_DIRECT: whole blocks, so padding follows the batches.
        assert!(std::fs::metadata(&seg).unwrap().len() >= want.len() as u64);
        log.close().await;
        assert_eq!(
            std::fs::read(&seg).unwrap(),
            want,
            "the file is the log, no padding"
        );
        let b = batches(5, &[1]);
        append(&log, &b, true).await.unwrap();
        append(&log, &batches(6, &[4]), false).await.unwrap();
        let all = [&a[..], &b[..], &batches(6, &[4])[..]];
        assert_eq!(read_all(&log).await, bytes_of(&all));
        drop(log);
        let (r, _) = reopen(&dir, FsyncPolicy::Always, BIG).await;
        assert_eq!(read_all(&r.log).await, bytes_of(&all));
    });
}
