//! Equivalence of the shape table with Kafka's encoding as the kafka-protocol crate speaks it.
//!
//! For every message and every version Kelp supports, a sample is built from the table with two
//! elements in every array, a value in every field, every known tagged field set (and an unknown
//! one) in flexible versions; the crate must decode it completely and re-encode the very same
//! bytes, so a field the table had wrong (missing, extra, wrong type or version) shows up as a
//! failed decode or a different encoding. The walk must then take exactly all bytes and refuse
//! every truncation. Nothing here trusts the table alone.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use super::schema::*;
use super::*;
use crate::protocol::versions::{self, key};
use crate::protocol::wire::put_uvarint;

/// Unknown tag added to every flexible struct: above any tag Kafka uses in these messages.
const UNKNOWN_TAG: u32 = 90;

/// Builds a sample encoding of a message from the table.
struct Sample {
    out: BytesMut,
    version: i16,
    flex: bool,
    /// Nullable fields are null instead of set.
    nulls: bool,
    next: u8,
}

impl Sample {
    fn build(m: &Message, version: i16, nulls: bool) -> Bytes {
        let mut s = Sample {
            out: BytesMut::new(),
            version,
            flex: m.flexible.has(version),
            nulls,
            next: 1,
        };
        s.fields(m.fields);
        s.out.freeze()
    }

    /// A small value that differs from field to field and from every default Kafka uses.
    fn byte(&mut self) -> u8 {
        self.next = self.next % 90 + 1;
        self.next + 2
    }

    fn len(&mut self, n: Option<usize>, wide: bool) {
        match (n, self.flex, wide) {
            (None, true, _) => put_uvarint(&mut self.out, 0),
            (Some(n), true, _) => put_uvarint(&mut self.out, n as u32 + 1),
            (None, false, true) => self.out.put_i32(-1),
            (Some(n), false, true) => self.out.put_i32(n as i32),
            (None, false, false) => self.out.put_i16(-1),
            (Some(n), false, false) => self.out.put_i16(n as i16),
        }
    }

    fn fields(&mut self, fields: &'static [Field]) {
        let version = self.version;
        for f in fields.iter().filter(|f| f.in_body(version)) {
            self.value(f, &f.kind);
        }
        if !self.flex {
            return;
        }
        let mut tagged: Vec<&'static Field> = fields
            .iter()
            .filter(|f| f.versions.has(version) && !f.in_body(version))
            // A null tagged field is its default: Kafka (and the crate) leave it out.
            .filter(|f| !(self.nulls && f.nullable.has(version)))
            .collect();
        tagged.sort_by_key(|f| f.tag.map(|(t, _)| t));
        put_uvarint(&mut self.out, tagged.len() as u32 + 1);
        for f in tagged {
            let outer = std::mem::take(&mut self.out);
            self.value(f, &f.kind);
            let inner = std::mem::replace(&mut self.out, outer);
            put_uvarint(&mut self.out, f.tag.unwrap().0);
            put_uvarint(&mut self.out, inner.len() as u32);
            self.out.put_slice(&inner);
        }
        put_uvarint(&mut self.out, UNKNOWN_TAG);
        put_uvarint(&mut self.out, 2);
        self.out.put_slice(b"?!");
    }

    fn value(&mut self, f: &'static Field, kind: &'static Kind) {
        let null = self.nulls && f.nullable.has(self.version);
        match kind {
            Kind::Bool => self.out.put_u8(1),
            Kind::Int8 => {
                let b = self.byte();
                self.out.put_i8(b as i8)
            }
            Kind::Int16 | Kind::Uint16 => {
                let b = self.byte();
                self.out.put_i16(i16::from(b))
            }
            Kind::Int32 | Kind::Uint32 => {
                let b = self.byte();
                self.out.put_i32(i32::from(b) << 8 | 5)
            }
            Kind::Int64 => {
                let b = self.byte();
                self.out.put_i64(i64::from(b) << 33 | 9)
            }
            Kind::Float64 => self.out.put_f64(1.5),
            Kind::Uuid => {
                let b = self.byte();
                self.out.put_slice(&[b; 16])
            }
            Kind::String if null => self.len(None, false),
            Kind::String => {
                let b = self.byte();
                self.len(Some(3), false);
                self.out.put_slice(&[b'a' + b % 26, b'-', b'z']);
            }
            Kind::Bytes | Kind::Records if null => self.len(None, true),
            Kind::Bytes | Kind::Records => {
                self.len(Some(4), true);
                self.out.put_slice(&[0, 1, 2, 3]);
            }
            Kind::Array(_) if null => self.len(None, true),
            Kind::Array(elem) => {
                self.len(Some(2), true);
                self.value(f, elem);
                self.value(f, elem);
            }
            // A nullable struct: Kafka's int8 marker, -1 for null, 1 before the fields.
            Kind::Struct(_) if null && std::ptr::eq(kind, &f.kind) => self.out.put_i8(-1),
            Kind::Struct(fields) if f.nullable.has(self.version) && std::ptr::eq(kind, &f.kind) => {
                self.out.put_i8(1);
                self.fields(fields)
            }
            Kind::Struct(fields) => self.fields(fields),
        }
    }
}

/// The versions of `m` to test: Kelp's advertised range, or the message's own.
fn versions_of(m: &Message) -> std::ops::RangeInclusive<i16> {
    match versions::lookup(m.api_key) {
        Some(a) if m.api_key >= 0 => a.min..=versions::crate_max(a),
        _ => m.valid.0..=m.valid.1,
    }
}

/// Everything the crate and the walk must agree on, for message type `M` described by `m`.
fn agree<M: Decodable + Encodable + Default>(m: &Message) {
    for v in versions_of(m) {
        // The crate's own encoding of an all-default message.
        let mut d = BytesMut::new();
        M::default().encode(&mut d, v).unwrap();
        assert_eq!(m.check(v, &d), Ok(d.len()), "{} v{v} default", m.name);

        for nulls in [false, true] {
            let sample = Sample::build(m, v, nulls);
            let what = format!("{} v{v} nulls={nulls} {:02x?}", m.name, &sample[..]);
            let mut b = sample.clone();
            let decoded = M::decode(&mut b, v).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert!(b.is_empty(), "{what}: crate left {} bytes", b.len());
            let mut again = BytesMut::new();
            decoded.encode(&mut again, v).unwrap();
            assert_eq!(
                &again[..],
                &sample[..],
                "{what}: crate re-encodes differently"
            );

            assert_eq!(m.check(v, &sample), Ok(sample.len()), "{what}");
            for cut in 0..sample.len() {
                assert!(m.check(v, &sample[..cut]).is_err(), "{what} cut at {cut}");
            }
            // Any byte turned into a huge count or length: either refused, or the crate
            // decodes it without allocating past the body (an abort would end the test).
            for at in 0..sample.len() {
                for x in [0x7f, 0xff] {
                    let mut bad = BytesMut::from(&sample[..]);
                    bad[at] = x;
                    if m.check(v, &bad).is_ok() {
                        let _ = M::decode(&mut bad.freeze(), v);
                    }
                }
            }
        }
    }
}

#[test]
fn table_agrees_with_the_crate_for_every_supported_version() {
    agree::<FetchRequest>(&FETCH);
    agree::<ListOffsetsRequest>(&LIST_OFFSETS);
    agree::<MetadataRequest>(&METADATA);
    agree::<OffsetCommitRequest>(&OFFSET_COMMIT);
    agree::<OffsetFetchRequest>(&OFFSET_FETCH);
    agree::<FindCoordinatorRequest>(&FIND_COORDINATOR);
    agree::<JoinGroupRequest>(&JOIN_GROUP);
    agree::<HeartbeatRequest>(&HEARTBEAT);
    agree::<LeaveGroupRequest>(&LEAVE_GROUP);
    agree::<SyncGroupRequest>(&SYNC_GROUP);
    agree::<DescribeGroupsRequest>(&DESCRIBE_GROUPS);
    agree::<ListGroupsRequest>(&LIST_GROUPS);
    agree::<ApiVersionsRequest>(&API_VERSIONS);
    agree::<CreateTopicsRequest>(&CREATE_TOPICS);
    agree::<DeleteTopicsRequest>(&DELETE_TOPICS);
    agree::<DeleteRecordsRequest>(&DELETE_RECORDS);
    agree::<InitProducerIdRequest>(&INIT_PRODUCER_ID);
    agree::<OffsetForLeaderEpochRequest>(&OFFSET_FOR_LEADER_EPOCH);
    agree::<DescribeConfigsRequest>(&DESCRIBE_CONFIGS);
    agree::<DeleteGroupsRequest>(&DELETE_GROUPS);
    agree::<IncrementalAlterConfigsRequest>(&INCREMENTAL_ALTER_CONFIGS);
    agree::<OffsetDeleteRequest>(&OFFSET_DELETE);
    agree::<DescribeClusterRequest>(&DESCRIBE_CLUSTER);
    agree::<DescribeTopicPartitionsRequest>(&DESCRIBE_TOPIC_PARTITIONS);
    agree::<CreatePartitionsRequest>(&CREATE_PARTITIONS);
    agree::<AlterConfigsRequest>(&ALTER_CONFIGS);
    agree::<DescribeLogDirsRequest>(&DESCRIBE_LOG_DIRS);
    agree::<ElectLeadersRequest>(&ELECT_LEADERS);
    agree::<AlterPartitionReassignmentsRequest>(&ALTER_PARTITION_REASSIGNMENTS);
    agree::<ListPartitionReassignmentsRequest>(&LIST_PARTITION_REASSIGNMENTS);
    agree::<ConsumerGroupHeartbeatRequest>(&CONSUMER_GROUP_HEARTBEAT);
    agree::<ConsumerGroupDescribeRequest>(&CONSUMER_GROUP_DESCRIBE);
    agree::<ListConfigResourcesRequest>(&LIST_CONFIG_RESOURCES);
    agree::<ShareGroupHeartbeatRequest>(&SHARE_GROUP_HEARTBEAT);
    agree::<ShareGroupDescribeRequest>(&SHARE_GROUP_DESCRIBE);
    agree::<ShareFetchRequest>(&SHARE_FETCH);
    agree::<ShareAcknowledgeRequest>(&SHARE_ACKNOWLEDGE);
    agree::<DescribeShareGroupOffsetsRequest>(&DESCRIBE_SHARE_GROUP_OFFSETS);
    agree::<AlterShareGroupOffsetsRequest>(&ALTER_SHARE_GROUP_OFFSETS);
    agree::<DeleteShareGroupOffsetsRequest>(&DELETE_SHARE_GROUP_OFFSETS);
    agree::<ConsumerProtocolSubscription>(&CONSUMER_PROTOCOL_SUBSCRIPTION);
}

#[test]
fn every_crate_decoded_api_has_a_shape_matching_kelps_version_table() {
    for a in versions::SUPPORTED.iter().filter(|a| a.key != key::PRODUCE) {
        let m = request(a.key).unwrap_or_else(|| panic!("no shape for {}", a.name));
        assert_eq!(format!("{}Request", a.name), m.name);
        for v in a.min..=versions::crate_max(a) {
            assert!(m.valid.has(v), "{} v{v}", a.name);
            assert_eq!(m.flexible.has(v), a.is_flexible(v), "{} v{v}", a.name);
        }
    }
}

#[test]
fn refuses_oversized_counts_before_walking() {
    // Issue 13's body: Metadata v1, topic count 0x7fffffff and nothing after it.
    let e = METADATA.check(1, &[0x7f, 0xff, 0xff, 0xff]).unwrap_err();
    assert_eq!(
        (e.field, e.what, e.at),
        ("Topics", "array count past the end", 4)
    );
    // Metadata v12, compact count 2^31: each topic needs 18 bytes (uuid, name, tags).
    let mut b = BytesMut::new();
    put_uvarint(&mut b, 1 << 31);
    b.put_slice(&[0; 30]);
    assert!(METADATA.check(12, &b).is_err());
    // One topic needs 18 bytes: 17 bytes of body after a count of one are refused up front.
    let mut b = BytesMut::new();
    put_uvarint(&mut b, 2);
    b.put_slice(&[0; 17]);
    let e = METADATA.check(12, &b).unwrap_err();
    assert_eq!(e.what, "array count past the end");
    // An unknown tagged field whose size is past the end.
    let e = API_VERSIONS
        .check(3, &[1, b'a', 1, b'b', 1, 7, 0x7f])
        .unwrap_err();
    assert_eq!(e.what, "length past the end");
    // A known tagged field that does not fill its size: Fetch v12's ClusterId "abc" (tag 0,
    // size 4) told to be 5 bytes long, with a spare byte after it.
    let mut b = BytesMut::new();
    FetchRequest::default()
        .with_cluster_id(Some(StrBytes::from_static_str("abc")))
        .encode(&mut b, 12)
        .unwrap();
    let n = b.len();
    assert_eq!(&b[n - 7..], &[1, 0, 4, 4, b'a', b'b', b'c']);
    assert_eq!(FETCH.check(12, &b), Ok(n));
    b[n - 5] = 5;
    b.put_u8(0);
    let e = FETCH.check(12, &b).unwrap_err();
    assert_eq!(e.what, "tagged field shorter than its size");
    // The crate reads tag 0 as ClusterId too, not as an unknown tag skipped by its size: it
    // stumbles over the spare byte. (The only tagged field in the versions Kelp supports.)
    let mut again = BytesMut::new();
    if let Ok(r) = FetchRequest::decode(&mut b.clone().freeze(), 12) {
        r.encode(&mut again, 12).unwrap();
    }
    assert_ne!(&again[..], &b[..]);
}

/// Writes crate-checked sample frames as fuzz seeds for the versions no recorded client sent:
/// `KELP_SEED_DIR=fuzz/corpus cargo test --release -- --ignored dump_fuzz_seeds` (see
/// scripts/fuzz_seeds.py for the recorded ones).
#[test]
#[ignore]
fn dump_fuzz_seeds() {
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    let Ok(dir) = std::env::var("KELP_SEED_DIR") else {
        return;
    };
    let dir = std::path::Path::new(&dir);
    let header = |key: i16, v: i16| {
        let a = versions::lookup(key).unwrap();
        let mut h = BytesMut::new();
        h.put_i16(key);
        h.put_i16(v);
        h.put_i32(7);
        h.put_i16(4);
        h.put_slice(b"seed");
        if a.is_flexible(v) {
            h.put_u8(0);
        }
        h
    };
    let write = |target: &str, name: String, bytes: &[u8]| {
        let d = dir.join(target);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join(name), bytes).unwrap();
    };
    for m in ALL.iter().filter(|m| m.api_key >= 0) {
        let a = versions::lookup(m.api_key).unwrap();
        let mut picks = vec![a.min, a.max];
        if a.supports(a.first_flexible) {
            picks.push(a.first_flexible);
        }
        picks.dedup();
        for v in picks {
            let mut f = header(m.api_key, v);
            f.put_slice(&Sample::build(m, v, false));
            write(
                "request_decode",
                format!("seed-crate-{}-v{v}", m.api_key),
                &f,
            );
        }
    }
    let batch = crate::record::build::simple_batch(2, 8, 1_700_000_000_000).freeze();
    let p = versions::lookup(key::PRODUCE).unwrap();
    for v in p.min..=p.max {
        let req = ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(1000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_static_str("t")))
                .with_partition_data(vec![
                    PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(batch.clone())),
                    PartitionProduceData::default().with_index(1),
                ])]);
        let mut body = BytesMut::new();
        req.encode(&mut body, v).unwrap();
        let mut picked = vec![(v - p.min) as u8];
        picked.extend_from_slice(&body);
        write("produce_request", format!("seed-crate-v{v}"), &picked);
        let mut f = header(key::PRODUCE, v);
        f.put_slice(&body);
        write("request_header", format!("seed-crate-0-v{v}"), &f);
    }
}
