//! AlterConfigs (key 33, v0-v2), the form before IncrementalAlterConfigs that older admin
//! clients (kafka-python, Sarama) still send: a topic's overrides become exactly the configs
//! given, every one validated as CreateTopics validates it; configs left out go back to
//! their defaults. On a broker (whose configs are command-line flags, none dynamic) an empty
//! set changes nothing and succeeds; any config given is refused. A group's overrides
//! (resource type 32; Kafka 4's controller takes them here too) become exactly those given,
//! checked together as IncrementalAlterConfigs checks them.

use std::collections::BTreeMap;

use kafka_protocol::messages::alter_configs_response::{
    AlterConfigsResourceResponse, AlterConfigsResponse,
};
use kafka_protocol::messages::AlterConfigsRequest;

use super::incremental_alter_configs::{alter_resource, RESOURCE_TOPIC};
use super::{encoded, outcome_fields, RequestContext};
use crate::cluster::topic_config;
use crate::error::{ConnectionError, KelpError};
use crate::protocol::Response;

/// Handles an AlterConfigs request.
pub async fn handle(
    ctx: &RequestContext,
    req: AlterConfigsRequest,
) -> Result<Response, ConnectionError> {
    let mut resp = AlterConfigsResponse::default();
    for res in &req.resources {
        let name = res.resource_name.to_string();
        let sets: Vec<String> = res.configs.iter().map(|c| c.name.to_string()).collect();
        let outcome = alter_resource(
            ctx,
            res.resource_type,
            &name,
            req.validate_only,
            &sets,
            |_| {
                let mut next = BTreeMap::new();
                for c in &res.configs {
                    let key = c.name.to_string();
                    // Kafka: the legacy form has no way to delete one config; null is refused.
                    let value = c.value.as_ref().ok_or_else(|| {
                        KelpError::InvalidRequest(format!("Null value not supported for : {key}"))
                    })?;
                    if res.resource_type == RESOURCE_TOPIC {
                        topic_config::validate(&key, value)?;
                    }
                    next.insert(key, value.to_string());
                }
                Ok(next)
            },
        )
        .await;
        let mut r = AlterConfigsResourceResponse::default();
        r.resource_type = res.resource_type;
        r.resource_name = res.resource_name.clone();
        (r.error_code, r.error_message) = outcome_fields("alter configs", &name, outcome);
        resp.responses.push(r);
    }
    encoded(Response::encode(&ctx.header, &resp))
}
