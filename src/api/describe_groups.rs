//! DescribeGroups (key 15, v0-v5): state, protocol and members of each group, asked of each
//! group's coordinator shard.

use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{DescribeGroupsRequest, DescribeGroupsResponse};

use super::{encoded, sb, RequestContext};
use crate::auth::acl::{Operation, ResourceType};
use crate::error::{code, ConnectionError, KelpError};
use crate::group::{GroupReply, GroupRequest};
use crate::protocol::Response;

/// Handles a DescribeGroups request.
pub async fn handle(
    ctx: &RequestContext,
    req: DescribeGroupsRequest,
) -> Result<Response, ConnectionError> {
    let mut groups = Vec::with_capacity(req.groups.len());
    for gid in req.groups {
        let name = gid.0.to_string();
        let mut d = DescribedGroup::default().with_group_id(gid);
        d.authorized_operations = ctx.operations_if(
            req.include_authorized_operations,
            ResourceType::Group,
            &name,
        );
        let out = if !ctx.allowed(Operation::Describe, ResourceType::Group, &name) {
            Err(KelpError::GroupAuthorizationFailed)
        } else {
            match ctx.shard.group_call(GroupRequest::Describe(name)).await {
                GroupReply::Describe(r) => r,
                _ => Err(KelpError::CoordinatorNotAvailable),
            }
        };
        match out {
            Ok(desc) => {
                d.error_code = code::NONE;
                d.group_state = sb(desc.state.as_str());
                d.protocol_type = sb(desc.protocol_type);
                d.protocol_data = sb(desc.protocol);
                d.members = desc
                    .members
                    .into_iter()
                    .map(|m| {
                        let mut dm = DescribedGroupMember::default();
                        dm.member_id = sb(m.member_id);
                        dm.group_instance_id = m.instance_id.map(sb);
                        dm.client_id = sb(m.client_id);
                        dm.client_host = sb(m.client_host);
                        dm.member_metadata = m.metadata;
                        dm.member_assignment = m.assignment;
                        dm
                    })
                    .collect();
            }
            Err(e) => {
                d.error_code = e.code();
                d.group_state = sb("Dead");
            }
        }
        groups.push(d);
    }
    let resp = DescribeGroupsResponse::default().with_groups(groups);
    encoded(Response::encode(&ctx.header, &resp))
}
