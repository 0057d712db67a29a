//! OffsetCommit (key 8, v2-v9): checks topics against the metadata here, then commits on the
//! group's coordinator shard; answers once the offsets store says the commit is durable.

use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse};

use super::{encoded, topic_name, RequestContext};
use crate::auth::acl::{Operation, ResourceType};
use crate::error::{code, ConnectionError, KelpError};
use crate::group::messages::CommitRequest;
use crate::group::offsets::TopicPartition;
use crate::group::{CommittedOffset, GroupReply, GroupRequest};
use crate::protocol::Response;

/// Queues the offset to commit for `partition` of `topic` (which `meta` describes) in
/// `offsets`, or answers why not: `refused` (an authorization failure found before), or an
/// unknown topic or partition. OffsetCommit and TxnOffsetCommit check alike.
pub(super) fn queue_offset(
    offsets: &mut Vec<(TopicPartition, CommittedOffset)>,
    meta: Option<&crate::cluster::TopicMeta>,
    (topic, partition): (&str, i32),
    refused: Option<KelpError>,
    offset: impl FnOnce() -> CommittedOffset,
) -> Option<KelpError> {
    if refused.is_some() {
        return refused;
    }
    match meta {
        Some(m) if (0..m.partitions).contains(&partition) => {
            offsets.push(((topic.to_string(), partition), offset()));
            None
        }
        _ => Some(KelpError::UnknownTopicOrPartition),
    }
}

use crate::clock::now_ms;

/// Handles an OffsetCommit request.
pub async fn handle(
    ctx: &RequestContext,
    req: OffsetCommitRequest,
) -> Result<Response, ConnectionError> {
    let ts = now_ms();
    // (topic index, partition, early error) in request order; valid ones go to the coordinator.
    let mut slots: Vec<(usize, i32, Option<KelpError>)> = Vec::new();
    let mut offsets = Vec::new();
    let mut names = Vec::with_capacity(req.topics.len());
    let group_ok = ctx.allowed(
        Operation::Read,
        ResourceType::Group,
        req.group_id.0.as_str(),
    );
    for (ti, t) in req.topics.iter().enumerate() {
        let name = t.name.0.to_string();
        let meta = ctx.shard.cluster.topic(&name);
        let topic_ok = ctx.allowed(Operation::Read, ResourceType::Topic, &name);
        let refused = match () {
            _ if !group_ok => Some(KelpError::GroupAuthorizationFailed),
            _ if !topic_ok => Some(KelpError::TopicAuthorizationFailed),
            _ => None,
        };
        for p in &t.partitions {
            let err = queue_offset(
                &mut offsets,
                meta.as_deref(),
                (&name, p.partition_index),
                refused.clone(),
                || {
                    CommittedOffset::committed(
                        p.committed_offset,
                        p.committed_leader_epoch,
                        p.committed_metadata.as_deref(),
                        ts,
                    )
                },
            );
            slots.push((ti, p.partition_index, err));
        }
        names.push(name);
    }
    let cr = CommitRequest {
        member_id: req.member_id.to_string(),
        instance_id: req.group_instance_id.as_ref().map(|s| s.to_string()),
        generation_id: req.generation_id_or_member_epoch,
        offsets,
        modern: ctx.header.api_version >= 9,
    };
    let out = if !group_ok {
        Err(KelpError::GroupAuthorizationFailed)
    } else {
        match ctx
            .shard
            .group_call(GroupRequest::Commit(req.group_id.0.to_string(), cr))
            .await
        {
            GroupReply::Commit(r) => r,
            _ => Err(KelpError::CoordinatorNotAvailable),
        }
    };
    let mut per_partition = match &out {
        Ok(results) => results.iter().map(|(_, r)| r.clone()).collect::<Vec<_>>(),
        Err(_) => Vec::new(),
    }
    .into_iter();
    let mut topics: Vec<OffsetCommitResponseTopic> = names
        .iter()
        .map(|n| OffsetCommitResponseTopic::default().with_name(topic_name(n.clone())))
        .collect();
    for (ti, index, err) in slots {
        let res = match (err, &out) {
            (Some(e), _) => Err(e),
            (None, Err(e)) => Err(e.clone()),
            (None, Ok(_)) => per_partition
                .next()
                .unwrap_or(Err(KelpError::CoordinatorNotAvailable)),
        };
        let ec = res.as_ref().err().map_or(code::NONE, KelpError::code);
        topics[ti].partitions.push(
            OffsetCommitResponsePartition::default()
                .with_partition_index(index)
                .with_error_code(ec),
        );
    }
    let resp = OffsetCommitResponse::default().with_topics(topics);
    encoded(Response::encode(&ctx.header, &resp))
}
