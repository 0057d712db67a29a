//! DeleteAcls (key 31, v1-v3): remove every ACL binding passing each filter, durably, and
//! list what each filter removed. Needs ALTER on the cluster; SECURITY_DISABLED without
//! `--authorizer acl`; a filter with unknown codes is INVALID_REQUEST.

use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::{DeleteAclsRequest, DeleteAclsResponse};

use super::{encoded, sb, RequestContext};
use crate::auth::acl::{AclFilter, Operation};
use crate::error::{ConnectionError, KelpError};
use crate::protocol::Response;

/// Handles a DeleteAcls request.
pub async fn handle(
    ctx: &RequestContext,
    req: DeleteAclsRequest,
) -> Result<Response, ConnectionError> {
    let gate = ctx.acl_admin(Operation::Alter);
    let mut resp = DeleteAclsResponse::default();
    for f in &req.filters {
        let filter = AclFilter::from_wire(
            f.resource_type_filter,
            f.resource_name_filter.as_ref().map(|s| s.as_str()),
            f.pattern_type_filter,
            f.principal_filter.as_ref().map(|s| s.as_str()),
            f.host_filter.as_ref().map(|s| s.as_str()),
            f.operation,
            f.permission_type,
        );
        let outcome = match (&gate, filter) {
            (Err(e), _) => Err(e.clone()),
            (Ok(()), None) => Err(KelpError::InvalidRequest("unknown filter code".into())),
            (Ok(()), Some(filter)) => {
                let found = ctx.shard.cluster.acls.matching(&filter);
                ctx.shard.remove_acls(&found).await.map(|()| found)
            }
        };
        let mut r = DeleteAclsFilterResult::default();
        match outcome {
            Ok(removed) => {
                if !removed.is_empty() {
                    tracing::info!(principal = %ctx.session.principal(), count = removed.len(), "ACLs deleted");
                }
                r.matching_acls = removed
                    .into_iter()
                    .map(|b| {
                        DeleteAclsMatchingAcl::default()
                            .with_resource_type(b.resource_type.code())
                            .with_resource_name(sb(b.resource_name))
                            .with_pattern_type(b.pattern.code())
                            .with_principal(sb(b.principal))
                            .with_host(sb(b.host))
                            .with_operation(b.operation.code())
                            .with_permission_type(b.permission.code())
                    })
                    .collect();
            }
            Err(e) => {
                r.error_code = e.code();
                r.error_message = e.message().map(sb);
            }
        }
        resp.filter_results.push(r);
    }
    encoded(Response::encode(&ctx.header, &resp))
}
