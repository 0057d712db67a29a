//! DeleteShareGroupOffsets (key 92, v0, KIP-932) for `kafka-share-groups --delete-offsets`
//! and Admin deleteShareGroupOffsets: a share group forgets its state of the listed topics.
//! DELETE on the group, READ on each topic; the group must exist and have no members; an
//! unknown topic is UNKNOWN_TOPIC_OR_PARTITION, as Kafka.

use kafka_protocol::messages::delete_share_group_offsets_response::DeleteShareGroupOffsetsResponseTopic;
use kafka_protocol::messages::{DeleteShareGroupOffsetsRequest, DeleteShareGroupOffsetsResponse};

use super::{encoded, sb, RequestContext};
use crate::auth::acl::{Operation, ResourceType};
use crate::error::{ConnectionError, KelpError};
use crate::group::GroupRequest;
use crate::protocol::Response;

/// Handles a DeleteShareGroupOffsets request.
pub async fn handle(
    ctx: &RequestContext,
    req: DeleteShareGroupOffsetsRequest,
) -> Result<Response, ConnectionError> {
    let group = req.group_id.0.to_string();
    let snap = ctx.shard.cluster.snapshot();
    let mut resp = DeleteShareGroupOffsetsResponse::default();
    let mut topics = Vec::new();
    for t in &req.topics {
        let name = t.topic_name.0.to_string();
        let meta = snap.topic(&name);
        let mut out = DeleteShareGroupOffsetsResponseTopic::default();
        out.topic_name = t.topic_name.clone();
        out.topic_id = meta.map(|m| m.id).unwrap_or_default();
        let error = if !ctx.allowed(Operation::Read, ResourceType::Topic, &name) {
            Some(KelpError::TopicAuthorizationFailed)
        } else if meta.is_none() {
            Some(KelpError::UnknownTopicOrPartition)
        } else {
            topics.push(name);
            None
        };
        if let Some(e) = error {
            out.error_code = e.code();
            out.error_message = e.message().map(sb);
        }
        resp.responses.push(out);
    }
    let req = GroupRequest::ShareDeleteOffsets(group, topics);
    let result = super::alter_share_group_offsets::admin_call(ctx, Operation::Delete, req).await;
    if let Err(e) = result {
        resp.error_code = e.code();
        resp.error_message = e.message().map(sb);
        resp.responses.clear();
    }
    encoded(Response::encode(&ctx.header, &resp))
}
