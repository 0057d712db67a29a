//! Heartbeat (key 12, v0-v4): keeps a member's session alive and tells it about rebalances.

use kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse};

use super::{code_of, encoded, RequestContext};
use crate::auth::acl::{Operation, ResourceType};
use crate::error::{ConnectionError, KelpError};
use crate::group::messages;
use crate::group::{GroupReply, GroupRequest};
use crate::protocol::Response;

/// Handles a Heartbeat request.
pub async fn handle(
    ctx: &RequestContext,
    req: HeartbeatRequest,
) -> Result<Response, ConnectionError> {
    let hb = messages::HeartbeatRequest {
        member_id: req.member_id.to_string(),
        instance_id: req.group_instance_id.as_ref().map(|s| s.to_string()),
        generation_id: req.generation_id,
    };
    let group = req.group_id.0.to_string();
    let out = if !ctx.allowed(Operation::Read, ResourceType::Group, &group) {
        Err(KelpError::GroupAuthorizationFailed)
    } else {
        match ctx
            .shard
            .group_call(GroupRequest::Heartbeat(group, hb))
            .await
        {
            GroupReply::Heartbeat(r) => r,
            _ => Err(KelpError::CoordinatorNotAvailable),
        }
    };
    let mut resp = HeartbeatResponse::default();
    resp.error_code = code_of(&out);
    encoded(Response::encode(&ctx.header, &resp))
}
