//! ListGroups (key 16, v0-v5): the groups of every shard, filtered by state (v4+) and type
//! (v5+: "classic" or "consumer", the KIP-848 groups).

use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{GroupId, ListGroupsRequest, ListGroupsResponse};

use super::{encoded, sb, RequestContext};
use crate::auth::acl::{Operation, ResourceType};
use crate::error::{code, ConnectionError};
use crate::group::{GroupReply, GroupRequest};
use crate::protocol::Response;

/// Handles a ListGroups request.
pub async fn handle(
    ctx: &RequestContext,
    req: ListGroupsRequest,
) -> Result<Response, ConnectionError> {
    let mut resp = ListGroupsResponse::default();
    resp.error_code = code::NONE;
    // Kafka lists every group to a principal that may describe the cluster, else only the
    // groups it may describe.
    let all_visible = ctx.cluster_allowed(Operation::Describe);
    for shard in 0..ctx.shard.count {
        let listed = match ctx.shard.group_call_on(shard, GroupRequest::List).await {
            GroupReply::List(l) => l,
            _ => {
                resp.error_code = code::COORDINATOR_NOT_AVAILABLE;
                continue;
            }
        };
        for g in listed {
            let state_ok = req.states_filter.is_empty()
                || req
                    .states_filter
                    .iter()
                    .any(|s| s.as_str().eq_ignore_ascii_case(g.state));
            let type_ok = req.types_filter.is_empty()
                || req
                    .types_filter
                    .iter()
                    .any(|t| t.as_str().eq_ignore_ascii_case(g.group_type));
            if !(state_ok && type_ok) {
                continue;
            }
            if !all_visible && !ctx.allowed(Operation::Describe, ResourceType::Group, &g.group_id) {
                continue;
            }
            let mut lg = ListedGroup::default();
            lg.group_id = GroupId(sb(g.group_id));
            lg.protocol_type = sb(g.protocol_type);
            lg.group_state = sb(g.state);
            lg.group_type = sb(g.group_type);
            resp.groups.push(lg);
        }
    }
    resp.groups.sort_by(|a, b| a.group_id.0.cmp(&b.group_id.0));
    encoded(Response::encode(&ctx.header, &resp))
}
