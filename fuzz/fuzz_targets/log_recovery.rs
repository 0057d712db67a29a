//! Recovery's readers of on-disk bytes, fed arbitrary bytes: the segment scan
//! (`log::scan`, the same state machine recovery runs over a file, here over a buffer read
//! in chunks of a fuzzed size), the cold-read scan, and the group offsets file replay
//! (`log::offsets_store::replay`), and the transaction state recovery rebuilds from the
//! batches it keeps (`partition::txn`, with control records read by `record::control`).
//! `.index`/`.timeindex` files are written but never read.
#![no_main]

use bytes::Bytes;
use kelp::group::offsets::OffsetStore;
use kelp::log::offsets_store::replay;
use kelp::log::scan::{scan, scan_segment_bytes};
use kelp::partition::txn::Transactions;
use kelp::record::control::control_type;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&first, seg)) = data.split_first() else {
        return;
    };
    // As found on disk, and with CRCs made right so mutations reach the checks behind them.
    check_segment(first, seg);
    let mut fixed = seg.to_vec();
    kelp::record::build::refresh_crcs(&mut fixed);
    check_segment(first, &fixed);
    // The offsets file.
    let store = replay(Bytes::copy_from_slice(seg));
    for g in store.groups() {
        let _ = store.fetch_all(&g);
    }
});

fn check_segment(first: u8, seg: &[u8]) {
    // The first byte picks the read size, so chunk boundaries fall everywhere.
    let chunk = 1 + usize::from(first) * 13;
    let mut batches = 0usize;
    let mut txns = Transactions::default();
    let s = scan_segment_bytes(seg, 0, chunk, &mut |h, b| {
        batches += 1;
        txns.observe(h, control_type(h, &Bytes::copy_from_slice(b)));
    });
    // The last stable offset never passes the end, and aborted spans are in order.
    let end = s.next_offset;
    assert!(txns.last_stable_offset(end) <= end);
    for a in txns.aborted_between(i64::MIN, i64::MAX) {
        assert!(a.first_offset <= a.last_offset);
    }
    assert!(s.valid_len <= seg.len() as u64);
    // Reading in chunks must decide exactly as reading the whole segment at once.
    let whole = scan_segment_bytes(seg, 0, seg.len().max(1), &mut |_, _| {});
    assert_eq!(
        (s.valid_len, s.next_offset),
        (whole.valid_len, whole.next_offset)
    );
    // What recovery keeps scans again as intact, to the byte.
    let kept = &seg[..s.valid_len as usize];
    let mut again = 0usize;
    let k = scan_segment_bytes(kept, 0, 1 << 20, &mut |_, _| again += 1);
    assert_eq!(
        (k.valid_len, k.next_offset, k.damage),
        (s.valid_len, s.next_offset, None)
    );
    assert_eq!(again, batches);
    // Cold reads scan recovered bytes without verifying.
    let (found, _) = scan(seg, -1, false);
    assert!(found.len() <= seg.len() / 61 + 1);
}
