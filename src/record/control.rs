//! Control batches (KIP-98): the commit and abort markers a transaction coordinator has the
//! partition leaders write, one control record each. Builds them and reads their type back;
//! clients may not write them ([`super::ValidatedBatches::validate`] refuses them).

use bytes::{Bytes, BytesMut};

use super::batch::BatchHeader;
use super::build::{BatchBuilder, RecordParts};
use super::walk::Records;

/// Attributes of a marker batch: transactional (bit 4) and control (bit 5), uncompressed.
const MARKER_ATTRIBUTES: i16 = 0x30;

const OFF_CRC: usize = 17;
const OFF_ATTRIBUTES: usize = 21;
const OFF_PRODUCER_ID: usize = 43;

/// What a transaction marker says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlType {
    /// The transaction's records are dropped by read_committed readers.
    Abort,
    /// The transaction's records become visible to read_committed readers.
    Commit,
}

impl ControlType {
    /// Its code in the control record's key (Kafka's ControlRecordType).
    pub fn code(self) -> i16 {
        match self {
            ControlType::Abort => 0,
            ControlType::Commit => 1,
        }
    }
}

/// A marker batch for `producer_id`/`producer_epoch` at base offset 0 (offsets are assigned
/// on append, like a client batch's): key `[version 0, type]`, value `[version 0,
/// coordinator_epoch]`, as Kafka's EndTransactionMarker.
pub fn marker_batch(
    kind: ControlType,
    producer_id: i64,
    producer_epoch: i16,
    coordinator_epoch: i32,
    timestamp: i64,
) -> BytesMut {
    let mut key = [0u8; 4];
    key[2..].copy_from_slice(&kind.code().to_be_bytes());
    let mut value = [0u8; 6];
    value[2..].copy_from_slice(&coordinator_epoch.to_be_bytes());
    let mut b = BatchBuilder::default();
    b.push(RecordParts {
        timestamp,
        key: Some(&key),
        value: Some(&value),
        header_count: 0,
        headers: &[],
    });
    let mut out = BytesMut::from(&b.finish(0)[..]);
    out[OFF_ATTRIBUTES..OFF_ATTRIBUTES + 2].copy_from_slice(&MARKER_ATTRIBUTES.to_be_bytes());
    out[OFF_PRODUCER_ID..OFF_PRODUCER_ID + 8].copy_from_slice(&producer_id.to_be_bytes());
    out[OFF_PRODUCER_ID + 8..OFF_PRODUCER_ID + 10].copy_from_slice(&producer_epoch.to_be_bytes());
    out[OFF_PRODUCER_ID + 10..OFF_PRODUCER_ID + 14].copy_from_slice(&(-1i32).to_be_bytes());
    let crc = crc32c::crc32c(&out[OFF_ATTRIBUTES..]);
    out[OFF_CRC..OFF_ATTRIBUTES].copy_from_slice(&crc.to_be_bytes());
    out
}

/// The marker type of a control batch; None for any other batch, for control records other
/// than commit and abort (Kafka has more, for its own logs), and for a batch that does not
/// read.
pub fn control_type(h: &BatchHeader, batch: &Bytes) -> Option<ControlType> {
    if !h.is_control() {
        return None;
    }
    let mut records = Records::new(batch, 1 << 16).ok()?;
    let key = records.next_record().ok()??.key?;
    if key.len() < 4 {
        return None;
    }
    match i16::from_be_bytes([key[2], key[3]]) {
        0 => Some(ControlType::Abort),
        1 => Some(ControlType::Commit),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::batch::tests::make_batch;
    use crate::record::ValidatedBatches;

    #[test]
    fn markers_round_trip_and_clients_cannot_write_them() {
        for kind in [ControlType::Abort, ControlType::Commit] {
            let m = marker_batch(kind, 42, 3, 7, 1_000).freeze();
            let h = BatchHeader::parse(&m).unwrap();
            assert!(h.is_control() && h.is_transactional());
            assert_eq!(
                (h.producer_id, h.producer_epoch, h.record_count),
                (42, 3, 1)
            );
            assert_eq!(h.crc, crc32c::crc32c(&m[OFF_ATTRIBUTES..]));
            assert_eq!(control_type(&h, &m), Some(kind));
            let err = ValidatedBatches::validate(BytesMut::from(&m[..]), 1 << 20).unwrap_err();
            assert_eq!(err.code(), crate::error::code::INVALID_RECORD);
        }
        let plain = make_batch(2, 0).freeze();
        assert_eq!(
            control_type(&BatchHeader::parse(&plain).unwrap(), &plain),
            None
        );
    }
}
