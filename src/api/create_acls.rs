//! CreateAcls (key 30, v1-v3): add ACL bindings, durably (every node over the same storage
//! gets them). Needs ALTER on the cluster; SECURITY_DISABLED without `--authorizer acl`; a
//! binding Kafka would refuse (unknown codes, ANY or MATCH, a principal not TYPE:NAME, a
//! cluster resource not named kafka-cluster) is INVALID_REQUEST, the others are created.

use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::{CreateAclsRequest, CreateAclsResponse};

use super::{encoded, sb, RequestContext};
use crate::auth::acl::{AclBinding, Operation, PatternType, Permission, ResourceType};
use crate::error::{ConnectionError, KelpError};
use crate::protocol::Response;

fn binding(
    c: &kafka_protocol::messages::create_acls_request::AclCreation,
) -> Result<AclBinding, KelpError> {
    let bad = |what: &str| KelpError::InvalidRequest(format!("invalid {what}"));
    let b = AclBinding {
        resource_type: ResourceType::from_code(c.resource_type)
            .ok_or_else(|| bad("resource type"))?,
        resource_name: c.resource_name.to_string(),
        pattern: PatternType::from_code(c.resource_pattern_type)
            .ok_or_else(|| bad("pattern type"))?,
        principal: c.principal.to_string(),
        host: c.host.to_string(),
        operation: Operation::from_code(c.operation).ok_or_else(|| bad("operation"))?,
        permission: Permission::from_code(c.permission_type).ok_or_else(|| bad("permission"))?,
    };
    match b.invalid() {
        Some(why) => Err(KelpError::InvalidRequest(why)),
        None => Ok(b),
    }
}

/// Handles a CreateAcls request.
pub async fn handle(
    ctx: &RequestContext,
    req: CreateAclsRequest,
) -> Result<Response, ConnectionError> {
    let gate = ctx.acl_admin(Operation::Alter);
    let mut resp = CreateAclsResponse::default();
    for c in &req.creations {
        let outcome = match &gate {
            Err(e) => Err(e.clone()),
            Ok(()) => match binding(c) {
                Ok(b) => ctx
                    .shard
                    .add_acls(std::slice::from_ref(&b))
                    .await
                    .map(|()| b),
                Err(e) => Err(e),
            },
        };
        let mut r = AclCreationResult::default();
        match outcome {
            Ok(b) => tracing::info!(principal = %ctx.session.principal(), acl = ?b, "ACL created"),
            Err(e) => {
                r.error_code = e.code();
                r.error_message = e.message().map(sb);
            }
        }
        resp.results.push(r);
    }
    encoded(Response::encode(&ctx.header, &resp))
}
