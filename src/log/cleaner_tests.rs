//! The cleaner over a real partition log: what a reader from offset 0 sees after cleaning
//! (the latest value of each key at its own offset, the active segment untouched), that a
//! restart recovers the cleaned log as it was, that a cleaned log is not rewritten again,
//! and that a cleaned copy left by a crash before its rename is dropped at recovery.

use std::collections::HashMap;
use std::path::PathBuf;

use bytes::{Bytes, BytesMut};

use super::compact::Settings;
use super::partition_log::{PartitionLog, RollSettings};
use super::recovery::recover;
use crate::config::FsyncPolicy;
use crate::record::batch::{BatchHeader, ValidatedBatches};
use crate::record::build::{BatchBuilder, RecordParts};
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

/// One single-record batch at `offset`: key `k`, value `v`.
fn record(offset: i64, k: &str, v: &str) -> (BatchHeader, Bytes) {
    let mut b = BatchBuilder::default();
    b.push(RecordParts {
        timestamp: NOW - 10,
        key: Some(k.as_bytes()),
        value: Some(v.as_bytes()),
        header_count: 0,
        headers: &[],
    });
    let raw = BytesMut::from(&b.finish(0)[..]);
    let mut v = ValidatedBatches::validate(raw, 1 << 20)
        .unwrap()
        .assign_offsets(offset);
    v.remove(0)
}

/// (offset, key, value) of every record read from offset 0.
async fn read_records(log: &PartitionLog) -> Vec<(i64, String, String)> {
    let end = log.written_end();
    let mut out = Vec::new();
    let mut at = 0;
    while at < end {
        let got = log.read(at, 1 << 20, end).await.unwrap();
        assert!(!got.is_empty(), "nothing read at offset {at} below {end}");
        for b in got {
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
            at = h.last_offset() + 1;
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
        let report = log.compact(&settings(), 1000, i64::MAX).await.unwrap();
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
        let again = log.compact(&settings(), 1000, i64::MAX).await.unwrap();
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
