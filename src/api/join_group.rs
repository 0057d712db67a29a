//! JoinGroup (key 11, v0-v9): joins a member to a group on its coordinator shard and waits
//! for the rebalance to form the next generation.

use std::time::Duration;

use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::{JoinGroupRequest, JoinGroupResponse};

use super::{encoded, sb, RequestContext};
use crate::auth::acl::{Operation, ResourceType};
use crate::error::{code, ConnectionError, KelpError};
use crate::group::messages::{JoinRequest, JoinResponse};
use crate::group::{GroupReply, GroupRequest};
use crate::protocol::Response;

/// Handles a JoinGroup request.
pub async fn handle(
    ctx: &RequestContext,
    req: JoinGroupRequest,
) -> Result<Response, ConnectionError> {
    let v = ctx.header.api_version;
    let group = req.group_id.0.to_string();
    // v0 has no rebalance timeout: Kafka uses the session timeout for both.
    let rebalance_ms = if v >= 1 {
        req.rebalance_timeout_ms
    } else {
        req.session_timeout_ms
    };
    let jr = JoinRequest {
        member_id: req.member_id.to_string(),
        instance_id: req.group_instance_id.as_ref().map(|s| s.to_string()),
        client_id: ctx.header.client_id.clone().unwrap_or_default(),
        client_host: ctx.client_host(),
        session_timeout_ms: req.session_timeout_ms,
        rebalance_timeout: Duration::from_millis(rebalance_ms.max(0) as u64),
        protocol_type: req.protocol_type.to_string(),
        protocols: req
            .protocols
            .iter()
            .map(|p| (p.name.to_string(), p.metadata.clone()))
            .collect(),
        require_known_member: v >= 4,
        supports_skip_assignment: v >= 9,
    };
    let member_id = jr.member_id.clone();
    let out = if !ctx.allowed(Operation::Read, ResourceType::Group, &group) {
        JoinResponse::failed(KelpError::GroupAuthorizationFailed, member_id)
    } else {
        match ctx.shard.group_call(GroupRequest::Join(group, jr)).await {
            GroupReply::Join(r) => r,
            _ => JoinResponse::failed(KelpError::CoordinatorNotAvailable, member_id),
        }
    };
    let mut resp = JoinGroupResponse::default();
    resp.error_code = out.error.as_ref().map_or(code::NONE, KelpError::code);
    resp.generation_id = out.generation_id;
    resp.protocol_type = out.protocol_type.map(sb);
    // Before v7 the protocol name is not nullable.
    resp.protocol_name = Some(sb(out.protocol_name.unwrap_or_default()));
    if v >= 7 && out.error.is_some() {
        resp.protocol_name = None;
    }
    resp.leader = sb(out.leader);
    resp.skip_assignment = out.skip_assignment;
    resp.member_id = sb(out.member_id);
    resp.members = out
        .members
        .into_iter()
        .map(|m| {
            JoinGroupResponseMember::default()
                .with_member_id(sb(m.member_id))
                .with_group_instance_id(m.instance_id.map(sb))
                .with_metadata(m.metadata)
        })
        .collect();
    encoded(Response::encode(&ctx.header, &resp))
}
