//! DescribeAcls (key 29, v1-v3): the ACL bindings passing a filter, grouped by resource.
//! Needs DESCRIBE on the cluster; SECURITY_DISABLED without `--authorizer acl`.

use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{DescribeAclsRequest, DescribeAclsResponse};

use super::{encoded, sb, RequestContext};
use crate::auth::acl::{AclFilter, Acls, Operation};
use crate::error::{ConnectionError, KelpError};
use crate::protocol::Response;

/// Handles a DescribeAcls request.
pub fn handle(ctx: &RequestContext, req: DescribeAclsRequest) -> Result<Response, ConnectionError> {
    let mut resp = DescribeAclsResponse::default();
    let filter = AclFilter::from_wire(
        req.resource_type_filter,
        req.resource_name_filter.as_ref().map(|s| s.as_str()),
        req.pattern_type_filter,
        req.principal_filter.as_ref().map(|s| s.as_str()),
        req.host_filter.as_ref().map(|s| s.as_str()),
        req.operation,
        req.permission_type,
    );
    let outcome = ctx.acl_admin(Operation::Describe).and_then(|()| {
        filter.ok_or_else(|| KelpError::InvalidRequest("unknown filter code".into()))
    });
    match outcome {
        Ok(filter) => {
            let found = ctx.shard.cluster.acls.matching(&filter);
            resp.resources = Acls::by_resource(found)
                .into_iter()
                .map(|((t, name, pattern), bindings)| {
                    DescribeAclsResource::default()
                        .with_resource_type(t.code())
                        .with_resource_name(sb(name))
                        .with_pattern_type(pattern.code())
                        .with_acls(
                            bindings
                                .into_iter()
                                .map(|b| {
                                    AclDescription::default()
                                        .with_principal(sb(b.principal))
                                        .with_host(sb(b.host))
                                        .with_operation(b.operation.code())
                                        .with_permission_type(b.permission.code())
                                })
                                .collect(),
                        )
                })
                .collect();
        }
        Err(e) => {
            resp.error_code = e.code();
            resp.error_message = e.message().map(sb);
        }
    }
    encoded(Response::encode(&ctx.header, &resp))
}
