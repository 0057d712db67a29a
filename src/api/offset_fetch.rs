//! OffsetFetch (key 9, v1-v9): committed offsets of one group (v1-v7) or several (v8+), each
//! read on its coordinator shard. A null topic list (v2+) asks for every committed partition.

use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{OffsetFetchRequest, OffsetFetchResponse};

use super::{encoded, sb, topic_name, RequestContext};
use crate::auth::acl::{Operation, ResourceType};
use crate::error::{code, ConnectionError, KelpError};
use crate::group::messages::{FetchRequest, FetchedOffset};
use crate::group::{CommittedOffset, GroupReply, GroupRequest};
use crate::protocol::Response;

type Fetched = Result<Vec<FetchedOffset>, KelpError>;

/// One partition's answer: its committed offset (None: none), or the error it gets.
type Answer = Result<Option<CommittedOffset>, KelpError>;

async fn fetch_group(
    ctx: &RequestContext,
    group: String,
    partitions: Option<Vec<(String, i32)>>,
    require_stable: bool,
    member: Option<(String, i32)>,
) -> Fetched {
    if !ctx.allowed(Operation::Describe, ResourceType::Group, &group) {
        return Err(KelpError::GroupAuthorizationFailed);
    }
    match ctx
        .shard
        .group_call(GroupRequest::Fetch(
            group,
            FetchRequest {
                partitions,
                require_stable,
                member,
            },
        ))
        .await
    {
        GroupReply::Fetch(r) => r,
        _ => Err(KelpError::CoordinatorNotAvailable),
    }
}

/// One topic's (partition, answer) entries.
type TopicRows = (String, Vec<(i32, Answer)>);

/// Topics in first-seen order, each with its (partition, answer) entries.
fn by_topic(rows: Vec<FetchedOffset>) -> Vec<TopicRows> {
    let mut out: Vec<TopicRows> = Vec::new();
    for ((t, p), o) in rows {
        match out.iter_mut().find(|(n, _)| *n == t) {
            Some((_, ps)) => ps.push((p, o)),
            None => out.push((t, vec![(p, o)])),
        }
    }
    out
}

/// The rows by topic as the principal may see them: with every topic asked for (`all`), the
/// topics it may not describe are left out, as Kafka does; topics named in the request that it
/// may not describe stay, flagged (their partitions answer TOPIC_AUTHORIZATION_FAILED and no
/// offset).
fn visible(ctx: &RequestContext, rows: Vec<FetchedOffset>, all: bool) -> Vec<(TopicRows, bool)> {
    by_topic(rows)
        .into_iter()
        .map(|r| {
            let denied = !ctx.allowed(Operation::Describe, ResourceType::Topic, &r.0);
            (r, denied)
        })
        .filter(|(_, denied)| !(all && *denied))
        .collect()
}

/// (offset, leader epoch, metadata, error code) of a partition whose topic is `denied` or not.
fn shown(o: Answer, denied: bool) -> (i64, i32, String, i16) {
    if denied {
        return (-1, -1, String::new(), code::TOPIC_AUTHORIZATION_FAILED);
    }
    match o {
        Ok(o) => {
            let (off, epoch, md) = fields(o);
            (off, epoch, md, code::NONE)
        }
        Err(e) => (-1, -1, String::new(), e.code()),
    }
}

/// (offset, leader epoch, metadata) as sent: -1 / -1 / "" when nothing is committed.
fn fields(o: Option<CommittedOffset>) -> (i64, i32, String) {
    match o {
        Some(o) => (o.offset, o.leader_epoch, o.metadata),
        None => (-1, -1, String::new()),
    }
}

/// Handles an OffsetFetch request.
pub async fn handle(
    ctx: &RequestContext,
    req: OffsetFetchRequest,
) -> Result<Response, ConnectionError> {
    let mut resp = OffsetFetchResponse::default();
    if ctx.header.api_version >= 8 {
        for g in req.groups {
            let parts = g.topics.as_ref().map(|ts| {
                ts.iter()
                    .flat_map(|t| {
                        t.partition_indexes
                            .iter()
                            .map(|&p| (t.name.0.to_string(), p))
                    })
                    .collect()
            });
            let mut rg = OffsetFetchResponseGroup::default().with_group_id(g.group_id.clone());
            let all = parts.is_none();
            // v9: a KIP-848 member names itself and its epoch, checked like a commit's.
            let member = g
                .member_id
                .as_ref()
                .map(|m| (m.to_string(), g.member_epoch));
            let group = g.group_id.0.to_string();
            match fetch_group(ctx, group, parts, req.require_stable, member).await {
                Ok(rows) => {
                    rg.error_code = code::NONE;
                    rg.topics = visible(ctx, rows, all)
                        .into_iter()
                        .map(|((t, ps), denied)| {
                            OffsetFetchResponseTopics::default()
                                .with_name(topic_name(t))
                                .with_partitions(
                                    ps.into_iter()
                                        .map(|(p, o)| {
                                            let (off, epoch, md, ec) = shown(o, denied);
                                            OffsetFetchResponsePartitions::default()
                                                .with_partition_index(p)
                                                .with_committed_offset(off)
                                                .with_committed_leader_epoch(epoch)
                                                .with_metadata(Some(sb(md)))
                                                .with_error_code(ec)
                                        })
                                        .collect(),
                                )
                        })
                        .collect();
                }
                Err(e) => rg.error_code = e.code(),
            }
            resp.groups.push(rg);
        }
        return encoded(Response::encode(&ctx.header, &resp));
    }
    let parts = req.topics.as_ref().map(|ts| {
        ts.iter()
            .flat_map(|t| {
                t.partition_indexes
                    .iter()
                    .map(|&p| (t.name.0.to_string(), p))
            })
            .collect()
    });
    let all = parts.is_none();
    match fetch_group(
        ctx,
        req.group_id.0.to_string(),
        parts,
        req.require_stable,
        None,
    )
    .await
    {
        Ok(rows) => {
            resp.error_code = code::NONE;
            resp.topics = visible(ctx, rows, all)
                .into_iter()
                .map(|((t, ps), denied)| {
                    OffsetFetchResponseTopic::default()
                        .with_name(topic_name(t))
                        .with_partitions(
                            ps.into_iter()
                                .map(|(p, o)| {
                                    let (off, epoch, md, ec) = shown(o, denied);
                                    OffsetFetchResponsePartition::default()
                                        .with_partition_index(p)
                                        .with_committed_offset(off)
                                        .with_committed_leader_epoch(epoch)
                                        .with_metadata(Some(sb(md)))
                                        .with_error_code(ec)
                                })
                                .collect(),
                        )
                })
                .collect();
        }
        // v1 has no top-level error code: the error goes on every requested partition.
        Err(e) => {
            resp.error_code = e.code();
            if let Some(ts) = &req.topics {
                resp.topics = ts
                    .iter()
                    .map(|t| {
                        OffsetFetchResponseTopic::default()
                            .with_name(t.name.clone())
                            .with_partitions(
                                t.partition_indexes
                                    .iter()
                                    .map(|&p| {
                                        OffsetFetchResponsePartition::default()
                                            .with_partition_index(p)
                                            .with_committed_offset(-1)
                                            .with_committed_leader_epoch(-1)
                                            .with_metadata(Some(sb("")))
                                            .with_error_code(e.code())
                                    })
                                    .collect(),
                            )
                    })
                    .collect();
            }
        }
    }
    encoded(Response::encode(&ctx.header, &resp))
}
