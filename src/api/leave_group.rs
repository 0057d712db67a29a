//! LeaveGroup (key 13, v0-v5): members leave (v3+: several at once, by instance id too) and
//! the rest of the group rebalances.

use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{LeaveGroupRequest, LeaveGroupResponse};

use super::{code_of, encoded, sb, RequestContext};
use crate::auth::acl::{Operation, ResourceType};
use crate::error::{code, ConnectionError, KelpError};
use crate::group::messages::LeavingMember;
use crate::group::{GroupReply, GroupRequest};
use crate::protocol::Response;

/// Handles a LeaveGroup request.
pub async fn handle(
    ctx: &RequestContext,
    req: LeaveGroupRequest,
) -> Result<Response, ConnectionError> {
    let batched = ctx.header.api_version >= 3;
    let leaving: Vec<LeavingMember> = if batched {
        req.members
            .iter()
            .map(|m| LeavingMember {
                member_id: m.member_id.to_string(),
                instance_id: m.group_instance_id.as_ref().map(|s| s.to_string()),
            })
            .collect()
    } else {
        vec![LeavingMember {
            member_id: req.member_id.to_string(),
            instance_id: None,
        }]
    };
    let group = req.group_id.0.to_string();
    let out = if !ctx.allowed(Operation::Read, ResourceType::Group, &group) {
        Err(KelpError::GroupAuthorizationFailed)
    } else {
        match ctx
            .shard
            .group_call(GroupRequest::Leave(group, leaving.clone()))
            .await
        {
            GroupReply::Leave(r) => r,
            _ => Err(KelpError::CoordinatorNotAvailable),
        }
    };
    let mut resp = LeaveGroupResponse::default();
    match out {
        Err(e) => resp.error_code = e.code(),
        Ok(results) if batched => {
            resp.error_code = code::NONE;
            resp.members = leaving
                .into_iter()
                .zip(results)
                .map(|(l, r)| {
                    MemberResponse::default()
                        .with_member_id(sb(l.member_id))
                        .with_group_instance_id(l.instance_id.map(sb))
                        .with_error_code(code_of(&r))
                })
                .collect();
        }
        Ok(results) => {
            resp.error_code = results.first().map_or(code::NONE, code_of);
        }
    }
    encoded(Response::encode(&ctx.header, &resp))
}
