//! Hand-written Produce request decoder (v3-v12: v12 differs only in meaning, KIP-890).
//!
//! The generic codec would hand back immutable `Bytes`; Kelp needs each partition's records as
//! an exclusively owned `BytesMut` slice of the frame so the owning shard can write base
//! offsets in place without copying. So this decoder records the byte ranges of the records
//! fields and then splits the frame buffer along them.

use bytes::{Buf, BytesMut};

use super::wire::{Reader, WireError};

/// One partition's produce data: its index and records (None when the client sent null).
#[derive(Debug)]
pub struct PartitionData {
    /// The partition index.
    pub index: i32,
    /// The record batches, a slice of the request frame (not copied).
    pub records: Option<BytesMut>,
}

/// One topic's produce data.
#[derive(Debug)]
pub struct TopicData {
    /// The topic's name.
    pub name: String,
    /// Its partitions, in request order.
    pub partitions: Vec<PartitionData>,
}

/// A decoded Produce request.
#[derive(Debug)]
pub struct ProduceRequest {
    /// Set by transactional producers, which Kelp refuses.
    pub transactional_id: Option<String>,
    /// 0: no answer; 1: after the append; -1: after the storage says durable.
    pub acks: i16,
    /// How long the producer waits for acks; also caps the storage wait.
    pub timeout_ms: i32,
    /// The topics, in request order.
    pub topics: Vec<TopicData>,
}

/// Decodes a Produce request body (the frame after the request header).
pub fn decode(mut body: BytesMut, version: i16) -> Result<ProduceRequest, WireError> {
    let flex = version >= 9;
    // Smallest encodings of a topic (name, partition count, tags) and of a partition (index,
    // records length, tags): counts are checked against them before anything is allocated.
    let (min_topic, min_partition) = if flex { (3, 6) } else { (6, 8) };
    // The records' byte ranges, one per partition in request order (None: null records).
    // The topics are built as they are read and get their records once the reader's borrow
    // of the frame ends: a request costs a handful of allocations, whatever its partitions.
    let mut ranges: Vec<Option<(usize, usize)>> = Vec::new();
    let (transactional_id, acks, timeout_ms, mut topics) = {
        let mut r = Reader::new(&body);
        let transactional_id = r.nullable_string(flex)?.map(str::to_owned);
        let acks = r.i16()?;
        let timeout_ms = r.i32()?;
        let n_topics = r.array_len(flex, min_topic)?;
        let mut topics = Vec::with_capacity(n_topics);
        for _ in 0..n_topics {
            let name = r.string(flex)?.to_owned();
            let n_parts = r.array_len(flex, min_partition)?;
            let mut partitions = Vec::with_capacity(n_parts);
            ranges.reserve(n_parts);
            for _ in 0..n_parts {
                let index = r.i32()?;
                ranges.push(r.nullable_bytes_range(flex)?);
                partitions.push(PartitionData {
                    index,
                    records: None,
                });
                if flex {
                    r.skip_tagged_fields()?;
                }
            }
            if flex {
                r.skip_tagged_fields()?;
            }
            topics.push(TopicData { name, partitions });
        }
        if flex {
            r.skip_tagged_fields()?;
        }
        (transactional_id, acks, timeout_ms, topics)
    };
    // Ranges are in ascending order: peel each off the buffer as its own exclusive slice.
    let mut consumed = 0usize;
    let mut ranges = ranges.into_iter();
    for part in topics.iter_mut().flat_map(|t| t.partitions.iter_mut()) {
        if let Some(Some((start, len))) = ranges.next() {
            body.advance(start - consumed);
            part.records = Some(body.split_to(len));
            consumed = start + len;
        }
    }
    Ok(ProduceRequest {
        transactional_id,
        acks,
        timeout_ms,
        topics,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BufMut;
    use kafka_protocol::messages::produce_request::{
        PartitionProduceData, ProduceRequest as Generic, TopicProduceData,
    };
    use kafka_protocol::messages::TopicName;
    use kafka_protocol::protocol::{Encodable, StrBytes};

    fn generic(version: i16) -> BytesMut {
        let req = Generic::default()
            .with_acks(-1)
            .with_timeout_ms(1500)
            .with_topic_data(vec![
                TopicProduceData::default()
                    .with_name(TopicName(StrBytes::from_static_str("alpha")))
                    .with_partition_data(vec![
                        PartitionProduceData::default()
                            .with_index(0)
                            .with_records(Some(bytes::Bytes::from_static(b"first"))),
                        PartitionProduceData::default()
                            .with_index(3)
                            .with_records(None),
                    ]),
                TopicProduceData::default()
                    .with_name(TopicName(StrBytes::from_static_str("beta")))
                    .with_partition_data(vec![PartitionProduceData::default()
                        .with_index(1)
                        .with_records(Some(bytes::Bytes::from_static(b"second!")))]),
            ]);
        let mut b = BytesMut::new();
        req.encode(&mut b, version).unwrap();
        b
    }

    #[test]
    fn decodes_what_the_reference_codec_encodes() {
        for v in [3i16, 8, 9, 11] {
            let req = decode(generic(v), v).unwrap();
            assert_eq!((req.acks, req.timeout_ms), (-1, 1500));
            assert_eq!(req.topics.len(), 2);
            assert_eq!(req.topics[0].name, "alpha");
            assert_eq!(
                req.topics[0].partitions[0].records.as_deref().unwrap(),
                b"first"
            );
            assert!(req.topics[0].partitions[1].records.is_none());
            assert_eq!(req.topics[1].partitions[0].index, 1);
            assert_eq!(
                req.topics[1].partitions[0].records.as_deref().unwrap(),
                b"second!"
            );
        }
    }

    #[test]
    fn rejects_truncation_and_absurd_counts() {
        for v in 3..=11 {
            let full = generic(v);
            for cut in 0..full.len() {
                assert!(
                    decode(BytesMut::from(&full[..cut]), v).is_err(),
                    "v{v} cut {cut}"
                );
            }
        }
        let mut b = BytesMut::new();
        b.put_i16(-1);
        b.put_i16(1);
        b.put_i32(0);
        b.put_i32(i32::MAX);
        assert!(decode(b, 3).is_err());
        // One topic announced in 5 bytes: a topic takes 6 at least (name length, count).
        let mut b = BytesMut::new();
        b.put_i16(-1);
        b.put_i16(1);
        b.put_i32(0);
        b.put_i32(1);
        b.put_slice(&[0, 0, 0, 0, 0]);
        assert!(decode(b, 3).is_err());
    }
}
