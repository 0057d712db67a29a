//! IncrementalAlterConfigs (key 44, v0-v1): SET / DELETE / APPEND / SUBTRACT on topic config
//! overrides, validated like CreateTopics configs; retention and roll settings read them live.
//! Broker configs are static (command-line flags): Kelp has no dynamic broker config, so
//! deleting one (as `kafka-reassign-partitions --verify` clears replication throttles)
//! changes nothing and succeeds, and setting one is refused. Group configs (resource type 32,
//! `cluster::group_config`) are SET and DELETEd for any group id, existing or not, as Kafka
//! does (none is a list, so APPEND / SUBTRACT are INVALID_CONFIG); the group's whole
//! resulting set is checked against the broker's limits.

use std::collections::BTreeMap;

use kafka_protocol::messages::incremental_alter_configs_request::AlterConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_response::{
    AlterConfigsResourceResponse, IncrementalAlterConfigsResponse,
};
use kafka_protocol::messages::IncrementalAlterConfigsRequest;

use super::{encoded, outcome_fields, RequestContext};
use crate::auth::acl::{Operation, ResourceType};
use crate::cluster::topic_config;
use crate::error::{ConnectionError, KelpError};
use crate::protocol::Response;

/// ConfigResource type of a topic.
pub(super) const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;
/// ConfigResource type of a group.
pub(super) const RESOURCE_GROUP: i8 = 32;
const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;
const OP_APPEND: i8 = 2;
const OP_SUBTRACT: i8 = 3;

/// The overrides after applying `res`'s operations to `current`.
fn apply(
    current: &BTreeMap<String, String>,
    res: &AlterConfigsResource,
) -> Result<BTreeMap<String, String>, KelpError> {
    let mut next = current.clone();
    for c in &res.configs {
        let name = c.name.to_string();
        let def = topic_config::lookup(&name)
            .ok_or_else(|| KelpError::InvalidConfig(format!("unknown topic config '{name}'")))?;
        let value = c.value.as_ref().map(|v| v.to_string());
        let is_list = def.kind == topic_config::ConfigType::List;
        match c.config_operation {
            OP_SET => {
                let v = value
                    .ok_or_else(|| KelpError::InvalidConfig(format!("null value for '{name}'")))?;
                topic_config::validate(&name, &v)?;
                next.insert(name, v);
            }
            OP_DELETE => {
                next.remove(&name);
            }
            OP_APPEND | OP_SUBTRACT if is_list => {
                let base = next.get(&name).map(String::as_str).unwrap_or(def.default);
                let mut items: Vec<String> = base
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect();
                for v in value
                    .iter()
                    .flat_map(|v| v.split(','))
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                {
                    if c.config_operation == OP_APPEND {
                        if !items.iter().any(|i| i == v) {
                            items.push(v.to_string());
                        }
                    } else {
                        items.retain(|i| i != v);
                    }
                }
                next.insert(name, items.join(","));
            }
            OP_APPEND | OP_SUBTRACT => {
                return Err(KelpError::InvalidConfig(format!(
                    "'{name}' is not a list config"
                )))
            }
            other => {
                return Err(KelpError::InvalidRequest(format!(
                    "unknown config operation {other}"
                )))
            }
        }
    }
    Ok(next)
}

/// A group's overrides after applying `res`'s operations to `current`; the values are
/// checked afterwards, all together ([`crate::cluster::group_config::Limits::validate`]).
fn apply_group(
    current: &BTreeMap<String, String>,
    res: &AlterConfigsResource,
) -> Result<BTreeMap<String, String>, KelpError> {
    let mut next = current.clone();
    for c in &res.configs {
        let name = c.name.to_string();
        match (c.config_operation, &c.value) {
            (OP_SET, Some(v)) => {
                next.insert(name, v.to_string());
            }
            // Kafka's broker refuses these before the controller sees the request.
            (OP_SET, None) => {
                return Err(KelpError::InvalidRequest(format!(
                    "Null value not supported for : {name}"
                )))
            }
            (OP_DELETE, _) => {
                next.remove(&name);
            }
            // Kafka's words: no group config is a list (nor is an unknown one).
            (OP_APPEND, _) => {
                return Err(KelpError::InvalidConfig(format!(
                    "Can't APPEND to key {name} because its type is not LIST."
                )))
            }
            (OP_SUBTRACT, _) => {
                return Err(KelpError::InvalidConfig(format!(
                    "Can't SUBTRACT to key {name} because its type is not LIST."
                )))
            }
            (other, _) => {
                return Err(KelpError::InvalidRequest(format!(
                    "unknown config operation {other}"
                )))
            }
        }
    }
    Ok(next)
}

/// A group's overrides become `change(current)`: checked (a group id, Kafka's limits on the
/// whole set), stored by the engine when it keeps them, then published.
async fn alter_group(
    ctx: &RequestContext,
    group: &str,
    validate_only: bool,
    change: impl FnOnce(&BTreeMap<String, String>) -> Result<BTreeMap<String, String>, KelpError>,
) -> Result<(), KelpError> {
    let cluster = &ctx.shard.cluster;
    let next = change(&cluster.group_configs(group))?;
    if group.is_empty() {
        return Err(KelpError::InvalidRequest(
            "Default group resources are not allowed.".into(),
        ));
    }
    cluster.group_limits.validate(&next)?;
    if validate_only {
        return Ok(());
    }
    ctx.shard.engine.set_group_configs(group, &next).await?;
    cluster.set_group_configs(group, next)
}

/// One resource of IncrementalAlterConfigs or AlterConfigs: the authorization and resource
/// checks both share, then the topic's (or group's) overrides become `change(current)`
/// (stored unless `validate_only`). On a broker, `broker_sets` names the configs the request
/// would set (not delete): none is a success that changes nothing, any is refused.
pub(super) async fn alter_resource(
    ctx: &RequestContext,
    resource_type: i8,
    name: &str,
    validate_only: bool,
    broker_sets: &[String],
    change: impl FnOnce(&BTreeMap<String, String>) -> Result<BTreeMap<String, String>, KelpError>,
) -> Result<(), KelpError> {
    match resource_type {
        RESOURCE_TOPIC if !ctx.allowed(Operation::AlterConfigs, ResourceType::Topic, name) => {
            return Err(KelpError::TopicAuthorizationFailed)
        }
        RESOURCE_GROUP if !ctx.allowed(Operation::AlterConfigs, ResourceType::Group, name) => {
            return Err(KelpError::GroupAuthorizationFailed)
        }
        RESOURCE_TOPIC | RESOURCE_GROUP => {}
        _ if !ctx.cluster_allowed(Operation::AlterConfigs) => {
            return Err(KelpError::ClusterAuthorizationFailed)
        }
        _ => {}
    }
    if resource_type == RESOURCE_GROUP {
        return alter_group(ctx, name, validate_only, change).await;
    }
    if resource_type == RESOURCE_BROKER {
        super::describe_configs::check_broker_name(ctx, name)?;
        if broker_sets.is_empty() {
            return Ok(());
        }
        return Err(KelpError::InvalidRequest(format!(
            "Cannot update these configs dynamically: {}; Kelp's broker configs are its \
             command-line flags",
            broker_sets.join(", ")
        )));
    }
    if resource_type != RESOURCE_TOPIC {
        return Err(KelpError::InvalidRequest(
            "only topic, broker and group configs can be altered".into(),
        ));
    }
    let meta = ctx
        .shard
        .cluster
        .topic(name)
        .ok_or(KelpError::UnknownTopicOrPartition)?;
    let next = change(&meta.configs)?;
    if validate_only {
        return Ok(());
    }
    ctx.shard.set_topic_configs(name, next).await
}

/// Handles an IncrementalAlterConfigs request.
pub async fn handle(
    ctx: &RequestContext,
    req: IncrementalAlterConfigsRequest,
) -> Result<Response, ConnectionError> {
    let mut resp = IncrementalAlterConfigsResponse::default();
    for res in &req.resources {
        let name = res.resource_name.to_string();
        let sets: Vec<String> = res
            .configs
            .iter()
            .filter(|c| c.config_operation != OP_DELETE)
            .map(|c| c.name.to_string())
            .collect();
        let outcome = alter_resource(
            ctx,
            res.resource_type,
            &name,
            req.validate_only,
            &sets,
            |current| {
                if res.resource_type == RESOURCE_GROUP {
                    apply_group(current, res)
                } else {
                    apply(current, res)
                }
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
