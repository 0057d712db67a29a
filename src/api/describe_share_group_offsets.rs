//! DescribeShareGroupOffsets (key 90, v0-1, KIP-932): where each share-partition of a share
//! group starts (its SPSO) and, from v1, its lag (records after the start not yet done:
//! the high watermark minus the start minus those acknowledged or archived above it), for
//! Admin listShareGroupOffsets and `kafka-share-groups --describe`. DESCRIBE on the group is
//! needed; a topic the caller may not describe is TOPIC_AUTHORIZATION_FAILED with start -1;
//! a partition with no state (or an unknown topic) has start and lag -1 and no error, as
//! Kafka. Null topics: every share-partition the group has.
//!
//! The response is encoded here: the kafka-protocol crate knows v0 only, and v1 adds one
//! field (Lag); both versions are flexible.

use std::collections::BTreeMap;

use bytes::{BufMut, BytesMut};
use kafka_protocol::messages::DescribeShareGroupOffsetsRequest;

use super::{encoded, RequestContext};
use crate::auth::acl::{Operation, ResourceType};
use crate::error::{ConnectionError, KelpError};
use crate::group::{GroupReply, GroupRequest};
use crate::protocol::wire::{put_array_len, put_string, put_uvarint};
use crate::protocol::Response;
use crate::shard::ops::OffsetsItem;

struct PartitionOut {
    index: i32,
    start: i64,
    lag: i64,
    error: i16,
}

struct TopicOut {
    name: String,
    id: uuid::Uuid,
    partitions: Vec<PartitionOut>,
}

struct GroupOut {
    id: String,
    topics: Vec<TopicOut>,
    error: Option<(i16, String)>,
}

/// Handles a DescribeShareGroupOffsets request.
pub async fn handle(
    ctx: &RequestContext,
    req: DescribeShareGroupOffsetsRequest,
) -> Result<Response, ConnectionError> {
    let snap = ctx.shard.cluster.snapshot();
    let mut groups = Vec::with_capacity(req.groups.len());
    for g in req.groups {
        let id = g.group_id.0.to_string();
        let starts = if !ctx.allowed(Operation::Describe, ResourceType::Group, &id) {
            Err(KelpError::GroupAuthorizationFailed)
        } else {
            match ctx
                .shard
                .group_call(GroupRequest::ShareOffsets(id.clone()))
                .await
            {
                GroupReply::ShareOffsets(r) => r,
                _ => Err(KelpError::CoordinatorNotAvailable),
            }
        };
        let starts = match starts {
            Ok(s) => s,
            Err(e) => {
                let message = match e {
                    KelpError::GroupIdNotFound => format!("Group {id} not found."),
                    ref e => e.message().unwrap_or_default(),
                };
                groups.push(GroupOut {
                    id,
                    topics: Vec::new(),
                    error: Some((e.code(), message)),
                });
                continue;
            }
        };
        let mut by_topic: BTreeMap<String, BTreeMap<i32, (i64, i64)>> = BTreeMap::new();
        for s in starts {
            by_topic
                .entry(s.topic)
                .or_default()
                .insert(s.partition, (s.start, s.done));
        }
        let asked: Vec<(String, Vec<i32>)> = match g.topics {
            Some(ts) => ts
                .into_iter()
                .map(|t| (t.topic_name.0.to_string(), t.partitions))
                .collect(),
            None => by_topic
                .iter()
                .map(|(t, ps)| (t.clone(), ps.keys().copied().collect()))
                .collect(),
        };
        let mut topics = Vec::with_capacity(asked.len());
        let mut ends = Vec::new();
        for (name, partitions) in asked {
            let denied = !ctx.allowed(Operation::Describe, ResourceType::Topic, &name);
            let meta = snap.topic(&name);
            let mut t = TopicOut {
                id: meta.map(|m| m.id).unwrap_or_default(),
                partitions: Vec::with_capacity(partitions.len()),
                name,
            };
            for index in partitions {
                let mut po = PartitionOut {
                    index,
                    start: -1,
                    lag: -1,
                    error: 0,
                };
                let known = meta.is_some_and(|m| (0..m.partitions).contains(&index));
                if denied {
                    po.error = KelpError::TopicAuthorizationFailed.code();
                } else if let Some(&(start, _)) =
                    by_topic.get(&t.name).and_then(|ps| ps.get(&index))
                {
                    po.start = start;
                    if known {
                        ends.push((topics.len(), t.partitions.len()));
                    }
                }
                t.partitions.push(po);
            }
            topics.push(t);
        }
        // Lag needs each partition's high watermark, from its owner.
        let items = ends
            .iter()
            .map(|&(ti, pi)| OffsetsItem {
                topic: topics[ti].name.clone(),
                partition: topics[ti].partitions[pi].index,
                timestamp: crate::partition::timestamp::LATEST,
                committed: false,
            })
            .collect();
        let found = ctx.shard.scatter(items).await;
        for (&(ti, pi), f) in ends.iter().zip(found) {
            let t = &mut topics[ti];
            let po = &mut t.partitions[pi];
            let done = by_topic
                .get(&t.name)
                .and_then(|ps| ps.get(&po.index))
                .map_or(0, |&(_, d)| d);
            if let Ok((_, end)) = f {
                po.lag = (end - po.start - done).max(0);
            }
        }
        groups.push(GroupOut {
            id,
            topics,
            error: None,
        });
    }
    // Built by hand (v1 is newer than the crate): its error codes are counted here.
    for g in &groups {
        let count = |code| crate::metrics::errors::count(ctx.header.api_key, code);
        count(g.error.as_ref().map_or(0, |e| e.0));
        g.topics
            .iter()
            .flat_map(|t| &t.partitions)
            .for_each(|p| count(p.error));
    }
    encoded(Ok(Response::from_body(
        &ctx.header,
        Vec::new(),
        encode(&groups, ctx.header.api_version),
    )))
}

/// The response body at `version` (flexible in both).
fn encode(groups: &[GroupOut], version: i16) -> BytesMut {
    let mut b = BytesMut::with_capacity(64);
    b.put_i32(0); // throttle time
    put_array_len(&mut b, groups.len(), true);
    for g in groups {
        put_string(&mut b, &g.id, true);
        put_array_len(&mut b, g.topics.len(), true);
        for t in &g.topics {
            put_string(&mut b, &t.name, true);
            b.put_slice(t.id.as_bytes());
            put_array_len(&mut b, t.partitions.len(), true);
            for p in &t.partitions {
                b.put_i32(p.index);
                b.put_i64(p.start);
                b.put_i32(0); // leader epoch: Kelp's partitions have one leader, epoch 0
                if version >= 1 {
                    b.put_i64(p.lag);
                }
                b.put_i16(p.error);
                put_uvarint(&mut b, 0); // null error message
                put_uvarint(&mut b, 0); // tagged fields
            }
            put_uvarint(&mut b, 0);
        }
        match &g.error {
            Some((code, message)) => {
                b.put_i16(*code);
                put_string(&mut b, message, true);
            }
            None => {
                b.put_i16(0);
                put_uvarint(&mut b, 0);
            }
        }
        put_uvarint(&mut b, 0);
    }
    put_uvarint(&mut b, 0);
    b
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::DescribeShareGroupOffsetsResponse;
    use kafka_protocol::protocol::Decodable;

    use super::*;

    #[test]
    fn version_0_reads_back_with_the_crate() {
        let groups = vec![
            GroupOut {
                id: "g".into(),
                topics: vec![TopicOut {
                    name: "t".into(),
                    id: uuid::Uuid::from_u128(5),
                    partitions: vec![PartitionOut {
                        index: 2,
                        start: 40,
                        lag: 7,
                        error: 0,
                    }],
                }],
                error: None,
            },
            GroupOut {
                id: "h".into(),
                topics: Vec::new(),
                error: Some((69, "Group h not found.".into())),
            },
        ];
        let mut b = encode(&groups, 0).freeze();
        let r = DescribeShareGroupOffsetsResponse::decode(&mut b, 0).unwrap();
        assert!(b.is_empty());
        let p = &r.groups[0].topics[0].partitions[0];
        assert_eq!((p.partition_index, p.start_offset), (2, 40));
        assert_eq!(r.groups[0].topics[0].topic_id, uuid::Uuid::from_u128(5));
        assert_eq!(r.groups[1].error_code, 69);
        assert_eq!(
            r.groups[1].error_message.as_deref(),
            Some("Group h not found.")
        );
        // v1 is v0 with the partition's lag after its leader epoch.
        assert_eq!(encode(&groups, 1).len(), encode(&groups, 0).len() + 8);
    }
}
