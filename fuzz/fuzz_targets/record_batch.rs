//! Produce batch validation (`record::batch`), the record walker (`record::walk`), the
//! by-timestamp lookup, the control record reader (`record::control`) and the log cleaner's
//! batch rewrite (`log::compact`), fed arbitrary
//! bytes: as a produce records region, and as a batch read back from disk (where nothing was
//! validated by this broker run).
#![no_main]

use bytes::{Bytes, BytesMut};
use kelp::log::compact::{clean_batch, KeyMap, Markers, Outcome, PartitionFacts, Settings};
use kelp::record::batch::{first_offset_at_or_after_within, BatchHeader};
use kelp::record::control::control_type;
use kelp::record::walk::{self, Records};
use kelp::record::ValidatedBatches;
use libfuzzer_sys::fuzz_target;

/// Inflation cap: small, so compression bombs stay cheap (the broker's is 64 MiB; the cap
/// check is the same code whatever its value).
const CAP: usize = 64 << 10;

fuzz_target!(|data: &[u8]| {
    // 1. Produce, as sent and with CRCs made right: whatever validation lets through must
    //    walk cleanly.
    let mut fixed = data.to_vec();
    kelp::record::build::refresh_crcs(&mut fixed);
    validate(data);
    validate(&fixed);
    // 2. The same bytes as a stored batch: the walker must end (error or not) with at most
    //    one record per byte of records region, never trusting the header's count.
    walk_stored(data);
});

fn validate(data: &[u8]) {
    if let Ok(mut v) = ValidatedBatches::validate(BytesMut::from(data), 1 << 20) {
        // A compacted topic's key check answers, whatever the records hold.
        let _ = v.require_keys_within(CAP);
        // LogAppendTime stamping leaves batches that validate again (CRC made right).
        let stamped = data.len() % 2 == 0;
        if stamped {
            v.stamp_log_append_time(1_700_000_000_000);
        }
        for (h, b) in v.assign_offsets(0) {
            // Clients' batches are never control batches.
            assert!(!h.is_control() && control_type(&h, &b).is_none());
            if stamped {
                assert!(h.is_log_append_time() && h.max_timestamp == 1_700_000_000_000);
                let again = ValidatedBatches::validate(BytesMut::from(&b[..]), 1 << 20);
                assert!(again.is_ok_and(|a| a.max_timestamp == h.max_timestamp));
            }
            let found = first_offset_at_or_after_within(&b, i64::MIN, CAP);
            if h.compression() == 0 {
                assert_eq!(walk::check_records(&b, CAP), Ok(h.record_count));
                // Every timestamp is >= i64::MIN: the first record, at the base offset.
                assert_eq!(found.map(|f| f.0), Some(h.base_offset));
            }
            if let Some((off, _)) = found {
                assert!(off >= h.base_offset && off <= h.last_offset());
            }
            let _ = first_offset_at_or_after_within(&b, h.max_timestamp, CAP);
            clean(&h, &b);
        }
    }
}

/// The log cleaner over a batch that validated, mapped against itself (records whose key
/// comes again later in the batch go): what it writes back validates again as a stored
/// batch, with the same offsets, producer and fewer records.
fn clean(h: &BatchHeader, b: &Bytes) {
    let s = Settings {
        now_ms: 1_700_000_000_000,
        delete_retention_ms: 0,
        inflate_cap: CAP,
    };
    // Whether the batch counts as an aborted transaction's, and whether it is its producer's
    // last, varies with the input.
    let aborted = b.len() % 3 == 0;
    let facts = PartitionFacts {
        producers: [(h.producer_id, h.base_offset.saturating_add((b.len() % 2) as i64))].into(),
        stable_to: i64::MAX,
        aborted: if aborted {
            vec![(h.producer_id, h.base_offset, h.last_offset().saturating_add(1))]
        } else {
            Vec::new()
        },
    };
    let mut map = KeyMap::new(1 << 16, h.base_offset, facts);
    if !matches!(map.add(b, h, &s), Ok(true)) {
        return;
    }
    let outcome = clean_batch(b, h, &map, &s, &mut Markers::default());
    if let Ok(Outcome::Rebuilt(r)) = outcome {
        let (found, stop) = kelp::log::scan::scan(&r, h.base_offset, true);
        assert!(stop == kelp::log::scan::Stop::End && found.len() == 1, "{stop:?}");
        let c = found[0].header;
        assert_eq!(
            (c.base_offset, c.last_offset_delta, c.producer_id, c.base_sequence),
            (h.base_offset, h.last_offset_delta, h.producer_id, h.base_sequence)
        );
        assert_eq!(c.attributes & !0x07, h.attributes & !0x07);
        assert!(c.record_count >= 1 && c.record_count < h.record_count);
        assert_eq!(walk::check_records(&r, CAP), Ok(c.record_count));
        // An aborted transaction's batch never keeps part of its records.
        assert!(!(aborted && h.is_transactional() && h.producer_id >= 0));
    }
}

fn walk_stored(data: &[u8]) {
    let b = Bytes::copy_from_slice(data);
    if let Ok(mut r) = Records::new(&b, CAP) {
        let mut n = 0usize;
        while let Ok(Some(rec)) = r.next_record() {
            n += 1;
            assert!(rec.offset_delta >= 0);
        }
        assert!(n <= data.len().max(CAP));
    }
    let _ = first_offset_at_or_after_within(&b, 0, CAP);
    if let Ok(h) = BatchHeader::parse(&b) {
        let _ = control_type(&h, &b);
    }
}
