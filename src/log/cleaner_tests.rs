//! The cleaner over a real partition log: what a reader from offset 0 sees after cleaning
//! (the latest value of each key at its own offset, the active segment untouched), that a
//! restart recovers the cleaned log as it was, that a cleaned log is not rewritten again,
//! and that a cleaned copy left by a crash before its rename is dropped at recovery.

use std::collections::HashMap;
use std::path::PathBuf;

use bytes::{Bytes, BytesMut};

use super::cleaner::Throttle;
use super::compact::{PartitionFacts, Settings};
use super::partition_log::{PartitionLog, RollSettings};
use super::recovery::recover;
use crate::config::FsyncPolicy;
use crate::record::batch::{BatchHeader, ValidatedBatches};
use crate::record::build::{BatchBuilder, RecordParts};
use crate::record::control::{control_type, marker_batch, ControlType};
use crate::record::walk::Records;

const SMALL: RollSettings = RollSettings {
    segment_bytes: 400,
    segment_ms: u64::MAX,
};

const NOW: i64 = 1_000_000_000;

fn settings() -> Settings {
    Settings {
        now_ms: NOW,
        delete_retention_ms: 86_400_000,
        inflate_cap: 1 << 20,
    }
}

/// A partition with no transaction.
fn no_txns() -> PartitionFacts {
    PartitionFacts {
        stable_to: i64::MAX,
        ..PartitionFacts::default()
    }
}

/// One single-record batch at `offset`: key `k`, value `v`.
fn record(offset: i64, k: &str, v: &str) -> (BatchHeader, Bytes) {
    record_of(offset, k, v, None)
}

/// The same, written by `producer` (id, epoch, attribute bits).
fn record_of(
    offset: i64,
    k: &str,
    v: &str,
    producer: Option<(i64, i16, i16)>,
) -> (BatchHeader, Bytes) {
    let mut b = BatchBuilder::default();
    b.push(RecordParts {
        timestamp: NOW - 10,
        key: Some(k.as_bytes()),
        value: Some(v.as_bytes()),
        header_count: 0,
        headers: &[],
    });
    let raw = BytesMut::from(&b.finish_for(0, producer)[..]);
    at_offset(raw, offset)
}

/// Producer `pid`'s commit or abort marker at `offset` (validation refuses clients' control
/// batches, so it is placed by hand).
fn marker_at(offset: i64, kind: ControlType, pid: i64) -> (BatchHeader, Bytes) {
    let mut m = marker_batch(kind, pid, 0, 0, NOW - 10);
    m[..8].copy_from_slice(&offset.to_be_bytes());
    let b = m.freeze();
    (BatchHeader::parse(&b).unwrap(), b)
}

fn at_offset(raw: BytesMut, offset: i64) -> (BatchHeader, Bytes) {
    let mut v = ValidatedBatches::validate(raw, 1 << 20)
        .unwrap()
        .assign_offsets(offset);
    v.remove(0)
}

/// (offset, key, value) of every record read from offset 0.
async fn read_records(log: &PartitionLog) -> Vec<(i64, String, String)> {
    let mut out = Vec::new();
    for b in super::fault_tests::read_all(log).await {
        let h = BatchHeader::parse(&b).unwrap();
        let mut r = Records::new(&b, 1 << 20).unwrap();
        while let Some(x) = r.next_record().unwrap() {
            let s = |b: Option<Bytes>| String::from_utf8(b.unwrap().to_vec()).unwrap();
            out.push((
                h.base_offset + i64::from(x.offset_delta),
                s(x.key),
                s(x.value),
            ));
        }
    }
    out
}

fn dir(tag: &str) -> PathBuf {
    std::env::temp_dir().join(format!("kelp-clean-{tag}-{}", uuid::Uuid::new_v4()))
}

#[test]
fn cleaning_keeps_the_latest_value_of_each_key_at_its_offset() {
    let d = dir("latest");
    let d2 = d.clone();
    glommio::LocalExecutor::default().run(async move {
        let log = PartitionLog::new(d2.clone(), FsyncPolicy::Always, Vec::new(), SMALL);
        let mut written = Vec::new();
        for i in 0..60i64 {
            let (k, v) = (format!("k{}", i % 5), format!("v{i}"));
            let b = record(i, &k, &v);
            let t = log.enqueue(vec![b], SMALL).unwrap();
            log.wait(t, true).await.unwrap();
            written.push((i, k, v));
        }
        let before = log.size();
        assert!(log.sealed_segments().len() > 5);
        let active_base = {
            let sealed = log.sealed_segments();
            sealed.last().unwrap().1
        };
        let report = log
            .compact(
                &settings(),
                1000,
                i64::MAX,
                -1,
                no_txns(),
                &mut Throttle::new(None),
            )
            .await
            .unwrap();
        assert!(report.segments > 0 && report.keys == 5, "{report:?}");
        assert!(log.size() < before, "{} !< {before}", log.size());

        let got = read_records(&log).await;
        // Every record read is one written, at its offset.
        for r in &got {
            assert_eq!(&written[r.0 as usize], r);
        }
        // The latest of each key in the sealed range and everything after it stay.
        let mut latest: HashMap<&str, i64> = HashMap::new();
        for (o, k, _) in written.iter().filter(|(o, _, _)| *o < active_base) {
            latest.insert(k, *o);
        }
        let want: Vec<_> = written
            .iter()
            .filter(|(o, k, _)| *o >= active_base || latest.get(k.as_str()) == Some(o))
            .cloned()
            .collect();
        assert_eq!(got, want);

        // Nothing more to do: no segment is rewritten again.
        let again = log
            .compact(
                &settings(),
                1000,
                i64::MAX,
                -1,
                no_txns(),
                &mut Throttle::new(None),
            )
            .await
            .unwrap();
        assert_eq!(again.segments, 0, "{again:?}");
        drop(log);

        // A restart recovers the cleaned log as it was, and appends go on after it.
        let r = recover(d2.clone(), FsyncPolicy::Always, SMALL, &mut |_, _| {})
            .await
            .unwrap();
        assert_eq!(r.next_offset, 60);
        assert_eq!(read_records(&r.log).await, want);
    });
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn later_rounds_map_only_the_dirty_segments_and_clean_the_whole_log_against_them() {
    let d = dir("dirty");
    let d2 = d.clone();
    glommio::LocalExecutor::default().run(async move {
        let log = PartitionLog::new(d2.clone(), FsyncPolicy::Always, Vec::new(), SMALL);
        let append = |o: i64, k: String| {
            let t = log
                .enqueue(vec![record(o, &k, &format!("v{o}"))], SMALL)
                .unwrap();
            log.wait(t, true)
        };
        // 40 distinct keys, then 10 of them again, then one more record to seal them.
        for i in 0..40i64 {
            append(i, format!("k{i}")).await.unwrap();
        }
        let first = log
            .compact(
                &settings(),
                1000,
                i64::MAX,
                -1,
                no_txns(),
                &mut Throttle::new(None),
            )
            .await
            .unwrap();
        for i in 40..50i64 {
            append(i, format!("k{}", i - 40)).await.unwrap();
        }
        append(50, "last".into()).await.unwrap();
        // Room for the dirty keys only (those of the segment that was active in the first
        // round and the 10 again), not for the 40 of the whole log.
        let r = log
            .compact(
                &settings(),
                20,
                i64::MAX,
                first.cleaned_to,
                no_txns(),
                &mut Throttle::new(None),
            )
            .await
            .unwrap();
        assert!(r.segments > 0 && r.keys <= 20, "{r:?}");
        let keys: Vec<(i64, String)> = read_records(&log)
            .await
            .into_iter()
            .map(|(o, k, _)| (o, k))
            .collect();
        let mut want: Vec<(i64, String)> = (10..40).map(|i| (i, format!("k{i}"))).collect();
        want.extend((40..50).map(|i| (i, format!("k{}", i - 40))));
        want.push((50, "last".into()));
        assert_eq!(keys, want);
    });
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_cleaned_copy_left_by_a_crash_is_dropped_at_recovery() {
    let d = dir("crash");
    let d2 = d.clone();
    glommio::LocalExecutor::default().run(async move {
        let log = PartitionLog::new(d2.clone(), FsyncPolicy::Always, Vec::new(), SMALL);
        for i in 0..20i64 {
            let t = log
                .enqueue(vec![record(i, "k", &format!("v{i}"))], SMALL)
                .unwrap();
            log.wait(t, true).await.unwrap();
        }
        let want = read_records(&log).await;
        drop(log);
        // As if the process died after writing the copy, before the rename.
        let first = d2.join(super::segment::log_name(0));
        let copy = PathBuf::from(format!(
            "{}{}",
            first.display(),
            super::cleaner::CLEANED_SUFFIX
        ));
        std::fs::write(&copy, b"partial").unwrap();
        let r = recover(d2.clone(), FsyncPolicy::Always, SMALL, &mut |_, _| {})
            .await
            .unwrap();
        assert!(!copy.exists());
        assert_eq!(read_records(&r.log).await, want);
    });
    let _ = std::fs::remove_dir_all(&d);
}

/// A transaction spanning segments keeps its commit marker while any of its records stays;
/// an aborted one goes with its marker; a restart recovers every kept record with its
/// marker after it (no transaction left open).
#[test]
fn transactions_across_segments_keep_their_markers_while_their_records_stay() {
    let d = dir("txn");
    let d2 = d.clone();
    glommio::LocalExecutor::default().run(async move {
        let log = PartitionLog::new(d2.clone(), FsyncPolicy::Always, Vec::new(), SMALL);
        let txn = |pid: i64| Some((pid, 0i16, 0x10i16));
        let mut batches = Vec::new();
        // Producer 9 commits k0..k5 over several segments; producer 10 aborts a and b;
        // plain writes then supersede k0..k4 (k5 keeps producer 9's transaction alive).
        for i in 0..6i64 {
            batches.push(record_of(i, &format!("k{i}"), "t", txn(9)));
        }
        batches.push(marker_at(6, ControlType::Commit, 9));
        batches.push(record_of(7, "a", "x", txn(10)));
        batches.push(record_of(8, "b", "x", txn(10)));
        batches.push(marker_at(9, ControlType::Abort, 10));
        for i in 0..5i64 {
            batches.push(record(10 + i, &format!("k{i}"), "p"));
        }
        // Producer 9 commits another: the marker above is no longer its last batch.
        batches.push(record_of(15, "z", "u", txn(9)));
        batches.push(marker_at(16, ControlType::Commit, 9));
        for i in 17..24i64 {
            batches.push(record(i, "seal", &format!("s{i}")));
        }
        for b in batches {
            let t = log.enqueue(vec![b], SMALL).unwrap();
            log.wait(t, true).await.unwrap();
        }
        assert!(log.sealed_segments().len() > 3);
        let s = Settings {
            delete_retention_ms: 0,
            ..settings()
        };
        let facts = PartitionFacts {
            producers: HashMap::from([(9, 16), (10, 9)]),
            stable_to: 24,
            aborted: vec![(10, 7, 9)],
        };
        let report = log
            .compact(&s, 1000, i64::MAX, -1, facts, &mut Throttle::new(None))
            .await
            .unwrap();
        assert!(report.segments > 0, "{report:?}");
        drop(log);
        let r = recover(d2.clone(), FsyncPolicy::Always, SMALL, &mut |_, _| {})
            .await
            .unwrap();
        let mut kept = Vec::new();
        let mut open: HashMap<i64, i64> = HashMap::new();
        for b in super::fault_tests::read_all(&r.log).await {
            let h = BatchHeader::parse(&b).unwrap();
            if h.is_control() {
                let kind = control_type(&h, &b).unwrap();
                kept.push((h.base_offset, format!("{kind:?}")));
                open.remove(&h.producer_id);
            } else {
                if h.is_transactional() {
                    open.entry(h.producer_id).or_insert(h.base_offset);
                }
                let mut recs = Records::new(&b, 1 << 20).unwrap();
                while let Some(x) = recs.next_record().unwrap() {
                    let key = String::from_utf8(x.key.unwrap().to_vec()).unwrap();
                    kept.push((h.base_offset + i64::from(x.offset_delta), key));
                }
            }
        }
        assert!(
            open.is_empty(),
            "a transaction left without its marker: {open:?}"
        );
        let offsets: Vec<i64> = kept.iter().map(|k| k.0).collect();
        // k5 of producer 9 keeps its commit marker; producer 10's records go (its abort
        // marker is its last batch: it stays); k0..k4's plain writes supersede the rest of
        // producer 9's first transaction.
        assert!(offsets.contains(&5) && offsets.contains(&6), "{kept:?}");
        assert!(!offsets.contains(&7) && !offsets.contains(&8), "{kept:?}");
        assert!(offsets.contains(&9), "{kept:?}");
        for o in 0..5 {
            assert!(!offsets.contains(&o), "{kept:?}");
        }
        assert!(offsets.contains(&16), "{kept:?}");
    });
    let _ = std::fs::remove_dir_all(&d);
}
