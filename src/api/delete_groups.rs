//! DeleteGroups (key 42, v0-v2): deletes empty groups and their committed offsets.

use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse};

use super::{code_of, encoded, RequestContext};
use crate::auth::acl::{Operation, ResourceType};
use crate::error::{ConnectionError, KelpError};
use crate::group::{GroupReply, GroupRequest};
use crate::protocol::Response;

/// Handles a DeleteGroups request.
pub async fn handle(
    ctx: &RequestContext,
    req: DeleteGroupsRequest,
) -> Result<Response, ConnectionError> {
    let mut results = Vec::with_capacity(req.groups_names.len());
    for gid in req.groups_names {
        let out = if !ctx.allowed(Operation::Delete, ResourceType::Group, gid.0.as_str()) {
            Err(KelpError::GroupAuthorizationFailed)
        } else {
            match ctx
                .shard
                .group_call(GroupRequest::Delete(gid.0.to_string()))
                .await
            {
                GroupReply::Delete(r) => r,
                _ => Err(KelpError::CoordinatorNotAvailable),
            }
        };
        results.push(
            DeletableGroupResult::default()
                .with_group_id(gid)
                .with_error_code(code_of(&out)),
        );
    }
    let resp = DeleteGroupsResponse::default().with_results(results);
    encoded(Response::encode(&ctx.header, &resp))
}
