//! Hand-written Fetch response encoder (v4-v16).
//!
//! Cached record batches are appended as their own slices; only the small fixed fields around
//! them are written into fresh buffers. Records are never re-encoded or copied.

use bytes::{BufMut, Bytes, BytesMut};

use super::wire::{put_array_len, put_bytes_len, put_string, put_uvarint};
use super::{RequestHeader, Response};

/// One partition of a Fetch response.
#[derive(Debug, Default, Clone)]
pub struct PartitionOut {
    /// The partition index.
    pub index: i32,
    /// Its error code (`code::NONE` when records follow).
    pub error_code: i16,
    /// The offset after the last committed record.
    pub high_watermark: i64,
    /// The last stable offset (KIP-98): the high watermark unless a transaction is open.
    pub last_stable_offset: i64,
    /// The first offset still stored (v5+).
    pub log_start_offset: i64,
    /// Aborted transactions among the records, as (producer id, first offset): Some for
    /// read_committed fetches, None (null) for read_uncommitted ones.
    pub aborted: Option<Vec<(i64, i64)>>,
    /// Whole record batches, in offset order.
    pub records: Vec<Bytes>,
}

impl PartitionOut {
    /// Record bytes carried by this partition.
    pub fn records_len(&self) -> usize {
        self.records.iter().map(Bytes::len).sum()
    }
}

/// One topic of a Fetch response.
#[derive(Debug, Default, Clone)]
pub struct TopicOut {
    /// The topic's name, sent up to v12.
    pub name: String,
    /// The topic's id, sent instead of the name from v13.
    pub topic_id: [u8; 16],
    /// Its partitions, in request order.
    pub partitions: Vec<PartitionOut>,
}

/// Encodes a whole Fetch response frame, counting its error codes
/// (`kelp_request_errors_total`).
pub fn encode(
    header: &RequestHeader,
    error_code: i16,
    session_id: i32,
    topics: &[TopicOut],
) -> Response {
    let count = |code| crate::metrics::errors::count(header.api_key, code);
    count(error_code);
    topics
        .iter()
        .flat_map(|t| &t.partitions)
        .for_each(|p| count(p.error_code));
    let v = header.api_version;
    let flex = v >= 12;
    let mut body: Vec<Bytes> = Vec::new();
    let mut cur = BytesMut::with_capacity(128);
    cur.put_i32(0); // throttle_time_ms
    if v >= 7 {
        cur.put_i16(error_code);
        cur.put_i32(session_id);
    }
    put_array_len(&mut cur, topics.len(), flex);
    let mut first: Option<BytesMut> = None;
    for t in topics {
        if v >= 13 {
            cur.put_slice(&t.topic_id);
        } else {
            put_string(&mut cur, &t.name, flex);
        }
        put_array_len(&mut cur, t.partitions.len(), flex);
        for p in &t.partitions {
            cur.put_i32(p.index);
            cur.put_i16(p.error_code);
            cur.put_i64(p.high_watermark);
            cur.put_i64(p.last_stable_offset);
            if v >= 5 {
                cur.put_i64(p.log_start_offset);
            }
            match &p.aborted {
                None if flex => put_uvarint(&mut cur, 0),
                None => cur.put_i32(-1),
                Some(list) => {
                    put_array_len(&mut cur, list.len(), flex);
                    for &(producer_id, first_offset) in list {
                        cur.put_i64(producer_id);
                        cur.put_i64(first_offset);
                        if flex {
                            put_uvarint(&mut cur, 0); // tagged fields
                        }
                    }
                }
            }
            if v >= 11 {
                cur.put_i32(-1); // preferred_read_replica
            }
            let n = p.records_len();
            put_bytes_len(&mut cur, Some(n), flex);
            if n > 0 {
                // Flush the fixed fields, then hand the batches over as they are.
                let done = std::mem::replace(&mut cur, BytesMut::with_capacity(64));
                if first.is_none() {
                    first = Some(done);
                } else {
                    body.push(done.freeze());
                }
                body.extend(p.records.iter().cloned());
            }
            if flex {
                cur.put_u8(0); // partition tagged fields
            }
        }
        if flex {
            cur.put_u8(0); // topic tagged fields
        }
    }
    if flex {
        cur.put_u8(0); // response tagged fields
    }
    match first {
        None => Response::from_body(header, Vec::new(), cur),
        Some(head) => {
            body.push(cur.freeze());
            Response::from_body(header, body, head)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::FetchResponse;
    use kafka_protocol::protocol::Decodable;

    fn header(version: i16) -> RequestHeader {
        RequestHeader {
            api_key: 1,
            api_version: version,
            correlation_id: 77,
            client_id: None,
            body_offset: 0,
        }
    }

    #[test]
    fn reference_codec_reads_what_we_write() {
        let batch_a = Bytes::from_static(b"batch-a-bytes");
        let batch_b = Bytes::from_static(b"bb");
        let topics = vec![TopicOut {
            name: "orders".into(),
            topic_id: [7; 16],
            partitions: vec![
                PartitionOut {
                    index: 0,
                    high_watermark: 10,
                    last_stable_offset: 10,
                    records: vec![batch_a.clone(), batch_b.clone()],
                    ..Default::default()
                },
                PartitionOut {
                    index: 1,
                    error_code: 1,
                    ..Default::default()
                },
            ],
        }];
        for v in [4i16, 7, 11, 12, 13, 16] {
            let resp = encode(&header(v), 0, 0, &topics);
            let mut frame = BytesMut::new();
            for c in &resp.chunks {
                frame.extend_from_slice(c);
            }
            let len = i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]) as usize;
            assert_eq!(len + 4, frame.len());
            let hdr = if v >= 12 { 9 } else { 8 };
            let mut body = frame.freeze().slice(hdr..);
            let decoded = FetchResponse::decode(&mut body, v).unwrap();
            assert_eq!(body.len(), 0, "v{v} trailing bytes");
            let t = &decoded.responses[0];
            if v >= 13 {
                assert_eq!(t.topic_id.as_bytes(), &[7; 16]);
            } else {
                assert_eq!(t.topic.0.as_str(), "orders");
            }
            assert_eq!(t.partitions[0].high_watermark, 10);
            assert_eq!(
                t.partitions[0].records.as_deref(),
                Some(&b"batch-a-bytesbb"[..])
            );
            assert_eq!(t.partitions[1].error_code, 1);
        }
    }
}
