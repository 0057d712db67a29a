//! ListPartitionReassignments (key 46, v0), as `kafka-reassign-partitions --list` sends
//! it: a Kelp partition has one replica and is never being reassigned (leadership moves
//! between Kelp nodes by placement, with no replica to copy), so the answer lists none.
//! DESCRIBE on the cluster.

use kafka_protocol::messages::{
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
};

use super::{encoded, sb, RequestContext};
use crate::auth::acl::Operation;
use crate::error::{code, ConnectionError, KelpError};
use crate::protocol::Response;

/// Handles a ListPartitionReassignments request.
pub fn handle(
    ctx: &RequestContext,
    _req: ListPartitionReassignmentsRequest,
) -> Result<Response, ConnectionError> {
    let mut resp = ListPartitionReassignmentsResponse::default();
    if ctx.cluster_allowed(Operation::Describe) {
        resp.error_code = code::NONE;
    } else {
        let e = KelpError::ClusterAuthorizationFailed;
        resp.error_code = e.code();
        resp.error_message = e.message().map(sb);
    }
    encoded(Response::encode(&ctx.header, &resp))
}
