//! DescribeClientQuotas (key 48, v0-v1): Kelp enforces no client quotas and none can be set
//! (no AlterClientQuotas), so every well-formed filter matches nothing. Answered because
//! admin tools ask it alongside SCRAM credentials (`kafka-configs --describe --entity-type
//! users`); a filter on an entity type Kafka does not know is INVALID_REQUEST, as in Kafka.

use kafka_protocol::messages::{DescribeClientQuotasRequest, DescribeClientQuotasResponse};

use super::{encoded, sb, RequestContext};
use crate::auth::acl::Operation;
use crate::error::{ConnectionError, KelpError};
use crate::protocol::Response;

/// Entity types Kafka's quotas are set on.
const ENTITY_TYPES: [&str; 3] = ["user", "client-id", "ip"];

/// Handles a DescribeClientQuotas request.
pub fn handle(
    ctx: &RequestContext,
    req: DescribeClientQuotasRequest,
) -> Result<Response, ConnectionError> {
    let mut resp = DescribeClientQuotasResponse::default();
    let bad = req.components.iter().find(|c| {
        !ENTITY_TYPES.contains(&c.entity_type.as_str()) || !(0..=2).contains(&c.match_type)
    });
    if !ctx.cluster_allowed(Operation::DescribeConfigs) {
        let e = KelpError::ClusterAuthorizationFailed;
        resp.error_code = e.code();
        resp.error_message = e.message().map(sb);
        return encoded(Response::encode(&ctx.header, &resp));
    }
    match bad {
        Some(c) => {
            let e = KelpError::InvalidRequest(format!(
                "unknown quota entity type '{}' or match type {}",
                c.entity_type.as_str(),
                c.match_type
            ));
            resp.error_code = e.code();
            resp.error_message = e.message().map(sb);
        }
        None => resp.entries = Some(Vec::new()),
    }
    encoded(Response::encode(&ctx.header, &resp))
}
