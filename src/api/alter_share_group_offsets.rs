//! AlterShareGroupOffsets (key 91, v0, KIP-932) for `kafka-share-groups --reset-offsets`
//! and Admin alterShareGroupOffsets: each listed share-partition starts over at the given
//! offset. READ on the group (top-level) and on each topic (per partition); the group must
//! have no members (NON_EMPTY_GROUP); an unknown topic or partition is that partition's
//! UNKNOWN_TOPIC_OR_PARTITION, as Kafka.

use kafka_protocol::messages::alter_share_group_offsets_response::{
    AlterShareGroupOffsetsResponsePartition, AlterShareGroupOffsetsResponseTopic,
};
use kafka_protocol::messages::{AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse};

use super::{encoded, sb, RequestContext};
use crate::auth::acl::{Operation, ResourceType};
use crate::error::{ConnectionError, KelpError};
use crate::group::{GroupReply, GroupRequest};
use crate::protocol::Response;

/// A share group offsets change (Alter/DeleteShareGroupOffsets): a group id, `op` on the
/// group, then the coordinator's answer.
pub(super) async fn admin_call(
    ctx: &RequestContext,
    op: Operation,
    req: GroupRequest,
) -> Result<(), KelpError> {
    let group = req.group_id().unwrap_or_default();
    if group.is_empty() {
        return Err(KelpError::InvalidGroupId);
    }
    if !ctx.allowed(op, ResourceType::Group, group) {
        return Err(KelpError::GroupAuthorizationFailed);
    }
    match ctx.shard.group_call(req).await {
        GroupReply::Done(r) => r,
        _ => Err(KelpError::CoordinatorNotAvailable),
    }
}

/// Handles an AlterShareGroupOffsets request.
pub async fn handle(
    ctx: &RequestContext,
    req: AlterShareGroupOffsetsRequest,
) -> Result<Response, ConnectionError> {
    let group = req.group_id.0.to_string();
    let snap = ctx.shard.cluster.snapshot();
    let mut resp = AlterShareGroupOffsetsResponse::default();
    let mut starts = Vec::new();
    for t in &req.topics {
        let name = t.topic_name.0.to_string();
        let meta = snap.topic(&name);
        let denied = !ctx.allowed(Operation::Read, ResourceType::Topic, &name);
        let mut out = AlterShareGroupOffsetsResponseTopic::default();
        out.topic_name = t.topic_name.clone();
        out.topic_id = meta.map(|m| m.id).unwrap_or_default();
        for p in &t.partitions {
            let mut po = AlterShareGroupOffsetsResponsePartition::default();
            po.partition_index = p.partition_index;
            let error = match meta {
                _ if denied => Some(KelpError::TopicAuthorizationFailed),
                Some(m) if (0..m.partitions).contains(&p.partition_index) => {
                    starts.push((name.clone(), m.id, p.partition_index, p.start_offset.max(0)));
                    None
                }
                _ => Some(KelpError::UnknownTopicOrPartition),
            };
            if let Some(e) = error {
                po.error_code = e.code();
                po.error_message = e.message().map(sb);
            }
            out.partitions.push(po);
        }
        resp.responses.push(out);
    }
    let result = admin_call(
        ctx,
        Operation::Read,
        GroupRequest::ShareAlter(group, starts),
    )
    .await;
    if let Err(e) = result {
        resp.error_code = e.code();
        resp.error_message = e.message().map(sb);
        resp.responses.clear();
    }
    encoded(Response::encode(&ctx.header, &resp))
}
