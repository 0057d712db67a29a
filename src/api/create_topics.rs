//! CreateTopics (key 19, v2-v7).

use std::collections::BTreeMap;

use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult, CreateTopicsResponse,
};
use kafka_protocol::messages::CreateTopicsRequest;

use super::{encoded, sb, RequestContext};
use crate::auth::acl::{Operation, ResourceType};
use crate::cluster::nodes::Node;
use crate::cluster::topic_config::TOPIC_CONFIGS;
use crate::cluster::TopicMeta;
use crate::error::{code, ConnectionError, KelpError};
use crate::protocol::Response;

/// Partition count of a request, after checking manual assignments name only this broker.
fn partition_count(
    t: &kafka_protocol::messages::create_topics_request::CreatableTopic,
    nodes: &[Node],
) -> Result<i32, KelpError> {
    if t.assignments.is_empty() {
        return Ok(t.num_partitions);
    }
    if t.num_partitions != -1 || t.replication_factor != -1 {
        return Err(KelpError::InvalidRequest(
            "both manual assignments and partition count or replication factor given".into(),
        ));
    }
    for (i, a) in t.assignments.iter().enumerate() {
        if a.partition_index != i as i32 {
            return Err(KelpError::InvalidRequest(
                "assignments must cover 0..n in order".into(),
            ));
        }
        if a.broker_ids.len() != 1 || !nodes.iter().any(|n| n.id == a.broker_ids[0].0) {
            return Err(KelpError::InvalidReplicationFactor(
                a.broker_ids.len() as i16
            ));
        }
    }
    Ok(t.assignments.len() as i32)
}

fn described_configs(meta: &TopicMeta) -> Vec<CreatableTopicConfigs> {
    TOPIC_CONFIGS
        .iter()
        .map(|d| {
            let set = meta.configs.get(d.name);
            let mut c = CreatableTopicConfigs::default();
            c.name = sb(d.name);
            c.value = Some(sb(set.map_or(d.default, String::as_str)));
            c.read_only = false;
            // 1 = DYNAMIC_TOPIC_CONFIG, 5 = DEFAULT_CONFIG
            c.config_source = if set.is_some() { 1 } else { 5 };
            c
        })
        .collect()
}

/// Handles a CreateTopics request.
pub async fn handle(
    ctx: &RequestContext,
    req: CreateTopicsRequest,
) -> Result<Response, ConnectionError> {
    let cluster = &ctx.shard.cluster;
    let mut resp = CreateTopicsResponse::default();
    for t in req.topics {
        let name = t.name.0.to_string();
        let configs: BTreeMap<String, String> = t
            .configs
            .iter()
            .filter_map(|c| {
                c.value
                    .as_ref()
                    .map(|v| (c.name.to_string(), v.to_string()))
            })
            .collect();
        let rf = if t.assignments.is_empty() {
            t.replication_factor
        } else {
            -1
        };
        let created = match partition_count(&t, &cluster.brokers()) {
            _ if !ctx.may_create_topic(&name) => Err(KelpError::TopicAuthorizationFailed),
            Ok(n) => {
                ctx.shard
                    .create_topic(&name, n, rf, configs, req.validate_only)
                    .await
            }
            Err(e) => Err(e),
        };
        let mut r = CreatableTopicResult::default().with_name(t.name);
        match created {
            Ok(meta) => {
                r.error_code = code::NONE;
                r.topic_id = meta.id;
                r.num_partitions = meta.partitions;
                r.replication_factor = 1;
                // The created topic's configs only to a principal that may read them.
                if ctx.allowed(Operation::DescribeConfigs, ResourceType::Topic, &meta.name) {
                    r.configs = Some(described_configs(&meta));
                }
            }
            Err(e) => {
                tracing::debug!(topic = %name, error = %e, "create topic refused");
                r.error_code = e.code();
                r.error_message = Some(sb(e.to_string()));
                r.num_partitions = -1;
                r.replication_factor = -1;
            }
        }
        resp.topics.push(r);
    }
    encoded(Response::encode(&ctx.header, &resp))
}
