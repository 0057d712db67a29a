//! SyncGroup (key 14, v0-v5): the leader hands in the assignment; every member waits for its
//! share on the coordinator shard.

use kafka_protocol::messages::{SyncGroupRequest, SyncGroupResponse};

use super::{encoded, sb, RequestContext};
use crate::auth::acl::{Operation, ResourceType};
use crate::error::{code, ConnectionError, KelpError};
use crate::group::messages::{SyncRequest, SyncResponse};
use crate::group::{GroupReply, GroupRequest};
use crate::protocol::Response;

/// Handles a SyncGroup request.
pub async fn handle(
    ctx: &RequestContext,
    req: SyncGroupRequest,
) -> Result<Response, ConnectionError> {
    let sr = SyncRequest {
        member_id: req.member_id.to_string(),
        instance_id: req.group_instance_id.as_ref().map(|s| s.to_string()),
        generation_id: req.generation_id,
        protocol_type: req.protocol_type.as_ref().map(|s| s.to_string()),
        protocol_name: req.protocol_name.as_ref().map(|s| s.to_string()),
        assignments: req
            .assignments
            .iter()
            .map(|a| (a.member_id.to_string(), a.assignment.clone()))
            .collect(),
    };
    let group = req.group_id.0.to_string();
    let out = if !ctx.allowed(Operation::Read, ResourceType::Group, &group) {
        SyncResponse::failed(KelpError::GroupAuthorizationFailed)
    } else {
        match ctx.shard.group_call(GroupRequest::Sync(group, sr)).await {
            GroupReply::Sync(r) => r,
            _ => SyncResponse::failed(KelpError::CoordinatorNotAvailable),
        }
    };
    let mut resp = SyncGroupResponse::default();
    resp.error_code = out.error.as_ref().map_or(code::NONE, KelpError::code);
    resp.protocol_type = out.protocol_type.map(sb);
    resp.protocol_name = out.protocol_name.map(sb);
    resp.assignment = out.assignment;
    encoded(Response::encode(&ctx.header, &resp))
}
