//! TxnOffsetCommit (key 28, v0-v5): a transactional producer commits a group's offsets in
//! its transaction. The group's coordinator holds them (stored, so a restart keeps them) until
//! the transaction ends; only a commit makes them the group's. v5 (transactions v2) adds the
//! group to the transaction itself; older versions must have sent AddOffsetsToTxn (KIP-890).

use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{TxnOffsetCommitRequest, TxnOffsetCommitResponse};

use super::{encoded, RequestContext};
use crate::auth::acl::{Operation, ResourceType};
use crate::error::{code, ConnectionError, KelpError};
use crate::group::messages::{PartitionResults, TxnCommitRequest};
use crate::group::{CommittedOffset, GroupReply, GroupRequest};
use crate::protocol::Response;

/// Handles a TxnOffsetCommit request.
pub async fn handle(
    ctx: &RequestContext,
    req: TxnOffsetCommitRequest,
) -> Result<Response, ConnectionError> {
    let v = ctx.header.api_version;
    let id = req.transactional_id.0.to_string();
    let group = req.group_id.0.to_string();
    let now = crate::clock::now_ms();
    // (topic, partition, its own error), and what goes to the coordinator.
    let mut rows: Vec<(String, i32, Option<KelpError>)> = Vec::new();
    let mut offsets = Vec::new();
    for t in &req.topics {
        let name = t.name.0.to_string();
        let refused = (!ctx.allowed(Operation::Read, ResourceType::Topic, &name))
            .then_some(KelpError::TopicAuthorizationFailed);
        let meta = ctx.shard.cluster.topic(&name);
        for p in &t.partitions {
            let err = super::offset_commit::queue_offset(
                &mut offsets,
                meta.as_deref(),
                (&name, p.partition_index),
                refused.clone(),
                || {
                    CommittedOffset::committed(
                        p.committed_offset,
                        p.committed_leader_epoch,
                        p.committed_metadata.as_deref(),
                        now,
                    )
                },
            );
            rows.push((name.clone(), p.partition_index, err));
        }
    }
    let outcome: Result<PartitionResults, KelpError> =
        match super::txn::check_id(ctx, &id, Operation::Write) {
            Err(e) => Err(e),
            Ok(()) if !ctx.allowed(Operation::Read, ResourceType::Group, &group) => {
                Err(KelpError::GroupAuthorizationFailed)
            }
            Ok(()) if offsets.is_empty() => Ok(Vec::new()),
            Ok(()) => match super::txn::admit(
                ctx,
                &id,
                (req.producer_id.0, req.producer_epoch),
                Vec::new(),
                vec![group.clone()],
                v >= 5,
            )
            .await
            {
                Err(e) => Err(e),
                Ok((_, missing)) if !missing.is_empty() => Err(KelpError::TransactionAbortable),
                Ok(_) => {
                    let r = TxnCommitRequest {
                        producer_id: req.producer_id.0,
                        epoch: req.producer_epoch,
                        member_id: req.member_id.to_string(),
                        instance_id: req.group_instance_id.as_ref().map(|s| s.to_string()),
                        generation_id: if v >= 3 { req.generation_id } else { -1 },
                        offsets,
                    };
                    match ctx
                        .shard
                        .group_call(GroupRequest::TxnCommit(group, r))
                        .await
                    {
                        GroupReply::Commit(r) => r,
                        _ => Err(KelpError::CoordinatorNotAvailable),
                    }
                }
            },
        };
    let mut topics: Vec<TxnOffsetCommitResponseTopic> = Vec::new();
    for (topic, p, own) in rows {
        let error_code = match (&outcome, own) {
            (_, Some(e)) => e.code(),
            // Versions before 4 know no TRANSACTION_ABORTABLE.
            (Err(KelpError::TransactionAbortable), None) if v < 4 => code::INVALID_TXN_STATE,
            (Err(e), None) => super::txn::code_for(e, v, 3),
            (Ok(results), None) => results
                .iter()
                .find(|((t, q), _)| *t == topic && *q == p)
                .map_or(code::NONE, |(_, r)| {
                    r.as_ref().err().map_or(code::NONE, |e| e.code())
                }),
        };
        let result = TxnOffsetCommitResponsePartition::default()
            .with_partition_index(p)
            .with_error_code(error_code);
        match topics.iter_mut().find(|t| t.name.0.as_str() == topic) {
            Some(t) => t.partitions.push(result),
            None => topics.push(
                TxnOffsetCommitResponseTopic::default()
                    .with_name(super::topic_name(topic))
                    .with_partitions(vec![result]),
            ),
        }
    }
    let resp = TxnOffsetCommitResponse::default().with_topics(topics);
    encoded(Response::encode(&ctx.header, &resp))
}
