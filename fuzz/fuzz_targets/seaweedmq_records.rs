//! SeaweedMQ messages turned back into Kafka batches (`forwarder::records`,
//! `forwarder::envelope`), fed arbitrary stored values: Kelp's envelopes (transactions'
//! records and markers among them), other writers' plain values, and damaged bytes all come
//! back as valid batches, in offset order, one offset per message; a value that opens as an
//! envelope wraps back to the same bytes.
#![no_main]

use bytes::{Bytes, BytesMut};
use kelp::forwarder::envelope;
use kelp::forwarder::records::{decode_batch, encode_batch};
use kelp::record::batch::BatchHeader;
use kelp::record::ValidatedBatches;
use kelp_storage_client::pb::messaging_pb::DataMessage;
use libfuzzer_sys::fuzz_target;

/// Separates the messages of one input.
const SEPARATOR: u8 = 0xFE;

fuzz_target!(|data: &[u8]| {
    let whole = Bytes::copy_from_slice(data);
    if let Some(o) = envelope::open(&whole) {
        let again = envelope::wrap(
            o.timestamp,
            o.empty_key,
            o.value.as_deref(),
            o.header_count,
            &o.headers,
            o.txn,
        );
        assert_eq!(again, whole, "an envelope wraps back to its bytes");
    }
    // Odd messages carry a key (their first byte's worth), even ones none.
    let messages: Vec<DataMessage> = data
        .split(|&b| b == SEPARATOR)
        .take(64)
        .enumerate()
        .map(|(i, v)| {
            let k = if i % 2 == 1 { v.len().min(3) } else { 0 };
            DataMessage {
                key: Bytes::copy_from_slice(&v[..k]),
                value: Bytes::copy_from_slice(&v[k..]),
                ts_ns: i as i64 * 1_000_000,
                ctrl: None,
            }
        })
        .collect();
    let start = 40;
    let mut next = start;
    for b in encode_batch(start, &messages) {
        let h = BatchHeader::parse(&b).expect("a built batch parses");
        assert_eq!(h.base_offset, next, "batches follow each other");
        next = h.last_offset() + 1;
        ValidatedBatches::validate_broker(BytesMut::from(&b[..])).expect("a built batch is valid");
        let records = decode_batch(&b).expect("a built batch decodes");
        assert_eq!(records.len() as i32, h.record_count);
    }
    assert_eq!(next, start + messages.len() as i64, "one offset per message");
});
