//! Conversion between Kafka record batches and SeaweedMQ data messages.
//!
//! Produce: a validated v2 batch (any codec) is decoded into one `DataMessage` per record
//! (key, value, arrival time in ns). Fetch below the cache: the messages FetchMessage returns are
//! encoded into one uncompressed v2 batch whose offsets are `start + i`. SeaweedMQ has no
//! header field, so record headers do not survive into SeaweedMQ (as with the Go gateway);
//! values stay raw bytes so other SeaweedMQ readers and the Go gateway see the same records.
//! Runs on the forwarder thread; calls `record::walk` to read batches and `kafka-protocol`'s
//! encoder to build them.

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use kelp_storage_client::pb::messaging_pb::DataMessage;

use crate::record::walk;

/// A batch turned into SeaweedMQ messages.
pub struct Decoded {
    /// One message per record, in offset order.
    pub messages: Vec<DataMessage>,
    /// Whether any record carried headers (they are dropped).
    pub had_headers: bool,
}

/// Decodes one Kafka record batch (decompressing it, up to
/// [`walk::MAX_INFLATED_BYTES`]) into data messages, in offset order. Records are walked one
/// by one ([`walk::Records`]): a compressed batch whose header claims more records than it
/// holds is an error here, never an allocation sized by the claim.
pub fn decode_batch(batch: &Bytes) -> Result<Decoded, String> {
    let mut records =
        walk::Records::new(batch, walk::MAX_INFLATED_BYTES).map_err(|e| e.why().to_string())?;
    let mut had_headers = false;
    // SeaweedMQ is indexed by time: it names log files after their first record's ts_ns and
    // forces ts_ns to increase. Client timestamps (possibly old, out of order) confuse its
    // offset recovery after a partition reload, so records carry their arrival time, as the
    // Go gateway does; Kafka CreateTime survives only in Kelp's cache.
    let ts_ns = kelp_storage_client::broker::now_ns();
    let mut messages = Vec::new();
    while let Some(r) = records.next_record().map_err(|e| e.why().to_string())? {
        had_headers |= r.header_count > 0;
        messages.push(DataMessage {
            key: r.key.unwrap_or_default(),
            value: r.value.unwrap_or_default(),
            ts_ns,
            ctrl: None,
        });
    }
    Ok(Decoded {
        messages,
        had_headers,
    })
}

/// Encodes messages read from `start` into one uncompressed v2 batch (offset `start + i`,
/// timestamps in ms). An empty key is sent as a null key, as SeaweedMQ cannot tell them apart.
pub fn encode_batch(start: i64, messages: &[DataMessage]) -> Result<Bytes, String> {
    let records: Vec<Record> = messages
        .iter()
        .enumerate()
        .map(|(i, m)| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: start + i as i64,
            // The encoder starts a new batch when offset - sequence changes; with base
            // sequence -1 (no producer id) this keeps one batch.
            sequence: i as i32 - 1,
            timestamp: m.ts_ns / 1_000_000,
            key: (!m.key.is_empty()).then(|| m.key.clone()),
            value: Some(m.value.clone()),
            headers: Default::default(),
        })
        .collect();
    let mut out = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut out,
        records.iter(),
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .map_err(|e| e.to_string())?;
    Ok(out.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::batch::{BatchHeader, ValidatedBatches};

    #[test]
    fn round_trip_through_messages() {
        let built = crate::record::build::simple_batch(3, 10, 1_700_000_000_000);
        let decoded = decode_batch(&built.freeze()).unwrap();
        assert_eq!(decoded.messages.len(), 3);
        assert!(decoded.messages[1].ts_ns > 1_700_000_000_001_000_000);
        assert!(decoded.messages[0].key.is_empty());
        let batch = encode_batch(42, &decoded.messages).unwrap();
        let h = BatchHeader::parse(&batch).unwrap();
        assert_eq!((h.base_offset, h.last_offset()), (42, 44));
        // The re-encoded batch passes the broker's own validation (CRC, lengths).
        assert!(ValidatedBatches::validate(BytesMut::from(&batch[..]), 1 << 20).is_ok());
        let again = decode_batch(&batch).unwrap();
        assert_eq!(again.messages[2].value, decoded.messages[2].value);
        assert_eq!(
            again.messages[2].ts_ns / 1_000_000,
            decoded.messages[2].ts_ns / 1_000_000
        );
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(decode_batch(&Bytes::from_static(b"not a batch at all")).is_err());
    }
}
